"""Calibration metrics of confidence estimators on a per-question table, with bootstrap intervals.

Each estimator is a column of confidences c in [0, 1], one per question. Against the capability target
(mu_hat, the question's expected accuracy) capcal reports ECE, Brier, the finite-sample-corrected Brier,
soft-label AUROC and Spearman; against the response target (z, the correctness of the question's first
sampled response) ECE, Brier and AUROC. Every value comes with a percentile-bootstrap interval over questions;
an estimator's metrics are evaluated on the same resamples (``capcal_metrics.bootstrap_cis``, drawn once per
estimator). The "random" row is the expectation under c ~ U(0, 1) where it is exact.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

import capcal_metrics as cm

__all__ = ["CAPABILITY_METRICS", "RESPONSE_METRICS", "calibration_table", "first_response_correctness"]

CAPABILITY_METRICS = (
    "capability_ece",
    "capability_brier",
    "corrected_capability_brier",
    "soft_auroc",
    "spearman",
)
RESPONSE_METRICS = ("response_ece", "response_brier", "response_auroc")


def first_response_correctness(table: pd.DataFrame) -> np.ndarray:
    """z of each question's first sampled response (the response-calibration target)."""
    return np.array([int(vector[0]) for vector in table["correctness"]], dtype=float)


def _metric_functions(confidence: np.ndarray, mu_hat: np.ndarray, z: np.ndarray, n: np.ndarray) -> dict:
    """``bootstrap_cis`` specification: metric name -> (function, arrays)."""
    metrics = {
        "capability_ece": (cm.expected_calibration_error, (confidence, mu_hat)),
        "capability_brier": (cm.brier_score, (confidence, mu_hat)),
        "corrected_capability_brier": (cm.corrected_capability_brier_score, (confidence, mu_hat, n)),
        "soft_auroc": (cm.soft_label_auroc, (confidence, mu_hat)),
        "spearman": (cm.spearman_correlation, (confidence, mu_hat)),
        "response_ece": (cm.expected_calibration_error, (confidence, z)),
        "response_brier": (cm.brier_score, (confidence, z)),
        "response_auroc": (cm.auroc, (confidence, z)),
    }
    if n.size == 0 or n.min() < 2:  # the corrected Brier needs n >= 2 samples per question
        del metrics["corrected_capability_brier"]
    return metrics


def calibration_table(
    table: pd.DataFrame,
    estimators: Sequence[str],
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per (estimator, metric): estimate, low, high, and the number of questions it was computed on.

    ``table`` holds ``expected_accuracy``, ``n``, ``correctness`` and one confidence column per name in
    ``estimators``; questions where an estimator has no confidence (NaN, e.g. a verbalized answer that could
    not be parsed) are left out of that estimator's rows and counted in ``questions_missing``. The corrected
    Brier needs n >= 2 samples per question and is omitted otherwise.
    """
    mu_all = table["expected_accuracy"].to_numpy(dtype=float)
    n_all = table["n"].to_numpy(dtype=float)
    z_all = first_response_correctness(table)
    rows = []
    for estimator in estimators:
        confidence_all = table[estimator].to_numpy(dtype=float)
        keep = np.isfinite(confidence_all)
        confidence, mu_hat, n, z = confidence_all[keep], mu_all[keep], n_all[keep], z_all[keep]
        metrics = _metric_functions(confidence, mu_hat, z, n)
        if confidence.size < 2:
            intervals = {metric: cm.BootstrapCI(np.nan, np.nan, np.nan) for metric in metrics}
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
                intervals = cm.bootstrap_cis(
                    metrics, n_resamples=n_resamples, confidence_level=confidence_level, seed=seed
                )
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
                }
            )
    random_rows = {
        "capability_brier": cm.random_baseline_brier_score(mu_all),
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
            }
        )
    return pd.DataFrame(rows)
