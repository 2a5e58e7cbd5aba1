"""Agreement of two binary labelings of the same responses: confusion counts and Cohen's kappa.

Used to compare an LLM judge's correctness labels with a rule-based checker's on the same responses (the
paper "On Calibration of LLMs: From Response To Capability" re-labels TriviaQA, SimpleQA and MATH with an LLM
judge). With ``n`` responses labelled 0/1 by rater a (rows) and rater b (columns), the confusion counts are
``C[i, j] = #{a = i, b = j}``. Cohen's kappa (Cohen 1960) corrects the observed agreement for chance:

    p_o = (C[0, 0] + C[1, 1]) / n
    p_e = sum_i (row_i / n) * (col_i / n)        (row_i = sum_j C[i, j], col_i = sum_j C[j, i])
    kappa = (p_o - p_e) / (1 - p_e)

kappa is 1 for perfect agreement and 0 for chance-level agreement; it is 0/0, undefined, when ``p_e = 1``
(both raters give one and the same label to every response) or there are no responses: NaN with an
:class:`~capcal_metrics.UndefinedMetricWarning` (scikit-learn's ``cohen_kappa_score`` also gives NaN there).

The k responses of one question are not independent (they often share an extracted answer, and so a
verdict), so an interval for kappa resamples questions, not responses: :func:`pooled_kappa` is kappa of the
summed per-question counts, the statistic that ``capcal_metrics.bootstrap_ci(pooled_kappa, counts)``
resamples by question (a cluster bootstrap; Field & Welsh 2007, "Bootstrapping clustered data").
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .validation import check_binary_labels, check_same_length, check_whole_numbers, undefined_metric

__all__ = ["cohens_kappa", "confusion_counts", "kappa_from_counts", "pooled_kappa"]


def confusion_counts(labels_a: ArrayLike, labels_b: ArrayLike) -> np.ndarray:
    """The 2 x 2 int64 matrix ``C[i, j] = #{labels_a = i, labels_b = j}`` of two 0/1 labelings."""
    a = check_binary_labels(labels_a, "labels_a").astype(np.int64)
    b = check_binary_labels(labels_b, "labels_b").astype(np.int64)
    check_same_length(labels_a=a, labels_b=b)
    return np.bincount(2 * a + b, minlength=4).reshape(2, 2).astype(np.int64)


def kappa_from_counts(counts: ArrayLike) -> float:
    """Cohen's kappa of a square confusion matrix of counts (see the module docstring for the formula)."""
    matrix = check_whole_numbers(counts, "counts", ndim=2)
    if matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"counts must be a square matrix, got shape {matrix.shape}")
    return _kappa(matrix)


def _kappa(matrix: np.ndarray) -> float:
    """Kappa of a validated square count matrix; an undefined kappa's warning points at the caller of the
    public function that called this one."""
    n = int(matrix.sum())
    if n == 0:
        return undefined_metric("cohens_kappa", "no labelled responses")
    observed = float(np.trace(matrix)) / n
    expected = float(np.dot(matrix.sum(axis=1), matrix.sum(axis=0))) / n**2
    if expected >= 1.0:
        return undefined_metric("cohens_kappa", "both raters give every response the same label")
    return (observed - expected) / (1.0 - expected)


def cohens_kappa(labels_a: ArrayLike, labels_b: ArrayLike) -> float:
    """Cohen's kappa of two 0/1 labelings of the same responses (see the module docstring)."""
    return _kappa(confusion_counts(labels_a, labels_b))


def pooled_kappa(question_counts: ArrayLike) -> float:
    """Cohen's kappa of the counts of N questions pooled: ``question_counts`` has shape (N, 2, 2) (question
    i's confusion counts) or (N, 4) (the same, flattened row by row); kappa of their sum over questions."""
    counts = check_whole_numbers(question_counts, "question_counts", ndim=None)
    if counts.ndim == 2 and counts.shape[1] == 4:
        counts = counts.reshape(-1, 2, 2)
    if counts.ndim != 3 or counts.shape[1:] != (2, 2):
        raise ValueError(f"question_counts must have shape (N, 2, 2) or (N, 4), got {counts.shape}")
    return _kappa(counts.sum(axis=0))
