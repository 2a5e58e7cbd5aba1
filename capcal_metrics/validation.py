"""Input checks for capcal's metrics and analyses: one way to validate each kind of argument.

Every check names the offending argument in its ``ValueError`` and returns a clean value: numpy arrays as
float64 (scores, targets, labels) or int64 (counts), integers and fractions as Python numbers. A metric
undefined on valid input (AUROC with a single class, ...) is reported by :func:`undefined_metric`: NaN with an
:class:`UndefinedMetricWarning`, the package-wide policy.
"""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "UndefinedMetricWarning",
    "check_binary_labels",
    "check_confidence_and_target",
    "check_fraction",
    "check_integer",
    "check_probabilities",
    "check_same_length",
    "check_sample_counts",
    "check_whole_numbers",
    "caller_stacklevel",
    "undefined_metric",
]


_TRANSPARENT_WRAPPERS = ("mutmut.",)


class UndefinedMetricWarning(RuntimeWarning):
    """A metric is undefined on this input (e.g. AUROC with a single class) and is returned as NaN."""


def caller_stacklevel() -> int:
    """The ``stacklevel`` that points a warning raised by the calling function at the first frame outside
    capcal_metrics: the user's line, however many package frames (private helpers, wrappers) lie between.
    The wrapper frames that mutation testing puts around every function (mutmut's trampolines) are skipped
    too, so the warnings' tests hold under ``mutmut run`` (tests/README.md, "Mutation testing")."""
    package_dir = os.path.dirname(os.path.abspath(__file__))

    def is_wrapper(frame: FrameType) -> bool:
        return str(frame.f_globals.get("__name__", "")).startswith(_TRANSPARENT_WRAPPERS)

    frame = sys._getframe(1)
    while frame is not None and is_wrapper(frame):  # wrappers of this function: not on the warning's stack
        frame = frame.f_back
    level = 1  # the function that warns
    while frame is not None and (
        is_wrapper(frame) or os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == package_dir
    ):
        frame = frame.f_back
        level += 1
    return level


def undefined_metric(metric: str, reason: str) -> float:
    """Warn with :class:`UndefinedMetricWarning` and return NaN; the package-wide policy when undefined.

    The warning points at the first caller outside capcal_metrics (:func:`caller_stacklevel`).
    """
    warnings.warn(
        f"{metric} is undefined: {reason}; returning nan",
        UndefinedMetricWarning,
        stacklevel=caller_stacklevel(),
    )
    return float("nan")


def _check_shape(
    array: np.ndarray, name: str, ndim: int | None, length: int | None, allow_empty: bool
) -> None:
    """``array`` has ``ndim`` dimensions, ``length`` entries along its first axis, and is non-empty unless
    ``allow_empty``."""
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {array.shape}")
    if array.size == 0 and not allow_empty:
        raise ValueError(f"{name} is empty")
    if length is not None and (array.ndim == 0 or array.shape[0] != length):
        found = "a scalar" if array.ndim == 0 else str(array.shape[0])
        raise ValueError(f"{name} must have one entry per question ({length}), got {found}")


def _first_position(mask: np.ndarray) -> tuple[tuple[int, ...], Any]:
    """The (index tuple, printable position) of the first True entry of ``mask``."""
    where = np.unravel_index(np.argmax(mask), mask.shape)
    return where, (int(where[0]) if mask.ndim == 1 else tuple(int(i) for i in where))


def _reject_text(values: ArrayLike, name: str) -> None:
    """Refuse text, which numpy would parse as numbers ("0.5" -> 0.5)."""
    if isinstance(values, (str, bytes)) or np.asarray(values).dtype.kind in "US":
        raise ValueError(f"{name} must be numeric, got text")


def _as_float_array(
    values: ArrayLike, name: str, ndim: int | None, allow_empty: bool, length: int | None
) -> np.ndarray:
    _reject_text(values, name)
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be numeric, could not convert it to float ({error})") from None
    _check_shape(array, name, ndim, length, allow_empty)
    not_finite = ~np.isfinite(array)
    if not_finite.any():
        _, position = _first_position(not_finite)
        raise ValueError(f"{name} contains NaN or infinite values (first at index {position})")
    return array


def check_probabilities(
    values: ArrayLike,
    name: str,
    *,
    ndim: int | None = 1,
    allow_empty: bool = False,
    length: int | None = None,
) -> np.ndarray:
    """Finite floats in [0, 1]: 1-D unless ``ndim`` says otherwise (None: any shape), non-empty unless
    ``allow_empty``, with ``length`` entries (one per question) when given."""
    array = _as_float_array(values, name, ndim, allow_empty, length)
    outside = (array < 0.0) | (array > 1.0)
    if outside.any():
        where, position = _first_position(outside)
        raise ValueError(f"{name} must lie in [0, 1]; found {float(array[where])!r} at index {position}")
    return array


