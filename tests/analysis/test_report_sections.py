"""The report's sections, figures and notices, called directly on small hand-built inputs (fast; the whole
report built from runs is tests/analysis/test_report.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib import pyplot as plt
from matplotlib.colors import to_hex

from analysis.judge.agreement import RescoreAgreement
from analysis.report import figures
from analysis.report.analyze import ReportOptions, _activation_joins, analyze_runs, load_report_data
from analysis.report.build import overview_section
from analysis.report.calibration_table import (
    CAPABILITY_METRICS,
    INTERVAL_NOTES,
    RESPONSE_METRICS,
    calibration_table,
)
from analysis.report.figures import Interval, forest_figure
from analysis.report.input_notices import NothingToScoreError, report_notices
from analysis.report.paper_table import ROW_COLUMNS, _latex_grid, paper_table
from analysis.report.registry import ESTIMATORS, LEAKY, ComputedEstimators
from analysis.report.sections import (
    SectionInputs,
    budget_part,
    judge_agreement_section,
    routing_guide,
    routing_lines,
)
from analysis.report.summary import Measured, Ranking, _candidates, _forest, _target_note, summary_sections
from analysis.runs.versions import run_versions
from capcal_tasks.relations import task_relations

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the hostile corpus' log writers
from hostile.logs import DATE, confidence_line, sampling_line, write_run  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MODEL = "toy-model"
RESULTS = f"{MODEL}/results_{DATE}.json"  # where a task of a run of MODEL is declared, as the report names it


# ------------------------------------------------------------------ run folders written for the tests


def _results(task: str, metadata: dict, model: str = MODEL) -> dict:
    """A results file whose config declares ``metadata`` for ``task``."""
    return {"results": {task: {}}, "configs": {task: {"metadata": metadata}}, "model_name": model}


def _sampling_run(root: Path, task: str, count: int, metadata: dict, model: str = MODEL, k: int = 8) -> None:
    """``count`` questions ``task/i`` of a sampling task with k responses (the first i % (k + 1) correct)."""
    lines = [
        sampling_line(i, ["4"] * (i % (k + 1)) + ["5"] * (k - i % (k + 1)), question_id=f"{task}/{i}")
        for i in range(count)
    ]
    metadata = {"capcal_task": "sampling", **metadata}
    write_run(root, lines, task=task, folder=f"{model}_{task}", results=_results(task, metadata, model))


def _ptrue_run(root: Path, task: str, target: str, count: int, metadata: dict | None = None) -> None:
    """A P(True) confidence run of MODEL scoring the questions ``target/i`` (declared by ``metadata``)."""
    declared = {"capcal_task": "ptrue", "capcal_role": "confidence", "capcal_target_task": target}
    metadata = declared if metadata is None else metadata
    chances = [0.1 + 0.8 * i / count for i in range(count)]
    logprobs = [{"logprob_yes": float(np.log(p)), "logprob_no": float(np.log(1 - p))} for p in chances]
    lines = [
        confidence_line(i, "ptrue", doc={"question_id": f"{target}/{i}"}, p_true=p, **logprobs[i])
        for i, p in enumerate(chances)
    ]
    write_run(root, lines, task=task, folder=f"{MODEL}_{task}", results=_results(task, metadata))


CALIBRATION = {"capcal_role": "calibration"}


def _evaluation(*calibration: str) -> dict:
    """An evaluation task's declaration with its calibration split(s) (none: ``[]``)."""
    return {"capcal_role": "evaluation", "capcal_calibration_tasks": list(calibration)}


# ------------------------------------------------------------------ input notices


def test_a_folder_of_leaderboard_runs_alone_is_something_to_score():
    """The stored leaderboard runs (results files, no samples) have nothing to warn of: not an error, as
    when the folder held no run at all."""
    assert report_notices([REPO / "benchmarks" / "results" / "leaderboard_board"]) == []


def test_confidence_runs_without_their_sampling_run_are_named_in_the_error(tmp_path):
    """Nothing to score, and the error names the confidence tasks found, sorted, and what to run."""
    _ptrue_run(tmp_path, "toy_ptrue_b", "toy_eval", 3)
    _ptrue_run(tmp_path, "toy_ptrue_a", "toy_eval", 3)
    with pytest.raises(NothingToScoreError) as error:
        report_notices([tmp_path])
    assert str(error.value) == (
        f"nothing to score under {tmp_path}: no capcal sampling run; found confidence runs of toy_ptrue_a, "
        "toy_ptrue_b (they score a sampling run's questions: run the sampling task with --log_samples into "
        "these folders)"
    )


