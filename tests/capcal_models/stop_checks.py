"""Stopping a real ``capcal eval`` run with a real signal, for the capcal-hf and capcal-vllm tests.

``stop_run`` starts the run, waits until it has committed more samples to its sample cache than there were at
its start, records its whole process tree (psutil: the run, vLLM's engine processes, the watchdog of
``capcal_models.stopping``), sends the signal to the run's own process only (as ``kill PID`` or a
scheduler's SIGKILL would; a terminal's Ctrl-C would reach the whole foreground group) and returns what was
left alive of that tree 5 s after the signal, and at least ``AFTER_EXIT_S`` after the run's own exit (the
watchdog's poll and grace, ``capcal_models.stopping``, plus 1 s), with the run's exit status and its stderr
lines that say it was stopped. These spans are an idle machine's: the check polls until the whole tree has
ended and gives up after the spans times ``contention()`` (``tests/time_limits.py``), so a loaded machine
that schedules the engine's processes late does not fail it, and a process that never ends still does. A
run whose unwinding takes longer than 5 s still gives its watchdog the whole ``AFTER_EXIT_S`` (CI's failure
of 2026-11-28: the check gave up at the run's exit, before the watchdog had seen it).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from capcal_models.stopping import GRACE_SECONDS, POLL_SECONDS, WATCHDOG_VARIABLE

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/time_limits.py
from time_limits import contention  # noqa: E402

CHECK_AFTER_S = 5.0
AFTER_EXIT_S = POLL_SECONDS + GRACE_SECONDS + 1.0


def committed(cache: Path) -> dict[tuple[str, int], str]:
    """(request key, repeat) -> text of every committed sample; empty before the table exists."""
    if not cache.exists():
        return {}
    connection = sqlite3.connect(cache, timeout=60.0)
    try:
        return {(key, repeat): value for key, repeat, value in connection.execute(
            "SELECT request_key, repeat, value FROM samples"
        )}  # fmt: skip
    except sqlite3.OperationalError:  # the table is not created yet
        return {}
    finally:
        connection.close()


@dataclass
class StoppedRun:
    """What a signal left: exit status, the last stderr line, the tree at the signal and what survived it."""

    exit_status: int
    stop_lines: list[str]  # the lines on stderr that say the run was stopped
    log: str
    tree: list[str]  # "name pid" of every process of the run's tree when the signal was sent
    alive: list[str]  # those still running when the check gave up (see the module)
    rows_at_signal: int
    exit_seconds: float  # from the signal to the run's exit


def _tree(pid: int) -> dict[int, tuple[float, str]]:
    """pid -> (start time, name) of a process and all its descendants."""
    root = psutil.Process(pid)
    found = {}
    for process in [root, *root.children(recursive=True)]:
        try:
            found[process.pid] = (process.create_time(), " ".join(process.cmdline())[:200] or process.name())
        except psutil.NoSuchProcess:
            continue
    return found


def _alive(tree: dict[int, tuple[float, str]]) -> list[str]:
    alive = []
    for pid, (started, name) in tree.items():
        try:
            process = psutil.Process(pid)
            if process.create_time() == started and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(f"{name} {pid}")
        except psutil.NoSuchProcess:
            continue
    return alive


def stop_run(
    command: list[str] | Callable[[dict, Path], Any],
    env: dict,
    cwd: Path,
    cache: Path,
    log: Path,
    sig: int,
    timeout: float,
) -> StoppedRun:
    """Run ``command``, send ``sig`` to it once it has committed a sample, and report (see the module).
    ``command``: a command line, or ``start(env, log)`` that starts the run with its stderr to ``log`` and
    returns it as ``subprocess.Popen`` would (``pid``, ``poll``, ``wait``, ``send_signal``, ``kill``: a child
    of ``tests/analysis/forked_cli.py``, which has imported the CLI's modules already)."""
    start = len(committed(cache))
    env = {
        **env,
        WATCHDOG_VARIABLE: "1",
    }  # the run's own watchdog (the test session turns it off for its own)
    if callable(command):
        run = command(env, log)
    else:
        with open(log, "w", encoding="utf-8") as handle:
            run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=handle, env=env, cwd=cwd)
    try:
        deadline = time.monotonic() + timeout
        while len(committed(cache)) <= start:
            assert run.poll() is None, f"the run ended before it was stopped:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"nothing committed in {timeout:.0f} s"
            time.sleep(0.05)
        tree = _tree(run.pid)
        rows = len(committed(cache))
        signalled = time.monotonic()
        run.send_signal(sig)
        status = run.wait(timeout=120)
        exited = time.monotonic()
        factor = contention()
        give_up = max(signalled + CHECK_AFTER_S * factor, exited + AFTER_EXIT_S * factor)
        alive = _alive(tree)
        while alive and time.monotonic() < give_up:  # wait for the tree to end, not for a time
            time.sleep(0.1)
            alive = _alive(tree)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    text = log.read_text(encoding="utf-8", errors="replace")
    lines = [line for line in text.splitlines() if line.strip()]
    return StoppedRun(
        exit_status=status,
        stop_lines=[line for line in lines if line.startswith("capcal eval: stopped by")],
        log=text,
        tree=[f"{name} {pid}" for pid, (_, name) in tree.items()],
        alive=alive,
        rows_at_signal=rows,
        exit_seconds=exited - signalled,
    )
