"""lm-eval's own task index, parsed once per process and kept on disk, and a TaskManager's index put over it.

lm-eval's task tree (about 14,000 YAMLs: 5-12 s of CPU time to parse on a 2-core Xeon) is indexed once per
process (``lm_eval_task_index``, a cache keyed by the folder) and, between processes, read back from a JSON
file under ``$CAPCAL_HOME/cache/lm_eval`` (``index_cache_file``). That file holds the entries exactly as
``TaskIndex.build`` made them, the warnings the build logged (said again on each read, as a fresh build
would) and the tree's fingerprint (``tree_fingerprint``: the relative path, size and modification time of
every file under the folder): a tree that changed, another lm-eval version or a file that cannot be read is
built again. An index whose configs would not come back from JSON unchanged is never written (every read
is lm-eval's own build, or equal to it). ``put_over_lm_eval_tasks`` gives a ``TaskManager`` built with
``include_defaults=False`` what ``TaskManager(include_defaults=True)`` would have: its own dict of those
entries with its include paths over them. The entries are shared: lm-eval reads them only (it deep-copies a
config, or reads its YAML again, before building a task; it adds names to a manager's own dict only).

Users: ``capcal_tasks.task_manager.CapcalTaskManager`` (``capcal eval``) and
``capcal_tasks.sampled_task.base_task_from_metadata`` (each wrapped task under stock ``lm_eval``'s
``class:`` route), which otherwise would parse the tree once per task.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from collections import defaultdict
from collections.abc import Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Any

from lm_eval.tasks import TaskManager
from lm_eval.tasks._index import Entry, Kind, TaskIndex

from capcal_tasks.cache_files import cache_lock, cache_path, write_cache_file
from capcal_tasks.task_names import lm_eval_tasks_dir

__all__ = [
    "build_or_read_task_index",
    "index_cache_file",
    "lm_eval_task_index",
    "put_over_lm_eval_tasks",
    "tree_fingerprint",
]

#: the layout of an index cache file; a file of another format is built again
INDEX_CACHE_FORMAT = 1
#: folders whose files change without changing the index (Python's bytecode)
IGNORED_FOLDERS = frozenset({"__pycache__", ".ipynb_checkpoints"})


@functools.cache
def lm_eval_task_index(folder: Path) -> Mapping[str, Entry]:
    """The index of the task YAMLs under ``folder`` (lm-eval's own task tree, ``lm_eval_tasks_dir()``) as
    ``TaskManager`` builds it (``TaskIndex.build``), once per process and folder, read from its cache file
    when the tree has not changed (``build_or_read_task_index``). Read it only: its entries are shared by
    every manager of the process (module docstring)."""
    return build_or_read_task_index(folder, index_cache_file(folder))


def index_cache_file(folder: Path) -> Path:
    """``$CAPCAL_HOME/cache/lm_eval/task_index-<key>.json``, the key a digest of the cache format, the
    installed lm-eval's version and the resolved folder."""
    key = f"{INDEX_CACHE_FORMAT}\0{version('lm_eval')}\0{Path(folder).resolve()}"
    return cache_path("lm_eval", f"task_index-{hashlib.sha256(key.encode()).hexdigest()[:20]}.json")


def tree_fingerprint(folder: Path) -> str:
    """SHA-256 over every file under ``folder`` (but ``IGNORED_FOLDERS``; linked folders are not entered, as
    lm-eval's ``glob("**/*.yaml")`` does not enter them on Python 3.11): its path relative to the folder, size
    and ``st_mtime_ns`` (-1 and -1 for one that cannot be read), in sorted order. Any file counts, not only
    ``*.yaml``: lm-eval's YAMLs include templates named without the suffix
    (``include: _default_template_yaml``)."""
    root = Path(folder)
    rows = []
    for current, folders, files in os.walk(root):
        folders[:] = [name for name in folders if name not in IGNORED_FOLDERS]
        for name in files:
            path = Path(current, name)
            try:
                stat = path.stat()
                rows.append((path.relative_to(root).as_posix(), stat.st_size, stat.st_mtime_ns))
            except OSError:  # a dangling link, a file removed meanwhile: its name counts
                rows.append((path.relative_to(root).as_posix(), -1, -1))
    return hashlib.sha256(json.dumps(sorted(rows)).encode()).hexdigest()


def build_or_read_task_index(folder: Path, cache_file: Path) -> dict[str, Entry]:
    """``TaskIndex.build([folder])``, or its copy read from ``cache_file`` when that was written for the
    same tree (``tree_fingerprint``) and format. One process at a time builds (a lock file beside
    ``cache_file``): a second one waits and reads the first one's file. A fresh build is written to
    ``cache_file`` when its entries come back from JSON unchanged; the warnings the build logged are logged
    again on each read."""
    cache_file = Path(cache_file)
    fingerprint = tree_fingerprint(folder)
    index = _read_index(cache_file, fingerprint)
    if index is not None:
        return index
    with cache_lock(cache_file.with_name(cache_file.name + ".lock")):
        index = _read_index(cache_file, fingerprint)  # built by the process that held the lock
        if index is not None:
            return index
        logger = logging.getLogger(TaskIndex.__module__)
        warnings: list[str] = []
        recorder = _WarningRecorder(warnings)
        logger.addHandler(recorder)
        try:
            index = TaskIndex.build([Path(folder)])
        finally:
            logger.removeHandler(recorder)
        content = {
            "format": INDEX_CACHE_FORMAT,
            "fingerprint": fingerprint,
            "warnings": warnings,
            "entries": [_row(entry) for entry in index.values()],
        }
        try:
            text = json.dumps(content)
        except (TypeError, ValueError):
            return index  # a config holds a value JSON has not: never cached
        if [_entry(row) for row in json.loads(text)["entries"]] == list(index.values()):  # no NaN, int key
            write_cache_file(cache_file, text)
    return index


def _read_index(cache_file: Path, fingerprint: str) -> dict[str, Entry] | None:
    """The index in ``cache_file`` when it was written for ``fingerprint`` in this format (its build's
    warnings logged again), else None (missing, unreadable, another layout or tree)."""
    try:
        cached = json.loads(cache_file.read_text(encoding="utf-8"))
        if cached["format"] != INDEX_CACHE_FORMAT or cached["fingerprint"] != fingerprint:
            return None
        index = {row[0]: _entry(row) for row in cached["entries"]}
        warnings = [str(message) for message in cached["warnings"]]
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
    for message in warnings:
        logging.getLogger(TaskIndex.__module__).warning("%s", message)
    return index


class _WarningRecorder(logging.Handler):
    """Keeps the text of each WARNING (or worse) record a build logs."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.messages = messages

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _row(entry: Entry) -> list[Any]:
    path = None if entry.yaml_path is None else str(entry.yaml_path)
    return [entry.name, entry.kind.name, path, entry.cfg, sorted(entry.tags)]


def _entry(row: list[Any]) -> Entry:
    name, kind, path, cfg, tags = row
    return Entry(
        name=name, kind=Kind[kind], yaml_path=None if path is None else Path(path), cfg=cfg, tags=set(tags)
    )


def put_over_lm_eval_tasks(manager: TaskManager) -> None:
    """``manager``'s index (its include paths) put over lm-eval's own task index: what
    ``TaskManager(include_defaults=True)`` builds (lm-eval 0.4.13's ``__init__``: the default folder first,
    each later path's entries over it, with its warning; then the name lists by kind), without parsing
    lm-eval's tree again."""
    index = dict(lm_eval_task_index(lm_eval_tasks_dir()))
    for name, entry in manager._index.items():
        if name in index:
            logging.getLogger(TaskIndex.__module__).warning(
                "Task '%s' from %s overrides existing task from %s",
                name,
                entry.yaml_path,
                index[name].yaml_path,
            )
        index[name] = entry
    buckets: dict[Kind, list[str]] = defaultdict(list)
    for name, entry in index.items():
        buckets[entry.kind].append(name)
    manager._index = index
    manager._all_tasks = sorted(index)
    manager._all_subtasks = sorted([*buckets[Kind.TASK], *buckets[Kind.PY_TASK]])
    manager._all_groups = sorted(buckets[Kind.GROUP])
    manager._all_tags = sorted(buckets[Kind.TAG])
