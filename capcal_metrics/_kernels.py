"""Weighted metric kernels: the machinery behind every metric of this package and the bootstrap.

Each metric is computed by a private *kernel factory* ``_<metric>_kernel(workspace, *arrays, **keywords)``.
The factory does the data-only work once (keyword validation, grouping of tied values, bin assignment) and
returns ``evaluate()``, which computes the metric for every row of the workspace's current ``weights``
matrix (B, N): row b gives the metric of the data set in which query i appears ``weights[b, i]`` times. The
public metric evaluates one row of ones (:func:`evaluate_once`); the bootstrap loads chunks of bootstrap
counts into one workspace shared by all the metrics it evaluates.

A :class:`Workspace` shares work between kernels: groupings of the same array are computed once, and the
per-group weighted sums ``M_g = sum_{i in g} w_i``, ``sum_{i in g} w_i v_i`` and their cumulative sums over
the groups (ascending values) are computed once per chunk however many kernels ask for them. When every
group is contiguous in the input order (the input sorted by the grouping key, as the bootstrap arranges for
the first array, normally the confidence) a group sum is a segment sum (``numpy.add.reduceat``), otherwise a
per-row ``numpy.bincount`` over the group index; no (B, N) matrix is ever gathered into another order. When
the weights are integer counts and the values whole numbers (the weights alone, 0/1 labels) the contiguous
group sums and their cumulative sums come from one int64 cumulative sum over the queries, read at the group
ends: exact, and several times faster than floating-point segment and cumulative sums.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

Kernel = Callable[[], np.ndarray]


class Groups(NamedTuple):
    """Queries grouped by equal key, groups numbered 0..size-1 in ascending key.

    ``index[i]`` is the group of query i (input order); ``starts`` are the first positions of the groups when
    every group is contiguous in the input order, else None; ``values`` are the group keys (ascending);
    ``counts`` the number of queries per group.
    """

    index: np.ndarray
    starts: np.ndarray | None
    values: np.ndarray
    counts: np.ndarray

    @property
    def size(self) -> int:
        return int(self.values.size)

    @property
    def identity(self) -> bool:
        """Group g is query g (sorted keys without ties): per-group columns are per-query columns."""
        return self.starts is not None and self.size == self.index.size


def groups_of(keys: np.ndarray) -> Groups:
    """Group queries by equal ``keys`` (1-D): O(N) if ``keys`` is already sorted, else one O(N log N) sort."""
    keys = np.asarray(keys)
    if keys.size > 1 and np.all(keys[1:] >= keys[:-1]):
        new_group = np.r_[True, keys[1:] != keys[:-1]]
        starts = np.flatnonzero(new_group)
        index = np.cumsum(new_group) - 1
        counts = np.diff(np.r_[starts, keys.size])
        return Groups(index, starts, keys[starts], counts)
    values, index, counts = np.unique(keys, return_inverse=True, return_counts=True)
    starts = np.zeros(1, dtype=np.intp) if keys.size == 1 else None
    return Groups(index.reshape(-1), starts, values, counts)


class Workspace:
    """Current weights (B, N) plus memoised groupings (per array) and group sums (per chunk of weights).

    Memo keys are object identities; the workspace keeps a reference to every keyed array, so an identity
    cannot be reused while it lives. Callers must not modify arrays they handed in.
    """

    def __init__(self, weights: np.ndarray | None = None) -> None:
        self._groups: dict[int, tuple[np.ndarray, Groups]] = {}
        self._keys: dict[int, np.ndarray] = {}
        self._whole: dict[int, tuple[np.ndarray, np.ndarray | None]] = {}
        self._chunk: dict[tuple[str, int, int], tuple[Any, np.ndarray]] = {}
        self.weights = np.empty((0, 0))
        self.counts: np.ndarray | None = None
        self.total = np.empty(0)
        if weights is not None:
            self.load(weights)

    def load(self, weights: np.ndarray) -> None:
        """Make ``weights`` (B, N) the current rows; forgets the previous rows' sums.

        Integer weights (bootstrap counts) are kept as int64 ``counts`` for exact integer sums, and as float64
        ``weights`` for everything else.
        """
        weights = np.asarray(weights)
        self.counts = weights.astype(np.int64, copy=False) if weights.dtype.kind in "iu" else None
        self.weights = weights.astype(np.float64, copy=False)
        self.total = self.weights.sum(axis=1)  # K = sum_i w_i per row
        self._chunk.clear()

    def groups(self, keys: np.ndarray) -> Groups:
        """:func:`groups_of` ``keys``, computed once per array object."""
        if id(keys) not in self._groups:
            self._groups[id(keys)] = (keys, groups_of(keys))
            self._keys[id(self._groups[id(keys)][1])] = keys
        return self._groups[id(keys)][1]

    def sums(self, groups: Groups, values: np.ndarray | None = None) -> np.ndarray:
        """Per row and group g: ``sum_{i in g} w_i values_i`` (of w_i alone if values is None), (B, G).

        When ``values`` is the very array ``groups`` were made of it is constant within each group, and the
        sums are ``M_g * key_g``, with no pass over the queries.
        """
        key = ("sums", id(groups), id(values))
        if key not in self._chunk:
            if values is not None and self._keys.get(id(groups)) is values:
                result = self.sums(groups) * groups.values
            elif self._integer_path(groups, values):
                self._integer_sums(groups, values)
                return self._chunk[key][1]
            else:
                result = group_sums(self.weights, values, groups)
            self._chunk[key] = ((groups, values), result)
        return self._chunk[key][1]

    def cumsums(self, groups: Groups, values: np.ndarray | None = None) -> np.ndarray:
        """Inclusive cumulative :meth:`sums` over the groups in ascending key, (B, G)."""
        key = ("cumsums", id(groups), id(values))
        if key not in self._chunk:
            if self._integer_path(groups, values) and self._keys.get(id(groups)) is not values:
                self._integer_sums(groups, values)
                return self._chunk[key][1]
            self._chunk[key] = ((groups, values), np.cumsum(self.sums(groups, values), axis=1))
        return self._chunk[key][1]

    def _whole_numbers(self, values: np.ndarray) -> np.ndarray | None:
        """``values`` as int64 if they are whole numbers of modest size (checked once per array) or None."""
        if id(values) not in self._whole:
            whole = None
            if values.ndim == 1 and np.all(np.abs(values) <= 2**20) and np.all(values == np.round(values)):
                whole = values.astype(np.int64)
            self._whole[id(values)] = (values, whole)
        return self._whole[id(values)][1]

    def _integer_path(self, groups: Groups, values: np.ndarray | None) -> bool:
        whole = values is None or self._whole_numbers(values) is not None
        return self.counts is not None and groups.starts is not None and whole

    def _integer_sums(self, groups: Groups, values: np.ndarray | None) -> None:
        """Exact sums and cumulative sums of integer counts (times whole values) over contiguous groups."""
        assert self.counts is not None and groups.starts is not None
        products = self.counts if values is None else self.counts * self._whole_numbers(values)
        cumulative = np.cumsum(products, axis=1)
        if not groups.identity:
            cumulative = np.take(cumulative, np.r_[groups.starts[1:] - 1, products.shape[1] - 1], axis=1)
        cumulative = cumulative.astype(np.float64)
        sums = np.empty_like(cumulative)
        sums[:, 0] = cumulative[:, 0]
        np.subtract(cumulative[:, 1:], cumulative[:, :-1], out=sums[:, 1:])
        self._chunk[("sums", id(groups), id(values))] = ((groups, values), sums)
        self._chunk[("cumsums", id(groups), id(values))] = ((groups, values), cumulative)


def group_sums(weights: np.ndarray, values: np.ndarray | None, groups: Groups) -> np.ndarray:
    """Per row of ``weights`` (B, N) and per group: sum of ``weights * values`` (or of weights), (B, size)."""
    weighted = weights if values is None else weights * values
    if groups.starts is not None:
        if groups.identity:
            return weighted
        return np.add.reduceat(weighted, groups.starts, axis=1)
    out = np.empty((weights.shape[0], groups.size))
    for row in range(weights.shape[0]):
        out[row] = np.bincount(groups.index, weights=weighted[row], minlength=groups.size)
    return out


def unit_weights(n: int) -> np.ndarray:
    """The weights matrix of the plain (unweighted) metric: one row of (integer) ones."""
    return np.ones((1, n), dtype=np.int64)


def evaluate_once(factory: Callable[..., Kernel], *arrays: np.ndarray, **keywords: Any) -> float:
    """The plain metric: ``factory``'s kernel on a single row of unit weights."""
    workspace = Workspace(unit_weights(np.asarray(arrays[0]).shape[0]))
    return float(factory(workspace, *arrays, **keywords)()[0])
