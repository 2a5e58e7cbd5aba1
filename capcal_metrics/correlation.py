"""Correlation of confidence with the capability target (METHODS.md section 4).

Pearson measures linear agreement of c with mu_hat, Spearman monotone agreement (the paper's rebuttal reports
Spearman as "instance-level discriminative power"). Under the random baseline c_i ~ U(0, 1) i.i.d. both have
expectation exactly 0 (the map c -> 1 - c preserves the distribution and flips the sign). Constant input
makes either undefined: NaN with an :class:`~capcal_metrics._validation.UndefinedMetricWarning`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ._validation import check_confidence_and_target, undefined_metric
from .ranking import _run_sums, _sorted_tie_runs, _unit_weights, _weight_columns

__all__ = ["pearson_correlation", "spearman_correlation"]


def pearson_correlation(confidence: ArrayLike, target: ArrayLike) -> float:
    """Pearson r = sum (c - c_bar)(t - t_bar) / sqrt(sum (c - c_bar)^2 sum (t - t_bar)^2).

    NaN (with a warning) when confidence or target is constant.
    """
    confidence, target = check_confidence_and_target(confidence, target)
    if confidence.min() == confidence.max() or target.min() == target.max():
        return undefined_metric("pearson_correlation", "confidence or target is constant")
    return float(_pearson_correlation_weighted(confidence, target, weights=_unit_weights(confidence.size))[0])


def spearman_correlation(confidence: ArrayLike, target: ArrayLike) -> float:
    """Spearman rho = Pearson r of the average ranks of c and of target (ties get their mean rank).

    NaN (with a warning) when confidence or target is constant.
    """
    confidence, target = check_confidence_and_target(confidence, target)
    if confidence.min() == confidence.max() or target.min() == target.max():
        return undefined_metric("spearman_correlation", "confidence or target is constant")
    return float(
        _spearman_correlation_weighted(confidence, target, weights=_unit_weights(confidence.size))[0]
    )


# --- weighted kernels (see capcal_metrics.ranking for the convention) -------------------------------------


def _pearson_correlation_weighted(
    confidence: ArrayLike, target: ArrayLike, *, weights: np.ndarray
) -> np.ndarray:
    """Weighted Pearson r from moments of the values shifted by their unweighted means (one matrix product).

    A row whose weighted variance is below 1e-12 of the squared range of the full data counts as constant.
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    x = confidence - confidence.mean()
    y = target - target.mean()
    moments = weights @ np.stack([x, y, x * x, y * y, x * y], axis=1) / weights.sum(axis=1, keepdims=True)
    mean_x, mean_y, mean_xx, mean_yy, mean_xy = moments.T
    variance_x = mean_xx - mean_x**2
    variance_y = mean_yy - mean_y**2
    constant = (variance_x <= 1e-12 * np.ptp(confidence) ** 2) | (variance_y <= 1e-12 * np.ptp(target) ** 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (mean_xy - mean_x * mean_y) / np.sqrt(variance_x * variance_y)
    return np.where(constant, np.nan, np.clip(r, -1.0, 1.0))


def _spearman_correlation_weighted(
    confidence: ArrayLike, target: ArrayLike, *, weights: np.ndarray
) -> np.ndarray:
    """Weighted Spearman rho: Pearson r of average ranks, computed per tied run.

    The weighted mean of the average ranks is (K + 1)/2 (K = total weight), so with centred run ranks x_g
    (runs of confidence) and y_h (runs of target): sum w x^2 = sum_g M_g x_g^2 over runs, and likewise for y,
    while sum_i w_i x_i y_i = sum_g x_g sum_{i in g} w_i y_{h(i)}. A row whose confidence or target takes a
    single value has all centred ranks exactly 0, hence NaN.
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    x_order, x_starts, x_mass, x_rank = _centred_run_ranks(confidence, weights)
    y_order, y_starts, y_mass, y_rank = _centred_run_ranks(target, weights)
    y_run_of_element = np.empty(target.size, dtype=np.intp)
    y_run_of_element[y_order] = np.repeat(np.arange(y_starts.size), np.diff(np.r_[y_starts, target.size]))
    weighted_y = weights * y_rank[:, y_run_of_element]  # w_i y_{h(i)}, in input order
    sum_xy = np.einsum("ij,ij->i", x_rank, _run_sums(_weight_columns(weighted_y, x_order), None, x_starts))
    sum_xx = np.einsum("ij,ij,ij->i", x_mass, x_rank, x_rank)
    sum_yy = np.einsum("ij,ij,ij->i", y_mass, y_rank, y_rank)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = sum_xy / np.sqrt(sum_xx * sum_yy)
    return np.where((sum_xx == 0) | (sum_yy == 0), np.nan, np.clip(rho, -1.0, 1.0))


def _centred_run_ranks(
    values: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sort order, run starts, per-run weight M and per-run centred average rank of ``values``, per row.

    A run holding weight M after weight s of smaller values spans ranks s+1..s+M, whose mean is s + (M+1)/2;
    centring subtracts the overall mean rank (K + 1)/2.
    """
    order, starts = _sorted_tie_runs(values)
    run_mass = _run_sums(_weight_columns(weights, order), None, starts)
    total = run_mass.sum(axis=1, keepdims=True)
    run_rank = np.cumsum(run_mass, axis=1)
    run_rank -= 0.5 * run_mass + 0.5 * total  # s + (M + 1)/2 - (K + 1)/2 = cumsum - M/2 - K/2
    return order, starts, run_mass, run_rank
