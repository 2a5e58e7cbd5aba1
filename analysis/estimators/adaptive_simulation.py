"""Simulation of the capability metrics under adaptive sampling against fixed-k sampling of the same
questions.

One replication draws N questions' mu from a named distribution, gives them confidences (a pool of real
confidences resampled and matched to mu by rank: the highest confidence to the highest mu), and draws each
question's k_max Bernoulli(mu) samples as binomial increments between the plan's looks. The fixed-k run uses
all k_max samples, the adaptive run the prefix where the plan stops (the two are coupled, as an adaptive run's
samples are a prefix of the fixed-k run's). Each metric's error is its value minus the same metric computed
with the true mu (Brier, skill: against mu; ECE: the binned ECE against mu; soft AUROC against mu).
Reported per metric: bias (mean error) of both with Monte-Carlo standard errors, the ratio of the errors'
standard deviations adaptive / fixed-k, and the samples saved, 1 - mean n / k_max.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

import capcal_metrics as cm
from capcal_metrics.validation import check_integer, check_probabilities

from .adaptive import ADAPTIVE_CAPABILITY_METRICS, AdaptiveEstimates, metrics_from_estimates, stopped_counts

__all__ = ["MU_DISTRIBUTIONS", "draw_mu", "simulate_adaptive_metrics"]

# name -> what it is; draw_mu draws from it.
MU_DISTRIBUTIONS = {
    "beta(0.2,0.2)": "U-shaped: Beta(0.2, 0.2)",
    "point-masses": "U-shaped: 30% at mu = 0, 30% at mu = 1, 40% Uniform(0, 1)",
    "beta(0.5,3)": "skewed: Beta(0.5, 3) (mean 1/7)",
}


def draw_mu(distribution: str, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` draws of mu from one of :data:`MU_DISTRIBUTIONS`."""
    if distribution == "beta(0.2,0.2)":
        return rng.beta(0.2, 0.2, size)
    if distribution == "beta(0.5,3)":
        return rng.beta(0.5, 3.0, size)
    if distribution == "point-masses":
        kind = rng.choice(3, size=size, p=[0.3, 0.3, 0.4])
        return np.where(kind == 0, 0.0, np.where(kind == 1, 1.0, rng.uniform(0.0, 1.0, size)))
    raise ValueError(f"unknown mu distribution {distribution!r}; choose one of {', '.join(MU_DISTRIBUTIONS)}")


def _fixed_metrics(confidence: np.ndarray, n_correct: np.ndarray, k: int) -> dict[str, float]:
    """The report's fixed-k capability metrics (analysis.report.calibration_table) at k samples each."""
    mu_hat = n_correct / k
    return {
        "capability_ece_debiased": cm.debiased_expected_calibration_error(confidence, mu_hat),
        "corrected_capability_brier": cm.corrected_capability_brier_score(confidence, mu_hat, k),
        "capability_brier_skill": cm.corrected_brier_skill_score(confidence, mu_hat, k),
        "soft_auroc": cm.soft_label_auroc(confidence, mu_hat),
    }


def _true_metrics(confidence: np.ndarray, mu: np.ndarray) -> dict[str, float]:
    """The metrics against the true mu: what both runs estimate."""
    return {
        "capability_ece_debiased": cm.expected_calibration_error(confidence, mu),
        "corrected_capability_brier": cm.brier_score(confidence, mu),
        "capability_brier_skill": cm.brier_skill_score(confidence, mu),
        "soft_auroc": cm.soft_label_auroc(confidence, mu),
    }


def _estimate_lookup(plan: cm.SequentialPlan) -> AdaptiveEstimates:
    """mu_hat and mu_square_hat of every terminal state, as (looks, k_max + 1) tables (NaN elsewhere)."""
    n, s = cm.terminal_states(plan)
    look = np.searchsorted(plan.looks, n)
    tables = []
    for values in (cm.unbiased_mean(plan, n, s), cm.unbiased_mean_square(plan, n, s)):
        table = np.full((len(plan.looks), plan.k_max + 1), np.nan)
        table[look, s] = values
        tables.append(table)
    return AdaptiveEstimates(*tables)


