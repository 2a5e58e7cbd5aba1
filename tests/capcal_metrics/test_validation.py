"""Input validation: shared checks and every public metric's reaction to bad input."""

from __future__ import annotations

import warnings
from fractions import Fraction
from functools import partial

import numpy as np
import pytest

import capcal_metrics as cm
from capcal_metrics.validation import (
    check_binary_labels,
    check_fraction,
    check_integer,
    check_probabilities,
    check_same_length,
    check_whole_numbers,
    undefined_metric,
)

# Every public (confidence, target-like) metric; label metrics additionally require 0/1.
PAIR_METRICS = {
    "expected_calibration_error": cm.expected_calibration_error,
    "debiased_expected_calibration_error": cm.debiased_expected_calibration_error,
    "brier_skill_score": cm.brier_skill_score,
    "corrected_brier_skill_score": partial(cm.corrected_brier_skill_score, n_samples=10),
    "maximum_calibration_error": cm.maximum_calibration_error,
    "adaptive_calibration_error": cm.adaptive_calibration_error,
    "brier_score": cm.brier_score,
    "corrected_capability_brier_score": partial(cm.corrected_capability_brier_score, n_samples=10),
    "soft_label_auroc": cm.soft_label_auroc,
    "auroc": cm.auroc,
    "average_precision": cm.average_precision,
    "pearson_correlation": cm.pearson_correlation,
    "spearman_correlation": cm.spearman_correlation,
    "risk_coverage_curve": cm.risk_coverage_curve,
    "area_under_risk_coverage_curve": cm.area_under_risk_coverage_curve,
    "prediction_rejection_ratio": cm.prediction_rejection_ratio,
    "reliability_diagram": cm.reliability_diagram,
}
LABEL_METRICS = {"auroc", "average_precision"}
GOOD_CONFIDENCE = [0.1, 0.9, 0.4, 0.7]
GOOD_TARGET = [0.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize("name", sorted(PAIR_METRICS))
def test_public_metrics_accept_valid_input(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # valid, non-degenerate input: no warning either
        PAIR_METRICS[name](GOOD_CONFIDENCE, GOOD_TARGET)


@pytest.mark.parametrize("name", sorted(PAIR_METRICS))
@pytest.mark.parametrize(
    ("confidence", "target", "message"),
    [
        ([0.1, 0.9, 0.4], GOOD_TARGET, "same length"),
        ([], [], "confidence is empty"),
        ([0.1, np.nan, 0.4, 0.7], GOOD_TARGET, "confidence contains NaN"),
        ([0.1, np.inf, 0.4, 0.7], GOOD_TARGET, "confidence contains NaN or infinite"),
        ([0.1, 1.2, 0.4, 0.7], GOOD_TARGET, r"confidence must lie in \[0, 1\]"),
        ([-0.1, 0.2, 0.4, 0.7], GOOD_TARGET, r"confidence must lie in \[0, 1\]"),
        (GOOD_CONFIDENCE, [0.0, 1.0, np.nan, 1.0], "contains NaN"),
        (GOOD_CONFIDENCE, [0.0, 1.0, 2.0, 1.0], r"must (lie in \[0, 1\]|be binary)"),
        ([[0.1, 0.9], [0.4, 0.7]], GOOD_TARGET, "1-D"),
        (["a", "b", "c", "d"], GOOD_TARGET, "numeric"),
    ],
)
def test_public_metrics_reject_invalid_input(name, confidence, target, message):
    with pytest.raises(ValueError, match=message):
        PAIR_METRICS[name](confidence, target)


@pytest.mark.parametrize("name", sorted(LABEL_METRICS))
def test_label_metrics_reject_soft_targets(name):
    with pytest.raises(ValueError, match=r"labels must be binary.*0\.5.*index 2"):
        PAIR_METRICS[name](GOOD_CONFIDENCE, [0.0, 1.0, 0.5, 1.0])


def test_error_messages_name_the_argument_and_position():
    with pytest.raises(ValueError, match=r"^mu_hat must lie in \[0, 1\]; found 1\.5 at index 1$"):
        check_probabilities([0.2, 1.5], "mu_hat")
    with pytest.raises(ValueError, match=r"^scores contains NaN or infinite values \(first at index 2\)$"):
        check_probabilities([0.2, 0.5, np.nan], "scores")
    with pytest.raises(ValueError, match=r"confidence=3, target=2"):
        check_same_length(confidence=np.zeros(3), target=np.zeros(2))


def test_probability_bounds_are_inclusive_and_tight():
    np.testing.assert_array_equal(check_probabilities([0.0, 1.0], "c"), [0.0, 1.0])
    for just_outside in (np.nextafter(1.0, 2.0), np.nextafter(0.0, -1.0)):
        with pytest.raises(ValueError, match=r"must lie in \[0, 1\]"):
            check_probabilities([0.5, just_outside], "c")


def test_probability_check_returns_float_copy_of_clean_input():
    out = check_probabilities([0, 1, True], "x")
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [0.0, 1.0, 1.0])
    assert check_probabilities(np.array(0.3), "x", ndim=None).shape == ()


def test_binary_labels_accept_bool_and_integers():
    np.testing.assert_array_equal(check_binary_labels(np.array([True, False]), "z"), [1.0, 0.0])
    np.testing.assert_array_equal(check_binary_labels([0, 1, 1], "z"), [0.0, 1.0, 1.0])


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3", None])
def test_positive_integer_rejects(bad):
    with pytest.raises(ValueError, match="k must be a positive integer"):
        check_integer(bad, "k")


@pytest.mark.parametrize("good", [1, 7, np.int64(3), 4.0])
def test_positive_integer_accepts(good):
    assert check_integer(good, "k") == int(good)


@pytest.mark.parametrize(
    ("bad", "message"),
    [([1, 2.5], "whole numbers"), ([1, np.nan], "NaN"), ([1, -2], ">= 0"), (["x"], "numeric")],
)
def test_whole_numbers_rejects(bad, message):
    with pytest.raises(ValueError, match=message):
        check_whole_numbers(bad, "n_correct")


def test_fraction_bounds():
    assert check_fraction(1.0, "max_rejection", include_one=True) == 1.0
    with pytest.raises(ValueError, match=r"confidence_level must be in \(0, 1\)"):
        check_fraction(1.0, "confidence_level", include_one=False)
    with pytest.raises(ValueError, match="must be in"):
        check_fraction(0.0, "max_rejection", include_one=True)


def test_undefined_metric_warns_and_returns_nan():
    with pytest.warns(cm.UndefinedMetricWarning, match="auroc is undefined: one class"):
        assert np.isnan(undefined_metric("auroc", "one class"))


@pytest.mark.parametrize("n_bins", [0, -3, 2.5])
def test_invalid_bin_count(n_bins):
    with pytest.raises(ValueError, match="n_bins must be a positive integer"):
        cm.expected_calibration_error(GOOD_CONFIDENCE, GOOD_TARGET, n_bins=n_bins)


def test_invalid_strategy():
    with pytest.raises(ValueError, match="strategy must be one of"):
        cm.expected_calibration_error(GOOD_CONFIDENCE, GOOD_TARGET, strategy="quantile")


def test_integer_check_states_the_minimum():
    assert check_integer(0, "total_budget", minimum=0) == 0
    with pytest.raises(
        ValueError, match=r"^seeds must be a non-negative integer \(an integer >= 0\), got -1$"
    ):
        check_integer(-1, "seeds", minimum=0)
    with pytest.raises(ValueError, match=r"^k must be an integer >= 2, got 1$"):
        check_integer(1, "k", minimum=2)


@pytest.mark.parametrize("text", ["0.5", ["0.5", "0.2"], np.array(["1", "0"])])
def test_text_is_not_parsed_as_numbers(text):
    with pytest.raises(ValueError, match="must be numeric, got text"):
        check_probabilities(text, "confidence", ndim=None)
    with pytest.raises(ValueError, match="must be numeric, got text"):
        check_whole_numbers(text, "n_samples")


def test_length_and_shape_of_per_question_arrays():
    np.testing.assert_array_equal(check_probabilities([0.1, 0.2], "p", length=2), [0.1, 0.2])
    with pytest.raises(ValueError, match=r"^p must have one entry per question \(3\), got 2$"):
        check_probabilities([0.1, 0.2], "p", length=3)
    np.testing.assert_array_equal(check_whole_numbers([1, 2], "caps", ndim=1, length=2), [1, 2])
    with pytest.raises(ValueError, match=r"caps must be a 1-D array, got shape \(\)"):
        check_whole_numbers(3, "caps", ndim=1)
    with pytest.raises(ValueError, match="^caps is empty$"):
        check_whole_numbers([], "caps", ndim=1)
    assert check_whole_numbers([], "caps").size == 0  # without ndim: any shape, may be empty


def test_error_messages_give_the_position_in_every_dimension():
    # a 2-D array's first bad entry (row-major order) is named by its (row, column) pair
    values = np.full((3, 4), 0.5)
    values[1, 2], values[2, 0] = 1.5, -0.5
    with pytest.raises(ValueError, match=r"^mu must lie in \[0, 1\]; found 1\.5 at index \(1, 2\)$"):
        check_probabilities(values, "mu", ndim=2)
    values[0, 3] = np.inf
    with pytest.raises(ValueError, match=r"^mu contains NaN or infinite values \(first at index \(0, 3\)\)$"):
        check_probabilities(values, "mu", ndim=None)


def test_binary_labels_are_one_dimensional():
    with pytest.raises(ValueError, match=r"^labels must be a 1-D array, got shape \(2, 2\)$"):
        check_binary_labels([[0, 1], [1, 0]], "labels")


def test_text_is_refused_naming_the_argument_of_each_check():
    """The text guard names the argument it guards, in one message (it used to be wrapped in a second "could
    not convert" message; mutation testing: the name was dropped unseen)."""
    with pytest.raises(ValueError, match=r"^confidence must be numeric, got text$"):
        check_probabilities(["0.5"], "confidence")
    with pytest.raises(ValueError, match=r"^n_samples must be numeric, got text$"):
        check_whole_numbers(["3"], "n_samples")
    with pytest.raises(ValueError, match=r"^alpha must be a number, got 'five percent'$"):
        check_fraction("five percent", "alpha", include_one=False)


def test_whole_numbers_keep_every_integer_exactly_and_check_objects_as_floats():
    """Integers stay integers (2**53 + 1 has no float64; a detour through float would change it), and an
    object array is read as floats, so a fraction in it is refused rather than truncated by the int cast."""
    big = np.array([2**53 + 1, 2**62 + 1], dtype=np.int64)
    assert check_whole_numbers(big, "n").tolist() == [2**53 + 1, 2**62 + 1]
    assert check_whole_numbers([True, False], "n").tolist() == [1, 0]
    with pytest.raises(ValueError, match=r"^n must contain whole numbers$"):
        check_whole_numbers(np.array([Fraction(1, 2), 2], dtype=object), "n")
    assert check_whole_numbers(np.array([Fraction(4, 2), 3.0], dtype=object), "n").tolist() == [2, 3]


def test_confidence_and_target_errors_name_confidence_and_the_targets_own_name():
    """Out-of-range and length errors name the target as the caller calls it (``target_name``)."""
    with pytest.raises(ValueError, match=r"^mu_hat must lie in \[0, 1\]; found 1.5 at index 1$"):
        cm.corrected_capability_brier_score([0.5, 0.5], [0.5, 1.5], 4)
    with pytest.raises(ValueError, match=r"^inputs must have the same length, got confidence=2, target=3$"):
        cm.brier_score([0.5, 0.5], [0.5, 1.0, 0.0])


def test_unconvertible_and_scalar_inputs_get_whole_messages():
    with pytest.raises(ValueError, match=r"^p must have one entry per question \(3\), got a scalar$"):
        check_probabilities(0.5, "p", ndim=None, length=3)
    with pytest.raises(ValueError, match=r"^p must be numeric, could not convert it to float \(.+\)$"):
        check_probabilities([object()], "p")
    with pytest.raises(ValueError, match=r"^n must be numeric, could not convert it \(.+\)$"):
        check_whole_numbers([object()], "n")
