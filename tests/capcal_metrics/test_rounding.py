"""Zero up to rounding: every ratio metric against exact rational arithmetic on exact lattices.

Every mu_hat is a multiple of 1/k (k samples per question) and every confidence a multiple of 1/k too, for
small N: all multisets of mu_hat for k = 2..4 and N = 2..5 (419 data sets). On each, the skill scores, the
base-rate variance, soft AUROC and their jackknife leave-one-out values are computed with
``fractions.Fraction`` and compared with capcal's float64 results: where the exact denominator is 0 the metric
must be NaN (before the guard it returned up to +-5e16), elsewhere it must agree to 1e-9.
"""

from __future__ import annotations

import itertools
import warnings
from fractions import Fraction

import numpy as np
import pytest

import capcal_metrics as cm
from capcal_metrics.rounding import is_zero_up_to_rounding, summation_error_bound, variance_is_zero


def lattices():
    """(k, mu_hat numerators, confidence numerators): every multiset of mu_hat for k = 2..4, N = 2..5, with
    a confidence on the same grid that is neither sorted like mu_hat nor constant."""
    for k in (2, 3, 4):
        for size in (2, 3, 4, 5):
            for numerators in itertools.combinations_with_replacement(range(k + 1), size):
                confidence = [(3 * i + 1) % (k + 1) for i in range(size)]
                yield k, numerators, confidence


def exact_variance(mu: list[Fraction], k: int | None) -> Fraction:
    size = len(mu)
    mean = sum(mu) / size
    spread = sum((m - mean) ** 2 for m in mu) / size
    if k is None:
        return spread
    return spread - (1 - Fraction(1, size)) * sum(m * (1 - m) / (k - 1) for m in mu) / size


def exact_skill(c: list[Fraction], mu: list[Fraction], k: int | None) -> Fraction | None:
    variance = exact_variance(mu, k)
    if variance <= 0:
        return None
    noise = [Fraction(0)] * len(mu) if k is None else [m * (1 - m) / (k - 1) for m in mu]
    brier = sum((ci - m) ** 2 - v for ci, m, v in zip(c, mu, noise, strict=True)) / len(mu)
    return 1 - brier / variance


def exact_soft_auroc(c: list[Fraction], mu: list[Fraction]) -> Fraction | None:
    numerator = sum(
        mi * (1 - mj) * (1 if ci > cj else Fraction(1, 2) if ci == cj else 0)
        for ci, mi in zip(c, mu, strict=True)
        for cj, mj in zip(c, mu, strict=True)
    )
    denominator = sum(mu) * sum(1 - m for m in mu)
    return None if denominator == 0 else numerator / denominator


def check(got: float, exact: Fraction | None, what: str) -> None:
    if exact is None:
        assert np.isnan(got), f"{what}: exact denominator 0, got {got}"
    else:
        assert got == pytest.approx(float(exact), rel=1e-9, abs=1e-12), what


def test_every_lattice_data_set_matches_exact_arithmetic():
    checked = zeros = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        for k, numerators, confidence_numerators in lattices():
            mu = [Fraction(m, k) for m in numerators]
            c = [Fraction(m, k) for m in confidence_numerators]
            mu_float, c_float = np.array([float(m) for m in mu]), np.array([float(x) for x in c])
            where = f"k={k} mu_hat*k={numerators} c*k={confidence_numerators}"
            zeros += exact_variance(mu, k) == 0
            check(cm.brier_skill_score(c_float, mu_float), exact_skill(c, mu, None), f"skill {where}")
            corrected = cm.corrected_brier_skill_score(c_float, mu_float, k)
            check(corrected, exact_skill(c, mu, k), f"corrected {where}")
            check(cm.soft_label_auroc(c_float, mu_float), exact_soft_auroc(c, mu), f"auroc {where}")
            variance = exact_variance(mu, k)
            assert cm.base_rate_variance(mu_float, k) == pytest.approx(float(variance), abs=1e-15), where
            assert (cm.base_rate_variance(mu_float, k) == 0.0) == (variance == 0), where
            # the jackknife's leave-one-out values: each a smaller lattice data set
            for leave_out in range(len(mu)):
                rest = [i for i in range(len(mu)) if i != leave_out]
                if len(rest) < 2:
                    continue
                got = cm.corrected_brier_skill_score(c_float[rest], mu_float[rest], k)
                check(got, exact_skill([c[i] for i in rest], [mu[i] for i in rest], k), f"loo {where}")
            checked += 1
    assert checked == 419
    assert zeros == 58  # data sets whose S_hat is exactly 0: each must give NaN, not +-1e16


