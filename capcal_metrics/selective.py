"""Selective prediction: risk-coverage curve, AURC and the prediction-rejection ratio.

These are among the metrics of "On Calibration of LLMs: From Response To Capability" (arXiv 2602.13540); PRR
follows LM-Polygraph's definition.

Queries are kept in order of decreasing confidence. Keeping the top k of N (coverage k/N), the selective risk
is ``risk(k) = 1 - (1/k) sum_{kept} target``, with target = mu_hat (capability) or 0/1 correctness
(response).

Ties: when the k-th position falls inside a run of m tied confidences, the kept subset of that run is not
determined by the scores. We report the expectation over a uniformly random order within each run, which is
exact and order-independent: the expected target kept from the run grows linearly, j * (run mean) after j
of its m members. So the curve interpolates linearly inside a run and is the usual one between runs; it
never depends on the row order of the input.

Random baseline (c_i ~ U(0, 1) i.i.d., i.e. a uniformly random order): E[risk(k)] = 1 - mean(target) for every
k, so E[AURC] = 1 - mean(target) (:func:`random_baseline_aurc`) and E[PRR] = 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ._kernels import Kernel, Workspace, evaluate_once, groups_of
from .rounding import is_zero_up_to_rounding
from .validation import check_confidence_and_target, check_fraction, check_probabilities, undefined_metric

__all__ = [
    "RiskCoverageCurve",
    "area_under_risk_coverage_curve",
    "prediction_rejection_ratio",
    "random_baseline_aurc",
    "risk_coverage_curve",
]


class RiskCoverageCurve(NamedTuple):
    """Selective risk at coverage k/N for k = 1..N, and the confidence of the k-th kept query."""

    coverage: np.ndarray
    risk: np.ndarray
    threshold: np.ndarray


def risk_coverage_curve(confidence: ArrayLike, target: ArrayLike) -> RiskCoverageCurve:
    """Risk-coverage curve: ``risk(k) = 1 - (1/k) sum_{top-k by c} target`` at coverage ``k/N``, k = 1..N.

    Ties are resolved by expectation over random order within tied runs (see module docstring).
    """
    confidence, target = check_confidence_and_target(confidence, target)
    risk, threshold = _selective_risk(confidence, target)
    coverage = np.arange(1, confidence.size + 1) / confidence.size
    return RiskCoverageCurve(coverage, risk, threshold)


def area_under_risk_coverage_curve(confidence: ArrayLike, target: ArrayLike) -> float:
    """AURC = (1/N) sum_{k=1}^{N} risk(k) (Geifman et al. 2019, "Bias-Reduced Uncertainty Estimation ...").

    The Riemann sum of the risk-coverage curve at coverages 1/N, ..., 1 (the mean of
    :func:`risk_coverage_curve`'s ``risk``); lower is better.
    """
    confidence, target = check_confidence_and_target(confidence, target)
    return evaluate_once(_area_under_risk_coverage_curve_kernel, confidence, target)


def prediction_rejection_ratio(
    confidence: ArrayLike, target: ArrayLike, *, max_rejection: float = 1.0
) -> float:
    """Prediction-rejection ratio, PRR (Malinin et al. 2017; LM-Polygraph, Fadeeva et al. 2023).

    Reject the least confident queries first. Over the rejection levels r = 0, 1, ..., R - 1 (kept counts
    k = N - r), with R = max(1, floor(max_rejection * N)), let A(s) = (1/R) sum_r risk_s(N - r) be the
    area under the rejection curve of the selective risk for ranking s. Then::

        PRR = (A_random - A_confidence) / (A_random - A_oracle)

    where A_random = 1 - mean(target) is the exact expectation under a uniformly random ranking and the oracle
    ranks by the target itself. This is LM-Polygraph's ``(AUC_c - AUC_random) / (AUC_oracle - AUC_random)``
    on the quality curve (quality = 1 - risk). 1 = oracle ranking, 0 = random, < 0 worse than random.
    ``max_rejection=0.5`` gives the common "PRR@50%". NaN (with a warning) when A_random = A_oracle (e.g. a
    constant target, or R = 1).
    """
    confidence, target = check_confidence_and_target(confidence, target)
    max_rejection = check_fraction(max_rejection, "max_rejection", include_one=True)
    ratio = evaluate_once(_prediction_rejection_ratio_kernel, confidence, target, max_rejection=max_rejection)
    if np.isnan(ratio):
        return undefined_metric("prediction_rejection_ratio", "the oracle ranking is no better than random")
    return ratio


def random_baseline_aurc(target: ArrayLike) -> float:
    """E[AURC] when each c_i ~ U(0, 1): ``1 - mean(target)`` (exact; every risk(k) has this expectation)."""
    target = check_probabilities(target, "target")
    return float(1.0 - target.mean())


# --- kernel factories (see capcal_metrics._kernels) ---------------------------------------------------------


def _area_under_risk_coverage_curve_kernel(
    workspace: Workspace, confidence: ArrayLike, target: ArrayLike
) -> Kernel:
    """AURC per row of (whole-number) weights: the mean risk over all K = sum_i w_i kept counts."""
    mean_risk = _mean_risk_of_last_levels(workspace, confidence, target)
    return lambda: mean_risk(workspace.total)


def _prediction_rejection_ratio_kernel(
    workspace: Workspace, confidence: ArrayLike, target: ArrayLike, *, max_rejection: float = 1.0
) -> Kernel:
    """PRR per row of (whole-number) weights: (A_random - A_confidence) / (A_random - A_oracle).

    The margin A_random - A_oracle counts as 0 when it is zero up to rounding: both areas are means of at most
    N risks of size <= 1, each a ratio of sums of N terms, so their computed difference is within
    4 N eps max(1, A_random) of the exact one (``capcal_metrics.rounding``).
    """
    max_rejection = check_fraction(max_rejection, "max_rejection", include_one=True)
    target = np.asarray(target, dtype=np.float64)
    confidence_risk = _mean_risk_of_last_levels(workspace, confidence, target)
    oracle_risk = _mean_risk_of_last_levels(workspace, target, target)

    def evaluate() -> np.ndarray:
        total = workspace.total
        n_levels = np.maximum(1.0, np.floor(max_rejection * total))
        area = confidence_risk(n_levels)
        oracle_area = oracle_risk(n_levels)
        random_area = 1.0 - (workspace.weights @ target) / total
        margin = random_area - oracle_area
        with np.errstate(invalid="ignore", divide="ignore"):
            undefined = (margin <= 0) | is_zero_up_to_rounding(
                margin, 4 * target.size, np.maximum(1.0, random_area)
            )
            return np.where(undefined, np.nan, (random_area - area) / margin)

    return evaluate


def _mean_risk_of_last_levels(
    workspace: Workspace, confidence: ArrayLike, target: ArrayLike
) -> Callable[[np.ndarray], np.ndarray]:
    """``mean_risk(L)``: per row of weights, the mean of risk(k) over the last L kept counts k = K - L + 1..K.

    K = total weight of the row; weights must be whole numbers (counts). Ranked by decreasing confidence,
    position j holds expected target e_j = mean target of its tied run, and
    risk(k) = 1 - (1/k) sum_{j <= k} e_j. Exchanging the sums,

        sum_{k=K-L+1}^{K} (1/k) sum_{j<=k} e_j = sum_j e_j (H_K - H_{max(j-1, K-L)})

    with H the harmonic numbers. Over a run g of m_g positions after E_g more confident ones, the inner terms
    sum to m_g H_K - (S(E_g + m_g) - S(E_g)), where S(x) = sum_{i<x} H_{max(i, K-L)} is tabulated once per
    (K, L) and kept: a few O(number of runs) passes per row.
    """
    target = np.asarray(target, dtype=np.float64)
    groups = workspace.groups(np.asarray(confidence, dtype=np.float64))
    tables: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    def harmonic_tables(kept: int, first_level: int) -> tuple[np.ndarray, np.ndarray]:
        if (kept, first_level) not in tables:
            harmonic = np.r_[0.0, np.cumsum(1.0 / np.arange(1, kept + 1))]
            table = np.r_[0.0, np.cumsum(harmonic[np.maximum(np.arange(kept), first_level)])]
            tables[(kept, first_level)] = harmonic, table
        return tables[(kept, first_level)]

    def mean_risk(n_levels: np.ndarray) -> np.ndarray:
        run_mass = workspace.sums(groups)  # runs in ascending confidence
        run_target = workspace.sums(groups, target)
        # A run without weight has no target either: 0 / tiny = 0.
        run_mean = run_target / np.maximum(run_mass, np.finfo(np.float64).tiny)
        total = workspace.total
        total_target = workspace.cumsums(groups, target)[:, -1]
        # E_g = weight of the runs above run g (more confident); E_{g-1} = E_g + m_g, E_{-1} = total.
        above = (total[:, None] - workspace.cumsums(groups)).astype(np.intp)
        levels_of_row = np.broadcast_to(n_levels, total.shape)
        area = np.empty(total.shape)
        pairs = set(zip(total.tolist(), levels_of_row.tolist(), strict=True))  # a single pair in practice
        for kept, levels in pairs:
            rows = slice(None) if len(pairs) == 1 else (total == kept) & (levels_of_row == levels)
            harmonic, table = harmonic_tables(int(kept), int(kept - levels))
            at_above = np.take(table, above[rows])  # S(E_g); S(E_g + m_g) = S(E_{g-1}), S(E_{-1}) = S(K)
            means = run_mean[rows]
            run_sums = (
                means[:, 0] * table[int(kept)]
                + np.einsum("ij,ij->i", means[:, 1:], at_above[:, :-1])
                - np.einsum("ij,ij->i", means, at_above)
            )
            expected_accuracy = total_target[rows] * harmonic[int(kept)] - run_sums
            area[rows] = 1.0 - expected_accuracy / levels
        return area

    return mean_risk


def _selective_risk(confidence: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """risk(k) and the k-th kept confidence for k = 1..N, ties resolved by expectation (validated input)."""
    n = confidence.size
    groups = groups_of(confidence)
    # Tied runs from the most to the least confident.
    run_target = np.bincount(groups.index, weights=target, minlength=groups.size)[::-1]
    run_size = groups.counts[::-1]
    run_value = groups.values[::-1]
    kept_before = np.cumsum(run_size) - run_size
    target_before = np.cumsum(run_target) - run_target
    run_of_position = np.repeat(np.arange(run_size.size), run_size)
    kept = np.arange(1, n + 1)
    expected_kept_target = (
        target_before[run_of_position]
        + (kept - kept_before[run_of_position]) * (run_target / run_size)[run_of_position]
    )
    return 1.0 - expected_kept_target / kept, run_value[run_of_position]
