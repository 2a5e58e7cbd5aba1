"""The results of Self-Calibration loops, read for a report: one call from the output folders to what a
before/after section needs.

A ``capcal selfcal run`` folder (``analysis.self_calibration.loop``) holds ``loop.json`` beside ``before/``
and ``after/``, each with an ``eval_sample`` and an ``eval_selfcheck`` run, and the training tuples under
``data/``. :func:`read_comparisons` finds every such folder at or under the given folders, reads both sides
and the training questions to leave out (``data.read_checked_sides``), compares them
(``compare.compare_checked_runs``, with the confidence and training record of ``loop.json``) and shows the
comparison (``compare.comparison_section``); a loop that cannot be compared gets a section saying why.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from analysis.rendering import ReportSection
from analysis.self_calibration.compare import Comparison, compare_checked_runs, comparison_section
from analysis.self_calibration.data import SelfCalibrationDataError, read_checked_sides

__all__ = ["ComparisonSummary", "find_loops", "read_comparisons"]


@dataclass(frozen=True)
class ComparisonSummary:
    """One loop folder's before/after comparison (None, with ``problem``, when it could not be made) and its
    section (``compare.comparison_section``, or the problem as a warning)."""

    folder: Path
    comparison: Comparison | None
    section: ReportSection
    problem: str | None = None


def find_loops(output_dirs: Sequence[str | Path]) -> list[Path]:
    """The Self-Calibration loop folders (a ``loop.json`` with ``before/eval_sample`` and
    ``after/eval_sample`` beside it) at or under ``output_dirs``, each once, resolved, in the order found."""
    found: list[Path] = []
    for root in map(Path, output_dirs):
        candidates = [root / "loop.json", *sorted(root.rglob("loop.json"))] if root.is_dir() else []
        for path in candidates:
            folder = path.parent.resolve()
            if folder in found or not path.is_file():
                continue
            if (folder / "before" / "eval_sample").is_dir() and (folder / "after" / "eval_sample").is_dir():
                found.append(folder)
    return found


def _compare_loop(folder: Path, n_resamples: int, seed: int) -> Comparison:
    """Both sides of one loop folder compared, with ``loop.json``'s confidence and training record."""
    record = json.loads((folder / "loop.json").read_text(encoding="utf-8"))
    settings = record.get("settings", {}) if isinstance(record, dict) else {}
    options: dict = {"n_resamples": n_resamples, "seed": seed}
    if isinstance(settings.get("confidence"), str):
        options["confidence"] = settings["confidence"]
    if isinstance(record, dict) and isinstance(record.get("training"), dict):
        options["training"] = record["training"]  # the settings and identities the section lists
    sides = read_checked_sides(
        (folder / "before" / "eval_sample", folder / "before" / "eval_selfcheck"),
        (folder / "after" / "eval_sample", folder / "after" / "eval_selfcheck"),
        folder / "data" if (folder / "data").exists() else None,
    )
    return compare_checked_runs(
        sides.before, sides.after, training_question_ids=sides.training_question_ids, **options
    )


def read_comparisons(
    output_dirs: Sequence[str | Path], n_resamples: int = 1000, seed: int = 0
) -> list[ComparisonSummary]:
    """One :class:`ComparisonSummary` per loop folder at or under ``output_dirs`` (none without one); the
    paired bootstrap intervals use ``n_resamples`` resamples drawn from ``seed``."""
    summaries = []
    for folder in find_loops(output_dirs):
        title = f"Self-Calibration training: before vs after ({folder.name})"
        try:
            comparison = _compare_loop(folder, n_resamples, seed)
        except (SelfCalibrationDataError, ValueError, KeyError, FileNotFoundError) as error:
            problem = f"not compared: {error}"
            section = ReportSection(title=title, warnings=[problem])
            summaries.append(ComparisonSummary(folder, None, section, problem))
            continue
        summaries.append(ComparisonSummary(folder, comparison, comparison_section(comparison, title=title)))
    return summaries