def simulate_adaptive_metrics(
    distribution: str,
    confidence_pool: ArrayLike,
    plan: cm.SequentialPlan,
    *,
    n_questions: int = 300,
    n_replications: int = 400,
    seed: int = 0,
) -> pd.DataFrame:
    """Bias and spread of the adaptive and fixed-k capability metrics (module docstring), one row per metric:
    ``bias_adaptive``, ``bias_adaptive_se``, ``bias_fixed``, ``bias_fixed_se``, ``se_ratio`` (the standard
    error of the metric, its sd over replications with the questions redrawn, adaptive / fixed-k: what the
    width of the report's interval over questions reflects), ``noise_sd_ratio`` (sd of the error against
    the true-mu metric of the same questions, adaptive / fixed-k: the sampling noise alone), ``samples_saved``
    (1 - mean n / k_max) and the replications
    where both were defined. Seeded by ``numpy.random.default_rng(seed)``."""
    pool = check_probabilities(confidence_pool, "confidence_pool")
    n_questions = check_integer(n_questions, "n_questions", minimum=2)
    n_replications = check_integer(n_replications, "n_replications", minimum=2)
    draw_mu(distribution, 1, np.random.default_rng(0))  # checks the name before simulating
    rng = np.random.default_rng(seed)
    lookup = _estimate_lookup(plan)
    steps = np.diff(np.r_[0, plan.looks])
    errors = {"adaptive": [], "fixed": []}
    values = {"adaptive": [], "fixed": []}
    drawn = 0.0
    for _ in range(n_replications):
        mu = draw_mu(distribution, n_questions, rng)
        confidence = np.empty(n_questions)
        confidence[np.argsort(mu, kind="stable")] = np.sort(rng.choice(pool, n_questions))
        successes = np.cumsum(rng.binomial(steps[None, :], mu[:, None]), axis=1)
        n, s = stopped_counts(successes, plan)
        look = np.searchsorted(plan.looks, n)
        drawn += float(n.mean())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
            truth = _true_metrics(confidence, mu)
            adaptive = metrics_from_estimates(
                confidence, AdaptiveEstimates(lookup.mu_hat[look, s], lookup.mu_square_hat[look, s])
            )
            fixed = _fixed_metrics(confidence, successes[:, -1], plan.k_max)
        errors["adaptive"].append({name: adaptive[name] - truth[name] for name in truth})
        errors["fixed"].append({name: fixed[name] - truth[name] for name in truth})
        values["adaptive"].append(adaptive)
        values["fixed"].append(fixed)
    adaptive_errors, fixed_errors = pd.DataFrame(errors["adaptive"]), pd.DataFrame(errors["fixed"])
    adaptive_values, fixed_values = pd.DataFrame(values["adaptive"]), pd.DataFrame(values["fixed"])
    rows = []
    for name in ADAPTIVE_CAPABILITY_METRICS:
        both = adaptive_errors[name].notna() & fixed_errors[name].notna()
        a, f = adaptive_errors.loc[both, name], fixed_errors.loc[both, name]
        rows.append(
            {
                "distribution": distribution,
                "looks": "-".join(str(look) for look in plan.looks),
                "metric": name,
                "bias_adaptive": float(a.mean()),
                "bias_adaptive_se": float(a.std(ddof=1) / math.sqrt(a.size)),
                "bias_fixed": float(f.mean()),
                "bias_fixed_se": float(f.std(ddof=1) / math.sqrt(f.size)),
                "se_ratio": float(
                    adaptive_values.loc[both, name].std(ddof=1) / fixed_values.loc[both, name].std(ddof=1)
                ),
                "noise_sd_ratio": float(a.std(ddof=1) / f.std(ddof=1)),
                "samples_saved": 1.0 - drawn / n_replications / plan.k_max,
                "replications": int(both.sum()),
            }
        )
    return pd.DataFrame(rows)
