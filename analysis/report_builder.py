"""``capcal report``: from lm-eval output folders to the HTML report and its Markdown summary.

For every (model, evaluation task) found in the folders, the per-question table (``analysis.runs``) is joined
with every confidence estimator that the folders hold:

- response consistency (``consistency_k{k}``, paper form; the leakage-free form is reported against its own
  held-out target in a separate table);
- verbalized confidence and P(True), capability and response forms, with parse failures counted
  (``analysis.estimators.elicited``);
- the mean of Self-Calibration's per-response P(Yes) (``selfcheck_mean``);
- a linear probe on captured activations, fitted on the matching ``*_train`` task of the same model and
  evaluated on the evaluation questions only (``analysis.estimators.probes``);
- isotonic recalibration of P(True) / verbalized confidence fitted on the ``*_train`` task's questions.

Then the metric table with bootstrap intervals, reliability diagrams, the target scatter, pass@k prediction,
budget allocation, Self-Calibration's test-time strategies (when per-response checks exist) and routing (when
two models answered the same questions) are computed and written with ``analysis.report.write_report``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.applications.budget import budget_allocation_curves
from analysis.applications.pass_at_k_prediction import dataset_curve, pass_at_k_prediction
from analysis.applications.routing import pair_models, routing_curves
from analysis.applications.test_time_scaling import test_time_scaling_curves
from analysis.calibration_table import (
    CAPABILITY_METRICS,
    RESPONSE_METRICS,
    calibration_table,
    first_response_correctness,
)
from analysis.estimators.consistency import consistency_from_table, encode_answer_classes
from analysis.estimators.elicited import attach_elicited, parse_failure_counts, read_elicited
from analysis.figures import Curve, curves_figure, reliability_figure, target_scatter_figure
from analysis.report import Figure, ReportFiles, ReportSection, format_interval, write_report
from analysis.runs import load_run

__all__ = ["ReportOptions", "build_report", "collect_estimators", "load_runs"]

TRAIN_SUFFIX = "_train"
BASELINE_STYLES = {
    "uniform": "k:",
    "random": "k:",
    "oracle": "k--",
    "oracle_cheap": "k--",
    "oracle_gain": "k-.",
}
ELICITED_COLUMNS = ("verbalized_confidence", "p_true", "verbalized_rc_confidence", "p_true_rc")


@dataclass(frozen=True)
class ReportOptions:
    n_resamples: int = 1000
    seed: int = 0
    consistency_ks: tuple[int, ...] = (5, 10, 20)
    probe_kind: str = "paper"
    max_examples: int = 8


def load_runs(output_dirs: Sequence[str | Path]) -> pd.DataFrame:
    """The per-question tables of all folders; where a (model, task) was run several times, the latest run."""
    tables = [load_run(directory) for directory in output_dirs]
    table = pd.concat(tables, ignore_index=True)
    latest = table.groupby(["model", "task"])["run_id"].transform("max")
    return table[table["run_id"] == latest].reset_index(drop=True)


def _read_all_elicited(output_dirs: Sequence[str | Path]) -> pd.DataFrame | None:
    frames = []
    for directory in output_dirs:
        try:
            frames.append(read_elicited(directory))
        except FileNotFoundError:
            continue
    if not frames:
        return None
    elicited = pd.concat(frames, ignore_index=True)
    latest = elicited.groupby(["model", "task"])["run_id"].transform("max")
    return elicited[elicited["run_id"] == latest].reset_index(drop=True)


def _short(model: str) -> str:
    """A model's display name: the last component of a checkpoint path."""
    return Path(model).name or model


