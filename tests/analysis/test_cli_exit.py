"""Errors end the ``capcal`` program promptly (issue 47): the one line, the ``atexit`` handlers, then the
exit, without the interpreter's teardown of every loaded module; and ``capcal table`` refuses an unknown
``--metric`` before it reads any run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis.cli import main
from analysis.report.paper_table import paper_table, unknown_metric_problem

REPO = Path(__file__).resolve().parents[2]

# The program's entry as the console script runs it (``sys.exit(main())``, argv from the command line), with
# an ``atexit`` handler and an object whose finaliser runs only in the interpreter's teardown of __main__.
PROGRAM = """
import atexit, sys
from pathlib import Path
marks = Path(sys.argv.pop(1))
class TornDown:
    def __del__(self):
        (marks / "teardown").write_text("ran")
torn_down = TornDown()
atexit.register(lambda: (marks / "atexit").write_text("ran"))
from analysis.cli import main
sys.exit(main())
"""


def _program(tmp_path: Path, *arguments: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-c", PROGRAM, str(marks), *arguments]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return result, {path.name for path in marks.iterdir()}


def test_an_error_ends_the_program_after_its_atexit_handlers_without_the_teardown(tmp_path):
    result, marks = _program(tmp_path, "table", str(tmp_path / "missing"))
    assert result.returncode == 2
    message = f"capcal table: error: {tmp_path / 'missing'} is not a folder"
    assert result.stderr.strip().splitlines() == [message]
    assert marks == {"atexit"}  # the handlers ran; the teardown (its finalisers) did not


def test_success_exits_as_before(tmp_path):
    result, marks = _program(tmp_path, "tasks-dir")
    assert result.returncode == 0 and result.stdout.strip()
    assert marks == {"atexit", "teardown"}


def test_main_called_with_arguments_returns_the_status_in_process(tmp_path, capsys):
    assert main(["table", str(tmp_path / "missing")]) == 2  # a test or a script calling main keeps running
    assert "is not a folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("metrics", "expected"),
    [
        (None, None),
        (["soft_auroc", "response_ece"], None),
        (["brier_score"], "--metric brier_score: not a calibration-table metric (known: capability_ece, "),
        (["soft_auroc", "capability_ece_debiasd"], "; did you mean capability_ece_debiased?"),
    ],
)
def test_unknown_metric_problem(metrics, expected):
    problem = unknown_metric_problem(metrics)
    assert problem is None if expected is None else expected in problem


def test_table_refuses_an_unknown_metric_before_reading_any_run(tmp_path):
    # a folder that is not even there: the metric is refused first, so no run was looked for
    started = time.perf_counter()
    with pytest.raises(ValueError, match=r"^--metric brier_score: not a calibration-table metric"):
        paper_table([tmp_path / "missing"], ["brier_score"])
    assert time.perf_counter() - started < 1.0
