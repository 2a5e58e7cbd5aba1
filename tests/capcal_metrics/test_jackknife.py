"""Jackknife influence values, standard error and normal interval, against the textbook formulas."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from lm_eval.api.metrics import mean, mean_stderr

import capcal_metrics as cm
from capcal_metrics import jackknife


def textbook_se(statistic, *arrays) -> float:
    n = len(arrays[0])
    values = np.array([statistic(*(np.delete(a, i) for a in arrays)) for i in range(n)])
    return math.sqrt((n - 1) / n * np.sum((values - values.mean()) ** 2))


METRICS = {
    "ece": (cm.expected_calibration_error, 2),
    "debiased_ece": (cm.debiased_expected_calibration_error, 2),
    "corrected_brier": (cm.corrected_capability_brier_score, 3),
    "soft_auroc": (cm.soft_label_auroc, 2),
}


@pytest.mark.parametrize("name", list(METRICS))
def test_items_average_to_the_statistic_and_give_the_jackknife_se(make_data, name):
    metric, n_arrays = METRICS[name]
    data = make_data(n_queries=60, seed=5, n_samples=4, decimals=2)
    arrays = (data.confidence, data.mu_hat, data.n_samples)[:n_arrays]
    items = cm.jackknife_items(metric, *arrays)  # the package metric: its kernel, all leave-one-outs at once
    by_loop = cm.jackknife_items(lambda *a: metric(*a), *arrays)  # any callable: N calls
    assert items == pytest.approx(by_loop, abs=1e-12)
    assert mean(list(items)) == pytest.approx(metric(*arrays), abs=1e-12)
    assert mean_stderr(list(items)) == pytest.approx(textbook_se(metric, *arrays), rel=1e-9)
    interval = cm.jackknife_ci(metric, *arrays, confidence_level=0.9)
    assert interval.estimate == metric(*arrays)
    assert interval.standard_error == pytest.approx(textbook_se(metric, *arrays), rel=1e-9)
    assert interval.high - interval.estimate == pytest.approx(1.6448536269514722 * interval.standard_error)


def test_undefined_cases():
    rng = np.random.default_rng(0)
    c = rng.uniform(size=25)
    assert cm.jackknife_items(lambda a: float(a.mean()), np.array([0.5])) is None  # one question: no SE
    # AUROC undefined without one of the questions (a single question has mu > 0): no items, NaN interval
    target = np.array([1.0, 0.0, 0.0])
    assert cm.jackknife_items(cm.soft_label_auroc, c[:3], target) is None
    interval = cm.jackknife_ci(cm.soft_label_auroc, c[:3], target)
    assert (
        math.isfinite(interval.estimate) and math.isnan(interval.low) and math.isnan(interval.standard_error)
    )


def test_leave_one_out_silences_only_the_undefined_metric_warning():
    """Without its only positive, AUROC is undefined: NaN and no warning (the jackknife reports it); any
    other warning of a custom statistic reaches the caller."""
    confidence = np.array([0.1, 0.4, 0.35, 0.8])
    labels = np.array([0.0, 0.0, 1.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values = cm.leave_one_out_values(lambda c, z: cm.auroc(c, z), confidence, labels)
    expected = [cm.auroc(np.delete(confidence, i), np.delete(labels, i)) for i in (0, 1, 3)]
    np.testing.assert_allclose(values[[0, 1, 3]], expected, rtol=0, atol=1e-15)
    assert np.isnan(values[2])

    def noisy_mean(c: np.ndarray) -> float:
        warnings.warn("a custom statistic's own warning", UserWarning, stacklevel=2)
        return float(c.mean())

    with pytest.warns(UserWarning, match="custom statistic's own warning"):
        values = cm.leave_one_out_values(noisy_mean, confidence)
    np.testing.assert_allclose(values, [np.delete(confidence, i).mean() for i in range(4)], rtol=1e-15)


def test_the_items_of_a_mean_are_its_terms():
    """For theta = mean(x), theta_(-i) = (N mean - x_i) / (N - 1), so item_i = x_i exactly (up to rounding):
    through the loop (a callable) and through a kernel (the Brier score is the mean of (c - t)^2); N = 2
    is the smallest N with items."""
    rng = np.random.default_rng(8)
    for n in (2, 3, 17):
        x = rng.random(n)
        np.testing.assert_allclose(cm.jackknife_items(lambda a: float(a.mean()), x), x, rtol=0, atol=1e-12)
        c, t = rng.random(n), rng.random(n)
        np.testing.assert_allclose(cm.jackknife_items(cm.brier_score, c, t), (c - t) ** 2, rtol=0, atol=1e-12)


def test_the_interval_is_estimate_plus_minus_z_standard_errors():
    rng = np.random.default_rng(9)
    x = rng.random(30)
    interval = cm.jackknife_ci(lambda a: float(a.mean()), x, confidence_level=0.8)
    assert interval.standard_error == pytest.approx(x.std(ddof=1) / np.sqrt(30), rel=1e-12)
    z = 1.2815515655446004  # the normal quantile of 0.9
    assert interval.low == pytest.approx(x.mean() - z * interval.standard_error, rel=1e-12)
    assert interval.high == pytest.approx(x.mean() + z * interval.standard_error, rel=1e-12)


def test_undefined_and_empty_inputs_give_nan_without_warnings():
    confidence = np.array([0.2, 0.4, 0.9])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cm.jackknife_items(cm.auroc, confidence, np.zeros(3)) is None  # theta itself undefined
        interval = cm.jackknife_ci(cm.auroc, confidence, np.zeros(3))
        assert all(math.isnan(value) for value in interval)
        empty = cm.jackknife_ci(cm.brier_score, np.array([]), np.array([]))
        assert all(math.isnan(value) for value in empty)
        single = cm.jackknife_ci(lambda a: float(a.mean()), np.array([0.5]))
        assert single.estimate == 0.5 and math.isnan(single.low) and math.isnan(single.high)


def test_a_custom_statistics_own_warnings_reach_the_caller_every_time():
    """The theta, each leave-one-out value and jackknife_ci's estimate: N + 1 calls in jackknife_items and
    N + 2 in jackknife_ci, each warning once."""
    x = np.array([0.1, 0.5, 0.7, 0.2])

    def noisy_mean(a: np.ndarray) -> float:
        warnings.warn("a custom statistic's own warning", UserWarning, stacklevel=2)
        return float(a.mean())

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cm.jackknife_items(noisy_mean, x)
    assert [w.category for w in caught] == [UserWarning] * 5
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cm.jackknife_ci(noisy_mean, x)
    assert [w.category for w in caught] == [UserWarning] * 6


def test_rows_of_two_dimensional_arrays_are_left_out_whole():
    """An (N, n) array loses row i (axis 0), also with more columns than rows (n > N)."""
    rng = np.random.default_rng(10)
    responses = rng.random((4, 10))

    def spread_of_row_means(a: np.ndarray) -> float:
        return float(a.mean(axis=1).std())

    values = cm.leave_one_out_values(spread_of_row_means, responses)
    expected = [spread_of_row_means(np.delete(responses, i, axis=0)) for i in range(4)]
    np.testing.assert_allclose(values, expected, rtol=1e-15)


def test_leave_one_out_values_are_float64_for_an_integer_statistic():
    values = cm.leave_one_out_values(lambda a: int(a.sum()), np.array([1, 2, 3, 4]))
    assert values.dtype == np.float64
    np.testing.assert_array_equal(values, [9.0, 8.0, 7.0, 6.0])


@pytest.mark.parametrize("chunk_elements", [1, 60, 100])
def test_the_kernel_chunks_change_nothing(make_data, monkeypatch, chunk_elements):
    """Leave-one-out rows in chunks of 1, 3 and 5 (N = 20; the chunk is max(1, elements // N)) equal the
    values from N calls."""
    data = make_data(n_queries=20, seed=11, decimals=1)
    arrays = (data.confidence, data.mu_hat)
    expected = cm.leave_one_out_values(lambda *a: cm.soft_label_auroc(*a), *arrays)
    monkeypatch.setattr(jackknife, "_CHUNK_ELEMENTS", chunk_elements)
    np.testing.assert_allclose(cm.leave_one_out_values(cm.soft_label_auroc, *arrays), expected, atol=1e-12)


def test_confidence_level_is_named_and_checked():
    for level in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match=r"^confidence_level must be in \(0, 1\)"):
            cm.jackknife_ci(
                cm.brier_score, np.array([0.2, 0.4]), np.array([0.0, 1.0]), confidence_level=level
            )
