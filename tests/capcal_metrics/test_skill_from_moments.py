"""The skill's base-rate variance and the skill from unbiased moments of mu (adaptive sampling)."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

import capcal_metrics as cm


def _fixed_k(seed: int, size: int = 60) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Confidence, n (varying, 2..20), s and s(s - 1)/(n(n - 1)) of a fixed-k run."""
    rng = np.random.default_rng(seed)
    mu = rng.beta(0.4, 0.4, size)
    n = rng.integers(2, 21, size)
    s = rng.binomial(n, mu)
    confidence = np.clip(mu + rng.normal(0, 0.2, size), 0, 1)
    return confidence, n, s, s * (s - 1) / (n * (n - 1))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fixed_n_equals_the_corrected_forms(seed):
    confidence, n, s, mu_square_hat = _fixed_k(seed)
    mu_hat = s / n
    assert cm.base_rate_variance_from_moments(mu_hat, mu_square_hat) == pytest.approx(
        cm.base_rate_variance(mu_hat, n), rel=1e-12, abs=1e-15
    )
    assert cm.brier_skill_score_from_moments(confidence, mu_hat, mu_square_hat) == pytest.approx(
        cm.corrected_brier_skill_score(confidence, mu_hat, n), rel=1e-12
    )


def test_base_rate_variance_is_exactly_unbiased_after_stopping():
    """E[S_hat] = mean_i (mu_i - mean mu)^2, summed exactly over every pair of terminal states (N = 2)."""
    plan = cm.unanimity_rule([4, 8, 16])
    n, s = cm.terminal_states(plan)
    mu_hat, mu_square_hat = cm.unbiased_mean(plan, n, s), cm.unbiased_mean_square(plan, n, s)
    mu = np.array([0.07, 0.81])
    probability = cm.terminal_probabilities(plan, mu)
    expected = 0.0
    for i, j in itertools.product(range(n.size), repeat=2):
        value = cm.base_rate_variance_from_moments(mu_hat[[i, j]], mu_square_hat[[i, j]])
        expected += probability[0, i] * probability[1, j] * value
    assert expected == pytest.approx(float(np.mean((mu - mu.mean()) ** 2)), abs=1e-12)
    # the plain spread of mu_hat is not: it carries the noise (1 - 1/N) mean Var(mu_hat_i)
    spread = sum(
        probability[0, i] * probability[1, j] * float(np.var(mu_hat[[i, j]]))
        for i, j in itertools.product(range(n.size), repeat=2)
    )
    assert spread - float(np.var(mu)) > 1e-3


def test_skill_from_moments_undefined_without_spread_and_checks_lengths():
    with warnings.catch_warnings():
        warnings.simplefilter("error", cm.UndefinedMetricWarning)
        with pytest.raises(cm.UndefinedMetricWarning, match="brier_skill_score_from_moments"):
            cm.brier_skill_score_from_moments([0.2, 0.9], [0.5, 0.5], [0.25, 0.25])
    with pytest.raises(ValueError, match="mu_square_hat"):
        cm.base_rate_variance_from_moments([0.1, 0.2], [0.01])
    assert math.isclose(cm.base_rate_variance_from_moments([0.0, 1.0], [0.0, 1.0]), 0.25)
