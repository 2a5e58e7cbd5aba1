"""Ranking (discrimination) metrics: soft-label AUROC, AUROC and average precision (METHODS.md section 4).

All are O(N log N) (one sort) and treat tied confidences by value, never by row position, so they do not
depend on the order of the queries. Undefined cases (a single class) return NaN with an
:class:`~capcal_metrics.UndefinedMetricWarning`, like every metric in this package.

Random baselines (c_i ~ U(0, 1) i.i.d., where ties have probability zero): E[AUROC] = E[soft-label AUROC]
= 1/2 exactly for any target (every pair is ordered either way with probability 1/2); E[AP] is given
exactly by :func:`random_baseline_average_precision`.

Implementation note: every metric of this package is computed by a private "weighted" kernel that takes a
``weights`` matrix of shape (B, N) and returns B values, the metric of the data set in which query i appears
``weights[b, i]`` times. The public function calls it with a single row of ones; :func:`bootstrap_ci` calls it
with B rows of bootstrap counts at once. The tie-run helpers below are shared by those kernels.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ._validation import check_binary_labels, check_confidence_and_target, undefined_metric

__all__ = ["auroc", "average_precision", "random_baseline_average_precision", "soft_label_auroc"]


def soft_label_auroc(confidence: ArrayLike, target: ArrayLike) -> float:
    """AUROC against a soft target mu in [0, 1] (capability discrimination, arXiv 2602.13540).

    With weights ``w_ij = mu_i (1 - mu_j)`` over all ordered pairs (i, j), including i = j::

        AUROC = sum_ij w_ij [1(c_i > c_j) + 0.5 1(c_i = c_j)] / sum_ij w_ij

    i.e. the probability that a correct response ranks above an incorrect one when every query contributes
    mass mu_i of correct and 1 - mu_i of incorrect responses at its confidence c_i (a query ties with itself,
    so the i = j terms add 0.5 w_ii). With 0/1 targets it equals the ordinary AUROC. Computed in O(N log N):
    sorting by c and grouping ties, the numerator is ``sum_g P_g (Q_{<g} + Q_g / 2)`` with P_g = sum of mu and
    Q_g = sum of (1 - mu) in tie group g and Q_{<g} the sum of (1 - mu) over smaller confidences; the
    denominator is ``(sum_i mu_i)(sum_j (1 - mu_j))``.

    Returns NaN (with a warning) when the denominator is 0, i.e. all targets are 0 or all are 1.
    """
    confidence, target = check_confidence_and_target(confidence, target)
    if target.min() == target.max() and target[0] in (0.0, 1.0):
        return undefined_metric(
            "soft_label_auroc", "every target is 0 or every target is 1 (no pair to rank)"
        )
    return float(_soft_label_auroc_weighted(confidence, target, weights=_unit_weights(confidence.size))[0])


def auroc(confidence: ArrayLike, labels: ArrayLike) -> float:
    """AUROC of confidence against 0/1 correctness labels (Mann-Whitney form, ties count 1/2).

    ``AUROC = (1 / (P N)) sum_{i: z_i=1} sum_{j: z_j=0} [1(c_i > c_j) + 0.5 1(c_i = c_j)]``; the same
    computation as :func:`soft_label_auroc` restricted to binary targets. NaN (with a warning) when only
    one class is present.
    """
    confidence, labels = check_confidence_and_target(
        confidence, labels, binary_target=True, target_name="labels"
    )
    if labels.min() == labels.max():
        return undefined_metric("auroc", "labels contain a single class")
    return float(_soft_label_auroc_weighted(confidence, labels, weights=_unit_weights(confidence.size))[0])


def average_precision(confidence: ArrayLike, labels: ArrayLike) -> float:
    """Average precision (area under the precision-recall curve, step-wise) against 0/1 correctness.

    ``AP = sum_k (R_k - R_{k-1}) P_k``, with thresholds k running over the distinct confidences in
    decreasing order, P_k / R_k the precision / recall of predicting "correct" for every c >= threshold_k, and
    R_0 = 0 (the non-interpolated definition of scikit-learn's ``average_precision_score``; tied confidences
    enter at one threshold). Positives are correct responses (z = 1). NaN (with a warning) when there are
    no positives.
    """
    confidence, labels = check_confidence_and_target(
        confidence, labels, binary_target=True, target_name="labels"
    )
    if labels.max() == 0.0:
        return undefined_metric("average_precision", "labels contain no positive (z = 1)")
    return float(_average_precision_weighted(confidence, labels, weights=_unit_weights(confidence.size))[0])


def random_baseline_average_precision(labels: ArrayLike) -> float:
    """E[AP] when every c_i ~ U(0, 1) i.i.d., i.e. under a uniformly random ranking (exact).

    With N queries of which P are positive, the item at rank r is positive with probability P/N, and given
    that, the expected precision at r is (1 + (r - 1)(P - 1)/(N - 1)) / r. Summing over r::

        E[AP] = (1/N) [H_N + (P - 1)/(N - 1) (N - H_N)],   H_N = sum_{r=1}^N 1/r

    (for N = 1 the second term is dropped). This is not the prevalence P/N, though it tends to it for large N.
    NaN (with a warning) when there are no positives.
    """
    labels = check_binary_labels(labels, "labels")
    n, n_positive = labels.size, labels.sum()
    if n_positive == 0:
        return undefined_metric("random_baseline_average_precision", "labels contain no positive (z = 1)")
    harmonic = np.sum(1.0 / np.arange(1, n + 1))
    spread = (n_positive - 1) / (n - 1) * (n - harmonic) if n > 1 else 0.0
    return float((harmonic + spread) / n)


# --- weighted kernels and shared tie-run helpers ----------------------------------------------------------


def _unit_weights(n: int) -> np.ndarray:
    """The weights matrix of the plain (unweighted) metric: one row of ones."""
    return np.ones((1, n))


def _sorted_tie_runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stable ascending sort order of ``values`` and the start positions (in sorted order) of tied runs.

    Linear time when ``values`` is already sorted (numpy's stable sort is a timsort/radix sort).
    """
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    return order, starts


