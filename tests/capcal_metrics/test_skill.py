"""Brier skill scores over the constant forecast at the base rate: definitions and, by simulation, the
expectations the docs claim (constant at the base rate 0, oracle 1 under the finite-k correction at k = 4,
uniform random confidences below 0).

Simulation tolerances: 4 Monte-Carlo standard errors (estimated from the simulation itself) plus, where the
estimator is a ratio of unbiased estimates, its O(1/N) bias bounded by 2/N; fixed seeds.
"""

from __future__ import annotations

import numpy as np
import pytest

import capcal_metrics as cm


def loop_skill(confidence, target, n=None):
    """1 - sum (c - t)^2 / sum (t - mean t)^2, or the corrected form with noise t (1 - t) / (n - 1)."""
    size = len(target)
    base_rate = sum(target) / size
    noise = [0.0] * size if n is None else [t * (1 - t) / (n - 1) for t in target]
    brier = sum((c - t) ** 2 - v for c, t, v in zip(confidence, target, noise, strict=True)) / size
    spread = sum((t - base_rate) ** 2 for t in target) / size - (1 - 1 / size) * sum(noise) / size
    return 1 - brier / spread


@pytest.mark.parametrize("seed", [0, 1])
def test_skill_scores_match_a_loop(make_data, seed):
    data = make_data(n_queries=200, seed=seed, n_samples=4)
    assert cm.brier_skill_score(data.confidence, data.mu_hat) == pytest.approx(
        loop_skill(data.confidence, data.mu_hat), abs=1e-12
    )
    assert cm.corrected_brier_skill_score(data.confidence, data.mu_hat, 4) == pytest.approx(
        loop_skill(data.confidence, data.mu_hat, n=4), abs=1e-12
    )
    assert cm.brier_skill_score(data.confidence, data.z) == pytest.approx(
        loop_skill(data.confidence, data.z), abs=1e-12
    )


def test_reference_points_and_undefined_input():
    target = np.array([0.0, 0.25, 0.5, 1.0, 0.75])
    assert cm.brier_skill_score(np.full(5, target.mean()), target) == pytest.approx(0.0, abs=1e-15)
    assert cm.brier_skill_score(target, target) == 1.0
    assert cm.brier_skill_score(1 - target, target) < 0  # worse than the base rate
    with pytest.warns(cm.UndefinedMetricWarning, match="every target is the same"):
        assert np.isnan(cm.brier_skill_score([0.1, 0.9], [0.0, 0.0]))
    with pytest.warns(cm.UndefinedMetricWarning, match="variance of mu"):
        assert np.isnan(cm.corrected_brier_skill_score([0.1, 0.9], [0.0, 0.0], 4))
    with pytest.raises(ValueError, match="n_samples must be >= 2"):
        cm.corrected_brier_skill_score([0.1, 0.9], [0.0, 1.0], 1)
    with pytest.raises(ValueError, match="one entry per query"):
        cm.corrected_brier_skill_score([0.1, 0.9], [0.0, 1.0], [4, 4, 4])


def _simulate(k: int, n_questions: int, repetitions: int, seed: int) -> dict[str, np.ndarray]:
    """Skill scores of the constant at the base rate, the oracle c = mu and c ~ U(0, 1), per repetition."""
    rng = np.random.default_rng(seed)
    values: dict[str, list[float]] = {}
    for _ in range(repetitions):
        mu = rng.beta(1.2, 1.5, n_questions)
        mu_hat = rng.binomial(k, mu) / k
        forecasts = {
            "base_rate": np.full(n_questions, mu_hat.mean()),
            "oracle": mu,
            "random": rng.random(n_questions),
        }
        for name, confidence in forecasts.items():
            values.setdefault(name, []).append(cm.brier_skill_score(confidence, mu_hat))
            values.setdefault(f"{name}_corrected", []).append(
                cm.corrected_brier_skill_score(confidence, mu_hat, k)
            )
    return {name: np.asarray(draws) for name, draws in values.items()}


def _mean_and_tolerance(values: np.ndarray, n_questions: int) -> tuple[float, float]:
    return float(values.mean()), 4 * float(values.std(ddof=1)) / np.sqrt(values.size) + 2 / n_questions


@pytest.mark.parametrize("k", [4, 16])
def test_expected_skill_of_the_reference_forecasts(k):
    n_questions = 500
    values = _simulate(k, n_questions, repetitions=1000, seed=k)
    # the constant at the base rate: 0 (exactly, uncorrected; in expectation, corrected)
    assert np.all(np.abs(values["base_rate"]) < 1e-12)
    mean, tolerance = _mean_and_tolerance(values["base_rate_corrected"], n_questions)
    assert abs(mean) < tolerance
    # the oracle c = mu: 1 in expectation under the finite-k correction ...
    mean, tolerance = _mean_and_tolerance(values["oracle_corrected"], n_questions)
    assert abs(mean - 1) < tolerance
    # ... while the uncorrected skill stays well below 1 (mu_hat's noise counts as error)
    assert values["oracle"].mean() < 0.9
    # uniform random confidences: below 0 (worse than the base rate), both forms
    for name in ("random", "random_corrected"):
        mean, tolerance = _mean_and_tolerance(values[name], n_questions)
        assert mean + tolerance < 0, name


@pytest.mark.parametrize(
    "call", [cm.base_rate_variance, cm.random_baseline_brier_skill_score], ids=lambda f: f.__name__
)
def test_the_reference_refuses_fewer_than_two_samples_by_name(call):
    # the base-rate variance checks n_samples itself (random_baseline_brier_skill_score has no other check)
    with pytest.raises(ValueError, match=r"^n_samples must be >= 2 for every query; found n = 1$"):
        call([0.25, 0.5, 1.0], [4, 1, 3])
