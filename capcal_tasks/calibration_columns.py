r"""The results-table columns of the ``capcal_<dataset>_calibration`` tasks, computed from per-question data.

For each question the run gives: its k sampled responses scored by the dataset's checker (correctness
z_1..z_k and the extracted answers), P(True) (when the model gives log-likelihoods) and one verbalized
confidence (None when it did not parse). Per confidence source s, with confidence c_i and capability target
mu_hat_i of question i (N questions):

- ``s_brier`` (lower is better): capability Brier, mean_i (c_i - mu_hat_i)^2;
- ``s_corrected_brier`` (lower): mean_i [(c_i - mu_hat_i)^2 - mu_hat_i (1 - mu_hat_i) / (n_i - 1)], unbiased
  for mean_i (c_i - mu_i)^2 (the finite-sample noise of mu_hat removed; may be slightly negative);
- ``s_ece`` (lower): capability ECE, 10 equal-width bins, the last closed,
  sum_b (n_b / N) |mean_b mu_hat - mean_b c|;
- ``s_auroc`` (higher): soft-label AUROC, sum_ij w_ij [1(c_i > c_j) + 1(c_i = c_j) / 2] / sum_ij w_ij with
  w_ij = mu_hat_i (1 - mu_hat_j);
- ``s_brier_skill`` (higher): Brier skill score against the uniform-random baseline,
  BSS = 1 - Brier / Brier_random, Brier_random = mean_i (mu_hat_i^2 - mu_hat_i + 1/3), the expected Brier of
  c_i ~ U(0, 1); 0 = no better than random confidences, 1 = perfect.

Sources: ``ptrue`` (P(True), target mu_hat from all k samples), ``verbalized`` (over the questions whose
confidence parsed; target mu_hat from all k samples) and ``consistency`` (response consistency, leakage-free:
each question's k responses are split at random into a draw pool of floor(k/2) responses, the consistency is
the share of the most common extracted answer among the pool's responses, and the target mu_hat and n_i come
from the other k - floor(k/2) responses only; ``capcal_metrics.consistency.leakage_free_consistency`` with
seed 0; needs k >= 4). Beside them: ``expected_accuracy`` (mean mu_hat over all k samples),
``n_samples`` (k), ``verbalized_parse_failure_rate`` (share of questions without a parsable verbalized
confidence) and ``ptrue_available`` (1 when P(True) was requested, 0 when the model gives no
log-likelihoods). The metric functions are capcal_metrics'.

Standard errors. lm-eval gives a standard error only to a few built-in aggregations, so every column is
aggregated with lm-eval's ``mean`` and each question contributes one item: for a per-question column the
question's value, for a calibration statistic theta its jackknife influence value

    item_i = theta - (N - 1) (theta_(-i) - mean_j theta_(-j)),

with theta_(-i) the statistic without question i. The items average to theta exactly, and lm-eval's standard
error of their mean, sd(items) / sqrt(N), is the jackknife standard error
sqrt((N - 1) / N sum_i (theta_(-i) - mean_j theta_(-j))^2). For a statistic that is itself a mean of
per-question terms (Brier, corrected Brier) item_i is that term and the standard error is the usual one.
A statistic that is undefined on the run or on a leave-one-out subset (fewer than two questions, AUROC when
every target is 0 or every target is 1) is left out of the table with a warning.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from capcal_metrics import (
    UndefinedMetricWarning,
    brier_score,
    corrected_capability_brier_score,
    expected_calibration_error,
    random_baseline_brier_score,
    soft_label_auroc,
)
from capcal_metrics.consistency import leakage_free_consistency

__all__ = [
    "COLUMNS",
    "CONSISTENCY_SEED",
    "MIN_SAMPLES_FOR_CONSISTENCY",
    "SOURCES",
    "STATISTICS",
    "Column",
    "QuestionData",
    "brier_skill_score",
    "calibration_columns",
    "jackknife_items",
    "source_statistics",
]

logger = logging.getLogger(__name__)

SOURCES = ("ptrue", "verbalized", "consistency")
CONSISTENCY_SEED = 0
MIN_SAMPLES_FOR_CONSISTENCY = 4  # a pool of >= 2 responses and >= 2 target responses


def brier_skill_score(confidence: np.ndarray, mu_hat: np.ndarray) -> float:
    """BSS = 1 - Brier / Brier_random with Brier_random = mean_i (mu_hat_i^2 - mu_hat_i + 1/3) (> 0)."""
    return 1.0 - brier_score(confidence, mu_hat) / random_baseline_brier_score(mu_hat)


# statistic suffix -> (function of (confidence, mu_hat, n), higher is better)
STATISTICS: dict[str, tuple[Callable[[np.ndarray, np.ndarray, np.ndarray], float], bool]] = {
    "brier": (lambda c, mu, n: brier_score(c, mu), False),
    "corrected_brier": (corrected_capability_brier_score, False),
    "ece": (lambda c, mu, n: expected_calibration_error(c, mu), False),
    "auroc": (lambda c, mu, n: soft_label_auroc(c, mu), True),
    "brier_skill": (lambda c, mu, n: brier_skill_score(c, mu), True),
}


@dataclass(frozen=True)
class Column:
    """One column of the results table: its metric name and direction."""

    name: str
    higher_is_better: bool


COLUMNS: tuple[Column, ...] = (
    Column("expected_accuracy", True),
    Column("n_samples", True),
    Column("ptrue_available", True),
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


def jackknife_items(statistic: Callable[..., float], *arrays: np.ndarray) -> np.ndarray | None:
    """Per-row jackknife influence values of ``statistic(*arrays)`` (rows = questions), or None if undefined.

    ``item_i = theta - (N - 1) (theta_(-i) - mean_j theta_(-j))``: mean(items) = theta and
    std(items, ddof=1) / sqrt(N) is the jackknife standard error. None when N < 2 or theta or any
    leave-one-out value is not finite.
    """
    n_rows = len(arrays[0])
    if n_rows < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        theta = float(statistic(*arrays))
        leave_one_out = np.array(
            [statistic(*(np.delete(array, i, axis=0) for array in arrays)) for i in range(n_rows)],
            dtype=np.float64,
        )
    if not (np.isfinite(theta) and np.all(np.isfinite(leave_one_out))):
        return None
    return theta - (n_rows - 1) * (leave_one_out - leave_one_out.mean())


def source_statistics(
    source: str, confidence: np.ndarray, mu_hat: np.ndarray, n: np.ndarray, task: str = ""
) -> dict[str, np.ndarray]:
    """``{f"{source}_{statistic}": items}`` for the statistics defined on these questions (others warned)."""
    columns: dict[str, np.ndarray] = {}
    if len(confidence) < 2:
        logger.warning(
            "%s: the %s columns need at least 2 questions with a confidence, got %d; left out of the table",
            task or "calibration",
            source,
            len(confidence),
        )
        return columns
    for name, (statistic, _) in STATISTICS.items():
        items = jackknife_items(statistic, confidence, mu_hat, n)
        if items is None:
            logger.warning(
                "%s: %s_%s is undefined on these %d questions (or without one of them); left out of the "
                "table",
                task or "calibration",
                source,
                name,
                len(confidence),
            )
        else:
            columns[f"{source}_{name}"] = items
    return columns


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


def calibration_columns(questions: Sequence[QuestionData], task: str = "") -> list[dict[str, float]]:
    """One dict of column items per question (in order); the mean of each column's items is its value.

    A column a question does not contribute to (a verbalized statistic of a question whose confidence did not
    parse) is absent from that question's dict; a column undefined on the run is absent from every dict.
    """
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
        {
            "expected_accuracy": float(mu_hat[i]),
            "n_samples": float(k),
            "ptrue_available": float(with_ptrue[i]),
            "verbalized_parse_failure_rate": float(not parsed[i]),
        }
        for i in range(len(questions))
    ]

    def add(columns: dict[str, np.ndarray], positions: np.ndarray) -> None:
        for name, items in columns.items():
            for position, item in zip(positions, items, strict=True):
                rows[position][name] = float(item)

    everyone = np.arange(len(questions))
    if all(with_ptrue):
        p_true = np.array([q.p_true for q in questions], dtype=np.float64)
        add(source_statistics("ptrue", p_true, mu_hat, n, task), everyone)
    verbalized = np.array([q.verbalized for q in questions if q.verbalized is not None], dtype=np.float64)
    add(source_statistics("verbalized", verbalized, mu_hat[parsed], n[parsed], task), everyone[parsed])
    if k >= MIN_SAMPLES_FOR_CONSISTENCY:
        add(source_statistics("consistency", *_consistency(questions), task), everyone)
    else:
        logger.warning(
            "%s: k = %d samples per question; the leakage-free consistency columns need k >= %d and are left "
            "out",
            task or "calibration",
            k,
            MIN_SAMPLES_FOR_CONSISTENCY,
        )
    return rows