def _weight_columns(weights: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``weights[:, order]``, skipping the copy when ``order`` is the identity (pre-sorted input)."""
    if np.array_equal(order, np.arange(order.size)):
        return weights
    return weights[:, order]


def _run_sums(weights: np.ndarray, values: np.ndarray | None, starts: np.ndarray) -> np.ndarray:
    """Per-run totals of ``weights * values`` (or of ``weights``), shape (B, number of runs)."""
    weighted = weights if values is None else weights * values
    if starts.size == weights.shape[1]:  # no ties: every run is a single element
        return weighted
    return np.add.reduceat(weighted, starts, axis=1)


def _soft_label_auroc_weighted(
    confidence: ArrayLike, target: ArrayLike, *, weights: np.ndarray
) -> np.ndarray:
    """Soft-label AUROC (and AUROC) for each row of ``weights``; NaN where one class has no mass."""
    confidence = np.asarray(confidence, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    order, starts = _sorted_tie_runs(confidence)
    sorted_weights = _weight_columns(weights, order)
    positive = _run_sums(sorted_weights, target[order], starts)
    negative = _run_sums(sorted_weights, None, starts) - positive
    # sum_g P_g (Q_{<g} + Q_g / 2) with Q_{<g} + Q_g / 2 = cumsum(Q)_g - Q_g / 2
    below_or_tied = np.cumsum(negative, axis=1)
    below_or_tied -= 0.5 * negative
    numerator = np.einsum("ij,ij->i", positive, below_or_tied)
    denominator = positive.sum(axis=1) * negative.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, numerator / denominator, np.nan)


def _average_precision_weighted(
    confidence: ArrayLike, labels: ArrayLike, *, weights: np.ndarray
) -> np.ndarray:
    """Average precision for each row of ``weights``; NaN where there is no positive."""
    confidence = np.asarray(confidence, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    order, starts = _sorted_tie_runs(confidence)
    sorted_weights = _weight_columns(weights, order)
    positive = _run_sums(sorted_weights, labels[order], starts)
    mass = _run_sums(sorted_weights, None, starts)
    # Thresholds run over the distinct confidences from the top: predicted positives and true positives at
    # run g are the totals over runs >= g (suffix sums of the ascending runs).
    total_positive = positive.sum(axis=1, keepdims=True)
    true_positives = total_positive - np.cumsum(positive, axis=1) + positive
    predicted_positives = mass.sum(axis=1, keepdims=True) - np.cumsum(mass, axis=1) + mass
    precision = np.divide(
        true_positives, predicted_positives, out=np.zeros_like(true_positives), where=predicted_positives > 0
    )
    total_positive = total_positive[:, 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(
            total_positive > 0, np.einsum("ij,ij->i", positive, precision) / total_positive, np.nan
        )
