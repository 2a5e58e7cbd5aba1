r"""Jackknife over questions: influence values, standard error and the normal interval of any metric.

With theta the metric on all N questions and theta_(-i) the metric without question i (rows of every array
left out together), the jackknife influence value of question i is

    item_i = theta - (N - 1) (theta_(-i) - mean_j theta_(-j)),

so that mean_i item_i = theta and std(items, ddof=1) / sqrt(N) is the jackknife standard error
sqrt((N - 1) / N sum_i (theta_(-i) - mean_j theta_(-j))^2) (Efron & Tibshirani 1993, ch. 11). For a metric
that is a mean of per-question terms item_i is that term. The interval is theta +- z_{1 - alpha/2} SE.
The metrics of this package are evaluated on all N leave-one-out sets at once by their weighted kernels (the
bootstrap's, with weights 1 - e_i); any other callable N times on the rows without question i.

Where it is used: the debiased ECE's interval (its percentile-bootstrap interval does not cover: the bootstrap
world's population is the empirical distribution, whose binned ECE carries the very noise bias the estimator
removes; docs/methods.md, "The bias of binned ECE"), and the standard errors of the calibration task's
leaderboard columns (``capcal_tasks.calibration_columns``), which lm-eval reports as sd(items) / sqrt(N).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from scipy.special import ndtri

from ._kernels import Workspace
from .kernel_registry import metric_kernel
from .validation import UndefinedMetricWarning, check_fraction

__all__ = ["JackknifeCI", "jackknife_ci", "jackknife_items", "leave_one_out_values"]

# Leave-one-out rows per kernel call = max(1, this // N) (as the bootstrap's chunks).
_CHUNK_ELEMENTS = 500_000


class JackknifeCI(NamedTuple):
    """Estimate on the full data, the normal interval [low, high] and the jackknife standard error."""

    estimate: float
    low: float
    high: float
    standard_error: float


def leave_one_out_values(statistic: Callable[..., float], *arrays: Any) -> np.ndarray:
    """theta_(-i), the statistic without row i (rows of every array left out together), for every row i;
    NaN where it is undefined. By the metric's weighted kernel where it has one, else N calls."""
    arrays = tuple(np.asarray(array) for array in arrays)
    n_rows = len(arrays[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        leave_one_out = _leave_one_out_by_kernel(statistic, arrays)
        if leave_one_out is None:
            leave_one_out = np.array(
                [statistic(*(np.delete(array, i, axis=0) for array in arrays)) for i in range(n_rows)],
                dtype=np.float64,
            )
    return leave_one_out


def jackknife_items(statistic: Callable[..., float], *arrays: Any) -> np.ndarray | None:
    """Per-row jackknife influence values of ``statistic(*arrays)`` (rows = questions), or None if undefined.

    ``item_i = theta - (N - 1) (theta_(-i) - mean_j theta_(-j))``: mean(items) = theta and
    std(items, ddof=1) / sqrt(N) is the jackknife standard error. None when N < 2 or theta or any
    leave-one-out value (:func:`leave_one_out_values`) is not finite.
    """
    arrays = tuple(np.asarray(array) for array in arrays)
    n_rows = len(arrays[0])
    if n_rows < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        theta = float(statistic(*arrays))
    leave_one_out = leave_one_out_values(statistic, *arrays)
    if not (np.isfinite(theta) and np.all(np.isfinite(leave_one_out))):
        return None
    return theta - (n_rows - 1) * (leave_one_out - leave_one_out.mean())


def _leave_one_out_by_kernel(
    statistic: Callable[..., float], arrays: tuple[np.ndarray, ...]
) -> np.ndarray | None:
    """theta_(-i) for every i from the metric's weighted kernel (weights 1 - e_i, in chunks of rows), or None
    for a statistic without one. The rows are sorted by the first array first (the kernels' fast path; the
    metrics depend only on the multiset of rows) and the values returned in the input order."""
    if not all(array.ndim == 1 for array in arrays):
        return None
    order = np.argsort(arrays[0], kind="stable")
    ordered = [array[order] for array in arrays]
    workspace = Workspace()
    kernel = metric_kernel(workspace, statistic, ordered)
    if kernel is None:
        return None
    n_rows = len(order)
    values = np.empty(n_rows)
    chunk = max(1, _CHUNK_ELEMENTS // n_rows)
    for start in range(0, n_rows, chunk):
        stop = min(n_rows, start + chunk)
        weights = np.ones((stop - start, n_rows), dtype=np.int64)
        weights[np.arange(stop - start), np.arange(start, stop)] = 0
        workspace.load(weights)
        values[start:stop] = kernel()
    leave_one_out = np.empty(n_rows)
    leave_one_out[order] = values
    return leave_one_out


def jackknife_ci(
    statistic: Callable[..., float], *arrays: Any, confidence_level: float = 0.95
) -> JackknifeCI:
    """theta +- z SE_jackknife, z the normal quantile of (1 + confidence_level) / 2; NaN where undefined."""
    confidence_level = check_fraction(confidence_level, "confidence_level", include_one=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        estimate = float(statistic(*arrays)) if len(arrays[0]) else float("nan")
    items = jackknife_items(statistic, *arrays)
    if items is None:
        return JackknifeCI(estimate, float("nan"), float("nan"), float("nan"))
    standard_error = float(items.std(ddof=1) / np.sqrt(items.size))
    half_width = float(ndtri(0.5 + confidence_level / 2.0)) * standard_error
    return JackknifeCI(estimate, estimate - half_width, estimate + half_width, standard_error)
