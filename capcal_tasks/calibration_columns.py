r"""The results-table columns of the ``capcal_<dataset>_calibration`` tasks, computed from per-question data.

For each question the run gives: its k sampled responses scored by the dataset's checker (correctness
z_1..z_k and the extracted answers), P(True) (when the model gives log-likelihoods) and one verbalized
confidence (None when it did not parse). Per confidence source s, with confidence c_i and capability target
mu_hat_i of question i (N questions):

- ``s_brier`` (lower is better; 0 = perfect): capability Brier, mean_i (c_i - mu_hat_i)^2;
- ``s_corrected_brier`` (lower): mean_i [(c_i - mu_hat_i)^2 - mu_hat_i (1 - mu_hat_i) / (n_i - 1)], unbiased
  for mean_i (c_i - mu_i)^2 (the finite-sample noise of mu_hat removed; may be slightly negative);
- ``s_ece`` (lower): capability ECE, 10 equal-width bins, the last closed,
  sum_b (n_b / N) |mean_b mu_hat - mean_b c|. Biased upward by the bins' noise (by +0.02 to +0.15 at
  N = 50 to 100, k = 1 to 32, for a calibrated forecast, in simulation) and, for a nearly calibrated
  forecast, its standard error does not give an interval that covers: compare models with
  ``s_ece_debiased`` (docs/methods.md, "The bias of binned ECE");
- ``s_ece_debiased`` (lower; 0 = calibrated, may be slightly negative): the debiased ECE of Kumar et al.
  2019 (``capcal_metrics.debiased_expected_calibration_error``), same bins, against the true mu;
- ``s_auroc`` (higher; 0.5 = no discrimination): soft-label AUROC,
  sum_ij w_ij [1(c_i > c_j) + 1(c_i = c_j) / 2] / sum_ij w_ij with w_ij = mu_hat_i (1 - mu_hat_j);
- ``s_brier_skill`` (higher): Brier skill over the no-information forecast, the constant at the task's base
  rate mean mu_hat: BSS = 1 - Brier(c, mu_hat) / Brier(mean mu_hat, mu_hat). 1 = perfect, 0 = no better
  than announcing the base rate for every question, negative = worse than that (unbounded below);
- ``s_corrected_brier_skill`` (higher; the leaderboard column): the finite-k-corrected skill
  1 - corrected Brier / S_hat, S_hat = mean_i (mu_hat_i - mean mu_hat)^2 - (1 - 1/N) mean_i
  mu_hat_i (1 - mu_hat_i) / (n_i - 1) the unbiased estimate of the variance of mu over the questions
  (``capcal_metrics.corrected_brier_skill_score``): the skill against the true mu, about 1 for c = mu even
  at k = 4, where the uncorrected skill cannot reach 1.

Sources: ``ptrue`` (P(True), target mu_hat from all k samples), ``verbalized`` (over the questions whose
confidence parsed; target mu_hat from all k samples) and ``consistency`` (response consistency, leakage-free:
each question's k responses are split at random into a draw pool of floor(k/2) responses, the consistency is
the share of the most common extracted answer among the pool's responses, and the target mu_hat and n_i come
from the other k - floor(k/2) responses only; ``capcal_metrics.consistency.leakage_free_consistency`` with
seed 0; needs k >= 4). Beside them: ``expected_accuracy`` (higher; mean mu_hat over all k samples) and
``verbalized_parse_failure_rate`` (lower; share of questions without a parsable verbalized confidence). The
metric functions are capcal_metrics'.

Undefined statistics, three cases (the reasons are in :class:`ColumnTable` and the results JSON's
``configs[task]["capcal_calibration"]``):

- **The targets leave nothing to measure** (``left_out``): AUROC when no question is solved or every one is
  (every mu_hat 0, or every mu_hat 1), the skill scores when the base-rate variance is 0 (every mu_hat equal,
  up to rounding) or, corrected, the estimated variance of mu is <= 0 (the spread of mu_hat is sampling
  noise). That column is left out of the task's row (no item), so a group's mean of it is the mean over the
  tasks where it is defined, and the task's configs say which columns it left out and why. A model that
  solves no AIME question thus keeps every group AUROC and skill column: it is measured on the tasks that have
  something to discriminate.
- **The run cannot give it** (``undefined``): fewer than two questions with the confidence, P(True) not
  requested, consistency with k < 4, a source the run cannot ask for (``unavailable``: a wrapped task's
  prompt that does not allow the verbalized confidence, or its pipeline that extracts no answer class). The
  column is NaN in every row (``nan`` in lm-eval's table, ``NaN`` in
  the results JSON), and so is a group's mean over it: a model that cannot be scored on a source is not
  ranked on it.
- **The value exists, its standard error does not** (``stderr_undefined``): the statistic is defined on all N
  questions but not without one of them (a leave-one-out subset whose targets are degenerate), so the
  jackknife fails. The value is kept; every question's item is the value and the column is aggregated by
  :func:`value_without_standard_error`, which lm-eval does not know, so its standard error is "N/A" (and so
  is a group's).

Bookkeeping values (samples per question k, whether P(True) was requested) are not columns: lm-eval would
mark them "higher is better" and average them like scores; they are in the task's ``configs`` entry.

Standard errors. lm-eval gives a standard error only to a few built-in aggregations, so every column is
aggregated with lm-eval's ``mean`` and each question contributes one item: for a per-question column the
question's value, for a calibration statistic theta its jackknife influence value

    item_i = theta - (N - 1) (theta_(-i) - mean_j theta_(-j)),

with theta_(-i) the statistic without question i. The items average to theta exactly, and lm-eval's standard
error of their mean, sd(items) / sqrt(N), is the jackknife standard error
sqrt((N - 1) / N sum_i (theta_(-i) - mean_j theta_(-j))^2). For a statistic that is itself a mean of
per-question terms (Brier, corrected Brier) item_i is that term and the standard error is the usual one.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from capcal_metrics import (
    UndefinedMetricWarning,
    base_rate_variance,
    brier_score,
    brier_skill_score,
    corrected_brier_skill_score,
    corrected_capability_brier_score,
    debiased_expected_calibration_error,
    expected_calibration_error,
    jackknife_items,
    leave_one_out_values,
    soft_label_auroc,
)
from capcal_metrics.consistency import leakage_free_consistency

__all__ = [
    "COLUMNS",
    "CONSISTENCY_SEED",
    "MIN_SAMPLES_FOR_CONSISTENCY",
    "SOURCES",
    "STATISTICS",
    "STDERR_DOES_NOT_COVER",
    "Column",
    "ColumnTable",
    "QuestionData",
    "SourceStatistics",
    "calibration_columns",
    "source_statistics",
    "value_without_standard_error",
]

logger = logging.getLogger(__name__)

SOURCES = ("ptrue", "verbalized", "consistency")
CONSISTENCY_SEED = 0
MIN_SAMPLES_FOR_CONSISTENCY = 4  # a pool of >= 2 responses and >= 2 target responses


# statistic suffix -> (function of (confidence, mu_hat, n), higher is better)
STATISTICS: dict[str, tuple[Callable[[np.ndarray, np.ndarray, np.ndarray], float], bool]] = {
    "brier": (lambda c, mu, n: brier_score(c, mu), False),
    "corrected_brier": (corrected_capability_brier_score, False),
    "ece": (lambda c, mu, n: expected_calibration_error(c, mu), False),
    "ece_debiased": (lambda c, mu, n: debiased_expected_calibration_error(c, mu), False),
    "auroc": (lambda c, mu, n: soft_label_auroc(c, mu), True),
    "brier_skill": (lambda c, mu, n: brier_skill_score(c, mu), True),
    "corrected_brier_skill": (corrected_brier_skill_score, True),
}


# Columns whose standard error does not give an interval that covers (simulation, docs/methods.md), and why:
# written beside the bookkeeping in the results JSON (configs[task]["capcal_calibration"]).
STDERR_DOES_NOT_COVER = {
    f"{source}_ece": (
        "binned ECE is biased upward by its bin noise: for a nearly calibrated forecast value +- 1.96 stderr "
        "does not cover the true ECE (0.02-0.28 of the time in simulation); "
        f"use {source}_ece_debiased (docs/methods.md, The bias of binned ECE)"
    )
    for source in SOURCES
}


@dataclass(frozen=True)
class Column:
    """One column of the results table: its metric name and direction."""

    name: str
    higher_is_better: bool


COLUMNS: tuple[Column, ...] = (
    Column("expected_accuracy", True),
    Column("verbalized_parse_failure_rate", False),
    *(
        Column(f"{source}_{statistic}", higher)
        for source in SOURCES
        for statistic, (_, higher) in STATISTICS.items()
    ),
)


@dataclass(frozen=True)
class QuestionData:
    """What one question of a calibration run gives.

    ``correctness`` and ``extracted_answers``: the k sampled responses as the dataset's checker scored them;
    ``p_true``: P(True), None when it was not requested; ``verbalized``: the parsed verbalized confidence,
    None when it did not parse.
    """

    correctness: Sequence[int]
    extracted_answers: Sequence[str | None]
    p_true: float | None
    verbalized: float | None


@dataclass(frozen=True)
class SourceStatistics:
    """The statistics of one confidence source on its questions.

    ``items``: column -> per-question items (jackknife influence values, or the value repeated where its
    standard error is undefined); ``left_out``, ``undefined`` and ``stderr_undefined``: column -> reason
    (see the module docstring)."""

    items: dict[str, np.ndarray]
    left_out: dict[str, str]
    undefined: dict[str, str]
    stderr_undefined: dict[str, str]


def _degenerate_targets(statistic: str, mu_hat: np.ndarray, n: np.ndarray) -> str | None:
    """Why the targets leave ``statistic`` nothing to measure, or None."""
    size = len(mu_hat)
    if statistic == "auroc" and (np.all(mu_hat == 0.0) or np.all(mu_hat == 1.0)):
        solved = "no question" if mu_hat[0] == 0.0 else "every question"
        return f"{solved} of the {size} is solved (every mu_hat is {mu_hat[0]:g}): nothing to discriminate"
    if statistic in ("brier_skill", "corrected_brier_skill"):
        if base_rate_variance(mu_hat) == 0.0:
            return (
                f"every one of the {size} questions has mu_hat = {mu_hat[0]:.4g}: the base rate explains "
                "everything (no variance for a skill to explain)"
            )
        if statistic == "corrected_brier_skill" and (variance := base_rate_variance(mu_hat, n)) <= 0.0:
            return (
                f"the estimated variance of mu over the {size} questions is {variance:.3g} <= 0: the spread "
                "of mu_hat is within its sampling noise (no variance for a skill to explain)"
            )
    return None


def source_statistics(
    source: str, confidence: np.ndarray, mu_hat: np.ndarray, n: np.ndarray, task: str = ""
) -> SourceStatistics:
    """The statistics of ``source`` defined on these questions, with the reasons of the others (each also
    logged as a warning)."""
    result = SourceStatistics({}, {}, {}, {})
    size = len(confidence)
    if size < 2:
        reason = f"needs at least 2 questions with a {source} confidence, got {size}"
        result.undefined.update({f"{source}_{name}": reason for name in STATISTICS})
    for name, (statistic, _) in STATISTICS.items() if size >= 2 else ():
        column = f"{source}_{name}"
        items = jackknife_items(statistic, confidence, mu_hat, n)
        if items is not None:
            result.items[column] = items
            continue
        degenerate = _degenerate_targets(name, mu_hat, n)
        if degenerate is not None:
            result.left_out[column] = f"{degenerate}; left out of the task's row and of group means"
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            value = float(statistic(confidence, mu_hat, n))
        if not np.isfinite(value):
            result.undefined[column] = f"undefined on these {size} questions"
            continue
        failing = np.flatnonzero(~np.isfinite(leave_one_out_values(statistic, confidence, mu_hat, n)))
        example = "; ".join(
            f"without question {i}: {_degenerate_targets(name, np.delete(mu_hat, i), np.delete(n, i))}"
            for i in failing[:1]
        )
        result.items[column] = np.full(size, value)
        result.stderr_undefined[column] = (
            f"the jackknife needs the statistic without each question, and it is undefined without "
            f"{len(failing)} of the {size} ({example}); the value is kept, its standard error is N/A"
        )
    label = task or "calibration"
    for column, reason in result.left_out.items():
        logger.warning("%s: %s is left out: %s", label, column, reason)
    for column, reason in result.undefined.items():
        logger.warning("%s: %s is NaN: %s", label, column, reason)
    for column, reason in result.stderr_undefined.items():
        logger.warning("%s: %s has no standard error: %s", label, column, reason)
    return result


def value_without_standard_error(items: Sequence[float]) -> float:
    """The mean of a column's items, as lm-eval's ``mean``, under another name: lm-eval computes standard
    errors only for aggregations it knows, so a column aggregated by this one reports "N/A"."""
    return float(sum(items) / len(items))


@dataclass(frozen=True)
class ColumnTable:
    """The calibration columns of one run.

    ``rows``: one dict of column items per question (in order); the mean of each column's items is its value.
    Every column of :data:`COLUMNS` is in every row except those in ``left_out`` (in no row) and the
    verbalized statistics, which only the questions whose verbalized confidence parsed contribute to; an
    ``undefined`` column's items are NaN. ``left_out``, ``undefined`` and ``stderr_undefined``: column ->
    reason (module docstring). ``samples_per_question`` (k) and ``ptrue_requested``: bookkeeping for the
    task's config, not columns.
    """

    rows: list[dict[str, float]]
    undefined: dict[str, str]
    samples_per_question: int
    ptrue_requested: bool
    left_out: dict[str, str]
    stderr_undefined: dict[str, str]


def _answer_labels(questions: Sequence[QuestionData]) -> np.ndarray:
    """(N, k) integer answer classes: equal extracted answers of a question share a label, and every response
    without an extracted answer (None) is one more class of its own (the paper's rule)."""
    rows = []
    for question in questions:
        classes: dict[str | None, int] = {}
        rows.append([classes.setdefault(answer, len(classes)) for answer in question.extracted_answers])
    return np.array(rows, dtype=np.int64)


def _consistency(questions: Sequence[QuestionData]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Leakage-free consistency (pool of floor(k/2) responses) and its disjoint target mu_hat and n."""
    k = len(questions[0].correctness)
    pool = k // 2
    correctness = np.array([q.correctness for q in questions], dtype=np.int64)
    free = leakage_free_consistency(
        _answer_labels(questions), correctness, pool, pool_size=pool, seed=CONSISTENCY_SEED
    )
    return free.confidence, free.mu_hat, free.n_target.astype(np.float64)


def calibration_columns(
    questions: Sequence[QuestionData], task: str = "", unavailable: Mapping[str, str] | None = None
) -> ColumnTable:
    """The calibration columns' items per question, with the reasons of the undefined (NaN) columns.

    ``unavailable``: source (``verbalized``, ``consistency``) -> why the run cannot give it at all (a wrapped
    task whose prompt does not allow the verbalized confidence, or whose pipeline extracts no answer:
    ``capcal_tasks.sampled_calibration``); its columns are NaN with that reason (for ``verbalized`` also
    ``verbalized_parse_failure_rate``: nothing was asked, so nothing failed to parse)."""
    unavailable = dict(unavailable or {})
    unknown = sorted(set(unavailable) - {"verbalized", "consistency"})
    if unknown:
        raise ValueError(
            f"calibration_columns: unavailable names {unknown[0]!r}, not verbalized or consistency"
        )
    if not questions:
        raise ValueError("calibration_columns: no questions")
    ks = {len(q.correctness) for q in questions}
    if len(ks) != 1 or min(ks) < 2:
        raise ValueError(
            f"calibration_columns: every question needs the same k >= 2 samples, got {sorted(ks)}"
        )
    k = ks.pop()
    correctness = np.array([q.correctness for q in questions], dtype=np.float64)
    mu_hat = correctness.mean(axis=1)
    n = np.full(len(questions), float(k))
    with_ptrue = [q.p_true is not None for q in questions]
    if any(with_ptrue) and not all(with_ptrue):
        raise ValueError("calibration_columns: P(True) is given for some questions only")
    parsed = np.array([q.verbalized is not None for q in questions])
    rows: list[dict[str, float]] = [
        {"expected_accuracy": float(mu_hat[i]), "verbalized_parse_failure_rate": float(not parsed[i])}
        for i in range(len(questions))
    ]
    undefined: dict[str, str] = {}
    left_out: dict[str, str] = {}
    stderr_undefined: dict[str, str] = {}

    def add(source: str, statistics: SourceStatistics, positions: np.ndarray):
        for name, items in statistics.items.items():
            for position, item in zip(positions, items, strict=True):
                rows[position][name] = float(item)
        undefined.update(statistics.undefined)
        left_out.update(statistics.left_out)
        stderr_undefined.update(statistics.stderr_undefined)

    everyone = np.arange(len(questions))
    if all(with_ptrue):
        p_true = np.array([q.p_true for q in questions], dtype=np.float64)
        add("ptrue", source_statistics("ptrue", p_true, mu_hat, n, task), everyone)
    else:
        reason = "P(True) was not requested (the model gives no log-likelihoods, or metadata ptrue is false)"
        undefined.update({f"ptrue_{name}": reason for name in STATISTICS})
        logger.warning("%s: the ptrue_* columns are NaN: %s", task or "calibration", reason)
    for source, reason in unavailable.items():
        names = [f"{source}_{name}" for name in STATISTICS]
        names += ["verbalized_parse_failure_rate"] if source == "verbalized" else []
        undefined.update({column: reason for column in names})
        logger.warning("%s: the %s_* columns are NaN: %s", task or "calibration", source, reason)
    if "verbalized" not in unavailable:
        verbalized = np.array([q.verbalized for q in questions if q.verbalized is not None], dtype=np.float64)
        add(
            "verbalized",
            source_statistics("verbalized", verbalized, mu_hat[parsed], n[parsed], task),
            everyone[parsed],
        )
    if "consistency" in unavailable:  # NaN with the reason given (above)
        pass
    elif k >= MIN_SAMPLES_FOR_CONSISTENCY:
        add("consistency", source_statistics("consistency", *_consistency(questions), task), everyone)
    else:
        reason = (
            f"k = {k} samples per question; the leakage-free consistency needs k >= "
            f"{MIN_SAMPLES_FOR_CONSISTENCY}"
        )
        undefined.update({f"consistency_{name}": reason for name in STATISTICS})
        logger.warning("%s: the consistency_* columns are NaN: %s", task or "calibration", reason)
    for column in undefined:  # NaN in every row: the column exists, and so does every mean over it
        for row in rows:
            row[column] = float("nan")
    return ColumnTable(
        rows,
        dict(sorted(undefined.items())),
        k,
        all(with_ptrue),
        dict(sorted(left_out.items())),
        dict(sorted(stderr_undefined.items())),
    )