def test_calibration_notices_name_each_split_in_task_order(tmp_path):
    """Per evaluation task in sorted order (the folders list b_eval first): a split with no run of this model
    (its only run is another model's) and a split cut below the isotonic minimum, whose probe (activations
    given) is fitted on three quarters of its 4 questions."""
    first, second = tmp_path / "first", tmp_path / "second"
    _sampling_run(first, "b_eval", 12, _evaluation("b_calib"))
    _sampling_run(first, "b_calib", 12, CALIBRATION, model="other-model")
    _sampling_run(second, "a_eval", 12, _evaluation("a_calib"))
    _sampling_run(second, "a_calib", 4, CALIBRATION)
    order = load_report_data([first, second]).questions["task"].drop_duplicates().tolist()
    assert order.index("b_eval") < order.index("a_eval")  # the sorted order below is not the order found
    assert report_notices([first, second], activations_dir=tmp_path) == [
        "a_eval (toy-model): its calibration split a_calib has 4 questions (was it run with --limit?); "
        "isotonic recalibration needs 10 and is left out, and a probe fitted on 3 of them (a quarter "
        "validates it) is weak; run a_calib without --limit",
        "b_eval (toy-model): its calibration split b_calib has no sampling run here; the probe and isotonic "
        "recalibration are left out",
    ]


# ------------------------------------------------------------------ the appendix: runs and task relations


def test_overview_lists_every_task_with_its_declared_relations(tmp_path):
    """The task relations table: an evaluation task with its split, the split, a confidence task with the
    task it scores, and a confidence task that declares no role (undeclared, declared nowhere)."""
    _sampling_run(tmp_path, "toy_eval", 4, _evaluation("toy_calib"))
    _sampling_run(tmp_path, "toy_calib", 4, CALIBRATION)
    _ptrue_run(tmp_path, "toy_eval_ptrue", "toy_eval", 4)
    _ptrue_run(tmp_path, "toy_loose_ptrue", "toy_eval", 4, metadata={"capcal_task": "ptrue"})
    data = load_report_data([tmp_path])
    relations = task_relations(data.configs)
    versions = run_versions(data.collection.files)
    section = overview_section(data, relations, versions, [tmp_path])
    assert section.title == "Appendix: runs and task relations"
    assert section.facts == {
        "runs found": 4,
        "runs used": 4,
        "files read once (same content)": 0,
        "entries skipped": 0,
    }
    caption, table = section.tables[0]
    assert caption == "Task relations"
    assert table.to_dict("records") == [
        {"task": "toy_calib", "role": "calibration", "calibration split(s)": "", "scores": "",
         "declared in": RESULTS},
        {"task": "toy_eval", "role": "evaluation", "calibration split(s)": "toy_calib", "scores": "",
         "declared in": RESULTS},
        {"task": "toy_eval_ptrue", "role": "confidence", "calibration split(s)": "", "scores": "toy_eval",
         "declared in": RESULTS},
        {"task": "toy_loose_ptrue", "role": "undeclared", "calibration split(s)": "", "scores": "",
         "declared in": ""},
    ]  # fmt: skip


# ------------------------------------------------------------------ activation joins


def test_activation_joins_say_why_a_folder_without_an_index_joins_nothing(tmp_path):
    joins: list[dict] = []
    frame = pd.DataFrame({"task": ["toy_eval"], "question_id": ["toy_eval/0"]})
    _activation_joins(tmp_path, [frame], joins)
    assert joins == [
        {
            "join": "activations",
            "summary": f"{tmp_path / 'index.json'}: no activations index "
            "(run capcal-hf with activations=DIR)",
        }
    ]


def test_activation_joins_match_each_task_of_each_frame_with_its_entries(tmp_path):
    """One join row per task of each frame, in the frames' order, against that task's index entries."""
    entry = {"shard": "activations-00000.safetensors", "last_token": 0, "prompt_mean": 0, "prompt_tokens": 3,
             "prompt_sha256": "0" * 64}  # fmt: skip
    index = {
        "format": "capcal-activations",
        "version": 1,
        "model": MODEL,
        "model_fingerprint": None,
        "dtype": "float32",
        "entries": {"toy_eval": {"e0": entry, "e1": entry}, "toy_calib": {"c0": entry, "c9": entry}},
    }
    (tmp_path / "index.json").write_text(json.dumps(index))
    evaluation = pd.DataFrame({"task": ["toy_eval"] * 3, "question_id": ["e0", "e1", "e2"]})
    calibration = pd.DataFrame({"task": ["toy_calib", "toy_calib"], "question_id": ["c0", "c1"]})
    joins: list[dict] = []
    _activation_joins(tmp_path, [evaluation, calibration], joins)
    assert joins == [
        {
            "join": "toy_eval <-> activations",
            "matched": 2,
            "left": 3,
            "right": 2,
            "summary": "toy_eval <-> activations: matched 2 of 3 toy_eval questions and 2 activations; "
            "1 toy_eval questions without activations (first: e2)",
        },
        {
            "join": "toy_calib <-> activations",
            "matched": 1,
            "left": 2,
            "right": 2,
            "summary": "toy_calib <-> activations: matched 1 of 2 toy_calib questions and 2 activations; "
            "1 toy_calib questions without activations (first: c1); "
            "1 activations without toy_calib questions (first: c9)",
        },
    ]


