"""Unbiased pass@k against the combinatorial formula (math.comb) and its expectation identity."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binom

import capcal_metrics as cm


def comb_pass_at_k(n: int, c: int, k: int) -> float:
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def test_matches_math_comb_on_every_small_case():
    cases = [(n, c, k) for n in range(1, 26) for c in range(n + 1) for k in range(1, n + 1)]
    n, c, k = (np.array(column) for column in zip(*cases, strict=True))
    for k_value in np.unique(k):
        selected = (k == k_value) & (n >= k_value)
        got = cm.pass_at_k(n[selected], c[selected], int(k_value))
        expected = [comb_pass_at_k(*case) for case in zip(n[selected], c[selected], k[selected], strict=True)]
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("n", [100, 500, 2000])
@pytest.mark.parametrize("k", [1, 4, 16, 64])
def test_matches_exact_fractions_for_large_n(n, k):
    c = np.array([0, 1, 2, 5, n // 3, n // 2, n - k, n - k + 1, n - 1, n])
    expected = [comb_pass_at_k(n, int(ci), k) for ci in c]
    np.testing.assert_allclose(cm.pass_at_k(n, c, k), expected, rtol=1e-10, atol=1e-14)


def test_edge_cases():
    assert cm.pass_at_k(1, 0, 1) == 0.0  # n = 1
    assert cm.pass_at_k(1, 1, 1) == 1.0
    np.testing.assert_array_equal(cm.pass_at_k([10, 10, 7], [0, 0, 0], 3), [0.0, 0.0, 0.0])  # c = 0
    np.testing.assert_array_equal(cm.pass_at_k([10, 4], [10, 4], 4), [1.0, 1.0])  # c = n
    np.testing.assert_array_equal(cm.pass_at_k([5, 5], [1, 0], 5), [1.0, 0.0])  # k = n
    assert cm.pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 = c / n
    assert cm.pass_at_k(8, 2, 3).shape == ()  # scalar in, 0-d out
    assert cm.pass_at_k(np.array([], dtype=int), np.array([], dtype=int), 2).shape == (0,)
    assert cm.pass_at_k([10.0, 10.0], [3.0, 4.0], 2).shape == (2,)  # whole floats are accepted


def test_unbiased_for_one_minus_one_minus_mu_to_the_k():
    """sum_c Binom(c; n, mu) pass@k(n, c, k) = 1 - (1 - mu)^k exactly."""
    n = 40
    c = np.arange(n + 1)
    for mu in (0.03, 0.3, 0.8):
        for k in (1, 4, 16, 40):
            expectation = np.sum(binom.pmf(c, n, mu) * cm.pass_at_k(np.full(n + 1, n), c, k))
            assert expectation == pytest.approx(float(cm.predicted_pass_at_k(mu, k)), abs=1e-12)


def test_predicted_pass_at_k():
    p = np.array([0.0, 0.25, 0.5, 1.0])
    np.testing.assert_allclose(cm.predicted_pass_at_k(p, 3), 1 - (1 - p) ** 3)
    assert cm.predicted_pass_at_k([[0.5]], 2).shape == (1, 1)
    assert cm.predicted_pass_at_k([], 2).shape == (0,)  # like pass_at_k, empty input gives empty output
    with pytest.raises(ValueError, match=r"confidence must lie in \[0, 1\]"):
        cm.predicted_pass_at_k([0.2, 1.1], 2)
    with pytest.raises(ValueError, match="NaN"):
        cm.predicted_pass_at_k([np.nan], 2)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        cm.predicted_pass_at_k([0.5], 0)


@pytest.mark.parametrize(
    ("n_samples", "n_correct", "k", "message"),
    [
        ([10, 10], [3, 11], 2, r"^n_correct must be <= n_samples for every query$"),
        ([10, 10], [-1, 2], 2, "n_correct must be >= 0"),
        ([10, 3], [1, 2], 4, "k=4 exceeds the smallest number of samples n_samples=3"),
        ([10], [1], 0, "k must be a positive integer"),
        ([10], [1], 1.5, "k must be a positive integer"),
        ([10], [1], True, "k must be a positive integer"),
        ([10.5], [1], 1, "n_samples must contain whole numbers"),
        ([10], [np.nan], 1, "n_correct contains NaN"),
        ([0], [0], 1, "n_samples must be >= 1"),
        (
            [10, 10, 10],
            [1, 2],
            1,
            r"^n_samples and n_correct must have the same shape, got \(3,\) and \(2,\)$",
        ),
    ],
)
def test_invalid_input(n_samples, n_correct, k, message):
    with pytest.raises(ValueError, match=message):
        cm.pass_at_k(n_samples, n_correct, k)
