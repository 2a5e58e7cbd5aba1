"""ECE, MCE, ACE and the ECE random baseline, against brute-force loops."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import capcal_metrics as cm
from capcal_metrics.jackknife import leave_one_out_values


def loop_bins_equal_width(confidence, n_bins):
    """Members of each [b/B, (b+1)/B) bin, the last one closed, by explicit comparison."""
    members = []
    for b in range(n_bins):
        low, high = b / n_bins, (b + 1) / n_bins
        upper_ok = confidence <= high if b == n_bins - 1 else confidence < high
        members.append(np.flatnonzero((confidence >= low) & upper_ok))
    return members


def loop_bins_equal_mass(confidence, n_bins):
    """Equal-count chunks of the sorted confidences (valid when there are no ties and B divides N)."""
    return np.array_split(np.argsort(confidence), n_bins)


def loop_calibration_errors(confidence, target, members):
    """(ECE, MCE) from lists of bin members, by a plain loop."""
    ece, mce = 0.0, 0.0
    for index in members:
        if len(index) == 0:
            continue
        gap = abs(target[index].mean() - confidence[index].mean())
        ece += len(index) / len(confidence) * gap
        mce = max(mce, gap)
    return ece, mce


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n_bins", [1, 5, 10, 20])
@pytest.mark.parametrize("decimals", [None, 1, 2])
def test_capability_and_response_ece_match_loop(make_data, seed, n_bins, decimals):
    data = make_data(n_queries=500, seed=seed, decimals=decimals)
    members = loop_bins_equal_width(data.confidence, n_bins)
    for target in (data.mu_hat, data.z):  # capability target, then response target
        ece, mce = loop_calibration_errors(data.confidence, target, members)
        assert cm.expected_calibration_error(data.confidence, target, n_bins=n_bins) == pytest.approx(
            ece, abs=1e-12
        )
        assert cm.maximum_calibration_error(data.confidence, target, n_bins=n_bins) == pytest.approx(
            mce, abs=1e-12
        )


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("n_bins", [1, 4, 10])
def test_ace_matches_equal_count_chunks(seed, n_bins):
    rng = np.random.default_rng(seed)
    target = rng.binomial(10, rng.random(360)) / 10
    confidence = 1 / (1 + np.exp(-(4 * target - 2 + rng.normal(0, 1, 360))))  # n_bins divides 360
    assert np.unique(confidence).size == 360  # no ties, so equal-count chunks are well defined
    members = loop_bins_equal_mass(confidence, n_bins)
    ece, mce = loop_calibration_errors(confidence, target, members)
    assert cm.adaptive_calibration_error(confidence, target, n_bins=n_bins) == pytest.approx(ece, abs=1e-12)
    assert cm.maximum_calibration_error(confidence, target, n_bins=n_bins, strategy="equal_mass") == (
        pytest.approx(mce, abs=1e-12)
    )


def test_ace_with_ties_matches_loop_over_assigned_bins(make_data):
    data = make_data(n_queries=301, seed=4, decimals=1)
    bins = cm.assign_bins(data.confidence, 7, "equal_mass")
    members = [np.flatnonzero(bins == b) for b in range(7)]
    ece, _ = loop_calibration_errors(data.confidence, data.mu_hat, members)
    assert cm.adaptive_calibration_error(data.confidence, data.mu_hat, n_bins=7) == pytest.approx(
        ece, abs=1e-12
    )


@pytest.mark.parametrize("n_bins", [2, 3, 7, 10])
def test_ace_on_small_tied_samples_matches_loop_over_equal_mass_bins(n_bins):
    """Many small samples (N from 3 to 40, often N < n_bins) with ties: every tie-run/bin boundary case."""
    rng = np.random.default_rng(n_bins)
    for _ in range(60):
        n = int(rng.integers(3, 41))
        confidence = np.round(rng.random(n), int(rng.integers(1, 3)))
        target = rng.random(n)
        bins = cm.assign_bins(confidence, n_bins, "equal_mass")
        ece, mce = loop_calibration_errors(
            confidence, target, [np.flatnonzero(bins == b) for b in range(n_bins)]
        )
        assert cm.adaptive_calibration_error(confidence, target, n_bins=n_bins) == pytest.approx(
            ece, abs=1e-12
        )
        assert cm.maximum_calibration_error(confidence, target, n_bins=n_bins, strategy="equal_mass") == (
            pytest.approx(mce, abs=1e-12)
        )


def test_confidence_one_is_counted():
    # Two queries answered with certainty 1.0 and never solved: ECE must be 1, not 0 (the paper's first
    # release dropped c = 1.0 from every bin).
    assert cm.expected_calibration_error([1.0, 1.0], [0.0, 0.0]) == 1.0
    confidence = np.array([1.0, 1.0, 0.55])
    target = np.array([0.0, 0.5, 0.55])
    expected = (2 / 3) * abs(0.25 - 1.0)  # last bin holds the two 1.0s; the 0.55 bin is perfectly calibrated
    assert cm.expected_calibration_error(confidence, target) == pytest.approx(expected, abs=1e-15)
    assert cm.maximum_calibration_error(confidence, target) == pytest.approx(0.75, abs=1e-15)


def test_all_equal_confidences_and_single_bin(make_data):
    data = make_data(n_queries=200, seed=7)
    constant = np.full(200, 0.37)
    gap = abs(data.mu_hat.mean() - 0.37)
    for strategy in ("equal_width", "equal_mass"):
        assert cm.expected_calibration_error(constant, data.mu_hat, strategy=strategy) == pytest.approx(gap)
    one_bin = abs(data.mu_hat.mean() - data.confidence.mean())
    assert cm.expected_calibration_error(data.confidence, data.mu_hat, n_bins=1) == pytest.approx(one_bin)
    assert cm.adaptive_calibration_error(data.confidence, data.mu_hat, n_bins=1) == pytest.approx(one_bin)


def test_perfect_calibration_and_row_order_invariance(make_data):
    data = make_data(n_queries=300, seed=8, decimals=1)
    assert cm.expected_calibration_error(data.confidence, data.confidence) == pytest.approx(0.0, abs=1e-15)
    permutation = np.random.default_rng(0).permutation(300)
    for strategy in ("equal_width", "equal_mass"):
        original = cm.expected_calibration_error(data.confidence, data.mu_hat, strategy=strategy)
        permuted = cm.expected_calibration_error(
            data.confidence[permutation], data.mu_hat[permutation], strategy=strategy
        )
        assert permuted == pytest.approx(original, abs=1e-14)


def test_one_query():
    assert cm.expected_calibration_error([0.8], [1.0]) == pytest.approx(0.2)
    assert cm.adaptive_calibration_error([0.8], [1.0]) == pytest.approx(0.2)
    assert cm.maximum_calibration_error([0.8], [1.0]) == pytest.approx(0.2)


def test_random_baseline_is_the_expectation_over_uniform_confidences(make_data):
    """Monte-Carlo check with an independent generator and the loop ECE.

    Tolerance: 4 standard errors of the difference of the two Monte-Carlo means.
    """
    data = make_data(n_queries=60, seed=9)
    n_draws = 2000
    baseline = cm.random_baseline_calibration_error(data.mu_hat, n_draws=n_draws, seed=1)
    rng = np.random.default_rng(12345)
    draws = []
    for _ in range(n_draws):
        confidence = rng.random(60)
        draws.append(
            loop_calibration_errors(confidence, data.mu_hat, loop_bins_equal_width(confidence, 10))[0]
        )
    standard_error = np.std(draws) / np.sqrt(n_draws)
    assert abs(baseline - np.mean(draws)) < 4 * np.sqrt(2) * standard_error
    # Deterministic for a seed, and the maximum variant dominates the expected one.
    assert cm.random_baseline_calibration_error(data.mu_hat, n_draws=50, seed=3) == (
        cm.random_baseline_calibration_error(data.mu_hat, n_draws=50, seed=3)
    )
    assert cm.random_baseline_calibration_error(data.mu_hat, n_draws=50, maximum=True) > (
        cm.random_baseline_calibration_error(data.mu_hat, n_draws=50)
    )


@pytest.mark.parametrize("strategy", ["equal_width", "equal_mass"])
def test_random_baseline_averages_the_metric_over_the_seeded_draws(make_data, strategy):
    """The baseline is the mean, over n_draws successive ``default_rng(seed).random(N)`` vectors, of ECE (MCE
    with ``maximum``) with the given bins; its defaults are 10 equal-width bins, 100 draws and seed 0."""
    target = make_data(n_queries=40, seed=2).mu_hat
    for maximum, metric in ((False, cm.expected_calibration_error), (True, cm.maximum_calibration_error)):
        rng = np.random.default_rng(7)
        draws = [metric(rng.random(40), target, n_bins=4, strategy=strategy) for _ in range(30)]
        got = cm.random_baseline_calibration_error(
            target, n_bins=4, strategy=strategy, maximum=maximum, n_draws=30, seed=7
        )
        assert got == pytest.approx(np.mean(draws), rel=1e-12, abs=0)
    explicit = cm.random_baseline_calibration_error(
        target, n_bins=10, strategy="equal_width", n_draws=100, seed=0
    )
    assert cm.random_baseline_calibration_error(target) == explicit


@pytest.mark.parametrize(
    "metric", [cm.expected_calibration_error, cm.maximum_calibration_error, cm.adaptive_calibration_error]
)
def test_the_resampling_paths_reach_the_binning_kernel_with_float32_and_compute_in_float64(metric):
    """The bootstrap hands the caller's float32 arrays to the kernel, which computes in float64: the interval
    equals the one of the float64 copies, and each leave-one-out value the metric on the float64 copy with
    the query left out (float32 arithmetic is ~1e-7 off)."""
    rng = np.random.default_rng(31)
    confidence = rng.random(40).astype(np.float32)
    target = rng.random(40).astype(np.float32)
    wide = (confidence.astype(np.float64), target.astype(np.float64))
    narrow_ci = cm.bootstrap_ci(metric, confidence, target, n_resamples=50, seed=3)
    wide_ci = cm.bootstrap_ci(metric, *wide, n_resamples=50, seed=3)
    np.testing.assert_allclose(narrow_ci, wide_ci, rtol=1e-13, atol=0)
    got = leave_one_out_values(metric, confidence, target)
    loop = [metric(np.delete(wide[0], i), np.delete(wide[1], i)) for i in range(40)]
    np.testing.assert_allclose(got, loop, rtol=1e-12, atol=1e-14)


def test_mce_with_empty_equal_mass_bins_warns_nothing():
    """More equal-mass bins than queries leaves bins with no mass: MCE skips them silently (their 0/0 is
    masked), and equals the largest per-query gap when every query has a bin of its own."""
    confidence = np.array([0.1, 0.5, 0.9])
    target = np.array([0.0, 1.0, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value = cm.maximum_calibration_error(confidence, target, n_bins=8, strategy="equal_mass")
        bootstrap = cm.bootstrap_ci(cm.maximum_calibration_error, confidence, target, n_resamples=20, seed=0)
    assert value == pytest.approx(0.5)
    assert np.isfinite(bootstrap.estimate)