# ------------------------------------------------------------------ the paper table


def test_paper_table_rows_are_numbered_afresh_with_only_the_row_columns(tmp_path):
    """The rows of one metric keep only ROW_COLUMNS (no leftover index column) and a fresh 0..n-1 index."""
    _sampling_run(tmp_path, "toy_eval", 12, _evaluation())
    _ptrue_run(tmp_path, "toy_eval_ptrue", "toy_eval", 12)
    options = ReportOptions(n_resamples=20, consistency_ks=(2,), max_examples=2)
    rows = paper_table([tmp_path], ["soft_auroc"], options=options)
    assert list(rows.columns) == ROW_COLUMNS
    assert list(rows.index) == list(range(len(rows))) and len(rows) > 1
    assert set(rows["metric"]) == {"soft_auroc"} and set(rows["task"]) == {"toy_eval"}


def test_latex_grid_is_a_booktabs_table_with_escaped_cells():
    grid = pd.DataFrame(
        {
            "estimator": ["p_true", "consistency_k2 (leaky)"],
            "toy_eval": ["0.7 [0.5, 0.9]", ""],
            "b & c": ["50%", "‡"],
        }
    )
    assert _latex_grid(grid, "soft_auroc ↑", ["sampling: toy_eval: fixed k"]) == "\n".join(
        [
            r"\begin{table}[t]",
            r"\centering",
            r"\caption{soft\_auroc $\uparrow$}",
            r"\begin{tabular}{lcc}",
            r"\toprule",
            r"estimator & toy\_eval & b \& c \\",
            r"\midrule",
            r"p\_true & 0.7 [0.5, 0.9] & 50\% \\",
            r"consistency\_k2 (leaky) &  & \ddag{} \\",
            r"\bottomrule",
            r"\end{tabular}",
            r"\par\footnotesize sampling: toy\_eval: fixed k",
            r"\end{table}",
        ]
    )


# ------------------------------------------------------------------ judge agreement


def test_judge_agreement_section_states_every_fact_and_the_reading_note():
    """Kappa by hand: observed 7/10, expected (4 * 5 + 6 * 5) / 100 = 0.5, so (0.7 - 0.5) / 0.5 = 0.4."""
    agreement = RescoreAgreement(
        task="capcal_triviaqa",
        checker="judge",
        checker_version="simpleqa-1",
        judge_model="judge-m",
        source="run 1",
        confusion=np.array([[3, 1], [2, 4]]),  # [source label, judge label]
        questions=5,
        unparseable_verdicts=1,
        questions_left_out=1,
        left_out_ids=["q9"],
    )
    section = judge_agreement_section(agreement, "/models/toy-model")
    assert section.title == "Judge vs rule agreement · toy-model · capcal_triviaqa"
    assert section.facts == {
        "model": "/models/toy-model",
        "task": "capcal_triviaqa",
        "checker": "judge (simpleqa-1)",
        "judge model": "judge-m",
        "source run": "run 1",
        "questions kept": 5,
        "responses kept": 10,
        "observed agreement": "0.700",
        "Cohen's kappa": "0.400 (no interval: kappa is undefined on every resample of the questions)",
        "unparseable verdicts": 1,
        "questions left out (unparseable verdict)": 1,
    }
    assert section.notes == [
        "Rows: the source run's labels (its task checker); columns: the rescored labels. A verdict that "
        "could not be read is never guessed: its question is left out of the rescored run and counted above.",
        "questions left out (first ids): q9",
    ]
    caption, confusion = section.tables[0]
    assert caption == "Confusion counts over responses (rule x judge)"
    assert confusion.to_dict("list") == {
        "rule label (source run)": ["correct", "incorrect", "total"],
        "judge: correct": [4, 1, 5],
        "judge: incorrect": [2, 3, 5],
        "total": [6, 4, 10],
    }


def test_agreement_over_no_responses_is_not_available():
    agreement = RescoreAgreement("capcal_triviaqa", "exact", "1", None, "", np.zeros((2, 2), dtype=int))
    section = judge_agreement_section(agreement, "m")
    assert section.title == "Rescored vs source labels · m · capcal_triviaqa"
    assert {key: section.facts[key] for key in ("judge model", "source run", "responses kept")} == {
        "judge model": "none (rule-based)",
        "source run": "not recorded",
        "responses kept": 0,
    }
    assert section.facts["observed agreement"] == "n/a"
    assert section.facts["unparseable verdicts"] == "not recorded"


