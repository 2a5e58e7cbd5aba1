"""Every argument check of capcal_metrics names the argument it rejects: each public function is called with
valid arguments except one, which takes a few invalid values in turn, and at least one of them must raise a
``ValueError`` or ``TypeError`` whose message names that argument as the signature spells it. A message that
names the wrong argument, or none, is how a user is sent to the wrong input (mutation testing found the
names unchecked: tests/README.md, "Mutation testing")."""

from __future__ import annotations

import inspect
import re
import warnings

import numpy as np
import pytest

import capcal_metrics as cm
from capcal_metrics import agreement

N = 6
CONFIDENCE = np.array([0.1, 0.4, 0.35, 0.8, 0.6, 0.9])
TARGET = np.array([0.0, 0.5, 0.25, 1.0, 0.75, 1.0])
LABELS = np.array([0, 1, 0, 1, 1, 0])
N_SAMPLES = np.full(N, 4)
DRAWN = np.array([[0, 0, 1, 2], [1, 1, 1, 1], [0, 1, 2, 3], [2, 2, 0, 0], [1, 0, 1, 0], [3, 3, 3, 1]])
CORRECT = (DRAWN == 0).astype(int)
PLAN = cm.unanimity_rule((2, 4))  # terminal states (2, 0), (2, 2), (4, 1..3)
STOP_N = np.array([2, 4, 4, 2])
STOP_S = np.array([0, 1, 3, 2])
STATES = dict(plan=PLAN, n_samples=STOP_N, n_correct=STOP_S)

# valid arguments of every public function taking checked inputs (the callables of bootstrap and jackknife
# are checked in their own tests)
VALID: dict[str, dict] = {
    "adaptive_calibration_error": {"confidence": CONFIDENCE, "target": TARGET, "n_bins": 2},
    "area_under_risk_coverage_curve": {"confidence": CONFIDENCE, "target": TARGET},
    "assign_bins": {"confidence": CONFIDENCE, "n_bins": 3, "strategy": "equal_width"},
    "auroc": {"confidence": CONFIDENCE, "labels": LABELS},
    "average_precision": {"confidence": CONFIDENCE, "labels": LABELS},
    "base_rate_variance": {"target": TARGET, "n_samples": N_SAMPLES},
    "brier_score": {"confidence": CONFIDENCE, "target": TARGET},
    "brier_skill_score": {"confidence": CONFIDENCE, "target": TARGET},
    "corrected_brier_skill_score": {"confidence": CONFIDENCE, "mu_hat": TARGET, "n_samples": N_SAMPLES},
    "corrected_capability_brier_score": {"confidence": CONFIDENCE, "mu_hat": TARGET, "n_samples": N_SAMPLES},
    "debiased_expected_calibration_error": {"confidence": CONFIDENCE, "target": TARGET, "n_bins": 2},
    "equal_width_bin_edges": {"n_bins": 4},
    "expected_calibration_error": {"confidence": CONFIDENCE, "target": TARGET, "n_bins": 2},
    "leakage_free_consistency": {"labels": DRAWN, "correctness": CORRECT, "k": 2, "n": N_SAMPLES},
    "maximum_calibration_error": {"confidence": CONFIDENCE, "target": TARGET, "n_bins": 2},
    "modal_count": {"drawn": DRAWN},
    "pass_at_k": {"n_samples": N_SAMPLES, "n_correct": CORRECT.sum(axis=1), "k": 2},
    "pearson_correlation": {"confidence": CONFIDENCE, "target": TARGET},
    "predicted_pass_at_k": {"confidence": CONFIDENCE, "k": 3},
    "prediction_rejection_ratio": {"confidence": CONFIDENCE, "target": TARGET, "max_rejection": 0.5},
    "random_baseline_aurc": {"target": TARGET},
    "random_baseline_average_precision": {"labels": LABELS},
    "random_baseline_brier_score": {"target": TARGET},
    "random_baseline_brier_skill_score": {"target": TARGET, "n_samples": N_SAMPLES},
    "random_baseline_calibration_error": {"target": TARGET, "n_bins": 2, "n_draws": 5},
    "reliability_diagram": {"confidence": CONFIDENCE, "target": TARGET, "n_bins": 2},
    "response_consistency": {"labels": DRAWN, "k": 2, "n": N_SAMPLES},
    "risk_coverage_curve": {"confidence": CONFIDENCE, "target": TARGET},
    "soft_label_auroc": {"confidence": CONFIDENCE, "target": TARGET},
    "spearman_correlation": {"confidence": CONFIDENCE, "target": TARGET},
    "capability_brier_from_moments": {"confidence": CONFIDENCE, "mu_hat": TARGET, "mu_square_hat": TARGET**2},
    "base_rate_variance_from_moments": {"mu_hat": TARGET, "mu_square_hat": 0.9 * TARGET**2},
    "brier_skill_score_from_moments": {
        "confidence": CONFIDENCE,
        "mu_hat": TARGET,
        "mu_square_hat": 0.9 * TARGET**2,
    },
    # capcal_metrics.sequential (adaptive sampling)
    "unanimity_rule": {"looks": (2, 4)},
    "confidence_width_rule": {"looks": (2, 4), "width": 0.9, "alpha": 0.05, "prior": 0.5},
    "path_counts": {"plan": PLAN, "first_successes": 1, "first_failures": 1},
    "terminal_states": {"plan": PLAN},
    "terminal_probabilities": {"plan": PLAN, "mu": TARGET},
    "unbiased_moment": {**STATES, "successes": 1, "failures": 1},
    "unbiased_moment_given_prefix": {
        **STATES,
        "prefix_size": 1,
        "prefix_successes": np.array([0, 1, 0, 1]),
        "successes": 1,
    },
    "unbiased_mean": STATES,
    "unbiased_mean_square": STATES,
    "unbiased_pass_at_k": {**STATES, "k": 2},
    "sample_proportion": STATES,
    "confidence_sequence": {
        "n_samples": STOP_N,
        "n_correct": STOP_S,
        "alpha": 0.05,
        "prior": 0.5,
        "tolerance": 1e-9,
    },
    "operating_characteristics": {
        "plan": PLAN,
        "mu": TARGET,
        "estimates": np.array([0.0, 1.0, 0.25, 0.5, 0.75]),
    },
    "confidence_sequence_coverage": {"plan": PLAN, "mu": TARGET, "alpha": 0.05, "prior": 0.5},
    # capcal_metrics.agreement (the self-check judge's agreement with the reference)
    "confusion_counts": {"labels_a": LABELS, "labels_b": 1 - LABELS},
    "cohens_kappa": {"labels_a": LABELS, "labels_b": LABELS},
    "kappa_from_counts": {"counts": np.array([[3, 1], [2, 4]])},
    "pooled_kappa": {"question_counts": np.array([[[3, 1], [2, 4]], [[1, 0], [1, 2]]])},
}
AGREEMENT = set(agreement.__all__)


