"""Capability metrics after stopping, the replay on a fixed-k matrix and the simulation (fixed seeds)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import capcal_metrics as cm
from analysis.estimators.adaptive import (
    adaptive_capability_metrics,
    adaptive_estimates,
    adaptive_leakage_free_consistency,
    adaptive_metric_intervals,
    adaptive_pass_at_k,
    stopped_counts,
)
from analysis.estimators.adaptive_replay import replay_stopping
from analysis.estimators.adaptive_simulation import simulate_adaptive_metrics
from analysis.report.calibration_table import calibration_table


def _run(seed: int = 0, size: int = 120, k: int = 16):
    rng = np.random.default_rng(seed)
    mu = rng.beta(0.3, 0.3, size)
    correctness = (rng.uniform(size=(size, k)) < mu[:, None]).astype(int)
    confidence = np.clip(mu + rng.normal(0, 0.15, size), 0, 1)
    return confidence, correctness


def test_single_look_equals_the_reports_fixed_k_metrics():
    confidence, correctness = _run()
    k = correctness.shape[1]
    n, s = np.full(len(confidence), k), correctness.sum(axis=1)
    adaptive = adaptive_capability_metrics(confidence, n, s, cm.unanimity_rule([k]))
    mu_hat = s / k
    report = {  # the fixed-k functions of analysis.report.calibration_table
        "capability_ece_debiased": cm.debiased_expected_calibration_error(confidence, mu_hat),
        "corrected_capability_brier": cm.corrected_capability_brier_score(confidence, mu_hat, n),
        "capability_brier_skill": cm.corrected_brier_skill_score(confidence, mu_hat, n),
        "soft_auroc": cm.soft_label_auroc(confidence, mu_hat),
    }
    assert adaptive.keys() == report.keys()
    for name, value in adaptive.items():
        assert value == pytest.approx(report[name], rel=1e-12, abs=1e-15), name
    assert adaptive_pass_at_k(cm.unanimity_rule([k]), n, s, 5)[0] == pytest.approx(
        float(np.mean(cm.pass_at_k(n, s, 5))), rel=1e-12
    )


def test_estimates_after_stopping_differ_from_s_over_n_and_intervals_hold_the_estimate():
    plan = cm.unanimity_rule([4, 8, 16])
    confidence, correctness = _run(1)
    n, s = stopped_counts(np.cumsum(correctness, axis=1)[:, [3, 7, 15]], plan)
    estimates = adaptive_estimates(plan, n, s)
    assert not np.allclose(estimates.mu_hat, s / n)  # s/n is biased after the stop; the estimate is not it
    intervals = adaptive_metric_intervals(confidence, n, s, plan, n_resamples=200, seed=3)
    values = adaptive_capability_metrics(confidence, n, s, plan)
    for name, interval in intervals.items():
        assert interval.estimate == pytest.approx(values[name], rel=1e-12)
        assert interval.low <= interval.estimate <= interval.high, name


def test_stopped_counts_stops_at_the_first_unanimous_look():
    plan = cm.unanimity_rule([2, 4, 8])
    successes = np.array([[0, 0, 3], [1, 3, 5], [2, 4, 4], [1, 2, 8]])
    n, s = stopped_counts(successes, plan)
    assert n.tolist() == [2, 8, 2, 8] and s.tolist() == [0, 5, 2, 8]
    with pytest.raises(ValueError, match="one column per look"):
        stopped_counts(successes[:, :2], plan)
    with pytest.raises(ValueError, match="cumulative"):
        stopped_counts(np.array([[2, 1, 1]]), plan)


def test_pass_at_k_past_the_first_look_is_nan_with_the_reason():
    plan = cm.unanimity_rule([4, 8])
    value, reason = adaptive_pass_at_k(plan, [4, 8], [0, 3], 5)
    assert math.isnan(value) and "first look l_1 = 4" in reason
    value, reason = adaptive_pass_at_k(plan, [4, 8], [0, 3], 2)
    assert reason == "" and 0 < value < 1


def test_leakage_free_consistency_reads_only_the_first_look():
    plan = cm.unanimity_rule([8, 16])
    rng = np.random.default_rng(4)
    labels = rng.integers(0, 3, (30, 16))
    correctness = (labels == 0).astype(int)
    first = adaptive_leakage_free_consistency(labels, correctness, plan, 3, pool_size=4, seed=1)
    labels[:, 8:] = 2
    correctness[:, 8:] = 1
    second = adaptive_leakage_free_consistency(labels, correctness, plan, 3, pool_size=4, seed=1)
    np.testing.assert_array_equal(first.confidence, second.confidence)
    np.testing.assert_array_equal(first.mu_hat, second.mu_hat)
    assert (first.n_target == 4).all()


def test_replay_mean_matches_the_full_k_mean():
    """Over random orders the estimate's mean is the full-k mean exactly; 300 orders: within 4 SE."""
    confidence, correctness = _run(2, size=60)
    result = replay_stopping(correctness, cm.unanimity_rule([4, 8, 16]), 300, confidence=confidence, seed=0)
    assert abs(result.mean_difference) <= 4 * result.mean_difference_se
    z = (result.questions["replay_mean"] - result.questions["full_mean"]) / result.questions["replay_se"]
    assert np.nanmax(np.abs(z)) < 5
    assert 0.3 < result.samples_fraction < 1
    brier = result.metrics.set_index("metric").loc["corrected_capability_brier"]
    assert abs(brier.replay_mean - brier.fixed) <= 4 * brier.replay_se + 1e-12
    with pytest.raises(ValueError, match="exceeds the run's k"):
        replay_stopping(correctness, cm.unanimity_rule([8, 32]), 10)