# ------------------------------------------------------------------ routing guide


def test_routing_guide_names_the_drawn_lines_the_ties_and_the_leaky_line():
    methods = ["p_true", "consistency_k4", "random", "oracle_cheap", "oracle_gain"]
    curves = pd.DataFrame(
        [{"method": m, "fraction": f, "accuracy": 0.5 + f / 4} for m in methods for f in (0.0, 0.5, 1.0)]
    )
    mu_cheap = np.array([0.5, 0.5, 0.5, 1.0, 0.0])
    assert routing_guide(routing_lines(curves), mu_cheap, "small") == (
        "An estimator helps when its line lies above the grey dotted line with squares (random routing). "
        "Two oracles: the black dashed line with triangles is oracle_cheap, routing by small's own mu_hat "
        "(the best any confidence of small can do); the dark grey dash-dot line with down-pointing triangles "
        "is oracle_gain, routing by the gain mu_strong - mu_cheap (the best any router can do, knowing both "
        "models). 3 of the 5 questions have mu_hat = 0.5 for small: routing by mu_hat picks among them at "
        "random, so oracle_cheap runs close to random routing over that range. consistency_k4 (leaky): the "
        "paper-form consistency draws from the samples that define mu_hat, which scores the routing, so its "
        "line is optimistic."
    )


# ------------------------------------------------------------------ the forest plot


def _axis_of(monkeypatch, *args, **kwargs):
    """forest_figure's PNG and the Axes it drew (kept as the figure is rendered)."""
    drawn = []
    render = figures._png

    def keep(figure) -> bytes:
        drawn.append(figure.axes[0])
        return render(figure)

    monkeypatch.setattr(figures, "_png", keep)
    png = forest_figure(*args, **kwargs)
    assert png.startswith(b"\x89PNG") and len(drawn) == 1
    return drawn[0]


def _lines(axis) -> list[tuple]:
    """Each drawn line: x data, y data, colour, width, marker, marker face colour, label."""
    return [
        (
            [float(x) for x in line.get_xdata()],
            [float(y) for y in line.get_ydata()],
            to_hex(line.get_color()),
            line.get_linewidth(),
            line.get_marker(),
            to_hex(line.get_markerfacecolor()),
            line.get_label(),
        )
        for line in axis.get_lines()
    ]


RED, BLUE, WHITE = "#c44e52", "#4c72b0", "#ffffff"
FLOOR = "0: the lowest possible population value"


def test_forest_figure_draws_the_best_in_red_the_others_in_blue_and_the_floor(monkeypatch):
    """Rows top down; the best's interval thicker, in red, its tick "(best)" in bold; a row without an
    interval only its (hollow) dot; the base rate grey dotted; an interval below 0 adds the black floor."""
    rows = [
        Interval("probe", 0.10, 0.05, 0.15, highlight=True),
        Interval("p_true", 0.20, -0.01, 0.40),
        Interval("consistency_lf_k2 (vs mu_hat_lf)", 0.30, np.nan, np.nan, hollow=True),
    ]
    axis = _axis_of(monkeypatch, rows, "Brier", ("base rate", 0.25), zero_floor=True)
    width = 1.5  # matplotlib's default width of the dots' (unused) line
    assert _lines(axis) == [
        ([0.05, 0.15], [2.0, 2.0], RED, 2.4, "None", RED, "_child0"),
        ([0.10], [2.0], RED, width, "o", RED, "_child1"),
        ([-0.01, 0.40], [1.0, 1.0], BLUE, 1.6, "None", BLUE, "_child2"),
        ([0.20], [1.0], BLUE, width, "o", BLUE, "_child3"),
        ([0.30], [0.0], BLUE, width, "o", WHITE, "_child4"),
        ([0.25, 0.25], [0.0, 1.0], "#737373", 1.4, "None", "#737373", "base rate"),
        ([0.0, 0.0], [0.0, 1.0], "#000000", 0.8, "None", "#000000", FLOOR),
    ]
    ticks = axis.get_yticklabels()
    assert [tick.get_text() for tick in ticks] == ["probe (best)", "p_true", rows[2].label]
    assert [tick.get_fontweight() for tick in ticks] == ["bold", "normal", "normal"]
    assert [text.get_text() for text in axis.get_legend().get_texts()] == ["base rate", FLOOR]


def test_forest_figure_draws_no_floor_for_an_interval_that_only_reaches_0(monkeypatch):
    rows = [Interval("probe", 0.10, 0.0, 0.2, highlight=True), Interval("p_true", 0.2, 0.05, 0.4)]
    axis = _axis_of(monkeypatch, rows, "Brier", None, zero_floor=True)
    assert [line.get_label() for line in axis.get_lines()] == [f"_child{i}" for i in range(4)]
    assert axis.get_legend() is None


