"""The versions behind each run (task version, lm-eval version, capcal version), and mixes of them.

lm-eval records a task's ``version`` (``versions``) and its own (``lm_eval_version``) in every results file;
``capcal eval`` adds ``capcal_version`` (``analysis.evaluation.evaluate``). Runs of different versions of one
task, or made by different lm-eval versions, may not measure the same thing: ``version_mix_warnings`` says so
in one line each, for the report's warnings; ``run_versions`` is the appendix's table.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.runs.files import read_results
from analysis.runs.identity import SamplesFile

__all__ = ["NOT_RECORDED", "VERSION_COLUMNS", "run_versions", "version_mix_warnings"]

NOT_RECORDED = "not recorded"
VERSION_COLUMNS = ["model", "task", "run_id", "task_version", "lm_eval_version", "capcal_version"]


def _results(path: Path | None, cache: dict[Path, dict]) -> dict:
    if path is None:
        return {}
    if path not in cache:
        try:
            loaded, _ = read_results(path)  # NaN aggregates are lm-eval's own (read_results accepts them)
        except (OSError, ValueError):
            loaded = {}
        cache[path] = loaded
    return cache[path]


def _text(value: object) -> str:
    return NOT_RECORDED if value is None or value == "" else str(value)


def run_versions(files: Sequence[SamplesFile]) -> pd.DataFrame:
    """One row per run file (``VERSION_COLUMNS``), each version read from the run's results file
    (``NOT_RECORDED`` where it has none: a samples file without results, a run made before the key)."""
    cache: dict[Path, dict] = {}
    rows = []
    for file in files:
        results = _results(file.results_path, cache)
        versions = results.get("versions") if isinstance(results.get("versions"), dict) else {}
        rows.append(
            {
                "model": file.model,
                "task": file.task,
                "run_id": file.run_id,
                "task_version": _text(versions.get(file.task)),
                "lm_eval_version": _text(results.get("lm_eval_version")),
                "capcal_version": _text(results.get("capcal_version")),
            }
        )
    return pd.DataFrame(rows, columns=VERSION_COLUMNS)


def version_mix_warnings(table: pd.DataFrame) -> list[str]:
    """One line per task whose runs are of several task versions, and one when the runs were made by
    several lm-eval versions (``table`` from ``run_versions``; unrecorded versions are not counted)."""
    warnings = []
    for task, group in table.groupby("task", sort=True):
        versions = sorted(set(group["task_version"]) - {NOT_RECORDED})
        if len(versions) > 1:
            warnings.append(
                f"{task}: runs of task versions {', '.join(versions)} are compared; they may not ask or "
                "score the same way (versions in the appendix)"
            )
    lm_eval = sorted(set(table["lm_eval_version"]) - {NOT_RECORDED}) if len(table) else []
    if len(lm_eval) > 1:
        warnings.append(
            f"runs made by lm-eval {', '.join(lm_eval)} are compared; their prompts or scoring may differ "
            "(versions in the appendix)"
        )
    return warnings
