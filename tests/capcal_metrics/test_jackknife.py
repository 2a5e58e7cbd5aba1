"""Jackknife influence values, standard error and normal interval, against the textbook formulas."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from lm_eval.api.metrics import mean, mean_stderr

import capcal_metrics as cm


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
