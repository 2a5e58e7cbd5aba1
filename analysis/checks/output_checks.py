"""Is what a command wrote complete? A write that failed is a failed run, said in one line.

lm-eval's ``EvaluationTracker`` catches every exception while it saves (``OSError(28, 'No space left on
device')`` included), logs a WARNING "Could not save sample results" (or "... results aggregated") and the
error's ``repr`` at INFO, and returns: a full disk leaves a truncated samples file and a run that looks
successful. So ``capcal eval`` (``analysis.evaluation.evaluate``)

- collects those swallowed errors while it saves (``lm_eval_save_errors``),
- then reads back what it wrote (``saved_run_problems``: the results JSON parses; every samples file holds
  one complete JSON line per question of its task, lm-eval's ``n-samples.effective``),
- and otherwise renames the run's files ``*.incomplete`` (``mark_incomplete``: readers of the output folder
  skip them) and raises ``IncompleteOutputError``: what is incomplete, why (the OS error), and whether the
  samples are still in capcal's sample cache (``sample_cache_note``), so that re-running the command writes
  them without decoding again.

The other commands (``capcal report``, ``table``, ``analyze``, ``selfcal``) write with Python's ``open``:
``recording_written_files`` records every file opened for writing while the command runs (a ``sys`` audit
hook), and on an ``OSError`` ``remove_partial_files`` deletes them, so no truncated report, table or
question file is left looking complete (``failed_write_message``: the one line).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "CACHED_ENGINES",
    "INCOMPLETE_SUFFIX",
    "IncompleteOutputError",
    "complete_json_lines",
    "failed_write_message",
    "lm_eval_save_errors",
    "mark_incomplete",
    "recording_written_files",
    "remove_partial_files",
    "sample_cache_note",
    "saved_run_problems",
]

INCOMPLETE_SUFFIX = ".incomplete"
# capcal's engines that commit generated samples to a sample cache, and the cache's folder name.
CACHED_ENGINES = {"capcal-hf": "hf", "capcal-vllm": "vllm", "capcal-api": "api"}
_TRACKER_LOGGER = "lm_eval.loggers.evaluation_tracker"


class IncompleteOutputError(RuntimeError):
    """A run whose results or samples were not written completely; the message is one line."""


class _SaveErrorFilter(logging.Filter):
    """Collects the tracker's "Could not save ..." warnings and the error ``repr`` logged after each;
    passes on only what the logger's own level lets through."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level
        self.errors: list[str] = []
        self._saving_failed = False

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.levelno >= logging.WARNING and message.startswith("Could not save"):
            self.errors.append(message)
            self._saving_failed = True
        elif self._saving_failed and record.levelno == logging.INFO:
            self.errors[-1] = f"{self.errors[-1]}: {message}"
            self._saving_failed = False
        return record.levelno >= self.level


@contextlib.contextmanager
def lm_eval_save_errors() -> Iterator[list[str]]:
    """Within the block, collect the save errors lm-eval's ``EvaluationTracker`` logs and swallows, one
    string each: ``"Could not save sample results: OSError(28, 'No space left on device')"``. The tracker's
    logger is set to INFO for the block (to see the ``repr``); what its old level hid stays hidden."""
    tracker_logger = logging.getLogger(_TRACKER_LOGGER)
    old_level = tracker_logger.level
    capture = _SaveErrorFilter(tracker_logger.getEffectiveLevel())
    tracker_logger.addFilter(capture)
    tracker_logger.setLevel(min(logging.INFO, tracker_logger.getEffectiveLevel()))
    try:
        yield capture.errors
    finally:
        tracker_logger.removeFilter(capture)
        tracker_logger.setLevel(old_level)


def complete_json_lines(path: str | Path) -> tuple[int, bool]:
    """``(n, cut)``: how many lines of ``path`` are complete JSON values ending in a newline, counted up to
    the first that is not, and whether anything follows them (a cut or unreadable line)."""
    count = 0
    with open(path, "rb") as handle:
        for line in handle:
            if not line.endswith(b"\n"):
                return count, True
            try:
                json.loads(line)
            except ValueError:
                return count, True
            count += 1
    return count, False


def _results_problem(path: Path) -> str | None:
    if not path.is_file():
        return f"{path.name} was not written"
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return f"{path.name} is not complete JSON ({type(error).__name__}: {error})"
    return None


def saved_run_problems(
    results_path: str | Path, samples_paths: Mapping[str, str | Path], questions: Mapping[str, int]
) -> list[str]:
    """What is incomplete in a saved run, one phrase each (empty: complete): the results file missing or not
    parseable JSON; a task's samples file missing, or holding fewer or more complete JSON lines than
    ``questions[task]`` (the task's number of questions), or a cut line after them."""
    problems = []
    problem = _results_problem(Path(results_path))
    if problem is not None:
        problems.append(problem)
    for task, expected in questions.items():
        path = Path(samples_paths[task])
        if not path.is_file():
            problems.append(f"{path.name} was not written ({expected} questions)")
            continue
        lines, cut = complete_json_lines(path)
        if lines != expected or cut:
            tail = f" and a cut line {lines + 1}" if cut else ""
            problems.append(f"{path.name} holds {lines} of {expected} questions{tail}")
    return problems


