"""Input checks for per-question and per-response tables, shared by ``analysis.estimators`` and
``analysis.applications``; array-level checks come from :mod:`capcal_metrics.validation`.

Every check names the offending argument in its ``ValueError`` and returns clean values. Per-response inputs
(one value per sampled response, n_i responses for question i) are held as rectangles of shape (N, max n)
with ``n`` giving each row's length; entries at positions j >= n_i are padding and never read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from capcal_metrics.validation import check_integer, check_probabilities, check_whole_numbers

__all__ = [
    "as_response_matrix",
    "check_confidences",
    "check_counts",
    "check_grid",
    "check_question_ids",
    "read_json_file",
]


def check_counts(n_samples: ArrayLike, n_correct: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Per-question sample counts n_i >= 1 and correct counts 0 <= c_i <= n_i, as non-empty int64 1-D
    arrays of the same length."""
    n = check_whole_numbers(n_samples, "n_samples", minimum=1, ndim=1)
    c = check_whole_numbers(n_correct, "n_correct", minimum=0, ndim=1)
    if n.size != c.size:
        raise ValueError(f"n_samples and n_correct must have the same length, got {n.size} and {c.size}")
    if np.any(c > n):
        raise ValueError(f"n_correct must be <= n_samples (first violation at index {int(np.argmax(c > n))})")
    return n, c


def check_grid(values: Iterable[Any], name: str) -> list[int]:
    """A grid of sample counts (ks, budgets): its distinct positive integers in ascending order, at least
    one."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(f"{name} must be a sequence of positive integers, got {values!r}")
    grid = sorted({check_integer(value, name) for value in values})
    if not grid:
        raise ValueError(f"{name} is empty")
    return grid


def check_confidences(confidences: Mapping[str, ArrayLike], length: int) -> dict[str, np.ndarray]:
    """Named confidence vectors (estimator name -> (N,) values in [0, 1]), each checked to have ``length``
    entries; returned as float64 arrays in the mapping's order."""
    if not isinstance(confidences, Mapping):
        raise ValueError("confidences must be a mapping from estimator name to one confidence per question")
    return {
        name: check_probabilities(values, f"confidences[{name!r}]", length=length)
        for name, values in confidences.items()
    }


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
    sequences of possibly different lengths (then ``n`` is their lengths and must match if given). For an
    integer ``dtype`` a value that is not a whole number (0.5, NaN) is an error naming its row, never cut.
    """
    integer = np.issubdtype(np.dtype(dtype), np.integer)
    if isinstance(values, np.ndarray) and values.ndim == 2:
        if integer and np.issubdtype(values.dtype, np.floating):
            rows = values.shape[0]
            width = np.full(rows, values.shape[1]) if n is None else np.asarray(n)
            if width.shape == (rows,):  # else the shape check below names the mismatch
                valid = np.arange(values.shape[1]) < width[:, None]
                whole = ~valid | (np.isfinite(values) & (values == np.trunc(values)))
                if not whole.all():
                    i, j = np.argwhere(~whole)[0]
                    raise ValueError(f"{name}: row {i} holds {float(values[i, j])!r}, not a whole number")
                values = np.where(valid, values, fill)  # padding (NaN, say) never reaches the cast
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
            except (TypeError, ValueError, OverflowError) as error:
                raise ValueError(f"{name}: row {i} is not numeric ({error})") from None
            if integer:
                cut = [v for v in row if isinstance(v, float | np.floating) and not float(v).is_integer()]
                if cut:
                    raise ValueError(f"{name}: row {i} holds {float(cut[0])!r}, not a whole number")
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


def read_json_file(
    path: str | Path,
    *,
    file_format: str | None = None,
    version: int | None = None,
    error: type[Exception] = ValueError,
) -> Any:
    """The parsed JSON of ``path``. Invalid JSON raises ``error`` with one line naming the file and line; with
    ``file_format``, so does a document that is not an object with that ``"format"`` and ``"version"``."""
    path = Path(path)
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as decode_error:
        raise error(f"{path}:{decode_error.lineno}: not valid JSON ({decode_error.msg})") from None
    if file_format is not None and (
        not isinstance(payload, dict)
        or payload.get("format") != file_format
        or payload.get("version") != version
    ):
        raise error(f"{path}: not a {file_format} file (version {version})")
    return payload
