"""Percentile bootstrap over questions: reproducibility, fast path = generic path, coverage, errors."""

from __future__ import annotations

import warnings
from functools import partial

import numpy as np
import pytest

import capcal_metrics as cm
from capcal_metrics import bootstrap as bootstrap_module

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
    # the estimate is the metric on all rows (flattened), whatever the resamples do
    flat = cm.expected_calibration_error(per_response_confidence.ravel(), responses.ravel())
    assert ci.estimate == pytest.approx(flat)
    assert ci.low <= ci.high and 0.0 <= ci.low and ci.high <= 1.0
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


# --- bootstrap_cis: several metrics on the same resamples ----------------------------------------------


def _suite(data) -> dict:
    """Every package metric (and a custom one) on the questions of ``data``."""
    return {
        name: (metric, tuple(getattr(data, field) for field in fields))
        for name, (metric, fields) in FAST_METRICS.items()
    } | {"custom_mean_gap": (lambda c, t: float(np.mean(t - c)), (data.confidence, data.mu_hat))}


def _canonical(data):
    """``data`` with its rows in the bootstrap's canonical order (confidence, then mu_hat, n_samples, z)."""
    order = np.lexsort([data.z, data.n_samples, data.mu_hat, data.confidence])
    return type(data)(*(np.asarray(field)[order] for field in data))


def _index_resampling_values(metric, arrays, n_questions, n_resamples, seed):
    """The textbook bootstrap: resample b takes the rows ``rng.integers(0, N, N)``, one resample at a time."""
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n_resamples):
        rows = rng.integers(0, n_questions, size=n_questions)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
            values.append(metric(*(array[rows] for array in arrays)))
    return np.array(values)


