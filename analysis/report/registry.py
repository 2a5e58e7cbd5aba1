"""The report's confidence estimators, registered in one table: adding an estimator is one entry.

Each :class:`Estimator` names a compute function that receives an :class:`EstimatorContext` (one model's
evaluation questions, with the elicited confidences already joined, and the calibration split chosen for them)
and returns the confidence column(s) it adds, notes, and, for a fitted estimator, what it was trained on. The
``target`` says what the estimator estimates (the capability target mu_hat or the correctness of one response)
and ``sections`` in which parts of the report it appears (all of them by default).

========================  ===========  ===============================================================
estimator                 target       computed from
========================  ===========  ===============================================================
``consistency_k{k}``      capability   modal-answer share among k of the n sampled responses
``verbalized_confidence`` capability   verbalized confidence, capability form (a confidence task)
``p_true``                capability   P(True), capability form
``verbalized_rc_...``     response     verbalized confidence on the first response
``p_true_rc``             response     P(True) on the first response
``selfcheck_mean``        response     mean of Self-Calibration's per-response P(Yes)
``isotonic_p_true``       capability   P(True) recalibrated by isotonic regression on the calibration split
``isotonic_verbalized_.`` capability   the same for verbalized confidence
``probe``                 capability   linear probe on prompt activations, fitted on the calibration split
========================  ===========  ===============================================================
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.estimators.adaptive import adaptive_leakage_free_table, first_look_table
from analysis.estimators.consistency import consistency_from_table
from analysis.estimators.probes import QuestionSplits, fit_probe
from analysis.estimators.recalibration import fit_isotonic
from analysis.runs.activations import load_activations

__all__ = [
    "ALL_SECTIONS",
    "BUDGET",
    "CALIBRATION_TABLES",
    "EXAMPLES",
    "PASS_AT_K",
    "ROUTING",
    "ESTIMATORS",
    "LEAKY",
    "CalibrationData",
    "Estimator",
    "EstimatorContext",
    "EstimatorResult",
    "compute_estimators",
]

CALIBRATION_TABLES, PASS_AT_K, BUDGET, ROUTING, EXAMPLES = (
    "calibration",
    "pass@k",
    "budget",
    "routing",
    "examples",
)
ALL_SECTIONS = frozenset({CALIBRATION_TABLES, PASS_AT_K, BUDGET, ROUTING, EXAMPLES})
MIN_RECALIBRATION_QUESTIONS = 10
# The paper-form consistency: its draws overlap the samples that define mu_hat, so it is scored (and routes)
# partly against itself; never ranked, and marked "(leaky)" wherever it is shown.
LEAKY = re.compile(r"consistency_k\d+$")


@dataclass(frozen=True)
class CalibrationData:
    """The questions a fitted estimator is trained on for one (model, evaluation task)."""

    tasks: tuple[str, ...]  # the calibration split(s) that have runs for this model
    table: pd.DataFrame  # their questions (elicited confidences joined), evaluation questions removed
    dropped: int  # calibration questions that are also evaluation questions (removed)
    missing: tuple[str, ...]  # declared/chosen calibration splits without a run for this model
    domain: str  # in-domain, cross-domain or mixed-domain
    chosen_by: str  # where the choice comes from: the declaring file, or "override"

    def label(self) -> str:
        """What a fitted estimator was trained on, e.g. ``capcal_math_train (16 questions, cross-domain)``."""
        text = f"{' + '.join(self.tasks)} ({len(self.table)} questions, {self.domain}, {self.chosen_by}"
        if self.dropped:
            text += f"; {self.dropped} question(s) also in the evaluation set dropped"
        return text + ")"


@dataclass
class EstimatorContext:
    """What an estimator's compute function sees for one (model, evaluation task)."""

    model: str
    task: str
    evaluation: pd.DataFrame  # the evaluation questions; estimators' columns are added as they are computed
    calibration: CalibrationData | None
    activations_dir: Path | None
    consistency_ks: tuple[int, ...] = (5, 10, 20)
    probe_kind: str = "paper"
    seed: int = 0
    answer_classes: bool = True  # False: a wrapped lm-eval task scoring whole responses (no consistency)


@dataclass
class EstimatorResult:
    """Confidence columns (one value per evaluation question, NaN where none), notes, and for a fitted
    estimator the label of its training data; ``extra`` holds side tables (the leakage-free consistency)."""

    columns: dict[str, np.ndarray] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    trained_on: str | None = None
    extra: dict[str, pd.DataFrame] = field(default_factory=dict)
    trained_questions: int | None = None  # a fitted estimator: the questions its parameters were fitted on