def test_simulation_bias_within_monte_carlo_error_of_fixed_k():
    """200 replications of 200 questions, mu ~ Beta(0.2, 0.2), plan (8, 16, 32, 64). Confidences: a documented
    stand-in for a run's column, 100 draws of Beta(5, 5) (P(True)-like, centred, narrow)."""
    pool = np.random.default_rng(9).beta(5, 5, 100)
    table = simulate_adaptive_metrics(
        "beta(0.2,0.2)", pool, cm.unanimity_rule([8, 16, 32, 64]), n_questions=200, n_replications=200, seed=1
    ).set_index("metric")
    brier = table.loc["corrected_capability_brier"]
    assert abs(brier.bias_adaptive) <= 4 * brier.bias_adaptive_se  # exactly unbiased
    for name, row in table.iterrows():
        gap = abs(row.bias_adaptive - row.bias_fixed)
        assert gap <= 4 * math.hypot(row.bias_adaptive_se, row.bias_fixed_se) + 1e-12, name
        assert row.se_ratio <= 1.25, name
        assert row.noise_sd_ratio > 1, name  # fewer samples: more noise around the true-mu metric
    assert 0.5 < table["samples_saved"].iloc[0] < 0.65
    with pytest.raises(ValueError, match="unknown mu distribution"):
        simulate_adaptive_metrics("normal", pool, cm.unanimity_rule([8, 16]))


def test_single_look_intervals_equal_the_calibration_tables():
    """Same seed and resamples: a fixed-k run's intervals are the report's, metric by metric."""
    confidence, correctness = _run(5, size=80, k=8)
    k = correctness.shape[1]
    s = correctness.sum(axis=1)
    table = pd.DataFrame(
        {"expected_accuracy": s / k, "n": k, "correctness": list(correctness), "conf": confidence}
    )
    report = calibration_table(table, ["conf"], n_resamples=300, seed=7)
    report = report.loc[report["estimator"] == "conf"].set_index("metric")
    ours = adaptive_metric_intervals(
        confidence, np.full(80, k), s, cm.unanimity_rule([k]), n_resamples=300, seed=7
    )
    for name, interval in ours.items():
        row = report.loc[name]
        np.testing.assert_allclose(
            [interval.estimate, interval.low, interval.high],
            [row.estimate, row.low, row.high],
            rtol=1e-9,
            err_msg=name,
        )