@pytest.mark.parametrize("decimals", [None, 1])
def test_bootstrap_cis_equals_index_resampling_with_the_same_draws(make_data, decimals):
    """Exactness: for the same seed, every metric's interval is the percentile interval of the metric on the
    rows drawn by the straightforward index resampling (same generator calls, one resample at a time), to
    rounding. The data are put in the canonical row order first, so that both index the same rows; ties
    (decimals=1) and undefined resamples (NaN, left out) included."""
    data = _canonical(make_data(n_queries=60, seed=11, decimals=decimals))
    metrics = _suite(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        cis = cm.bootstrap_cis(metrics, n_resamples=150, seed=4)
    for name, (metric, arrays) in metrics.items():
        values = _index_resampling_values(metric, arrays, 60, 150, seed=4)
        low, high = np.nanpercentile(values, [2.5, 97.5])
        assert cis[name].estimate == metric(*arrays), name
        assert cis[name].low == pytest.approx(low, abs=1e-10), name
        assert cis[name].high == pytest.approx(high, abs=1e-10), name


def test_bootstrap_cis_equals_index_resampling_on_undefined_resamples():
    """Five questions: many resamples hold one class, one confidence or one target value, where AUROC, AP,
    the correlations and PRR are undefined. Against the index resampling with the same draws, the NaN
    resamples are the same ones (same count) and the intervals of the rest agree."""
    confidence = np.array([0.1, 0.3, 0.3, 0.7, 0.9])
    mu_hat = np.array([0.0, 0.2, 0.6, 0.6, 1.0])
    labels = np.array([0.0, 1.0, 0.0, 0.0, 1.0])
    metrics = {
        "soft_auroc": (cm.soft_label_auroc, (confidence, mu_hat)),
        "auroc": (cm.auroc, (confidence, labels)),
        "average_precision": (cm.average_precision, (confidence, labels)),
        "pearson": (cm.pearson_correlation, (confidence, mu_hat)),
        "spearman": (cm.spearman_correlation, (confidence, mu_hat)),
        "prr": (cm.prediction_rejection_ratio, (confidence, mu_hat)),
        "ace": (cm.adaptive_calibration_error, (confidence, mu_hat)),
    }
    with pytest.warns(cm.UndefinedMetricWarning) as caught:
        cis = cm.bootstrap_cis(metrics, n_resamples=400, seed=3)
    messages = " ".join(str(warning.message) for warning in caught)
    for name, (metric, arrays) in metrics.items():
        values = _index_resampling_values(metric, arrays, 5, 400, seed=3)
        n_undefined = int(np.isnan(values).sum())
        if n_undefined:
            assert f"metric {name!r} was undefined (NaN) on {n_undefined} of 400" in messages, name
        else:
            assert f"metric {name!r}" not in messages, name
        low, high = np.nanpercentile(values, [2.5, 97.5])
        assert cis[name].low == pytest.approx(low, abs=1e-10), name
        assert cis[name].high == pytest.approx(high, abs=1e-10), name


def test_bootstrap_cis_does_not_depend_on_the_chunking(make_data, monkeypatch):
    """Resamples are drawn in chunks; the draws (and so the intervals) are the same for any chunk size."""
    data = make_data(n_queries=80, seed=12, decimals=1)
    metrics = _suite(data)
    monkeypatch.setattr(bootstrap_module, "_CHUNK_ELEMENTS", 80 * 7)  # chunks of 7 resamples
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        chunked = cm.bootstrap_cis(metrics, n_resamples=50, seed=9)
        monkeypatch.setattr(bootstrap_module, "_CHUNK_ELEMENTS", 1)  # one resample at a time
        single = cm.bootstrap_cis(metrics, n_resamples=50, seed=9)
    for name in metrics:
        assert chunked[name].low == pytest.approx(single[name].low, abs=1e-12), name
        assert chunked[name].high == pytest.approx(single[name].high, abs=1e-12), name


def test_bootstrap_cis_gives_each_metric_its_bootstrap_ci(make_data):
    """Without tied confidences every metric's canonical row order is the confidence order, and then
    bootstrap_cis = bootstrap_ci metric by metric for the same seed (they draw the same resamples)."""
    data = make_data(n_queries=150, seed=13)
    data = data._replace(confidence=np.random.default_rng(0).random(150))  # no ties (clipping makes some)
    metrics = _suite(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        together = cm.bootstrap_cis(metrics, n_resamples=120, seed=6)
        for name, (metric, arrays) in metrics.items():
            alone = cm.bootstrap_ci(metric, *arrays, n_resamples=120, seed=6)
            assert together[name] == pytest.approx(alone, abs=1e-10), name
    assert list(together) == list(metrics)


def test_bootstrap_cis_is_independent_of_row_order(make_data):
    data = make_data(n_queries=120, seed=14, decimals=1)
    permutation = np.random.default_rng(1).permutation(120)
    shuffled = type(data)(*(np.asarray(field)[permutation] for field in data))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        first = cm.bootstrap_cis(_suite(data), n_resamples=80, seed=2)
        second = cm.bootstrap_cis(_suite(shuffled), n_resamples=80, seed=2)
    for name in first:
        assert second[name] == pytest.approx(first[name], abs=1e-12), name


def test_bootstrap_cis_warns_per_metric_and_handles_all_undefined():
    """Four questions: AUROC is undefined on the resamples with one class; a constant target makes Spearman
    undefined on every resample (NaN interval), while the Brier interval is unaffected."""
    confidence = np.array([0.1, 0.4, 0.6, 0.9])
    labels = np.array([0.0, 0.0, 1.0, 1.0])
    constant = np.full(4, 0.5)
    metrics = {
        "auroc": (cm.auroc, (confidence, labels)),
        "spearman": (cm.spearman_correlation, (confidence, constant)),
        "brier": (cm.brier_score, (confidence, labels)),
    }
    with pytest.warns(cm.UndefinedMetricWarning) as caught:
        cis = cm.bootstrap_cis(metrics, n_resamples=200, seed=0)
    messages = [str(warning.message) for warning in caught if "bootstrap_cis" in str(warning.message)]
    assert any(message.startswith("bootstrap_cis: metric 'auroc' was undefined") for message in messages)
    assert any("metric 'spearman' was undefined (NaN) on 200 of 200" in message for message in messages)
    assert not any("'brier'" in message for message in messages)
    assert np.isfinite(cis["auroc"].low) and np.isnan(cis["spearman"].low) and np.isnan(cis["spearman"].high)
    assert cis["brier"].low <= cis["brier"].estimate <= cis["brier"].high


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        ({}, "non-empty mapping"),
        ({"ece": cm.expected_calibration_error}, "pair"),
        ({"ece": ("ece", ([0.1], [0.0]))}, "pair"),
        ({"ece": (cm.expected_calibration_error, ())}, "non-empty tuple"),
        ({"ece": (cm.expected_calibration_error, np.zeros((2, 2)))}, "non-empty tuple"),
        (
            {
                "ece": (cm.expected_calibration_error, ([0.1, 0.2], [0.0, 1.0])),
                "brier": (cm.brier_score, ([0.1, 0.2, 0.3], [0.0, 1.0, 1.0])),
            },
            "same length",
        ),
        ({"ece": (cm.expected_calibration_error, ([], []))}, "empty"),
        ({"ece": (cm.expected_calibration_error, (0.5, [0.0]))}, "scalar"),
    ],
)
def test_bootstrap_cis_invalid_arguments(metrics, message):
    with pytest.raises(ValueError, match=message):
        cm.bootstrap_cis(metrics)


# ------------------------------------------------ paired differences on the same resamples


def _two_estimators(rng: np.random.Generator, size: int, n: int = 8):
    """Questions with true mu ~ Beta(0.7, 0.7), mu_hat from n Bernoulli samples, and two confidences that
    share the question's mu: ``good`` = mu + N(0, 0.1), ``worse`` = mu + N(0, 0.2) (both clipped)."""
    mu = rng.beta(0.7, 0.7, size)
    mu_hat = rng.binomial(n, mu) / n
    good = np.clip(mu + rng.normal(0, 0.1, size), 0, 1)
    worse = np.clip(mu + rng.normal(0, 0.2, size), 0, 1)
    return mu, mu_hat, good, worse