# ------------------------------------------------------------------ the summary


def _ranking(targets: list[str], lows: list[float], metric: str = "corrected_capability_brier") -> Ranking:
    """A ranking of estimators e1, e2, ... scored against ``targets``, estimates 0.1, 0.2, ..."""
    count = len(targets)
    long = pd.DataFrame(
        {
            "rank": range(1, count + 1),
            "estimator": [f"e{i}" for i in range(1, count + 1)],
            "target": targets,
            "estimate": [0.1 * i for i in range(1, count + 1)],
            "low": lows,
            "high": [0.1 * i + 0.05 for i in range(1, count + 1)],
            "questions": 40,
            "metric": metric,
        }
    )
    return Ranking("toy-model", "toy_eval", 40, "8", long.drop(columns="metric"), "sentence", long=long,
                   verdict="Use e1.", base_rate=0.25)  # fmt: skip


GUIDE = (
    "Dot: corrected capability Brier; line: its 95% bootstrap interval; the best on top, in red; left is "
    "better. Grey dotted: the base rate (the mean mu_hat for every question), itself an estimate: the Brier "
    "skill's interval in the table says whether an estimator beats it. Compare estimators by the table's "
    "paired differences, not by overlapping intervals."
)


def test_forest_guide_speaks_of_the_floor_only_when_an_interval_reaches_below_it():
    figure = _forest(_ranking(["mu_hat", "mu_hat_lf"], [0.05, 0.0]))
    assert figure.caption == "Corrected capability Brier of each estimator (toy-model · toy_eval)"
    assert figure.guide == GUIDE + " Hollow dots: scored against mu_hat_lf."
    below = _forest(_ranking(["mu_hat", "mu_hat"], [0.05, -0.01]))
    assert below.guide == GUIDE + (
        " Black line: 0, the lowest value a Brier can take; an interval below it is noise (‡)."
    )


def test_forest_of_a_single_ranked_estimator_is_drawn():
    """One ranked estimator is still a forest of one row (None is only for no ranked estimator)."""
    figure = _forest(_ranking(["mu_hat"], [0.05], metric="capability_brier"))
    assert figure.caption == "Capability Brier of each estimator (toy-model · toy_eval)"
    assert figure.png.startswith(b"\x89PNG")


def test_target_note_without_a_leakage_free_target():
    assert _target_note(_ranking(["mu_hat", "mu_hat"], [0.05, 0.1])) == (
        "Every ranked estimator is scored against mu_hat, the expected accuracy from all k samples."
    )


def test_summary_says_what_was_measured_from_the_rankings_when_not_told():
    (head, detail) = summary_sections([_ranking(["mu_hat", "mu_hat"], [0.05, 0.1])], n_resamples=20)
    assert head.facts == {
        "models": "toy-model",
        "evaluation tasks": "toy_eval",
        "questions (N) and samples per question (k)": "toy-model · toy_eval: N = 40, k = 8",
        "primary metric": "corrected capability Brier (lower is better): a proper score, unbiased for the "
        "Brier against the true expected accuracy, whose bootstrap intervals cover it",
        "intervals": "95% percentile bootstrap over questions (20 resamples); differences paired",
    }
    assert head.sentences == ["toy-model · toy_eval: Use e1."]
    assert detail.title == "Summary · toy-model · toy_eval"


def test_summary_without_any_evaluation_task_says_so():
    (head,) = summary_sections([])
    assert head.sentences == ["No evaluation task with a confidence estimator was found."]
    assert head.facts["models"] == "none" and head.figures == []
    unranked = summary_sections([], what=[Measured("toy-model", "toy_eval", 4, "8", False)])
    assert unranked[0].sentences == [
        "toy-model · toy_eval: no confidence estimator could be computed, so there is nothing to rank."
    ]


# ------------------------------------------------------------------ figures, tables and a section's parts


def _drawn(monkeypatch) -> list:
    """The figures rendered by ``figures._png`` from now on, in order (each kept as it is rendered)."""
    drawn: list = []
    render = figures._png

    def keep(figure) -> bytes:
        drawn.append(figure)
        return render(figure)

    monkeypatch.setattr(figures, "_png", keep)
    return drawn


def _computed(evaluation: pd.DataFrame, *estimators: str) -> ComputedEstimators:
    """Estimators already computed (their columns in ``evaluation``), each with its registry entry."""
    entries = {entry.name: entry for entry in ESTIMATORS}
    columns = {name: entries["consistency" if LEAKY.match(name) else name] for name in estimators}
    return ComputedEstimators(evaluation, columns, [], {}, {})


