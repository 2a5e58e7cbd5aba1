"""Capability metrics of an adaptively sampled run: per-question (c, n, s) and the stopping plan -> the
headline metrics under the names the report uses for fixed-k runs, estimated without the bias
of a data-dependent stop.

Per question the plan's path-count estimates (:mod:`capcal_metrics.sequential`) give mu_hat_i, unbiased for
mu_i, and mu2_hat_i, unbiased for mu_i^2, at any stop. The metrics (derivations in docs/methods.md, "Adaptive
sampling: the capability metrics after stopping"):

* ``corrected_capability_brier`` = ``mean_i (c_i^2 - 2 c_i mu_hat_i + mu2_hat_i)``, unbiased for
  ``mean_i (c_i - mu_i)^2`` (``capcal_metrics.capability_brier_from_moments``);
* ``capability_brier_skill`` = ``1 - CB / S_hat``, S_hat = spread of mu_hat less (1 - 1/N) mean_i
  (mu_hat_i^2 - mu2_hat_i), each part unbiased (``capcal_metrics.brier_skill_score_from_moments``);
* ``capability_ece_debiased`` and ``soft_auroc``: the fixed-k functions with target mu_hat (the debiased ECE
  takes each bin's noise from the within-bin spread of mu_hat - c, which holds whatever made mu_hat; soft
  AUROC is a ratio of sums of mu_i (1 - mu_j), a plug-in in both forms);
* ``pass_at_k``: mean of the unbiased per-question pass@k for k <= l_1, NaN with the reason otherwise;
* leakage-free consistency from a draw pool within the first l_1 samples of every question (drawn before any
  stopping decision), scored against a target from every other sample, unbiased given the pool.

With a single look (a fixed-k run) every value equals the fixed-k metric of the report (up to rounding).
Intervals: the percentile bootstrap over questions (``capcal_metrics.bootstrap_cis``), and for the debiased
ECE the jackknife normal interval, as the report's calibration table does.
"""

from __future__ import annotations

import json
import math
import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

import capcal_metrics as cm
from capcal_metrics.validation import check_probabilities
from capcal_tasks.adaptive_records import sequential_plan

__all__ = [
    "ADAPTIVE_CAPABILITY_METRICS",
    "AdaptiveEstimates",
    "adaptive_capability_metrics",
    "adaptive_estimates",
    "adaptive_leakage_free_table",
    "adaptive_metric_intervals",
    "adaptive_pass_at_k",
    "first_look",
    "first_look_table",
    "last_look",
    "leakage_free_target",
    "metrics_from_estimates",
    "stopped_counts",
]

# The capability metrics that stay unbiased (or keep the fixed-k form's small bias) after stopping, by the
# names of analysis.report.calibration_table.
ADAPTIVE_CAPABILITY_METRICS = (
    "capability_ece_debiased",
    "corrected_capability_brier",
    "capability_brier_skill",
    "soft_auroc",
)


class AdaptiveEstimates(NamedTuple):
    """Per-question unbiased estimates after stopping: mu_hat (of mu) and mu_square_hat (of mu^2)."""

    mu_hat: np.ndarray
    mu_square_hat: np.ndarray


def adaptive_estimates(
    plan: cm.SequentialPlan, n_samples: ArrayLike, n_correct: ArrayLike
) -> AdaptiveEstimates:
    """``N_{1,0}(n, s) / N(n, s)`` and ``N_{2,0}(n, s) / N(n, s)`` per question (Rao-Blackwell; see
    :func:`capcal_metrics.unbiased_mean`); s/n and s(s - 1)/(n(n - 1)) at a single look."""
    return AdaptiveEstimates(
        cm.unbiased_mean(plan, n_samples, n_correct), cm.unbiased_mean_square(plan, n_samples, n_correct)
    )


def _metric_functions(confidence: np.ndarray, estimates: AdaptiveEstimates) -> dict:
    """``bootstrap_cis`` specification of :data:`ADAPTIVE_CAPABILITY_METRICS`: name -> (function, arrays)."""
    mu_hat, mu_square_hat = estimates
    return {
        "capability_ece_debiased": (cm.debiased_expected_calibration_error, (confidence, mu_hat)),
        "corrected_capability_brier": (
            cm.capability_brier_from_moments,
            (confidence, mu_hat, mu_square_hat),
        ),
        "capability_brier_skill": (cm.brier_skill_score_from_moments, (confidence, mu_hat, mu_square_hat)),
        "soft_auroc": (cm.soft_label_auroc, (confidence, mu_hat)),
    }


def _check_confidence(confidence: ArrayLike, size: int) -> np.ndarray:
    """One confidence in [0, 1] per question."""
    return check_probabilities(confidence, "confidence", length=size)