def test_the_issues_examples():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        # the variance of a constant 0.7 is ~1e-33 in float64, not 0: the skill was -9.0e30
        assert np.isnan(cm.brier_skill_score([0.1, 0.5, 0.9], [0.7, 0.7, 0.7]))
        assert np.isnan(cm.brier_skill_score(np.linspace(0, 1, 50), np.full(50, 1 / 3)))
        # S_hat exactly 0 on the k = 4 grid (mu_hat 0, 1/4, 1/2, 1/2): was -5.3e15
        assert np.isnan(cm.corrected_brier_skill_score([0.2, 0.4, 0.6, 0.8], [0, 0.25, 0.5, 0.5], 4))
        assert np.isnan(cm.random_baseline_brier_skill_score([0, 0.25, 0.5, 0.5], 4))
        # Pearson on a bootstrap row that repeats one point: constant, NaN, never +-1
        assert np.isnan(cm.pearson_correlation([0.7, 0.7, 0.7], [0.1, 0.2, 0.4]))


def test_a_genuine_small_variance_is_not_rounding():
    # the smallest non-zero variance of N values on a grid of step 1/k is (1 - 1/N) / (N k^2): far above
    # the bound for any realistic N and k
    for size, k in ((10, 4), (1_000, 100), (100_000, 1_000)):
        target = np.zeros(size)
        target[0] = 1.0 / k
        spread = float(np.mean((target - target.mean()) ** 2))
        assert not variance_is_zero(spread, size, target.max())
        assert cm.brier_skill_score(np.full(size, 0.5), target) < 0


def test_the_bounds():
    eps = np.finfo(np.float64).eps
    assert summation_error_bound(10, 2.0) == pytest.approx(20 * eps)
    assert is_zero_up_to_rounding(1e-17, 100, 1.0)
    assert not is_zero_up_to_rounding(1e-12, 100, 1.0)
    assert variance_is_zero(1e-33, 3, 0.7)
    assert not variance_is_zero(1e-20, 3, 0.7)


def test_random_baseline_skill_matches_a_simulation():
    rng = np.random.default_rng(0)
    mu_hat = rng.integers(0, 5, 200) / 4
    draws = rng.uniform(size=(4000, 200))
    simulated = np.mean([cm.corrected_brier_skill_score(row, mu_hat, 4) for row in draws])
    spread = np.std([cm.corrected_brier_skill_score(row, mu_hat, 4) for row in draws[:400]]) / np.sqrt(4000)
    assert cm.random_baseline_brier_skill_score(mu_hat, 4) == pytest.approx(simulated, abs=4 * spread)


def test_the_bounds_at_their_edge_and_for_negative_inputs():
    """The bounds are inclusive (|value| <= n eps M), use |M| and |value|, and come back as float64/bool
    arrays; each checked against the formula n * eps * |M| written out."""
    eps = np.finfo(np.float64).eps
    bound = 7 * eps * 3.0
    assert summation_error_bound(7, -3.0) == bound
    assert summation_error_bound(np.int64(7), 3.0).dtype == np.float64
    assert is_zero_up_to_rounding(bound, 7, 3.0) and is_zero_up_to_rounding(-bound, 7, -3.0)
    assert not is_zero_up_to_rounding(np.nextafter(bound, 1.0), 7, 3.0)
    assert not is_zero_up_to_rounding(-np.nextafter(bound, 1.0), 7, -3.0)
    assert variance_is_zero(bound * bound, 7, 3.0) and variance_is_zero(bound * bound, 7, -3.0)
    assert not variance_is_zero(np.nextafter(bound * bound, 1.0), 7, 3.0)
    assert variance_is_zero(-1e-30, 7, 3.0)  # a two-pass variance cannot be negative: rounding
    elementwise = is_zero_up_to_rounding([0.0, 1e-14, 1.0], [1, 10, 10], [1.0, 1.0, 1e20])
    np.testing.assert_array_equal(elementwise, [True, False, True])
    assert elementwise.dtype == bool
