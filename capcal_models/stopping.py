"""How a capcal run stops: a clean stop on SIGTERM and Ctrl-C, and no process left behind after any stop.

- **Clean stop.** ``stop_on_signals`` turns SIGTERM and SIGINT (Ctrl-C) into a ``RunStopped`` exception in
  the main thread, so the run unwinds as it would on an error: ``finally`` blocks and context managers run
  (committed samples stay committed; capcal-api's batched writer commits its pending samples), and vLLM's
  engine is shut down by its own finalizers when the interpreter exits. The caller reports what was saved
  (``stop_message``) and exits with 128 + the signal number (SIGINT 130, SIGTERM 143), as a shell reports a
  process ended by that signal. A second signal while the first unwinds ends the process at once
  (``os._exit``, the same status); the watchdog then ends its children.
- **Nothing left running.** SIGKILL runs no code of the process, and vLLM starts its engine (``EngineCore``)
  and workers as processes of their own, which outlived a killed run (parent 1) holding the model's memory.
  ``end_descendants_at_exit`` starts one watchdog process per capcal process (stdlib only, its own session,
  so a terminal's Ctrl-C does not reach it first): it follows the descendants of the watched process by
  reading ``/proc`` every ``POLL_SECONDS`` (each one's start time too, against PID reuse); the watched process
  is made a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``), so a descendant whose parent ends stays its
  descendant, and the watchdog keeps following every process it has seen (and its children); when the
  watched process ends, whatever the reason, sends SIGTERM to every descendant still running,
  SIGKILL after ``GRACE_SECONDS``, and exits. A parent-death signal (``prctl(PR_SET_PDEATHSIG)``) would have
  to be set inside every process, including those that vLLM starts itself, and fires on the death of the
  thread that forked, not of the process; a process group cannot be used either, since capcal shares its
  group with the shell's job (Ctrl-C) and with whoever started it. Limit: a process started less than
  ``POLL_SECONDS`` before a SIGKILL may not be seen (capcal's children, the engine, start long before
  sampling), and an orphan re-parented to the run stays a zombie until the run ends (nothing reaps it).
  Linux only (``/proc``); elsewhere ``end_descendants_at_exit`` does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = [
    "WATCHDOG_VARIABLE",
    "GRACE_SECONDS",
    "POLL_SECONDS",
    "RunStopped",
    "descendants",
    "end_descendants_at_exit",
    "stop_message",
    "stop_on_signals",
]

POLL_SECONDS = 0.5
GRACE_SECONDS = 2.0
PROC = Path("/proc")
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
WATCHDOG_VARIABLE = "CAPCAL_WATCHDOG"  # "0": no watchdog (a process whose children must outlive it)
_watchdogs: dict[int, subprocess.Popen] = {}  # watched process id -> its watchdog


class RunStopped(BaseException):
    """A run stopped by a signal (a ``BaseException``, like ``KeyboardInterrupt``: ``except Exception``
    blocks let it through). ``exit_status`` is 128 + the signal number."""

    def __init__(self, signal_number: int) -> None:
        self.signal_number = int(signal_number)
        self.signal_name = signal.Signals(self.signal_number).name
        self.exit_status = 128 + self.signal_number
        super().__init__(f"stopped by {self.signal_name}")


@contextlib.contextmanager
def stop_on_signals(signals: Sequence[int] = (signal.SIGTERM, signal.SIGINT)) -> Iterator[None]:
    """Raise ``RunStopped`` in the main thread on any of ``signals`` while the block runs (a second one ends
    the process at once with ``os._exit(128 + signal)``); the previous handlers are restored afterwards.
    Outside the main thread (where handlers cannot be set) the block runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping: list[int] = []

    def handle(signal_number: int, _frame: object) -> None:
        if stopping:
            os._exit(128 + signal_number)
        stopping.append(signal_number)
        raise RunStopped(signal_number)

    previous = {number: signal.signal(number, handle) for number in signals}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def stop_message(command: str, stopped: RunStopped, argv: Sequence[str], saved: dict[Path, int]) -> str:
    """One line for a stopped run: the signal, what was saved (samples committed per sample cache file in
    this process, ``capcal_models.sample_cache.committed_samples``) and the command that resumes."""
    resume = shlex.join(["capcal", *argv])
    if saved:
        files = ", ".join(f"{count} in {path}" for path, count in saved.items())
        what = f"samples this run committed are saved ({files})"
    else:
        what = "no sample was committed to a sample cache by this run (stock lm-eval models keep none)"
    return f"capcal {command}: stopped by {stopped.signal_name}; {what}; resume with: {resume}"


