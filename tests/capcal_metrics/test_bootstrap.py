"""Percentile bootstrap over questions: reproducibility, fast path = generic path, coverage, errors."""

from __future__ import annotations

import warnings
from functools import partial

import numpy as np
import pytest

import capcal_metrics as cm

# Package metrics (evaluated by their weighted kernels) with the arrays they take from CapabilityData.
FAST_METRICS = {
    "ece": (cm.expected_calibration_error, ("confidence", "mu_hat")),
    "ece_15_equal_mass": (
        partial(cm.expected_calibration_error, n_bins=15, strategy="equal_mass"),
        ("confidence", "mu_hat"),
    ),
    "response_ece": (cm.expected_calibration_error, ("confidence", "z")),
    "mce": (cm.maximum_calibration_error, ("confidence", "mu_hat")),
    "mce_equal_mass": (
        partial(cm.maximum_calibration_error, strategy="equal_mass"),
        ("confidence", "mu_hat"),
    ),
    "ace": (cm.adaptive_calibration_error, ("confidence", "mu_hat")),
    "ace_7": (partial(cm.adaptive_calibration_error, n_bins=7), ("confidence", "mu_hat")),
    "brier": (cm.brier_score, ("confidence", "mu_hat")),
    "corrected_brier": (cm.corrected_capability_brier_score, ("confidence", "mu_hat", "n_samples")),
    "corrected_brier_scalar_n": (
        partial(cm.corrected_capability_brier_score, n_samples=10),
        ("confidence", "mu_hat"),
    ),
    "soft_auroc": (cm.soft_label_auroc, ("confidence", "mu_hat")),
    "auroc": (cm.auroc, ("confidence", "z")),
    "average_precision": (cm.average_precision, ("confidence", "z")),
    "pearson": (cm.pearson_correlation, ("confidence", "mu_hat")),
    "spearman": (cm.spearman_correlation, ("confidence", "mu_hat")),
    "aurc": (cm.area_under_risk_coverage_curve, ("confidence", "mu_hat")),
    "prr": (cm.prediction_rejection_ratio, ("confidence", "mu_hat")),
    "prr_50": (partial(cm.prediction_rejection_ratio, max_rejection=0.5), ("confidence", "mu_hat")),
}


@pytest.mark.parametrize("name", sorted(FAST_METRICS))
@pytest.mark.parametrize("decimals", [None, 1])
def test_vectorised_path_equals_resample_by_resample_path(make_data, name, decimals):
    """The weighted kernels must reproduce the metric on the explicitly resampled rows, resample by resample.

    Wrapping the metric in a lambda hides it from the kernel registry, forcing the generic path; both use the
    same bootstrap counts for the same seed, so the intervals agree to rounding.
    """
    metric, fields = FAST_METRICS[name]
    data = make_data(n_queries=120, seed=3, decimals=decimals)
    arrays = [getattr(data, field) for field in fields]
    fast = cm.bootstrap_ci(metric, *arrays, n_resamples=60, seed=5)
    slow = cm.bootstrap_ci(lambda *a: metric(*a), *arrays, n_resamples=60, seed=5)
    assert fast.estimate == metric(*arrays)
    assert fast.low == pytest.approx(slow.low, abs=1e-10)
    assert fast.high == pytest.approx(slow.high, abs=1e-10)
    assert fast.low <= fast.high


@pytest.mark.parametrize("name", ["soft_auroc", "auroc", "average_precision", "pearson", "spearman", "prr"])
def test_vectorised_path_flags_the_same_undefined_resamples(name):
    """Four questions: many resamples repeat one row or one class, making the metric undefined (NaN)."""
    metric, fields = FAST_METRICS[name]
    data = {"confidence": np.array([0.1, 0.3, 0.3, 0.7]), "mu_hat": np.array([0.0, 0.0, 0.6, 1.0])}
    data["z"] = np.array([0.0, 1.0, 0.0, 1.0])
    arrays = [data[field] for field in fields]
    with pytest.warns(cm.UndefinedMetricWarning) as fast_warnings:
        fast = cm.bootstrap_ci(metric, *arrays, n_resamples=300, seed=2)
    with pytest.warns(cm.UndefinedMetricWarning) as slow_warnings:
        slow = cm.bootstrap_ci(lambda *a: metric(*a), *arrays, n_resamples=300, seed=2)
    assert str(fast_warnings[-1].message) == str(slow_warnings[-1].message)  # same number of NaN resamples
    assert fast.low == pytest.approx(slow.low, abs=1e-10) and fast.high == pytest.approx(slow.high, abs=1e-10)


@pytest.mark.parametrize("name", ["soft_auroc", "ace", "spearman", "prr"])
def test_vectorised_path_at_scale(name):
    """100,000 questions with ties, a few resamples: kernels agree with the generic path at full scale."""
    rng = np.random.default_rng(0)
    mu_hat = rng.binomial(100, rng.beta(0.7, 0.7, 100_000)) / 100
    confidence = np.round(np.clip(mu_hat + rng.normal(0, 0.15, 100_000), 0, 1), 3)
    metric = FAST_METRICS[name][0]
    fast = cm.bootstrap_ci(metric, confidence, mu_hat, n_resamples=8, seed=1)
    slow = cm.bootstrap_ci(lambda *a: metric(*a), confidence, mu_hat, n_resamples=8, seed=1)
    assert fast.low == pytest.approx(slow.low, abs=1e-9) and fast.high == pytest.approx(slow.high, abs=1e-9)


