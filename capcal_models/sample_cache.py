"""On-disk cache of sampled responses, keyed by (request key, repeat index), so an interrupted run resumes.

One SQLite file (no pickle): table ``samples(request_key, repeat, value, created)``. Each finished sample (an
API response, a capcal-hf row) is committed as soon as it exists, so a killed run keeps every sample it had,
and the next run with the same requests reads them instead of sampling again. The request key is a SHA-256
over everything that defines the samples (the backend's model identity, prompt, generation parameters, run
seed, task, question id, request index) and nothing secret: API keys travel in HTTP headers and never enter a
key or a value. ``open_sample_cache`` resolves the wrappers' ``cache_path`` / ``sample_cache`` arguments.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path

from capcal_tasks.settings import capcal_home, parse_bool

__all__ = ["SampleCache", "open_sample_cache", "request_key"]


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
                "INSERT OR REPLACE INTO samples (request_key, repeat, value, created) VALUES (?, ?, ?, ?)",
                [(key, int(repeat), value, now) for (key, repeat), value in samples.items()],
            )

    def __len__(self) -> int:
        return int(self._connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0])

    def close(self) -> None:
        self._connection.close()


def open_sample_cache(cache_path: str | Path | None, enabled: object, backend: str) -> SampleCache | None:
    """The cache named by a wrapper's model arguments: None when ``enabled`` is false (``False``, or a string
    "false"/"0"/"no"/"off"; ``capcal_tasks.settings.parse_bool``), else ``cache_path``, by default
    ``$CAPCAL_HOME/cache/<backend>/samples.sqlite``."""
    if not parse_bool(enabled):
        return None
    if cache_path is None:
        cache_path = capcal_home() / "cache" / backend / "samples.sqlite"
    return SampleCache(cache_path)
