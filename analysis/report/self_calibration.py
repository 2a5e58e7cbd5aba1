"""The Self-Calibration before/after comparison as a section of ``capcal report``.

The report reads the loops' results through one function,
``analysis.self_calibration.results.read_comparisons`` (every ``capcal selfcal run`` folder at or under the
report's output folders, compared and shown), and opens each section with how to read it;
``capcal selfcal compare`` still writes the separate report.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from analysis.rendering import ReportSection
from analysis.self_calibration.results import read_comparisons

__all__ = ["self_calibration_sections"]

HOW_TO_READ = (
    "Did training help? Read the difference column: an interval below 0 for ECE or Brier (above 0 "
    "for AUROC) is an improvement; the accuracy change must stay within the tolerance."
)


def self_calibration_sections(
    output_dirs: Sequence[str | Path], n_resamples: int = 1000, seed: int = 0
) -> list[ReportSection]:
    """One before/after section per Self-Calibration loop folder under ``output_dirs`` (none without one).
    A loop whose runs cannot be compared gets a section saying why instead."""
    sections = []
    for summary in read_comparisons(output_dirs, n_resamples, seed):
        if summary.comparison is not None:
            summary.section.sentences.insert(0, HOW_TO_READ)
        sections.append(summary.section)
    return sections
