"""Response consistency as a capability confidence, on per-question answers and tables.

This is the consistency estimator of "On Calibration of LLMs: From Response To Capability" (arXiv 2602.13540,
k = 5, 10, 20), together with a leakage-free variant of it.

For a question with sampled responses y_1..y_n and answer classes a(y_j) (equal answers share a class, an
unparseable response is a class of its own), draw k of the n responses without replacement; the confidence is

    consistency_k = max_z #{drawn j : a(y_j) = z} / k.

* Paper form (:func:`response_consistency`): the k responses are drawn from all n, the same responses that
  define the capability target mu_hat = (1/n) sum_j z_j. Confidence and target then share samples: their
  noise is correlated, which flatters every metric (a leakage).
* Leakage-free form (:func:`leakage_free_consistency`): each question's n responses are split at random into
  a draw pool of ``pool_size`` responses and a disjoint target part of n - pool_size responses; the k
  responses are drawn from the pool only and the matching target mu_hat is computed from the target part
  only. With the same ``seed`` and ``pool_size`` the split is the same for every k, so consistencies at
  k = 5, 10, 20 are scored against one common target.

This module encodes extracted answers as integer class ids per question (:func:`encode_answer_classes`:
grouping keys, the unparseable policy) and reads per-question tables (:func:`consistency_from_table`); the
draws themselves are :mod:`capcal_metrics.consistency` (array arithmetic on (N, max n) rectangles). On
100,000 questions x 100 samples one k takes about half a second per form (benchmarks/analysis_suite.py).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from analysis.runs.validation import as_response_matrix, check_grid
from capcal_metrics import consistency as core
from capcal_metrics.consistency import LeakageFreeConsistency, modal_count

__all__ = [
    "AnswerClasses",
    "LeakageFreeConsistency",
    "consistency_from_table",
    "encode_answer_classes",
    "leakage_free_consistency",
    "modal_count",
    "response_consistency",
]

UnparseablePolicy = Literal["one_class", "singletons"]


@dataclass(frozen=True)
class AnswerClasses:
    """Per-question answer classes as integers.

    ``ids[i, j]`` in [0, max n) is the class of response j of question i (equal ids within a row = the same
    answer; ids are not comparable across rows); ``n[i]`` responses are valid and positions j >= n[i]
    hold -1.
    ``unparseable[i, j]`` marks responses without an extracted answer: they form a class for consistency but
    never win a vote (``analysis.applications.self_calibration_strategies``).
    """

    ids: np.ndarray  # (N, max n) int32
    n: np.ndarray  # (N,) int64
    unparseable: np.ndarray  # (N, max n) bool

    def __post_init__(self) -> None:
        if (
            self.ids.ndim != 2
            or self.n.shape != (self.ids.shape[0],)
            or self.unparseable.shape != self.ids.shape
        ):
            raise ValueError("AnswerClasses: ids (N, m), n (N,) and unparseable (N, m) shapes do not match")

    @property
    def n_questions(self) -> int:
        return int(self.ids.shape[0])

    @property
    def valid(self) -> np.ndarray:
        """(N, max n) bool: position j holds a response of question i (j < n_i)."""
        return np.arange(self.ids.shape[1]) < self.n[:, None]


def encode_answer_classes(
    answers: ArrayLike | Sequence[Sequence[Hashable | None]],
    *,
    answer_class: Callable[[Any], Hashable | None] | None = None,
    unparseable: UnparseablePolicy = "one_class",
    n: ArrayLike | None = None,
) -> AnswerClasses:
    """Encode each question's extracted answers as compact integer class ids.

    Parameters
    ----------
    answers : a sequence of per-question answer lists (``load_run``'s ``extracted_answers``; None = no
        extracted answer; rows may differ in length), or an integer array (N, m) of class labels where -1
        marks an unparseable response (then ``n`` may give row lengths <= m; the rest is padding).
    answer_class : maps an extracted answer to the key under which equal answers are grouped (e.g.
        ``capcal_tasks.answers.numeric.parse_number`` so that "18" and "18.0" agree); a None key counts as
        unparseable. Default: the answer itself.
    unparseable : "one_class" (the paper's rule: an unparseable answer is its own class; all of a
        question's unparseable responses share that class) or "singletons" (each unparseable response is a
        class alone, so unparseable responses never agree with each other).
    """
    if unparseable not in ("one_class", "singletons"):
        raise ValueError(f"unparseable must be 'one_class' or 'singletons', got {unparseable!r}")
    if isinstance(answers, np.ndarray) and answers.ndim == 2 and np.issubdtype(answers.dtype, np.integer):
        if answer_class is not None:
            raise ValueError("answer_class applies to raw answers, not to an integer array of class labels")
        lengths = None if n is None else np.asarray(n, dtype=np.int64)
        labels, lengths = as_response_matrix(answers, "answers", n=lengths, dtype=np.int64)
        if np.any(labels < -1):
            raise ValueError("integer answer labels must be >= 0, or -1 for an unparseable response")
    else:
        if n is not None:
            raise ValueError(
                "n is only for an integer label array; per-question lists carry their own lengths"
            )
        if isinstance(answers, (str, bytes)):
            raise ValueError("answers must be a sequence of per-question answer lists")
        rows = []
        for i, row in enumerate(answers):
            if isinstance(row, (str, bytes)) or not isinstance(row, Sequence | np.ndarray):
                raise ValueError(f"answers[{i}] must be a list of the question's extracted answers")
            mapping: dict[Hashable, int] = {}
            encoded = []
            for answer in row:
                key = None if answer is None else (answer_class(answer) if answer_class else answer)
                if key is None:
                    encoded.append(-1)
                else:
                    try:
                        encoded.append(mapping.setdefault(key, len(mapping)))
                    except TypeError:
                        raise ValueError(f"answers[{i}]: answer class {key!r} is not hashable") from None
            if not encoded:
                raise ValueError(f"answers[{i}] is empty: every question needs at least one response")
            rows.append(encoded)
        if not rows:
            raise ValueError("answers is empty")
        labels, lengths = as_response_matrix(rows, "answers", dtype=np.int64, fill=-1)
    width = labels.shape[1]
    valid = np.arange(width) < lengths[:, None]
    is_unparseable = (labels == -1) & valid
    if unparseable == "singletons":  # distinct negative labels: each unparseable response is alone
        labels = np.where(is_unparseable, -2 - np.arange(width)[None, :], labels)
        return AnswerClasses(_compact(labels, valid), lengths, is_unparseable)
    # "one_class": the unparseable class gets id width - 1. That is free in every row that has an unparseable
    # response when the parsed labels stay below width - 1, which holds for per-question lists (a row with a
    # None has at most n_i - 1 <= width - 1 distinct parsed answers, numbered from 0); else relabel.
    max_parsed = np.where(valid & ~is_unparseable, labels, -1).max(axis=1)
    if np.all(max_parsed < np.where(is_unparseable.any(axis=1), width - 1, width)):
        ids = np.where(valid, np.where(is_unparseable, width - 1, labels), -1).astype(np.int32)
        return AnswerClasses(ids, lengths, is_unparseable)
    return AnswerClasses(_compact(labels, valid), lengths, is_unparseable)


def _compact(labels: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Relabel each row's valid entries as 0..C-1 (sorted order of the labels); padding becomes -1."""
    sentinel = np.iinfo(np.int64).max
    keyed = np.where(valid, labels, sentinel)
    order = np.argsort(keyed, axis=1)
    ordered = np.take_along_axis(keyed, order, axis=1)
    starts = np.ones(ordered.shape, dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    cumulative = np.cumsum(starts.ravel(), dtype=np.int64).reshape(starts.shape)  # flat: much faster
    ranks = cumulative - cumulative[:, :1]
    compact = np.empty_like(ranks)
    np.put_along_axis(compact, order, ranks, axis=1)
    return np.where(valid, compact, -1).astype(np.int32)


def response_consistency(answers: AnswerClasses, k: int, *, seed: int = 0) -> np.ndarray:
    """Paper form: ``max_z #{drawn j: a(y_j) = z} / k`` with k of each question's n responses drawn without
    replacement from all n (the same pool that defines mu_hat). Returns (N,) floats in [1/k, 1].

    Deterministic for a given seed (the stream is ``numpy.random.default_rng([seed, 0, k])``); the draw is
    :func:`capcal_metrics.consistency.response_consistency` on the encoded classes.
    """
    if not isinstance(answers, AnswerClasses):
        raise ValueError("answers must be an AnswerClasses (use encode_answer_classes)")
    return core.response_consistency(answers.ids, k, n=answers.n, seed=seed)


def leakage_free_consistency(
    answers: AnswerClasses,
    correctness: ArrayLike | Sequence[Sequence[int]],
    k: int,
    *,
    pool_size: int | None = None,
    seed: int = 0,
) -> LeakageFreeConsistency:
    """Leakage-free form: split each question's n responses at random into a draw pool of ``pool_size``
    (default k) and a target part of n - pool_size; consistency = ``max_z #{drawn: a = z} / k`` over k
    responses drawn without replacement from the pool; mu_hat = (correct in target part) / (n - pool_size).

    ``correctness`` is (N, max n) or per-question 0/1 lists aligned with ``answers``. The split depends only
    on (seed, pool_size) (stream ``default_rng([seed, 1, pool_size])``), the draw on (seed, k, pool_size);
    the computation is :func:`capcal_metrics.consistency.leakage_free_consistency` on the encoded classes.
    Requires k <= pool_size <= n_i - 1 for every question.
    """
    if not isinstance(answers, AnswerClasses):
        raise ValueError("answers must be an AnswerClasses (use encode_answer_classes)")
    z, _ = as_response_matrix(correctness, "correctness", n=answers.n, dtype=np.int64)
    return core.leakage_free_consistency(answers.ids, z, k, n=answers.n, pool_size=pool_size, seed=seed)


def consistency_from_table(
    table: pd.DataFrame,
    ks: Sequence[int] = (5, 10, 20),
    *,
    seed: int = 0,
    answer_class: Callable[[Any], Hashable | None] | None = None,
    unparseable: UnparseablePolicy = "one_class",
) -> pd.DataFrame:
    """Both forms for every k on a per-question table (``analysis.runs.load_run``).

    Returns one row per question (same order) with ``question_id``, ``mu_hat`` (all n samples),
    ``consistency_k{k}`` (paper form), ``consistency_lf_k{k}`` (leakage-free form), and the common
    leakage-free target ``mu_hat_lf`` / ``n_lf`` (pool of max(ks) responses, the rest for the target).
    """
    for column in ("question_id", "extracted_answers", "correctness"):
        if column not in table.columns:
            raise ValueError(f"table has no {column!r} column (expected analysis.runs.load_run output)")
    ks = check_grid(ks, "ks")
    answers = encode_answer_classes(
        list(table["extracted_answers"]), answer_class=answer_class, unparseable=unparseable
    )
    correctness = [list(row) for row in table["correctness"]]
    z, _ = as_response_matrix(correctness, "correctness", n=answers.n, dtype=np.int64)
    out = pd.DataFrame({"question_id": table["question_id"].to_numpy(), "mu_hat": z.sum(axis=1) / answers.n})
    pool_size = max(ks)
    for k in ks:
        out[f"consistency_k{k}"] = response_consistency(answers, k, seed=seed)
        free = leakage_free_consistency(answers, z, k, pool_size=pool_size, seed=seed)
        out[f"consistency_lf_k{k}"] = free.confidence
    out["mu_hat_lf"] = free.mu_hat
    out["n_lf"] = free.n_target
    return out
