"""The Self-Calibration before/after comparison as a section of ``capcal report``.

A ``capcal selfcal run`` folder (``analysis.self_calibration.loop``: ``loop.json`` beside ``before/`` and
``after/``, each with ``eval_sample`` and ``eval_selfcheck`` runs) found under one of the report's output
folders is compared with ``analysis.self_calibration.compare.compare_checked_runs`` (both sides' runs read
with ``read_checked_run``, the training questions of ``data/`` excluded) and shown with its
``comparison_section``; ``capcal selfcal compare`` still writes the separate report.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

from analysis.rendering import ReportSection

__all__ = ["find_self_calibration_loops", "self_calibration_sections"]


def find_self_calibration_loops(output_dirs: Sequence[str | Path]) -> Iterator[Path]:
    """The Self-Calibration loop folders (a ``loop.json`` with ``before/eval_sample`` and
    ``after/eval_sample`` beside it) at or under ``output_dirs``, each once, in sorted order."""
    seen: set[Path] = set()
    for root in output_dirs:
        root = Path(root)
        candidates = [root / "loop.json", *sorted(root.rglob("loop.json"))] if root.is_dir() else []
        for path in candidates:
            folder = path.parent.resolve()
            if folder in seen or not path.is_file():
                continue
            if (folder / "before" / "eval_sample").is_dir() and (folder / "after" / "eval_sample").is_dir():
                seen.add(folder)
                yield folder


def self_calibration_sections(
    output_dirs: Sequence[str | Path], n_resamples: int = 1000, seed: int = 0
) -> list[ReportSection]:
    """One before/after section per Self-Calibration loop folder under ``output_dirs`` (none without one).
    A loop whose runs cannot be compared gets a section saying why instead."""
    from analysis.self_calibration.compare import compare_checked_runs, comparison_section
    from analysis.self_calibration.data import (
        SelfCalibrationDataError,
        read_checked_run,
        read_training_data,
    )

    sections = []
    for folder in find_self_calibration_loops(output_dirs):
        title = f"Self-Calibration training: before vs after ({folder.name})"
        try:
            record = json.loads((folder / "loop.json").read_text(encoding="utf-8"))
            settings = record.get("settings", {}) if isinstance(record, dict) else {}
            options = {"n_resamples": n_resamples, "seed": seed}
            if isinstance(settings.get("confidence"), str):
                options["confidence"] = settings["confidence"]
            if isinstance(record, dict) and isinstance(record.get("training"), dict):
                options["training"] = record["training"]  # the settings and identities the report lists
            trained = []
            if (folder / "data").exists():
                trained = [t["question_id"] for t in read_training_data(folder / "data")]
            comparison = compare_checked_runs(
                read_checked_run(folder / "before" / "eval_sample", folder / "before" / "eval_selfcheck"),
                read_checked_run(folder / "after" / "eval_sample", folder / "after" / "eval_selfcheck"),
                training_question_ids=trained,
                **options,
            )
        except (SelfCalibrationDataError, ValueError, KeyError, FileNotFoundError) as error:
            sections.append(ReportSection(title=title, warnings=[f"not compared: {error}"]))
            continue
        section = comparison_section(comparison, title=title)
        section.sentences.insert(
            0,
            "Did training help? Read the difference column: an interval below 0 for ECE or Brier (above 0 "
            "for AUROC) is an improvement; the accuracy change must stay within the tolerance.",
        )
        sections.append(section)
    return sections
