"""Where a metric is undefined it returns NaN with one ``UndefinedMetricWarning`` that names the metric and
the reason, and points at the line that called it (the package policy, ``validation.undefined_metric``).
Each case below is the documented degenerate input of one metric; the message is compared whole, so a
warning that names another metric, gives another reason or points inside the package is caught (mutation
testing found these texts unchecked: tests/README.md, "Mutation testing")."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import capcal_metrics as cm
from capcal_metrics import agreement

CONFIDENCE = np.array([0.2, 0.4, 0.6, 0.8])
SAME = np.full(4, 0.5)
ZEROS, ONES = np.zeros(4), np.ones(4)

SAME_TARGET = "every target is the same (no base-rate variance)"
NO_PAIR = "every target is 0 or every target is 1 (no pair to rank)"
NO_VARIANCE = "the base-rate variance is <= 0"

CASES = [
    (agreement.kappa_from_counts, (np.zeros((2, 2)),), "cohens_kappa", "no labelled responses"),
    (agreement.pooled_kappa, (np.zeros((3, 4)),), "cohens_kappa", "no labelled responses"),
    (agreement.cohens_kappa, (ONES, ONES), "cohens_kappa", "both raters give every response the same label"),
    (cm.brier_skill_score, (CONFIDENCE, SAME), "brier_skill_score", SAME_TARGET),
    (
        cm.corrected_brier_skill_score,
        (CONFIDENCE, np.array([0.5, 0.25, 0.5, 0.75]), np.full(4, 4)),
        "corrected_brier_skill_score",
        "the estimated variance of mu over the questions is <= 0 (mu_hat's spread is sampling noise)",
    ),
    (
        cm.brier_skill_score_from_moments,
        (CONFIDENCE, np.array([0.5, 0.25, 0.5, 0.75]), np.zeros(4)),
        "brier_skill_score_from_moments",
        "the estimated variance of mu over the questions is <= 0 (mu_hat's spread is sampling noise)",
    ),
    (cm.random_baseline_brier_skill_score, (SAME,), "random_baseline_brier_skill_score", NO_VARIANCE),
    (cm.pearson_correlation, (SAME, CONFIDENCE), "pearson_correlation", "confidence or target is constant"),
    (cm.pearson_correlation, (CONFIDENCE, SAME), "pearson_correlation", "confidence or target is constant"),
    (cm.spearman_correlation, (SAME, CONFIDENCE), "spearman_correlation", "confidence or target is constant"),
    (cm.spearman_correlation, (CONFIDENCE, SAME), "spearman_correlation", "confidence or target is constant"),
    (cm.soft_label_auroc, (CONFIDENCE, ONES), "soft_label_auroc", NO_PAIR),
    (cm.soft_label_auroc, (CONFIDENCE, ZEROS), "soft_label_auroc", NO_PAIR),
    (cm.auroc, (CONFIDENCE, ONES), "auroc", "labels contain a single class"),
    (cm.auroc, (CONFIDENCE, ZEROS), "auroc", "labels contain a single class"),
    (cm.average_precision, (CONFIDENCE, ZEROS), "average_precision", "labels contain no positive (z = 1)"),
    (
        cm.random_baseline_average_precision,
        (ZEROS,),
        "random_baseline_average_precision",
        "labels contain no positive (z = 1)",
    ),
    (
        cm.prediction_rejection_ratio,
        (CONFIDENCE, SAME),
        "prediction_rejection_ratio",
        "the oracle ranking is no better than random",
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("function", "arguments", "metric", "reason"), CASES, ids=[f"{c[2]}-{i}" for i, c in enumerate(CASES)]
)
def test_an_undefined_metric_warns_once_with_its_name_and_reason(function, arguments, metric, reason):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = function(*arguments)
    assert np.isnan(value)
    assert [w.category for w in caught] == [cm.UndefinedMetricWarning], [str(w.message) for w in caught]
    assert str(caught[0].message) == f"{metric} is undefined: {reason}; returning nan"
    assert caught[0].filename == __file__  # the warning points at the caller, not inside capcal_metrics


# the same metrics where they are defined
DEFINED = {
    agreement.kappa_from_counts: (np.array([[2, 1], [0, 3]]),),
    agreement.pooled_kappa: (np.array([[2, 1, 0, 3], [1, 0, 1, 1]]),),
    agreement.cohens_kappa: (np.array([0, 1, 1, 0]), np.array([0, 1, 0, 0])),
    cm.corrected_brier_skill_score: (CONFIDENCE, np.array([0.0, 0.25, 1.0, 1.0]), np.full(4, 4)),
    cm.brier_skill_score_from_moments: (CONFIDENCE, np.array([0.0, 0.25, 1.0, 1.0]), np.array([0, 0, 1, 1])),
    cm.random_baseline_brier_skill_score: (np.array([0.0, 1.0, 1.0, 0.0]),),
    cm.random_baseline_average_precision: (np.array([0.0, 1.0, 1.0, 0.0]),),
}


def test_a_defined_value_gives_no_warning():
    assert {function for function, *_ in CASES} - set(DEFINED) <= {
        cm.brier_skill_score, cm.pearson_correlation, cm.spearman_correlation, cm.soft_label_auroc,
        cm.auroc, cm.average_precision, cm.prediction_rejection_ratio,
    }  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for function, *_ in CASES:
            arguments = DEFINED.get(function, (CONFIDENCE, np.array([0.0, 1.0, 0.0, 1.0])))
            assert np.isfinite(function(*arguments)), function.__name__


def test_the_bootstraps_warnings_point_at_the_callers_line():
    """A metric undefined on some resamples: each bootstrap's warning counts them and points here."""
    labels = np.array([0, 0, 0, 0, 0, 1])  # a resample without the positive makes AUROC undefined
    scores = np.linspace(0.1, 0.9, 6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", message="auroc is undefined")
        cm.bootstrap_ci(cm.auroc, scores, labels, n_resamples=50, seed=0)
        cm.bootstrap_cis({"auroc": (cm.auroc, (scores, labels))}, n_resamples=50, seed=0)
    assert [w.category for w in caught] == [cm.UndefinedMetricWarning] * 2, [str(w.message) for w in caught]
    assert "resamples; they are left out of" in str(caught[0].message)
    assert [w.filename for w in caught] == [__file__] * 2
