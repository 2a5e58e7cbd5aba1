"""Pearson and Spearman correlation of confidence with mu_hat, against scipy.stats."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

import capcal_metrics as cm
from capcal_metrics._kernels import Workspace
from capcal_metrics.kernel_registry import KERNEL_FACTORIES


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("decimals", [None, 1, 2])
def test_match_scipy(make_data, seed, decimals):
    data = make_data(n_queries=400, seed=seed, decimals=decimals)  # mu_hat has many ties (n = 10)
    assert cm.pearson_correlation(data.confidence, data.mu_hat) == pytest.approx(
        pearsonr(data.confidence, data.mu_hat).statistic, abs=1e-12
    )
    assert cm.spearman_correlation(data.confidence, data.mu_hat) == pytest.approx(
        spearmanr(data.confidence, data.mu_hat).statistic, abs=1e-12
    )


def test_monotone_and_reversed():
    confidence = np.linspace(0.05, 0.95, 20)
    target = confidence**3
    assert cm.spearman_correlation(confidence, target) == pytest.approx(1.0)
    assert cm.spearman_correlation(confidence, 1 - target) == pytest.approx(-1.0)
    assert cm.pearson_correlation(confidence, 0.5 * confidence + 0.1) == pytest.approx(1.0)
    assert cm.pearson_correlation(confidence, target) < 1.0


@pytest.mark.parametrize("metric", [cm.pearson_correlation, cm.spearman_correlation])
def test_constant_input_is_undefined(metric):
    with pytest.warns(cm.UndefinedMetricWarning, match="constant"):
        assert np.isnan(metric([0.3, 0.3, 0.3], [0.1, 0.5, 0.9]))
    with pytest.warns(cm.UndefinedMetricWarning, match="constant"):
        assert np.isnan(metric([0.1, 0.5, 0.9], [0.7, 0.7, 0.7]))
    with pytest.warns(cm.UndefinedMetricWarning):
        assert np.isnan(metric([0.4], [0.2]))


def test_row_order_invariance(make_data):
    data = make_data(n_queries=300, seed=4, decimals=1)
    permutation = np.random.default_rng(1).permutation(300)
    for metric in (cm.pearson_correlation, cm.spearman_correlation):
        assert metric(data.confidence[permutation], data.mu_hat[permutation]) == pytest.approx(
            metric(data.confidence, data.mu_hat), abs=1e-12
        )


@pytest.mark.parametrize("seed", range(40))
def test_exactly_linear_data_give_correlation_within_minus_one_to_one(seed):
    """r = +-1 for t = a + b c and t = a + b (1 - c); unclipped, rounding gives |r| = 1 + 4e-16 on some."""
    rng = np.random.default_rng(seed)
    confidence = np.round(rng.random(int(rng.integers(3, 30))), 2)
    confidence[:2] = [0.1, 0.9]
    slope, intercept = rng.uniform(0.1, 0.5), rng.uniform(0.0, 0.5)
    for sign, target in ((1.0, intercept + slope * confidence), (-1.0, intercept + slope * (1 - confidence))):
        r = cm.pearson_correlation(confidence, target)
        assert -1.0 <= r <= 1.0
        assert r == pytest.approx(sign, abs=1e-12)


def test_pearson_is_accurate_for_a_small_spread_far_from_zero():
    """Centring before the one-pass moments: confidences 0.9 + 1e-4 u (spread 1e-4, mean 0.9) against scipy's
    two-pass value to 1e-9 relative (uncentred, the cancellation costs about 6 digits)."""
    rng = np.random.default_rng(7)
    confidence = 0.9 + 1e-4 * rng.random(200)
    target = 0.5 + 1e-4 * rng.random(200) + 0.3 * (confidence - 0.9)
    expected = pearsonr(confidence, target).statistic
    assert cm.pearson_correlation(confidence, target) == pytest.approx(expected, rel=1e-9)
    assert cm.pearson_correlation(target, confidence) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("metric", [cm.pearson_correlation, cm.spearman_correlation])
def test_bootstrap_flags_constant_resamples_like_the_metric_and_warns_only_about_them(metric):
    """On 4 questions many resamples repeat one value: the kernel must call exactly the resamples NaN that
    the metric itself calls constant (compared with the resample-by-resample path), with one
    UndefinedMetricWarning and no numpy RuntimeWarning."""
    confidence = np.array([0.7, 0.7, 0.2, 0.4])
    target = np.array([0.3, 0.9, 0.9, 0.1])
    caught_by_path = []
    intervals = []
    for fn in (metric, lambda c, t: metric(c, t)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            intervals.append(cm.bootstrap_ci(fn, confidence, target, n_resamples=400, seed=3))
        caught_by_path.append(
            [(w.category, str(w.message)) for w in caught if "bootstrap_ci" in str(w.message)]
        )
        assert [
            w.category for w in caught if "bootstrap_ci" in str(w.message) or w.category is RuntimeWarning
        ] == [cm.UndefinedMetricWarning]
    assert caught_by_path[0] == caught_by_path[1]
    assert intervals[0].low == pytest.approx(intervals[1].low, abs=1e-12)
    assert intervals[0].high == pytest.approx(intervals[1].high, abs=1e-12)


def test_bootstrap_of_float32_inputs_equals_that_of_their_float64_values(make_data):
    data = make_data(n_queries=80, seed=2, decimals=2)
    confidence32, target32 = data.confidence.astype(np.float32), data.mu_hat.astype(np.float32)
    for metric in (cm.pearson_correlation, cm.spearman_correlation):
        narrow = cm.bootstrap_ci(metric, confidence32, target32, n_resamples=50)
        wide = cm.bootstrap_ci(
            metric, confidence32.astype(np.float64), target32.astype(np.float64), n_resamples=50
        )
        assert narrow.low == pytest.approx(wide.low, abs=1e-13)
        assert narrow.high == pytest.approx(wide.high, abs=1e-13)


def _single_question_rows(n_questions: int, max_count: int) -> np.ndarray:
    """Count rows w e_i: question i repeated w = 1..max_count times, for every i."""
    counts = np.zeros((n_questions * max_count, n_questions), dtype=np.int64)
    counts[np.arange(n_questions * max_count), np.repeat(np.arange(n_questions), max_count)] = np.tile(
        np.arange(1, max_count + 1), n_questions
    )
    return counts


@pytest.mark.parametrize("metric", [cm.pearson_correlation, cm.spearman_correlation])
def test_a_resample_of_one_repeated_question_is_constant(metric):
    """Rows that repeat one question (2,000 of them) are NaN: its one-pass variance comes out up to ~2.5 eps
    mean(x^2) from 0, inside the bound 4 N eps mean(x^2)."""
    rng = np.random.default_rng(0)
    confidence, target = rng.random(50), rng.random(50)
    workspace = Workspace(_single_question_rows(50, 40))
    assert np.isnan(KERNEL_FACTORIES[metric](workspace, confidence, target)()).all()


@pytest.mark.parametrize(("ratio", "constant"), [(36.0, True), (45.0, False)])
def test_pearson_counts_a_variance_as_zero_up_to_the_documented_bound(ratio, constant):
    """Two questions with confidences d apart, weight 1 each (N = 10): the variance d^2 / 4 is set to
    ``ratio`` eps mean(x^2); the bound is 4 N eps mean(x^2) = 40 eps mean(x^2), so 36 is rounding, 45 not."""
    confidence = np.linspace(0.05, 0.5, 10)
    x_a = 0.9 - (confidence[:8].sum() + 1.8) / 10  # the centred value of 0.9 (mean of all ten, d ~ 1e-7 off)
    confidence[8] = 0.9
    confidence[9] = 0.9 + 2.0 * x_a * np.sqrt(ratio * np.finfo(np.float64).eps)
    target = np.linspace(0.0, 1.0, 10)
    counts = np.zeros((1, 10), dtype=np.int64)
    counts[0, 8:] = 1
    r = KERNEL_FACTORIES[cm.pearson_correlation](Workspace(counts), confidence, target)()[0]
    assert np.isnan(r) == constant
    if not constant:
        assert 0.9 < r <= 1.0  # two points: r = 1 exactly, here with the cancellation of a variance ~ 40 eps


def test_spearman_stays_within_minus_one_to_one_at_a_million_questions():
    """Below ~2e5 questions every rank sum is exact in float64 and |rho| <= 1 exactly; at 1e6 they round and,
    unclipped, rho = +-(1 + 2e-16) on this draw (the third of seed 0)."""
    rng = np.random.default_rng(0)
    for _ in range(2):
        rng.random(1_000_000)
    confidence = rng.random(1_000_000)
    for target, sign in ((confidence, 1.0), (1.0 - confidence, -1.0)):
        rho = cm.spearman_correlation(confidence, target)
        assert -1.0 <= rho <= 1.0
        assert rho == pytest.approx(sign, abs=1e-12)