def test_grid_of_five_panels_is_two_rows_of_four_square_cells_with_the_spare_cells_hidden():
    """A 3-inch square per panel, four to a row: 5 panels need 2 rows, so the figure is 12 x 6 inches."""
    figure, axes = figures._grid(5)
    try:
        assert list(figure.get_size_inches()) == [12.0, 6.0]
        assert [axis.get_visible() for axis in axes] == [True] * 5 + [False] * 3
    finally:
        plt.close(figure)


def test_reliability_figure_draws_each_bins_mean_target_with_its_count(monkeypatch):
    """Two bins: [0, 0.5) holds 3 questions (mean target 1/3), [0.5, 1] one (mean 1); bars 90% of a bin wide,
    blue at alpha 0.8, the count above each bar (capped at 0.97), the dashed diagonal, the subtitle line."""
    drawn = _drawn(monkeypatch)
    confidence = np.array([0.1, 0.2, 0.3, 0.9, np.nan])  # the NaN is left out
    target = np.array([0.0, 1.0, 0.0, 1.0, 1.0])
    png = figures.reliability_figure(
        {"p_true": confidence}, target, "mu_hat", {"p_true": "ECE 0.1"}, n_bins=2
    )
    assert png.startswith(b"\x89PNG")
    (figure,) = drawn
    axis = figure.axes[0]
    bars = axis.patches
    assert [p.get_x() for p in bars] == pytest.approx([0.025, 0.525])
    assert [p.get_width() for p in bars] == pytest.approx([0.45, 0.45])
    assert [p.get_height() for p in bars] == pytest.approx([1 / 3, 1.0])
    assert [(to_hex(p.get_facecolor(), keep_alpha=True), p.get_alpha()) for p in bars] == [
        ("#4c72b0cc", 0.8)
    ] * 2
    assert [t.get_text() for t in axis.texts] == ["3", "1"]
    assert [t.get_position() for t in axis.texts] == [pytest.approx((0.25, 1 / 3 + 0.02)), (0.75, 0.97)]
    (diagonal,) = axis.get_lines()
    assert (list(diagonal.get_xdata()), list(diagonal.get_ydata()), diagonal.get_linestyle()) == (
        [0, 1],
        [0, 1],
        "--",
    )
    assert axis.get_title() == "p_true\nECE 0.1" and axis.get_ylabel() == "mean mu_hat"
    assert figure._suptitle.get_text() == "Reliability (mu_hat)"


def test_target_scatter_jitters_each_response_target_cross_on_its_own(monkeypatch):
    """The z crosses are spread vertically, each by its own offset within +-0.03 (one shared offset would
    stack the crosses at 0 and 1 again), the same on every draw; the mu_hat dots are not jittered."""
    confidence = np.array([0.2, 0.4, 0.6, 0.8, 0.9])
    mu_hat = np.array([0.25, 0.5, 0.5, 0.75, 1.0])
    z = np.array([0.0, 1.0, 0.0, 1.0, 1.0])
    drawn = _drawn(monkeypatch)
    figures.target_scatter_figure({"p_true": confidence, "probe": confidence}, mu_hat, z)
    figures.target_scatter_figure({"p_true": confidence}, mu_hat, z)
    offsets = []
    for figure in drawn:
        crosses, dots = figure.axes[0].collections
        assert crosses.get_label() == "z (response)" and dots.get_label() == "mu_hat (capability)"
        assert list(crosses.get_offsets()[:, 0]) == list(confidence)
        assert np.array_equal(dots.get_offsets(), np.column_stack([confidence, mu_hat]))
        offsets.append(crosses.get_offsets()[:, 1] - z)
    jitter = offsets[0]
    assert len(set(np.round(jitter, 12))) == len(z) and np.all(np.abs(jitter) <= 0.03)
    assert np.array_equal(offsets[1], jitter)
    assert np.array_equal(drawn[0].axes[1].collections[0].get_offsets()[:, 1] - z, jitter)