def adaptive_capability_metrics(
    confidence: ArrayLike, n_samples: ArrayLike, n_correct: ArrayLike, plan: cm.SequentialPlan
) -> dict[str, float]:
    """The :data:`ADAPTIVE_CAPABILITY_METRICS` of confidences ``c_i`` for questions stopped at (n_i, s_i)
    under ``plan`` (formulas in the module docstring). NaN (with an UndefinedMetricWarning) where a metric is
    undefined, as for fixed-k runs."""
    return metrics_from_estimates(confidence, adaptive_estimates(plan, n_samples, n_correct))


def metrics_from_estimates(confidence: ArrayLike, estimates: AdaptiveEstimates) -> dict[str, float]:
    """The :data:`ADAPTIVE_CAPABILITY_METRICS` from per-question unbiased mu_hat and mu_square_hat (e.g. of
    :func:`adaptive_estimates`)."""
    confidence = _check_confidence(confidence, np.size(estimates.mu_hat))
    return {
        name: float(function(*arrays))
        for name, (function, arrays) in _metric_functions(confidence, estimates).items()
    }


def adaptive_metric_intervals(
    confidence: ArrayLike,
    n_samples: ArrayLike,
    n_correct: ArrayLike,
    plan: cm.SequentialPlan,
    *,
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    seed: int = 0,
) -> dict[str, cm.BootstrapCI]:
    """:func:`adaptive_capability_metrics` with 95% intervals: percentile bootstrap over questions (questions
    are independent, so resampling whole questions with their (c, n, s) is valid after stopping), and the
    jackknife normal interval for the debiased ECE (``capcal_metrics.jackknife_ci``), as the report does."""
    estimates = adaptive_estimates(plan, n_samples, n_correct)
    confidence = _check_confidence(confidence, estimates.mu_hat.size)
    metrics = _metric_functions(confidence, estimates)
    function, arrays = metrics.pop("capability_ece_debiased")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        intervals = cm.bootstrap_cis(
            metrics, n_resamples=n_resamples, confidence_level=confidence_level, seed=seed
        )
    jackknife = cm.jackknife_ci(function, *arrays, confidence_level=confidence_level)
    intervals["capability_ece_debiased"] = cm.BootstrapCI(jackknife.estimate, jackknife.low, jackknife.high)
    return {name: intervals[name] for name in ADAPTIVE_CAPABILITY_METRICS}


