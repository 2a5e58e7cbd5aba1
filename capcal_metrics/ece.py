"""Binned calibration errors: ECE, MCE and ACE.

One set of functions serves both targets of "On Calibration of LLMs: From Response To Capability"
(arXiv 2602.13540, section on evaluation metrics):

* capability calibration: ``target = mu_hat``, the fraction of a query's n sampled responses that are correct;
* response calibration: ``target = z``, the 0/1 correctness of one sampled response.

With bins b = 1..B (see :mod:`capcal_metrics.binning`; by default the paper's 10 equal-width bins, the last
closed so that c = 1.0 counts), n_b members and N queries in all::

    ECE = sum_b (n_b / N) |mean_b target - mean_b c|
    MCE = max over non-empty b of |mean_b target - mean_b c|
    ACE = ECE with equal-mass bins
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from ._kernels import Kernel, Workspace, evaluate_once, group_sums, groups_of
from .binning import BinningStrategy, _assign_bins, _check_strategy
from .validation import check_confidence_and_target, check_integer, check_probabilities

__all__ = [
    "adaptive_calibration_error",
    "expected_calibration_error",
    "maximum_calibration_error",
    "random_baseline_calibration_error",
]


def expected_calibration_error(
    confidence: ArrayLike, target: ArrayLike, *, n_bins: int = 10, strategy: BinningStrategy = "equal_width"
) -> float:
    """ECE = sum_b (n_b / N) |mean_b target - mean_b c| = (1/N) sum_b |sum_{i in b} (target_i - c_i)|.

    Capability ECE when ``target`` is mu_hat, response ECE when it is 0/1 correctness. Default: the paper's 10
    equal-width bins, the last one closed so c = 1.0 counts.
    """
    return _binned_error(confidence, target, n_bins=n_bins, strategy=strategy, maximum=False)


def maximum_calibration_error(
    confidence: ArrayLike, target: ArrayLike, *, n_bins: int = 10, strategy: BinningStrategy = "equal_width"
) -> float:
    """MCE = max over non-empty bins b of |mean_b target - mean_b c| (Naeini et al. 2015)."""
    return _binned_error(confidence, target, n_bins=n_bins, strategy=strategy, maximum=True)


def adaptive_calibration_error(confidence: ArrayLike, target: ArrayLike, *, n_bins: int = 10) -> float:
    """ACE = ECE with equal-mass bins (Nixon et al. 2019): each bin holds about N / n_bins queries."""
    return _binned_error(confidence, target, n_bins=n_bins, strategy="equal_mass", maximum=False)


def _binned_error(
    confidence: ArrayLike, target: ArrayLike, *, n_bins: int, strategy: str, maximum: bool
) -> float:
    confidence, target = check_confidence_and_target(confidence, target)
    return evaluate_once(
        _calibration_error_kernel, confidence, target, n_bins=n_bins, strategy=strategy, maximum=maximum
    )


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

    The paper's random baseline is an expectation over random confidences, not one draw. ECE has no closed
    form under this distribution, so this is a Monte-Carlo average over ``n_draws`` independent draws of the
    whole confidence vector with a fixed ``seed`` (deterministic; its standard error shrinks as
    1/sqrt(n_draws) and is small for large N, since ECE of N uniform confidences concentrates).
    """
    target = check_probabilities(target, "target")
    n_draws = check_integer(n_draws, "n_draws")
    rng = np.random.default_rng(seed)
    draws = [
        evaluate_once(
            _calibration_error_kernel,
            rng.random(target.size),
            target,
            n_bins=n_bins,
            strategy=strategy,
            maximum=maximum,
        )
        for _ in range(n_draws)
    ]
    return float(np.mean(draws))


# --- kernel factories (see capcal_metrics._kernels) ---------------------------------------------------------


