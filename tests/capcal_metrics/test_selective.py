"""Risk-coverage curve, AURC and PRR, against explicit loops (and exhaustive tie orders)."""

from __future__ import annotations

import itertools
import math
import warnings
from functools import partial

import numpy as np
import pytest

import capcal_metrics as cm


def loop_risk_curve(confidence, target, order=None):
    """risk(k) = 1 - mean target of the first k queries when ranked by decreasing confidence."""
    if order is None:
        order = sorted(range(len(confidence)), key=lambda i: -confidence[i])
    kept_target = np.asarray(target)[list(order)]
    return np.array([1 - kept_target[:k].mean() for k in range(1, len(order) + 1)])


def loop_prr(confidence, quality, max_rejection=1.0):
    """PRR on the quality (accuracy) rejection curve, as in LM-Polygraph, for confidences without ties."""
    n = len(confidence)
    levels = max(1, math.floor(max_rejection * n))

    def area(scores):
        ranked = np.asarray(quality)[np.argsort(-np.asarray(scores), kind="stable")]
        return np.mean([ranked[: n - r].mean() for r in range(levels)])

    random_area = np.mean(quality)
    return (area(confidence) - random_area) / (area(quality) - random_area)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_curve_and_aurc_without_ties_match_loop(make_data, seed):
    data = make_data(n_queries=200, seed=seed)
    keep = (data.confidence > 0) & (data.confidence < 1)  # drop the clipped (tied) values
    confidence, target = data.confidence[keep], data.mu_hat[keep]
    assert np.unique(confidence).size == confidence.size
    curve = cm.risk_coverage_curve(confidence, target)
    expected = loop_risk_curve(confidence, target)
    np.testing.assert_allclose(curve.risk, expected, atol=1e-12)
    np.testing.assert_allclose(curve.coverage, np.arange(1, confidence.size + 1) / confidence.size)
    np.testing.assert_array_equal(curve.threshold, np.sort(confidence)[::-1])
    assert cm.area_under_risk_coverage_curve(confidence, target) == pytest.approx(expected.mean(), abs=1e-12)


def test_ties_use_the_expectation_over_all_tie_orders():
    confidence = np.array([0.9, 0.5, 0.5, 0.5, 0.2, 0.9, 0.5])
    target = np.array([1.0, 0.0, 1.0, 0.3, 0.0, 0.6, 1.0])
    curves = [
        loop_risk_curve(confidence, target, sorted(permutation, key=lambda i: -confidence[i]))
        for permutation in itertools.permutations(range(len(confidence)))
    ]
    expected = np.mean(curves, axis=0)
    curve = cm.risk_coverage_curve(confidence, target)
    np.testing.assert_allclose(curve.risk, expected, atol=1e-12)
    assert cm.area_under_risk_coverage_curve(confidence, target) == pytest.approx(expected.mean(), abs=1e-12)


def test_aurc_matches_curve_mean_with_ties_and_ignores_row_order(make_data):
    data = make_data(n_queries=500, seed=3, decimals=1)
    curve = cm.risk_coverage_curve(data.confidence, data.z)
    aurc = cm.area_under_risk_coverage_curve(data.confidence, data.z)
    assert aurc == pytest.approx(curve.risk.mean(), abs=1e-12)
    permutation = np.random.default_rng(0).permutation(500)
    assert cm.area_under_risk_coverage_curve(data.confidence[permutation], data.z[permutation]) == (
        pytest.approx(aurc, abs=1e-12)
    )
    np.testing.assert_allclose(
        cm.risk_coverage_curve(data.confidence[permutation], data.z[permutation]).risk, curve.risk, atol=1e-12
    )


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("max_rejection", [1.0, 0.5, 0.25])
def test_prr_matches_polygraph_style_loop(seed, max_rejection):
    rng = np.random.default_rng(seed)
    quality = rng.binomial(10, rng.random(120)) / 10
    confidence = 1 / (1 + np.exp(-(3 * quality - 1.5 + rng.normal(0, 1, 120))))  # continuous: no ties
    expected = loop_prr(confidence, quality, max_rejection)
    assert cm.prediction_rejection_ratio(confidence, quality, max_rejection=max_rejection) == pytest.approx(
        expected, abs=1e-10
    )


def test_prr_oracle_random_and_reversed(make_data):
    data = make_data(n_queries=300, seed=4)
    assert cm.prediction_rejection_ratio(data.mu_hat, data.mu_hat) == pytest.approx(1.0)
    assert cm.prediction_rejection_ratio(np.full(300, 0.5), data.mu_hat) == pytest.approx(0.0, abs=1e-12)
    assert cm.prediction_rejection_ratio(1 - data.mu_hat, data.mu_hat) < -0.5
    good = cm.prediction_rejection_ratio(data.confidence, data.mu_hat)
    assert 0.0 < good < 1.0


