"""Binning rules and reliability-diagram data, against brute-force loops."""

from __future__ import annotations

import numpy as np
import pytest

import capcal_metrics as cm


def brute_force_equal_width_bin(value: float, n_bins: int) -> int:
    for b in range(n_bins):
        low, high = b / n_bins, (b + 1) / n_bins
        if low <= value < high or (b == n_bins - 1 and low <= value <= high):
            return b
    raise AssertionError(f"{value} fell in no bin")


@pytest.mark.parametrize("n_bins", [1, 3, 10, 15])
def test_equal_width_bins_match_loop(n_bins):
    rng = np.random.default_rng(n_bins)
    edges = [b / n_bins for b in range(n_bins + 1)]
    confidence = np.r_[rng.random(300), edges, np.nextafter(edges, 0.0)]  # every edge and just below it
    expected = [brute_force_equal_width_bin(value, n_bins) for value in confidence]
    np.testing.assert_array_equal(cm.assign_bins(confidence, n_bins), expected)


def test_confidence_one_lands_in_the_closed_last_bin():
    bins = cm.assign_bins([1.0, 0.9, np.nextafter(0.9, 0.0), 0.0], 10)
    np.testing.assert_array_equal(bins, [9, 9, 8, 0])
    diagram = cm.reliability_diagram([1.0, 1.0], [1.0, 0.0])
    assert diagram.count[-1] == 2 and diagram.count.sum() == 2


def test_decimal_confidences_open_their_own_bin():
    # Verbalized confidences 0.0, 0.1, ..., 0.9 must each start bin k (np.linspace edges would put 0.3, 0.6
    # and 0.7 in the bin below), and 1.0 joins the last bin.
    decimals = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    np.testing.assert_array_equal(cm.assign_bins(decimals, 10), list(range(10)) + [9])
    np.testing.assert_array_equal(cm.assign_bins([0.25, 0.5, 0.75], 4), [1, 2, 3])


def test_equal_width_edges():
    np.testing.assert_allclose(cm.equal_width_bin_edges(4), [0.0, 0.25, 0.5, 0.75, 1.0])
    with pytest.raises(ValueError, match="n_bins"):
        cm.equal_width_bin_edges(0)


@pytest.mark.parametrize(("n_queries", "n_bins"), [(1000, 10), (997, 10), (37, 5), (7, 10)])
def test_equal_mass_bins_without_ties_follow_sorted_position(n_queries, n_bins):
    rng = np.random.default_rng(n_queries)
    confidence = rng.random(n_queries)
    bins = cm.assign_bins(confidence, n_bins, "equal_mass")
    rank = np.empty(n_queries, dtype=int)
    rank[np.argsort(confidence)] = np.arange(n_queries)
    np.testing.assert_array_equal(bins, [(n_bins * r) // n_queries for r in rank])
    counts = np.bincount(bins, minlength=n_bins)
    if n_queries >= n_bins:
        assert counts.max() - counts.min() <= 1


def test_equal_mass_bins_keep_ties_together_and_ignore_row_order():
    rng = np.random.default_rng(3)
    confidence = np.round(rng.random(500), 1)  # 11 distinct values
    bins = cm.assign_bins(confidence, 10, "equal_mass")
    for value in np.unique(confidence):
        assert np.unique(bins[confidence == value]).size == 1
    # Bin index is nondecreasing in confidence.
    order = np.argsort(confidence, kind="stable")
    assert np.all(np.diff(bins[order]) >= 0)
    permutation = rng.permutation(confidence.size)
    np.testing.assert_array_equal(
        cm.assign_bins(confidence[permutation], 10, "equal_mass"), bins[permutation]
    )


def test_equal_mass_tie_run_goes_to_bin_of_its_midpoint():
    # Sorted positions 0..9; the run of 0.5s occupies 2..7, midpoint 4.5 -> bin floor(2 * 4.5 / 10) = 0.
    confidence = np.array([0.1, 0.2] + [0.5] * 6 + [0.8, 0.9])
    np.testing.assert_array_equal(cm.assign_bins(confidence, 2, "equal_mass"), [0] * 8 + [1, 1])


@pytest.mark.parametrize("strategy", ["equal_width", "equal_mass"])
def test_reliability_diagram_matches_loop(strategy, make_data):
    data = make_data(n_queries=300, seed=5, decimals=2)
    diagram = cm.reliability_diagram(data.confidence, data.mu_hat, n_bins=8, strategy=strategy)
    bins = cm.assign_bins(data.confidence, 8, strategy)
    for b in range(8):
        members = bins == b
        assert diagram.count[b] == members.sum()
        if members.any():
            assert diagram.mean_confidence[b] == pytest.approx(data.confidence[members].mean(), abs=1e-12)
            assert diagram.mean_target[b] == pytest.approx(data.mu_hat[members].mean(), abs=1e-12)
            if strategy == "equal_mass":
                assert diagram.bin_lower[b] == data.confidence[members].min()
                assert diagram.bin_upper[b] == data.confidence[members].max()
        else:
            assert np.isnan(diagram.mean_confidence[b]) and np.isnan(diagram.mean_target[b])
    if strategy == "equal_width":
        np.testing.assert_array_equal(diagram.bin_lower, [b / 8 for b in range(8)])
        np.testing.assert_array_equal(diagram.bin_upper, [b / 8 for b in range(1, 9)])


def test_reliability_diagram_single_bin_and_empty_bins():
    diagram = cm.reliability_diagram([0.2, 0.4], [1.0, 0.0], n_bins=1)
    assert diagram.count.tolist() == [2]
    assert diagram.mean_confidence[0] == pytest.approx(0.3)
    assert diagram.mean_target[0] == pytest.approx(0.5)
    sparse = cm.reliability_diagram([0.05, 0.95], [0.0, 1.0], n_bins=10)
    assert sparse.count.tolist() == [1] + [0] * 8 + [1]
    assert np.isnan(sparse.mean_confidence[1:9]).all()


def test_the_default_is_ten_bins():
    rng = np.random.default_rng(11)
    confidence, target = rng.random(200), rng.random(200)
    np.testing.assert_array_equal(cm.equal_width_bin_edges(), np.arange(11) / 10)
    np.testing.assert_array_equal(cm.assign_bins(confidence), cm.assign_bins(confidence, n_bins=10))
    assert cm.assign_bins(np.array([0.95, 1.0])).tolist() == [9, 9]
    default = cm.reliability_diagram(confidence, target)
    for got, want in zip(default, cm.reliability_diagram(confidence, target, n_bins=10), strict=True):
        np.testing.assert_array_equal(got, want)
    assert default.count.size == 10


@pytest.mark.parametrize("strategy", ["equal_width", "equal_mass"])
def test_empty_top_bins_keep_every_array_n_bins_long(strategy):
    # every confidence in the lowest bins: the per-bin arrays still have n_bins entries, the empty ones 0/NaN
    confidence = np.array([0.01, 0.02, 0.03, 0.04]) if strategy == "equal_width" else np.full(4, 0.3)
    diagram = cm.reliability_diagram(confidence, [0.0, 1.0, 1.0, 0.0], n_bins=5, strategy=strategy)
    for array in diagram:
        assert array.shape == (5,)
    empty = diagram.count == 0
    assert empty.sum() == 4
    assert np.isnan(diagram.mean_confidence[empty]).all() and np.isnan(diagram.mean_target[empty]).all()
    assert diagram.mean_confidence[~empty] == pytest.approx(confidence.mean())
    assert diagram.mean_target[~empty] == pytest.approx(0.5)
