"""Discovery: every distinct run under the output folders, each samples file paired with its results file,
and an account of everything else (duplicates, entries skipped, tasks without a samples file).

See the "Discovery" item of :mod:`analysis.runs`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from analysis.runs.files import RESULTS_NAME, read_results, run_files, walk_folders
from analysis.runs.identity import ModelIdentities, SamplesFile, run_content_key
from capcal_tasks.checkers import describe_labels
from capcal_tasks.records import RunFormatError
from capcal_tasks.sampling import is_sampling_config

__all__ = ["LEADERBOARD_REASON", "discover_runs", "find_samples_files"]


LEADERBOARD_REASON = "not used: leaderboard task (its calibration columns are in the results file)"


@dataclass
class _Found:
    """What discovery found: the runs to read, and an account of everything else."""

    files: list[SamplesFile] = field(default_factory=list)
    duplicates: list[tuple[Path, Path]] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    unlogged: list[dict] = field(default_factory=list)  # RUN_COLUMNS rows of tasks without a samples file
    keys: dict[str, Path] = field(default_factory=dict)  # run_key -> first path

    def first(self, run_key: str, path: Path) -> bool:
        """Whether ``run_key`` is seen for the first time; if not, ``path`` is listed as a duplicate."""
        if run_key in self.keys:
            self.duplicates.append((path, self.keys[run_key]))
            return False
        self.keys[run_key] = path
        return True


def _unlogged_reason(config: dict) -> tuple[str, str]:
    """(kind, reason) of a task in a results file without its samples file (never a sampling task)."""
    declared = (config.get("metadata") or {}).get("capcal_task")
    if declared == "leaderboard":
        return "leaderboard", LEADERBOARD_REASON
    if declared:
        return str(declared), "not used: no samples file (run lm-eval with --log_samples)"
    return "other", "not used: not a capcal task, and no samples file"


def _unlogged_runs(
    found: _Found, folder: Path, results_path: Path, read: tuple[dict, str], identities: ModelIdentities
) -> None:
    """Add to ``found.unlogged`` every task of a results file that has no samples file beside it; a
    sampling task without one raises ``RunFormatError`` (the run was made without ``--log_samples``)."""
    results, digest = read
    date = RESULTS_NAME.match(results_path.name)["date"]
    for task, config in (results.get("configs") or {}).items():
        if (folder / f"samples_{task}_{date}.jsonl").is_file():
            continue
        if is_sampling_config(config):
            raise RunFormatError(
                f"{results_path}: task {task} has no samples file "
                f"samples_{task}_{date}.jsonl; run lm-eval with --log_samples"
            )
        run_key = hashlib.sha256(f"{digest}\0{task}".encode()).hexdigest()
        if not found.first(run_key, results_path):
            continue
        kind, reason = _unlogged_reason(config)
        model_id, label = identities.of(results, folder)
        found.unlogged.append(
            {
                "model_id": model_id,
                "model": label,
                "task": task,
                "kind": kind,
                "run_id": date,
                "run_key": run_key,
                "results_path": results_path,
                "samples_path": None,
                "records": 0,
                "used": False,
                "reason": reason,
                "labels": describe_labels(results.get("capcal_rescore")),
            }
        )


def _logged_count(results: dict | None, task: str) -> int | None:
    """The results file's "n-samples" effective count for ``task``, None when it has none."""
    counts = ((results or {}).get("n-samples") or {}).get(task)
    effective = counts.get("effective") if isinstance(counts, dict) else None
    return effective if isinstance(effective, int) and not isinstance(effective, bool) else None


def _discover_folder(
    found: _Found, folder: Path, entries: list[os.DirEntry], identities: ModelIdentities
) -> None:
    """Add one folder's runs to ``found``: each samples file with its results file (same date)."""
    results_files, samples_files = run_files(entries, found.skipped)
    read = {date: read_results(path) for date, path in results_files.items()}
    for date, path in results_files.items():
        _unlogged_runs(found, folder, path, read[date], identities)
    for path, task, date in samples_files:
        results, digest = read.get(date, (None, None))
        run_key = run_content_key(digest, path)
        if not found.first(run_key, path):
            continue
        model_id, label = identities.of(results, folder)
        config = ((results or {}).get("configs") or {}).get(task) or {}
        found.files.append(
            SamplesFile(
                path,
                task,
                date,
                label,
                config,
                results is not None,
                _logged_count(results, task),
                model_id,
                results_files.get(date),
                run_key,
                (results or {}).get("capcal_rescore"),
            )
        )


def discover_runs(roots: Sequence[str | Path]) -> tuple[_Found, dict[str, dict]]:
    """Every distinct run under ``roots`` and the model identities; ``FileNotFoundError`` for a root that is
    not a folder."""
    paths = [Path(root) for root in roots]
    for root in paths:
        if not root.is_dir():
            raise FileNotFoundError(f"{root} is not a folder")
    found, identities = _Found(), ModelIdentities()
    revisits: list[tuple[Path, Path]] = []
    for folder, entries in walk_folders(paths, found.skipped, revisits):
        _discover_folder(found, folder, entries, identities)
    found.duplicates += revisits
    return found, identities.models


def find_samples_files(output_dir: str | Path) -> list[SamplesFile]:
    """Every distinct lm-eval samples file under ``output_dir`` (copies read once), paired with its results
    file. Raises ``RunFormatError`` for an unreadable results file, or a capcal sampling task in a results
    file whose samples file is missing (the run was made without ``--log_samples``)."""
    return discover_runs([output_dir])[0].files
