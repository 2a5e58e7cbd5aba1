"""Replay of a stopping plan on a fixed-k run: does the unbiased estimate after stopping average to the full-k
mean on real samples?

Each question's k logged samples are put in R random orders (fixed seed); the plan is applied to each
order's prefix and the question's estimate taken where it stops. The samples of a question are exchangeable
under a random order, so every admissible path to the stop (n, s) is equally likely and the path-count
estimate's mean over all orders is exactly the full-k mean s_k / k (docs/methods.md); R orders estimate that
mean with a Monte-Carlo error. The replay also counts the samples the plan would have drawn and computes
the capability metrics of each order (:func:`analysis.estimators.adaptive.adaptive_capability_metrics`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

import capcal_metrics as cm
from capcal_metrics.validation import check_integer

from .adaptive import ADAPTIVE_CAPABILITY_METRICS, adaptive_capability_metrics, stopped_counts

__all__ = ["ReplayResult", "replay_stopping"]


class ReplayResult(NamedTuple):
    """Per-question and per-metric results of :func:`replay_stopping`.

    ``questions``: per question, ``full_mean`` (s_k / k), ``replay_mean`` (mean of the unbiased estimate over
    the R orders), ``replay_se`` (its Monte-Carlo standard error), ``mean_samples`` (mean n drawn);
    ``metrics`` (when confidences are given): per metric, ``fixed`` (the fixed-k metric on all k samples),
    ``replay_mean`` and ``replay_se`` over the orders; ``mean_abs_difference`` = mean_i |replay_mean_i -
    full_mean_i| with ``mean_abs_difference_se`` (its standard error over questions); ``mean_difference``
    (signed) and its standard error; ``samples_fraction`` = mean n / k_max (1 - it is the saving).
    """

    questions: pd.DataFrame
    metrics: pd.DataFrame
    mean_abs_difference: float
    mean_abs_difference_se: float
    mean_difference: float
    mean_difference_se: float
    samples_fraction: float


def _check_correctness(correctness: ArrayLike, plan: cm.SequentialPlan) -> np.ndarray:
    """A (questions, k) 0/1 matrix with k >= k_max."""
    matrix = np.asarray(correctness)
    if matrix.ndim != 2 or matrix.shape[0] < 1:
        raise ValueError(f"correctness must be a (questions, k) matrix, got shape {matrix.shape}")
    if matrix.shape[1] < plan.k_max:
        raise ValueError(f"the plan's k_max = {plan.k_max} exceeds the run's k = {matrix.shape[1]}")
    if not np.all((matrix == 0) | (matrix == 1)):
        raise ValueError("correctness must hold 0/1 values only")
    return matrix.astype(np.int64)


def replay_stopping(
    correctness: ArrayLike,
    plan: cm.SequentialPlan,
    n_orders: int = 200,
    *,
    confidence: ArrayLike | None = None,
    seed: int = 0,
) -> ReplayResult:
    """Apply ``plan`` to ``n_orders`` random orders of each question's k samples (``correctness`` (N, k), k >=
    k_max); see :class:`ReplayResult`. Orders come from ``numpy.random.default_rng(seed).permuted`` row by
    row. The full-k mean uses all k samples; the estimate after stopping uses the first n <= k_max."""
    matrix = _check_correctness(correctness, plan)
    n_orders = check_integer(n_orders, "n_orders", minimum=2)
    rng = np.random.default_rng(seed)
    looks = np.asarray(plan.looks)
    estimates = np.empty((n_orders, matrix.shape[0]))
    drawn = np.empty((n_orders, matrix.shape[0]))
    metric_values = []
    for order in range(n_orders):
        permuted = rng.permuted(matrix, axis=1)
        n, s = stopped_counts(np.cumsum(permuted, axis=1)[:, looks - 1], plan)
        estimates[order] = cm.unbiased_mean(plan, n, s)
        drawn[order] = n
        if confidence is not None:
            metric_values.append(adaptive_capability_metrics(confidence, n, s, plan))
    full_mean = matrix.mean(axis=1)
    replay_mean = estimates.mean(axis=0)
    questions = pd.DataFrame(
        {
            "full_mean": full_mean,
            "replay_mean": replay_mean,
            "replay_se": estimates.std(axis=0, ddof=1) / math.sqrt(n_orders),
            "mean_samples": drawn.mean(axis=0),
        }
    )
    difference = replay_mean - full_mean
    return ReplayResult(
        questions=questions,
        metrics=_metric_table(metric_values, confidence, matrix),
        mean_abs_difference=float(np.mean(np.abs(difference))),
        mean_abs_difference_se=_standard_error(np.abs(difference)),
        mean_difference=float(np.mean(difference)),
        mean_difference_se=_standard_error(difference),
        samples_fraction=float(drawn.mean() / plan.k_max),
    )


def _standard_error(values: np.ndarray) -> float:
    """sd / sqrt(N) of the mean of ``values`` (NaN for one value)."""
    return float(np.std(values, ddof=1) / math.sqrt(values.size)) if values.size > 1 else math.nan


def _metric_table(
    values: list[dict[str, float]], confidence: ArrayLike | None, matrix: np.ndarray
) -> pd.DataFrame:
    """Per metric: the fixed-k value on all k samples, the mean and Monte-Carlo SE over the orders."""
    columns = ["metric", "fixed", "replay_mean", "replay_se"]
    if confidence is None:
        return pd.DataFrame(columns=columns)
    k = matrix.shape[1]
    fixed = adaptive_capability_metrics(
        confidence, np.full(matrix.shape[0], k), matrix.sum(axis=1), cm.unanimity_rule([k])
    )
    frame = pd.DataFrame(values)
    return pd.DataFrame(
        [
            {
                "metric": name,
                "fixed": fixed[name],
                "replay_mean": float(frame[name].mean()),
                "replay_se": float(frame[name].std(ddof=1) / math.sqrt(len(frame))),
            }
            for name in ADAPTIVE_CAPABILITY_METRICS
        ],
        columns=columns,
    )
