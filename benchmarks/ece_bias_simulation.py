"""Bias and interval coverage of binned vs debiased capability ECE; Brier skill of reference forecasts.

Simulation (seeded; the tables of docs/methods.md, "The bias of binned ECE" and "Brier skill score"). Three
shapes of the true capability mu, three cases of the confidence c, k samples per question and N questions;
mu_hat = Binomial(k, mu) / k:

* ``beta22`` (smooth; the design of the first table): c ~ Beta(2, 2); mu | c ~ Beta(10 g(c), 10 (1 - g(c))),
  so E[mu | c] = g(c); calibrated g(c) = c; overconfident g(c) = 0.5 + 0.6 (c - 0.5) (confidence too
  extreme); underconfident g(c) = clip(0.5 + 1.5 (c - 0.5), 0.001, 0.999) (confidence too timid).
* ``u_shaped``: mu ~ Beta(0.3, 0.3) (most questions nearly always or nearly never solved).
* ``point_mass_mixture``: mu = 0 with probability 0.4, mu = 1 with probability 0.2, else mu ~ U(0, 1);
  ``mixture_40_40_20``: mu = 0 and mu = 1 with probability 0.4 each, else mu ~ U(0, 1).
* ``beta025``, ``beta05``, ``beta05_3``: mu ~ Beta(0.25, 0.25), Beta(0.5, 0.5), Beta(0.5, 3) (issue 48's
  shapes with ``mixture_40_40_20``, ``CLAIM_SHAPES``).

  For these, mu is drawn first and the calibrated confidence is the posterior mean m = E[mu | s] of a
  signal s ~ Binomial(10, mu) under the shape as prior (exact: (s + 0.3) / 10.6 for Beta(0.3, 0.3), the
  mixture's posterior weights for the point-mass mixture), so "calibrated" means E[mu | c] = c exactly while
  mu keeps the stated distribution (point masses included); c takes 11 values, like a stated confidence.
  Miscalibrated cases distort it with the inverse of the same g: overconfident c = clip(0.5 + (m - 0.5) / 0.6,
  0, 1), underconfident c = 0.5 + (m - 0.5) / 1.5, so E[mu | c] = g(c) wherever the clip does not bind (at
  c = 0 or 1 of the overconfident case E[mu | c] is the mean of the clipped m). ``--cases ... oracle`` adds
  the oracle c = mu (population ECE 0, skill 1; its population AUROC on a quantile grid).
* population ECE: 10 equal-width bins, sum_b |sum_{c in b} P(c) (E[mu | c] - c)| (the ECE against the true mu
  with infinitely many questions); by quadrature for ``beta22``, an exact sum over the 11 values of s
  otherwise.
* per cell (shape, case, k, N): ``--repetitions`` data sets; binned ECE (``expected_calibration_error``) and
  debiased ECE (``debiased_expected_calibration_error``); bias = mean estimate - population, with its
  Monte-Carlo standard error; coverage of the population value by estimate +- 1.96 jackknife SE (the
  leaderboard columns' standard error, ``capcal_metrics.jackknife_items``) and, with ``--resamples`` > 0, by
  the 95% percentile bootstrap interval (``bootstrap_ci``). Two comparison estimators defined here only (not
  in capcal_metrics), with their jackknife SE: ``pooled``, the debiased ECE with the bin noise of capcal
  before issue 31 (within-bin variance shrunk to the pooled variance by 2 pseudo-observations), and
  ``pretest``, the debiased ECE with a bin's term set to 0 when |gap_b| <= 1.5 s_hat_b (a pre-test estimator).
  k = 1 (mu_hat 0/1) is included: both ECE estimators need no n >= 2.
* skill and AUROC intervals (``--interval-repetitions`` > 0): per (shape, case, k, N) the coverage of
  estimate +- 1.96 jackknife SE for ``corrected_brier_skill_score`` (k >= 2; its leave-one-out values in
  closed form, equal to ``jackknife_items``'s to 1e-13) and ``soft_label_auroc`` against their population
  values 1 - E(c - mu)^2 / Var(mu) and the mu_1 (1 - mu_2)-weighted AUROC over independent question pairs.
* Brier skill (``--skill-repetitions`` > 0, ``beta22`` only): per (k, N) the mean and Monte-Carlo SE over
  repetitions of ``brier_skill_score`` and ``corrected_brier_skill_score`` for the constant at the base rate
  (the in-sample mean mu_hat), the oracle c = mu and c ~ U(0, 1), on the overconfident case's mu; skipped at
  k = 1, where the corrected forms (they need n >= 2 samples per question) are undefined.

Run (the tables of docs/methods.md):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/ece_bias_simulation.py \
        --shapes u_shaped point_mass_mixture beta22 --k 1 4 16 32 --n 50 100 200 400 \
        --repetitions 400 --resamples 0 --skill-repetitions 0 \
        --output benchmarks/results/ece_bias_simulation_shapes.json

Issue 48's claims (the table "The four shapes of issue 48" in docs/methods.md; ``--summary`` prints its
figures from the stored files):

    S="--shapes beta025 beta05 beta05_3 point_mass_mixture"  # then again with --shapes mixture_40_40_20
    C="--k 4 16 --resamples 0 --skill-repetitions 0 --cases calibrated overconfident underconfident oracle"
    python benchmarks/ece_bias_simulation.py $S $C --n 50 200 1000 --repetitions 1000 \
        --repetitions-large 300 --interval-repetitions 0 --no-comparisons \
        --output benchmarks/results/ece_bias_simulation_claims.json
    python benchmarks/ece_bias_simulation.py $S $C --n 50 200 --repetitions 0 --interval-repetitions 1000 \
        --output benchmarks/results/ece_bias_simulation_claims_intervals.json
    python benchmarks/ece_bias_simulation.py $S $C --n 1000 --repetitions 0 --interval-repetitions 200 \
        --output benchmarks/results/ece_bias_simulation_claims_intervals_n1000.json

(the mixture_40_40_20 files end in ``_mixture_40_40_20``.) (``--repetitions 100 --resamples 200``:
..._shapes_bootstrap.json; ``--repetitions 0 --interval-repetitions
300``: ..._shapes_intervals.json; the Brier skill table: ``--k 4 16 --repetitions 400 --repetitions-large 60
--resamples 500 --skill-repetitions 4000``, ..._k4.json and ..._k16.json, whose ECE rows predate issue 31.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import integrate, stats
from scipy.special import ndtr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capcal_metrics import (  # noqa: E402
    bootstrap_ci,
    brier_skill_score,
    corrected_brier_skill_score,
    debiased_expected_calibration_error,
    expected_calibration_error,
    jackknife_items,
    soft_label_auroc,
)

CONCENTRATION = 10.0
N_BINS = 10
SIGNAL_TRIALS = 10
CASES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "calibrated": lambda c: c,
    "overconfident": lambda c: 0.5 + 0.6 * (c - 0.5),
    "underconfident": lambda c: np.clip(0.5 + 1.5 * (c - 0.5), 0.001, 0.999),
}
# c as a function of the calibrated forecast m (the inverse of the case's g; shapes other than beta22)
DISTORTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "calibrated": lambda m: m,
    "overconfident": lambda m: np.clip(0.5 + (m - 0.5) / 0.6, 0.0, 1.0),
    "underconfident": lambda m: 0.5 + (m - 0.5) / 1.5,
}
# the oracle c = mu (shapes other than beta22): E[mu | c] = c, population ECE 0 and skill 1
ORACLE = "oracle"
ALL_CASES = (*CASES, ORACLE)
# Beta(a, b) shapes of mu (drawn first; the calibrated c is the posterior mean of a signal, as u_shaped)
BETA_SHAPES: dict[str, tuple[float, float]] = {
    "u_shaped": (0.3, 0.3),
    "beta025": (0.25, 0.25),
    "beta05": (0.5, 0.5),
    "beta05_3": (0.5, 3.0),
}
# point-mass mixtures: (P(mu = 0), P(mu = 1)), mu ~ U(0, 1) otherwise
MIXTURE_SHAPES: dict[str, tuple[float, float]] = {
    "point_mass_mixture": (0.4, 0.2),
    "mixture_40_40_20": (0.4, 0.4),
}
# new shapes last: a shape's index enters its cells' seeds
SHAPES = ("beta22", "u_shaped", "point_mass_mixture", "beta025", "beta05", "beta05_3", "mixture_40_40_20")
# the shapes of issue 48's claims table (with N 50/200/1000, k 4/16, the four cases); its "40/40/20
# point-mass mixture" is mixture_40_40_20 (its figures are reproduced there, not on point_mass_mixture)
CLAIM_SHAPES = ("beta025", "beta05", "beta05_3", "mixture_40_40_20")
ESTIMATORS = {"binned": expected_calibration_error, "debiased": debiased_expected_calibration_error}
PRETEST_THRESHOLD = 1.5


def signal_table(shape: str) -> tuple[np.ndarray, np.ndarray]:
    """(P(s), E[mu | s]) for s = 0..SIGNAL_TRIALS, s ~ Binomial(SIGNAL_TRIALS, mu), mu from ``shape``."""
    s = np.arange(SIGNAL_TRIALS + 1)
    if shape in BETA_SHAPES:
        a, b = BETA_SHAPES[shape]
        return stats.betabinom.pmf(s, SIGNAL_TRIALS, a, b), (s + a) / (SIGNAL_TRIALS + a + b)
    at_zero, at_one = MIXTURE_SHAPES[shape]
    # P(s | mu ~ U(0, 1)) = 1 / (M + 1), E[mu | s] = (s + 1) / (M + 2)
    spread = (1.0 - at_zero - at_one) / (SIGNAL_TRIALS + 1)
    probability = spread + at_zero * (s == 0) + at_one * (s == SIGNAL_TRIALS)
    mean = (spread * (s + 1) / (SIGNAL_TRIALS + 2) + at_one * (s == SIGNAL_TRIALS)) / probability
    return probability, mean


def draw_mu(rng: np.random.Generator, shape: str, n_questions: int) -> np.ndarray:
    """mu of ``n_questions`` questions: Beta(a, b) (``BETA_SHAPES``), or 0 (40%) / 1 (20%) / U(0, 1)."""
    if shape in BETA_SHAPES:
        return rng.beta(*BETA_SHAPES[shape], n_questions)
    at_zero, at_one = MIXTURE_SHAPES[shape]
    component = rng.random(n_questions)
    uniform = rng.random(n_questions)
    return np.where(component < at_zero, 0.0, np.where(component < at_zero + at_one, 1.0, uniform))


def draw(rng: np.random.Generator, case: str, n_questions: int, k: int, shape: str = "beta22") -> tuple:
    """(c, mu, mu_hat) of one simulated task."""
    if shape == "beta22":
        confidence = rng.beta(2.0, 2.0, n_questions)
        mean = np.clip(CASES[case](confidence), 0.001, 0.999)
        mu = rng.beta(CONCENTRATION * mean, CONCENTRATION * (1.0 - mean))
    else:
        mu = draw_mu(rng, shape, n_questions)
        calibrated = signal_table(shape)[1][rng.binomial(SIGNAL_TRIALS, mu)]
        confidence = mu.copy() if case == ORACLE else DISTORTIONS[case](calibrated)
    return confidence, mu, rng.binomial(k, mu) / k


def population_ece(case: str, shape: str = "beta22") -> float:
    """sum_b |E[(E[mu | c] - c) 1(c in b)]|: by quadrature for c ~ Beta(2, 2), else a sum over the signal."""
    if case == ORACLE:
        return 0.0
    if shape != "beta22":
        probability, calibrated = signal_table(shape)
        confidence = DISTORTIONS[case](calibrated)
        bins = np.minimum((confidence * N_BINS).astype(int), N_BINS - 1)
        return float(np.abs(np.bincount(bins, probability * (calibrated - confidence), N_BINS)).sum())
    total = 0.0
    for b in range(N_BINS):
        gap, _ = integrate.quad(
            lambda c: (float(np.clip(CASES[case](np.array(c)), 0.001, 0.999)) - c) * stats.beta.pdf(c, 2, 2),
            b / N_BINS,
            (b + 1) / N_BINS,
        )
        total += abs(gap)
    return total


def comparison_estimates(confidence: np.ndarray, target: np.ndarray) -> dict[str, np.ndarray]:
    """The ``pooled`` and ``pretest`` estimators (module docstring) on the full data (entry 0) and every
    leave-one-out data set (entries 1..N), from per-bin weighted sums."""
    n_questions = confidence.size
    weights = np.vstack([np.ones(n_questions), 1.0 - np.eye(n_questions)])
    member = np.zeros((n_questions, N_BINS))
    member[np.arange(n_questions), np.minimum((confidence * N_BINS).astype(int), N_BINS - 1)] = 1.0
    difference = target - confidence
    count = weights @ member
    occupied = count > 0
    safe = np.where(occupied, count, 1.0)
    gap = weights @ (member * difference[:, None]) / safe
    squares = np.maximum(weights @ (member * difference[:, None] ** 2) - count * gap**2, 0.0)
    total = count.sum(axis=1)

    def expected_absolute(mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
        scale = np.where(sd > 0, sd, 1.0)
        folded = scale * np.sqrt(2 / np.pi) * np.exp(-0.5 * (mean / scale) ** 2) + mean * (
            1 - 2 * ndtr(-mean / scale)
        )
        return np.where(sd > 0, folded, np.abs(mean))

    degrees = total - occupied.sum(axis=1)
    pooled = np.where(degrees > 0, squares.sum(axis=1) / np.maximum(degrees, 1.0), 0.0)[:, None]
    sd_pooled = np.sqrt(np.where(occupied, (squares + 2 * pooled) / np.maximum(count + 1, 1) / safe, 0))
    mean_confidence = weights @ (member * confidence[:, None]) / safe
    probability = (weights @ (member * target[:, None]) + 2 * mean_confidence) / (count + 2)
    bernoulli = np.where(occupied, probability * (1 - probability), 0.0)
    reference = (np.maximum(count - 1, 0) * bernoulli).sum(axis=1)
    dispersion = np.where(reference > 0, squares.sum(axis=1) / np.where(reference > 0, reference, 1), 0)
    sd = np.sqrt(np.where(occupied, (squares + 2 * dispersion[:, None] * bernoulli) / (count + 1) / safe, 0))
    corrected = {
        "pooled": 2 * np.abs(gap) - expected_absolute(gap, sd_pooled),
        "pretest": np.where(
            np.abs(gap) > PRETEST_THRESHOLD * sd, 2 * np.abs(gap) - expected_absolute(gap, sd), 0.0
        ),
    }
    return {name: np.where(occupied, count * term, 0).sum(axis=1) / total for name, term in corrected.items()}


def ece_cell(
    case: str,
    k: int,
    n_questions: int,
    repetitions: int,
    resamples: int,
    seed: int,
    shape: str = "beta22",
    comparisons: bool = True,
) -> dict:
    """Bias, SD and coverage of the ECE estimators in one (shape, case, k, N) cell. Without ``comparisons``
    only the binned and debiased ECE, and the binned one without its jackknife (its coverage is then NaN)."""
    rng = np.random.default_rng(seed)
    truth = population_ece(case, shape)
    names = [*ESTIMATORS, "pooled", "pretest"] if comparisons else list(ESTIMATORS)
    estimates = {name: np.empty(repetitions) for name in names}
    bootstrap_cover = {name: np.empty(repetitions, dtype=bool) for name in ESTIMATORS}
    jackknife_cover = {name: np.empty(repetitions, dtype=bool) for name in names}
    for repetition in range(repetitions):
        confidence, _, mu_hat = draw(rng, case, n_questions, k, shape)
        if comparisons:
            items = {name: jackknife_items(metric, confidence, mu_hat) for name, metric in ESTIMATORS.items()}
            for name, values in comparison_estimates(confidence, mu_hat).items():
                leave_one_out = values[1:]
                items[name] = values[0] - (n_questions - 1) * (leave_one_out - leave_one_out.mean())
        else:
            items = {"debiased": jackknife_items(debiased_expected_calibration_error, confidence, mu_hat)}
            estimates["binned"][repetition] = expected_calibration_error(confidence, mu_hat)
            jackknife_cover["binned"][repetition] = False
        for name in items:
            estimate = float(items[name].mean())
            half_width = 1.96 * items[name].std(ddof=1) / np.sqrt(n_questions)
            estimates[name][repetition] = estimate
            jackknife_cover[name][repetition] = abs(estimate - truth) <= half_width
        for name, metric in ESTIMATORS.items():
            if resamples > 0:
                interval = bootstrap_ci(metric, confidence, mu_hat, n_resamples=resamples, seed=repetition)
                bootstrap_cover[name][repetition] = interval.low <= truth <= interval.high
    row: dict[str, float | int | str] = {
        "shape": shape,
        "case": case,
        "k": k,
        "N": n_questions,
        "repetitions": repetitions,
        "population_ece": truth,
    }
    for name in names:
        row[f"{name}_bias"] = float(estimates[name].mean() - truth)
        row[f"{name}_bias_se"] = float(estimates[name].std(ddof=1) / np.sqrt(repetitions))
        row[f"{name}_sd"] = float(estimates[name].std(ddof=1))
        row[f"{name}_jackknife_coverage"] = (
            float(jackknife_cover[name].mean()) if comparisons or name != "binned" else float("nan")
        )
        row[f"{name}_bias_to_binned"] = float(
            (estimates[name].mean() - truth) / (estimates["binned"].mean() - truth)
        )
        if name in ESTIMATORS and resamples > 0:
            row[f"{name}_bootstrap_coverage"] = float(bootstrap_cover[name].mean())
    return row


def population_skill_and_auroc(case: str, shape: str) -> tuple[float, float]:
    """(1 - E(c - mu)^2 / Var(mu), P-weighted AUROC of c against mu over independent question pairs): the
    population values of ``corrected_brier_skill_score`` and ``soft_label_auroc`` (exact sums over the signal;
    a 4,000-point midpoint grid for ``beta22``)."""
    if case == ORACLE:
        return 1.0, oracle_population_auroc(shape)
    if shape == "beta22":
        confidence = (np.arange(4000) + 0.5) / 4000
        weight = stats.beta.pdf(confidence, 2, 2) / 4000
        mean = np.clip(CASES[case](confidence), 0.001, 0.999)
        mu_second = float(weight @ (mean * (CONCENTRATION * mean + 1) / (CONCENTRATION + 1)))  # E[mu^2]
    else:
        weight, mean = signal_table(shape)
        confidence = DISTORTIONS[case](mean)
        # E[mu^2]: a (a + 1) / ((a + b)(a + b + 1)) for Beta(a, b), or 0.2 (the mass at 1) + 0.4 E[U^2]
        if shape in BETA_SHAPES:
            a, b = BETA_SHAPES[shape]
            mu_second = a * (a + 1) / ((a + b) * (a + b + 1))
        else:
            at_zero, at_one = MIXTURE_SHAPES[shape]
            mu_second = at_one + (1.0 - at_zero - at_one) / 3
    mu_mean = float(weight @ mean)
    brier = float(weight @ (confidence**2 - 2 * confidence * mean)) + mu_second
    skill = 1.0 - brier / (mu_second - mu_mean**2)
    above = (confidence[:, None] > confidence[None, :]) + 0.5 * (confidence[:, None] == confidence[None, :])
    auroc = float((weight * mean) @ above @ (weight * (1.0 - mean))) / (mu_mean * (1.0 - mu_mean))
    return skill, auroc


def oracle_population_auroc(shape: str, grid: int = 4000) -> float:
    """The mu_1 (1 - mu_2)-weighted AUROC of c = mu over independent question pairs,
    E[mu_1 (1 - mu_2) 1(mu_1 > mu_2)] / (E mu E(1 - mu)), on ``grid`` quantile midpoints of the continuous
    part (discretisation error O(1/grid)); the mixture's point masses at 0 and 1 added exactly (ties there
    carry weight mu_1 (1 - mu_2) = 0)."""
    midpoints = (np.arange(grid) + 0.5) / grid
    if shape in BETA_SHAPES:
        mu, weight = stats.beta.ppf(midpoints, *BETA_SHAPES[shape]), np.full(grid, 1.0 / grid)
    else:
        at_zero, at_one = MIXTURE_SHAPES[shape]
        mu = np.concatenate([[0.0], midpoints, [1.0]])
        weight = np.concatenate([[at_zero], np.full(grid, (1.0 - at_zero - at_one) / grid), [at_one]])
    mean = float(weight @ mu)
    negative = weight * (1.0 - mu)  # mu is increasing: the pairs below point i are the points before it
    below = np.concatenate([[0.0], np.cumsum(negative)[:-1]])
    return float((weight * mu) @ (below + 0.5 * negative)) / (mean * (1.0 - mean))


def corrected_skill_items(confidence: np.ndarray, mu_hat: np.ndarray, k: int) -> np.ndarray | None:
    """Jackknife influence values of ``corrected_brier_skill_score`` (n_i = k) from closed-form
    leave-one-out means (the library's jackknife evaluates the metric N times); None where a value is
    undefined (S_hat <= 0)."""
    n_questions = confidence.size
    noise = mu_hat * (1.0 - mu_hat) / (k - 1)
    brier = (confidence - mu_hat) ** 2 - noise
    size = n_questions - 1
    loo_brier = (brier.sum() - brier) / size
    loo_mean = (mu_hat.sum() - mu_hat) / size
    loo_spread = ((mu_hat**2).sum() - mu_hat**2) / size - loo_mean**2
    loo_variance = loo_spread - (1.0 - 1.0 / size) * (noise.sum() - noise) / size
    full = corrected_brier_skill_score(confidence, mu_hat, k)
    if not np.isfinite(full) or np.any(loo_variance <= 1e-12):
        return None
    leave_one_out = 1.0 - loo_brier / loo_variance
    return full - size * (leave_one_out - leave_one_out.mean())


def interval_cell(case: str, k: int, n_questions: int, repetitions: int, seed: int, shape: str) -> dict:
    """Bias and coverage of estimate +- 1.96 jackknife SE for the corrected Brier skill (k >= 2) and the
    soft-label AUROC against their population values; the share of data sets where the interval is defined."""
    rng = np.random.default_rng(seed)
    skill_truth, auroc_truth = population_skill_and_auroc(case, shape)
    found: dict[str, list[tuple[float, bool]]] = {"corrected_skill": [], "soft_auroc": []}
    for _ in range(repetitions):
        confidence, _, mu_hat = draw(rng, case, n_questions, k, shape)
        items = {"soft_auroc": jackknife_items(soft_label_auroc, confidence, mu_hat)}
        if k >= 2:
            items["corrected_skill"] = corrected_skill_items(confidence, mu_hat, k)
        for name, truth in (("corrected_skill", skill_truth), ("soft_auroc", auroc_truth)):
            if items.get(name) is not None:
                estimate = float(items[name].mean())
                half_width = 1.96 * items[name].std(ddof=1) / np.sqrt(n_questions)
                found[name].append((estimate, abs(estimate - truth) <= half_width))
    row: dict[str, float | int | str] = {"shape": shape, "case": case, "k": k, "N": n_questions}
    for name, truth in (("corrected_skill", skill_truth), ("soft_auroc", auroc_truth)):
        row[f"{name}_population"] = truth
        row[f"{name}_defined"] = len(found[name]) / repetitions
        if found[name]:
            estimates = np.array([estimate for estimate, _ in found[name]])
            row[f"{name}_median_bias"] = float(np.median(estimates) - truth)
            row[f"{name}_jackknife_coverage"] = float(np.mean([cover for _, cover in found[name]]))
    return row


def skill_cell(k: int, n_questions: int, repetitions: int, seed: int) -> dict:
    """Mean (and MC SE) of both Brier skill scores of the constant at the base rate, the oracle and random."""
    rng = np.random.default_rng(seed)
    values: dict[str, list[float]] = {}
    for _ in range(repetitions):
        _, mu, mu_hat = draw(rng, "overconfident", n_questions, k)
        forecasts = {
            "base_rate": np.full(n_questions, mu_hat.mean()),
            "oracle": mu,
            "uniform_random": rng.random(n_questions),
        }
        for name, confidence in forecasts.items():
            values.setdefault(f"{name}_bss", []).append(brier_skill_score(confidence, mu_hat))
            values.setdefault(f"{name}_corrected_bss", []).append(
                corrected_brier_skill_score(confidence, mu_hat, k)
            )
    row: dict[str, float | int] = {"k": k, "N": n_questions}
    for name, draws in values.items():
        array = np.asarray(draws)
        row[name] = float(np.nanmean(array))
        row[f"{name}_se"] = float(np.nanstd(array, ddof=1) / np.sqrt(np.isfinite(array).sum()))
    return row


MISCALIBRATED = ("overconfident", "underconfident")


def claim_figures(rows: list[dict], value: str, cases: tuple[str, ...], shapes=CLAIM_SHAPES) -> dict:
    """Per N: (lowest, highest) of ``value`` over the rows of ``cases`` and ``shapes`` (all k), and the
    (shape, case, k) of the lowest and of the highest: the figures docs/methods.md quotes for issue 48's
    claims (``--summary``)."""
    figures: dict[int, dict] = {}
    for n_questions in sorted({row["N"] for row in rows}):
        chosen = [
            row
            for row in rows
            if row["N"] == n_questions and row["case"] in cases and row["shape"] in shapes and value in row
        ]
        if not chosen:
            continue
        low = min(chosen, key=lambda row: row[value])
        high = max(chosen, key=lambda row: row[value])
        figures[n_questions] = {
            "low": low[value],
            "high": high[value],
            "lowest_at": (low["shape"], low["case"], low["k"]),
            "highest_at": (high["shape"], high["case"], high["k"]),
        }
    return figures


def print_summary(paths: list[Path]) -> None:
    """The claims' figures (``claim_figures``) from stored result files."""
    ece_rows, interval_rows = [], []
    for path in paths:
        stored = json.loads(path.read_text())
        ece_rows += stored["ece"]
        interval_rows += stored["intervals"]
    claims = [
        ("debiased ECE coverage, miscalibrated", ece_rows, "debiased_jackknife_coverage", MISCALIBRATED),
        (
            "debiased ECE coverage, calibrated/oracle",
            ece_rows,
            "debiased_jackknife_coverage",
            ("calibrated", ORACLE),
        ),
        ("debiased/binned bias, miscalibrated", ece_rows, "debiased_bias_to_binned", MISCALIBRATED),
        (
            "debiased/binned bias, calibrated/oracle",
            ece_rows,
            "debiased_bias_to_binned",
            ("calibrated", ORACLE),
        ),
        ("skill coverage, all forecasts", interval_rows, "corrected_skill_jackknife_coverage", ALL_CASES),
        ("skill defined, all forecasts", interval_rows, "corrected_skill_defined", ALL_CASES),
        ("AUROC coverage, all forecasts", interval_rows, "soft_auroc_jackknife_coverage", ALL_CASES),
    ]
    for title, rows, value, cases in claims:
        for n_questions, figure in claim_figures(rows, value, cases).items():
            print(
                f"{title:42s} N={n_questions:4d} {figure['low']:.3f} {figure['lowest_at']} - "
                f"{figure['high']:.3f} {figure['highest_at']}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=400, help="data sets per cell (N <= 400)")
    parser.add_argument("--repetitions-large", type=int, default=200, help="data sets per cell at N > 400")
    parser.add_argument("--resamples", type=int, default=500, help="bootstrap resamples (0: no bootstrap)")
    parser.add_argument("--skill-repetitions", type=int, default=4000, help="data sets per Brier-skill cell")
    parser.add_argument(
        "--interval-repetitions", type=int, default=0, help="data sets per skill/AUROC coverage cell"
    )
    parser.add_argument("--k", type=int, nargs="+", default=[4, 16], help="samples per question")
    parser.add_argument("--n", type=int, nargs="+", default=[30, 100, 400, 2000], help="questions per task")
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=["beta22"], help="shapes of mu")
    parser.add_argument(
        "--cases", nargs="+", choices=ALL_CASES, default=list(CASES), help="forecasts (oracle: not beta22)"
    )
    parser.add_argument("--output", type=Path, help="write the tables as JSON here")
    parser.add_argument(
        "--no-comparisons",
        action="store_true",
        help="only the binned and debiased ECE (no pooled/pretest estimator, no binned jackknife)",
    )
    parser.add_argument(
        "--summary", type=Path, nargs="+", help="print the claims' figures of these result files and exit"
    )
    args = parser.parse_args()
    if args.summary:
        print_summary(args.summary)
        return
    started = time.time()
    ece_rows, skill_rows, interval_rows = [], [], []
    for shape in args.shapes:
        shape_index = SHAPES.index(shape)
        for k in args.k:
            for n_questions in args.n:
                if shape == "beta22" and args.skill_repetitions > 0 and k >= 2:
                    skill_rows.append(
                        skill_cell(k, n_questions, args.skill_repetitions, seed=k * 10_000 + n_questions)
                    )
                for case_index, case in enumerate(ALL_CASES):
                    if case not in args.cases or (case == ORACLE and shape == "beta22"):
                        continue
                    if args.interval_repetitions > 0:
                        interval_rows.append(
                            interval_cell(
                                case,
                                k,
                                n_questions,
                                args.interval_repetitions,
                                seed=shape_index * 100_000 + case_index * 1000 + k * 7 + n_questions + 1,
                                shape=shape,
                            )
                        )
                        print(interval_rows[-1], flush=True)
                    if args.repetitions <= 0:
                        continue
                    repetitions = args.repetitions if n_questions <= 400 else args.repetitions_large
                    row = ece_cell(
                        case,
                        k,
                        n_questions,
                        repetitions,
                        args.resamples,
                        seed=shape_index * 100_000 + case_index * 1000 + k * 7 + n_questions,
                        shape=shape,
                        comparisons=not args.no_comparisons,
                    )
                    ece_rows.append(row)
                    print(
                        f"{shape:18s} {case:14s} k={k:2d} N={n_questions:4d} pop={row['population_ece']:.4f} "
                        f"bias binned {row['binned_bias']:+.4f} debiased {row['debiased_bias']:+.4f} "
                        f"(+-{row['debiased_bias_se']:.4f}) ratio {row['debiased_bias_to_binned']:.3f} | "
                        "jackknife coverage "
                        + " ".join(
                            f"{name} {row[name + '_jackknife_coverage']:.3f}"
                            for name in ("binned", "debiased", "pooled", "pretest")
                            if name + "_jackknife_coverage" in row
                        ),
                        flush=True,
                    )
    result = {
        "ece": ece_rows,
        "skill": skill_rows,
        "intervals": interval_rows,
        "arguments": vars(args) | {"output": str(args.output)},
    }
    result["seconds"] = time.time() - started
    if args.output:
        args.output.write_text(json.dumps(result, indent=1) + "\n")
    for row in skill_rows:
        print(
            f"k={row['k']:2d} N={row['N']:4d} "
            + " ".join(f"{name} {row[name]:+.3f}" for name in row if name.endswith("bss")),
            flush=True,
        )


if __name__ == "__main__":
    main()
