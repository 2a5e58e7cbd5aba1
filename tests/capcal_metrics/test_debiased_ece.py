"""Debiased ECE (Kumar et al. 2019): its definition, its kernel, and by simulation its bias and the coverage
of its jackknife interval against the population ECE (the same 10 bins, against the true mu).

Simulation design (as benchmarks/ece_bias_simulation.py, smaller): c ~ Beta(2, 2); mu | c ~ Beta(10 g(c),
10 (1 - g(c))); mu_hat = Binomial(k, mu) / k; g(c) = c (calibrated), 0.5 + 0.6 (c - 0.5) (overconfident),
clip(0.5 + 1.5 (c - 0.5)) (underconfident). Tolerances: 4 Monte-Carlo standard errors; fixed seeds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

import capcal_metrics as cm

CASES = {
    "calibrated": lambda c: c,
    "overconfident": lambda c: 0.5 + 0.6 * (c - 0.5),
    "underconfident": lambda c: np.clip(0.5 + 1.5 * (c - 0.5), 0.001, 0.999),
}


def loop_debiased_ece(confidence, target, n_bins=10):
    """The module docstring's estimator, bin by bin, with E|N(m, s^2)| from scipy's folded normal."""
    bins: dict[int, list[tuple[float, float]]] = {}
    for c, t in zip(confidence, target, strict=True):
        bins.setdefault(min(int(math.floor(c * n_bins)), n_bins - 1), []).append((c, t))
    sizes = {b: len(rows) for b, rows in bins.items()}
    gaps = {b: sum(t - c for c, t in rows) / sizes[b] for b, rows in bins.items()}
    squares = {b: sum((t - c - gaps[b]) ** 2 for c, t in rows) for b, rows in bins.items()}
    success = {
        b: (sum(t for _, t in rows) + 2 * sum(c for c, _ in rows) / sizes[b]) / (sizes[b] + 2)
        for b, rows in bins.items()
    }
    reference = sum((sizes[b] - 1) * success[b] * (1 - success[b]) for b in bins)
    dispersion = sum(squares.values()) / reference if reference > 0 else 0.0
    total = 0.0
    for b in bins:
        prior = dispersion * success[b] * (1 - success[b])
        sd = math.sqrt((squares[b] + 2 * prior) / (sizes[b] + 1) / sizes[b])
        folded = stats.foldnorm.mean(abs(gaps[b]) / sd, scale=sd) if sd > 0 else abs(gaps[b])
        total += sizes[b] * (2 * abs(gaps[b]) - folded)
    return total / len(confidence)


@pytest.mark.parametrize(
    ("seed", "n_questions", "n_bins", "n_samples"),
    [(0, 200, 10, 4), (1, 37, 10, 4), (2, 300, 15, 4), (3, 50, 10, 1), (4, 120, 10, 32)],
)
def test_matches_a_loop(make_data, seed, n_questions, n_bins, n_samples):
    data = make_data(n_queries=n_questions, seed=seed, n_samples=n_samples, decimals=2)
    assert cm.debiased_expected_calibration_error(
        data.confidence, data.mu_hat, n_bins=n_bins
    ) == pytest.approx(loop_debiased_ece(data.confidence, data.mu_hat, n_bins), abs=1e-12)


def test_a_hand_computed_case():
    """Two bins, 0/1 targets, by hand: bin 0 (c = 0.1, 0.1, 0.1; t = 0, 0, 1) and bin 9 (c = 0.9; t = 1).

    gap_0 = 1/3 - 0.1 = 0.2333..., SS_0 = 2/3, p_0 = (1 + 0.2) / 5 = 0.24, rho = (2/3) / (2 * 0.24 * 0.76),
    v_0 = (2/3 + 2 rho 0.24 0.76) / 4 = 1/3, s_0^2 = v_0 / 3 = 1/9; bin 9 (one question): gap = 0.1, SS = 0,
    p_9 = (1 + 2 * 0.9) / 3, v_9 = (0 + 2 rho p_9 (1 - p_9)) / 2, s_9^2 = v_9 / 1."""
    confidence = np.array([0.1, 0.1, 0.1, 0.9])
    target = np.array([0.0, 0.0, 1.0, 1.0])
    rho = (2 / 3) / (2 * 0.24 * 0.76)
    p_9 = (1 + 2 * 0.9) / 3
    s_0, s_9 = 1 / 3, math.sqrt(rho * p_9 * (1 - p_9))
    gap_0, gap_9 = 1 / 3 - 0.1, 0.1
    expected = (
        3 * (2 * gap_0 - stats.foldnorm.mean(gap_0 / s_0, scale=s_0))
        + (2 * gap_9 - stats.foldnorm.mean(gap_9 / s_9, scale=s_9))
    ) / 4
    assert cm.debiased_expected_calibration_error(confidence, target) == pytest.approx(expected, abs=1e-12)


def test_without_bin_noise_it_is_the_binned_ece():
    """A bin whose differences target - c are all equal has no noise to remove: |gap_b| stays."""
    confidence = np.array([0.05, 0.07, 0.31, 0.33, 0.35, 0.92, 0.95, 1.0])
    target = confidence + np.array([0.1, 0.1, -0.2, -0.2, -0.2, 0.0, 0.0, 0.0])
    assert cm.debiased_expected_calibration_error(confidence, target) == pytest.approx(
        cm.expected_calibration_error(confidence, target), abs=1e-15
    )
    # with noise, a calibrated bin's estimate drops below the binned ECE (and may be negative)
    rng = np.random.default_rng(0)
    c = rng.uniform(0.4, 0.5, 50)
    noisy = np.clip(c + rng.normal(0, 0.2, 50), 0, 1)
    assert cm.debiased_expected_calibration_error(c, noisy) < cm.expected_calibration_error(c, noisy)


def test_bootstrap_kernel_equals_the_metric_on_each_resample(make_data):
    data = make_data(n_queries=120, seed=4, n_samples=4, decimals=2)
    fast = cm.bootstrap_ci(
        cm.debiased_expected_calibration_error, data.confidence, data.mu_hat, n_resamples=300
    )
    slow = cm.bootstrap_ci(
        lambda c, t: cm.debiased_expected_calibration_error(c, t),
        data.confidence,
        data.mu_hat,
        n_resamples=300,
    )
    assert fast == pytest.approx(slow, abs=1e-12)


def _draw(rng, case, n_questions, k):
    confidence = rng.beta(2.0, 2.0, n_questions)
    mean = np.clip(CASES[case](confidence), 0.001, 0.999)
    mu = rng.beta(10 * mean, 10 * (1 - mean))
    return confidence, rng.binomial(k, mu) / k


def _population_ece(case: str) -> float:
    gaps = [
        integrate.quad(
            lambda c: (float(np.clip(CASES[case](np.array(c)), 0.001, 0.999)) - c) * stats.beta.pdf(c, 2, 2),
            b / 10,
            (b + 1) / 10,
        )[0]
        for b in range(10)
    ]
    return float(np.sum(np.abs(gaps)))


def _bias(case: str, k: int, n_questions: int, repetitions: int, seed: int):
    """(binned bias, debiased bias, debiased bias's Monte-Carlo SE) against the population ECE."""
    rng = np.random.default_rng(seed)
    truth = _population_ece(case)
    binned, debiased = np.empty(repetitions), np.empty(repetitions)
    for repetition in range(repetitions):
        confidence, mu_hat = _draw(rng, case, n_questions, k)
        binned[repetition] = cm.expected_calibration_error(confidence, mu_hat)
        debiased[repetition] = cm.debiased_expected_calibration_error(confidence, mu_hat)
    standard_error = debiased.std(ddof=1) / np.sqrt(repetitions)
    return binned.mean() - truth, debiased.mean() - truth, standard_error


@pytest.mark.parametrize("k", [4, 16])
@pytest.mark.parametrize("n_questions", [30, 100])
@pytest.mark.parametrize("case", ["overconfident", "underconfident"])
def test_miscalibrated_bias_is_below_a_quarter_of_binned(case, n_questions, k):
    binned, debiased, standard_error = _bias(case, k, n_questions, repetitions=600, seed=n_questions + k)
    assert binned > 0
    assert abs(debiased) < 0.25 * binned + 4 * standard_error


@pytest.mark.parametrize("k", [4, 16])
@pytest.mark.parametrize("n_questions", [30, 100, 400])
def test_calibrated_bias_is_what_a_gaussian_bin_allows(n_questions, k):
    """At a calibrated bin with known noise the estimator keeps (2 - sqrt 2) ~ 0.59 of the plug-in bias (the
    trade-off the docs state, not the quarter the issue asked for): check it is reduced, by about that
    factor, not removed (0.58-0.62 measured on this design at N = 50 to 400)."""
    binned, debiased, standard_error = _bias(
        "calibrated", k, n_questions, repetitions=400, seed=n_questions * k
    )
    assert binned > 0
    assert 0.45 * binned - 4 * standard_error < debiased < (2 - math.sqrt(2)) * binned + 4 * standard_error


@pytest.mark.parametrize("k", [4, 16])
@pytest.mark.parametrize("case", list(CASES))
def test_jackknife_interval_covers_at_100_questions(case, k):
    """estimate +- 1.96 jackknife SE covers the population ECE >= 90% of the time at N = 100 (the observed
    share may fall 2 Monte-Carlo SE below 0.90); the binned ECE's interval does not (its bias dominates),
    which is why the report flags it."""
    rng = np.random.default_rng(k * 31 + len(case))
    truth = _population_ece(case)
    repetitions, n_questions = 500, 100
    covered = {"debiased": 0, "binned": 0}
    for _ in range(repetitions):
        confidence, mu_hat = _draw(rng, case, n_questions, k)
        for name, metric in (
            ("debiased", cm.debiased_expected_calibration_error),
            ("binned", cm.expected_calibration_error),
        ):
            interval = cm.jackknife_ci(metric, confidence, mu_hat)
            covered[name] += interval.low <= truth <= interval.high
    assert covered["debiased"] / repetitions >= 0.90 - 2 * math.sqrt(0.90 * 0.10 / repetitions)
    if case == "calibrated":
        assert covered["binned"] / repetitions < 0.5


# --- shapes of mu with point masses (issue 31): most questions never or always solved -----------------------
#
# mu = 0 (40%), 1 (20%) or U(0, 1) (40%); the calibrated confidence is the posterior mean E[mu | s] of a
# signal s ~ Binomial(10, mu), so E[mu | c] = c exactly and the population ECE is 0
# (benchmarks/ece_bias_simulation.py, "point_mass_mixture").


def _mixture_draw(rng, n_questions, k):
    component = rng.random(n_questions)
    mu = np.where(component < 0.4, 0.0, np.where(component < 0.6, 1.0, rng.random(n_questions)))
    s = rng.binomial(10, mu)
    spread = 0.4 / 11
    confidence = (spread * (s + 1) / 12 + 0.2 * (s == 10)) / (spread + 0.4 * (s == 0) + 0.2 * (s == 10))
    return confidence, rng.binomial(k, mu) / k


def test_mixture_posterior_mean_is_calibrated():
    """The design's premise: E[mu | c] = c (checked on 400,000 draws, 4 Monte-Carlo SE)."""
    rng = np.random.default_rng(7)
    component = rng.random(400_000)
    mu = np.where(component < 0.4, 0.0, np.where(component < 0.6, 1.0, rng.random(400_000)))
    s = rng.binomial(10, mu)
    spread = 0.4 / 11
    confidence = (spread * (s + 1) / 12 + 0.2 * (s == 10)) / (spread + 0.4 * (s == 0) + 0.2 * (s == 10))
    for value in np.unique(confidence):
        chosen = mu[confidence == value]
        assert abs(chosen.mean() - value) < 4 * chosen.std() / np.sqrt(chosen.size) + 1e-12


def pooled_noise_debiased_ece(confidence, target, n_bins=10):
    """The estimator before issue 31: the bin's variance shrunk towards the pooled within-bin variance."""
    bins = np.minimum(np.floor(confidence * n_bins).astype(int), n_bins - 1)
    difference = target - confidence
    terms, squares, sizes = [], [], []
    for b in np.unique(bins):
        d = difference[bins == b]
        sizes.append(d.size)
        squares.append(((d - d.mean()) ** 2).sum())
        terms.append(d.mean())
    degrees = len(confidence) - len(sizes)
    pooled = sum(squares) / degrees if degrees > 0 else 0.0
    total = 0.0
    for gap, square, size in zip(terms, squares, sizes, strict=True):
        sd = math.sqrt((square + 2 * pooled) / (size + 1) / size)
        with np.errstate(divide="ignore", invalid="ignore"):  # scipy's moments at gap = 0
            folded = stats.foldnorm.mean(abs(gap) / sd, scale=sd) if sd > 0 else abs(gap)
        total += size * (2 * abs(gap) - folded)
    return total / len(confidence)


@pytest.mark.parametrize("k", [1, 16])
def test_mixture_calibrated_bias_is_below_the_pooled_noise_estimate(k):
    """On the point-mass mixture at N = 50 the pooled variance under-estimated the middle bins' noise: the
    new prior removes more of a calibrated forecast's bias (paired over the same 300 data sets, 4 SE), and
    keeps at most 0.70 of the binned bias (measured: 0.61-0.68 over k = 1 to 32; pooled 0.72-0.74)."""
    rng = np.random.default_rng(50 + k)
    repetitions = 300
    binned, debiased, pooled = np.empty(repetitions), np.empty(repetitions), np.empty(repetitions)
    for repetition in range(repetitions):
        confidence, mu_hat = _mixture_draw(rng, 50, k)
        binned[repetition] = cm.expected_calibration_error(confidence, mu_hat)
        debiased[repetition] = cm.debiased_expected_calibration_error(confidence, mu_hat)
        pooled[repetition] = pooled_noise_debiased_ece(confidence, mu_hat)
    difference = pooled - debiased
    assert difference.mean() > 4 * difference.std(ddof=1) / np.sqrt(repetitions)
    assert debiased.mean() < 0.70 * binned.mean()


@pytest.mark.parametrize("k", [1, 4])
def test_mixture_jackknife_coverage_at_200_questions(k):
    """estimate +- 1.96 jackknife SE covers the population ECE (0) in 0.88-0.91 of the simulated data sets
    at N = 200 on the mixture (docs/methods.md); checked >= 0.88 less 2 Monte-Carlo SE over 400 data sets."""
    rng = np.random.default_rng(200 + k)
    repetitions = 400
    covered = 0
    for _ in range(repetitions):
        confidence, mu_hat = _mixture_draw(rng, 200, k)
        interval = cm.jackknife_ci(cm.debiased_expected_calibration_error, confidence, mu_hat)
        covered += interval.low <= 0.0 <= interval.high
    assert covered / repetitions >= 0.88 - 2 * math.sqrt(0.88 * 0.12 / repetitions)


def test_a_single_question_per_bin_is_the_binned_ece():
    """No bin holds two questions, so the dispersion rho has no data (its denominator is 0) and is 0: every
    s_hat_b is 0 and each bin contributes |gap_b|, i.e. the binned ECE."""
    confidence = np.array([0.05, 0.32, 0.55, 0.71, 0.95])
    target = np.array([0.4, 0.1, 0.9, 0.5, 0.2])
    expected = np.mean(np.abs(target - confidence))
    assert cm.debiased_expected_calibration_error(confidence, target, n_bins=10) == pytest.approx(
        expected, abs=1e-15
    )
    assert cm.expected_calibration_error(confidence, target, n_bins=10) == pytest.approx(expected, abs=1e-15)


def test_bootstrap_of_float32_inputs_equals_that_of_their_float64_values():
    """float32 confidences on bin edges (0.7 and 0.3 in float32): binned as their float64 values."""
    confidence = np.array([0.7, 0.3, 0.1, 0.9, 0.7, 0.5, 0.2, 0.3, 0.6, 0.8], dtype=np.float32)
    target = np.array([0.5, 0.25, 0.0, 1.0, 0.75, 0.5, 0.25, 0.5, 0.75, 1.0], dtype=np.float32)
    narrow = cm.bootstrap_ci(cm.debiased_expected_calibration_error, confidence, target, n_resamples=200)
    wide = cm.bootstrap_ci(
        cm.debiased_expected_calibration_error,
        confidence.astype(np.float64),
        target.astype(np.float64),
        n_resamples=200,
    )
    assert narrow.estimate == wide.estimate
    assert narrow.low == pytest.approx(wide.low, abs=1e-13)
    assert narrow.high == pytest.approx(wide.high, abs=1e-13)
