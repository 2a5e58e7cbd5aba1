"""Correlation of confidence with the capability target.

Pearson measures linear agreement of c with mu_hat, Spearman monotone agreement (both are among the
capability-calibration metrics of "On Calibration of LLMs: From Response To Capability"; Spearman is read as
instance-level discriminative power). Under the random baseline c_i ~ U(0, 1) i.i.d. both have
expectation exactly 0 (the map c -> 1 - c preserves the distribution and flips the sign). Constant input
makes either undefined: NaN with an :class:`~capcal_metrics.UndefinedMetricWarning`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from ._kernels import Groups, Kernel, Workspace, evaluate_once
from .rounding import is_zero_up_to_rounding
from .validation import check_confidence_and_target, undefined_metric

__all__ = ["pearson_correlation", "spearman_correlation"]


def pearson_correlation(confidence: ArrayLike, target: ArrayLike) -> float:
    """Pearson r = sum (c - c_bar)(t - t_bar) / sqrt(sum (c - c_bar)^2 sum (t - t_bar)^2).

    NaN (with a warning) when confidence or target is constant.
    """
    return _correlation("pearson_correlation", _pearson_correlation_kernel, confidence, target)


def spearman_correlation(confidence: ArrayLike, target: ArrayLike) -> float:
    """Spearman rho = Pearson r of the average ranks of c and of target (ties get their mean rank).

    NaN (with a warning) when confidence or target is constant.
    """
    return _correlation("spearman_correlation", _spearman_correlation_kernel, confidence, target)


def _correlation(
    name: str, factory: Callable[..., Kernel], confidence: ArrayLike, target: ArrayLike
) -> float:
    """Validate, return NaN with a warning for a constant input, else evaluate ``factory``'s kernel."""
    confidence, target = check_confidence_and_target(confidence, target)
    if confidence.min() == confidence.max() or target.min() == target.max():
        return undefined_metric(name, "confidence or target is constant")
    return evaluate_once(factory, confidence, target)


# --- kernel factories (see capcal_metrics._kernels) ---------------------------------------------------------


def _pearson_correlation_kernel(workspace: Workspace, confidence: ArrayLike, target: ArrayLike) -> Kernel:
    """Weighted Pearson r from moments of the values shifted by their unweighted means (one matrix product).

    A row whose weighted variance is zero up to rounding counts as constant: the one-pass variance
    mean(x^2) - mean(x)^2 of N values that are all equal comes out within 4 N eps mean(x^2) of 0
    (``capcal_metrics.rounding.is_zero_up_to_rounding``; each of the two moments is a sum of N terms).
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    x = confidence - confidence.mean()
    y = target - target.mean()
    columns = np.stack([x, y, x * x, y * y, x * y], axis=1)
    n_terms = 4 * confidence.size

    def evaluate() -> np.ndarray:
        moments = workspace.weights @ columns / workspace.total[:, None]
        mean_x, mean_y, mean_xx, mean_yy, mean_xy = moments.T
        variance_x = mean_xx - mean_x**2
        variance_y = mean_yy - mean_y**2
        constant = is_zero_up_to_rounding(variance_x, n_terms, mean_xx) | is_zero_up_to_rounding(
            variance_y, n_terms, mean_yy
        )
        with np.errstate(invalid="ignore", divide="ignore"):
            r = (mean_xy - mean_x * mean_y) / np.sqrt(variance_x * variance_y)
        return np.where(constant, np.nan, np.clip(r, -1.0, 1.0))

    return evaluate


def _spearman_correlation_kernel(workspace: Workspace, confidence: ArrayLike, target: ArrayLike) -> Kernel:
    """Weighted Spearman rho: Pearson r of average ranks, computed per tied run.

    A run (tie group) holding weight M after weight s of smaller values spans ranks s+1..s+M, whose mean is
    s + (M+1)/2; the weighted mean of all average ranks is (K + 1)/2 (K = total weight), so the centred run
    rank is x_g = cumM_g - M_g/2 - K/2. Then sum w x^2 = sum_g M_g x_g^2 over runs of the confidence, likewise
    y_h over runs of the target, and sum_i w_i x_{g(i)} y_{h(i)} runs over the queries. A row whose confidence
    or target takes a single value has all centred ranks exactly 0, hence NaN.
    """
    x_groups = workspace.groups(np.asarray(confidence, dtype=np.float64))
    y_groups = workspace.groups(np.asarray(target, dtype=np.float64))

    def evaluate() -> np.ndarray:
        x_mass, x_rank = _centred_run_ranks(workspace, x_groups)
        y_mass, y_rank = _centred_run_ranks(workspace, y_groups)
        x_of_query = x_rank if x_groups.identity else np.take(x_rank, x_groups.index, axis=1)
        y_of_query = y_rank if y_groups.identity else np.take(y_rank, y_groups.index, axis=1)
        sum_xy = np.einsum("ij,ij,ij->i", workspace.weights, x_of_query, y_of_query)
        sum_xx = np.einsum("ij,ij,ij->i", x_mass, x_rank, x_rank)
        sum_yy = np.einsum("ij,ij,ij->i", y_mass, y_rank, y_rank)
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = sum_xy / np.sqrt(sum_xx * sum_yy)
        return np.where((sum_xx == 0) | (sum_yy == 0), np.nan, np.clip(rho, -1.0, 1.0))

    return evaluate


def _centred_run_ranks(workspace: Workspace, groups: Groups) -> tuple[np.ndarray, np.ndarray]:
    """Per row of weights: the weight M_g of each run (group), its centred average rank cumM - M/2 - K/2."""
    run_mass = workspace.sums(groups)
    run_rank = workspace.cumsums(groups) - 0.5 * run_mass
    run_rank -= 0.5 * workspace.total[:, None]
    return run_mass, run_rank