@dataclass(frozen=True)
class Estimator:
    """One registry entry."""

    name: str
    compute: Callable[[EstimatorContext], EstimatorResult]
    target: str  # "capability" or "response"
    sections: frozenset[str] = ALL_SECTIONS


def consistency(context: EstimatorContext) -> EstimatorResult:
    """Response consistency for each k < n (paper form), and the leakage-free form as a side table. An
    adaptive run's consistency uses each question's first l_1 samples only (``first_look_table``): they were
    drawn before any stopping decision; its leakage-free target takes every sample outside the draw pool,
    unbiased given the pool (``adaptive_leakage_free_table``)."""
    if not context.answer_classes:  # capcal_tasks.sampled_protocol.has_answer_classes
        return EstimatorResult(
            notes=["consistency: left out, the task's responses reach its scorer whole (no answer classes)"]
        )
    evaluation = first_look_table(context.evaluation)
    ks = [k for k in context.consistency_ks if k < int(evaluation["n"].min())]
    if not ks:
        return EstimatorResult(notes=[f"consistency: no k in {list(context.consistency_ks)} is below n"])
    table = consistency_from_table(evaluation, ks=ks, seed=context.seed)
    table = adaptive_leakage_free_table(table, context.evaluation)
    return EstimatorResult(
        columns={f"consistency_k{k}": table[f"consistency_k{k}"].to_numpy(dtype=float) for k in ks},
        notes=[
            "consistency_k{k}: modal-answer share among k of the n responses drawn without replacement "
            f"(paper form: the draws overlap the samples that define mu_hat); k in {ks}"
        ],
        extra={"leakage_free": table},
    )


def elicited(column: str) -> Callable[[EstimatorContext], EstimatorResult]:
    """An elicited confidence, already joined to the evaluation questions (``attach_elicited``)."""

    def read(context: EstimatorContext) -> EstimatorResult:
        values = context.evaluation.get(column)
        if values is None or not values.notna().any():
            return EstimatorResult()
        return EstimatorResult(columns={column: values.to_numpy(dtype=float)})

    read.__name__ = f"elicited_{column}"
    return read


def selfcheck_mean(context: EstimatorContext) -> EstimatorResult:
    """The mean of Self-Calibration's normalised per-response P(Yes) over a question's responses."""
    lists = context.evaluation.get("selfcheck_p_yes_normalized")
    if lists is None:
        return EstimatorResult()
    values = np.array([float(np.mean(v)) if isinstance(v, list) and v else np.nan for v in lists])
    return (
        EstimatorResult(columns={"selfcheck_mean": values})
        if np.isfinite(values).any()
        else EstimatorResult()
    )


def isotonic(column: str) -> Callable[[EstimatorContext], EstimatorResult]:
    """Isotonic regression of mu_hat on ``column``, fitted on the calibration split, applied to the
    evaluation questions."""

    def fit(context: EstimatorContext) -> EstimatorResult:
        name = f"isotonic_{column}"
        calibration, evaluation = context.calibration, context.evaluation
        if column not in evaluation.columns or not evaluation[column].notna().any() or calibration is None:
            return EstimatorResult()  # (no calibration split: the section says so once for all estimators)
        if column not in calibration.table.columns:
            return EstimatorResult(notes=[f"no {name}: no {column} on the calibration split"])
        train = calibration.table
        keep = train[column].notna().to_numpy()
        if keep.sum() < MIN_RECALIBRATION_QUESTIONS:
            return EstimatorResult(
                notes=[f"no {name}: {int(keep.sum())} calibration questions with {column} (needs 10)"]
            )
        recalibrator = fit_isotonic(
            train.loc[keep, column].to_numpy(dtype=float),
            train.loc[keep, "expected_accuracy"].to_numpy(dtype=float),
            list(train.loc[keep, "question_id"]),
        )
        values = evaluation[column].to_numpy(dtype=float)
        out = np.full(values.shape, np.nan)
        finite = np.isfinite(values)
        out[finite] = recalibrator.predict(values[finite], list(evaluation.loc[finite, "question_id"]))
        label = f"{calibration.label()}; fitted on {int(keep.sum())} questions with {column}"
        return EstimatorResult(columns={name: out}, trained_on=label, trained_questions=int(keep.sum()))

    fit.__name__ = f"isotonic_{column}"
    return fit