def _probe_confidence(
    model_table: pd.DataFrame, eval_task: str, activations_dir: Path, options: ReportOptions
) -> tuple[np.ndarray | None, str]:
    """Probe confidences for the evaluation task's questions, fitted on the ``*_train`` task; with a note."""
    from analysis.activations import load_activations
    from analysis.estimators.probes import QuestionSplits, fit_probe

    train = model_table[model_table["task"] == eval_task + TRAIN_SUFFIX]
    evaluation = model_table[model_table["task"] == eval_task]
    if train.empty:
        return None, f"no probe: no {eval_task}{TRAIN_SUFFIX} run for this model"
    shared = set(train["question_id"]) & set(evaluation["question_id"])
    if shared:
        return None, f"no probe: {len(shared)} question(s) are in both the train and the evaluation task"
    try:
        train_features = load_activations(activations_dir, train).last_token
        eval_features = load_activations(activations_dir, evaluation).last_token
    except (KeyError, ValueError) as error:
        return None, f"no probe: {error}"
    splits = QuestionSplits.random(list(train["question_id"]), validation_fraction=0.25, test_fraction=0.0)
    probe = fit_probe(
        train_features,
        train["expected_accuracy"].to_numpy(dtype=float),
        list(train["question_id"]),
        splits,
        kind=options.probe_kind,
    )
    confidence = probe.predict(eval_features, list(evaluation["question_id"]))
    note = (
        f"probe ({options.probe_kind}, last prompt token, mean over layers): fitted on {len(splits.train)} "
        f"{eval_task}{TRAIN_SUFFIX} questions, validated on {len(splits.validation)}, evaluated on "
        f"{len(evaluation)} {eval_task} questions"
    )
    return np.asarray(confidence, dtype=float), note


def _recalibrated(
    train: pd.DataFrame, evaluation: pd.DataFrame, column: str
) -> tuple[np.ndarray | None, str | None]:
    from analysis.estimators.recalibration import fit_isotonic

    if column not in train.columns or column not in evaluation.columns:
        return None, None
    keep = train[column].notna().to_numpy()
    if keep.sum() < 10:
        return None, None
    recalibrator = fit_isotonic(
        train.loc[keep, column].to_numpy(dtype=float),
        train.loc[keep, "expected_accuracy"].to_numpy(dtype=float),
        list(train.loc[keep, "question_id"]),
    )
    values = evaluation[column].to_numpy(dtype=float)
    out = np.full(values.shape, np.nan)
    finite = np.isfinite(values)
    out[finite] = recalibrator.predict(values[finite], list(evaluation.loc[finite, "question_id"]))
    return out, f"isotonic({column}): fitted on {int(keep.sum())} {train['task'].iloc[0]} questions"


def collect_estimators(
    table: pd.DataFrame,
    elicited: pd.DataFrame | None,
    model: str,
    eval_task: str,
    activations_dir: Path | None,
    options: ReportOptions,
) -> tuple[pd.DataFrame, list[str], list[str], pd.DataFrame | None]:
    """The evaluation task's per-question table of ``model`` with one column per available estimator.

    Returns (table, estimator columns, notes, leakage-free consistency table or None).
    """
    model_table = table[table["model"] == model]
    evaluation = model_table[model_table["task"] == eval_task].reset_index(drop=True)
    train = model_table[model_table["task"] == eval_task + TRAIN_SUFFIX].reset_index(drop=True)
    notes: list[str] = []
    estimators: list[str] = []

    # k < n: the leakage-free form draws k from a pool and needs samples outside it for its target.
    ks = [k for k in options.consistency_ks if k < int(evaluation["n"].min())]
    leakage_free = None
    if ks:
        consistency = consistency_from_table(evaluation, ks=ks, seed=options.seed)
        for k in ks:
            evaluation[f"consistency_k{k}"] = consistency[f"consistency_k{k}"].to_numpy()
            estimators.append(f"consistency_k{k}")
        leakage_free = consistency
        notes.append(
            f"consistency_k{{k}}: modal-answer share among k of the n responses drawn without replacement "
            f"(paper form: the draws overlap the samples that define mu_hat); k in {ks}"
        )

    if elicited is not None:
        own = elicited[elicited["model"] == model]
        if not own.empty:
            evaluation = attach_elicited(evaluation, own)
            if not train.empty:
                train = attach_elicited(train, own)
            for column in ELICITED_COLUMNS:
                if column in evaluation.columns and evaluation[column].notna().any():
                    estimators.append(column)
            if "selfcheck_p_yes_normalized" in evaluation.columns:
                evaluation["selfcheck_mean"] = [
                    float(np.mean(values)) if isinstance(values, list) and values else np.nan
                    for values in evaluation["selfcheck_p_yes_normalized"]
                ]
                if evaluation["selfcheck_mean"].notna().any():
                    estimators.append("selfcheck_mean")
            failures = parse_failure_counts(own, evaluation)
            if not failures.empty:
                notes.append(
                    "parse failures: "
                    + "; ".join(
                        f"{row.kind} {int(row.parse_failures)}/{int(row.questions)}"
                        for row in failures.itertuples()
                        if row.task.startswith(eval_task)
                    )
                )
    for column in ("p_true", "verbalized_confidence"):
        if not train.empty and column in estimators:
            values, note = _recalibrated(train, evaluation, column)
            if values is not None:
                evaluation[f"isotonic_{column}"] = values
                estimators.append(f"isotonic_{column}")
                notes.append(note)

    if activations_dir is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            probe, note = _probe_confidence(model_table, eval_task, activations_dir, options)
        notes.append(note)
        if probe is not None:
            evaluation["probe"] = probe
            estimators.append("probe")
    return evaluation, estimators, notes, leakage_free


