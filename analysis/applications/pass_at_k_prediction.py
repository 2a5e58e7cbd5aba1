"""pass@k prediction from a capability confidence.

The pass@k application of "On Calibration of LLMs: From Response To Capability" (arXiv 2602.13540), at the
instance and the dataset level, with its two oracle baselines.

A confidence p of query i predicts pass@k as ``s_ik = 1 - (1 - p_i)^k``; the reference is the unbiased
estimator from the query's n_i real samples with c_i correct, ``pass@k_i = 1 - C(n_i - c_i, k) / C(n_i, k)``
(``capcal_metrics.pass_at_k``).

* Instance level (:func:`instance_mse`): ``MSE_k = (1/N) sum_i (s_ik - pass@k_i)^2`` for k <= min n.
* Dataset level (:func:`dataset_curve`): ``S_k = (1/N) sum_i s_ik`` with the band
  ``S_k +- 1.96 sqrt(sum_i s_ik (1 - s_ik)) / N`` (the spread of the solved fraction if query i is solved
  with probability s_ik independently), against the observed mean unbiased pass@k.
* Baselines: Oracle-CC, p = mu_hat = c/n (the capability target itself), and Oracle-RC, p = the 0/1
  correctness of one response picked at random from the query's samples. The paper averages Oracle-RC over
  seeds; since the pick is correct with probability mu_hat and 1 - (1 - z)^k = z, its expected MSE is exact:
  ``mean_i [mu_hat_i (1 - pass@k_i)^2 + (1 - mu_hat_i) pass@k_i^2]`` (:func:`oracle_rc_mse`, Monte Carlo over
  seeds as an option).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from analysis.runs.validation import check_confidences, check_counts, check_grid
from capcal_metrics import pass_at_k, predicted_pass_at_k
from capcal_metrics.validation import check_integer, check_probabilities

__all__ = [
    "DEFAULT_KS",
    "dataset_curve",
    "instance_mse",
    "oracle_rc_mse",
    "pass_at_k_prediction",
]

DEFAULT_KS = (1, 4, 16, 64)


def _usable_ks(ks: Sequence[int], n: np.ndarray) -> list[int]:
    """The ks that are <= the smallest n (sorted, distinct); raises if none is."""
    checked = check_grid(ks, "ks")
    usable = [k for k in checked if k <= n.min()]
    if not usable:
        raise ValueError(f"no k in {checked} is <= the smallest number of samples ({int(n.min())})")
    return usable


def instance_mse(
    confidence: ArrayLike, n_samples: ArrayLike, n_correct: ArrayLike, ks: Sequence[int] = DEFAULT_KS
) -> pd.DataFrame:
    """Instance-level ``MSE_k = mean_i (1 - (1 - p_i)^k - pass@k_i)^2`` for each k <= min n (larger k are
    left out: the unbiased pass@k needs k <= n). Columns: k, mse, n_questions."""
    n, c = check_counts(n_samples, n_correct)
    p = check_probabilities(confidence, "confidence", length=n.size)
    rows = []
    for k in _usable_ks(ks, n):
        error = predicted_pass_at_k(p, k) - pass_at_k(n, c, k)
        rows.append({"k": k, "mse": float(np.mean(error**2)), "n_questions": int(n.size)})
    return pd.DataFrame(rows)


def dataset_curve(
    confidence: ArrayLike, n_samples: ArrayLike, n_correct: ArrayLike, ks: Sequence[int] | None = None
) -> pd.DataFrame:
    """Dataset-level predicted pass@k curve ``S_k = mean_i (1 - (1 - p_i)^k)`` with its 95% band
    ``S_k +- 1.96 sqrt(sum_i s_ik (1 - s_ik)) / N`` and the observed mean unbiased pass@k.

    ``ks`` defaults to 1..min n. Columns: k, predicted, band_low, band_high, observed.
    """
    n, c = check_counts(n_samples, n_correct)
    p = check_probabilities(confidence, "confidence", length=n.size)
    ks = range(1, int(n.min()) + 1) if ks is None else ks
    rows = []
    for k in _usable_ks(ks, n):
        s = predicted_pass_at_k(p, k)
        predicted = float(s.mean())
        half_width = 1.96 * float(np.sqrt(np.sum(s * (1.0 - s)))) / n.size
        rows.append(
            {
                "k": k,
                "predicted": predicted,
                "band_low": predicted - half_width,
                "band_high": predicted + half_width,
                "observed": float(pass_at_k(n, c, k).mean()),
            }
        )
    return pd.DataFrame(rows)


def oracle_rc_mse(
    n_samples: ArrayLike, n_correct: ArrayLike, ks: Sequence[int] = DEFAULT_KS, *, seeds: int = 0
) -> pd.DataFrame:
    """Oracle-RC's instance MSE: p_i = z of one response picked uniformly from query i's samples.

    ``mse`` is the exact expectation over the pick, ``mean_i [mu_i (1 - pass@k_i)^2 + (1 - mu_i) pass@k_i^2]``
    with mu_i = c_i / n_i. With ``seeds`` > 0, also the paper's protocol: ``mse_mc`` is the mean over that
    many seeds (seed s picks with ``default_rng(s)``) and ``mse_mc_se`` its standard error.
    Columns: k, mse, mse_mc, mse_mc_se.
    """
    n, c = check_counts(n_samples, n_correct)
    seeds = 0 if seeds == 0 else check_integer(seeds, "seeds")
    mu = c / n
    picks = [np.random.default_rng(seed).integers(0, n) < c for seed in range(seeds)]  # z of a random sample
    rows = []
    for k in _usable_ks(ks, n):
        reference = pass_at_k(n, c, k)
        row = {
            "k": k,
            "mse": float(np.mean(mu * (1.0 - reference) ** 2 + (1.0 - mu) * reference**2)),
            "mse_mc": np.nan,
            "mse_mc_se": np.nan,
        }
        if seeds:
            values = np.array([np.mean((z - reference) ** 2) for z in picks])
            row["mse_mc"] = float(values.mean())
            row["mse_mc_se"] = float(values.std(ddof=1) / np.sqrt(seeds)) if seeds > 1 else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def pass_at_k_prediction(
    confidences: Mapping[str, ArrayLike],
    n_samples: ArrayLike,
    n_correct: ArrayLike,
    ks: Sequence[int] = DEFAULT_KS,
    *,
    rc_seeds: int = 10,
) -> pd.DataFrame:
    """Instance-level MSE table for several estimators plus the baselines ``oracle_cc`` (p = mu_hat) and
    ``oracle_rc`` (exact expectation) and, with ``rc_seeds`` > 0, ``oracle_rc_mc`` (mean over that many
    seeds, ``mse_se`` its standard error). Columns: estimator, k, mse, mse_se (NaN where not Monte Carlo)."""
    n, c = check_counts(n_samples, n_correct)
    frames = []
    for name, confidence in {**check_confidences(confidences, n.size), "oracle_cc": c / n}.items():
        frame = instance_mse(confidence, n, c, ks)[["k", "mse"]]
        frames.append(frame.assign(estimator=name, mse_se=np.nan))
    rc = oracle_rc_mse(n, c, ks, seeds=rc_seeds)
    frames.append(rc[["k", "mse"]].assign(estimator="oracle_rc", mse_se=np.nan))
    if rc_seeds:
        frames.append(
            rc.rename(columns={"mse_mc": "mse_value", "mse_mc_se": "mse_se"})[["k", "mse_value", "mse_se"]]
            .rename(columns={"mse_value": "mse"})
            .assign(estimator="oracle_rc_mc")
        )
    return pd.concat(frames, ignore_index=True)[["estimator", "k", "mse", "mse_se"]]
