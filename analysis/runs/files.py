"""lm-eval's two files of a run, found by name and read strictly: the results file and the samples file.

lm-eval writes ``<output>/<model>/results_<time>.json`` and, with ``--log_samples``,
``samples_<task>_<time>.jsonl`` beside it. ``walk_folders`` lists every folder under the output folders
(following symlinked folders, each real folder once); ``run_files`` picks a folder's results and samples files
by name; ``read_results`` reads and validates a results file (NaN only in lm-eval's aggregates);
``iter_sample_records`` reads a samples file line by line. The data path is told in order in
:mod:`analysis.runs`.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from capcal_tasks.checkers import parse_rescore_provenance
from capcal_tasks.records import RunFormatError, iter_json_lines, read_json_with_digest

__all__ = [
    "AGGREGATE_SECTIONS",
    "RESULTS_NAME",
    "SAMPLES_NAME",
    "iter_sample_records",
    "read_results",
    "run_files",
    "walk_folders",
]


_DATE_ID = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"


SAMPLES_NAME = re.compile(rf"^samples_(?P<task>.+)_(?P<date>{_DATE_ID})\.jsonl$")


RESULTS_NAME = re.compile(rf"^results_(?P<date>{_DATE_ID})\.json$")


AGGREGATE_SECTIONS = ("results", "groups")  # lm-eval's aggregates: NaN allowed (an undefined mean or stderr)


def walk_folders(
    roots: Sequence[Path], skipped: list[tuple[Path, str]], revisits: list[tuple[Path, Path]]
) -> list[tuple[Path, list[os.DirEntry]]]:
    """(folder, entries) of every folder under ``roots``, following symlinks; each real folder once (a
    folder reached again is added to ``revisits`` as (path, first path))."""
    seen: dict[tuple[int, int], Path] = {}
    folders: list[tuple[Path, list[os.DirEntry]]] = []
    stack = [Path(root) for root in reversed(roots)]
    while stack:
        folder = stack.pop()
        try:
            stat = folder.stat()
        except OSError as error:
            skipped.append((folder, f"cannot be read ({error.strerror})"))
            continue
        identity = (stat.st_dev, stat.st_ino)
        if identity in seen:
            revisits.append((folder, seen[identity]))
            continue
        seen[identity] = folder
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError as error:
            skipped.append((folder, f"cannot be listed ({error.strerror})"))
            continue
        folders.append((folder, entries))
        children = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=True):
                    children.append(Path(entry.path))
            except OSError:
                skipped.append((Path(entry.path), "a broken link"))
        stack.extend(reversed(children))
    return folders


def run_files(
    entries: list[os.DirEntry], skipped: list[tuple[Path, str]]
) -> tuple[dict[str, Path], list[tuple[Path, str, str]]]:
    """A folder's results files ({date: path}) and samples files ([(path, task, date)]), by name."""
    results_files: dict[str, Path] = {}
    samples_files: list[tuple[Path, str, str]] = []
    for entry in entries:
        path = Path(entry.path)
        results_match, samples_match = RESULTS_NAME.match(entry.name), SAMPLES_NAME.match(entry.name)
        if not (results_match or samples_match):
            continue
        try:
            is_folder = entry.is_dir(follow_symlinks=True)
            os.stat(path)  # a link that loops or points nowhere cannot be read: say so, naming the file
        except OSError as error:
            raise RunFormatError(
                f"{path}: cannot be read ({error.strerror}); a link that loops or points nowhere? "
                "fix or remove it"
            ) from None
        if is_folder:
            skipped.append((path, "a folder named like an lm-eval results/samples file, not read"))
        elif results_match:
            results_files[results_match["date"]] = path
        else:
            samples_files.append((path, samples_match["task"], samples_match["date"]))
    return results_files, samples_files