def test_prr_undefined_for_constant_target():
    with pytest.warns(cm.UndefinedMetricWarning, match="prediction_rejection_ratio is undefined"):
        assert np.isnan(cm.prediction_rejection_ratio([0.1, 0.5, 0.9], [0.4, 0.4, 0.4]))
    with pytest.raises(ValueError, match="max_rejection"):
        cm.prediction_rejection_ratio([0.1, 0.5], [0.0, 1.0], max_rejection=0.0)


def test_single_query_curve():
    curve = cm.risk_coverage_curve([0.7], [0.25])
    assert curve.coverage.tolist() == [1.0] and curve.risk.tolist() == [0.75]
    assert cm.area_under_risk_coverage_curve([0.7], [0.25]) == 0.75


def test_random_baseline_aurc_matches_simulation(make_data):
    """E[AURC] under c ~ U(0, 1) is 1 - mean(target). Tolerance: 4 standard errors."""
    data = make_data(n_queries=100, seed=5)
    rng = np.random.default_rng(7)
    draws = np.array([cm.area_under_risk_coverage_curve(rng.random(100), data.mu_hat) for _ in range(3000)])
    baseline = cm.random_baseline_aurc(data.mu_hat)
    assert baseline == pytest.approx(1 - data.mu_hat.mean())
    assert abs(draws.mean() - baseline) < 4 * draws.std(ddof=1) / np.sqrt(len(draws))


def test_the_jackknife_kernel_of_prr_names_a_bad_max_rejection():
    # the jackknife builds the metric's kernel before it calls the metric: the kernel's check names it too
    from capcal_metrics.jackknife import leave_one_out_values

    statistic = partial(cm.prediction_rejection_ratio, max_rejection=1.5)
    with pytest.raises(ValueError, match=r"^max_rejection must be in \(0, 1\], got 1\.5$"):
        leave_one_out_values(statistic, [0.2, 0.9, 0.4, 0.7], [0.0, 1.0, 0.0, 1.0])


@pytest.mark.parametrize(
    ("confidence", "target", "max_rejection"),
    [
        (
            np.linspace(0.1, 0.9, 10),
            np.r_[np.zeros(5), np.ones(5)],
            0.15,
        ),  # R = floor(1.5) = 1: keep all only
        (np.linspace(0.1, 0.9, 7), np.full(7, 0.1), 1.0),  # constant targets: every ranking is the oracle
        (np.linspace(0.1, 0.9, 9), np.full(9, 1 / 3), 0.5),
        (np.array([0.2, 0.2, 0.7, 0.9, 0.4]), np.full(5, 0.7), 1.0),
    ],
)
def test_prr_is_undefined_where_every_ranking_has_the_random_area(confidence, target, max_rejection):
    """With R = 1 level (nothing rejected) or all targets equal, A_random = A_oracle: NaN with one
    UndefinedMetricWarning and no numpy warning, also through the jackknife's kernel."""
    from capcal_metrics.jackknife import leave_one_out_values

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = cm.prediction_rejection_ratio(confidence, target, max_rejection=max_rejection)
    assert math.isnan(value)
    assert [type(w.message) for w in caught] == [cm.UndefinedMetricWarning]
    if np.ptp(target) == 0:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            statistic = partial(cm.prediction_rejection_ratio, max_rejection=max_rejection)
            left_out = leave_one_out_values(statistic, confidence, target)
        assert np.isnan(left_out).all()
        assert not [w for w in caught if not isinstance(w.message, cm.UndefinedMetricWarning)]


@pytest.mark.parametrize("metric", [cm.area_under_risk_coverage_curve, cm.prediction_rejection_ratio])
def test_the_jackknife_kernels_take_float32_and_ties(metric):
    """The jackknife reaches the kernels with the caller's arrays: float32 confidences with ties and float32
    targets give the metric's own leave-one-out values (float64 after validation)."""
    from capcal_metrics.jackknife import leave_one_out_values

    rng = np.random.default_rng(23)
    confidence = rng.integers(0, 6, 30).astype(np.float32) / np.float32(5)  # tied runs
    target = rng.random(30).astype(np.float32)
    got = leave_one_out_values(metric, confidence, target)
    loop = [
        metric(np.delete(confidence, i).astype(np.float64), np.delete(target, i).astype(np.float64))
        for i in range(30)
    ]
    np.testing.assert_allclose(got, loop, rtol=1e-12, atol=1e-14)
