r"""Brier skill scores against the no-information forecast: the constant at the base rate.

The skill of a confidence c over a reference forecast is ``BSS = 1 - Brier(c) / Brier(reference)`` (Murphy
1973, "A new vector partition of the probability score", J. Appl. Meteor. 12; Wilks, "Statistical Methods in
the Atmospheric Sciences", ch. "Forecast verification"). The standard reference is the forecast that knows
nothing about the individual questions, only the base rate: the constant c = mean mu. Its Brier against the
targets is their variance, so

    BSS = 1 - mean_i (c_i - mu_hat_i)^2 / mean_i (mu_hat_i - mean mu_hat)^2          (brier_skill_score)

1 = perfect, 0 = no better than the base rate, negative = worse than announcing the base rate for every
question (unbounded below). Undefined (NaN) when every target is the same (no variance to explain), up to
rounding: a computed variance at most (N eps max|t|)^2 is that of equal values (``capcal_metrics.rounding``).

Finite-k correction. mu_hat_i is the mean of n_i Bernoulli(mu_i) draws, Var(mu_hat_i | mu_i) =
mu_i (1 - mu_i) / n_i = v_i, whose unbiased estimate is ``v_hat_i = mu_hat_i (1 - mu_hat_i) / (n_i - 1)``.
That noise inflates both Brier scores: E (c_i - mu_hat_i)^2 = (c_i - mu_i)^2 + v_i, and
E mean_i (mu_hat_i - mean mu_hat)^2 = S + (1 - 1/N) mean_i v_i with S = mean_i (mu_i - mean mu)^2, so even the
oracle c = mu scores only 1 - mean v / (S + mean v) < 1 (0.5-0.7 at k = 4 on typical tasks). The corrected
skill replaces both by unbiased estimates of their noise-free values,

    CB    = mean_i [(c_i - mu_hat_i)^2 - v_hat_i]                         (unbiased for mean (c - mu)^2)
    S_hat = mean_i (mu_hat_i - mean mu_hat)^2 - (1 - 1/N) mean_i v_hat_i  (unbiased for S, the Var of mu)
    BSS_corrected = 1 - CB / S_hat                                        (corrected_brier_skill_score)

estimating the skill against the true mu, ``1 - mean (c - mu)^2 / mean (mu - mean mu)^2``: about 1 for the
oracle c = mu, about 0 for the constant at the base rate, negative for uniform random confidences: with
c ~ U(0, 1), E (c - mu)^2 = (mu - 1/2)^2 + 1/12, whose mean is S + (mean mu - 1/2)^2 + 1/12 > S, so the
expected skill is below -1/(12 S) < 0 on every task. As a ratio of unbiased estimates it has an O(1/N)
bias. Undefined (NaN) when S_hat <= 0 (the targets' spread is all sampling noise). Deciding S_hat = 0:

- Exactly, on the lattice. Where every mu_hat_i is the float64 value of s_i / n_i for whole s_i (how mu_hat
  is computed), S_hat is a ratio of integers: with the sums A_n = sum s_i, Q_n = sum s_i^2 and
  C_n = sum s_i (n - s_i) over the questions with n_i = n (int64, vectorised),

      N^2 S_hat = N sum_n Q_n / n^2 - (sum_n A_n / n)^2 - (N - 1) sum_n C_n / (n^2 (n - 1)),

  evaluated in exact integer arithmetic over the common denominator D = lcm_n n^2 (n - 1) (Python integers,
  one term per distinct n); S_hat is 0 when that is 0 and otherwise its correctly rounded float. (At a
  fixed n this is [(n - 1)(N Q - A^2) - (N - 1) C] / (N^2 n^2 (n - 1)).) Every target set with S_hat exactly
  0 gives NaN, for instance every question at n/n but one at (n - 1)/n, at any N and n.
- Up to rounding, for any other input (mu_hat not on a lattice, or the moment form, whose estimates of mu^2
  after adaptive stopping have no common denominator): the computed S_hat counts as 0 when within a bound
  on every rounding that enters (Higham 2002, ch. 3-4; u = eps/2): the inputs' own rounding (each mu_hat_i
  and mu_square_hat_i the float nearest an exact value, within u of it relatively), propagated to first
  order through the gradient, ``u sum_i |dS/dt_i| |t_i| + u sum_i |dS/dq_i| |q_i|``, which covers the
  cancellation in 1 - t near t = 1 and in mu_hat^2 - mu_square_hat; the evaluation's,
  ``(N + 8) eps (spread + (1 - 1/N) mean_i |noise terms|)`` (recursive sums plus a few operations per
  term); and the two-pass variance's (N eps max mu_hat)^2 (``capcal_metrics.rounding``).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

from .brier import (
    capability_brier_from_moments,
    corrected_capability_brier_score,
    random_baseline_brier_score,
)
from .rounding import EPS, summation_error_bound, variance_is_zero
from .validation import (
    check_confidence_and_target,
    check_probabilities,
    check_whole_numbers,
    undefined_metric,
)

__all__ = [
    "base_rate_variance",
    "base_rate_variance_from_moments",
    "brier_skill_score",
    "brier_skill_score_from_moments",
    "corrected_brier_skill_score",
    "random_baseline_brier_skill_score",
]


def base_rate_variance(target: ArrayLike, n_samples: ArrayLike | None = None) -> float:
    """The skill scores' reference: the Brier of the constant forecast at the base rate; 0 when it is zero
    up to rounding.

    Without ``n_samples``: ``mean_i (t_i - mean t)^2``, 0 when at most (N eps max|t|)^2. With ``n_samples``
    (n_i >= 2, mu_hat from n_i samples): ``S_hat = mean_i (mu_hat_i - mean mu_hat)^2 - (1 - 1/N) mean_i
    mu_hat_i (1 - mu_hat_i) / (n_i - 1)``, unbiased for the variance of the true mu, and negative when the
    spread of mu_hat is below its sampling noise. Where every mu_hat_i is s_i / n_i it is computed exactly
    (0 when exactly 0, else its correctly rounded value); otherwise 0 when within the bound on its rounding
    (module docstring). The skills are undefined where this is <= 0.
    """
    target = check_probabilities(target, "target")
    size = target.size
    spread = float(np.mean((target - target.mean()) ** 2))
    if n_samples is None:
        return 0.0 if variance_is_zero(spread, size, np.max(np.abs(target))) else spread
    n = np.broadcast_to(check_whole_numbers(n_samples, "n_samples").astype(np.float64), target.shape)
    if np.any(n < 2):
        raise ValueError(f"n_samples must be >= 2 for every query; found n = {int(np.min(n))}")
    exact = _lattice_spread_less_noise(target, n)
    if exact is not None:
        return exact
    # d noise_i / d t_i = (1 - 2 t_i) / (n_i - 1); the noise terms have no other input
    return _spread_less_noise(
        target, spread, target * (1.0 - target) / (n - 1.0), (1.0 - 2.0 * target) / (n - 1.0), 0.0
    )


def base_rate_variance_from_moments(mu_hat: ArrayLike, mu_square_hat: ArrayLike) -> float:
    """Unbiased variance of the true mu over the questions from unbiased estimates of mu_i and mu_i^2; 0 when
    it is zero up to rounding.

    ``S_hat = mean_i (mu_hat_i - mean mu_hat)^2 - (1 - 1/N) mean_i d_i``, ``d_i = mu_hat_i^2 -
    mu_square_hat_i``: d_i is unbiased for Var(mu_hat_i) (E mu_hat^2 = mu^2 + Var, E mu_square_hat =
    mu^2), and
    E mean_i (mu_hat_i - mean mu_hat)^2 = S + (1 - 1/N) mean_i Var(mu_hat_i) for independent questions. For
    adaptive sampling, with the path-count estimates after stopping (:mod:`capcal_metrics.sequential`). At a
    fixed n, ``mu_square_hat = s(s - 1)/(n(n - 1))`` gives ``d_i = mu_hat_i (1 - mu_hat_i)/(n - 1)`` and this
    is :func:`base_rate_variance` with ``n_samples`` (equal up to rounding). 0 when within the bound on its
    rounding (module docstring), which counts the rounding of mu_hat^2 - mu_square_hat: a lattice target set
    whose S_hat is exactly 0 gives 0 here too.
    """
    mu_hat = check_probabilities(mu_hat, "mu_hat")
    mu_square_hat = check_probabilities(mu_square_hat, "mu_square_hat", length=mu_hat.size)
    spread = float(np.mean((mu_hat - mu_hat.mean()) ** 2))
    # d noise_i / d t_i = 2 t_i; the input q_i enters with |d noise_i / d q_i| = 1
    return _spread_less_noise(
        mu_hat, spread, mu_hat**2 - mu_square_hat, 2.0 * mu_hat, mu_square_hat, mu_hat**2 + mu_square_hat
    )


def _lattice_spread_less_noise(target: np.ndarray, n: np.ndarray) -> float | None:
    """S_hat in exact rational arithmetic where every t_i is the float64 value of s_i / n_i (whole s_i, n_i):
    0.0 when exactly 0, else its correctly rounded value; None off the lattice (module docstring)."""
    n_whole = np.rint(n).astype(np.int64)
    counts = np.rint(target * n_whole).astype(np.int64)
    if not np.array_equal(counts / n_whole, target):
        return None
    values, group = np.unique(n_whole, return_inverse=True)
    sums = np.zeros(values.size, dtype=np.int64)
    squares = np.zeros(values.size, dtype=np.int64)
    np.add.at(sums, group, counts)
    np.add.at(squares, group, counts * counts)
    # one common denominator D = lcm_n n^2 (n - 1) (a multiple of n and n^2): D^2 N^2 S_hat is an integer
    n_list, sum_list, square_list = values.tolist(), sums.tolist(), squares.tolist()
    common = math.lcm(*(m * m * (m - 1) for m in n_list))
    mean_sum = sum(a * (common // m) for a, m in zip(sum_list, n_list, strict=True))  # D sum t
    square_sum = sum(q * (common // (m * m)) for q, m in zip(square_list, n_list, strict=True))  # D sum t^2
    noise_sum = sum(  # D sum_i t_i (1 - t_i) / (n_i - 1)
        (m * a - q) * (common // (m * m * (m - 1)))
        for a, q, m in zip(sum_list, square_list, n_list, strict=True)
    )
    size = target.size
    scaled = (
        size * common * square_sum - mean_sum * mean_sum - (size - 1) * common * noise_sum
    )  # D^2 N^2 S_hat
    return 0.0 if scaled == 0 else float(Fraction(scaled, common * common * size * size))


def _spread_less_noise(
    target: np.ndarray,
    spread: float,
    noise: np.ndarray,
    noise_slope: np.ndarray,
    other_input: np.ndarray | float,
    noise_magnitude: np.ndarray | None = None,
) -> float:
    """``S = spread - (1 - 1/N) mean(noise)``; 0 when |S| is within the bound on its rounding.

    The bound (module docstring; u = eps/2): the inputs' rounding, ``u sum_i |dS/dt_i| |t_i| + u (1 - 1/N)/N
    sum_i |q_i|`` with ``dS/dt_i = 2 (t_i - mean t)/N - (1 - 1/N)/N noise_slope_i`` and q_i ``other_input``
    (the noise terms' other input, entering with slope 1); the evaluation's, ``(N + 8) eps (spread +
    (1 - 1/N) mean |noise magnitude|)``; the two-pass variance's ``(N eps max|t|)^2``.
    """
    size = target.size
    weight = (1.0 - 1.0 / size) / size
    mean_noise = (1.0 - 1.0 / size) * float(np.mean(noise))
    variance = spread - mean_noise
    unit = EPS / 2.0
    slope = np.abs(2.0 * (target - target.mean()) / size - weight * noise_slope)
    rounding = unit * float(np.sum(slope * np.abs(target)))
    rounding += unit * weight * float(np.sum(np.abs(np.broadcast_to(other_input, target.shape))))
    magnitude = np.abs(noise) if noise_magnitude is None else np.abs(noise_magnitude)
    rounding += float(
        summation_error_bound(size + 8, spread + (1.0 - 1.0 / size) * float(np.mean(magnitude)))
    )
    rounding += float(summation_error_bound(size, np.max(np.abs(target)))) ** 2
    return 0.0 if abs(variance) <= rounding else variance


_SAME_TARGETS = "every target is the same (no base-rate variance)"
_SPREAD_IS_NOISE = (
    "the estimated variance of mu over the questions is <= 0 (mu_hat's spread is sampling noise)"
)


def _skill(brier: float, reference: float, name: str, why: str) -> float:
    """``1 - brier / reference``, the skill over the base rate; NaN with an UndefinedMetricWarning (``name``:
    ``why``) when ``reference`` is <= 0 (the base-rate variances return exactly 0 when it is zero up to
    rounding)."""
    if reference <= 0.0:
        return undefined_metric(name, why)
    return 1.0 - brier / reference


def brier_skill_score(confidence: ArrayLike, target: ArrayLike) -> float:
    """BSS = 1 - mean_i (c_i - t_i)^2 / mean_i (t_i - mean t)^2, skill over the constant at the base rate.

    Higher is better: 1 = perfect, 0 = no better than the base rate ``mean t``, negative = worse than the base
    rate (unbounded below). ``target`` is mu_hat (capability) or 0/1 correctness (response). NaN with an
    UndefinedMetricWarning when all targets are equal, up to rounding (:func:`base_rate_variance`).
    Reference: Murphy 1973; Wilks, "Statistical Methods in the Atmospheric Sciences" (the skill score with
    climatology as reference).
    """
    confidence, target = check_confidence_and_target(confidence, target)
    brier = float(np.mean((confidence - target) ** 2))
    return _skill(brier, base_rate_variance(target), "brier_skill_score", _SAME_TARGETS)


def corrected_brier_skill_score(confidence: ArrayLike, mu_hat: ArrayLike, n_samples: ArrayLike) -> float:
    """Finite-k-corrected capability BSS = 1 - CB / S_hat (higher is better; 1 = perfect, 0 = base rate).

    ``CB = mean_i [(c_i - mu_hat_i)^2 - v_i]`` (:func:`capcal_metrics.corrected_capability_brier_score`) and
    ``S_hat = mean_i (mu_hat_i - mean mu_hat)^2 - (1 - 1/N) mean_i v_i``, v_i = mu_hat_i (1 - mu_hat_i) /
    (n_i - 1): unbiased estimates of mean (c - mu)^2 and of the variance of the true mu over the questions
    (derivation in the module docstring). Estimates the skill against the true mu over the constant forecast
    at the base rate; the oracle c = mu scores about 1 even at k = 4, where the uncorrected score cannot
    reach 1. ``n_samples`` (n_i >= 2) is a scalar or one count per query. NaN with an UndefinedMetricWarning
    when S_hat <= 0 up to rounding (:func:`base_rate_variance`).
    """
    corrected_brier = corrected_capability_brier_score(confidence, mu_hat, n_samples)  # validates the inputs
    variance = base_rate_variance(mu_hat, n_samples)
    return _skill(corrected_brier, variance, "corrected_brier_skill_score", _SPREAD_IS_NOISE)


def brier_skill_score_from_moments(
    confidence: ArrayLike, mu_hat: ArrayLike, mu_square_hat: ArrayLike
) -> float:
    """Capability BSS = 1 - CB / S_hat from unbiased estimates of mu_i and mu_i^2 (higher is better).

    ``CB = mean_i (c_i^2 - 2 c_i mu_hat_i + mu_square_hat_i)`` (:func:`capcal_metrics.capability_brier_from_
    moments`) and S_hat of :func:`base_rate_variance_from_moments`: unbiased estimates of mean (c - mu)^2 and
    of the variance of the true mu, so the ratio has the O(1/N) bias of :func:`corrected_brier_skill_score`,
    which it equals (up to rounding) at a fixed n with ``mu_square_hat = s(s - 1)/(n(n - 1))``. For adaptive
    sampling (:mod:`capcal_metrics.sequential`). NaN with an UndefinedMetricWarning when S_hat <= 0.
    """
    brier = capability_brier_from_moments(confidence, mu_hat, mu_square_hat)  # validates the inputs
    variance = base_rate_variance_from_moments(mu_hat, mu_square_hat)
    return _skill(brier, variance, "brier_skill_score_from_moments", _SPREAD_IS_NOISE)


def random_baseline_brier_skill_score(target: ArrayLike, n_samples: ArrayLike | None = None) -> float:
    """Expected skill of confidences drawn i.i.d. from U(0, 1), in the form of :func:`brier_skill_score`
    (without ``n_samples``) or :func:`corrected_brier_skill_score` (with it).

    ``1 - (mean_i (1/3 - t_i + t_i^2) - mean_i v_i) / reference``: E (c - t)^2 = 1/3 - t + t^2 for
    c ~ U(0, 1) (:func:`capcal_metrics.random_baseline_brier_score`), less the mean noise v_i = mu_hat_i
    (1 - mu_hat_i) / (n_i - 1) in the corrected form; the reference is :func:`base_rate_variance`. NaN
    (with an UndefinedMetricWarning) where the reference is <= 0.
    """
    target = check_probabilities(target, "target")
    reference = base_rate_variance(target, n_samples)
    if reference <= 0.0:
        return undefined_metric("random_baseline_brier_skill_score", "the base-rate variance is <= 0")
    expected_brier = random_baseline_brier_score(target)
    if n_samples is not None:
        n = np.broadcast_to(np.asarray(n_samples, dtype=np.float64), target.shape)
        expected_brier -= float(np.mean(target * (1.0 - target) / (n - 1.0)))
    return 1.0 - expected_brier / reference