def _function(name: str):
    return getattr(agreement if name in AGREEMENT else cm, name)


# arguments any value of which is valid
UNCHECKED = {"seed", "maximum"}


def _invalid_values(value: object) -> list[object]:
    """Values of the wrong kind, shape, length or range for an argument whose valid value is ``value``."""
    if isinstance(value, str):
        return ["no_such_strategy"]
    if isinstance(value, cm.SequentialPlan):
        return [None, (2, 4)]
    if isinstance(value, float):
        return [float("nan"), -0.5, 2.0, 0.0]
    if isinstance(value, int):
        return [-1, 0, 1.5, "2"]
    array = np.asarray(value)
    bad = [array[:-1], array[..., None], np.full_like(array, np.nan, dtype=float), array + 2.5, -array - 1]
    return [*bad, array.astype(float) + 0.5, np.zeros((0,) + array.shape[1:])]


CASES = [
    (function, argument)
    for function, arguments in VALID.items()
    for argument in arguments
    if argument not in UNCHECKED
]


def test_the_table_has_every_public_function_with_checked_inputs():
    public = {
        name
        for name in cm.__all__
        if inspect.isfunction(getattr(cm, name)) and not name.startswith(("bootstrap", "jackknife"))
    }
    public |= set(agreement.__all__)
    assert public - {"leave_one_out_values"} == set(VALID)
    for function, arguments in VALID.items():
        signature = inspect.signature(_function(function))
        assert set(arguments) <= set(signature.parameters), function
        _function(function)(**arguments)  # the valid arguments are valid


@pytest.mark.parametrize(("function", "argument"), CASES, ids=[f"{f}-{a}" for f, a in CASES])
def test_an_invalid_argument_is_named_in_the_error(function, argument):
    name = re.compile(rf"(?<![A-Za-z_]){re.escape(argument)}(?![A-Za-z_])")
    messages = []
    for bad in _invalid_values(VALID[function][argument]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                _function(function)(**{**VALID[function], argument: bad})
            except (ValueError, TypeError) as error:
                messages.append(str(error))
                if name.search(str(error)):
                    return
    pytest.fail(f"no error names {argument!r}: {messages}")
