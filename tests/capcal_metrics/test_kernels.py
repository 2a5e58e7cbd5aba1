"""The weighted-kernel machinery: grouping, per-group sums on every path, and the kernel contract (a row of
weights w gives the metric of the data set in which query i appears w_i times)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import capcal_metrics as cm
from capcal_metrics import _kernels as kernels
from capcal_metrics import kernel_registry


def _brute_group_sums(weights: np.ndarray, values: np.ndarray | None, keys: np.ndarray) -> np.ndarray:
    """Per row and per distinct key (ascending): sum of w (times values) over the queries with that key."""
    distinct = np.unique(keys)
    weighted = weights if values is None else weights * values
    return np.stack([weighted[:, keys == key].sum(axis=1) for key in distinct], axis=1)


def test_groups_of_sorted_and_unsorted_keys():
    sorted_groups = kernels.groups_of(np.array([0.1, 0.1, 0.4, 0.7, 0.7, 0.7]))
    np.testing.assert_array_equal(sorted_groups.index, [0, 0, 1, 2, 2, 2])
    np.testing.assert_array_equal(sorted_groups.starts, [0, 2, 3])
    np.testing.assert_array_equal(sorted_groups.values, [0.1, 0.4, 0.7])
    np.testing.assert_array_equal(sorted_groups.counts, [2, 1, 3])
    assert sorted_groups.size == 3 and not sorted_groups.identity

    unsorted = kernels.groups_of(np.array([0.7, 0.1, 0.7, 0.4]))
    assert unsorted.starts is None  # groups are not contiguous in the input order
    np.testing.assert_array_equal(unsorted.index, [2, 0, 2, 1])
    np.testing.assert_array_equal(unsorted.values, [0.1, 0.4, 0.7])
    np.testing.assert_array_equal(unsorted.counts, [1, 1, 2])

    assert kernels.groups_of(np.array([0.1, 0.2, 0.3])).identity  # sorted, no ties: group g is query g
    assert kernels.groups_of(np.array([0.5])).identity


@pytest.mark.parametrize("order", ["sorted", "shuffled"])
@pytest.mark.parametrize("weight_kind", ["counts", "floats"])
@pytest.mark.parametrize("value_kind", [None, "whole", "fractional"])
def test_workspace_sums_match_brute_force(order, weight_kind, value_kind):
    rng = np.random.default_rng(3)
    keys = np.round(rng.random(60), 1)  # many ties
    if order == "sorted":
        keys = np.sort(keys)
    weights = rng.integers(0, 4, size=(5, 60)) if weight_kind == "counts" else rng.random((5, 60))
    values = {None: None, "whole": rng.integers(0, 2, 60).astype(float), "fractional": rng.random(60)}[
        value_kind
    ]
    workspace = kernels.Workspace(weights)
    groups = workspace.groups(keys)
    expected = _brute_group_sums(np.asarray(weights, dtype=float), values, keys)
    np.testing.assert_allclose(workspace.sums(groups, values), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        workspace.cumsums(groups, values), np.cumsum(expected, axis=1), rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(
        kernels.group_sums(np.asarray(weights, dtype=float), values, groups), expected, rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(workspace.total, np.asarray(weights, dtype=float).sum(axis=1))


def test_sums_of_the_grouping_key_itself_are_mass_times_key():
    keys = np.sort(np.round(np.random.default_rng(4).random(40), 1))
    workspace = kernels.Workspace(np.random.default_rng(5).integers(0, 3, size=(3, 40)))
    groups = workspace.groups(keys)
    assert workspace.groups(keys) is groups  # memoised per array object
    np.testing.assert_allclose(workspace.sums(groups, keys), workspace.sums(groups) * groups.values)


def test_loading_new_weights_forgets_the_previous_sums():
    keys = np.array([0.2, 0.2, 0.8])
    workspace = kernels.Workspace(np.array([[1, 1, 1]]))
    groups = workspace.groups(keys)
    np.testing.assert_array_equal(workspace.sums(groups), [[2.0, 1.0]])
    workspace.load(np.array([[0, 3, 2]]))
    np.testing.assert_array_equal(workspace.sums(groups), [[3.0, 2.0]])
    np.testing.assert_array_equal(workspace.total, [5.0])


@pytest.mark.parametrize("metric", sorted(kernel_registry.KERNEL_FACTORIES, key=lambda f: f.__name__))
def test_a_row_of_counts_is_the_metric_of_the_repeated_rows(metric):
    """The contract every kernel keeps: row b of the weights = the metric on np.repeat(rows, weights[b])."""
    rng = np.random.default_rng(6)
    n = 40
    confidence = np.round(rng.random(n), 2)
    target = rng.integers(0, 2, n).astype(float)  # 0/1 so that the label metrics apply too
    target[:2] = [0.0, 1.0]
    arrays = [confidence, target]
    if metric is cm.corrected_capability_brier_score:
        arrays.append(rng.integers(2, 20, n))
    if metric is cm.capability_brier_from_moments:
        arrays.append(target * rng.random(n))  # an estimate of mu^2 in [0, 1]
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=4)
    counts[:, :2] = np.maximum(counts[:, :2], 1)  # both classes present in every row
    workspace = kernels.Workspace(counts)
    kernel = kernel_registry.KERNEL_FACTORIES[metric](workspace, *arrays)
    rows = np.arange(n)
    expected = [metric(*(array[np.repeat(rows, row)] for array in arrays)) for row in counts]
    np.testing.assert_allclose(kernel(), expected, rtol=1e-10, atol=1e-12)


def test_evaluate_once_is_the_unweighted_metric():
    confidence = np.array([0.1, 0.4, 0.4, 0.9])
    target = np.array([0.0, 0.5, 1.0, 1.0])
    value = kernels.evaluate_once(kernel_registry.KERNEL_FACTORIES[cm.brier_score], confidence, target)
    assert value == pytest.approx(np.mean((confidence - target) ** 2), rel=1e-15)
    np.testing.assert_array_equal(kernels.unit_weights(3), [[1, 1, 1]])


class _Unhashable:
    """A callable with ``__eq__`` and no ``__hash__``: ``dict.get`` raises TypeError on it."""

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return self is other

    def __call__(self, confidence: np.ndarray, target: np.ndarray) -> float:
        return float(np.mean((confidence - target) ** 2))


def test_metric_kernel_unwraps_keyword_partials_only():
    """A keyword-only partial of a package metric gets its kernel with those keywords; a partial with
    positional arguments, an unknown or an unhashable callable gets None (the caller then calls it)."""
    confidence = np.array([0.05, 0.15, 0.35, 0.55, 0.75, 0.95])
    target = np.array([0.0, 0.5, 0.25, 1.0, 0.5, 1.0])
    workspace = kernels.Workspace(kernels.unit_weights(6))
    for n_bins in (2, 5):
        metric = functools.partial(cm.expected_calibration_error, n_bins=n_bins)
        kernel = kernel_registry.metric_kernel(workspace, metric, [confidence, target])
        assert kernel is not None
        assert kernel()[0] == pytest.approx(metric(confidence, target), abs=1e-15)
    assert cm.expected_calibration_error(confidence, target, n_bins=2) != pytest.approx(
        cm.expected_calibration_error(confidence, target, n_bins=5)
    )
    positional = functools.partial(cm.brier_score, confidence)
    assert kernel_registry.metric_kernel(workspace, positional, [target]) is None
    assert kernel_registry.metric_kernel(workspace, lambda c, t: 0.0, [confidence, target]) is None
    assert kernel_registry.metric_kernel(workspace, _Unhashable(), [confidence, target]) is None
    interval = cm.bootstrap_ci(_Unhashable(), confidence, target, n_resamples=20)
    assert interval.estimate == pytest.approx(cm.brier_score(confidence, target), abs=1e-15)


@pytest.mark.parametrize("value_kind", [None, "whole", "fractional"])
def test_cumsums_asked_before_sums_match_brute_force(value_kind):
    """Every kernel asks for the group sums first; a fresh workspace asked for the cumulative sums first (on
    the exact integer path: counts, sorted keys) gives the same as brute force, and then the same sums."""
    rng = np.random.default_rng(12)
    keys = np.sort(np.round(rng.random(50), 1))
    values = {None: None, "whole": rng.integers(0, 2, 50).astype(float), "fractional": rng.random(50)}[
        value_kind
    ]
    weights = rng.integers(0, 4, size=(3, 50))
    workspace = kernels.Workspace(weights)
    groups = workspace.groups(keys)
    expected = _brute_group_sums(weights.astype(float), values, keys)
    np.testing.assert_allclose(workspace.cumsums(groups, values), np.cumsum(expected, axis=1), rtol=1e-12)
    np.testing.assert_allclose(workspace.sums(groups, values), expected, rtol=1e-12, atol=1e-12)
