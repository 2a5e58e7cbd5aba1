"""The skill scores where S_hat, the unbiased variance of mu over the questions, is exactly 0 (issue 48).

Every target set mu_hat = s / n (n samples per question) with S_hat exactly 0 is enumerated: all of them at
N = 2 questions for n <= 200 and at N = 3 for n <= 100, and the pattern "every question at n/n but one at
(n - 1)/n" for N = 2, 3, 5, 10, 20 and n = 2..200. Candidates come from an integer screen written here from
the definition, and each is confirmed with ``fractions.Fraction`` straight from the definition
S_hat = mean_i (t_i - mean t)^2 - (1 - 1/N) mean_i t_i (1 - t_i) / (n - 1); the counts (482 and 324
non-constant sets) are those the issue found independently. On every one both skill functions must be NaN
(before the fix: -1e15 to -1e18 and 7e14), and the target sets next to zero must keep a finite skill.
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest

import capcal_metrics as cm


def exact_s_hat(counts: tuple[int, ...], n: int) -> Fraction:
    """S_hat of mu_hat = counts / n from its definition, in exact rational arithmetic."""
    mu = [Fraction(s, n) for s in counts]
    size = len(mu)
    mean = sum(mu) / size
    spread = sum((m - mean) ** 2 for m in mu) / size
    return spread - (1 - Fraction(1, size)) * sum(m * (1 - m) / (n - 1) for m in mu) / size


def sorted_count_tuples(size: int, n: int) -> np.ndarray:
    """Every non-decreasing tuple of ``size`` counts in 0..n (each multiset of mu_hat once), as rows."""
    rows = np.arange(n + 1, dtype=np.int64)[:, None]
    for _ in range(size - 1):
        last = np.arange(n + 1, dtype=np.int64)
        keep = last[None, :] >= rows[:, -1:]
        prefix = np.broadcast_to(rows[:, None, :], (rows.shape[0], n + 1, rows.shape[1]))[keep]
        rows = np.column_stack([prefix, np.broadcast_to(last, keep.shape)[keep]])
    return rows


def s_hat_numerators(counts: np.ndarray, n: int) -> np.ndarray:
    """N^2 n^2 (n - 1) S_hat as integers: (n - 1) (N sum s^2 - (sum s)^2) - (N - 1) sum s (n - s)."""
    size = counts.shape[1]
    total, squares = counts.sum(axis=1), (counts * counts).sum(axis=1)
    return (n - 1) * (size * squares - total * total) - (size - 1) * (n * total - squares)


def screened_zero_sets(size: int, max_n: int) -> list[tuple[tuple[int, ...], int]]:
    """Non-constant count tuples at N = ``size`` whose S_hat numerator is 0, over every tuple, n <= max_n."""
    found = []
    for n in range(2, max_n + 1):
        counts = sorted_count_tuples(size, n)
        zero = (s_hat_numerators(counts, n) == 0) & (counts[:, 0] != counts[:, -1])
        found += [(tuple(int(s) for s in row), n) for row in counts[zero]]
    return found


def all_but_one_sets() -> list[tuple[tuple[int, ...], int]]:
    return [((n,) * (size - 1) + (n - 1,), n) for size in (2, 3, 5, 10, 20) for n in range(2, 201)]


@pytest.fixture(scope="module")
def zero_sets() -> dict[str, list[tuple[tuple[int, ...], int]]]:
    return {
        "N=2": screened_zero_sets(2, 200),
        "N=3": screened_zero_sets(3, 100),
        "n/n but one": all_but_one_sets(),
    }


def test_the_enumeration_is_exact_and_complete(zero_sets):
    assert len(zero_sets["N=2"]) == 482 and len(zero_sets["N=3"]) == 324  # the issue's independent counts
    for sets in zero_sets.values():
        for counts, n in sets:
            assert exact_s_hat(counts, n) == 0, (counts, n)
    # the screen is not vacuous: next to a zero set S_hat is not 0, exactly
    assert exact_s_hat((19, 17), 19) != 0 and exact_s_hat((4, 6, 5), 7) != 0


def confidences(size: int) -> np.ndarray:
    return np.linspace(0.05, 0.95, size)[::-1].copy()


def test_both_skill_functions_are_nan_on_every_exact_zero_set(zero_sets):
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        for name, sets in zero_sets.items():
            for counts, n in sets:
                s = np.array(counts, dtype=np.int64)
                mu_hat, mu_square_hat = s / n, s * (s - 1) / (n * (n - 1))
                confidence = confidences(s.size)
                where = f"{name}: s = {counts}, n = {n}"
                assert cm.base_rate_variance(mu_hat, n) == 0.0, where
                assert cm.base_rate_variance_from_moments(mu_hat, mu_square_hat) == 0.0, where
                assert np.isnan(cm.corrected_brier_skill_score(confidence, mu_hat, n)), where
                assert np.isnan(cm.corrected_brier_skill_score(confidence, mu_hat, np.full(s.size, n))), where
                assert np.isnan(cm.brier_skill_score_from_moments(confidence, mu_hat, mu_square_hat)), where
                assert np.isnan(cm.random_baseline_brier_skill_score(mu_hat, n)), where
                checked += 1
    assert checked == 482 + 324 + 5 * 199


def test_the_issues_examples_are_nan():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        # first failure at N = 2: n = 19 (was -6.2e15); N = 20, n = 171 (was -6.2e17)
        assert np.isnan(cm.corrected_brier_skill_score([0.3, 0.9], [1.0, 18 / 19], 19))
        assert np.isnan(cm.corrected_brier_skill_score(confidences(20), np.r_[np.ones(19), 170 / 171], 171))
        # the moment form from n = 7: s = (4, 6, 6) gave 7.13e14
        s = np.array([4, 6, 6])
        assert np.isnan(cm.brier_skill_score_from_moments([0.2, 0.5, 0.8], s / 7, s * (s - 1) / 42))


def test_the_sets_next_to_zero_keep_their_exact_value():
    """A non-zero S_hat, however small, is not taken for rounding: the sets closest to zero (integer
    numerator N^2 n^2 (n - 1) S_hat within n of 0 but not 0) at N = 2, n <= 200, and N = 3, n <= 40, give
    their exact value (correctly rounded) by counts and within 1e-9 relative by moments; the skill is
    finite where S_hat > 0 and NaN where it is negative (the spread below its noise)."""
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        for size, max_n in ((2, 200), (3, 40)):
            for n in range(2, max_n + 1):
                counts = sorted_count_tuples(size, n)
                counts = counts[counts[:, 0] != counts[:, -1]]
                numerator = s_hat_numerators(counts, n)
                for row in counts[(numerator != 0) & (np.abs(numerator) <= n)]:
                    exact = exact_s_hat(tuple(int(s) for s in row), n)
                    assert exact != 0
                    mu_hat, mu_square_hat = row / n, row * (row - 1) / (n * (n - 1))
                    assert cm.base_rate_variance(mu_hat, n) == float(exact), (row, n)
                    by_moments = cm.base_rate_variance_from_moments(mu_hat, mu_square_hat)
                    assert by_moments == pytest.approx(float(exact), rel=1e-9), (row, n)
                    skill = cm.corrected_brier_skill_score(confidences(size), mu_hat, n)
                    assert np.isfinite(skill) if exact > 0 else np.isnan(skill), (row, n)
                    checked += 1
    assert checked > 3000


def test_off_the_lattice_the_bound_still_decides():
    """mu_hat not of the form s/n (the zero set moved by one ulp, or a float that no count gives): the
    rounding bound decides, and an exact-zero set moved by one ulp is still 0; a real spread is kept."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        mu_hat = np.array([1.0, np.nextafter(18 / 19, 1.0)])
        assert cm.base_rate_variance(mu_hat, 19) == 0.0
        assert np.isnan(cm.corrected_brier_skill_score([0.3, 0.9], mu_hat, 19))
        # the pattern n/n but one at (n - 1)/n, its last target moved one ulp either way: the rounding of
        # 1 - t near t = 1 (relative n eps) is what the bound must count here
        for size in (2, 3, 5, 10, 20):
            for n in range(2, 2001, 3):
                for direction in (0.0, 1.0):
                    target = np.ones(size)
                    target[-1] = np.nextafter((n - 1) / n, direction)
                    assert cm.base_rate_variance(target, n) == 0.0, (size, n, direction)
        mu_hat = np.array([0.1234567, 0.7654321, 0.5])
        exact = exact_variance_of_floats(mu_hat, 10)
        assert cm.base_rate_variance(mu_hat, 10) == pytest.approx(exact, rel=1e-12)