def test_bootstrap_differences_are_the_per_resample_differences_of_bootstrap_cis():
    """The difference interval uses the very resamples of ``bootstrap_cis`` (same seed): it equals the
    percentile interval of the per-resample differences computed by index resampling."""
    rng = np.random.default_rng(5)
    _, mu_hat, good, worse = _two_estimators(rng, 60)
    metrics = {
        "good": (cm.corrected_capability_brier_score, (good, mu_hat, np.full(60, 8))),
        "worse": (cm.corrected_capability_brier_score, (worse, mu_hat, np.full(60, 8))),
    }
    differences = cm.bootstrap_differences(metrics, "good", n_resamples=300, seed=3)
    assert list(differences) == ["worse"]
    estimate = cm.corrected_capability_brier_score(worse, mu_hat, 8) - cm.corrected_capability_brier_score(
        good, mu_hat, 8
    )
    assert differences["worse"].estimate == pytest.approx(estimate, abs=1e-12)
    # the same draws by index resampling (rows sorted as bootstrap_cis sorts them: by the first array)
    order = np.lexsort([worse, mu_hat, good])
    g, w, m = good[order], worse[order], mu_hat[order]
    draws = np.random.default_rng(3).integers(0, 60, size=(300, 60))
    values = [
        cm.corrected_capability_brier_score(w[rows], m[rows], 8)
        - cm.corrected_capability_brier_score(g[rows], m[rows], 8)
        for rows in draws
    ]
    low, high = np.percentile(values, [2.5, 97.5])
    assert differences["worse"].low == pytest.approx(low, abs=1e-10)
    assert differences["worse"].high == pytest.approx(high, abs=1e-10)


def test_bootstrap_differences_of_identical_metrics_is_exactly_zero():
    rng = np.random.default_rng(0)
    _, mu_hat, good, _ = _two_estimators(rng, 40)
    metrics = {"a": (cm.brier_score, (good, mu_hat)), "b": (cm.brier_score, (good.copy(), mu_hat))}
    assert cm.bootstrap_differences(metrics, "a", n_resamples=100)["b"] == (0.0, 0.0, 0.0)


def test_paired_difference_interval_covers_the_true_difference_about_95_percent():
    """Coverage simulation of the paired interval of corrected-Brier(worse) - corrected-Brier(good), whose
    population value E[(worse - mu)^2] - E[(good - mu)^2] is computed on 2,000,000 draws (Monte Carlo
    error about 1e-4, against intervals about 2e-2 wide). 300 data sets of 200 questions, 400 resamples:
    coverage of a correct 95% interval is Binomial(300, ~0.95)/300 (sd 0.0126); we accept [0.90, 0.99].
    The paired interval is also narrower than the gap between the two marginal intervals' extremes."""
    truth_rng = np.random.default_rng(99)
    mu, _, good, worse = _two_estimators(truth_rng, 2_000_000)
    truth = float(np.mean((worse - mu) ** 2) - np.mean((good - mu) ** 2))
    rng = np.random.default_rng(2026)
    covered, narrower, n_datasets = 0, 0, 300
    for dataset in range(n_datasets):
        _, mu_hat, good, worse = _two_estimators(rng, 200)
        n = np.full(200, 8)
        metrics = {
            "good": (cm.corrected_capability_brier_score, (good, mu_hat, n)),
            "worse": (cm.corrected_capability_brier_score, (worse, mu_hat, n)),
        }
        ci = cm.bootstrap_differences(metrics, "good", n_resamples=400, seed=dataset)["worse"]
        covered += ci.low <= truth <= ci.high
        marginal = cm.bootstrap_cis(metrics, n_resamples=400, seed=dataset)
        unpaired_width = (marginal["worse"].high - marginal["good"].low) - (
            marginal["worse"].low - marginal["good"].high
        )
        narrower += (ci.high - ci.low) < unpaired_width
    assert 0.90 <= covered / n_datasets <= 0.99
    assert narrower == n_datasets


def test_bootstrap_differences_warns_on_undefined_resamples_and_checks_the_reference():
    confidence = np.array([0.1, 0.4, 0.6, 0.9])
    labels = np.array([0.0, 0.0, 1.0, 1.0])
    metrics = {"brier": (cm.brier_score, (confidence, labels)), "auroc": (cm.auroc, (confidence, labels))}
    with pytest.warns(cm.UndefinedMetricWarning, match="'auroc' - 'brier' was undefined"):
        cm.bootstrap_differences(metrics, "brier", n_resamples=200)
    with pytest.raises(ValueError, match="reference 'nope' must be one of"):
        cm.bootstrap_differences(metrics, "nope")
