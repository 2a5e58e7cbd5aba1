"""Pearson and Spearman correlation of confidence with mu_hat, against scipy.stats."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

import capcal_metrics as cm


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
