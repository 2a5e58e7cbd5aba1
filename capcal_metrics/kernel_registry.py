"""The registry of this package's weighted kernels: public metric -> its kernel factory (see ``_kernels``).

Shared by the bootstrap (chunks of resample counts) and the jackknife (leave-one-out weights), which both
evaluate a metric through its kernel where it has one and fall back to calling the metric otherwise.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from . import brier, correlation, debiased_ece, ece, ranking, selective
from ._kernels import Kernel, Workspace

__all__ = ["KERNEL_FACTORIES", "metric_kernel"]

# Public metric -> its kernel factory: (workspace, same arguments) -> ``evaluate()`` (see _kernels).
KERNEL_FACTORIES: dict[Callable[..., Any], Callable[..., Kernel]] = {
    ece.expected_calibration_error: ece._expected_calibration_error_kernel,
    ece.maximum_calibration_error: ece._maximum_calibration_error_kernel,
    ece.adaptive_calibration_error: ece._adaptive_calibration_error_kernel,
    debiased_ece.debiased_expected_calibration_error: (
        debiased_ece._debiased_expected_calibration_error_kernel
    ),
    brier.brier_score: brier._brier_score_kernel,
    brier.corrected_capability_brier_score: brier._corrected_capability_brier_score_kernel,
    brier.capability_brier_from_moments: brier._capability_brier_from_moments_kernel,
    ranking.soft_label_auroc: ranking._soft_label_auroc_kernel,
    ranking.auroc: ranking._soft_label_auroc_kernel,
    ranking.average_precision: ranking._average_precision_kernel,
    correlation.pearson_correlation: correlation._pearson_correlation_kernel,
    correlation.spearman_correlation: correlation._spearman_correlation_kernel,
    selective.area_under_risk_coverage_curve: selective._area_under_risk_coverage_curve_kernel,
    selective.prediction_rejection_ratio: selective._prediction_rejection_ratio_kernel,
}


def metric_kernel(
    workspace: Workspace, metric_fn: Callable[..., Any], arrays: list[np.ndarray]
) -> Kernel | None:
    """The prepared weighted kernel of a package metric (possibly a keyword-only partial), else None."""
    keywords: dict[str, Any] = {}
    if isinstance(metric_fn, functools.partial) and not metric_fn.args:
        keywords = dict(metric_fn.keywords)
        metric_fn = metric_fn.func
    try:
        factory = KERNEL_FACTORIES.get(metric_fn)
    except TypeError:  # unhashable callable
        factory = None
    return None if factory is None else factory(workspace, *arrays, **keywords)
