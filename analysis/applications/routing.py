"""Routing between a cheap and a strong model by the cheap model's capability confidence.

The routing application of "On Calibration of LLMs: From Response To Capability" (arXiv 2602.13540): send a
question to the stronger model when the cheap model's confidence is low, against random and oracle routing.

Per question i: the cheap model's confidence c_i and both models' capability targets mu_cheap_i, mu_strong_i
(mu_hat from each model's samples on the same question). Routing the fraction f of questions with the LOWEST
c to the strong model gives the expected accuracy (of one sampled answer per question)

    acc(f) = (1/N) [ sum_{i not routed} mu_cheap_i + sum_{i routed} mu_strong_i ]
           = mean(mu_cheap) + (1/N) G(f N),   G(m) = sum of the gains g_i = mu_strong_i - mu_cheap_i of the
                                               m routed questions.

Everything is an exact expectation, with no simulation: when the cut falls inside a run of tied confidences
the routed members of the run are a uniformly random subset, so G grows linearly inside the run (j times the
run's mean gain); for a non-integer f N the last question is routed with the fractional probability, so G is
linear between integers too. Hence G is the piecewise-linear interpolation of the cumulative gains at the
ends of the tie runs.

Baselines:
* ``random``: a uniformly random fraction f is routed; acc(f) = mean(mu_cheap) + f mean(g) (exact).
* ``oracle_cheap``: route by mu_cheap itself (the cheap model's capability known exactly — the ceiling of
  any capability-confidence estimator, the paper's oracle mu_hat).
* ``oracle_gain``: route by the gain g, largest first (the best any router can do at fraction f, knowing
  both models).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from analysis.runs.validation import check_confidences
from capcal_metrics.validation import check_probabilities

__all__ = ["DEFAULT_FRACTIONS", "pair_models", "routing_accuracy", "routing_curves"]

DEFAULT_FRACTIONS = tuple(float(f) for f in np.round(np.linspace(0.0, 1.0, 21), 10))


def _check_inputs(
    mu_cheap: ArrayLike, mu_strong: ArrayLike, fractions: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Both models' capability targets (one per question, in [0, 1]) and the fractions routed (in [0, 1])."""
    cheap = check_probabilities(mu_cheap, "mu_cheap")
    strong = check_probabilities(mu_strong, "mu_strong", length=cheap.size)
    return cheap, strong, check_probabilities(fractions, "fractions")


def routing_accuracy(
    priority: ArrayLike, mu_cheap: ArrayLike, mu_strong: ArrayLike, fractions: ArrayLike = DEFAULT_FRACTIONS
) -> np.ndarray:
    """Exact expected accuracy when the fraction f of questions with the lowest ``priority`` goes to the
    strong model (ties in ``priority`` broken uniformly at random, in expectation): one value per fraction.
    ``priority`` is the cheap model's confidence (or mu_cheap, or -gain for the oracles); any real numbers."""
    score = np.asarray(priority, dtype=np.float64)
    cheap, strong, fractions = _check_inputs(mu_cheap, mu_strong, fractions)
    if score.shape != cheap.shape or not np.isfinite(score).all():
        raise ValueError(f"priority must be finite with one value per question ({cheap.size})")
    order = np.argsort(score, kind="stable")
    ordered_score, gain = score[order], (strong - cheap)[order]
    ends = np.flatnonzero(np.append(ordered_score[1:] != ordered_score[:-1], True)) + 1  # run ends (counts)
    cumulative = np.concatenate([[0.0], np.cumsum(gain)[ends - 1]])
    routed = fractions * cheap.size
    return cheap.mean() + np.interp(routed, np.concatenate([[0], ends]), cumulative) / cheap.size


def routing_curves(
    confidences: Mapping[str, ArrayLike],
    mu_cheap: ArrayLike,
    mu_strong: ArrayLike,
    fractions: ArrayLike = DEFAULT_FRACTIONS,
) -> pd.DataFrame:
    """Accuracy against the fraction routed for each estimator (route lowest confidence first) and the
    baselines ``random``, ``oracle_cheap`` and ``oracle_gain`` (module docstring).
    Columns: method, fraction, accuracy."""
    cheap, strong, fractions = _check_inputs(mu_cheap, mu_strong, fractions)
    curves = {
        name: routing_accuracy(confidence, cheap, strong, fractions)
        for name, confidence in check_confidences(confidences, cheap.size).items()
    }
    curves["random"] = cheap.mean() + fractions * (strong - cheap).mean()
    curves["oracle_cheap"] = routing_accuracy(cheap, cheap, strong, fractions)
    curves["oracle_gain"] = routing_accuracy(-(strong - cheap), cheap, strong, fractions)
    return pd.DataFrame(
        [
            {"method": method, "fraction": float(f), "accuracy": float(a)}
            for method, values in curves.items()
            for f, a in zip(fractions, values, strict=True)
        ]
    )


def pair_models(
    cheap: pd.DataFrame, strong: pd.DataFrame, *, on: str | Sequence[str] = "question_id"
) -> pd.DataFrame:
    """The questions both per-question tables share (inner join on ``on``), in the cheap table's order, with
    ``mu_cheap`` / ``mu_strong`` (their ``expected_accuracy``) and ``n_cheap`` / ``n_strong``. Raises if a
    table has duplicate keys (select one run per model first) or the tables share no question."""
    on = [on] if isinstance(on, str) else list(on)
    for name, table in (("cheap", cheap), ("strong", strong)):
        missing = [c for c in [*on, "expected_accuracy", "n"] if c not in table.columns]
        if missing:
            raise ValueError(f"{name} table has no column(s) {', '.join(missing)}")
        if table.duplicated(on).any():
            raise ValueError(f"{name} table has several rows per {tuple(on)}; select one run first")
    left = cheap[on + ["expected_accuracy", "n"]].rename(
        columns={"expected_accuracy": "mu_cheap", "n": "n_cheap"}
    )
    right = strong[on + ["expected_accuracy", "n"]].rename(
        columns={"expected_accuracy": "mu_strong", "n": "n_strong"}
    )
    paired = left.merge(right, on=on, how="inner", validate="one_to_one")
    if paired.empty:
        raise ValueError("the cheap and strong tables share no question")
    return paired.reset_index(drop=True)
