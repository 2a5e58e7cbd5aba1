"""``forked_cli.ForkedCli.popen``: a child started without waiting for it behaves as ``subprocess.Popen``
does for the tests that stop runs with signals (test_hf_stopping.py, test_hf_resume.py, test_api.py, ...)."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

WAIT_FOR_A_FILE = """
import os, sys, time
print("out line", flush=True)
print("err line", file=sys.stderr, flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
raise SystemExit(int(sys.argv[2]))
"""


def test_a_started_child_runs_beside_the_caller_and_ends_with_its_status(forked_cli, tmp_path) -> None:
    """poll is None while the child runs (the server does not wait for it), and its status once it ended;
    its stdout and stderr go to the named files (one file when both name it)."""
    go = tmp_path / "go"
    log = tmp_path / "log"
    child = forked_cli.popen(WAIT_FOR_A_FILE, [str(go), "7"], tmp_path, stdout=log, stderr=log)
    assert child.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(timeout=0.2)
    done = forked_cli.run("print('another command meanwhile')", [], tmp_path, 60)  # the server still serves
    assert (done.returncode, done.stdout) == (0, "another command meanwhile\n")
    assert child.poll() is None
    go.touch()
    assert child.wait(timeout=60) == 7 and child.returncode == 7 and child.poll() == 7
    assert log.read_text(encoding="utf-8").splitlines() == ["out line", "err line"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_reaches_the_started_child_only(forked_cli, tmp_path, sig) -> None:
    """``send_signal`` and ``kill`` reach the child, not the server: its status is minus the signal, and the
    next command runs."""
    err = tmp_path / "err"
    child = forked_cli.popen(WAIT_FOR_A_FILE, [str(tmp_path / "never"), "0"], tmp_path, stderr=err)
    deadline = time.monotonic() + 60
    while "err line" not in err.read_text(encoding="utf-8"):  # running its own code
        assert time.monotonic() < deadline
        time.sleep(0.01)
    if sig == signal.SIGKILL:
        child.kill()
    else:
        child.send_signal(sig)
    assert child.wait(timeout=60) == -sig
    assert forked_cli.run("raise SystemExit(3)", [], tmp_path, 60).returncode == 3