def test_calibration_table_says_how_each_interval_was_made_and_where_it_does_not_cover():
    """Per row: the questions it was computed on (the NaN confidence counted missing), the sampling, the
    interval method (jackknife for the debiased ECE) and the note of the binned ECEs; the random rows
    (expectations) have neither."""
    correctness = [[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 0, 1]]
    table = pd.DataFrame(
        {
            "correctness": correctness,
            "n": 4,
            "expected_accuracy": [sum(v) / 4 for v in correctness],
            "c": [0.5, 0.3, 0.7, np.nan, 0.9, 0.4],
        }
    )
    rows = calibration_table(table, ["c"], n_resamples=20)
    capability_ece, response_ece = INTERVAL_NOTES["capability_ece"], INTERVAL_NOTES["response_ece"]
    assert capability_ece.startswith("interval does not cover") and response_ece.startswith(
        "interval does not"
    )
    notes = {"capability_ece": capability_ece, "response_ece": response_ece}
    methods = {"capability_ece_debiased": "jackknife normal"}
    own = [
        ("c", metric, 5, 1, "fixed k", methods.get(metric, "bootstrap percentile"), notes.get(metric, ""))
        for metric in (*CAPABILITY_METRICS, *RESPONSE_METRICS)
    ]
    random = [
        ("random (expected)", metric, 6, 0, "fixed k", "", "")
        for metric in ("capability_brier", "capability_brier_skill", "response_brier", "soft_auroc",
                       "response_auroc", "spearman")
    ]  # fmt: skip
    columns = ["estimator", "metric", "questions", "questions_missing", "sampling", "interval_method"]
    assert list(rows[[*columns, "interval_note"]].itertuples(index=False, name=None)) == own + random


def _fixed_k(correctness: list[list[int]], confidence: list[float]) -> pd.DataFrame:
    """A fixed-k evaluation table with one estimator, p_true."""
    return pd.DataFrame(
        {
            "correctness": correctness,
            "n": [len(v) for v in correctness],
            "expected_accuracy": [sum(v) / len(v) for v in correctness],
            "p_true": confidence,
        }
    )


def test_budget_part_draws_every_line_at_each_power_of_two_budget_up_to_the_smallest_n(monkeypatch):
    """n = 8 and 10: budgets 1, 2, 4, 8 (16 > 8); at budget 1 the uniform allocation's accuracy is the mean
    pass@1, the mean mu_hat."""
    correctness = [[1] * i + [0] * (8 - i) for i in range(8)] + [[1] * 9 + [0]]
    evaluation = _fixed_k(correctness, [0.1 * i for i in range(9)])
    inputs = SectionInputs(_computed(evaluation, "p_true"), ["p_true"], 20, 0)
    drawn = _drawn(monkeypatch)
    part = budget_part(inputs)
    assert [figure.caption for figure in part.figures] == [
        "Inference-budget allocation: exact accuracy (mean unbiased pass@b_i) at each average budget"
    ]
    (figure,) = drawn
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    uniform = "uniform (the same budget for every question)"
    assert set(lines) == {uniform, "oracle (allocates by mu_hat itself)", "p_true"}
    assert all(list(line.get_xdata()) == [1, 2, 4, 8] for line in lines.values())
    mean_pass_at_1 = np.mean([sum(v) / len(v) for v in correctness])
    assert lines[uniform].get_ydata()[0] == pytest.approx(mean_pass_at_1)


def test_candidates_of_an_adaptive_run_are_scored_with_its_unbiased_mu_squared():
    """An adaptive run's candidates carry the run's mu^2 estimates (the moment forms of the corrected Brier,
    unbiased after stopping); the leaky paper-form consistency is left out; a fixed-k run carries none."""
    looks = [4, 8]
    correctness = [[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 1, 0, 1, 1, 0], [0, 1, 0, 0, 1, 0, 0, 0]]
    evaluation = pd.DataFrame(
        {
            "correctness": correctness,
            "n": [len(v) for v in correctness],
            "expected_accuracy": [1.0, 0.0, 0.6, 0.3],
            "mu_squared_hat": [1.0, 0.0, 0.35, 0.08],
            "sampling": "adaptive (looks 4, 8, rule unanimity)",
            "looks": [looks] * 4,
            "p_true": [0.9, 0.2, 0.6, 0.4],
            "consistency_k2": [1.0, 0.0, 0.5, 0.5],
        }
    )
    computed = _computed(evaluation, "p_true", "consistency_k2")
    candidates, leaky = _candidates(SectionInputs(computed, ["p_true", "consistency_k2"], 20, 0))
    assert leaky == ["consistency_k2"]
    (candidate,) = candidates
    assert (candidate.name, candidate.target) == ("p_true", "mu_hat")
    assert list(candidate.confidence) == [0.9, 0.2, 0.6, 0.4]
    assert list(candidate.mu_hat) == [1.0, 0.0, 0.6, 0.3] and list(candidate.n) == [4, 4, 8, 8]
    assert candidate.mu_square_hat is not None and list(candidate.mu_square_hat) == [1.0, 0.0, 0.35, 0.08]
    fixed = _fixed_k([[1, 0], [1, 1]], [0.5, 0.9])
    ((plain,), _) = _candidates(SectionInputs(_computed(fixed, "p_true"), ["p_true"], 20, 0))
    assert plain.mu_square_hat is None


