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
    return float(_spearman_correlation_weighted(confidence, target, weights=_unit_weights(confidence.size))[0])


# --- weighted kernels (see capcal_metrics.ranking for the convention) -------------------------------------------


def _pearson_correlation_weighted(confidence: ArrayLike, target: ArrayLike, *, weights: np.ndarray) -> np.ndarray:
    return _weighted_pearson(
        np.asarray(confidence, dtype=np.float64), np.asarray(target, dtype=np.float64), weights
    )


def _spearman_correlation_weighted(
    confidence: ArrayLike, target: ArrayLike, *, weights: np.ndarray
) -> np.ndarray:
    confidence_ranks = _weighted_average_ranks(np.asarray(confidence, dtype=np.float64), weights)
    target_ranks = _weighted_average_ranks(np.asarray(target, dtype=np.float64), weights)
    return _weighted_pearson(confidence_ranks, target_ranks, weights)


def _weighted_average_ranks(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per row of weights, the 1-based average rank of every value among the weighted values, shape (B, N).

    A run of tied values holding weight m after weight s of smaller values spans ranks s+1..s+m: mean s + (m+1)/2.
    """
    order, starts = _sorted_tie_runs(values)
    run_mass = _run_sums(_weight_columns(weights, order), None, starts)
    run_rank = np.cumsum(run_mass, axis=1) - run_mass + (run_mass + 1.0) / 2.0
    ranks = np.empty(weights.shape)
    ranks[:, order] = np.repeat(run_rank, np.diff(np.r_[starts, values.size]), axis=1)
    return ranks


def _weighted_pearson(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted Pearson r of x and y (each (N,) or (B, N)) per row of weights; NaN where x or y is constant."""
    x, y = np.broadcast_to(x, weights.shape), np.broadcast_to(y, weights.shape)
    total = weights.sum(axis=1, keepdims=True)
    x_centred = x - np.sum(weights * x, axis=1, keepdims=True) / total
    y_centred = y - np.sum(weights * y, axis=1, keepdims=True) / total
    covariance = np.sum(weights * x_centred * y_centred, axis=1)
    scale = np.sqrt(np.sum(weights * x_centred**2, axis=1) * np.sum(weights * y_centred**2, axis=1))
    kept = weights > 0  # constant on the rows that count: exact check, immune to rounding in the means
    constant = (np.where(kept, x, np.inf).min(axis=1) == np.where(kept, x, -np.inf).max(axis=1)) | (
        np.where(kept, y, np.inf).min(axis=1) == np.where(kept, y, -np.inf).max(axis=1)
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(constant, np.nan, np.clip(covariance / scale, -1.0, 1.0))
