r"""Jackknife over questions: influence values, standard error and the normal interval of any metric.

With theta the metric on all N questions and theta_(-i) the metric without question i (rows of every array
left out together), the jackknife influence value of question i is

    item_i = theta - (N - 1) (theta_(-i) - mean_j theta_(-j)),

so that mean_i item_i = theta and std(items, ddof=1) / sqrt(N) is the jackknife standard error
sqrt((N - 1) / N sum_i (theta_(-i) - mean_j theta_(-j))^2) (Efron & Tibshirani 1993, ch. 11). For a metric
that is a mean of per-question terms item_i is that term. The interval is theta +- z_{1 - alpha/2} SE.

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

from .validation import UndefinedMetricWarning, check_fraction

__all__ = ["JackknifeCI", "jackknife_ci", "jackknife_items"]


class JackknifeCI(NamedTuple):
    """Estimate on the full data, the normal interval [low, high] and the jackknife standard error."""

    estimate: float
    low: float
    high: float
    standard_error: float


def jackknife_items(statistic: Callable[..., float], *arrays: Any) -> np.ndarray | None:
    """Per-row jackknife influence values of ``statistic(*arrays)`` (rows = questions), or None if undefined.

    ``item_i = theta - (N - 1) (theta_(-i) - mean_j theta_(-j))``: mean(items) = theta and
    std(items, ddof=1) / sqrt(N) is the jackknife standard error. None when N < 2 or theta or any
    leave-one-out value is not finite.
    """
    arrays = tuple(np.asarray(array) for array in arrays)
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
