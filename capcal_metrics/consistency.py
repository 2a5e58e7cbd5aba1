"""Response consistency: the modal-answer share of k sampled responses, as a capability confidence.

This is the consistency estimator of "On Calibration of LLMs: From Response To Capability" (arXiv 2602.13540).
For question i with n_i sampled responses whose answers fall in classes a_i1..a_in_i (equal answers share a
class), draw k of the n_i responses uniformly without replacement; the confidence is the share of the most
common class among the drawn responses,

    consistency_k(i) = max_c #{drawn j : a_ij = c} / k          in [1/k, 1].

* :func:`response_consistency` is the paper's form: the k responses come from all n_i, the same responses
  that define the capability target mu_hat_i = (1/n_i) sum_j z_ij. Confidence and target then share samples
  and their noise is correlated, which flatters every metric (a leakage).
* :func:`leakage_free_consistency` splits each question's responses at random into a draw pool of
  ``pool_size`` responses and a disjoint target part of the other n_i - pool_size; the k responses are drawn
  from the pool only and mu_hat_i is computed from the target part only. With the same ``seed`` and
  ``pool_size`` the split is the same for every k, so several k are scored against one common target.

Answers come as an integer array ``labels`` of shape (N, m): ``labels[i, j]`` for j < n_i is the class of
response j of question i (equal values in a row = the same answer; values are not compared across rows) and
entries at j >= n_i are padding, never read. Every draw is array arithmetic on the (N, m) rectangle: a
uniformly random k-subset of a row is the k smallest of i.i.d. uniform keys (``argpartition``), and the modal
count is the longest run in the sorted drawn labels. Rows are processed in chunks of 20,000, which bounds the
temporary memory; the random streams are fixed by the seed (see each function).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .validation import check_integer, check_whole_numbers

__all__ = ["LeakageFreeConsistency", "leakage_free_consistency", "modal_count", "response_consistency"]

CHUNK_ROWS = 20_000  # rows per chunk: about 20,000 x m x 8 bytes per temporary array


def modal_count(drawn: ArrayLike) -> np.ndarray:
    """Per row of an integer array (N, k): the number of occurrences of its most common value (1..k)."""
    drawn = np.asarray(drawn)
    if drawn.ndim != 2 or drawn.shape[1] == 0:
        raise ValueError(f"drawn must be a 2-D array with at least one column, got shape {drawn.shape}")
    ordered = np.sort(drawn, axis=1)
    positions = np.arange(ordered.shape[1])
    starts = np.ones(ordered.shape, dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    run_start = np.maximum.accumulate(np.where(starts, positions, 0), axis=1)
    return (positions - run_start + 1).max(axis=1)


def _labels_and_lengths(labels: ArrayLike, n: ArrayLike | None) -> tuple[np.ndarray, np.ndarray]:
    """``labels`` as a non-empty 2-D integer array (N, m) and the row lengths n (int64, 1 <= n_i <= m)."""
    labels = np.asarray(labels)
    if labels.ndim != 2 or labels.shape[0] == 0 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(
            f"labels must be a non-empty 2-D integer array (questions x responses), got {labels.dtype} "
            f"array of shape {labels.shape}"
        )
    if n is None:
        return labels, np.full(labels.shape[0], labels.shape[1], dtype=np.int64)
    lengths = check_whole_numbers(n, "n", minimum=1, ndim=1, length=labels.shape[0])
    if lengths.max() > labels.shape[1]:
        raise ValueError(f"n must be <= the number of label columns ({labels.shape[1]})")
    return labels, lengths


def _random_subset(rng: np.random.Generator, allowed: np.ndarray, size: int) -> np.ndarray:
    """Column indices (N, size) of a uniformly random ``size``-subset of each row's allowed positions."""
    keys = rng.random(allowed.shape)
    keys[~allowed] = 2.0  # never among the smallest: every row has >= size allowed positions (checked)
    if size == allowed.shape[1]:
        return np.argsort(keys, axis=1)
    return np.argpartition(keys, size - 1, axis=1)[:, :size]


def _check_k(k: Any, lengths: np.ndarray) -> int:
    """k as int, 1 <= k <= n_i for every question."""
    k = check_integer(k, "k")
    if k > lengths.min():
        shortest = int(np.argmin(lengths))
        raise ValueError(
            f"k={k} exceeds the number of samples of question {shortest} ({int(lengths[shortest])})"
        )
    return k


def response_consistency(
    labels: ArrayLike, k: int, *, n: ArrayLike | None = None, seed: int = 0
) -> np.ndarray:
    """Paper form: ``max_c #{drawn j : a_ij = c} / k`` with k of each question's n_i responses drawn without
    replacement from all n_i (the responses that also define mu_hat). Returns (N,) floats in [1/k, 1].

    ``labels`` (N, m) integer answer classes, ``n`` the row lengths (default: every row full). Requires
    k <= n_i. Deterministic for a given seed: the stream is ``numpy.random.default_rng([seed, 0, k])``.
    """
    labels, lengths = _labels_and_lengths(labels, n)
    k = _check_k(k, lengths)
    rng = np.random.default_rng([seed, 0, k])
    valid = np.arange(labels.shape[1]) < lengths[:, None]
    out = np.empty(labels.shape[0])
    for start in range(0, labels.shape[0], CHUNK_ROWS):
        rows = slice(start, start + CHUNK_ROWS)
        picked = _random_subset(rng, valid[rows], k)
        out[rows] = modal_count(np.take_along_axis(labels[rows], picked, axis=1)) / k
    return out


