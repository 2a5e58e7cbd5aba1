"""On-disk cache of sampled responses, keyed by (request key, repeat index), so an interrupted run resumes.

One SQLite file (no pickle): table ``samples(request_key, repeat, value, created)``. ``SampleCache.put`` /
``put_many`` commit at once (a capcal-hf decoding step's rows); ``SampleCache.writer`` gives a
``BatchedWriter`` that groups many small writes (API responses) into one transaction, committed when
``max_rows`` samples are pending, by a background thread every ``max_seconds``, and on ``flush``/``close``:
a killed process loses at most the samples of the batch not yet committed (at most
``max_rows`` samples, received within about the last ``max_seconds``). The next run with the same requests
reads the committed samples instead of sampling again. The request key is a SHA-256
over everything that defines the samples (the backend's model identity, prompt, generation parameters, run
seed, task, question id, request index) and nothing secret: API keys travel in HTTP headers and never enter a
key or a value. ``open_sample_cache`` resolves the wrappers' ``cache_path`` / ``sample_cache`` arguments.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path

from capcal_tasks.settings import capcal_home, parse_bool

__all__ = ["BatchedWriter", "SampleCache", "committed_samples", "open_sample_cache", "request_key"]

INSERT = "INSERT OR REPLACE INTO samples (request_key, repeat, value, created) VALUES (?, ?, ?, ?)"
_committed: dict[Path, int] = {}  # cache file -> samples committed to it by this process
_committed_lock = threading.Lock()


def committed_samples() -> dict[Path, int]:
    """Samples this process committed, per sample cache file (what a stopped run has saved)."""
    with _committed_lock:
        return dict(_committed)


def _count_committed(path: Path, rows: int) -> None:
    with _committed_lock:
        _committed[path] = _committed.get(path, 0) + rows


def request_key(identity: dict) -> str:
    """SHA-256 (hex) of the canonical JSON of a request's identity."""
    canonical = json.dumps(identity, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class SampleCache:
    """Samples (strings) per (request key, repeat index) in a SQLite file; safe for several processes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser().resolve()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._connection = sqlite3.connect(self.path, timeout=60.0)
        self._connection.execute("PRAGMA journal_mode=WAL")
        self._connection.execute(
            "CREATE TABLE IF NOT EXISTS samples (request_key TEXT NOT NULL, repeat INTEGER NOT NULL, "
            "value TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (request_key, repeat))"
        )
        self._connection.commit()

    def get(self, key: str) -> dict[int, str]:
        """The cached samples of one request: repeat index -> value."""
        rows = self._connection.execute("SELECT repeat, value FROM samples WHERE request_key = ?", (key,))
        return {int(repeat): value for repeat, value in rows}

    def put(self, key: str, samples: dict[int, str]) -> None:
        """Store samples of one request (repeat index -> value) and commit at once."""
        self.put_many({(key, repeat): value for repeat, value in samples.items()})

    def put_many(self, samples: dict[tuple[str, int], str]) -> None:
        """Store samples of any requests ((request key, repeat index) -> value) in one transaction."""
        now = time.time()
        with self._connection:
            self._connection.executemany(
                INSERT, [(key, int(repeat), value, now) for (key, repeat), value in samples.items()]
            )
        _count_committed(self.path, len(samples))

    def writer(self, max_rows: int = 1000, max_seconds: float = 0.2) -> BatchedWriter:
        """A ``BatchedWriter`` to this file (its own connection); ``close`` (or ``with``) commits the rest."""
        return BatchedWriter(self.path, max_rows=max_rows, max_seconds=max_seconds)

    def __len__(self) -> int:
        return int(self._connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0])

    def close(self) -> None:
        self._connection.close()


class BatchedWriter:
    """Batched writes to a sample cache file: ``put`` collects samples, committed in one transaction when
    ``max_rows`` are pending (in ``put``'s thread), by a background thread every ``max_seconds`` (so a sample
    waits at most ``max_seconds`` plus one commit, even when no more arrive) and on ``flush``/``close``. A
    SIGKILL loses only the pending samples: at most ``max_rows``, received within that time bound. Commits
    use ``synchronous=NORMAL`` (WAL): safe when the process is killed; a power loss may undo the last ones."""

    def __init__(self, path: str | Path, *, max_rows: int = 1000, max_seconds: float = 0.2) -> None:
        if max_rows < 1 or max_seconds <= 0:
            raise ValueError(
                f"BatchedWriter needs max_rows >= 1 and max_seconds > 0, not {max_rows}, {max_seconds}"
            )
        self.path = Path(path)
        self.max_rows = int(max_rows)
        self.max_seconds = float(max_seconds)
        self.commits = 0  # transactions committed (for tests and benchmarks)
        self._connection = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False)
        # WAL + NORMAL: a commit is durable once it returns if the process is killed (only a power loss or OS
        # crash can roll back the last commits), and costs no fsync
        self._connection.execute("PRAGMA synchronous=NORMAL")
        self._pending: dict[tuple[str, int], str] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(
            target=self._flush_periodically, name="sample-cache-writer", daemon=True
        )
        self._thread.start()

    def put(self, key: str, samples: dict[int, str]) -> None:
        """Add samples of one request (repeat index -> value); commits when ``max_rows`` are pending."""
        with self._lock:
            if self._closed.is_set():
                raise ValueError(f"the sample cache writer of {self.path} is closed")
            for repeat, value in samples.items():
                self._pending[(key, int(repeat))] = value
            if len(self._pending) >= self.max_rows:
                self._commit()

    def flush(self) -> None:
        """Commit the pending samples now."""
        with self._lock:
            self._commit()

    def pending(self) -> int:
        """Samples not yet committed."""
        with self._lock:
            return len(self._pending)

    def close(self) -> None:
        """Commit the pending samples and stop the background thread."""
        with self._lock:
            self._closed.set()
            self._commit()
        self._thread.join()
        self._connection.close()

    def __enter__(self) -> BatchedWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _commit(self) -> None:  # with self._lock held
        if not self._pending:
            return
        now = time.time()
        rows = [(key, repeat, value, now) for (key, repeat), value in self._pending.items()]
        with self._connection:
            self._connection.executemany(INSERT, rows)
        _count_committed(self.path.resolve(), len(rows))
        self._pending.clear()
        self.commits += 1

    def _flush_periodically(self) -> None:
        while not self._closed.wait(self.max_seconds):
            with self._lock:
                if not self._closed.is_set():
                    self._commit()


def open_sample_cache(cache_path: str | Path | None, enabled: object, backend: str) -> SampleCache | None:
    """The cache named by a wrapper's model arguments: None when ``enabled`` is false (``False``, or a string
    "false"/"0"/"no"/"off"; ``capcal_tasks.settings.parse_bool``), else ``cache_path``, by default
    ``$CAPCAL_HOME/cache/<backend>/samples.sqlite``."""
    if not parse_bool(enabled):
        return None
    if cache_path is None:
        cache_path = capcal_home() / "cache" / backend / "samples.sqlite"
    return SampleCache(cache_path)
