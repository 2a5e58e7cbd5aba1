"""Binned calibration errors: ECE, MCE and ACE (METHODS.md section 4).

One set of functions serves both targets of the paper (arXiv 2602.13540):

* capability calibration: ``target = mu_hat``, the fraction of a query's n sampled responses that are correct;
* response calibration: ``target = z``, the 0/1 correctness of one sampled response.

With bins b = 1..B (see :mod:`capcal_metrics.binning`), n_b members and N queries in all::

    ECE = sum_b (n_b / N) |mean_b target - mean_b c|
    MCE = max over non-empty b of |mean_b target - mean_b c|
    ACE = ECE with equal-mass bins
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ._validation import check_confidence_and_target, check_positive_integer, check_probabilities
from .binning import BinningStrategy, _assign_bins, _check_strategy
from .ranking import _run_sums, _sorted_tie_runs, _unit_weights, _weight_columns

__all__ = [
    "adaptive_calibration_error",
    "expected_calibration_error",
    "maximum_calibration_error",
    "random_baseline_calibration_error",
]


def expected_calibration_error(
    confidence: ArrayLike,
    target: ArrayLike,
    *,
    n_bins: int = 10,
    strategy: BinningStrategy = "equal_width",
) -> float:
    """ECE = sum_b (n_b / N) |mean_b target - mean_b c| = (1/N) sum_b |sum_{i in b} (target_i - c_i)|.

    Capability ECE when ``target`` is mu_hat, response ECE when it is 0/1 correctness. Default: the paper's 10
    equal-width bins, the last one closed so c = 1.0 counts.
    """
    confidence, target = check_confidence_and_target(confidence, target)
    weights = _unit_weights(confidence.size)
    return float(
        _expected_calibration_error_weighted(
            confidence, target, n_bins=n_bins, strategy=strategy, weights=weights
        )[0]
    )


def maximum_calibration_error(
    confidence: ArrayLike,
    target: ArrayLike,
    *,
    n_bins: int = 10,
    strategy: BinningStrategy = "equal_width",
) -> float:
    """MCE = max over non-empty bins b of |mean_b target - mean_b c| (Naeini et al. 2015)."""
    confidence, target = check_confidence_and_target(confidence, target)
    weights = _unit_weights(confidence.size)
    return float(
        _maximum_calibration_error_weighted(
            confidence, target, n_bins=n_bins, strategy=strategy, weights=weights
        )[0]
    )


def adaptive_calibration_error(confidence: ArrayLike, target: ArrayLike, *, n_bins: int = 10) -> float:
    """ACE = ECE with equal-mass bins (Nixon et al. 2019): each bin holds about N / n_bins queries."""
    return expected_calibration_error(confidence, target, n_bins=n_bins, strategy="equal_mass")


def random_baseline_calibration_error(
    target: ArrayLike,
    *,
    n_bins: int = 10,
    strategy: BinningStrategy = "equal_width",
    maximum: bool = False,
    n_draws: int = 100,
    seed: int = 0,
) -> float:
    """E[ECE] (or E[MCE] with ``maximum=True``) when every c_i ~ U(0, 1) independently.

    METHODS.md asks for the expectation over random confidences, not one draw. ECE has no closed form under
    this distribution, so this is a Monte-Carlo average over ``n_draws`` independent draws of the whole
    confidence vector with a fixed ``seed`` (deterministic; its standard error shrinks as 1/sqrt(n_draws) and
    is small for large N, since ECE of N uniform confidences concentrates).
    """
    target = check_probabilities(target, "target")
    n_draws = check_positive_integer(n_draws, "n_draws")
    kernel = _maximum_calibration_error_weighted if maximum else _expected_calibration_error_weighted
    rng = np.random.default_rng(seed)
    weights = _unit_weights(target.size)
    draws = [
        kernel(rng.random(target.size), target, n_bins=n_bins, strategy=strategy, weights=weights)[0]
        for _ in range(n_draws)
    ]
    return float(np.mean(draws))


# --- weighted kernels (see capcal_metrics.ranking for the convention) -------------------------------------


def _expected_calibration_error_weighted(
    confidence: ArrayLike,
    target: ArrayLike,
    *,
    n_bins: int = 10,
    strategy: str = "equal_width",
    weights: np.ndarray,
) -> np.ndarray:
    gap, _ = _binned_gap_and_mass(confidence, target, n_bins, strategy, weights)
    return np.abs(gap).sum(axis=1) / weights.sum(axis=1)


def _maximum_calibration_error_weighted(
    confidence: ArrayLike,
    target: ArrayLike,
    *,
    n_bins: int = 10,
    strategy: str = "equal_width",
    weights: np.ndarray,
) -> np.ndarray:
    gap, mass = _binned_gap_and_mass(confidence, target, n_bins, strategy, weights)
    with np.errstate(invalid="ignore", divide="ignore"):
        bin_error = np.where(mass > 0, np.abs(gap) / mass, -np.inf)
    return bin_error.max(axis=1)


def _adaptive_calibration_error_weighted(
    confidence: ArrayLike, target: ArrayLike, *, n_bins: int = 10, weights: np.ndarray
) -> np.ndarray:
    return _expected_calibration_error_weighted(
        confidence, target, n_bins=n_bins, strategy="equal_mass", weights=weights
    )


def _binned_gap_and_mass(
    confidence: ArrayLike, target: ArrayLike, n_bins: int, strategy: str, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``weights`` and per bin: sum of w (target - c) and sum of w; both of shape (B, n_bins)."""
    confidence = np.asarray(confidence, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    n_bins = check_positive_integer(n_bins, "n_bins")
    strategy = _check_strategy(strategy)
    n_rows = weights.shape[0]
    order = np.argsort(confidence, kind="stable")
    sorted_weights = _weight_columns(weights, order)
    sorted_gap = (target - confidence)[order]
    if strategy == "equal_width":  # in sorted order every bin is a contiguous block
        gap = np.zeros((n_rows, n_bins))
        mass = np.zeros((n_rows, n_bins))
        sorted_bins = _assign_bins(confidence[order], n_bins, strategy)
        block_starts = np.flatnonzero(np.r_[True, sorted_bins[1:] != sorted_bins[:-1]])
        present = sorted_bins[block_starts]
        gap[:, present] = np.add.reduceat(sorted_weights * sorted_gap, block_starts, axis=1)
        mass[:, present] = np.add.reduceat(sorted_weights, block_starts, axis=1)
        return gap, mass
    # Equal mass: a tied run's bin depends on its (weighted) sorted position. Run g spanning positions
    # [start, end) goes to bin floor(n_bins (start + end - 1) / (2 total)); that index is nondecreasing along
    # the runs, so each bin is a contiguous block of runs whose sums are differences of cumulative sums.
    _, starts = _sorted_tie_runs(confidence[order])
    run_mass = _run_sums(sorted_weights, None, starts)
    cumulative_mass = np.cumsum(run_mass, axis=1)  # = exclusive end position of each run
    cumulative_gap = np.cumsum(_run_sums(sorted_weights, sorted_gap, starts), axis=1)
    scaled_midpoint = n_bins * (2.0 * cumulative_mass - run_mass - 1.0)  # n_bins (start + end - 1)
    bin_thresholds = 2.0 * cumulative_mass[:, -1:] * np.arange(1, n_bins)  # run in bin >= b iff >= 2 total b
    boundaries = np.zeros((n_rows, n_bins + 1), dtype=np.intp)
    boundaries[:, -1] = run_mass.shape[1]
    for row in range(n_rows):
        boundaries[row, 1:-1] = np.searchsorted(scaled_midpoint[row], bin_thresholds[row], side="left")
    # Cumulative sum before each boundary (0 before the first run), differenced into per-bin sums.
    before = np.maximum(boundaries - 1, 0)
    at_start = boundaries == 0
    gap = np.diff(np.where(at_start, 0.0, np.take_along_axis(cumulative_gap, before, axis=1)), axis=1)
    mass = np.diff(np.where(at_start, 0.0, np.take_along_axis(cumulative_mass, before, axis=1)), axis=1)
    return gap, mass
