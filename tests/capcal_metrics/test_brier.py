"""Brier scores: definitions, the response/capability identity and the finite-sample correction.

Simulation tolerances are 4 standard errors estimated from the simulation itself, so a correct estimator
fails with probability below 1e-4 per check (and never, given the fixed seeds).
"""

from __future__ import annotations

import numpy as np
import pytest

import capcal_metrics as cm


def loop_brier(confidence, target):
    return sum((c - t) ** 2 for c, t in zip(confidence, target, strict=True)) / len(confidence)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_capability_and_response_brier_match_loop(make_data, seed):
    data = make_data(n_queries=300, seed=seed)
    assert cm.brier_score(data.confidence, data.mu_hat) == pytest.approx(
        loop_brier(data.confidence, data.mu_hat), abs=1e-14
    )
    assert cm.brier_score(data.confidence, data.z) == pytest.approx(
        loop_brier(data.confidence, data.z), abs=1e-14
    )


def test_expected_response_brier_is_capability_brier_plus_bernoulli_variance(make_data):
    """E_z[(c - z)^2] = (c - mu)^2 + mu (1 - mu), checked by drawing z ~ Bern(mu) many times."""
    data = make_data(n_queries=200, seed=3)
    rng = np.random.default_rng(10)
    n_replications = 4000
    response_brier = np.array(
        [
            cm.brier_score(data.confidence, (rng.random(200) < data.mu).astype(float))
            for _ in range(n_replications)
        ]
    )
    predicted = cm.brier_score(data.confidence, data.mu) + np.mean(data.mu * (1 - data.mu))
    standard_error = response_brier.std(ddof=1) / np.sqrt(n_replications)
    assert abs(response_brier.mean() - predicted) < 4 * standard_error


def test_corrected_capability_brier_is_unbiased_and_plain_one_is_biased_up():
    """mu_hat ~ Binomial(n, mu) / n with n varying per query (2 to 20).

    The corrected score averages to mean (c - mu)^2; the plain one exceeds it by mean mu (1 - mu) / n.
    """
    rng = np.random.default_rng(11)
    n_queries, n_replications = 300, 3000
    mu = rng.beta(0.6, 0.6, n_queries)
    confidence = np.clip(mu + rng.normal(0, 0.15, n_queries), 0, 1)
    n = rng.choice([2, 3, 5, 10, 20], n_queries)
    mu_hat = rng.binomial(n, mu, size=(n_replications, n_queries)) / n
    corrected = np.array([cm.corrected_capability_brier_score(confidence, row, n) for row in mu_hat])
    plain = np.array([cm.brier_score(confidence, row) for row in mu_hat])
    truth = np.mean((confidence - mu) ** 2)
    noise = np.mean(mu * (1 - mu) / n)

    corrected_se = corrected.std(ddof=1) / np.sqrt(n_replications)
    assert abs(corrected.mean() - truth) < 4 * corrected_se
    plain_se = plain.std(ddof=1) / np.sqrt(n_replications)
    assert abs(plain.mean() - truth - noise) < 4 * plain_se
    assert plain.mean() - truth > 10 * plain_se  # the bias is real and clearly detected


def test_corrected_brier_formula_and_scalar_n(make_data):
    data = make_data(n_queries=50, seed=4)
    expected = np.mean((data.confidence - data.mu_hat) ** 2 - data.mu_hat * (1 - data.mu_hat) / 9)
    assert cm.corrected_capability_brier_score(data.confidence, data.mu_hat, 10) == pytest.approx(expected)
    assert cm.corrected_capability_brier_score(data.confidence, data.mu_hat, data.n_samples) == pytest.approx(
        expected
    )


@pytest.mark.parametrize(
    ("n_samples", "message"),
    [
        (1, "n_samples must be >= 2.*found n = 1"),
        ([10, 1, 10], "found n = 1"),
        ([10, 10], "one entry per query"),
        (2.5, "whole numbers"),
        ([[10, 10, 10]], "one entry per query"),
    ],
)
def test_corrected_brier_rejects_bad_sample_counts(n_samples, message):
    with pytest.raises(ValueError, match=message):
        cm.corrected_capability_brier_score([0.2, 0.5, 0.9], [0.0, 0.5, 1.0], n_samples)


def test_random_baseline_brier_closed_form_matches_simulation(make_data):
    data = make_data(n_queries=100, seed=5)
    rng = np.random.default_rng(6)
    draws = np.array([cm.brier_score(rng.random(100), data.mu_hat) for _ in range(4000)])
    baseline = cm.random_baseline_brier_score(data.mu_hat)
    assert abs(draws.mean() - baseline) < 4 * draws.std(ddof=1) / np.sqrt(4000)
    assert cm.random_baseline_brier_score([0.0, 1.0]) == pytest.approx(1 / 3)
    assert cm.random_baseline_brier_score([0.5]) == pytest.approx(1 / 12)


def test_brier_from_moments_needs_one_mu_square_hat_per_question():
    # a single mu_square_hat would broadcast over every question; it is refused by name
    message = r"^mu_square_hat must have one entry per question \(3\), got 1$"
    with pytest.raises(ValueError, match=message):
        cm.capability_brier_from_moments([0.2, 0.5, 0.9], [0.25, 0.5, 1.0], [0.1])


def test_brier_from_moments_kernel_computes_in_float64_whatever_the_input_dtype():
    """The jackknife reaches the metric's kernel with the caller's arrays; float32 inputs give the values of
    the metric itself (float64 after validation), row left out by row left out."""
    from capcal_metrics.jackknife import leave_one_out_values

    rng = np.random.default_rng(17)
    mu_hat = rng.random(40)
    arrays = [rng.random(40), mu_hat, mu_hat**2 * rng.uniform(0.8, 1.0, 40)]
    for position in range(3):
        inputs = [a.astype(np.float32) if i == position else a for i, a in enumerate(arrays)]
        got = leave_one_out_values(cm.capability_brier_from_moments, *inputs)
        loop = [
            cm.capability_brier_from_moments(*(np.delete(np.asarray(a, np.float64), i) for a in inputs))
            for i in range(40)
        ]
        np.testing.assert_allclose(got, loop, rtol=1e-13, atol=0)


def test_corrected_brier_kernel_computes_the_noise_in_float64():
    """float32 mu_hat through the jackknife's kernel: the noise mu_hat (1 - mu_hat) / (n - 1) is taken in
    float64, as the metric itself does after validation, row left out by row left out."""
    from capcal_metrics.jackknife import leave_one_out_values

    rng = np.random.default_rng(29)
    confidence, mu_hat = rng.random(40), rng.random(40).astype(np.float32)
    n_samples = rng.integers(2, 9, 40)
    got = leave_one_out_values(cm.corrected_capability_brier_score, confidence, mu_hat, n_samples)
    loop = [
        cm.corrected_capability_brier_score(
            np.delete(confidence, i), np.delete(mu_hat, i).astype(np.float64), np.delete(n_samples, i)
        )
        for i in range(40)
    ]
    np.testing.assert_allclose(got, loop, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize(
    ("n_samples", "message"),
    [
        ([4, -1], r"^n_samples must be >= 0; found -1$"),
        (
            [4, 1],
            r"^n_samples must be >= 2 for every query: the variance correction "
            r"mu_hat\(1 - mu_hat\)/\(n - 1\) needs at least two samples; found n = 1$",
        ),
    ],
)
def test_corrected_brier_names_n_samples_in_full(n_samples, message):
    with pytest.raises(ValueError, match=message):
        cm.corrected_capability_brier_score([0.2, 0.6], [0.25, 0.5], n_samples)
