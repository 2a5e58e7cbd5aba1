"""Isotonic recalibration of a confidence, fitted on a calibration split.

"On Calibration of LLMs: From Response To Capability" (arXiv 2602.13540) recalibrates each confidence
estimator by isotonic regression of mu_hat on the confidence, fitted on a calibration split and applied to
the evaluation split.

Fit: the non-decreasing step function g minimising sum_i w_i (mu_hat_i - g(c_i))^2 on the calibration
questions (pool-adjacent-violators on the distinct confidences, equal confidences merged by their weighted
mean target), values in [0, 1]. Apply: linear interpolation between the fitted points, clipped to the end
values outside the fitted range — the same function as scikit-learn's
``IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip")``, implemented here without it.

The recalibrator remembers its calibration questions (SHA-256 fingerprints of their ids):
:meth:`IsotonicRecalibrator.predict` needs the ids of the questions it maps and raises
:class:`SplitLeakageError` for any calibration question. Saved and loaded as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from analysis.runs.validation import check_question_ids, read_json_file
from capcal_metrics.validation import check_probabilities

from .split_guard import held_out_question_ids, ids_digest, question_fingerprints

__all__ = [
    "IsotonicRecalibrator",
    "fit_isotonic",
    "isotonic_fit_points",
    "load_isotonic",
]

ISOTONIC_FORMAT = "capcal-isotonic"
ISOTONIC_VERSION = 1


def isotonic_fit_points(
    x: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The fitted points (distinct x ascending, non-decreasing fitted y in [0, 1]) of the weighted isotonic
    least-squares regression of y on x (pool-adjacent-violators, O(N log N))."""
    x = check_probabilities(x, "confidence")
    y = check_probabilities(y, "mu_hat", length=x.size)
    if sample_weight is None:
        w = np.ones(x.size)
    else:
        w = np.asarray(sample_weight, dtype=np.float64)
        if w.shape != x.shape or not np.isfinite(w).all() or np.any(w < 0) or w.sum() <= 0:
            raise ValueError("sample_weight must be finite, >= 0, not all zero, one per question")
    order = np.argsort(x, kind="stable")
    x, y, w = x[order], y[order], w[order]
    keep = w > 0
    x, y, w = x[keep], y[keep], w[keep]
    unique_x, starts = np.unique(x, return_index=True)
    weights = np.add.reduceat(w, starts)
    means = np.add.reduceat(w * y, starts) / weights
    # pool adjacent violators on the block means
    block_value: list[float] = []
    block_weight: list[float] = []
    block_size: list[int] = []
    for value, weight in zip(means.tolist(), weights.tolist(), strict=True):
        size = 1
        while block_value and block_value[-1] >= value:
            total = block_weight[-1] + weight
            value = (block_value[-1] * block_weight[-1] + value * weight) / total
            weight = total
            size += block_size[-1]
            block_value.pop()
            block_weight.pop()
            block_size.pop()
        block_value.append(value)
        block_weight.append(weight)
        block_size.append(size)
    fitted = np.repeat(np.asarray(block_value), block_size)
    return unique_x, np.clip(fitted, 0.0, 1.0)


@dataclass(frozen=True)
class IsotonicRecalibrator:
    """A fitted isotonic map from confidence to recalibrated confidence (see the module docstring)."""

    x: np.ndarray  # fitted confidences, ascending
    y: np.ndarray  # fitted values, non-decreasing, in [0, 1]
    calibration_ids_sha256: str
    n_calibration: int
    seen_question_hashes: frozenset[str] = field(repr=False)

    def predict(self, confidence: ArrayLike, question_ids: Sequence[str]) -> np.ndarray:
        """g(c) for held-out questions: interpolation between the fitted points, clipped outside them.
        Raises :class:`SplitLeakageError` if any question was in the calibration split."""
        c = check_probabilities(confidence, "confidence")
        held_out_question_ids(
            question_ids, self.seen_question_hashes, length=c.size, what="this isotonic recalibrator"
        )
        return np.interp(c, self.x, self.y)

    def save(self, path: str | Path) -> Path:
        """Write the recalibrator as JSON (fitted points, calibration fingerprints)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "format": ISOTONIC_FORMAT,
            "version": ISOTONIC_VERSION,
            "x": self.x.tolist(),
            "y": self.y.tolist(),
            "calibration_ids_sha256": self.calibration_ids_sha256,
            "n_calibration": self.n_calibration,
            "seen_question_hashes": sorted(self.seen_question_hashes),
        }
        path.write_text(json.dumps(payload) + "\n", encoding="utf-8")
        return path


def fit_isotonic(
    confidence: ArrayLike,
    mu_hat: ArrayLike,
    question_ids: Sequence[str],
    *,
    sample_weight: ArrayLike | None = None,
) -> IsotonicRecalibrator:
    """Fit the isotonic regression of ``mu_hat`` on ``confidence`` over the calibration questions
    ``question_ids`` (all rows given are the calibration split)."""
    c = check_probabilities(confidence, "confidence")
    ids = check_question_ids(question_ids, length=c.size)
    x, y = isotonic_fit_points(c, mu_hat, sample_weight)
    return IsotonicRecalibrator(
        x=x,
        y=y,
        calibration_ids_sha256=ids_digest(ids),
        n_calibration=len(ids),
        seen_question_hashes=question_fingerprints(ids),
    )


def load_isotonic(path: str | Path) -> IsotonicRecalibrator:
    """Read a recalibrator written by :meth:`IsotonicRecalibrator.save`."""
    path = Path(path)
    payload = read_json_file(path, file_format=ISOTONIC_FORMAT, version=ISOTONIC_VERSION)
    x, y = np.asarray(payload["x"], dtype=np.float64), np.asarray(payload["y"], dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size == 0 or np.any(np.diff(x) <= 0) or np.any(np.diff(y) < 0):
        raise ValueError(f"{path}: fitted points must be ascending x with non-decreasing y")
    return IsotonicRecalibrator(
        x=x,
        y=y,
        calibration_ids_sha256=payload["calibration_ids_sha256"],
        n_calibration=int(payload["n_calibration"]),
        seen_question_hashes=frozenset(payload["seen_question_hashes"]),
    )
