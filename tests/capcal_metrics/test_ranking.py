"""AUROC, soft-label AUROC and average precision, against scikit-learn and an O(N^2) double loop."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

import capcal_metrics as cm


def brute_force_soft_auroc(confidence, mu):
    """sum_ij mu_i (1 - mu_j) [1(c_i > c_j) + 0.5 1(c_i = c_j)] / sum_ij mu_i (1 - mu_j), over all (i, j)."""
    numerator = denominator = 0.0
    for i in range(len(confidence)):
        for j in range(len(confidence)):
            weight = mu[i] * (1 - mu[j])
            denominator += weight
            if confidence[i] > confidence[j]:
                numerator += weight
            elif confidence[i] == confidence[j]:
                numerator += 0.5 * weight
    return numerator / denominator


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("decimals", [None, 1, 2])
def test_auroc_and_average_precision_match_sklearn(make_data, seed, decimals):
    data = make_data(n_queries=500, seed=seed, decimals=decimals)
    assert cm.auroc(data.confidence, data.z) == pytest.approx(
        roc_auc_score(data.z, data.confidence), abs=1e-12
    )
    assert cm.average_precision(data.confidence, data.z) == pytest.approx(
        average_precision_score(data.z, data.confidence), abs=1e-12
    )


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("decimals", [None, 1])
def test_soft_label_auroc_matches_double_loop(make_data, seed, decimals):
    data = make_data(n_queries=150, seed=seed, decimals=decimals)
    expected = brute_force_soft_auroc(data.confidence, data.mu_hat)
    assert cm.soft_label_auroc(data.confidence, data.mu_hat) == pytest.approx(expected, abs=1e-12)


def test_soft_label_auroc_is_weighted_auroc_of_expanded_responses(make_data):
    """Each query = one positive of weight mu and one negative of weight 1 - mu at the same confidence."""
    data = make_data(n_queries=3000, seed=3, decimals=2)
    n = len(data.confidence)
    expected = roc_auc_score(
        np.r_[np.ones(n), np.zeros(n)],
        np.r_[data.confidence, data.confidence],
        sample_weight=np.r_[data.mu_hat, 1 - data.mu_hat],
    )
    assert cm.soft_label_auroc(data.confidence, data.mu_hat) == pytest.approx(expected, abs=1e-12)


def test_soft_label_auroc_reduces_to_auroc_on_binary_targets_at_scale():
    # 100,000 queries: an O(N^2) implementation could not run this.
    rng = np.random.default_rng(4)
    labels = (rng.random(100_000) < 0.3).astype(float)
    confidence = np.round(np.clip(0.3 + 0.2 * labels + rng.normal(0, 0.2, 100_000), 0, 1), 3)
    expected = roc_auc_score(labels, confidence)
    assert cm.soft_label_auroc(confidence, labels) == pytest.approx(expected, abs=1e-12)
    assert cm.auroc(confidence, labels) == pytest.approx(expected, abs=1e-12)


def test_perfect_and_reversed_rankings():
    labels = np.array([0, 0, 1, 1, 1])
    confidence = np.array([0.1, 0.2, 0.3, 0.8, 0.9])
    assert cm.auroc(confidence, labels) == 1.0
    assert cm.auroc(1 - confidence, labels) == 0.0
    assert cm.average_precision(confidence, labels) == 1.0
    assert cm.auroc(np.full(5, 0.5), labels) == 0.5  # all tied


@pytest.mark.parametrize(
    ("metric", "target"),
    [
        (cm.soft_label_auroc, [0.0, 0.0, 0.0]),
        (cm.soft_label_auroc, [1.0, 1.0, 1.0]),
        (cm.auroc, [1, 1, 1]),
        (cm.auroc, [0, 0, 0]),
        (cm.average_precision, [0, 0, 0]),
    ],
)
def test_undefined_cases_return_nan_with_warning(metric, target):
    with pytest.warns(cm.UndefinedMetricWarning, match="undefined"):
        assert np.isnan(metric([0.2, 0.5, 0.9], target))


def test_soft_label_auroc_defined_with_single_soft_query():
    # One query with mu = 0.5 ties with itself: 0.5 w_ii / w_ii.
    assert cm.soft_label_auroc([0.7], [0.5]) == 0.5


def test_average_precision_when_all_positive():
    assert cm.average_precision([0.3, 0.6], [1, 1]) == 1.0


def test_random_baseline_average_precision_exact_by_enumeration():
    """E[AP] over all N! rankings of distinct scores equals the closed form."""
    for labels in ([1, 0, 0, 1, 0], [1, 1, 1, 0], [0, 0, 0, 1], [1], [1, 0], [1, 1], [0, 1, 1]):
        labels = np.array(labels, dtype=float)
        values = []
        for permutation in itertools.permutations(range(len(labels))):
            scores = np.array(permutation, dtype=float) / len(labels)
            values.append(cm.average_precision(scores, labels))
        assert cm.random_baseline_average_precision(labels) == pytest.approx(np.mean(values), abs=1e-12)
    with pytest.warns(cm.UndefinedMetricWarning):
        assert np.isnan(cm.random_baseline_average_precision([0, 0]))


def test_auroc_random_baseline_is_one_half(make_data):
    """Documented constant: E[soft-label AUROC] = 1/2 under c ~ U(0, 1). Tolerance: 4 standard errors."""
    data = make_data(n_queries=200, seed=5)
    rng = np.random.default_rng(6)
    draws = np.array([cm.soft_label_auroc(rng.random(200), data.mu_hat) for _ in range(2000)])
    assert abs(draws.mean() - 0.5) < 4 * draws.std(ddof=1) / np.sqrt(len(draws))


@pytest.mark.parametrize("target", [[1e-300], [1 - 2**-53], [1e-300, 0.0, 2e-300]])
def test_soft_label_auroc_of_a_class_mass_within_rounding_of_zero_is_undefined(target):
    """A positive (or negative) mass of at most N eps N cannot be told from 0: NaN with the warning, as for
    all-0 or all-1 targets (before, the kernel's NaN came back without a warning)."""
    confidence = [0.2, 0.5, 0.9][: len(target)]
    message = (
        r"^soft_label_auroc is undefined: the targets' total or the total of 1 - target is 0 up to rounding;"
    )
    with pytest.warns(cm.UndefinedMetricWarning, match=message):
        assert np.isnan(cm.soft_label_auroc(confidence, target))


@pytest.mark.parametrize("target", [[1e-10, 0.0, 0.0], [0.1, 0.0, 0.05], [1.0, 1.0, 0.9], [0.5, 0.5, 0.5]])
def test_soft_label_auroc_of_small_class_masses_matches_double_loop(target):
    """Masses far above rounding (however small: 1e-10) and denominators below 1 are defined."""
    confidence = [0.2, 0.5, 0.9]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = cm.soft_label_auroc(confidence, target)
    assert got == pytest.approx(brute_force_soft_auroc(confidence, target), abs=1e-12)


def test_bootstrap_of_average_precision_warns_only_about_undefined_resamples():
    """Resamples without a positive are NaN with one UndefinedMetricWarning, no numpy RuntimeWarning."""
    confidence = np.linspace(0.05, 0.95, 10)
    labels = np.zeros(10)
    labels[3] = 1.0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        interval = cm.bootstrap_ci(cm.average_precision, confidence, labels, n_resamples=100, seed=1)
    assert [w.category for w in caught] == [cm.UndefinedMetricWarning]
    assert 0.0 < interval.low <= interval.high <= 1.0


def test_random_baseline_average_precision_names_its_argument():
    with pytest.raises(ValueError, match=r"^labels must be binary labels"):
        cm.random_baseline_average_precision([0, 2, 1])