PROBE_VALIDATION_FRACTION = 0.25  # of the calibration split, held out to choose the probe's settings


def probe_training_questions(calibration_questions: int) -> int:
    """The questions the probe is fitted on out of ``calibration_questions`` (the rest validate it)."""
    return calibration_questions - int(round(PROBE_VALIDATION_FRACTION * calibration_questions))


def probe(context: EstimatorContext) -> EstimatorResult:
    """The linear probe on the last prompt token's activations (mean over layers), fitted on the calibration
    split (a quarter held out for validation) and evaluated on the evaluation questions."""
    if context.activations_dir is None:
        return EstimatorResult()
    calibration = context.calibration
    if calibration is None:
        return EstimatorResult()
    if calibration.table.empty:
        return EstimatorResult(notes=["no probe: the calibration split has no questions left"])
    train, evaluation = calibration.table, context.evaluation
    try:
        train_features = load_activations(context.activations_dir, train).last_token
        eval_features = load_activations(context.activations_dir, evaluation).last_token
    except (KeyError, ValueError) as error:
        return EstimatorResult(notes=[f"no probe: {error.args[0] if error.args else error}"])
    splits = QuestionSplits.random(
        list(train["question_id"]), validation_fraction=PROBE_VALIDATION_FRACTION, test_fraction=0.0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = fit_probe(
            train_features,
            train["expected_accuracy"].to_numpy(dtype=float),
            list(train["question_id"]),
            splits,
            kind=context.probe_kind,
        )
    confidence = np.asarray(fitted.predict(eval_features, list(evaluation["question_id"])), dtype=float)
    label = (
        f"{calibration.label()}; {context.probe_kind} probe on the last prompt token (mean over layers), "
        f"{len(splits.train)} questions fitted, {len(splits.validation)} validated, evaluated on "
        f"{len(evaluation)} {context.task} questions"
    )
    return EstimatorResult(
        columns={"probe": confidence}, trained_on=label, trained_questions=len(splits.train)
    )


ESTIMATORS: tuple[Estimator, ...] = (
    Estimator("consistency", consistency, "capability"),
    Estimator("verbalized_confidence", elicited("verbalized_confidence"), "capability"),
    Estimator("p_true", elicited("p_true"), "capability"),
    Estimator("verbalized_rc_confidence", elicited("verbalized_rc_confidence"), "response"),
    Estimator("p_true_rc", elicited("p_true_rc"), "response"),
    Estimator("selfcheck_mean", selfcheck_mean, "response"),
    Estimator("isotonic_p_true", isotonic("p_true"), "capability"),
    Estimator("isotonic_verbalized_confidence", isotonic("verbalized_confidence"), "capability"),
    Estimator("probe", probe, "capability"),
)


@dataclass
class ComputedEstimators:
    """The evaluation table with one column per computed estimator, and what the report says about them."""

    evaluation: pd.DataFrame
    columns: dict[str, Estimator]  # confidence column -> its registry entry
    notes: list[str]
    trained_on: dict[str, str]  # fitted estimator's column -> what it was trained on
    extra: dict[str, pd.DataFrame]
    trained_questions: dict[str, int] = field(default_factory=dict)  # fitted column -> questions fitted on
    parse_failures: pd.DataFrame | None = None  # ``parse_failure_counts`` of the confidences scoring the task
    not_computed: list[str] = field(default_factory=list)  # an estimator lost for want of an input, and why

    def in_section(self, section: str) -> list[str]:
        return [column for column, entry in self.columns.items() if section in entry.sections]


def compute_estimators(
    context: EstimatorContext, estimators: tuple[Estimator, ...] = ESTIMATORS
) -> ComputedEstimators:
    """Run every registered estimator in order (later entries see earlier columns, e.g. isotonic P(True))."""
    context.evaluation = context.evaluation.reset_index(drop=True)
    out = ComputedEstimators(context.evaluation, {}, [], {}, {})
    for entry in estimators:
        result = entry.compute(context)
        for column, values in result.columns.items():
            context.evaluation[column] = values
            out.columns[column] = entry
            if result.trained_on is not None:
                out.trained_on[column] = result.trained_on
            if result.trained_questions is not None:
                out.trained_questions[column] = result.trained_questions
        out.notes.extend(result.notes)
        out.extra.update(result.extra)
    out.evaluation = context.evaluation
    return out