def mark_incomplete(paths: Iterable[str | Path]) -> list[Path]:
    """Rename each existing file ``f`` to ``f.incomplete`` (out of the ``results_*.json`` and
    ``samples_*.jsonl`` patterns that ``capcal check`` and ``capcal report`` read); returns the new paths.
    A file that cannot be renamed is left where it is."""
    renamed = []
    for path in map(Path, paths):
        if path.is_file():
            target = path.with_name(path.name + INCOMPLETE_SUFFIX)
            try:
                path.replace(target)
            except OSError:
                continue
            renamed.append(target)
    return renamed


def sample_cache_note(model: Any, model_args: Mapping[str, Any], output_types: Mapping[str, str]) -> str:
    """Whether the samples of a run are still in capcal's sample cache, one phrase: capcal-hf, capcal-vllm
    and capcal-api commit every generated sample (``generate_until`` tasks) to
    ``cache_path`` (default ``$CAPCAL_HOME/cache/<engine>/samples.sqlite``) unless ``sample_cache=false``;
    log-likelihood tasks and other models keep nothing."""
    from capcal_tasks.settings import capcal_home, parse_bool

    generated = sorted(task for task, kind in output_types.items() if kind == "generate_until")
    others = sorted(task for task in output_types if task not in generated)
    engine = CACHED_ENGINES.get(model) if isinstance(model, str) else None
    enabled = engine is not None and parse_bool(model_args.get("sample_cache", True))
    if not enabled or not generated:
        why = "sample_cache=false" if engine is not None and generated else f"{model} keeps no sample cache"
        if engine is not None and not generated:
            why = "log-likelihood requests are not cached"
        return f"the samples are not in a sample cache ({why}): re-running computes them again"
    path = model_args.get("cache_path") or capcal_home() / "cache" / engine / "samples.sqlite"
    note = f"the samples of {', '.join(generated)} are in the sample cache {path}"
    if others:
        note += f" (not those of {', '.join(others)}: log-likelihoods are computed again)"
    return note + ": re-running reads them back without decoding"


# --- files written by the other commands -----------------------------------------------------------------

_recorders: list[list[Path]] = []
_hook_installed = False
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT


# The hook runs on every audited event of the process for the rest of its life (a test runner's, a mutation
# tool's), so it is kept out of mutation runs: a mutant of it breaks the tool that plants it.
def _audit(event: str, args: tuple) -> None:  # pragma: no mutate block
    if event != "open" or not _recorders:
        return
    path, mode, flags = args
    writing = (
        any(letter in mode for letter in "wax+") if isinstance(mode, str) else bool(flags & _WRITE_FLAGS)
    )
    if writing and isinstance(path, (str, bytes, os.PathLike)):
        _recorders[-1].append(Path(os.fsdecode(path)))


@contextlib.contextmanager
def recording_written_files() -> Iterator[list[Path]]:
    """Within the block, collect the path of every file this process opens for writing with Python's
    ``open``/``os.open`` (a ``sys.addaudithook`` hook, installed once per process and idle outside the
    block), in the order opened. Files written by native code (safetensors) are not seen."""
    global _hook_installed
    if not _hook_installed:
        sys.addaudithook(_audit)
        _hook_installed = True
    written: list[Path] = []
    _recorders.append(written)
    try:
        yield written
    finally:
        _recorders.remove(written)


def remove_partial_files(written: Iterable[Path], under: Iterable[str | Path]) -> list[Path]:
    """Delete the files of ``written`` (what a failed command wrote) that exist and lie in one of the folders
    or files ``under`` (the command's outputs: never a cache or log file it also wrote); returns them, each
    once."""
    roots = [Path(root).expanduser().resolve() for root in under]
    removed: list[Path] = []
    for path in dict.fromkeys(written):
        resolved = path.expanduser().resolve()
        inside = any(resolved == root or root in resolved.parents for root in roots)
        if inside and path.is_file():
            with contextlib.suppress(OSError):
                path.unlink()
                removed.append(path)
    return removed


def failed_write_message(command: str, error: OSError, written: list[Path], removed: list[Path]) -> str:
    """One line for a command whose write failed: the file it was writing (the last opened), the OS error and
    the partial files removed."""
    target = error.filename or (written[-1] if written else None)
    where = f" {target}" if target else ""
    reason = error.strerror or str(error)
    errno = f"[Errno {error.errno}] " if error.errno else ""
    gone = f"; removed the partial file(s) {', '.join(map(str, removed))}" if removed else ""
    return f"capcal {command}: error: could not write{where}: {errno}{reason}{gone}"
