"""The report's data and tables: the calibration table's rows, the estimator x task grids and their exports
(``paper_table``), the (model, task) analysis read from small run folders (``analyze``), the appendix
(``build``) and the notices said before a report (``input_notices``), each pinned whole on hand-built
inputs (fast: no model; the whole report built from runs is tests/analysis/test_report.py)."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import capcal_metrics as cm
from analysis.rendering import markdown_table
from analysis.report import build
from analysis.report.analyze import (
    ReportOptions,
    _activation_joins,
    analyze_runs,
    load_report_data,
    short_file,
)
from analysis.report.build import _relative, overview_section
from analysis.report.calibration_table import (
    calibration_table,
    first_response_correctness,
    interval_label,
    intervals_note,
    sampling_of,
)
from analysis.report.input_notices import NothingToScoreError, k_notices, report_notices
from analysis.report.paper_table import (
    BLANK_NOTE,
    ROW_COLUMNS,
    _latex_grid,
    format_table,
    grid_section,
    metric_grid,
    metric_rows,
    paper_table,
    sampling_note,
)
from analysis.runs.versions import run_versions
from capcal_tasks.relations import task_relations

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the hostile corpus' log writers
from hostile.logs import DATE, LATER, confidence_line, sampling_line, write_run  # noqa: E402

MODEL = "toy-model"
RESULTS = f"{MODEL}/results_{DATE}.json"  # where a task of a run of MODEL is declared, as the report names it
CALIBRATION = {"capcal_role": "calibration"}
ADAPTIVE = "adaptive (looks 4, 8, rule unanimity)"
COLUMNS = [
    "estimator", "metric", "estimate", "low", "high", "questions", "questions_missing", "sampling",
    "interval_method", "interval_note",
]  # fmt: skip


# ------------------------------------------------------------------ run folders written for the tests


def _results(task: str, metadata: dict, model: str = MODEL) -> dict:
    return {"results": {task: {}}, "configs": {task: {"metadata": metadata}}, "model_name": model}


def _evaluation(*calibration: str) -> dict:
    return {"capcal_role": "evaluation", "capcal_calibration_tasks": list(calibration)}


def _sampling_run(
    root: Path, task: str, ids: list[str], metadata: dict, model: str = MODEL, k: int = 4
) -> None:
    """A sampling run of ``task`` asking the questions ``ids`` with k responses (the first i % (k + 1) of
    question i correct)."""
    lines = [
        sampling_line(i, ["4"] * (i % (k + 1)) + ["5"] * (k - i % (k + 1)), question_id=question_id)
        for i, question_id in enumerate(ids)
    ]
    metadata = {"capcal_task": "sampling", **metadata}
    write_run(root, lines, task=task, folder=f"{model}_{task}", results=_results(task, metadata, model))


def _ptrue_run(root: Path, task: str, target: str, ids: list[str], model: str = MODEL) -> None:
    """A P(True) run of ``model`` scoring the questions ``ids`` of ``target`` (declared)."""
    metadata = {"capcal_task": "ptrue", "capcal_role": "confidence", "capcal_target_task": target}
    chances = [0.1 + 0.8 * i / len(ids) for i in range(len(ids))]
    lines = [
        confidence_line(
            i,
            "ptrue",
            doc={"question_id": q},
            p_true=p,
            logprob_yes=float(np.log(p)),
            logprob_no=float(np.log(1 - p)),
        )
        for i, (q, p) in enumerate(zip(ids, chances, strict=True))
    ]
    write_run(root, lines, task=task, folder=f"{model}_{task}", results=_results(task, metadata, model))


def _ids(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


# ------------------------------------------------------------------ the calibration table


def _fixed_k_table() -> pd.DataFrame:
    """Six questions with n = 4 samples, one estimator c with one missing confidence."""
    correctness = [[1, 1, 0, 0], [1, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 0, 1]]
    return pd.DataFrame(
        {
            "correctness": correctness,
            "n": 4,
            "expected_accuracy": [sum(v) / 4 for v in correctness],
            "c": [0.5, 0.3, 0.7, np.nan, 0.9, 0.4],
        }
    )


def test_interval_labels_and_notes_name_the_method_of_each_metric():
    """The jackknife for the debiased ECE, the percentile bootstrap for the others, at the level asked."""
    assert interval_label("capability_ece_debiased") == "95% jackknife interval"
    assert interval_label("soft_auroc") == "95% bootstrap interval"
    assert interval_label("capability_ece", 0.9) == "90% bootstrap interval"
    assert (
        intervals_note(["soft_auroc"], 200)
        == "95% intervals: percentile bootstrap over questions (200 resamples)"
    )
    assert intervals_note(["capability_ece_debiased", "spearman"], 50) == (
        "95% intervals: percentile bootstrap over questions (50 resamples), but estimate +- 1.96 jackknife "
        "SE for capability_ece_debiased"
    )


def test_sampling_of_joins_the_tables_labels_in_order_and_defaults_to_fixed_k():
    assert sampling_of(pd.DataFrame({"n": [4]})) == "fixed k"
    assert sampling_of(pd.DataFrame({"sampling": []})) == "fixed k"
    labels = pd.DataFrame({"sampling": [ADAPTIVE, "fixed k", ADAPTIVE]})
    assert sampling_of(labels) == f"{ADAPTIVE}; fixed k"


def test_first_response_correctness_is_the_first_sample_of_each_question_as_floats():
    target = first_response_correctness(pd.DataFrame({"correctness": [[1, 0, 0], [0, 1], [True]]}))
    assert target.dtype == np.float64 and list(target) == [1.0, 0.0, 1.0]


def test_calibration_table_estimates_are_the_metrics_of_the_questions_with_a_confidence():
    """Every row, every column: each estimate is the metric of capcal_metrics on the five questions with a
    confidence, its interval the bootstrap of those (one draw for all metrics, seed 3) or, for the debiased
    ECE, the jackknife's; the random rows are the expectations under U(0, 1) over all six questions."""
    table = _fixed_k_table()
    rows = calibration_table(table, ["c"], n_resamples=30, seed=3)
    assert list(rows.columns) == COLUMNS
    keep = table["c"].notna().to_numpy()
    c = table.loc[keep, "c"].to_numpy()
    mu = table.loc[keep, "expected_accuracy"].to_numpy()
    n = np.full(5, 4.0)
    z = np.array([1.0, 1.0, 0.0, 1.0, 0.0])  # the first samples of the kept questions
    spec = {
        "capability_ece": (cm.expected_calibration_error, (c, mu)),
        "capability_brier": (cm.brier_score, (c, mu)),
        "corrected_capability_brier": (cm.corrected_capability_brier_score, (c, mu, n)),
        "capability_brier_skill": (cm.corrected_brier_skill_score, (c, mu, n)),
        "soft_auroc": (cm.soft_label_auroc, (c, mu)),
        "spearman": (cm.spearman_correlation, (c, mu)),
        "response_ece": (cm.expected_calibration_error, (c, z)),
        "response_brier": (cm.brier_score, (c, z)),
        "response_auroc": (cm.auroc, (c, z)),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)  # skill and AUROC on some resamples
        boot = cm.bootstrap_cis(spec, n_resamples=30, confidence_level=0.95, seed=3)
    jack = cm.jackknife_ci(cm.debiased_expected_calibration_error, c, mu, confidence_level=0.95)
    boot["capability_ece_debiased"] = cm.BootstrapCI(jack.estimate, jack.low, jack.high)
    order = [
        "capability_ece", "capability_ece_debiased", "capability_brier", "corrected_capability_brier",
        "capability_brier_skill", "soft_auroc", "spearman", "response_ece", "response_brier",
        "response_auroc",
    ]  # fmt: skip
    mu_all = table["expected_accuracy"].to_numpy()
    z_all = np.array([1.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    random = {
        "capability_brier": float(np.mean(1 / 3 - mu_all + mu_all**2)),
        "capability_brier_skill": cm.random_baseline_brier_skill_score(mu_all, np.full(6, 4)),
        "response_brier": float(np.mean(1 / 3 - z_all + z_all**2)),
        "soft_auroc": 0.5,
        "response_auroc": 0.5,
        "spearman": 0.0,
    }
    notes = {
        "capability_ece": "interval does not cover: binned ECE is biased upward (for a nearly calibrated "
        "forecast its 95% bootstrap interval almost never covers the population ECE); compare the debiased "
        "ECE (docs/methods.md)",
        "response_ece": "interval does not cover: binned ECE is biased upward (docs/methods.md, The bias of "
        "binned ECE)",
    }
    expected = [
        {
            "estimator": "c",
            "metric": m,
            "estimate": float(boot[m].estimate),
            "low": float(boot[m].low),
            "high": float(boot[m].high),
            "questions": 5,
            "questions_missing": 1,
            "sampling": "fixed k",
            "interval_method": "jackknife normal"
            if m == "capability_ece_debiased"
            else "bootstrap percentile",
            "interval_note": notes.get(m, ""),
        }
        for m in order
    ] + [
        {
            "estimator": "random (expected)",
            "metric": m,
            "estimate": pytest.approx(value, abs=1e-12),
            "questions": 6,
            "questions_missing": 0,
            "sampling": "fixed k",
            "interval_method": "",
            "interval_note": "",
        }
        for m, value in random.items()
    ]
    records = rows.to_dict("records")
    for record in records[len(order) :]:
        assert np.isnan(record.pop("low")) and np.isnan(record.pop("high"))
    assert records == expected
    assert jack.low != boot["capability_ece"].low  # the two interval methods differ on this table


def test_calibration_table_with_one_sample_per_question_uses_the_uncorrected_forms():
    """n = 1: no corrected Brier; the skill is the plain Brier skill, and so is the random row's."""
    table = pd.DataFrame(
        {
            "correctness": [[1], [0], [1], [0]],
            "n": 1,
            "expected_accuracy": [1.0, 0.0, 1.0, 0.0],
            "c": [0.8, 0.3, 0.6, 0.5],
        }
    )
    rows = calibration_table(table, ["c"], n_resamples=10).set_index(["estimator", "metric"])
    own = list(rows.loc["c"].index)
    assert own == [
        "capability_ece", "capability_ece_debiased", "capability_brier", "capability_brier_skill",
        "soft_auroc", "spearman", "response_ece", "response_brier", "response_auroc",
    ]  # fmt: skip
    c, mu = table["c"].to_numpy(), table["expected_accuracy"].to_numpy()
    assert rows.loc[("c", "capability_brier_skill"), "estimate"] == pytest.approx(cm.brier_skill_score(c, mu))
    assert rows.loc[("random (expected)", "capability_brier_skill"), "estimate"] == pytest.approx(
        cm.random_baseline_brier_skill_score(mu, None)
    )


def test_calibration_table_of_one_question_has_no_interval_and_no_random_skill():
    table = pd.DataFrame({"correctness": [[1, 0]], "n": 2, "expected_accuracy": [0.5], "c": [0.4]})
    rows = calibration_table(table, ["c"], n_resamples=10)
    own = rows[rows["estimator"] == "c"]
    assert len(own) == 10 and own[["estimate", "low", "high"]].isna().all().all()
    assert list(own["questions"]) == [1] * 10
    random = rows[rows["estimator"] == "random (expected)"].set_index("metric")["estimate"]
    assert np.isnan(random["capability_brier_skill"])
    assert random["capability_brier"] == pytest.approx(1 / 3 - 0.5 + 0.25)


def test_calibration_table_of_an_adaptive_run_scores_the_brier_with_its_mu_squared_estimates():
    """An adaptive table: the corrected Brier and the skill are the moment forms (the run's unbiased mu^2),
    the random skill 1 - mean(1/3 - mu_hat + mu^2_hat) / S_hat, and every row says how it was sampled."""
    correctness = [[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 1, 0, 1, 1, 0], [0, 1, 0, 0, 1, 0, 0, 0]]
    mu, mu2 = np.array([1.0, 0.0, 0.6, 0.3]), np.array([1.0, 0.0, 0.35, 0.08])
    table = pd.DataFrame(
        {
            "correctness": correctness,
            "n": [4, 4, 8, 8],
            "expected_accuracy": mu,
            "mu_squared_hat": mu2,
            "sampling": ADAPTIVE,
            "looks": [[4, 8]] * 4,
            "c": [0.9, 0.2, 0.6, 0.4],
        }
    )
    rows = calibration_table(table, ["c"], n_resamples=10)
    assert set(rows["sampling"]) == {ADAPTIVE}
    value = rows.set_index(["estimator", "metric"])["estimate"]
    c = table["c"].to_numpy()
    assert value["c", "corrected_capability_brier"] == pytest.approx(
        cm.capability_brier_from_moments(c, mu, mu2)
    )
    assert value["c", "capability_brier_skill"] == pytest.approx(
        cm.brier_skill_score_from_moments(c, mu, mu2)
    )
    reference = cm.base_rate_variance_from_moments(mu, mu2)
    assert reference > 0
    assert value["random (expected)", "capability_brier_skill"] == pytest.approx(
        1 - np.mean(1 / 3 - mu + mu2) / reference
    )
    flat = table.assign(expected_accuracy=0.5, mu_squared_hat=0.25)  # no spread of mu: no skill
    flat_rows = calibration_table(flat, ["c"], n_resamples=10).set_index(["estimator", "metric"])["estimate"]
    assert np.isnan(flat_rows["random (expected)", "capability_brier_skill"])


# ------------------------------------------------------------------ the estimator x task grids


def _row(
    model: str, task: str, estimator: str, metric: str, values: tuple, sampling: str = "fixed k"
) -> dict:
    estimate, low, high = values
    return {
        "model": model, "task": task, "estimator": estimator, "metric": metric, "estimate": estimate,
        "low": low, "high": high, "interval_method": "bootstrap percentile", "questions": 12,
        "sampling": sampling, "leaky": estimator.startswith("consistency_k"),
        "higher_is_better": metric != "capability_ece_debiased",
    }  # fmt: skip


def _rows() -> pd.DataFrame:
    """One model, tasks t1 (fixed k) and t2 (adaptive); soft_auroc of p_true on both and of the leaky
    consistency on t1 only, the debiased ECE of p_true on t2, and spearman (not a headline metric) on t1."""
    return pd.DataFrame(
        [
            _row("m", "t1", "p_true", "soft_auroc", (0.7, 0.6, 0.8)),
            _row("m", "t1", "consistency_k2", "soft_auroc", (0.65, 0.55, 0.75)),
            _row("m", "t2", "p_true", "soft_auroc", (0.6, 0.5, 0.7), ADAPTIVE),
            _row("m", "t2", "p_true", "capability_ece_debiased", (0.1, 0.05, 0.15), ADAPTIVE),
            _row("m", "t1", "p_true", "spearman", (0.3, 0.1, 0.5)),
        ],
        columns=ROW_COLUMNS,
    )


AUROC_GRID = {
    "estimator": ["p_true", "consistency_k2 (leaky)"],
    "t1": ["0.700 [0.600, 0.800]", "0.650 [0.550, 0.750]"],
    "t2": ["0.600 [0.500, 0.700]", ""],
}
ECE_GRID = {"estimator": ["p_true"], "t2": ["0.100 [0.050, 0.150]"]}
AUROC_SAMPLING = f"sampling: t1: fixed k; t2: {ADAPTIVE}"
ECE_SAMPLING = f"sampling: t2: {ADAPTIVE}"


def test_metric_grid_has_a_row_per_estimator_and_a_column_per_task_with_blanks_where_not_computed():
    grid = metric_grid(_rows(), "soft_auroc")
    assert grid.to_dict("list") == AUROC_GRID and list(grid.columns) == list(AUROC_GRID)
    assert metric_grid(_rows(), "capability_ece_debiased").to_dict("list") == ECE_GRID


def test_metric_grid_of_several_models_names_each_column_model_and_task():
    rows = pd.concat([_rows(), pd.DataFrame([_row("n", "t1", "p_true", "soft_auroc", (0.5, 0.4, 0.6))])])
    assert metric_grid(rows, "soft_auroc").to_dict("list") == {
        "estimator": ["p_true", "consistency_k2 (leaky)"],
        "m · t1": ["0.700 [0.600, 0.800]", "0.650 [0.550, 0.750]"],
        "m · t2": ["0.600 [0.500, 0.700]", ""],
        "n · t1": ["0.500 [0.400, 0.600]", ""],
    }
    assert sampling_note(rows[rows["metric"] == "soft_auroc"]) == (
        f"sampling: m · t1: fixed k; m · t2: {ADAPTIVE}; n · t1: fixed k"
    )


def test_sampling_note_lists_each_columns_labels_once_in_order():
    rows = _rows()
    assert sampling_note(rows[rows["metric"] == "soft_auroc"]) == AUROC_SAMPLING
    mixed = rows.assign(sampling=["fixed k", ADAPTIVE, "fixed k", "fixed k", "fixed k"])
    assert sampling_note(mixed) == f"sampling: t1: fixed k / {ADAPTIVE}; t2: fixed k"


def test_grid_section_has_one_grid_per_headline_metric_with_its_footnotes():
    """The headline metrics present, in their order (spearman is not one); each grid's footnotes: its
    sampling, and the blank-cell note where a cell is blank."""
    section = grid_section(_rows())
    assert section is not None and section.title == "Across models and tasks"
    assert section.notes == [
        "Each cell: estimate [95% interval], the same numbers as the per-task sections: a percentile "
        "bootstrap interval over questions, except the debiased ECE's (estimate +- 1.96 jackknife SE; its "
        "bootstrap interval does not cover); ↓ lower is better, ↑ higher. Export: capcal table "
        "OUTPUT_DIR... --metric METRIC --format csv|latex|markdown|json."
    ]
    ece = "capability_ece_debiased ↓: estimators x tasks, each cell with its 95% jackknife interval"
    auroc = "soft_auroc ↑: estimators x tasks, each cell with its 95% bootstrap interval"
    assert [(caption, grid.to_dict("list")) for caption, grid in section.tables] == [
        (ece, ECE_GRID),
        (auroc, AUROC_GRID),
    ]
    assert section.footnotes == {ece: [ECE_SAMPLING], auroc: [AUROC_SAMPLING, BLANK_NOTE]}
    assert section.figures == []
    assert grid_section(_rows(), ["spearman"]).tables[0][0] == (
        "spearman ↑: estimators x tasks, each cell with its 95% bootstrap interval"
    )
    assert grid_section(_rows(), ["capability_brier"]) is None
    assert grid_section(_rows()[_rows()["metric"] == "spearman"]) is None


def test_format_table_writes_each_metrics_grid_with_its_own_sampling_note():
    ece = "capability_ece_debiased ↓ (estimate [95% jackknife interval])"
    auroc = "soft_auroc ↑ (estimate [95% bootstrap interval])"
    blocks = [
        "\n\n".join([ece, markdown_table(pd.DataFrame(ECE_GRID)), ECE_SAMPLING]),
        "\n\n".join([auroc, markdown_table(pd.DataFrame(AUROC_GRID)), AUROC_SAMPLING]),
    ]
    assert format_table(_rows()) == "\n\n".join(blocks) + "\n"
    latex = [
        _latex_grid(pd.DataFrame(ECE_GRID), ece, [ECE_SAMPLING]),
        _latex_grid(pd.DataFrame(AUROC_GRID), auroc, [AUROC_SAMPLING]),
    ]
    assert format_table(_rows(), fmt="latex") == "\n\n".join(latex) + "\n"
    with pytest.raises(ValueError) as error:
        format_table(_rows(), fmt="html")
    assert str(error.value) == "format 'html' is not one of markdown, latex, csv, json"


def test_format_table_exports_the_chosen_metrics_rows_as_csv_and_json():
    rows = _rows()
    assert format_table(rows, ["spearman"], fmt="csv") == (
        "model,task,estimator,metric,estimate,low,high,interval_method,questions,sampling,leaky,higher_is_better\n"
        "m,t1,p_true,spearman,0.3,0.1,0.5,bootstrap percentile,12,fixed k,False,True\n"
    )
    record = {
        "model": "m", "task": "t2", "estimator": "p_true", "metric": "capability_ece_debiased",
        "estimate": 0.1, "low": 0.05, "high": 0.15, "interval_method": "bootstrap percentile",
        "questions": 12, "sampling": ADAPTIVE, "leaky": False, "higher_is_better": False,
    }  # fmt: skip
    text = format_table(rows[rows["metric"] != "soft_auroc"], fmt="json")
    assert text == json.dumps([record], indent=2) + "\n"


def test_metric_rows_join_each_sections_metrics_and_skip_sections_without_inputs():
    metrics = pd.DataFrame(
        {
            "estimator": ["consistency_k2", "p_true"],
            "metric": ["spearman", "response_ece"],
            "estimate": [0.2, 0.1],
        }
    )
    free = pd.DataFrame(
        {"estimator": ["consistency_lf_k2"], "metric": ["capability_brier"], "estimate": [0.3]}
    )
    common = {
        "low": 0.0,
        "high": 1.0,
        "interval_method": "bootstrap percentile",
        "questions": 3,
        "sampling": "fixed k",
    }
    results = [
        SimpleNamespace(inputs=None, model="x", task="none"),
        SimpleNamespace(
            inputs=SimpleNamespace(
                metrics=metrics.assign(**common), leakage_free_metrics=free.assign(**common)
            ),
            model="m",
            task="t",
        ),
        SimpleNamespace(
            inputs=SimpleNamespace(metrics=metrics.iloc[1:].assign(**common), leakage_free_metrics=None),
            model="m",
            task="u",
        ),
    ]
    rows = metric_rows(results)
    assert list(rows.columns) == ROW_COLUMNS
    assert list(
        rows[["task", "estimator", "metric", "leaky", "higher_is_better"]].itertuples(index=False, name=None)
    ) == [
        ("t", "consistency_k2", "spearman", True, True),
        ("t", "p_true", "response_ece", False, False),
        ("t", "consistency_lf_k2", "capability_brier", False, False),
        ("u", "p_true", "response_ece", False, False),
    ]
    assert set(rows["model"]) == {"m"}
    assert rows.index.tolist() == [0, 1, 2, 3]  # a label per row: ``rows.loc[i]`` is one row, not several
    empty = metric_rows(results[:1])
    assert empty.empty and list(empty.columns) == ROW_COLUMNS


def test_paper_table_names_the_known_metrics_when_asked_for_another(tmp_path):
    """Issue 47: a name that is no metric is refused before any run is read (it was refused only after the
    whole analysis), naming every unknown name and the known metrics."""
    _sampling_run(tmp_path, "toy_eval", _ids("e", 8), _evaluation())
    options = ReportOptions(n_resamples=10, consistency_ks=(2,), max_examples=1)
    with pytest.raises(ValueError) as error:
        paper_table([tmp_path], ["soft_auroc", "f1", "accuracy"], options=options)
    assert str(error.value) == (
        "--metric f1, accuracy: not calibration-table metrics (known: capability_ece, "
        "capability_ece_debiased, capability_brier, corrected_capability_brier, capability_brier_skill, "
        "soft_auroc, spearman, response_ece, response_brier, response_auroc)"
    )


# ------------------------------------------------------------------ the (model, task) analysis


def _calibrated_runs(root: Path) -> tuple[Path, Path]:
    """first/ (read first): another model's split toy_gone, and MODEL's splits toy_calib (c0..c9 and the
    evaluation question e0) and toy_calib2 (c0, c1 again and d0) with P(True) on toy_calib; second/: the
    evaluation task toy_eval (e0..e4) declaring the three splits, its P(True), and a P(True) results file
    without samples (left out)."""
    first, second = root / "first", root / "second"
    _sampling_run(first, "toy_gone", ["g0"], CALIBRATION, model="other-model")
    _sampling_run(first, "toy_calib", [*_ids("c", 10), "e0"], CALIBRATION)
    _sampling_run(first, "toy_calib2", ["c0", "c1", "d0"], CALIBRATION)
    _ptrue_run(first, "toy_calib_ptrue", "toy_calib", _ids("c", 10))
    _sampling_run(second, "toy_eval", _ids("e", 5), _evaluation("toy_calib", "toy_calib2", "toy_gone"))
    _ptrue_run(second, "toy_eval_ptrue", "toy_eval", _ids("e", 5))
    metadata = {"capcal_task": "ptrue", "capcal_role": "confidence", "capcal_target_task": "toy_eval"}
    later = second / f"{MODEL}_toy_eval_ptrue" / f"results_{LATER}.json"
    later.write_text(json.dumps(_results("toy_eval_ptrue", metadata)))
    return first, second


def test_section_of_an_evaluation_task_with_several_calibration_splits(tmp_path):
    """The splits with a run of this model, concatenated (the question repeated across them kept once, the
    evaluation question dropped, the split of another model named missing); what the fitted estimator was
    trained on; the columns computed; the runs and joins of the appendix (a run without samples shown by
    its results file). The calibration splits, read first, get no section of their own."""
    first, second = _calibrated_runs(tmp_path)
    options = ReportOptions(n_resamples=20, consistency_ks=(2,), max_examples=2, seed=3)
    analysis = analyze_runs([first, second], options=options)
    (result,) = analysis.results
    assert (result.model_id, result.model, result.task) == (f"unresolved:{MODEL}", MODEL, "toy_eval")
    split = (
        f"toy_calib + toy_calib2 (11 questions, unknown domain, declared in {RESULTS}; 1 question(s) also in "
        "the evaluation set dropped)"
    )
    assert result.section.title == f"{MODEL} · toy_eval"
    assert {
        key: result.section.facts[key] for key in ("model", "task", "calibration split", "questions")
    } == {
        "model": MODEL,
        "task": "toy_eval",
        "calibration split": split,
        "questions": 5,
    }
    computed = result.computed
    assert computed.notes == [
        "calibration split(s) toy_gone chosen for toy_eval have no run of this model",
        "2 question(s) in several calibration splits: the first kept",
        "consistency_k{k}: modal-answer share among k of the n responses drawn without replacement (paper "
        "form: the draws overlap the samples that define mu_hat); k in [2]",
        "parse failures: ptrue 0/5",
    ]
    assert computed.trained_on == {"isotonic_p_true": f"{split}; fitted on 10 questions with p_true"}
    assert list(computed.evaluation.columns) == [
        "model", "model_id", "task", "run_id", "run_key", "doc_id", "question_id", "question", "target",
        "first_response", "extracted_answers", "correctness", "n", "expected_accuracy", "sampling", "s",
        "mu_hat", "mu_squared_hat", "looks", "rule", "majority_vote_accuracy", "pass_at_1", "pass_at_2",
        "pass_at_4", "p_true", "p_true_parse_success", "consistency_k2", "isotonic_p_true",
    ]  # fmt: skip
    assert list(computed.evaluation["question_id"]) == _ids("e", 5)
    assert result.inputs is not None
    assert (result.inputs.estimators, result.inputs.n_resamples, result.inputs.seed) == (
        ["consistency_k2", "p_true", "isotonic_p_true"],
        20,
        3,
    )
    bookkeeping = result.bookkeeping
    assert bookkeeping.title == f"Appendix · {MODEL} · toy_eval: runs, joins and identity"
    assert [caption for caption, _ in bookkeeping.tables] == [
        "Runs used and left out",
        "Joins: matched and unmatched question ids",
    ]

    def run(task: str, kind: str = "sampling") -> dict:
        return {"task": task, "kind": kind, "run_id": DATE, "used": True, "reason": "only run",
                "labels": "task checker", "file": f"{MODEL}/samples_{task}_{DATE}.jsonl"}  # fmt: skip

    runs = bookkeeping.tables[0][1].to_dict("records")
    assert runs[:4] == [run("toy_calib"), run("toy_calib2"), run("toy_calib_ptrue", "ptrue"), run("toy_eval")]
    assert sorted(runs[4:], key=lambda row: row["run_id"]) == [
        run("toy_eval_ptrue", "ptrue"),
        {"task": "toy_eval_ptrue", "kind": "ptrue", "run_id": LATER, "used": False,
         "reason": "not used: no samples file (run lm-eval with --log_samples)", "labels": "task checker",
         "file": f"{MODEL}/results_{LATER}.json"},
    ]  # fmt: skip
    assert bookkeeping.tables[1][1].to_dict("records") == [
        {
            "join": "toy_eval <-> toy_eval_ptrue",
            "matched": 5,
            "left": 5,
            "right": 5,
            "summary": "toy_eval <-> toy_eval_ptrue: matched 5 of 5 toy_eval questions and 5 toy_eval_ptrue "
            "records",
        },
        {
            "join": "toy_calib <-> toy_calib_ptrue",
            "matched": 10,
            "left": 11,
            "right": 10,
            "summary": "toy_calib <-> toy_calib_ptrue: matched 10 of 11 toy_calib questions and 10 "
            "toy_calib_ptrue records; 1 toy_calib questions without toy_calib_ptrue records (first: e0)",
        },
    ]
    assert analysis.routing == []


def test_routing_pairs_models_on_the_same_questions_whichever_prompt_variant_they_ran(tmp_path):
    """A model run only on a prompt variant (``capcal_questions_of``) is routed to on the questions of the
    task it asks, and a model run on both is routed from its run of the canonical task (read after the
    variant): the routing section is there, and its accuracies are those of the canonical run (0.5; its
    variant run answers all wrong) and of the variant-only model (all right)."""
    variant = {"capcal_task": "sampling", **_evaluation(), "capcal_questions_of": "toy_eval"}

    def variant_run(model: str, answer: str) -> None:
        lines = [sampling_line(i, [answer] * 2, question_id=q) for i, q in enumerate(_ids("e", 5))]
        results = _results("toy_base", variant, model)
        write_run(tmp_path, lines, task="toy_base", folder=f"{model}_toy_base", results=results)

    _sampling_run(tmp_path, "toy_eval", _ids("e", 5), _evaluation(), model="small-model")
    variant_run("small-model", "5")
    variant_run("big-model", "4")
    analysis = analyze_runs([tmp_path], options=ReportOptions(n_resamples=5, consistency_ks=(2,)))
    assert sorted((result.model, result.task) for result in analysis.results) == [
        ("big-model", "toy_base"),
        ("small-model", "toy_base"),
        ("small-model", "toy_eval"),
    ]
    (section,) = analysis.routing
    assert section.title == "Routing · toy_eval: small-model -> big-model"
    assert section.facts == {
        "questions": 5,
        "accuracy of small-model": "0.500",
        "accuracy of big-model": "1.000",
    }
    assert section.notes[1] == (
        "join: small-model <-> big-model: matched 5 of 5 small-model questions and 5 big-model questions"
    )
    assert [figure.caption for figure in section.figures] == [
        "Routing: accuracy against the fraction of questions sent to the strong model"
    ]


# an activations index as capcal writes it, with no "entries" key: no question has activations
INDEX_WITHOUT_ENTRIES = {
    "format": "capcal-activations",
    "version": 1,
    "model": MODEL,
    "model_fingerprint": None,
    "dtype": "float32",
}


def test_section_with_an_overridden_split_and_an_activations_folder_joins_both_tables(tmp_path):
    """A calibration split chosen by override is said so; the activations folder given joins the evaluation
    and the calibration questions with its index (which names no entries: nothing matched)."""
    first, second = _calibrated_runs(tmp_path)
    folder = tmp_path / "activations"
    folder.mkdir()
    index = dict(INDEX_WITHOUT_ENTRIES)
    (folder / "index.json").write_text(json.dumps(index))
    options = ReportOptions(
        n_resamples=10, consistency_ks=(2,), max_examples=1, calibration={"toy_eval": ["toy_calib2"]}
    )
    (result,) = analyze_runs([first, second], folder, options).results
    assert result.section.facts["calibration split"] == "toy_calib2 (3 questions, unknown domain, override)"
    joins = result.bookkeeping.tables[1][1].to_dict("records")
    assert [row["join"] for row in joins] == [
        "toy_eval <-> toy_eval_ptrue",
        "toy_eval <-> activations",
        "toy_calib2 <-> activations",
    ]
    assert joins[1]["summary"] == (
        "toy_eval <-> activations: matched 0 of 5 toy_eval questions and 0 activations; 5 toy_eval questions "
        "without activations (first: e0, e1, e2, e3, e4)"
    )
    assert (joins[2]["left"], joins[2]["right"], joins[2]["matched"]) == (3, 0, 0)


def test_activation_joins_of_an_index_without_entries_match_nothing(tmp_path):
    index = dict(INDEX_WITHOUT_ENTRIES)
    (tmp_path / "index.json").write_text(json.dumps(index))
    joins: list[dict] = []
    _activation_joins(tmp_path, [pd.DataFrame({"task": ["t"], "question_id": ["q"]})], joins)
    assert joins == [
        {
            "join": "t <-> activations",
            "matched": 0,
            "left": 1,
            "right": 0,
            "summary": "t <-> activations: matched 0 of 1 t questions and 0 activations; 1 t questions "
            "without activations (first: q)",
        }
    ]


def test_short_file_is_the_models_display_name_and_the_file_name():
    assert short_file("/models/org/smollm2", Path("/out/x/results_1.json")) == "smollm2/results_1.json"


# ------------------------------------------------------------------ the appendix


def test_relative_names_a_file_from_the_folder_given_that_holds_it(tmp_path):
    out, other = tmp_path / "out", tmp_path / "other"
    path = out / "run" / "results.json"
    assert _relative(path, [other, out]) == str(Path("out") / "run" / "results.json")
    assert _relative(str(path), []) == str(path)
    assert _relative(path, [other]) == str(path)


def test_overview_lists_the_runs_the_skipped_entries_and_the_files_read_once(tmp_path):
    """Every caption in order, the runs table (display names), a folder named like a results file
    skipped, the folder given twice read once, and the model known only by its label."""
    _sampling_run(tmp_path, "toy_eval", _ids("e", 3), _evaluation())
    (tmp_path / f"{MODEL}_toy_eval" / f"results_{LATER}.json").mkdir()
    data = load_report_data([tmp_path, tmp_path])
    relations = task_relations(data.configs)
    versions = run_versions(data.collection.files)
    section = overview_section(data, relations, versions, [tmp_path])
    assert section.facts == {
        "runs found": 1,
        "runs used": 1,
        "files read once (same content)": 1,
        "entries skipped": 1,
    }
    assert [caption for caption, _ in section.tables] == [
        "Task relations",
        "Runs: used and left out",
        "Versions: task, lm-eval, capcal",
    ]
    assert section.tables[0][1].to_dict("records") == [
        {"task": "toy_eval", "role": "evaluation", "calibration split(s)": "no calibration split declared",
         "scores": "", "declared in": RESULTS},
    ]  # fmt: skip
    assert section.tables[1][1].to_dict("records") == [
        {"model": MODEL, "task": "toy_eval", "kind": "sampling", "run_id": DATE, "used": True,
         "reason": "only run", "labels": "task checker"},
    ]  # fmt: skip
    assert section.tables[2][1] is versions
    name = tmp_path.name
    assert section.notes == [
        f"read once: {name} (same content as {name})",
        f"skipped: {Path(name) / f'{MODEL}_toy_eval' / f'results_{LATER}.json'}: a folder named like an "
        "lm-eval results/samples file, not read",
        f"model {MODEL} is known only by its label (no checkpoint fingerprint)",
    ]


# ------------------------------------------------------------------ input notices


def test_k_notices_name_each_model_and_task_whose_k_leaves_an_estimator_out():
    """Sorted by (model, task): an adaptive first look below 6, k = 1, k = 2; an adaptive first look of 6
    and k = 6 leave nothing out."""

    def group(task: str, n: int, looks: list[int] | None = None) -> pd.DataFrame:
        frame = pd.DataFrame({"model": "m", "task": task, "n": [n, n + 2]})
        if looks is not None:
            frame = frame.assign(sampling=ADAPTIVE, looks=[looks, looks])
        return frame

    questions = pd.concat(
        [
            group("e_ok", 6),
            group("d_k2", 2),
            group("c_k1", 1),
            group("b_look6", 6, [6, 12]),
            group("a_look4", 4, [4, 8]),
        ],
        ignore_index=True,
    )
    assert k_notices(questions) == [
        "a_look4 (m) was sampled adaptively with a first look of 4 responses: the consistency estimator "
        "uses each question's first-look responses (drawn before any stopping decision), needs 6 or more, "
        "and is missing",
        "c_k1 (m) has k = 1 response per question: mu_hat is 0 or 1, so capability calibration is only "
        "response calibration, and consistency and pass@k (k > 1) are missing",
        "d_k2 (m) has k = 2 responses per question: the consistency estimator needs k >= 6 and is missing",
    ]


def test_report_notices_name_a_confidence_run_without_its_target_and_a_missing_activations_folder(tmp_path):
    """A P(True) run scoring a task this model did not sample is named; so is an --activations folder
    that does not exist; a task that declares nothing (no results file) is not an evaluation task to check;
    the k of each sampled task is checked."""
    _sampling_run(tmp_path, "toy_eval", _ids("e", 12), _evaluation(), k=6)
    _sampling_run(tmp_path, "toy_other", ["o0"], CALIBRATION, model="other-model", k=6)
    _ptrue_run(tmp_path, "toy_other_ptrue", "toy_other", ["o0"])
    lines = [sampling_line(i, ["4", "5"], question_id=f"u{i}") for i in range(2)]
    write_run(tmp_path, lines, task="toy_bare", folder=f"{MODEL}_toy_bare", with_results=False)
    missing = tmp_path / "no-such-folder"
    assert report_notices([tmp_path], activations_dir=missing) == [
        f"toy_other_ptrue ({MODEL}) scores toy_other, which has no sampling run of that model here: its "
        "confidences are left out",
        f"--activations {missing}: no such folder; the probe is left out",
        f"toy_bare ({MODEL}_toy_bare) has k = 2 responses per question: the consistency estimator needs "
        "k >= 6 and is missing",
    ]


def test_report_notices_read_the_selected_runs(tmp_path):
    """``select`` picks the runs the notices are about, as the report's: the earlier run of toy_eval (k = 2)
    when selected by its run id, the latest (k = 6, nothing to say) by default and for an empty selection."""
    metadata = {"capcal_task": "sampling", **_evaluation()}
    for date, k in ((DATE, 2), (LATER, 6)):
        lines = [
            sampling_line(i, ["4"] * (i % 2) + ["5"] * (k - i % 2), question_id=f"e{i}") for i in range(4)
        ]
        write_run(
            tmp_path, lines, task="toy_eval", folder=f"{MODEL}_toy_eval", date=date,
            results=_results("toy_eval", metadata),
        )  # fmt: skip
    assert report_notices([tmp_path]) == report_notices([tmp_path], select=[]) == []
    assert report_notices([tmp_path], select=[DATE]) == [
        f"toy_eval ({MODEL}) has k = 2 responses per question: the consistency estimator needs k >= 6 and "
        "is missing"
    ]


def test_report_notices_still_check_k_when_the_declarations_are_contradictory(tmp_path):
    """An evaluation task naming an unknown calibration split: the relations are left to the report, the
    other notices are still said."""
    _sampling_run(tmp_path, "toy_eval", _ids("e", 3), _evaluation("toy_nowhere"), k=1)
    assert report_notices([tmp_path]) == [
        f"toy_eval ({MODEL}) has k = 1 response per question: mu_hat is 0 or 1, so capability calibration is "
        "only response calibration, and consistency and pass@k (k > 1) are missing"
    ]


def test_nothing_to_score_in_an_empty_folder_says_what_was_found(tmp_path):
    with pytest.raises(NothingToScoreError) as error:
        report_notices([tmp_path])
    assert str(error.value) == (
        f"nothing to score under {tmp_path}: no capcal sampling run; found no lm-eval results or samples "
        "files"
    )


# ------------------------------------------------------------------ the report's sections, in order


def test_build_report_orders_the_summary_grid_sections_appendix_and_bookkeeping(tmp_path, monkeypatch):
    """The sections handed to the writer: the summary (its intervals at the resamples asked, the caller's
    notice among its warnings, each (model, task) measured), the grid, the (model, task) section, the
    appendix and the bookkeeping last; nothing else is written."""
    _sampling_run(tmp_path, "toy_eval", _ids("e", 8), _evaluation())
    written = {}

    def write(sections, report_dir, title):
        written.update(sections=sections, report_dir=report_dir, title=title)
        return "files"

    monkeypatch.setattr(build, "write_report", write)
    options = ReportOptions(n_resamples=10, consistency_ks=(2,), max_examples=1)
    notice = "toy notice: something was left out"
    files = build.build_report([tmp_path], tmp_path / "report", options=options, title="t", notices=[notice])
    assert files == "files" and written["report_dir"] == tmp_path / "report" and written["title"] == "t"
    titles = [section.title for section in written["sections"]]
    assert titles[-4:] == [
        "Across models and tasks",
        f"{MODEL} · toy_eval",
        "Appendix: runs and task relations",
        f"Appendix · {MODEL} · toy_eval: runs, joins and identity",
    ]
    summary = written["sections"][0]
    assert (
        summary.facts["intervals"]
        == "95% percentile bootstrap over questions (10 resamples); differences paired"
    )
    assert summary.facts["questions (N) and samples per question (k)"] == f"{MODEL} · toy_eval: N = 8, k = 4"
    assert any(
        notice in line for section in written["sections"][:-4] for line in section.notes + section.warnings
    )


def test_build_report_marks_a_task_without_any_estimator_as_measured_but_not_ranked(tmp_path, monkeypatch):
    """A sampling run with no estimator to compute (no consistency k, no confidence run): the summary says
    it was measured (N = 8, k = 4) with no confidence estimator, from the section's missing inputs (its
    report section exists all the same, so reading that instead would claim an estimator)."""
    _sampling_run(tmp_path, "toy_eval", _ids("e", 8), _evaluation())
    written = {}
    monkeypatch.setattr(build, "write_report", lambda sections, report_dir, title: written.update(s=sections))
    options = ReportOptions(n_resamples=10, consistency_ks=(), max_examples=1)
    build.build_report([tmp_path], tmp_path / "report", options=options)
    summary = written["s"][0]
    assert summary.facts["questions (N) and samples per question (k)"] == (
        f"{MODEL} · toy_eval: N = 8, k = 4 (no confidence estimator: not ranked)"
    )
    assert summary.sentences == [
        f"{MODEL} · toy_eval: no confidence estimator could be computed, so there is nothing to rank."
    ]
