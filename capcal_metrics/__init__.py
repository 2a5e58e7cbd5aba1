"""capcal_metrics: capability- and response-calibration metrics on numpy arrays.

The metrics are those of "On Calibration of LLMs: From Response To Capability" (arXiv 2602.13540): binned
calibration errors, Brier scores, ranking and correlation metrics, selective prediction, and the unbiased
pass@k of Chen et al. 2021 with its prediction from a confidence, 1 - (1 - p)^k; and the paper's response
consistency confidence (the modal-answer share of k sampled responses), in its paper and leakage-free forms.

Every metric takes 1-D arrays of N queries: ``confidence`` in [0, 1] and a ``target`` in [0, 1] — mu_hat
(the fraction of a query's n sampled responses that are correct) for capability calibration, or the 0/1
correctness z of one response for response calibration — or ``labels`` where 0/1 labels are required.
Inputs are validated (ValueError naming the argument); a metric undefined on its input returns NaN with an
:class:`UndefinedMetricWarning`. Functions named ``random_baseline_*`` give the expectation of a metric when
every confidence is drawn i.i.d. from U(0, 1). Beside the paper's metrics: the debiased ECE (Kumar et al.
2019; the binned ECE is biased upward by its bin noise), Brier skill scores over the constant forecast at the
base rate (plain and finite-k corrected), and jackknife intervals over questions. For adaptive sampling
(:mod:`capcal_metrics.sequential`): group-sequential stopping plans, estimates of mu, mu^2 and pass@k that
stay unbiased after a data-dependent stop, an anytime-valid confidence sequence, and their exact operating
characteristics.
"""

from .binning import ReliabilityDiagram, assign_bins, equal_width_bin_edges, reliability_diagram
from .bootstrap import BootstrapCI, bootstrap_ci, bootstrap_cis, bootstrap_differences
from .brier import (
    brier_score,
    capability_brier_from_moments,
    corrected_capability_brier_score,
    random_baseline_brier_score,
)
from .consistency import LeakageFreeConsistency, leakage_free_consistency, modal_count, response_consistency
from .correlation import pearson_correlation, spearman_correlation
from .debiased_ece import debiased_expected_calibration_error
from .ece import (
    adaptive_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    random_baseline_calibration_error,
)
from .jackknife import JackknifeCI, jackknife_ci, jackknife_items, leave_one_out_values
from .pass_at_k import pass_at_k, predicted_pass_at_k
from .ranking import auroc, average_precision, random_baseline_average_precision, soft_label_auroc
from .selective import (
    RiskCoverageCurve,
    area_under_risk_coverage_curve,
    prediction_rejection_ratio,
    random_baseline_aurc,
    risk_coverage_curve,
)
from .sequential import (
    ConfidenceSequence,
    OperatingCharacteristics,
    SequentialPlan,
    confidence_sequence,
    confidence_sequence_coverage,
    confidence_width_rule,
    operating_characteristics,
    path_counts,
    sample_proportion,
    terminal_probabilities,
    terminal_states,
    unanimity_rule,
    unbiased_mean,
    unbiased_mean_square,
    unbiased_moment,
    unbiased_moment_given_prefix,
    unbiased_pass_at_k,
)
from .skill import (
    base_rate_variance,
    base_rate_variance_from_moments,
    brier_skill_score,
    brier_skill_score_from_moments,
    corrected_brier_skill_score,
    random_baseline_brier_skill_score,
)
from .validation import UndefinedMetricWarning

__all__ = [
    "BootstrapCI",
    "ConfidenceSequence",
    "JackknifeCI",
    "LeakageFreeConsistency",
    "OperatingCharacteristics",
    "ReliabilityDiagram",
    "RiskCoverageCurve",
    "SequentialPlan",
    "UndefinedMetricWarning",
    "adaptive_calibration_error",
    "area_under_risk_coverage_curve",
    "assign_bins",
    "auroc",
    "average_precision",
    "base_rate_variance",
    "base_rate_variance_from_moments",
    "bootstrap_ci",
    "bootstrap_cis",
    "bootstrap_differences",
    "brier_score",
    "brier_skill_score",
    "brier_skill_score_from_moments",
    "capability_brier_from_moments",
    "confidence_sequence",
    "confidence_sequence_coverage",
    "confidence_width_rule",
    "corrected_brier_skill_score",
    "corrected_capability_brier_score",
    "debiased_expected_calibration_error",
    "equal_width_bin_edges",
    "expected_calibration_error",
    "jackknife_ci",
    "jackknife_items",
    "leakage_free_consistency",
    "leave_one_out_values",
    "maximum_calibration_error",
    "modal_count",
    "operating_characteristics",
    "pass_at_k",
    "path_counts",
    "pearson_correlation",
    "predicted_pass_at_k",
    "prediction_rejection_ratio",
    "random_baseline_aurc",
    "random_baseline_average_precision",
    "random_baseline_brier_score",
    "random_baseline_brier_skill_score",
    "random_baseline_calibration_error",
    "reliability_diagram",
    "response_consistency",
    "risk_coverage_curve",
    "sample_proportion",
    "soft_label_auroc",
    "spearman_correlation",
    "terminal_probabilities",
    "terminal_states",
    "unanimity_rule",
    "unbiased_mean",
    "unbiased_mean_square",
    "unbiased_moment",
    "unbiased_moment_given_prefix",
    "unbiased_pass_at_k",
]
