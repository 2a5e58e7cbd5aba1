"""Files in capcal's cache folder (``$CAPCAL_HOME/cache``), each written whole or not at all.

A cache file only saves work: one that cannot be written (a read-only home) is skipped, and its reader
computes the value again when the file is missing, unreadable or made for another key. Users:
``capcal_models.model_identity`` (file hashes) and ``capcal_tasks.task_index`` (lm-eval's task index).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from capcal_tasks.settings import capcal_home

__all__ = ["cache_lock", "cache_path", "write_cache_file"]


def cache_path(*parts: str) -> Path:
    """``$CAPCAL_HOME/cache/<parts...>`` (``capcal_tasks.settings.capcal_home``)."""
    return capcal_home().joinpath("cache", *parts)


def write_cache_file(path: Path, text: str) -> bool:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file in its folder and ``os.replace``, so a
    reader in another process sees the old file or the new one, whole. Returns False, having written
    nothing, when the folder cannot be made or written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError:
        return False
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except OSError:
        Path(temporary).unlink(missing_ok=True)
        return False
    return True


@contextlib.contextmanager
def cache_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing; it stays, since removing it would race
    with a waiting process) for the block: one process at a time computes a cache file, and the next one
    reads it. Where the lock file cannot be made (a read-only home) the block runs unlocked."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("a")
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
