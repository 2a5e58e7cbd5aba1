"""Calibration metrics of confidence estimators on a per-question table, with bootstrap intervals.

Each estimator is a column of confidences c in [0, 1], one per question. Against the capability target
(mu_hat, the question's expected accuracy) capcal reports the binned ECE and beside it the debiased ECE
(``capcal_metrics.debiased_expected_calibration_error``), Brier, the finite-sample-corrected Brier, the Brier
skill over the constant forecast at the base rate mean mu_hat (finite-k corrected when every n >= 2),
soft-label AUROC and Spearman; against the response target (z, the correctness of the question's first
sampled response) ECE, Brier and AUROC. Every value comes with a percentile-bootstrap interval over questions;
an estimator's metrics are evaluated on the same resamples (``capcal_metrics.bootstrap_cis``, drawn once per
estimator), except the debiased ECE, whose interval is the jackknife normal interval estimate +- z SE
(``capcal_metrics.jackknife_ci``; its percentile-bootstrap interval does not cover, see docs/methods.md);
``interval_method`` says which. Where simulation showed that the interval does not cover (the binned ECEs,
biased upward; docs/methods.md, "The bias of binned ECE") the row's ``interval_note`` says so; read the
interval beside it as a resampling spread, not a confidence interval. The "random" row is the expectation
under c ~ U(0, 1) where it is exact. :data:`HIGHER_IS_BETTER` gives every metric's direction.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

import capcal_metrics as cm
from analysis.estimators.adaptive import first_look

__all__ = [
    "CAPABILITY_METRICS",
    "HIGHER_IS_BETTER",
    "INTERVAL_NOTES",
    "JACKKNIFE_METRICS",
    "interval_label",
    "intervals_note",
    "RESPONSE_METRICS",
    "calibration_table",
    "first_response_correctness",
    "is_adaptive",
    "sampling_of",
]

CAPABILITY_METRICS = (
    "capability_ece",
    "capability_ece_debiased",
    "capability_brier",
    "corrected_capability_brier",
    "capability_brier_skill",
    "soft_auroc",
    "spearman",
)
RESPONSE_METRICS = ("response_ece", "response_brier", "response_auroc")

# Direction of every metric: True when higher is better. ECE and Brier: 0 = perfect; the Brier skill: 1 =
# perfect, 0 = no better than the base rate, negative = worse; AUROC: 0.5 = no discrimination; Spearman: 0.
HIGHER_IS_BETTER: dict[str, bool] = {
    "capability_ece": False,
    "capability_ece_debiased": False,
    "capability_brier": False,
    "corrected_capability_brier": False,
    "capability_brier_skill": True,
    "soft_auroc": True,
    "spearman": True,
    "response_ece": False,
    "response_brier": False,
    "response_auroc": True,
}

# Metrics with the jackknife normal interval (their percentile-bootstrap interval does not cover).
JACKKNIFE_METRICS = ("capability_ece_debiased",)

# Metric -> what to print beside its interval where simulation showed that the interval does not cover.
INTERVAL_NOTES: dict[str, str] = {
    "capability_ece": (
        "interval does not cover: binned ECE is biased upward (for a nearly calibrated forecast its 95% "
        "bootstrap interval almost never covers the population ECE); compare the debiased ECE "
        "(docs/methods.md)"
    ),
    "response_ece": (
        "interval does not cover: binned ECE is biased upward (docs/methods.md, The bias of binned ECE)"
    ),
}


def interval_label(metric: str, confidence_level: float = 0.95) -> str:
    """What made ``metric``'s interval in these tables: "95% jackknife interval" (estimate +- 1.96 jackknife
    SE) for :data:`JACKKNIFE_METRICS`, "95% bootstrap interval" (percentile) for the others."""
    method = "jackknife" if metric in JACKKNIFE_METRICS else "bootstrap"
    return f"{confidence_level:.0%} {method} interval"


def intervals_note(metrics: Sequence[str], n_resamples: int) -> str:
    """One phrase naming the interval method of each of ``metrics``: bootstrap (with its resamples) for
    most, the jackknife for the debiased ECE."""
    jackknifed = [metric for metric in metrics if metric in JACKKNIFE_METRICS]
    text = f"95% intervals: percentile bootstrap over questions ({n_resamples} resamples)"
    if jackknifed:
        text += f", but estimate +- 1.96 jackknife SE for {', '.join(jackknifed)}"
    return text


def first_response_correctness(table: pd.DataFrame) -> np.ndarray:
    """z of each question's first sampled response (the response-calibration target)."""
    return np.array([int(vector[0]) for vector in table["correctness"]], dtype=float)