def _metric_table(metrics: pd.DataFrame) -> pd.DataFrame:
    metrics = metrics.assign(
        value=[
            format_interval(e, lo, hi)
            for e, lo, hi in zip(metrics.estimate, metrics.low, metrics.high, strict=True)
        ]
    )
    wide = metrics.pivot(index="estimator", columns="metric", values="value")
    order = [m for m in metrics["metric"].drop_duplicates() if m in wide.columns]
    questions = metrics.groupby("estimator")["questions"].max()
    wide = wide[order].fillna("")
    wide.insert(0, "questions", questions.reindex(wide.index))
    return wide.reset_index()


def _counts(evaluation: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    n = evaluation["n"].to_numpy(dtype=int)
    c = np.array([int(sum(vector)) for vector in evaluation["correctness"]])
    return n, c


def _capability_section(
    model: str,
    eval_task: str,
    evaluation: pd.DataFrame,
    estimators: list[str],
    notes: list[str],
    leakage_free: pd.DataFrame | None,
    options: ReportOptions,
) -> ReportSection:
    mu = evaluation["expected_accuracy"].to_numpy(dtype=float)
    z = first_response_correctness(evaluation)
    n, c = _counts(evaluation)
    section = ReportSection(
        title=f"{_short(model)} · {eval_task}",
        facts={
            "questions": len(evaluation),
            "samples per question": f"{n.min()}" if n.min() == n.max() else f"{n.min()}-{n.max()}",
            "mean expected accuracy": f"{mu.mean():.3f}",
            "questions with 0 < mu_hat < 1": f"{np.mean((mu > 0) & (mu < 1)):.1%}",
            "estimators": ", ".join(estimators) or "none",
        },
        notes=notes,
    )
    if not estimators:
        section.notes.append("no confidence estimator is available for this run")
        return section
    metrics = calibration_table(evaluation, estimators, n_resamples=options.n_resamples, seed=options.seed)
    intervals = f"{options.n_resamples} bootstrap resamples over questions, 95% intervals"
    targets = {
        "Capability calibration (target: mu_hat)": CAPABILITY_METRICS,
        "Response calibration (target: the first response's correctness z)": RESPONSE_METRICS,
    }
    for target, names in targets.items():
        part = metrics[metrics["metric"].isin(names)]
        section.tables.append((f"{target}; {intervals}", _metric_table(part)))
    if leakage_free is not None:
        lf_columns = [c for c in leakage_free.columns if c.startswith("consistency_lf_k")]
        lf_table = leakage_free.assign(
            expected_accuracy=leakage_free["mu_hat_lf"],
            n=leakage_free["n_lf"],
            correctness=evaluation["correctness"],
        )
        lf_metrics = calibration_table(
            lf_table, lf_columns, n_resamples=options.n_resamples, seed=options.seed
        )
        lf_metrics = lf_metrics[
            lf_metrics["metric"].isin(["capability_ece", "capability_brier", "soft_auroc"])
        ]
        section.tables.append(
            (
                "Leakage-free consistency (drawn from a pool disjoint from the samples defining its target)",
                _metric_table(lf_metrics),
            )
        )

    confidences = {name: evaluation[name].to_numpy(dtype=float) for name in estimators}
    section.figures.append(
        Figure(
            "Capability reliability: mean mu_hat per confidence bin",
            reliability_figure(confidences, mu, "mu_hat"),
        )
    )
    section.figures.append(
        Figure(
            "Response reliability: accuracy of the first response per confidence bin",
            reliability_figure(confidences, z, "z"),
        )
    )
    section.figures.append(
        Figure(
            "Confidence against the capability target (dots) and the response target (crosses)",
            target_scatter_figure(confidences, mu, z),
        )
    )

    complete = {name: values for name, values in confidences.items() if np.isfinite(values).all()}
    if complete:
        mse = pass_at_k_prediction(complete, n, c)
        mse_wide = mse.pivot_table(index="estimator", columns="k", values="mse").reset_index()
        mse_wide.columns = ["estimator"] + [f"MSE pass@{k}" for k in mse_wide.columns[1:]]
        section.tables.append(("pass@k prediction: instance-level MSE against the unbiased pass@k", mse_wide))
        curves = []
        for name, values in complete.items():
            curve = dataset_curve(values, n, c)
            curves.append(Curve(name, curve["k"], curve["predicted"], curve["band_low"], curve["band_high"]))
        actual = dataset_curve(c / n, n, c)
        curves.append(Curve("actual (unbiased pass@k)", actual["k"], actual["observed"], style="k--"))
        section.figures.append(
            Figure(
                "Dataset-level pass@k predicted from each estimator (95% band) vs actual",
                curves_figure(curves, "pass@k", "k", "pass@k", log_x=True),
            )
        )

        budget = budget_allocation_curves(
            complete, n, c, budgets=[b for b in (1, 2, 4, 8, 16, 32) if b <= n.min()]
        )
        budget_curves = [
            Curve(m, g["budget"], g["accuracy"], style=BASELINE_STYLES.get(m, "-"))
            for m, g in budget.groupby("method", sort=False)
        ]
        section.figures.append(
            Figure(
                "Inference-budget allocation: exact accuracy (mean unbiased pass@b_i) at each average budget",
                curves_figure(
                    budget_curves,
                    "budget allocation",
                    "samples per question (average)",
                    "accuracy",
                    log_x=True,
                ),
            )
        )

    if "selfcheck_p_yes_normalized" in evaluation.columns:
        lists = evaluation["selfcheck_p_yes_normalized"]
        if all(isinstance(v, list) and len(v) == k for v, k in zip(lists, n, strict=True)):
            answers = encode_answer_classes(list(evaluation["extracted_answers"]))
            tts = test_time_scaling_curves(
                answers, [list(v) for v in evaluation["correctness"]], [list(v) for v in lists]
            )
            tts_curves = [
                Curve(s, g["avg_samples"], g["accuracy"])
                for s, g in tts.sort_values("avg_samples").groupby("strategy", sort=False)
            ]
            section.figures.append(
                Figure(
                    "Self-Calibration test-time strategies on the per-response self-checks: "
                    "accuracy vs average samples used",
                    curves_figure(tts_curves, "test-time scaling", "samples used (average)", "accuracy"),
                )
            )
    return section


def _routing_section(table: pd.DataFrame, evaluations: dict, eval_task: str) -> ReportSection | None:
    models = [m for (m, t) in evaluations if t == eval_task]
    if len(models) < 2:
        return None
    # The routed-from model is the one whose confidences were collected (most estimators; then the less
    # accurate); the question is which of its questions to send to the other model.
    means = {m: evaluations[(m, eval_task)][0]["expected_accuracy"].mean() for m in models}
    ranked = sorted(models, key=lambda m: (-len(evaluations[(m, eval_task)][1]), means[m]))
    cheap, strong = ranked[0], ranked[1]
    cheap_table, estimators = evaluations[(cheap, eval_task)][:2]
    paired = pair_models(cheap_table, evaluations[(strong, eval_task)][0])
    by_id = cheap_table.set_index("question_id")
    confidences = {
        name: by_id.loc[paired["question_id"], name].to_numpy(dtype=float)
        for name in estimators
        if by_id[name].notna().all()
    }
    curves = routing_curves(confidences, paired["mu_cheap"], paired["mu_strong"])
    lines = [
        Curve(
            m,
            g["fraction"],
            g["accuracy"],
            style=BASELINE_STYLES.get(m, "-"),
        )
        for m, g in curves.groupby("method", sort=False)
    ]
    return ReportSection(
        title=f"Routing · {eval_task}: {_short(cheap)} -> {_short(strong)}",
        facts={
            "questions": len(paired),
            f"accuracy of {_short(cheap)}": f"{paired['mu_cheap'].mean():.3f}",
            f"accuracy of {_short(strong)}": f"{paired['mu_strong'].mean():.3f}",
        },
        notes=[
            (
                "Route the questions with the lowest confidence of the cheap model to the strong one; "
                "accuracy is the exact expected accuracy (mean mu_hat of whichever model answers)."
            ),
            *(
                [
                    f"Here the routed-to model is the less accurate one ({paired['mu_strong'].mean():.3f} < "
                    f"{paired['mu_cheap'].mean():.3f}): routing can only lose accuracy, and the curves show "
                    "how well each estimator keeps the questions the cheap model solves."
                ]
                if paired["mu_strong"].mean() < paired["mu_cheap"].mean()
                else []
            ),
        ],
        figures=[
            Figure(
                "Routing: accuracy against the fraction of questions sent to the strong model",
                curves_figure(lines, "routing", "fraction routed", "accuracy"),
            )
        ],
    )


def _examples(evaluation: pd.DataFrame, estimators: list[str], count: int) -> pd.DataFrame:
    rows = evaluation.head(count)
    frame = pd.DataFrame(
        {
            "question_id": rows["question_id"],
            "question": [str(q)[:300] for q in rows["question"]],
            "first response": [str(r[0])[:300] for r in rows["responses"]],
            "mu_hat": rows["expected_accuracy"],
        }
    )
    for name in estimators[:4]:
        frame[name] = rows[name].to_numpy(dtype=float)
    return frame


def build_report(
    output_dirs: Sequence[str | Path],
    report_dir: str | Path,
    activations_dir: str | Path | None = None,
    options: ReportOptions | None = None,
    title: str = "capcal report",
) -> ReportFiles:
    """Write the report for the lm-eval output folders ``output_dirs`` into ``report_dir``."""
    options = options or ReportOptions()
    table = load_runs(output_dirs)
    elicited = _read_all_elicited(output_dirs)
    activations = Path(activations_dir) if activations_dir else None
    sections: list[ReportSection] = []
    evaluations: dict[tuple[str, str], tuple[pd.DataFrame, list[str]]] = {}
    pairs = table[["model", "task"]].drop_duplicates()
    for model, task in pairs.itertuples(index=False):
        if task.endswith(TRAIN_SUFFIX):
            continue
        evaluation, estimators, notes, leakage_free = collect_estimators(
            table, elicited, model, task, activations, options
        )
        evaluations[(model, task)] = (evaluation, estimators)
        section = _capability_section(model, task, evaluation, estimators, notes, leakage_free, options)
        section.tables.append(
            ("Examples (model text shown as text)", _examples(evaluation, estimators, options.max_examples))
        )
        sections.append(section)
    for eval_task in sorted({task for _, task in evaluations}):
        routing = _routing_section(table, evaluations, eval_task)
        if routing is not None:
            sections.append(routing)
    return write_report(sections, report_dir, title=title)
