"""Values outside a metric's possible or meaningful range, marked where the report shows them.

Some of the report's estimators are unbiased rather than clipped, so at small N or k they can leave the range
their population value lies in (``capcal_metrics.corrected_capability_brier_score``,
``capcal_metrics.debiased_expected_calibration_error``), and a skill score divides by the base rate's Brier,
which is near 0 when mu_hat hardly varies (``capcal_metrics.corrected_brier_skill_score``). Such a number is
not a bug, but it is not read like the others either: :func:`range_marks` names each case with a symbol,
and :func:`range_footnotes` gives the reason printed under the table (or figure) that shows it.

* ``‡`` a value or interval endpoint below 0 for a metric whose population value is >= 0 (the corrected
  Brier, the debiased ECE): the estimate subtracts an estimate of noise and is not clipped.
* ``§`` a Brier skill above 1, the skill of a perfect forecast: its corrected Brier is below 0.
* ``¶`` a Brier skill below -1: a Brier more than twice the base rate's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

from analysis.rendering import format_interval

__all__ = ["MARKS", "marked_interval", "range_footnotes", "range_marks"]

BELOW_ZERO, ABOVE_ONE, BELOW_MINUS_ONE = "‡", "§", "¶"
MARKS = (BELOW_ZERO, ABOVE_ONE, BELOW_MINUS_ONE)

# Metrics whose population value is >= 0 but whose estimate is unbiased, not clipped (it can be < 0).
NON_NEGATIVE = ("corrected_capability_brier", "capability_ece_debiased")
SKILLS = ("capability_brier_skill",)

# (mark, metric) -> the reason, printed as a footnote where the mark appears.
REASONS: dict[tuple[str, str], str] = {
    (BELOW_ZERO, "corrected_capability_brier"): (
        "below 0, which a Brier score cannot be: the corrected Brier subtracts an estimate of mu_hat's "
        "sampling noise and is unbiased rather than clipped, so where the true value is near 0 the estimate "
        "or its interval falls below 0 at small N or k; read it as 0"
    ),
    (BELOW_ZERO, "capability_ece_debiased"): (
        "below 0: the debiased ECE subtracts the binning noise and is not clipped; a value or endpoint "
        "below 0 means that no miscalibration is detectable at this N (read it as 0)"
    ),
    (ABOVE_ONE, "capability_brier_skill"): (
        "above 1, the skill of a perfect forecast: skill = 1 - CB / S with the corrected Brier CB below 0 "
        "(see ‡), which happens at small N or k; read it as 'no error detectable', not as better than perfect"
    ),
    (BELOW_MINUS_ONE, "capability_brier_skill"): (
        "below -1: the Brier is more than twice the base rate's (the skill is unbounded below); its size is "
        "large when the base rate's Brier S, the spread of mu_hat over the questions, is small (few "
        "questions, or most of them at one mu_hat)"
    ),
}


def _finite(*values: float) -> list[float]:
    return [float(v) for v in values if v is not None and not math.isnan(float(v))]


def range_marks(metric: str, estimate: float, low: float = math.nan, high: float = math.nan) -> str:
    """The marks (:data:`MARKS`) of ``metric``'s value and interval as ``format_interval`` shows them: ``‡``
    when any of them is below 0 for a metric in :data:`NON_NEGATIVE`, ``§`` when a skill is above 1 and ``¶``
    when a skill's estimate is below -1; empty when the value lies in its range. What is not shown carries no
    mark: nothing for a NaN estimate (shown as ``n/a``), the estimate alone for an interval with a NaN end."""
    if not _finite(estimate):
        return ""
    values = _finite(estimate, low, high)
    if len(values) < 3:
        values = values[:1]  # format_interval shows no interval with a missing end
    marks = ""
    if metric in NON_NEGATIVE and any(v < 0 for v in values):
        marks += BELOW_ZERO
    if metric in SKILLS:
        if any(v > 1 for v in values):
            marks += ABOVE_ONE
        if float(estimate) < -1:
            marks += BELOW_MINUS_ONE
    return marks


def marked_interval(metric: str, estimate: float, low: float, high: float, digits: int = 3) -> str:
    """``format_interval`` of the value, its :func:`range_marks` after it: ``-0.004 [-0.009, 0.012] ‡``."""
    marks = range_marks(metric, estimate, low, high)
    text = format_interval(estimate, low, high, digits)
    return f"{text} {marks}" if marks else text


def range_footnotes(rows: pd.DataFrame | Iterable[tuple[str, float, float, float]]) -> list[str]:
    """One footnote per (mark, metric) that occurs in ``rows`` (a frame with metric, estimate, low and high,
    or such tuples), in the order of :data:`MARKS`: ``"‡ corrected_capability_brier: below 0, ..."``."""
    if isinstance(rows, pd.DataFrame):
        rows = zip(rows["metric"], rows["estimate"], rows["low"], rows["high"], strict=True)
    seen = set()
    for metric, estimate, low, high in rows:
        seen.update((mark, metric) for mark in range_marks(metric, estimate, low, high))
    return [
        f"{mark} {metric}: {REASONS[(mark, metric)]}"
        for mark in MARKS
        for metric in (*NON_NEGATIVE, *SKILLS)
        if (mark, metric) in seen
    ]