def sampling_of(table: pd.DataFrame) -> str:
    """How the table's questions were sampled: its ``sampling`` labels joined by "; " ("fixed k", or
    "adaptive (looks ..., rule ...)", ``analysis.runs.records.sampling_label``); "fixed k" without the
    column."""
    if "sampling" not in table.columns or table.empty:
        return "fixed k"
    return "; ".join(dict.fromkeys(str(label) for label in table["sampling"]))


def is_adaptive(table: pd.DataFrame) -> bool:
    """Whether the table's questions were sampled adaptively (``analysis.estimators.adaptive.first_look``)."""
    return first_look(table) is not None


def _metric_functions(
    confidence: np.ndarray,
    mu_hat: np.ndarray,
    z: np.ndarray,
    n: np.ndarray,
    mu_square_hat: np.ndarray | None = None,
) -> dict:
    """``bootstrap_cis`` specification: metric name -> (function, arrays). With ``mu_square_hat`` (an
    adaptive run's unbiased estimates of mu^2 after stopping) the corrected Brier and the skill are the
    moment forms of ``analysis.estimators.adaptive`` (``capcal_metrics.capability_brier_from_moments``,
    ``brier_skill_score_from_moments``), unbiased after stopping; the n-corrected forms assume a fixed n."""
    metrics = {
        "capability_ece": (cm.expected_calibration_error, (confidence, mu_hat)),
        "capability_ece_debiased": (cm.debiased_expected_calibration_error, (confidence, mu_hat)),
        "capability_brier": (cm.brier_score, (confidence, mu_hat)),
        "corrected_capability_brier": (cm.corrected_capability_brier_score, (confidence, mu_hat, n)),
        "capability_brier_skill": (cm.corrected_brier_skill_score, (confidence, mu_hat, n)),
        "soft_auroc": (cm.soft_label_auroc, (confidence, mu_hat)),
        "spearman": (cm.spearman_correlation, (confidence, mu_hat)),
        "response_ece": (cm.expected_calibration_error, (confidence, z)),
        "response_brier": (cm.brier_score, (confidence, z)),
        "response_auroc": (cm.auroc, (confidence, z)),
    }
    if mu_square_hat is not None:
        moments = (confidence, mu_hat, mu_square_hat)
        metrics["corrected_capability_brier"] = (cm.capability_brier_from_moments, moments)
        metrics["capability_brier_skill"] = (cm.brier_skill_score_from_moments, moments)
    elif n.size == 0 or n.min() < 2:  # the corrected Brier needs n >= 2 samples per question
        del metrics["corrected_capability_brier"]
        metrics["capability_brier_skill"] = (cm.brier_skill_score, (confidence, mu_hat))
    return {name: metrics[name] for name in (*CAPABILITY_METRICS, *RESPONSE_METRICS) if name in metrics}


def _random_brier_skill(mu_hat: np.ndarray, n: np.ndarray, mu_square_hat: np.ndarray | None = None) -> float:
    """Expected Brier skill of c ~ U(0, 1), in the form the table reports (corrected when every n >= 2; with
    an adaptive run's ``mu_square_hat``, ``1 - mean_i (1/3 - mu_hat_i + mu_square_hat_i) / S_hat``, S_hat of
    ``capcal_metrics.base_rate_variance_from_moments``: E (c - mu)^2 = 1/3 - mu + mu^2 for c ~ U(0, 1))."""
    if mu_hat.size < 2:
        return float("nan")
    if mu_square_hat is not None:
        reference = cm.base_rate_variance_from_moments(mu_hat, mu_square_hat)
        expected = float(np.mean(1.0 / 3.0 - mu_hat + mu_square_hat))
        return 1.0 - expected / reference if reference > 0.0 else float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        return cm.random_baseline_brier_skill_score(mu_hat, n if n.min() >= 2 else None)