def end_descendants_at_exit() -> int | None:
    """Start (once per process) a watchdog that ends this process's descendants when it ends, however it
    ends (see the module); returns the watchdog's process id, None where ``/proc`` is missing or the
    environment variable ``CAPCAL_WATCHDOG`` is "0" (the test session sets it: one watchdog of the whole
    session, since a worker's children, such as the session's shared vLLM server, must outlive the worker)."""
    pid = os.getpid()
    if os.environ.get(WATCHDOG_VARIABLE, "1") == "0" or not (PROC / str(pid) / "stat").is_file():
        return None
    _become_subreaper()
    watchdog = _watchdogs.get(pid)
    if watchdog is None or watchdog.poll() is not None:
        watchdog = subprocess.Popen(
            [sys.executable, "-S", "-I", str(Path(__file__).resolve()), str(pid)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        _watchdogs[pid] = watchdog
    return watchdog.pid


def _become_subreaper() -> None:
    """``prctl(PR_SET_CHILD_SUBREAPER, 1)``: a descendant orphaned while this process runs (its parent ended)
    is re-parented to this process instead of init, so it stays a descendant that the watchdog can see."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _stat(pid: int) -> tuple[int, int] | None:  # pragma: no mutate block
    """(parent id, start time in clock ticks) of a running process (not a zombie); None if it has ended."""
    try:
        fields = (PROC / str(pid) / "stat").read_bytes().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[1]), int(fields[19])


def _all_processes() -> dict[int, tuple[int, int]]:  # pragma: no mutate block
    """process id -> (parent id, start time) of every running process."""
    found = {}
    for entry in os.scandir(PROC):
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                found[int(entry.name)] = stat
    return found


def descendants(  # pragma: no mutate block
    roots: dict[int, int], exclude: int | None = None
) -> dict[int, int]:
    """Every running process below the processes ``roots`` (id -> start time), with its start time, itself
    included where it still runs with the same start time; ``exclude``: a process id left out."""
    processes = _all_processes()
    found = {pid: start for pid, start in roots.items() if processes.get(pid, (0, None))[1] == start}
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in processes.items():
        children.setdefault(parent, []).append(pid)
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found and child != exclude:
                found[child] = processes[child][1]
                stack.append(child)
    return found


def _end(tracked: dict[int, int], exclude: int) -> None:  # pragma: no mutate block
    """SIGTERM every still-running process of ``tracked`` (and its descendants), SIGKILL after the grace."""
    deadline = time.monotonic() + GRACE_SECONDS
    for sig in (signal.SIGTERM, signal.SIGKILL):
        running = descendants(tracked, exclude)
        for pid in running:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        tracked.update(running)
        while sig == signal.SIGTERM and time.monotonic() < deadline and descendants(tracked, exclude):
            time.sleep(0.05)


def _watch(parent: int) -> None:  # pragma: no mutate block
    """The watchdog's loop: follow ``parent``'s descendants until it ends, then end them (see the module)."""
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # it ends with its parent, not before
        signal.signal(number, signal.SIG_IGN)
    me = os.getpid()
    parent_stat = _stat(parent)
    if parent_stat is None:
        return
    tracked = {parent: parent_stat[1]}
    try:
        handle = os.pidfd_open(parent)
    except (AttributeError, OSError):
        handle = None
    while True:
        if handle is not None:
            ended = bool(select.select([handle], [], [], POLL_SECONDS)[0])
        else:
            time.sleep(POLL_SECONDS)
            ended = _stat(parent) is None
        current = descendants(tracked, me)
        # keep orphans (their parent ended) and forget the ones that ended
        tracked = {parent: tracked[parent], **current}
        if ended or _stat(parent) is None:
            tracked.pop(parent, None)
            _end(tracked, me)
            return


if __name__ == "__main__":  # the watchdog: python stopping.py PARENT_PID (stdlib only, no capcal import)
    _watch(int(sys.argv[1]))