def adaptive_pass_at_k(
    plan: cm.SequentialPlan, n_samples: ArrayLike, n_correct: ArrayLike, k: int
) -> tuple[float, str]:
    """(mean over questions of the unbiased pass@k, "") for k <= l_1; (NaN, the reason) for larger k.

    ``1 - N_{0,k}(n, s) / N(n, s)`` per question (:func:`capcal_metrics.unbiased_pass_at_k`), Chen et al.'s
    estimator at a single look. Past the first look no unbiased estimate of (1 - mu)^k exists.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a whole number >= 1, got {k!r}")
    if k > plan.looks[0]:
        return math.nan, (
            f"pass@{k} has no unbiased estimate after stopping: k exceeds the first look "
            f"l_1 = {plan.looks[0]}"
        )
    return float(np.mean(cm.unbiased_pass_at_k(plan, n_samples, n_correct, int(k)))), ""


def leakage_free_target(
    plan: cm.SequentialPlan,
    n_samples: ArrayLike,
    n_correct: ArrayLike,
    pool_size: int,
    pool_successes: ArrayLike,
) -> AdaptiveEstimates:
    """The leakage-free consistency's target after stopping: mu and mu^2 estimated from every sample outside
    the draw pool, unbiased given the pool.

    The pool (``pool_size`` of each question's first l_1 samples, ``pool_successes`` correct) is drawn before
    any stopping decision, so ``capcal_metrics.unbiased_moment_given_prefix`` with the pool as the prefix
    gives ``E[mu_hat | pool] = mu`` and ``E[mu2_hat | pool] = mu^2`` (needs pool_size + 2 <= l_1); then
    ``c^2 - 2 c mu_hat + mu2_hat`` is unbiased for ``(c - mu)^2`` for any c computed from the pool. At a
    single look: the share (and pair share) of the n - pool_size samples outside the pool.
    """
    return AdaptiveEstimates(
        cm.unbiased_moment_given_prefix(plan, n_samples, n_correct, pool_size, pool_successes, 1),
        cm.unbiased_moment_given_prefix(plan, n_samples, n_correct, pool_size, pool_successes, 2),
    )


def adaptive_leakage_free_table(leakage_free: pd.DataFrame, evaluation: pd.DataFrame) -> pd.DataFrame:
    """An adaptive run's leakage-free consistency (``consistency_from_table`` of its :func:`first_look_table`)
    with its target taken from every sample outside the draw pool (:func:`leakage_free_target`):
    ``mu_hat_lf`` and ``mu_squared_hat_lf`` unbiased given the pool, ``n_lf`` = n - pool size.

    The consistency itself still comes from the pool alone (a subset of the first l_1 samples, drawn before
    any stopping decision); only its target gains the later samples, so it rests on up to k_max - pool
    samples instead of the l_1 - pool left in the first look. Returned unchanged for a fixed-k
    ``evaluation`` or where the pool leaves fewer than 2 of the first l_1 samples (mu^2 would have no
    unbiased estimate given the pool).
    """
    look = first_look(evaluation)
    if look is None:
        return leakage_free
    n_lf = leakage_free["n_lf"].to_numpy(dtype=np.int64)
    pool_size = look - int(n_lf[0])
    if pool_size + 2 > look:
        return leakage_free
    first_successes = np.array([int(sum(list(vector)[:look])) for vector in evaluation["correctness"]])
    target_successes = np.rint(leakage_free["mu_hat_lf"].to_numpy(dtype=float) * n_lf).astype(np.int64)
    rules = {
        (tuple(looks), json.dumps(rule, sort_keys=True))
        for looks, rule in evaluation[["looks", "rule"]].itertuples(index=False)
    }
    if len(rules) != 1:
        raise ValueError(f"questions of several adaptive plans in one table ({len(rules)} plans)")
    looks, rule = rules.pop()
    plan = sequential_plan(looks, json.loads(rule))
    n = evaluation["n"].to_numpy(dtype=np.int64)
    estimates = leakage_free_target(
        plan, n, evaluation["s"].to_numpy(dtype=np.int64), pool_size, first_successes - target_successes
    )
    return leakage_free.assign(
        mu_hat_lf=estimates.mu_hat, mu_squared_hat_lf=estimates.mu_square_hat, n_lf=n - pool_size
    )


def stopped_counts(successes_at_looks: ArrayLike, plan: cm.SequentialPlan) -> tuple[np.ndarray, np.ndarray]:
    """(n_i, s_i) where each question stops under ``plan``, from its successes at every look.

    ``successes_at_looks`` is (N, m): column j holds the successes among the first l_j samples (a cumulative
    count). A question stops at the first look j with ``plan.stop[j, s_ij]`` (always at the last).
    """
    successes = np.asarray(successes_at_looks)
    looks = np.asarray(plan.looks)
    if successes.ndim != 2 or successes.shape[1] != looks.size:
        raise ValueError(
            f"successes_at_looks must have one column per look ({looks.size}), got shape {successes.shape}"
        )
    if np.any(successes < 0) or np.any(successes > looks) or np.any(np.diff(successes, axis=1) < 0):
        raise ValueError("successes_at_looks must be cumulative counts with 0 <= s_ij <= l_j")
    stops = plan.stop[np.arange(looks.size), successes.astype(np.intp)]
    first = np.argmax(stops, axis=1)  # the last look always stops
    return looks[first], successes[np.arange(successes.shape[0]), first].astype(np.int64)


def first_look(table: pd.DataFrame) -> int | None:
    """l_1, the first look of an adaptive run's question table (its ``looks`` column; one plan per
    table); None for a fixed-k table (no ``sampling`` starts with "adaptive", or no ``sampling`` column;
    a :func:`first_look_table` is fixed k)."""
    if "sampling" not in table.columns or not table["sampling"].astype(str).str.startswith("adaptive").any():
        return None
    firsts = {int(looks[0]) for looks in table["looks"]}
    if len(firsts) != 1:
        raise ValueError(f"questions of several adaptive plans in one table (first looks {sorted(firsts)})")
    return firsts.pop()


def last_look(table: pd.DataFrame) -> int | None:
    """k_max, the last look of an adaptive run's question table (the most samples a question can draw);
    None for a fixed-k table (as :func:`first_look`); one plan per table, as there."""
    if first_look(table) is None:
        return None
    lasts = {int(looks[-1]) for looks in table["looks"]}
    if len(lasts) != 1:
        raise ValueError(f"questions of several adaptive plans in one table (k_max {sorted(lasts)})")
    return lasts.pop()


def first_look_table(table: pd.DataFrame) -> pd.DataFrame:
    """An adaptive run's question table cut to each question's first l_1 samples, the samples drawn before
    any stopping decision: a fixed-k run of l_1 samples (``correctness``, ``extracted_answers`` and
    ``responses`` cut; ``n`` = l_1; ``s``, ``expected_accuracy``, ``mu_hat``, ``mu_squared_hat`` of those
    samples; ``sampling`` "fixed k (first look l_1 of ...)"). pass@k for k <= l_1, the budget curves and
    consistency computed on it are exact (its leakage-free target: :func:`adaptive_leakage_free_table`).
    A fixed-k table is returned as it is."""
    look = first_look(table)
    if look is None:
        return table
    cut = table.copy()
    for column in ("correctness", "extracted_answers", "responses"):
        if column in cut.columns:
            cut[column] = [list(values)[:look] for values in cut[column]]
    s = np.array([int(sum(vector)) for vector in cut["correctness"]])
    cut["n"] = look
    cut["s"] = s
    cut["expected_accuracy"] = cut["mu_hat"] = s / look
    cut["mu_squared_hat"] = s * (s - 1) / (look * (look - 1))
    cut["sampling"] = [f"fixed k (first look {look} of {label})" for label in table["sampling"]]
    return cut
