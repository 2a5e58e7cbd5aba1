"""Confusion counts and Cohen's kappa of two 0/1 labelings, against scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from capcal_metrics.agreement import cohens_kappa, confusion_counts, kappa_from_counts
from capcal_metrics.validation import UndefinedMetricWarning


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("flip", [0.0, 0.1, 0.4, 0.9])
def test_match_sklearn(seed: int, flip: float) -> None:
    rng = np.random.default_rng(seed)
    a = (rng.random(300) < rng.uniform(0.1, 0.9)).astype(int)
    b = np.where(rng.random(300) < flip, 1 - a, a)
    assert (confusion_counts(a, b) == confusion_matrix(a, b, labels=[0, 1])).all()
    assert cohens_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)


def test_known_values() -> None:
    # n = 100: p_o = 0.6; rows 0.5/0.5, columns 0.7/0.3: p_e = 0.35 + 0.15 = 0.5; kappa = 0.1 / 0.5 = 0.2
    assert kappa_from_counts([[40, 10], [30, 20]]) == pytest.approx(0.2)
    assert cohens_kappa([0, 1, 0, 1], [0, 1, 0, 1]) == 1.0
    assert cohens_kappa([0, 1, 0, 1], [1, 0, 1, 0]) == -1.0
    assert confusion_counts([True, False], [True, True]).tolist() == [[0, 1], [0, 1]]


def test_undefined_is_nan_with_a_warning() -> None:
    with pytest.warns(UndefinedMetricWarning, match="same label"):
        assert np.isnan(cohens_kappa([1, 1, 1], [1, 1, 1]))
    with pytest.warns(UndefinedMetricWarning, match="no labelled"):
        assert np.isnan(kappa_from_counts([[0, 0], [0, 0]]))
    assert cohens_kappa([1, 1, 1], [0, 0, 0]) == 0.0  # sklearn: 0.0 as well


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ([0, 1, 2], [0, 1, 1], "labels_a must be binary"),
        ([0, 1], [0, 1, 1], "same length"),
        ([0, np.nan], [0, 1], "labels_a contains NaN"),
        ([], [], "labels_a is empty"),
        ("01", [0, 1], "numeric"),
    ],
)
def test_bad_input_is_refused(a, b, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        confusion_counts(a, b)


def test_counts_must_be_square_whole_numbers() -> None:
    with pytest.raises(ValueError, match="square"):
        kappa_from_counts([[1, 2, 3], [4, 5, 6]])
    with pytest.raises(ValueError, match="whole numbers"):
        kappa_from_counts([[1.5, 2], [3, 4]])
    with pytest.raises(ValueError, match=">= 0"):
        kappa_from_counts([[-1, 2], [3, 4]])
