r"""Debiased expected calibration error (Kumar, Liang & Ma 2019): binned ECE less the bias of its bin noise.

The binned ECE ``sum_b (n_b / N) |gap_b|``, ``gap_b = mean_{i in b} (target_i - c_i)``, estimates the
population ECE

    ECE* = sum_b P(c in b) |theta_b|,   theta_b = E[mu - c | c in b]

(the same bins; mu the true probability of a correct answer: for capability calibration the target mu_hat
is the mean of k Bernoulli(mu) draws, so E[mu_hat | mu] = mu and theta_b is the gap to the *true* mu). Each
gap_b is unbiased for theta_b, but |gap_b| is biased upward for |theta_b|: with gap_b ~ N(theta_b, s_b^2),

    E|gap_b| - |theta_b| = s_b f(|theta_b| / s_b),   f(r) = 2 phi(r) - 2 r Phi(-r) > 0

(f(0) = sqrt(2/pi) ~ 0.80, f(1) ~ 0.17, f(2) ~ 0.02). The bin noise s_b^2 = Var(target - c | b) / n_b holds
both the question-to-question spread and, for the capability target, the binomial noise mu (1 - mu) / k of
mu_hat, so the bias shrinks with more questions per bin *and* with more samples k per question.

Estimator (Kumar, Liang & Ma 2019, "Verified Uncertainty Calibration", NeurIPS, section 5, the debiased
estimator for the l_p calibration error with p = 1): per bin, subtract the plug-in bias that the bin's own
Gaussian approximation implies, i.e. one parametric-bootstrap bias correction::

    ECE_debiased = sum_b (n_b / N) [ 2 |gap_b| - E|N(gap_b, s_hat_b^2)| ],
    E|N(m, s^2)| = s sqrt(2/pi) exp(-m^2 / (2 s^2)) + m (1 - 2 Phi(-m / s)).

Departures from the paper's code (p-lambda/verified_calibration, ``normal_debiased_ce``), both deliberate:
the expectation is taken in closed form instead of by Monte-Carlo draws; and s_hat_b comes from the
within-bin spread of ``target - c``, shrunk towards a Bernoulli-shaped prior, instead of the Bernoulli
variance ybar_b (1 - ybar_b) / n_b alone, because the capability target mu_hat is not a 0/1 label (its
variance Var(mu) + E[mu (1 - mu)] / k lies between p (1 - p) / k and p (1 - p), p = E[mu | b]). With SS_b the
within-bin sum of squares of ``target - c`` about gap_b, ybar_b and cbar_b the bin's mean target and mean
confidence::

    s_hat_b^2 = v_b / n_b,   v_b = (SS_b + 2 rho p_b (1 - p_b)) / (n_b + 1),
    p_b = (n_b ybar_b + 2 cbar_b) / (n_b + 2),   rho = sum_b SS_b / sum_b (n_b - 1) p_b (1 - p_b),

i.e. the bin's own variance plus 2 pseudo-observations of a prior variance rho p_b (1 - p_b): the Bernoulli
variance at the bin's probability of success (its mean target shrunk by 2 pseudo-observations towards its mean
confidence, the value it has at a calibrated bin) times the dispersion rho that the data show overall (rho ~ 1
for 0/1 targets, the variance Kumar et al. use; about 1/k + (1 - 1/k) Var(mu | b) / (p (1 - p)) for mu_hat).
rho = 0 where its denominator is 0 (no bin of two or more questions with 0 < p_b < 1). A bin with s_hat_b = 0
contributes |gap_b|. Before issue 31 the prior was the pooled variance sum_b SS_b / (N - B_occupied), the same
for every bin; where mu has point masses at 0 and 1 (most questions never or always solved) the end bins, with
many questions and almost no spread, dominate that pool and the middle bins' noise was under-estimated: for a
calibrated forecast on a mixture with 40% of questions at mu = 0 and 20% at mu = 1 the debiased ECE kept
0.72-0.74 of the binned bias at N = 50 and its jackknife interval covered 0.67-0.72 of the time (0.61-0.68 and
0.78-0.85 with the prior above; docs/methods.md, where the smooth shapes' small cost is also measured).

What it achieves (docs/methods.md, "The bias of binned ECE", measured by benchmarks/ece_bias_simulation.py):
for a miscalibrated forecast most of the bias goes on the three shapes of mu simulated there (at most 0.53 of
it remains at N = 50, 0.43 at N = 100, 0.36 at N = 400, k = 1 to 32), but not on every shape: on the four of
issue 48 (Beta(0.25, 0.25), Beta(0.5, 0.5), Beta(0.5, 3) and mu = 0, 1 or U(0, 1) with probabilities 0.4,
0.4, 0.2; k = 4, 16) the 40/40/20 mixture's underconfident forecast keeps 0.560 at N = 50, Beta(0.5, 3)'s
overconfident one 0.367 at N = 200 and Beta(0.5, 0.5)'s 0.510 at N = 1000, where an exactly calibrated bin
(c = 0.5) keeps its 59% while the other bins' bias goes (+0.0012 in absolute terms). At a perfectly
calibrated bin (theta_b = 0), with s_b known, it removes 1 - (2 - sqrt 2) ~ 41% of the bias
(E = (2 - sqrt 2) sqrt(2/pi) s_b ~ 0.47 s_b instead of 0.80 s_b). That remainder is a trade-off, not a
bound: |theta| has no unbiased estimator from a Gaussian observation (Cai & Low 2011, Ann. Statist. 39(2)), so
an estimator that removes more of it at theta_b = 0 (for example a pre-test that drops a bin whose |gap_b| is
within 1.5 s_hat_b) is biased downward for small non-zero theta_b; capcal keeps the estimator without that
downward bias. The estimate is not clipped and may be (slightly) negative; read a value near or below 0 as
"no miscalibration detectable".

Direction: lower is better; 0 = calibrated (against the true mu). Bins: ``n_bins`` equal-width bins, the last
closed, as :func:`capcal_metrics.expected_calibration_error`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtr

from ._kernels import Kernel, Workspace, evaluate_once, group_sums, groups_of
from .binning import _assign_bins
from .validation import check_confidence_and_target, check_integer

__all__ = ["debiased_expected_calibration_error"]

# Pseudo-observations of the prior variance added to every bin's own, and of the bin's mean confidence in p_b
# (see the module docstring).
_POOLING_WEIGHT = 2.0


def _expected_absolute_normal(mean: ArrayLike, sd: ArrayLike) -> np.ndarray:
    """E|X| for X ~ N(mean, sd^2): ``sd sqrt(2/pi) exp(-mean^2 / (2 sd^2)) + mean (1 - 2 Phi(-mean / sd))``.

    ``|mean|`` where sd = 0 (elementwise; broadcasting).
    """
    mean, sd = np.broadcast_arrays(np.asarray(mean, dtype=np.float64), np.asarray(sd, dtype=np.float64))
    positive = sd > 0
    safe = np.where(positive, sd, 1.0)
    folded = safe * np.sqrt(2.0 / np.pi) * np.exp(-0.5 * (mean / safe) ** 2) + mean * (
        1.0 - 2.0 * ndtr(-mean / safe)
    )
    return np.where(positive, folded, np.abs(mean))


def debiased_expected_calibration_error(
    confidence: ArrayLike, target: ArrayLike, *, n_bins: int = 10
) -> float:
    """Debiased ECE = sum_b (n_b / N) [2 |gap_b| - E|N(gap_b, s_hat_b^2)|] (lower is better; 0 = calibrated).

    ``gap_b = mean_{i in b} (target_i - c_i)`` over the ``n_bins`` equal-width bins (the last closed) of
    :func:`capcal_metrics.expected_calibration_error`; ``s_hat_b^2`` estimates Var(gap_b) from the within-bin
    spread of ``target - c``, shrunk towards ``rho p_b (1 - p_b) / n_b`` (p_b the bin's mean target shrunk
    towards its mean confidence, rho the pooled dispersion; module docstring). Estimates the population
    ECE ``sum_b P(b) |E[mu - c | c in b]|`` against the true mu (target mu_hat) or the true P(correct) (0/1
    target), with much less upward bias than the binned ECE (most of it removed far from calibration, about
    40% of it at a calibrated bin); not clipped, so it can be negative.

    Reference: Kumar, Liang & Ma 2019, "Verified Uncertainty Calibration", NeurIPS (debiased l_p calibration
    error); departures listed in the module docstring and docs/methods.md.
    """
    confidence, target = check_confidence_and_target(confidence, target)
    return evaluate_once(_debiased_expected_calibration_error_kernel, confidence, target, n_bins=n_bins)


# --- kernel factory (see capcal_metrics._kernels) -----------------------------------------------------------


def _debiased_expected_calibration_error_kernel(
    workspace: Workspace, confidence: ArrayLike, target: ArrayLike, *, n_bins: int = 10
) -> Kernel:
    """Debiased ECE per row of weights: question i counted w_i times (bin sums of w, w d and w d^2)."""
    confidence = np.asarray(confidence, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    difference = target - confidence
    n_bins = check_integer(n_bins, "n_bins")
    bins = groups_of(_assign_bins(confidence, n_bins, "equal_width"))
    squared = difference**2

    def evaluate() -> np.ndarray:
        count = group_sums(workspace.weights, None, bins)
        occupied = count > 0
        safe_count = np.where(occupied, count, 1.0)
        gap = group_sums(workspace.weights, difference, bins) / safe_count
        squares = np.maximum(group_sums(workspace.weights, squared, bins) - count * gap**2, 0.0)
        # p_b: the bin's mean target shrunk towards its mean confidence; the prior variance rho p_b (1 - p_b)
        mean_confidence = group_sums(workspace.weights, confidence, bins) / safe_count
        probability = (group_sums(workspace.weights, target, bins) + _POOLING_WEIGHT * mean_confidence) / (
            count + _POOLING_WEIGHT
        )
        bernoulli = np.where(occupied, probability * (1.0 - probability), 0.0)
        reference = (np.maximum(count - 1.0, 0.0) * bernoulli).sum(axis=1)
        dispersion = np.where(
            reference > 0, squares.sum(axis=1) / np.where(reference > 0, reference, 1.0), 0.0
        )
        within = (squares + _POOLING_WEIGHT * dispersion[:, None] * bernoulli) / np.maximum(
            count - 1.0 + _POOLING_WEIGHT, 1.0
        )
        noise = np.sqrt(np.where(occupied, within / safe_count, 0.0))
        corrected = 2.0 * np.abs(gap) - _expected_absolute_normal(gap, noise)
        return np.where(occupied, count * corrected, 0.0).sum(axis=1) / workspace.total

    return evaluate
