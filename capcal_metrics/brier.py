"""Brier scores for capability and response calibration ("On Calibration of LLMs: From Response To
Capability", arXiv 2602.13540: its targets and its Brier metric).

* Capability Brier (the paper's "Brier"): ``mean_i (c_i - mu_hat_i)^2``.
* Response Brier: ``mean_i (c_i - z_i)^2`` with z_i the 0/1 correctness of one sampled response.

Both are :func:`brier_score` with a different target. They are linked by the identity
``E_{z ~ Bern(mu)}[(c - z)^2] = (c - mu)^2 + mu (1 - mu)``: the expected response Brier is the capability
Brier (against the true mu) plus the mean Bernoulli variance.

Because mu_hat = (number correct) / n is itself noisy, ``E[(c - mu_hat)^2] = (c - mu)^2 + mu (1 - mu) / n``,
so the plain capability Brier over-estimates ``mean (c - mu)^2`` by ``mean mu (1 - mu) / n``;
:func:`corrected_capability_brier_score` removes that bias.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ._kernels import Kernel, Workspace, evaluate_once
from .validation import check_confidence_and_target, check_probabilities, check_whole_numbers

__all__ = [
    "brier_score",
    "capability_brier_from_moments",
    "corrected_capability_brier_score",
    "random_baseline_brier_score",
]


def brier_score(confidence: ArrayLike, target: ArrayLike) -> float:
    """Brier = mean_i (c_i - target_i)^2: capability Brier for target mu_hat, response Brier for 0/1 z."""
    confidence, target = check_confidence_and_target(confidence, target)
    return evaluate_once(_brier_score_kernel, confidence, target)


def corrected_capability_brier_score(confidence: ArrayLike, mu_hat: ArrayLike, n_samples: ArrayLike) -> float:
    """Finite-sample-corrected capability Brier, unbiased for mean_i (c_i - mu_i)^2.

    ``mean_i [(c_i - mu_hat_i)^2 - mu_hat_i (1 - mu_hat_i) / (n_i - 1)]``

    where mu_hat_i is the fraction correct among n_i i.i.d. responses. Since
    ``E[mu_hat (1 - mu_hat)] = mu (1 - mu) (n - 1) / n``, the subtracted term is unbiased for the noise
    ``Var(mu_hat) = mu (1 - mu) / n`` (the finite-n noise of the capability target). ``n_samples`` is a
    scalar or one count per query (it may vary) and must be >= 2. Being unbiased rather than clipped, the
    result can be slightly negative when c is almost perfectly calibrated.
    """
    confidence, mu_hat = check_confidence_and_target(confidence, mu_hat, target_name="mu_hat")
    n = check_whole_numbers(n_samples, "n_samples")
    if n.ndim > 1 or (n.ndim == 1 and n.size != confidence.size):
        raise ValueError(
            f"n_samples must be a scalar or have one entry per query ({confidence.size}), got shape {n.shape}"
        )
    if np.any(n < 2):
        raise ValueError(
            "n_samples must be >= 2 for every query: the variance correction mu_hat(1 - mu_hat)/(n - 1) "
            f"needs at least two samples; found n = {int(np.min(n))}"
        )
    return evaluate_once(_corrected_capability_brier_score_kernel, confidence, mu_hat, n)


def capability_brier_from_moments(
    confidence: ArrayLike, mu_hat: ArrayLike, mu_square_hat: ArrayLike
) -> float:
    """Capability Brier from unbiased estimates of mu and mu^2: unbiased for mean_i (c_i - mu_i)^2.

    ``mean_i [c_i^2 - 2 c_i mu_hat_i + mu_square_hat_i]``, since ``(c - mu)^2 = c^2 - 2 c mu + mu^2`` is
    linear in mu and mu^2. For adaptive sampling, with the path-count estimates of mu and mu^2 after
    stopping (:mod:`capcal_metrics.sequential`). At a fixed n, ``mu_square_hat = s(s - 1)/(n(n - 1))
    = mu_hat^2 - mu_hat (1 - mu_hat)/(n - 1)`` and this is :func:`corrected_capability_brier_score`.
    """
    confidence, mu_hat = check_confidence_and_target(confidence, mu_hat, target_name="mu_hat")
    mu_square_hat = check_probabilities(mu_square_hat, "mu_square_hat", length=confidence.size)
    return evaluate_once(_capability_brier_from_moments_kernel, confidence, mu_hat, mu_square_hat)


def random_baseline_brier_score(target: ArrayLike) -> float:
    """E[Brier] when each c_i ~ U(0, 1): ``mean_i (1/3 - target_i + target_i^2)`` (exact).

    From ``E[(c - t)^2] = E[c^2] - 2 t E[c] + t^2 = 1/3 - t + t^2``; the paper's random baseline taken as
    an expectation over c, not one draw.
    """
    target = check_probabilities(target, "target")
    return float(np.mean(1.0 / 3.0 - target + target**2))


# --- kernel factories (see capcal_metrics._kernels) ---------------------------------------------------------


def _brier_score_kernel(workspace: Workspace, confidence: ArrayLike, target: ArrayLike) -> Kernel:
    """Brier score per row of weights: (sum_i w_i (c_i - t_i)^2) / sum_i w_i (one matrix-vector product)."""
    squared_error = (np.asarray(confidence, dtype=np.float64) - np.asarray(target, dtype=np.float64)) ** 2
    return lambda: (workspace.weights @ squared_error) / workspace.total


def _corrected_capability_brier_score_kernel(
    workspace: Workspace, confidence: ArrayLike, mu_hat: ArrayLike, n_samples: ArrayLike
) -> Kernel:
    """Corrected Brier per row of weights: sum_i w_i [(c_i - mu_hat_i)^2 - noise_i] / sum_i w_i."""
    confidence = np.asarray(confidence, dtype=np.float64)
    mu_hat = np.asarray(mu_hat, dtype=np.float64)
    noise = mu_hat * (1.0 - mu_hat) / (np.asarray(n_samples, dtype=np.float64) - 1.0)
    corrected_error = (confidence - mu_hat) ** 2 - noise
    return lambda: (workspace.weights @ corrected_error) / workspace.total


def _capability_brier_from_moments_kernel(
    workspace: Workspace, confidence: ArrayLike, mu_hat: ArrayLike, mu_square_hat: ArrayLike
) -> Kernel:
    """Brier from moments per row of weights: sum_i w_i (c_i^2 - 2 c_i m_i + q_i) / sum_i w_i."""
    confidence = np.asarray(confidence, dtype=np.float64)
    squared_error = (
        confidence**2
        - 2.0 * confidence * np.asarray(mu_hat, dtype=np.float64)
        + np.asarray(mu_square_hat, dtype=np.float64)
    )
    return lambda: (workspace.weights @ squared_error) / workspace.total