def _calibration_error_kernel(
    workspace: Workspace,
    confidence: ArrayLike,
    target: ArrayLike,
    *,
    n_bins: int = 10,
    strategy: str = "equal_width",
    maximum: bool = False,
) -> Kernel:
    """ECE per row of weights, sum_b |sum_{i in b} w_i (target_i - c_i)| / sum_i w_i, or with ``maximum``
    MCE, the max over bins b with weight of |sum_b w_i (target_i - c_i)| / sum_b w_i."""
    binned = _binned_gap_and_mass(workspace, confidence, target, n_bins, strategy)

    def evaluate() -> np.ndarray:
        gap, mass = binned()
        if not maximum:
            return np.abs(gap).sum(axis=1) / workspace.total
        with np.errstate(invalid="ignore", divide="ignore"):
            bin_error = np.where(mass > 0, np.abs(gap) / mass, -np.inf)
        return bin_error.max(axis=1)

    return evaluate


# The kernels of the three public metrics (used by capcal_metrics.bootstrap), same keywords as the metrics.
_expected_calibration_error_kernel = _calibration_error_kernel
_maximum_calibration_error_kernel = functools.partial(_calibration_error_kernel, maximum=True)
_adaptive_calibration_error_kernel = functools.partial(_calibration_error_kernel, strategy="equal_mass")


def _binned_gap_and_mass(
    workspace: Workspace, confidence: ArrayLike, target: ArrayLike, n_bins: int, strategy: str
) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    """``binned()``: per row of weights and per bin, sum of w (target - c) and sum of w, each (B, bins).

    Equal-width bins are fixed by the confidences, so only the bins holding some query appear (an empty bin
    adds nothing to ECE and is skipped by MCE). Equal-mass bins depend on the weights; all n_bins appear.
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    n_bins = check_integer(n_bins, "n_bins")
    strategy = _check_strategy(strategy)
    if strategy == "equal_width":
        bins = groups_of(_assign_bins(confidence, n_bins, strategy))
        gap_values = target - confidence
        return lambda: (
            group_sums(workspace.weights, gap_values, bins),
            group_sums(workspace.weights, None, bins),
        )
    # Equal mass: a tied run's bin depends on its (weighted) sorted position. Run g spanning positions
    # [start, end) goes to bin floor(n_bins (start + end - 1) / (2 total)); that index is nondecreasing along
    # the runs, so each bin is a contiguous block of runs [boundary_b, boundary_{b+1}). Within a run c is
    # constant, so the run's gap sum is sum_{i in g} w_i target_i - c_g M_g.
    runs = workspace.groups(confidence)

    def binned() -> tuple[np.ndarray, np.ndarray]:
        n_rows, n_runs = workspace.weights.shape[0], runs.size
        run_mass = workspace.sums(runs)
        cumulative_mass = workspace.cumsums(runs)  # = exclusive end position of each run
        run_gap = np.zeros((n_rows, n_runs + 1))  # a trailing 0 so that every boundary is a valid index
        np.multiply(run_mass, runs.values, out=run_gap[:, :-1])
        np.subtract(workspace.sums(runs, target), run_gap[:, :-1], out=run_gap[:, :-1])
        scaled_midpoint = 2.0 * cumulative_mass - run_mass  # start + end = 2 end - M
        scaled_midpoint -= 1.0
        scaled_midpoint *= n_bins  # n_bins (start + end - 1)
        bin_thresholds = 2.0 * workspace.total[:, None] * np.arange(1, n_bins)  # bin >= b iff >= 2 total b
        boundaries = np.zeros((n_rows, n_bins + 1), dtype=np.intp)
        boundaries[:, -1] = n_runs
        gap = np.empty((n_rows, n_bins))
        for row in range(n_rows):
            boundaries[row, 1:-1] = np.searchsorted(scaled_midpoint[row], bin_thresholds[row], side="left")
            gap[row] = np.add.reduceat(run_gap[row], boundaries[row, :-1])  # an empty bin gets one run
        gap[boundaries[:, :-1] == boundaries[:, 1:]] = 0.0  # ... so empty bins are zeroed
        # Mass: cumulative mass before each boundary (0 before the first run), differenced.
        before = np.maximum(boundaries - 1, 0)
        at_start = boundaries == 0
        mass = np.diff(np.where(at_start, 0.0, np.take_along_axis(cumulative_mass, before, axis=1)), axis=1)
        return gap, mass

    return binned
