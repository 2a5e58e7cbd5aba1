"""Ranking (discrimination) metrics: soft-label AUROC, AUROC and average precision.

Soft-label AUROC is the capability form of AUROC from "On Calibration of LLMs: From Response To Capability"
(arXiv 2602.13540); AUROC and average precision are the response-level metrics against 0/1 correctness.

All are O(N log N) (one sort) and treat tied confidences by value, never by row position, so they do not
depend on the order of the queries. Undefined cases (a single class) return NaN with an
:class:`~capcal_metrics.UndefinedMetricWarning`, like every metric in this package.

Random baselines (c_i ~ U(0, 1) i.i.d., where ties have probability zero): E[AUROC] = E[soft-label AUROC]
= 1/2 exactly for any target (every pair is ordered either way with probability 1/2); E[AP] is given
exactly by :func:`random_baseline_average_precision`.

Implementation note: every metric of this package is computed by a private kernel (see
:mod:`capcal_metrics._kernels`) that evaluates the metric for many weight vectors at once; the public function
evaluates one vector of ones, :func:`bootstrap_ci` chunks of bootstrap counts.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ._kernels import Kernel, Workspace, evaluate_once
from .rounding import is_zero_up_to_rounding
from .validation import check_binary_labels, check_confidence_and_target, undefined_metric

__all__ = ["auroc", "average_precision", "random_baseline_average_precision", "soft_label_auroc"]


def soft_label_auroc(confidence: ArrayLike, target: ArrayLike) -> float:
    """AUROC against a soft target mu in [0, 1] (capability discrimination, arXiv 2602.13540).

    With weights ``w_ij = mu_i (1 - mu_j)`` over all ordered pairs (i, j), including i = j::

        AUROC = sum_ij w_ij [1(c_i > c_j) + 0.5 1(c_i = c_j)] / sum_ij w_ij

    i.e. the probability that a correct response ranks above an incorrect one when every query contributes
    mass mu_i of correct and 1 - mu_i of incorrect responses at its confidence c_i (a query ties with itself,
    so the i = j terms add 0.5 w_ii). With 0/1 targets it equals the ordinary AUROC. Computed in O(N log N):
    sorting by c and grouping ties, the numerator is ``sum_g P_g (Q_{<g} + Q_g / 2)`` with P_g = sum of mu and
    Q_g = sum of (1 - mu) in tie group g and Q_{<g} the sum of (1 - mu) over smaller confidences; the
    denominator is ``(sum_i mu_i)(sum_j (1 - mu_j))``.

    Returns NaN (with a warning) when the denominator is 0, i.e. all targets are 0 or all are 1, or when
    sum_i mu_i or sum_i (1 - mu_i) is 0 up to rounding (at most N eps N; ``capcal_metrics.rounding``).
    """
    confidence, target = check_confidence_and_target(confidence, target)
    if target.min() == target.max() and target[0] in (0.0, 1.0):
        return undefined_metric(
            "soft_label_auroc", "every target is 0 or every target is 1 (no pair to rank)"
        )
    value = evaluate_once(_soft_label_auroc_kernel, confidence, target)
    if np.isnan(value):  # a class mass within rounding of 0, e.g. every target 1e-300: NaN from the kernel
        return undefined_metric(
            "soft_label_auroc", "the targets' total or the total of 1 - target is 0 up to rounding"
        )
    return value


def auroc(confidence: ArrayLike, labels: ArrayLike) -> float:
    """AUROC of confidence against 0/1 correctness labels (Mann-Whitney form, ties count 1/2).

    ``AUROC = (1 / (P N)) sum_{i: z_i=1} sum_{j: z_j=0} [1(c_i > c_j) + 0.5 1(c_i = c_j)]``; the same
    computation as :func:`soft_label_auroc` restricted to binary targets. NaN (with a warning) when only
    one class is present.
    """
    confidence, labels = check_confidence_and_target(
        confidence, labels, binary_target=True, target_name="labels"
    )
    if labels.min() == labels.max():
        return undefined_metric("auroc", "labels contain a single class")
    return evaluate_once(_soft_label_auroc_kernel, confidence, labels)


def average_precision(confidence: ArrayLike, labels: ArrayLike) -> float:
    """Average precision (area under the precision-recall curve, step-wise) against 0/1 correctness.

    ``AP = sum_k (R_k - R_{k-1}) P_k``, with thresholds k running over the distinct confidences in
    decreasing order, P_k / R_k the precision / recall of predicting "correct" for every c >= threshold_k, and
    R_0 = 0 (the non-interpolated definition of scikit-learn's ``average_precision_score``; tied confidences
    enter at one threshold). Positives are correct responses (z = 1). NaN (with a warning) when there are
    no positives.
    """
    confidence, labels = check_confidence_and_target(
        confidence, labels, binary_target=True, target_name="labels"
    )
    if labels.max() == 0.0:
        return undefined_metric("average_precision", "labels contain no positive (z = 1)")
    return evaluate_once(_average_precision_kernel, confidence, labels)


def random_baseline_average_precision(labels: ArrayLike) -> float:
    """E[AP] when every c_i ~ U(0, 1) i.i.d., i.e. under a uniformly random ranking (exact).

    With N queries of which P are positive, the item at rank r is positive with probability P/N, and given
    that, the expected precision at r is (1 + (r - 1)(P - 1)/(N - 1)) / r. Summing over r::

        E[AP] = (1/N) [H_N + (P - 1)/(N - 1) (N - H_N)],   H_N = sum_{r=1}^N 1/r

    (for N = 1 the second term is dropped). This is not the prevalence P/N, though it tends to it for large N.
    NaN (with a warning) when there are no positives.
    """
    labels = check_binary_labels(labels, "labels")
    n, n_positive = labels.size, labels.sum()
    if n_positive == 0:
        return undefined_metric("random_baseline_average_precision", "labels contain no positive (z = 1)")
    harmonic = np.sum(1.0 / np.arange(1, n + 1))
    spread = (n_positive - 1) / (n - 1) * (n - harmonic) if n > 1 else 0.0
    return float((harmonic + spread) / n)


# --- kernel factories (see capcal_metrics._kernels) ---------------------------------------------------------


def _soft_label_auroc_kernel(workspace: Workspace, confidence: ArrayLike, target: ArrayLike) -> Kernel:
    """Soft-label AUROC (and AUROC) per row of weights; NaN where one class has no mass.

    Per tie group g of the confidence (ascending), with M_g the weight and P_g = sum w mu the positive mass,
    Q_g = M_g - P_g: numerator = sum_g P_g (cumQ_g - Q_g / 2) = P.cumM - P.cumP - (P.M - P.P) / 2, and
    denominator = (sum P)(K - sum P), K = total weight; all from the workspace's shared group sums. A class
    whose mass sum P or K - sum P is zero up to rounding (at most N eps K, the error of a sum of N terms of
    total size K: ``capcal_metrics.rounding``) has no mass: NaN.
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    groups = workspace.groups(confidence)
    n_terms = confidence.size

    def evaluate() -> np.ndarray:
        mass, cumulative_mass = workspace.sums(groups), workspace.cumsums(groups)
        positive = workspace.sums(groups, target)
        cumulative_positive = workspace.cumsums(groups, target)
        numerator = (
            np.einsum("ij,ij->i", positive, cumulative_mass)
            - np.einsum("ij,ij->i", positive, cumulative_positive)
            - 0.5 * (np.einsum("ij,ij->i", positive, mass) - np.einsum("ij,ij->i", positive, positive))
        )
        total_positive = cumulative_positive[:, -1]
        total_negative = workspace.total - total_positive
        denominator = total_positive * total_negative
        empty = is_zero_up_to_rounding(total_positive, n_terms, workspace.total) | is_zero_up_to_rounding(
            total_negative, n_terms, workspace.total
        )
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(empty | (denominator <= 0), np.nan, numerator / denominator)

    return evaluate


def _average_precision_kernel(workspace: Workspace, confidence: ArrayLike, labels: ArrayLike) -> Kernel:
    """Average precision per row of weights; NaN where there is no positive.

    Thresholds run over the distinct confidences from the top: at tie group g (ascending) the predicted and
    true positives are the totals over groups >= g, K - cumM_g + M_g and P - cumP_g + P_g, and
    AP = sum_g P_g precision_g / P (groups without positives contribute 0).
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    groups = workspace.groups(confidence)

    def evaluate() -> np.ndarray:
        positive = workspace.sums(groups, labels)
        cumulative_positive = workspace.cumsums(groups, labels)
        total_positive = cumulative_positive[:, -1:]
        predicted_positives = workspace.total[:, None] - workspace.cumsums(groups)
        predicted_positives += workspace.sums(groups)
        # Predicted positives are 0 only where the true positives are 0 too: 0 / tiny = 0.
        np.maximum(predicted_positives, np.finfo(np.float64).tiny, out=predicted_positives)
        precision = total_positive - cumulative_positive
        precision += positive
        precision /= predicted_positives
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(
                total_positive[:, 0] > 0,
                np.einsum("ij,ij->i", positive, precision) / total_positive[:, 0],
                np.nan,
            )

    return evaluate