def _results_where(path: Path, text_key: str, value: Any = ...) -> str:
    """``path:line`` of ``"text_key": value`` (of ``"text_key":`` without a value) in a results file (1 when
    not found)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return f"{path}:1"
    pattern = re.escape(json.dumps(text_key)) + r"\s*:"
    if value is not ...:
        pattern += r"\s*" + re.escape(json.dumps(value))
    match = re.search(pattern, text)
    return f"{path}:{text.count(chr(10), 0, match.start()) + 1 if match else 1}"


def _constant_where(path: Path, key: str, constant: str) -> str:
    """``path:line`` of the first ``constant`` (NaN, Infinity) after the top-level ``"key":``."""
    text = path.read_text(encoding="utf-8")
    match = re.search(re.escape(json.dumps(key)) + r"\s*:", text)
    start = match.end() if match else 0
    found = re.search(r"(?<![\w\"-])" + re.escape(constant) + r"(?![\w\"])", text[start:])
    position = start + found.start() if found else start
    return f"{path}:{text.count(chr(10), 0, position) + 1}"


def _non_finite(value: Any) -> str | None:
    """The first NaN/Infinity in a parsed JSON value (as its JSON constant), or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return "NaN" if math.isnan(item) else ("Infinity" if item > 0 else "-Infinity")
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def read_results(path: Path) -> tuple[dict, str]:
    """A results file, validated, and the sha256 of its bytes (one read). NaN is lm-eval's own value for an
    undefined aggregate or standard error (the mean verbalized confidence when every parse failed), so it is
    accepted in the ``results`` and ``groups`` sections, which capcal does not read, and rejected anywhere
    else, like everywhere in the samples files."""
    constants: list[str] = []
    results, digest = read_json_with_digest(path, nonfinite=constants)
    if not isinstance(results, dict) or "results" not in results:
        raise RunFormatError(f"{path}: not an lm-eval results file (no 'results' key)")
    if constants:
        for key, value in results.items():
            constant = None if key in AGGREGATE_SECTIONS else _non_finite(value)
            if constant is not None:
                raise RunFormatError(
                    f"{_constant_where(path, key, constant)}: non-finite number {constant} in '{key}' "
                    "(not JSON; lm-eval writes NaN only for aggregates)"
                )
    for key in ("configs", "config"):
        if not isinstance(results.get(key) or {}, dict):
            raise RunFormatError(f"{path}: '{key}' must be a JSON object, got {type(results[key]).__name__}")
    configs = results.get("configs") or {}
    for task, config in configs.items():
        if not isinstance(config, dict) or not isinstance(config.get("metadata") or {}, dict):
            raise RunFormatError(f"{path}: the config of task {task} (and its metadata) must be JSON objects")
        if "repeats" in config:
            repeats = config["repeats"]
            if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
                raise RunFormatError(
                    f"{_results_where(path, 'repeats', repeats)}: task {task}: repeats must be a positive "
                    f"integer, got {repeats!r}"
                )
    for task, counts in (results.get("n-samples") or {}).items():
        effective = counts.get("effective") if isinstance(counts, dict) else None
        if effective is not None and (
            isinstance(effective, bool) or not isinstance(effective, int) or effective < 0
        ):
            raise RunFormatError(
                f"{_results_where(path, 'effective', effective)}: task {task}: n-samples effective must be a "
                f"count, got {effective!r}"
            )
    identity = results.get("capcal_model")
    if identity is not None and not (
        isinstance(identity, dict)
        and isinstance(identity.get("fingerprint"), (str, type(None)))
        and isinstance(identity.get("label", ""), str)
    ):
        raise RunFormatError(f"{path}: 'capcal_model' must be an object with a fingerprint (text or null)")
    parse_rescore_provenance(results.get("capcal_rescore"), str(path))
    return results, digest


def iter_sample_records(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, record) of every non-empty line of a samples file, strictly parsed
    (``capcal_tasks.records.iter_json_lines``)."""
    return iter_json_lines(path)
