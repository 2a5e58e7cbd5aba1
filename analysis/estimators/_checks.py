"""Input checks shared by ``analysis.estimators`` and ``analysis.applications``.

Every check names the offending argument in its ``ValueError`` and returns a clean numpy array. Per-response
inputs (one value per sampled response, n_i responses for question i) are held as rectangles of shape
(N, max n) with ``n`` giving each row's length; entries at positions j >= n_i are padding and never read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "SplitLeakageError",
    "as_response_matrix",
    "check_counts",
    "check_int",
    "check_probability_vector",
    "check_question_ids",
    "ids_digest",
    "question_id_hash",
    "refuse_seen_questions",
]


class SplitLeakageError(ValueError):
    """An estimator fitted on some questions was asked to score (or evaluate on) one of them."""


def check_int(value: Any, name: str, *, minimum: int = 1) -> int:
    """A Python/numpy integer (or integral float) >= ``minimum``; bools are rejected."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    try:
        as_int = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}") from None
    if as_int != value or as_int < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return as_int


def check_probability_vector(values: ArrayLike, name: str, *, length: int | None = None) -> np.ndarray:
    """Non-empty, finite 1-D float64 array in [0, 1] (of ``length`` entries when given)."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be numeric ({error})") from None
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {array.shape}")
    if length is not None and array.size != length:
        raise ValueError(f"{name} must have {length} entries (one per question), got {array.size}")
    if not np.isfinite(array).all():
        raise ValueError(
            f"{name} contains NaN or infinite values (first at index {int(np.argmin(np.isfinite(array)))})"
        )
    outside = (array < 0.0) | (array > 1.0)
    if outside.any():
        index = int(np.argmax(outside))
        raise ValueError(f"{name} must lie in [0, 1]; found {array[index]!r} at index {index}")
    return array


def check_counts(n_samples: ArrayLike, n_correct: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Per-question sample counts n_i >= 1 and correct counts 0 <= c_i <= n_i, as int64 1-D arrays."""
    arrays = []
    for values, name, minimum in ((n_samples, "n_samples", 1), (n_correct, "n_correct", 0)):
        array = np.asarray(values)
        if array.ndim != 1 or array.size == 0:
            raise ValueError(f"{name} must be a non-empty 1-D array, got shape {array.shape}")
        if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
            raise ValueError(f"{name} must be numeric, got dtype {array.dtype}")
        if np.issubdtype(array.dtype, np.floating) and (
            not np.isfinite(array).all() or np.any(array != np.round(array))
        ):
            raise ValueError(f"{name} must contain whole numbers")
        array = array.astype(np.int64)
        if array.min() < minimum:
            raise ValueError(f"{name} must be >= {minimum}; found {int(array.min())}")
        arrays.append(array)
    n, c = arrays
    if n.size != c.size:
        raise ValueError(f"n_samples and n_correct must have the same length, got {n.size} and {c.size}")
    if np.any(c > n):
        raise ValueError(f"n_correct must be <= n_samples (first violation at index {int(np.argmax(c > n))})")
    return n, c


def as_response_matrix(
    values: ArrayLike | Sequence[Sequence[Any]],
    name: str,
    *,
    n: np.ndarray | None = None,
    dtype: type = np.float64,
    fill: Any = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-response values as a padded (N, max n) array of ``dtype`` and the row lengths n (int64).

    ``values`` is a 2-D array (every row full unless ``n`` says otherwise) or a sequence of per-question
    sequences of possibly different lengths (then ``n`` is their lengths and must match if given).
    """
    if isinstance(values, np.ndarray) and values.ndim == 2:
        matrix = values.astype(dtype, copy=False)
        lengths = np.full(matrix.shape[0], matrix.shape[1], dtype=np.int64) if n is None else n
    else:
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise ValueError(f"{name} must be a 2-D array or a sequence of per-question sequences")
        rows = [list(row) for row in values]
        lengths = np.array([len(row) for row in rows], dtype=np.int64)
        if n is not None and not np.array_equal(lengths, n):
            bad = int(np.argmax(lengths != n)) if lengths.size == n.size else None
            raise ValueError(f"{name}: row lengths differ from the number of samples (first at row {bad})")
        width = int(lengths.max()) if lengths.size else 0
        matrix = np.full((len(rows), width), fill, dtype=dtype)
        for i, row in enumerate(rows):
            try:
                matrix[i, : len(row)] = row
            except (TypeError, ValueError) as error:
                raise ValueError(f"{name}: row {i} is not numeric ({error})") from None
    if matrix.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.shape != (matrix.shape[0],):
        raise ValueError(
            f"{name}: n must have one entry per row ({matrix.shape[0]}), got shape {lengths.shape}"
        )
    if lengths.min() < 1 or lengths.max() > matrix.shape[1]:
        raise ValueError(f"{name}: every row needs 1 <= n_i <= {matrix.shape[1]} samples")
    return matrix, lengths


def check_question_ids(
    question_ids: Iterable[Any], name: str = "question_ids", *, length: int | None = None
) -> list[str]:
    """Question ids as a list of distinct strings (of ``length`` entries when given)."""
    if isinstance(question_ids, (str, bytes)):
        raise ValueError(f"{name} must be a sequence of question ids, not a single string")
    ids = [str(question_id) for question_id in question_ids]
    if length is not None and len(ids) != length:
        raise ValueError(f"{name} must have {length} entries (one per row), got {len(ids)}")
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        duplicate = next(q for q in ids if q in seen or seen.add(q))
        raise ValueError(f"{name} contains duplicates (e.g. {duplicate!r})")
    return ids


def question_id_hash(question_id: str) -> str:
    """A question id's fingerprint: the first 16 hex digits of its SHA-256 (what saved estimators store)."""
    return hashlib.sha256(question_id.encode("utf-8")).hexdigest()[:16]


def ids_digest(question_ids: Iterable[str]) -> str:
    """SHA-256 of the sorted, newline-joined question ids: one fingerprint of a whole split."""
    return hashlib.sha256("\n".join(sorted(question_ids)).encode("utf-8")).hexdigest()


def refuse_seen_questions(question_ids: Sequence[str], seen_hashes: frozenset[str], what: str) -> None:
    """Raise :class:`SplitLeakageError` if any of ``question_ids`` is among the fingerprints ``seen_hashes``
    (the questions an estimator was fitted or tuned on)."""
    leaked = [q for q in question_ids if question_id_hash(q) in seen_hashes]
    if leaked:
        shown = ", ".join(repr(q) for q in leaked[:3]) + (
            f" and {len(leaked) - 3} more" if len(leaked) > 3 else ""
        )
        raise SplitLeakageError(
            f"{what} was fitted or tuned on {len(leaked)} of these {len(question_ids)} questions ({shown}); "
            "scoring them would leak the training targets into the evaluation. Score only held-out questions."
        )
