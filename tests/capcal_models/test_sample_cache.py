"""capcal_models.sample_cache: the SQLite cache that makes sampling runs resumable.

Keys are canonical (key order does not matter), samples persist per (request key, repeat) across connections,
and ``open_sample_cache`` resolves the wrappers' ``cache_path`` / ``sample_cache`` model arguments. The
batched writer commits by count, by time and on close; a SIGKILLed writer loses only its uncommitted batch.
The resume behaviour of each wrapper is tested in test_hf_resume.py and test_api.py.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from capcal_models.sample_cache import (
    BatchedWriter,
    SampleCache,
    committed_samples,
    open_sample_cache,
    request_key,
)


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


def _committed(path: Path) -> list[tuple[str, int, str]]:
    """The rows another connection (another process) sees in the cache file."""
    other = sqlite3.connect(path)
    try:
        return sorted(other.execute("SELECT request_key, repeat, value FROM samples").fetchall())
    finally:
        other.close()


def test_batched_writer_commits_every_max_rows_and_on_close(tmp_path: Path) -> None:
    path = tmp_path / "samples.sqlite"
    cache = SampleCache(path)
    with cache.writer(max_rows=3, max_seconds=3600) as writer:
        writer.put("a", {0: "x", 1: "y"})
        assert _committed(path) == [] and writer.pending() == 2
        writer.put("b", {0: "z"})  # the third pending sample: one transaction
        assert _committed(path) == [("a", 0, "x"), ("a", 1, "y"), ("b", 0, "z")] and writer.commits == 1
        writer.put("c", {4: "w"})
        assert len(_committed(path)) == 3
    assert _committed(path)[-1] == ("c", 4, "w") and writer.commits == 2 and cache.get("c") == {4: "w"}
    with pytest.raises(ValueError, match="closed"):
        writer.put("d", {0: "v"})


def test_batched_writer_commits_within_max_seconds_without_more_writes(tmp_path: Path) -> None:
    path = tmp_path / "samples.sqlite"
    SampleCache(path).close()
    writer = SampleCache(path).writer(max_rows=1000, max_seconds=1.0)
    put_at = time.monotonic()
    writer.put("a", {0: "x"})
    committed_at_once = _committed(path)
    if time.monotonic() - put_at < 1.0:  # (a loaded machine may stall this thread past max_seconds)
        assert committed_at_once == []
    # waiting on a thread: the bound is for a thread that never commits (or reads max_seconds in ms as s)
    while not _committed(path):
        assert time.monotonic() - put_at < 60.0, "not committed by the background thread"
        time.sleep(0.02)
    assert _committed(path) == [("a", 0, "x")] and writer.pending() == 0
    writer.close()


KILLED_WRITER = """
import sys, time
from capcal_models.sample_cache import SampleCache
writer = SampleCache(sys.argv[1]).writer(max_rows=100, max_seconds=3600)
for i in range(250):
    writer.put(f"request-{i:03d}", {0: f"sample {i}"})
print("written", flush=True)
time.sleep(600)
"""


def test_a_killed_writer_loses_only_its_uncommitted_batch(tmp_path: Path) -> None:
    """A process puts 250 samples (batches of 100) and is SIGKILLed: the 200 of the two full batches are
    committed, the last 50 (never committed) are lost; nothing else."""
    path = tmp_path / "samples.sqlite"
    root = Path(__file__).resolve().parents[2]
    run = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(path)], stdout=subprocess.PIPE, text=True, cwd=root
    )
    try:
        assert run.stdout is not None and run.stdout.readline().strip() == "written"
        run.send_signal(signal.SIGKILL)
        assert run.wait(timeout=30) == -signal.SIGKILL
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=30)
    rows = _committed(path)
    assert rows == [(f"request-{i:03d}", 0, f"sample {i}") for i in range(200)]


def test_the_samples_committed_are_counted_per_cache_file_whichever_way_they_were_written(
    tmp_path: Path,
) -> None:
    """``committed_samples`` (what a stopped run reports it has saved): per resolved cache file, the rows of
    ``put``/``put_many`` and of a batched writer's commits, another file counted apart."""
    first, second = tmp_path / "a" / "samples.sqlite", tmp_path / "b" / "samples.sqlite"
    before = committed_samples()
    cache = SampleCache(first)
    cache.put("k1", {0: "x", 1: "y"})
    cache.put_many({("k2", 0): "z", ("k3", 4): "w", ("k3", 5): "v"})
    with SampleCache(second).writer(max_rows=2) as writer:
        writer.put("k1", {0: "x", 1: "y", 2: "z"})
    with SampleCache(tmp_path / "a" / ".." / "a" / "samples.sqlite").writer() as writer:
        writer.put("k4", {0: "u"})
    counted = committed_samples()
    assert counted[first.resolve()] - before.get(first.resolve(), 0) == 2 + 3 + 1
    assert counted[second.resolve()] - before.get(second.resolve(), 0) == 3
    assert set(counted) - set(before) == {first.resolve(), second.resolve()}
    cache.close()