def calibration_table(
    table: pd.DataFrame,
    estimators: Sequence[str],
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per (estimator, metric): estimate, low, high, the number of questions it was computed on,
    ``sampling`` (how the questions were sampled: "fixed k" or "adaptive (looks ..., rule ...)",
    :func:`sampling_of`), ``interval_method`` ("bootstrap percentile" or "jackknife normal") and
    ``interval_note`` (empty, or the warning of :data:`INTERVAL_NOTES` where the interval does not cover).

    ``table`` holds ``expected_accuracy``, ``n``, ``correctness`` and one confidence column per name in
    ``estimators``; questions where an estimator has no confidence (NaN, e.g. a verbalized answer that could
    not be parsed) are left out of that estimator's rows and counted in ``questions_missing``. The corrected
    Brier needs n >= 2 samples per question and is omitted otherwise. An adaptive run's table (any
    ``sampling`` other than "fixed k") also holds ``mu_squared_hat``: its ``expected_accuracy`` is already the
    unbiased mu_hat after stopping, and the corrected Brier and the skill take the unbiased mu^2 estimates
    (:func:`_metric_functions`), the values of ``analysis.estimators.adaptive.adaptive_capability_metrics``.
    """
    mu_all = table["expected_accuracy"].to_numpy(dtype=float)
    n_all = table["n"].to_numpy(dtype=float)
    mu2_all = table["mu_squared_hat"].to_numpy(dtype=float) if is_adaptive(table) else None
    sampling = sampling_of(table)
    z_all = first_response_correctness(table)
    rows = []
    for estimator in estimators:
        confidence_all = table[estimator].to_numpy(dtype=float)
        keep = np.isfinite(confidence_all)
        confidence, mu_hat, n, z = confidence_all[keep], mu_all[keep], n_all[keep], z_all[keep]
        mu2 = mu2_all[keep] if mu2_all is not None else None
        metrics = _metric_functions(confidence, mu_hat, z, n, mu2)
        if confidence.size < 2:
            intervals = {metric: cm.BootstrapCI(np.nan, np.nan, np.nan) for metric in metrics}
        else:
            jackknifed = {name: metrics.pop(name) for name in JACKKNIFE_METRICS if name in metrics}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
                intervals = cm.bootstrap_cis(
                    metrics, n_resamples=n_resamples, confidence_level=confidence_level, seed=seed
                )
            for name, (function, arrays) in jackknifed.items():
                jackknife = cm.jackknife_ci(function, *arrays, confidence_level=confidence_level)
                intervals[name] = cm.BootstrapCI(jackknife.estimate, jackknife.low, jackknife.high)
            intervals = {
                name: intervals[name]
                for name in (*CAPABILITY_METRICS, *RESPONSE_METRICS)
                if name in intervals
            }
        for metric, ci in intervals.items():
            estimate, low, high = float(ci.estimate), float(ci.low), float(ci.high)
            rows.append(
                {
                    "estimator": estimator,
                    "metric": metric,
                    "estimate": estimate,
                    "low": low,
                    "high": high,
                    "questions": int(keep.sum()),
                    "questions_missing": int((~keep).sum()),
                    "sampling": sampling,
                    "interval_method": "jackknife normal"
                    if metric in JACKKNIFE_METRICS
                    else "bootstrap percentile",
                    "interval_note": INTERVAL_NOTES.get(metric, ""),
                }
            )
    random_rows = {
        "capability_brier": cm.random_baseline_brier_score(mu_all),
        "capability_brier_skill": _random_brier_skill(mu_all, n_all, mu2_all),
        "response_brier": cm.random_baseline_brier_score(z_all),
        "soft_auroc": 0.5,
        "response_auroc": 0.5,
        "spearman": 0.0,
    }
    for metric, value in random_rows.items():
        rows.append(
            {
                "estimator": "random (expected)",
                "metric": metric,
                "estimate": float(value),
                "low": float("nan"),
                "high": float("nan"),
                "questions": len(table),
                "questions_missing": 0,
                "sampling": sampling,
                "interval_method": "",  # an expectation: no interval
                "interval_note": "",
            }
        )
    return pd.DataFrame(rows)
