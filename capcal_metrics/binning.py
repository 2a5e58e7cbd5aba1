"""Confidence binning for calibration errors and reliability diagrams.

The default is the binning of "On Calibration of LLMs: From Response To Capability" (arXiv 2602.13540): 10
equal-width bins with the last one closed.

Two strategies:

* ``"equal_width"``: edges ``0, 1/B, ..., 1``; bin b is ``[b/B, (b+1)/B)`` except the last, which is
  closed, ``[(B-1)/B, 1]``, so that confidence exactly 1.0 is counted (the first release of the paper's code
  dropped it). The edges are computed as ``b / B`` (one correctly rounded division), so a confidence written
  as that decimal, such as a verbalized 0.3 or 0.7, lands in the bin it opens; ``np.linspace(0, 1, 11)``
  would instead give edges 0.30000000000000004, 0.6000000000000001 and 0.7000000000000001 and drop 0.3,
  0.6 and 0.7 into the bin below.
* ``"equal_mass"``: sort the N confidences and put the value at 0-based sorted position r in bin
  ``floor(B * r / N)``, so every bin holds N/B values up to rounding (Nixon et al. 2019, "Measuring
  Calibration in Deep Learning"). Tied confidences always share a bin: a run of ties occupying sorted
  positions ``s..e`` goes to the bin of its midpoint ``(s + e) / 2``. The binning thus depends only on the
  values, not on the order of the rows, and bins are only approximately equal-mass when there are ties.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from .validation import check_confidence_and_target, check_integer, check_probabilities

__all__ = [
    "BinningStrategy",
    "ReliabilityDiagram",
    "assign_bins",
    "equal_width_bin_edges",
    "reliability_diagram",
]

BinningStrategy = Literal["equal_width", "equal_mass"]
_STRATEGIES = ("equal_width", "equal_mass")


def equal_width_bin_edges(n_bins: int = 10) -> np.ndarray:
    """The ``n_bins + 1`` edges ``b / n_bins``, b = 0..n_bins, of equal-width confidence bins."""
    return _equal_width_edges(check_integer(n_bins, "n_bins"))


def assign_bins(
    confidence: ArrayLike, n_bins: int = 10, strategy: BinningStrategy = "equal_width"
) -> np.ndarray:
    """Bin index in ``0..n_bins-1`` of every confidence, by the module's equal-width or equal-mass rule.

    Equal-width: ``b = max{b : edge_b <= c}``, capped at ``n_bins - 1`` (the last bin is closed: c = 1.0
    belongs to it).
    """
    confidence = check_probabilities(confidence, "confidence")
    return _assign_bins(confidence, check_integer(n_bins, "n_bins"), _check_strategy(strategy))


class ReliabilityDiagram(NamedTuple):
    """Per-bin data of a reliability diagram; empty bins have count 0 and NaN means and bounds.

    ``bin_lower``/``bin_upper`` are the bin edges for equal-width bins and the smallest/largest member
    confidence for equal-mass bins (whose edges are data-dependent).
    """

    bin_lower: np.ndarray
    bin_upper: np.ndarray
    count: np.ndarray
    mean_confidence: np.ndarray
    mean_target: np.ndarray


def reliability_diagram(
    confidence: ArrayLike, target: ArrayLike, *, n_bins: int = 10, strategy: BinningStrategy = "equal_width"
) -> ReliabilityDiagram:
    """Reliability-diagram data: per bin b, ``n_b``, ``mean_b c`` and ``mean_b target``.

    ``target`` is mu_hat for a capability diagram or 0/1 correctness for a response diagram.
    """
    confidence, target = check_confidence_and_target(confidence, target)
    n_bins = check_integer(n_bins, "n_bins")
    strategy = _check_strategy(strategy)
    bins = _assign_bins(confidence, n_bins, strategy)
    count = np.bincount(bins, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_confidence = np.bincount(bins, weights=confidence, minlength=n_bins) / count
        mean_target = np.bincount(bins, weights=target, minlength=n_bins) / count
    if strategy == "equal_width":
        edges = _equal_width_edges(n_bins)
        lower, upper = edges[:-1], edges[1:]
    else:
        lower = np.full(n_bins, np.nan)
        upper = np.full(n_bins, np.nan)
        np.fmin.at(lower, bins, confidence)
        np.fmax.at(upper, bins, confidence)
    return ReliabilityDiagram(lower, upper, count, mean_confidence, mean_target)


def _check_strategy(strategy: str) -> str:
    if strategy not in _STRATEGIES:
        raise ValueError(f"strategy must be one of {_STRATEGIES}, got {strategy!r}")
    return strategy


def _equal_width_edges(n_bins: int) -> np.ndarray:
    return np.arange(n_bins + 1) / n_bins


def _assign_bins(confidence: np.ndarray, n_bins: int, strategy: str) -> np.ndarray:
    """Bin indices for an already validated confidence array."""
    if strategy == "equal_width":
        bins = np.searchsorted(_equal_width_edges(n_bins), confidence, side="right") - 1
        return np.minimum(bins, n_bins - 1)
    n = confidence.size
    order = np.argsort(confidence, kind="stable")
    sorted_confidence = confidence[order]
    starts = np.flatnonzero(np.r_[True, sorted_confidence[1:] != sorted_confidence[:-1]])
    ends = np.r_[starts[1:], n]  # exclusive
    # floor(B * midpoint / N) with midpoint = (first + last position) / 2 = (starts + ends - 1) / 2
    run_bin = (n_bins * (starts + ends - 1)) // (2 * n)
    bins = np.empty(n, dtype=np.intp)
    bins[order] = np.repeat(run_bin, ends - starts)
    return bins