def exact_variance_of_floats(mu_hat: np.ndarray, n: int) -> float:
    mu = [Fraction(float(m)) for m in mu_hat]
    mean = sum(mu) / len(mu)
    spread = sum((m - mean) ** 2 for m in mu) / len(mu)
    return float(spread - (1 - Fraction(1, len(mu))) * sum(m * (1 - m) / (n - 1) for m in mu) / len(mu))


def test_the_jackknife_of_the_issues_example_is_undefined_not_1e16():
    """targets (19, 18, 10)/19, confidences (0.9, 0.8, 0.5): the skill is 0.872 (exactly 1 - CB/S_hat), but
    leaving out the third question leaves (19, 18)/19, whose S_hat is exactly 0: that leave-one-out value is
    undefined, so the jackknife standard error is NaN (it was 1.27e16). With a fourth question every
    leave-one-out value exists and the standard error is finite and equals the one computed in fractions."""
    confidence = np.array([0.9, 0.8, 0.5])
    counts = (19, 18, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        interval = cm.jackknife_ci(
            cm.corrected_brier_skill_score, confidence, np.array(counts) / 19, np.full(3, 19)
        )
    assert interval.estimate == pytest.approx(float(exact_skill(confidence, counts, 19)), rel=1e-12)
    assert interval.estimate == pytest.approx(0.872, abs=5e-4)
    assert np.isnan(interval.standard_error) and np.isnan(interval.low)

    confidence = np.array([0.9, 0.8, 0.5, 0.3])
    counts = (19, 18, 10, 4)
    interval = cm.jackknife_ci(
        cm.corrected_brier_skill_score, confidence, np.array(counts) / 19, np.full(4, 19)
    )
    leave_one_out = [
        exact_skill(np.delete(confidence, i), tuple(c for j, c in enumerate(counts) if j != i), 19)
        for i in range(4)
    ]
    mean = sum(leave_one_out) / 4
    expected = (Fraction(3, 4) * sum((value - mean) ** 2 for value in leave_one_out)) ** 0.5
    assert np.isfinite(interval.standard_error)
    assert interval.standard_error == pytest.approx(float(expected), rel=1e-9)
    assert 0.0 < interval.standard_error < 1.0


def exact_skill(confidence: np.ndarray, counts: tuple[int, ...], n: int) -> Fraction:
    c = [Fraction(float(x)) for x in confidence]
    mu = [Fraction(s, n) for s in counts]
    brier = sum((ci - m) ** 2 - m * (1 - m) / (n - 1) for ci, m in zip(c, mu, strict=True)) / len(mu)
    return 1 - brier / exact_s_hat(counts, n)
