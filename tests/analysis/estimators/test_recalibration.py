"""Isotonic recalibration: equal to scikit-learn's IsotonicRegression, split guard, JSON round trip."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from analysis.estimators import SplitLeakageError, fit_isotonic, isotonic_fit_points, load_isotonic


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_scikit_learn_isotonic_regression(seed, weighted):
    rng = np.random.default_rng(seed)
    n = 500
    confidence = np.round(rng.uniform(0.1, 0.9, n), 2)  # rounded: many ties
    mu_hat = np.clip(confidence + rng.normal(0, 0.25, n), 0, 1)
    mu_hat = np.round(mu_hat * 10) / 10
    weights = rng.uniform(0.5, 2.0, n) if weighted else None
    ids = [f"cal/{i}" for i in range(n)]
    ours = fit_isotonic(confidence, mu_hat, ids, sample_weight=weights)
    reference = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(
        confidence, mu_hat, sample_weight=weights
    )
    fresh = np.concatenate([rng.uniform(0, 1, 2000), [0.0, 1.0, 0.1, 0.9], np.unique(confidence)])
    held_out = [f"eval/{i}" for i in range(fresh.size)]
    np.testing.assert_allclose(ours.predict(fresh, held_out), reference.predict(fresh), rtol=0, atol=1e-12)
    assert np.all(np.diff(ours.y) >= 0) and ours.y.min() >= 0 and ours.y.max() <= 1


def test_edge_cases_single_point_and_all_equal():
    x, y = isotonic_fit_points([0.4, 0.4, 0.4], [0.0, 1.0, 0.5])
    assert x.tolist() == [0.4] and y.tolist() == [0.5]
    recalibrator = fit_isotonic([0.4, 0.4, 0.4], [0.0, 1.0, 0.5], ["a", "b", "c"])
    np.testing.assert_allclose(recalibrator.predict([0.0, 0.4, 1.0], ["d", "e", "f"]), [0.5, 0.5, 0.5])
    # decreasing data pools into one block: the weighted mean
    _, y = isotonic_fit_points([0.1, 0.2, 0.3], [0.9, 0.5, 0.1], [1.0, 1.0, 2.0])
    np.testing.assert_allclose(y, [0.4, 0.4, 0.4])


def test_fit_points_name_the_bad_input_exactly():
    """Each refusal of isotonic_fit_points names its argument as the reader knows it (confidence, mu_hat,
    sample_weight): a renamed or swapped name would send a user to the wrong column."""
    with pytest.raises(ValueError) as error:
        isotonic_fit_points([0.2, 1.5], [0.1, 0.3])
    assert str(error.value) == "confidence must lie in [0, 1]; found 1.5 at index 1"
    with pytest.raises(ValueError) as error:
        isotonic_fit_points([0.2, 0.5], [0.1, -0.3])
    assert str(error.value) == "mu_hat must lie in [0, 1]; found -0.3 at index 1"
    with pytest.raises(ValueError) as error:
        isotonic_fit_points([0.2, 0.5, 0.7], [0.1, 0.3])
    assert str(error.value) == "mu_hat must have one entry per question (3), got 2"
    with pytest.raises(ValueError) as error:
        isotonic_fit_points([0.2, 0.5], [0.1, 0.3], [0.0, 0.0])
    assert str(error.value) == "sample_weight must be finite, >= 0, not all zero, one per question"


def test_refuses_calibration_questions_and_round_trips(tmp_path):
    rng = np.random.default_rng(3)
    confidence, mu_hat = rng.uniform(size=50), rng.uniform(size=50)
    ids = [f"cal/{i}" for i in range(50)]
    recalibrator = fit_isotonic(confidence, mu_hat, ids)
    with pytest.raises(SplitLeakageError, match="fitted or tuned on 2"):
        recalibrator.predict([0.5, 0.6, 0.7], ["eval/1", "cal/3", "cal/4"])
    path = recalibrator.save(tmp_path / "iso.json")
    loaded = load_isotonic(path)
    grid = np.linspace(0, 1, 101)
    held_out = [f"eval/{i}" for i in range(101)]
    np.testing.assert_array_equal(loaded.predict(grid, held_out), recalibrator.predict(grid, held_out))
    with pytest.raises(SplitLeakageError):
        loaded.predict([0.5], ["cal/0"])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fit_isotonic([0.5, 1.5], [0.2, 0.3], ["a", "b"])
    with pytest.raises(ValueError, match="duplicates"):
        fit_isotonic([0.5, 0.6], [0.2, 0.3], ["a", "a"])


def test_fit_isotonic_names_a_bad_confidence_exactly():
    """fit_isotonic's own check names the confidence argument as the reader knows it (not renamed)."""
    with pytest.raises(ValueError) as error:
        fit_isotonic([0.5, 1.5], [0.2, 0.3], ["a", "b"])
    assert str(error.value) == "confidence must lie in [0, 1]; found 1.5 at index 1"


def test_load_isotonic_keeps_every_saved_field(tmp_path):
    """A loaded recalibrator carries the saved calibration fingerprint, count and question hashes (a loader
    that dropped one would lose which split it was fitted on), and saves back to the very same file."""
    recalibrator = fit_isotonic([0.1, 0.4, 0.8], [0.2, 0.5, 0.9], ["a", "b", "c"])
    path = recalibrator.save(tmp_path / "iso.json")
    loaded = load_isotonic(path)
    assert loaded.calibration_ids_sha256 == recalibrator.calibration_ids_sha256
    assert loaded.calibration_ids_sha256 == hashlib.sha256(b"a\nb\nc").hexdigest()  # sorted, joined
    assert loaded.n_calibration == 3
    assert loaded.seen_question_hashes == recalibrator.seen_question_hashes
    assert loaded.save(tmp_path / "again.json").read_text() == path.read_text()


def test_load_isotonic_refuses_mismatched_fitted_points(tmp_path):
    """A saved file whose x and y differ in length (or are not monotone) is refused, naming the file."""
    recalibrator = fit_isotonic([0.1, 0.4, 0.8], [0.2, 0.5, 0.9], ["a", "b", "c"])
    path = recalibrator.save(tmp_path / "iso.json")
    payload = json.loads(path.read_text())
    refused = [([0.1, 0.5], [0.2, 0.3, 0.4]), ([0.5, 0.1], [0.2, 0.3]), ([0.1, 0.5], [0.3, 0.2])]
    refused.append(([0.1, 0.1], [0.2, 0.3]))  # a repeated x: strictly ascending is the boundary
    for x, y in refused:
        path.write_text(json.dumps({**payload, "x": x, "y": y}))
        with pytest.raises(ValueError) as error:
            load_isotonic(path)
        assert str(error.value) == f"{path}: fitted points must be ascending x with non-decreasing y"
    path.write_text(json.dumps({**payload, "x": [0.1, 0.5], "y": [0.3, 0.3]}))  # a flat y is non-decreasing
    assert list(load_isotonic(path).y) == [0.3, 0.3]
