"""capcal_models.stopping with real processes (no model): the watchdog ends the descendants of a process that
ends by any signal, including ones in a session of their own and orphans; ``stop_on_signals`` turns SIGTERM
and SIGINT into ``RunStopped`` (exit status 128 + signal) after which the process's ``finally`` blocks ran.
The real runs (capcal-hf, capcal-vllm) are stopped in test_hf_stopping.py and test_vllm.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from capcal_models.stopping import WATCHDOG_VARIABLE, RunStopped, descendants, stop_message

# a parent that starts the watchdog, a child in a session of its own that starts a grandchild, and an orphan
# (a child whose parent exits at once); it prints the pids and waits to be signalled
PARENT = """
import json, os, signal, subprocess, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal: a background job (`cmd &`, CI
# runners) starts with SIGINT ignored, and Python then keeps it ignored
from capcal_models.stopping import end_descendants_at_exit
watchdog = end_descendants_at_exit()
sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
child = subprocess.Popen([sys.executable, "-c", f"import subprocess; subprocess.Popen({sleeper!r}).wait()"],
                         start_new_session=True)
make_orphan = f"import subprocess; print(subprocess.Popen({sleeper!r}, stdout=subprocess.DEVNULL).pid)"
orphan_maker = subprocess.Popen([sys.executable, "-c", make_orphan], stdout=subprocess.PIPE, text=True)
orphan = int(orphan_maker.communicate()[0])
# the watchdog sees them all: wait until it has slept in its poll at least 3 more times (a full poll of /proc
# began after they started, however late a loaded machine schedules it), and at least 1 s
def sleeps():
    with open(f"/proc/{watchdog}/status") as status:
        return int(next(line for line in status if line.startswith("voluntary_ctxt_switches")).split()[1])
started, before = time.monotonic(), sleeps()
while sleeps() < before + 3 or time.monotonic() < started + 1.0:
    time.sleep(0.05)
print(json.dumps({"watchdog": watchdog, "child": child.pid, "orphan": orphan}), flush=True)
time.sleep(600)
"""


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            continue
    return alive


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_the_watchdog_ends_every_descendant_of_a_signalled_process(sig: int) -> None:
    env = {**os.environ, WATCHDOG_VARIABLE: "1"}  # (the test session turns it off for its own processes)
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, env=env)
    try:
        pids = json.loads(parent.stdout.readline())
        tree = sorted(process.pid for process in psutil.Process(parent.pid).children(recursive=True))
        # (the orphan was re-parented to the parent, a subreaper: end_descendants_at_exit made it one)
        assert len(tree) == 4 and not set(pids.values()) - set(tree), (pids, tree)  # and the grandchild
        assert _alive(tree) == tree
        parent.send_signal(sig)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 120  # the sleepers would live 600 s; a loaded machine may be slow
        while _alive(tree) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _alive(tree) == []  # the watchdog too
    finally:
        for pid in _alive([parent.pid, *locals().get("tree", [])]):
            os.kill(pid, signal.SIGKILL)


def test_descendants_follow_start_times() -> None:
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as child:
        started = {
            os.getpid(): int(Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()[19])
        }
        found = descendants(started)
        assert child.pid in found and os.getpid() in found
        assert descendants({os.getpid(): started[os.getpid()] + 1}) == {}  # another process with this pid
        assert child.pid not in descendants(started, exclude=child.pid)
        child.kill()


STOPPED = """
import sys
from capcal_models.stopping import RunStopped, stop_on_signals
try:
    with stop_on_signals():
        try:
            print("ready", flush=True)
            sys.stdin.read()
        finally:
            print("finally ran", flush=True)
except RunStopped as stopped:
    print(stopped.signal_name, flush=True)
    sys.exit(stopped.exit_status)
"""


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_stop_on_signals_unwinds_and_exits_128_plus_the_signal(sig: int, status: int) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", STOPPED], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline() == "ready\n"
    process.send_signal(sig)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == status
    assert output.splitlines() == ["finally ran", sig.name]


def test_stop_message_names_the_saved_samples_and_the_resume_command() -> None:
    stopped = RunStopped(signal.SIGTERM)
    assert stopped.exit_status == 143 and RunStopped(signal.SIGINT).exit_status == 130
    argv = ["eval", "--model", "capcal-hf", "--output_path", "my out"]
    message = stop_message("eval", stopped, argv, {Path("/c/samples.sqlite"): 48})
    assert message == (
        "capcal eval: stopped by SIGTERM; samples this run committed are saved (48 in /c/samples.sqlite); "
        "resume with: capcal eval --model capcal-hf --output_path 'my out'"
    )
    assert "no sample was committed" in stop_message("eval", stopped, argv, {})
