"""capcal_models.sample_cache: the SQLite cache that makes sampling runs resumable.

Keys are canonical (key order does not matter), samples persist per (request key, repeat) across connections,
and ``open_sample_cache`` resolves the wrappers' ``cache_path`` / ``sample_cache`` model arguments. The
resume behaviour of each wrapper is tested in test_hf_resume.py and test_api.py.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from capcal_models.sample_cache import SampleCache, open_sample_cache, request_key


def test_sample_cache_persists_per_request_and_repeat(tmp_path: Path) -> None:
    key = request_key({"prompt": [1, 2, 3], "temperature": 1.0})
    assert key == request_key({"temperature": 1.0, "prompt": [1, 2, 3]})
    cache = SampleCache(tmp_path / "samples.sqlite")
    cache.put(key, {0: "a", 2: "c"})
    cache.close()
    reopened = SampleCache(tmp_path / "samples.sqlite")
    assert reopened.get(key) == {0: "a", 2: "c"} and reopened.get("other") == {} and len(reopened) == 2


def test_put_many_commits_at_once_and_replaces(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path / "samples.sqlite")
    cache.put_many({("a", 0): "x", ("b", 1): "y"})
    cache.put_many({("a", 0): "z"})
    other = sqlite3.connect(tmp_path / "samples.sqlite")  # another process sees the committed rows
    rows = sorted(other.execute("SELECT request_key, repeat, value FROM samples").fetchall())
    other.close()
    assert rows == [("a", 0, "z"), ("b", 1, "y")]


def test_cache_location_and_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPCAL_HOME", str(tmp_path / "home"))
    assert open_sample_cache(None, True, "hf").path == tmp_path / "home" / "cache" / "hf" / "samples.sqlite"
    assert open_sample_cache(tmp_path / "c.sqlite", "True", "hf").path == tmp_path / "c.sqlite"
    assert open_sample_cache(None, False, "hf") is None and open_sample_cache(None, "false", "hf") is None


def test_an_unreadable_switch_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a boolean: 'nope'"):
        open_sample_cache(tmp_path / "c.sqlite", "nope", "hf")