def test_routing_guide_names_every_leaky_line_in_one_list():
    methods = ["consistency_k2", "consistency_k4", "random", "oracle_cheap", "oracle_gain"]
    curves = pd.DataFrame(
        [{"method": m, "fraction": f, "accuracy": 0.5 + f / 4} for m in methods for f in (0.0, 0.5, 1.0)]
    )
    guide = routing_guide(routing_lines(curves), np.array([0.1, 0.2, 0.3, 0.4]), "small")
    assert guide.endswith(
        "knowing both models). consistency_k2 (leaky), consistency_k4 (leaky): the paper-form consistency "
        "draws from the samples that define mu_hat, which scores the routing, so its line is optimistic."
    )


def test_paper_table_of_folders_without_an_evaluation_task_names_them(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError) as error:
        paper_table([tmp_path / "empty", tmp_path])
    assert str(error.value) == (
        f"no evaluation task with a confidence estimator in {tmp_path / 'empty'}, {tmp_path}: "
        "nothing to tabulate"
    )


def test_section_joins_an_undeclared_confidence_task_on_question_ids_and_says_so(tmp_path):
    """A P(True) task declaring no capcal_target_task is joined on question ids, the join's row says so;
    the section's tables end with the examples."""
    _sampling_run(tmp_path, "toy_eval", 6, _evaluation())
    _ptrue_run(tmp_path, "toy_loose_ptrue", "toy_eval", 6, metadata={"capcal_task": "ptrue"})
    options = ReportOptions(n_resamples=20, consistency_ks=(2,), max_examples=2)
    (result,) = analyze_runs([tmp_path], options=options).results
    assert "p_true" in result.computed.evaluation.columns
    caption, joins = result.bookkeeping.tables[-1]
    assert caption == "Joins: matched and unmatched question ids"
    assert joins.to_dict("records") == [
        {
            "join": "toy_eval <-> toy_loose_ptrue",
            "matched": 6,
            "left": 6,
            "right": 6,
            "summary": "toy_eval <-> toy_loose_ptrue: matched 6 of 6 toy_eval questions and 6 "
            "toy_loose_ptrue records; toy_loose_ptrue declares no capcal_target_task: joined on question ids",
        }
    ]
    caption, examples = result.section.tables[-1]
    assert caption == "Examples (model text shown as text)" and len(examples) == 2


def test_activations_folder_recorded_in_a_run_is_resolved_against_its_results_file(tmp_path):
    """The ``activations`` folder a run's metadata records is the recorded path resolved against the run's
    results file (a relative one from the run's folder, with a note saying so; an absolute one that is
    missing is noted and left out), not the results file itself."""
    _sampling_run(tmp_path, "toy_eval", 3, {"activations": "acts"})
    missing = tmp_path / "nowhere"
    _sampling_run(tmp_path, "toy_other", 3, {"activations": str(missing)})
    run_folder = (tmp_path / f"{MODEL}_toy_eval").resolve()
    (run_folder / "acts").mkdir()
    data = load_report_data([tmp_path])
    (model_id,) = set(data.questions["model_id"])
    assert data.activations == {(model_id, "toy_eval"): run_folder / "acts"}
    assert sorted(data.path_notes) == sorted(
        [
            f"activations acts (relative) recorded in results_{DATE}.json: read from {run_folder / 'acts'}, "
            f"relative to the run's folder {run_folder}",
            f"activations {missing} recorded in {tmp_path / f'{MODEL}_toy_other' / f'results_{DATE}.json'}: "
            "no such file or folder",
        ]
    )


def test_bookkeeping_states_the_model_identity_and_why_it_is_not_a_checkpoint(tmp_path):
    """The appendix's "model identity" is the checkpoint fingerprint alone for a checkpoint identity, and the
    unresolved id with the reason otherwise (here: the results file records no model arguments)."""
    _sampling_run(tmp_path, "toy_eval", 6, _evaluation())
    results = _results("fp_eval", {"capcal_task": "sampling", **_evaluation()}, model="fp-model")
    results["capcal_model"] = {"fingerprint": "0123abcd", "label": "fp-model"}
    lines = [sampling_line(i, ["4"] * i + ["5"] * (8 - i), question_id=f"fp_eval/{i}") for i in range(6)]
    write_run(tmp_path, lines, task="fp_eval", folder="fp-model_fp_eval", results=results)
    options = ReportOptions(n_resamples=20, consistency_ks=(2,), max_examples=2)
    sections = analyze_runs([tmp_path], options=options).results
    assert {result.model_id: result.bookkeeping.facts for result in sections} == {
        "0123abcd": {
            "model": "fp-model",
            "model identity": "0123abcd",
            "declared relations": f"fp-model/results_{DATE}.json",
        },
        f"unresolved:{MODEL}": {
            "model": MODEL,
            "model identity": f"unresolved:{MODEL} (no model arguments in the results file)",
            "declared relations": RESULTS,
        },
    }