def check_binary_labels(values: ArrayLike, name: str) -> np.ndarray:
    """Non-empty 1-D array of 0/1 (or bool) labels, returned as float64."""
    array = _as_float_array(values, name, 1, False, None)
    not_binary = (array != 0.0) & (array != 1.0)
    if not_binary.any():
        position = int(np.argmax(not_binary))
        found = float(array[position])
        raise ValueError(f"{name} must be binary labels (0/1 or bool); found {found!r} at index {position}")
    return array


def check_whole_numbers(
    values: ArrayLike,
    name: str,
    *,
    minimum: int = 0,
    ndim: int | None = None,
    length: int | None = None,
) -> np.ndarray:
    """Finite whole numbers >= ``minimum``, returned as int64.

    Any shape (scalars allowed, may be empty) unless ``ndim`` is given: then exactly that many dimensions and
    non-empty, with ``length`` entries (one per question) when given.
    """
    _reject_text(values, name)
    try:
        array = np.asarray(values)
        if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.bool_)):
            array = array.astype(np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be numeric, could not convert it ({error})") from None
    _check_shape(array, name, ndim, length, allow_empty=ndim is None)
    if np.issubdtype(array.dtype, np.floating):
        if not np.isfinite(array).all():
            raise ValueError(f"{name} contains NaN or infinite values")
        if np.any(array != np.round(array)):
            raise ValueError(f"{name} must contain whole numbers")
    array = array.astype(np.int64)
    if array.size and array.min() < minimum:
        raise ValueError(f"{name} must be >= {minimum}; found {int(array.min())}")
    return array


def check_integer(value: Any, name: str, *, minimum: int = 1) -> int:
    """A Python/numpy integer (or integral float) >= ``minimum``, as ``int``; bools are rejected."""
    kind = {0: "a non-negative integer (an integer", 1: "a positive integer (an integer"}.get(minimum)
    bound = f"an integer >= {minimum}" if kind is None else f"{kind} >= {minimum})"
    message = f"{name} must be {bound}, got {value!r}"
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(message)
    try:
        as_int = int(value)
    except (TypeError, ValueError):
        raise ValueError(message) from None
    if as_int != value or as_int < minimum:
        raise ValueError(message)
    return as_int


def check_fraction(value: Any, name: str, *, include_one: bool) -> float:
    """A float in the open interval (0, 1), or (0, 1] when ``include_one``."""
    try:
        as_float = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    upper_ok = as_float <= 1.0 if include_one else as_float < 1.0
    if not (as_float > 0.0 and upper_ok):
        interval = "(0, 1]" if include_one else "(0, 1)"
        raise ValueError(f"{name} must be in {interval}, got {value!r}")
    return as_float


def check_same_length(**arrays: np.ndarray) -> None:
    """All arrays have the same length along their first axis (arguments are named by keyword)."""
    lengths = {name: len(array) for name, array in arrays.items()}
    if len(set(lengths.values())) > 1:
        described = ", ".join(f"{name}={length}" for name, length in lengths.items())
        raise ValueError(f"inputs must have the same length, got {described}")


def check_sample_counts(
    n_samples: ArrayLike, n_correct: ArrayLike, *, unit: str = "question"
) -> tuple[np.ndarray, np.ndarray]:
    """Samples drawn (>= 1) and correct (<= drawn) per ``unit``, broadcast to one shape, as int64 arrays."""
    n = check_whole_numbers(n_samples, "n_samples", minimum=1)
    s = check_whole_numbers(n_correct, "n_correct")
    try:
        n, s = np.broadcast_arrays(n, s)
    except ValueError:
        raise ValueError(
            f"n_samples and n_correct must have the same shape, got {np.shape(n)} and {np.shape(s)}"
        ) from None
    if np.any(s > n):
        raise ValueError(f"n_correct must be <= n_samples for every {unit}")
    return n, s


def check_confidence_and_target(
    confidence: ArrayLike, target: ArrayLike, *, binary_target: bool = False, target_name: str = "target"
) -> tuple[np.ndarray, np.ndarray]:
    """Validate the common (confidence, target) pair: 1-D, same length, confidence in [0, 1].

    ``target`` must lie in [0, 1] (a capability target mu_hat or 0/1 correctness); with ``binary_target`` it
    must be 0/1.
    """
    confidence_array = check_probabilities(confidence, "confidence")
    if binary_target:
        target_array = check_binary_labels(target, target_name)
    else:
        target_array = check_probabilities(target, target_name)
    check_same_length(**{"confidence": confidence_array, target_name: target_array})
    return confidence_array, target_array