def test_reproducible_with_seed_and_sensitive_to_it(make_data):
    data = make_data(n_queries=200, seed=1)
    first = cm.bootstrap_ci(
        cm.expected_calibration_error, data.confidence, data.mu_hat, n_resamples=200, seed=7
    )
    again = cm.bootstrap_ci(
        cm.expected_calibration_error, data.confidence, data.mu_hat, n_resamples=200, seed=7
    )
    other = cm.bootstrap_ci(
        cm.expected_calibration_error, data.confidence, data.mu_hat, n_resamples=200, seed=8
    )
    assert first == again
    assert first.low != other.low or first.high != other.high
    assert first.estimate == cm.expected_calibration_error(data.confidence, data.mu_hat)


def test_row_order_of_input_does_not_matter(make_data):
    data = make_data(n_queries=150, seed=2, decimals=1)  # many tied confidences
    permutation = np.random.default_rng(0).permutation(150)
    ci = cm.bootstrap_ci(cm.soft_label_auroc, data.confidence, data.mu_hat, n_resamples=100, seed=0)
    permuted = cm.bootstrap_ci(
        cm.soft_label_auroc, data.confidence[permutation], data.mu_hat[permutation], n_resamples=100, seed=0
    )
    assert permuted.low == pytest.approx(ci.low, abs=1e-12) and permuted.high == pytest.approx(
        ci.high, abs=1e-12
    )


def test_percentile_interval_of_a_mean_covers_the_truth_about_95_percent():
    """Coverage simulation: target t ~ U(0, 1), c = 0, so Brier = mean t^2 with true value E[t^2] = 1/3.

    300 data sets of 200 questions: coverage of a correct 95% interval is Binomial(300, ~0.95)/300, whose
    standard deviation is 0.0126; we accept [0.89, 0.99], about 4 standard deviations below and 3 above.
    """
    rng = np.random.default_rng(2024)
    covered = 0
    n_datasets = 300
    for dataset in range(n_datasets):
        target = rng.random(200)
        ci = cm.bootstrap_ci(cm.brier_score, np.zeros(200), target, n_resamples=400, seed=dataset)
        covered += ci.low <= 1 / 3 <= ci.high
    assert 0.89 <= covered / n_datasets <= 0.99


def test_interval_narrows_with_lower_confidence_level(make_data):
    data = make_data(n_queries=200, seed=4)
    wide = cm.bootstrap_ci(cm.brier_score, data.confidence, data.mu_hat, confidence_level=0.99, seed=0)
    narrow = cm.bootstrap_ci(cm.brier_score, data.confidence, data.mu_hat, confidence_level=0.5, seed=0)
    assert wide.low < narrow.low < narrow.high < wide.high


def test_custom_metric_rows_and_vector_output(make_data):
    data = make_data(n_queries=100, seed=5)
    responses = np.stack([data.z, 1 - data.z], axis=1)  # shape (N, 2): resampled by rows
    per_response_confidence = np.stack([data.confidence, data.confidence], axis=1)
    ci = cm.bootstrap_ci(
        lambda c, z: cm.expected_calibration_error(c.ravel(), z.ravel()),
        per_response_confidence,
        responses,
        n_resamples=50,
    )
    assert ci.low <= ci.estimate <= ci.high or ci.low <= ci.high
    vector = cm.bootstrap_ci(lambda c: np.array([c.mean(), c.max()]), data.confidence, n_resamples=50)
    assert vector.estimate.shape == vector.low.shape == vector.high.shape == (2,)
    assert np.all(vector.low <= vector.high)


def test_undefined_resamples_are_dropped_with_a_warning():
    confidence = np.array([0.2, 0.4, 0.6, 0.8, 0.9])
    labels = np.array([0, 0, 0, 0, 1])  # many resamples miss the single positive
    with pytest.warns(cm.UndefinedMetricWarning, match=r"undefined \(NaN\) on \d+ of 200 resamples"):
        ci = cm.bootstrap_ci(cm.auroc, confidence, labels, n_resamples=200)
    assert np.isfinite(ci.low) and np.isfinite(ci.high)
    balanced = np.arange(40) % 2  # a resample with a single class has probability 2 * 2**-40
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cm.bootstrap_ci(cm.auroc, np.linspace(0.1, 0.9, 40), balanced, n_resamples=100, seed=0)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (([0.1, 0.2], [0.0]), {}, "same length"),
        (([], []), {}, "empty"),
        ((), {}, "at least one array"),
        (([0.1, 0.2], [0.0, 1.0]), {"n_resamples": 0}, "n_resamples"),
        (([0.1, 0.2], [0.0, 1.0]), {"confidence_level": 1.5}, "confidence_level"),
        ((0.5, [0.0]), {}, "scalar"),
        (([0.1, 2.0], [0.0, 1.0]), {}, r"confidence must lie in \[0, 1\]"),
    ],
)
def test_invalid_arguments(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        cm.bootstrap_ci(cm.brier_score, *args, **kwargs)


def test_metric_must_be_callable():
    with pytest.raises(ValueError, match="callable"):
        cm.bootstrap_ci("ece", [0.1], [0.0])