@dataclass(frozen=True)
class LeakageFreeConsistency:
    """Consistency from a draw pool and the capability target from the disjoint rest of the samples.

    ``confidence[i]`` uses only responses ``draw_indices[i]`` (column indices into the question's responses);
    ``mu_hat[i]`` = mean correctness over the responses where ``target_mask[i]`` is True (``n_target[i]`` of
    them). The pool (``pool_mask``) and the target part are disjoint and together are all n_i responses.
    """

    confidence: np.ndarray  # (N,)
    mu_hat: np.ndarray  # (N,)
    n_target: np.ndarray  # (N,) int64
    n_correct_target: np.ndarray  # (N,) int64
    draw_indices: np.ndarray  # (N, k) int
    pool_mask: np.ndarray  # (N, m) bool
    target_mask: np.ndarray  # (N, m) bool


def _check_correctness(correctness: ArrayLike, shape: tuple[int, ...], valid: np.ndarray) -> np.ndarray:
    """``correctness`` as int64 of the labels' shape, 0/1 wherever a response is (padding is not read)."""
    z = np.asarray(correctness)
    if z.shape != shape:
        raise ValueError(f"correctness has shape {z.shape}, answers {shape}")
    if np.any((z[valid] != 0) & (z[valid] != 1)):
        raise ValueError("correctness must be 0/1")
    return z.astype(np.int64, copy=False)


def _check_pool(k: Any, pool_size: Any, lengths: np.ndarray) -> tuple[int, int]:
    """(k, pool_size) with 1 <= k <= pool_size <= n_i - 1 for every question (pool_size None: k)."""
    k = check_integer(k, "k")
    pool_size = k if pool_size is None else check_integer(pool_size, "pool_size")
    if pool_size < k:
        raise ValueError(f"pool_size={pool_size} must be >= k={k}")
    if pool_size > lengths.min() - 1:
        raise ValueError(
            f"pool_size={pool_size} leaves no target samples for question {int(np.argmin(lengths))} "
            f"(n = {int(lengths.min())}); need pool_size <= n_i - 1"
        )
    return k, pool_size


def leakage_free_consistency(
    labels: ArrayLike,
    correctness: ArrayLike,
    k: int,
    *,
    n: ArrayLike | None = None,
    pool_size: int | None = None,
    seed: int = 0,
) -> LeakageFreeConsistency:
    """Leakage-free form: split each question's n_i responses at random into a draw pool of ``pool_size``
    (default k) and a target part of n_i - pool_size; consistency = ``max_c #{drawn j : a_ij = c} / k`` over
    k responses drawn without replacement from the pool; mu_hat_i = (correct in target part) / (n_i -
    pool_size).

    ``labels`` (N, m) integer answer classes and ``correctness`` (N, m) 0/1 of the same shape (padding
    entries beyond ``n``, the row lengths, are ignored). Requires k <= pool_size <= n_i - 1. The split
    depends only on (seed, pool_size) (stream ``default_rng([seed, 1, pool_size])``), the draw on
    (seed, k, pool_size) (stream ``default_rng([seed, 2, k, pool_size])``).
    """
    labels, lengths = _labels_and_lengths(labels, n)
    valid = np.arange(labels.shape[1]) < lengths[:, None]
    z = _check_correctness(correctness, labels.shape, valid)
    k, pool_size = _check_pool(k, pool_size, lengths)
    split_rng = np.random.default_rng([seed, 1, pool_size])
    draw_rng = np.random.default_rng([seed, 2, k, pool_size])
    n_questions = labels.shape[0]
    confidence = np.empty(n_questions)
    draw_indices = np.empty((n_questions, k), dtype=np.int64)
    pool_mask = np.zeros(valid.shape, dtype=bool)
    for start in range(0, n_questions, CHUNK_ROWS):
        rows = slice(start, start + CHUNK_ROWS)
        pool = _random_subset(split_rng, valid[rows], pool_size)
        np.put_along_axis(pool_mask[rows], pool, True, axis=1)
        picked_in_pool = _random_subset(draw_rng, np.ones(pool.shape, dtype=bool), k)
        picked = np.take_along_axis(pool, picked_in_pool, axis=1)
        draw_indices[rows] = picked
        confidence[rows] = modal_count(np.take_along_axis(labels[rows], picked, axis=1)) / k
    target_mask = valid & ~pool_mask
    n_target = target_mask.sum(axis=1)
    n_correct_target = (z * target_mask).sum(axis=1)
    return LeakageFreeConsistency(
        confidence=confidence,
        mu_hat=n_correct_target / n_target,
        n_target=n_target,
        n_correct_target=n_correct_target,
        draw_indices=draw_indices,
        pool_mask=pool_mask,
        target_mask=target_mask,
    )