# --- by kind: the key's canonical form, fields, boundaries, units, state ------------------------------------


def test_the_request_key_is_the_sha256_of_compact_sorted_utf8_json() -> None:
    import hashlib

    identity = {"prompt": "café", "b": [1, 2.5], "a": None, "path": Path("/m")}
    canonical = '{"a":null,"b":[1,2.5],"path":"/m","prompt":"café"}'  # written by hand
    assert request_key(identity) == hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    fields = {"model": "m", "prompt": "p", "seed": 1, "task": "t"}
    keys = {request_key(fields)} | {request_key({**fields, name: "other"}) for name in fields}
    assert len(keys) == 1 + len(fields)  # every field enters the key


def test_get_and_put_keep_key_repeat_and_value_apart(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path / "samples.sqlite")
    before = time.time()
    cache.put("key-a", {"3": "value-3", 7: "value-7"})  # a repeat given as a string is stored as an int
    cache.put_many({("key-b", 5): "value-b5"})
    after = time.time()
    assert cache.get("key-a") == {3: "value-3", 7: "value-7"} and cache.get("key-b") == {5: "value-b5"}
    assert len(cache) == 3
    connection = sqlite3.connect(tmp_path / "samples.sqlite")
    created = [row[0] for row in connection.execute("SELECT created FROM samples")]
    connection.close()
    assert all(before <= value <= after for value in created)  # seconds since the epoch, not milliseconds
    cache.close()


def test_the_writers_bounds_are_checked_on_both_sides_and_its_settings_passed_on(tmp_path: Path) -> None:
    path = tmp_path / "samples.sqlite"
    cache = SampleCache(path)
    with cache.writer(max_rows=7, max_seconds=2.5) as writer:
        assert (writer.max_rows, writer.max_seconds, writer.path) == (7, 2.5, path.resolve())
    with cache.writer() as writer:
        assert (writer.max_rows, writer.max_seconds) == (1000, 0.2)
    with cache.writer(max_rows=1, max_seconds=0.001) as writer:
        writer.put("k", {0: "v"})  # one pending sample reaches max_rows = 1: committed in put
        assert writer.pending() == 0 and _committed(path) == [("k", 0, "v")]
    for rows, seconds in [(0, 1.0), (1, 0.0)]:
        with pytest.raises(ValueError) as refused:
            cache.writer(max_rows=rows, max_seconds=seconds)
        assert str(refused.value) == (
            f"BatchedWriter needs max_rows >= 1 and max_seconds > 0, not {rows}, {seconds}"
        )
    cache.close()


def test_a_writer_keeps_one_pending_value_per_key_and_repeat_and_counts_commits(tmp_path: Path) -> None:
    path = tmp_path / "samples.sqlite"
    SampleCache(path).close()
    writer = BatchedWriter(path, max_rows=3, max_seconds=3600)
    before = time.time()
    writer.put("k", {0: "old", "1": "one"})
    writer.put("k", {0: "new"})  # the same (key, repeat): replaced, still two pending
    writer.put("j", {0: "other"})  # a third: committed
    assert writer.pending() == 0 and writer.commits == 1
    writer.flush()  # nothing pending: no transaction
    assert writer.commits == 1
    writer.put("j", {2: "two"})
    writer.flush()
    assert writer.commits == 2 and writer.pending() == 0
    after = time.time()
    writer.close()
    connection = sqlite3.connect(path)
    created = [row[0] for row in connection.execute("SELECT created FROM samples")]
    connection.close()
    assert all(before <= value <= after for value in created)  # seconds, as put_many's
    assert _committed(path) == [("j", 0, "other"), ("j", 2, "two"), ("k", 0, "new"), ("k", 1, "one")]
    with pytest.raises(ValueError) as closed:
        writer.put("k", {3: "late"})
    assert str(closed.value) == f"the sample cache writer of {path} is closed"
    assert _committed(path)[-1] == ("k", 1, "one")


def test_a_disabled_cache_is_none_whatever_its_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPCAL_HOME", str(tmp_path / "home"))
    for switch in (False, "0", "off", "no", "False"):
        assert open_sample_cache(tmp_path / "c.sqlite", switch, "api") is None, switch
    assert not (tmp_path / "c.sqlite").exists()
    assert open_sample_cache(None, "1", "api").path == tmp_path / "home" / "cache" / "api" / "samples.sqlite"
