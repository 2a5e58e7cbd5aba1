"""The math-verify worker loop (``math_equivalence._serve``) through its own protocol: a ready line, then one
JSON reply per JSON request on stdout, each of the three reply kinds exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from capcal_tasks.answers import math_equivalence

pytest.importorskip("math_verify")

# the loop imported under its module name (``python -m`` would run a second copy of the module as __main__)
WORKER = "from capcal_tasks.answers.math_equivalence import _serve; _serve()"


def _worker_output(requests: list[dict]) -> subprocess.CompletedProcess:
    package_root = str(Path(math_equivalence.__file__).resolve().parents[2])
    python_path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", WORKER],
        input="".join(json.dumps(request) + "\n" for request in requests),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": python_path},
    )


def test_worker_replies_one_line_per_request_on_its_own_stdout():
    """Equal and unequal answers, nothing parsed on either side, and a bad request (its exception named):
    the replies come in order, only on the reply stream, and the worker exits cleanly at end of input."""
    requests = [
        {"gold": "5", "prediction": "x=5"},
        {"gold": r"\frac{1}{2}", "prediction": "0.5"},
        {"gold": "6", "prediction": "x=5"},
        {"gold": "5", "prediction": ""},
        {"gold": "", "prediction": "5"},
        {"gold": "5"},
    ]
    result = _worker_output(requests)
    assert result.returncode == 0, result.stderr[-2000:]
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"ready": True},
        {"equal": True},
        {"equal": True},
        {"equal": False},
        {"error": "nothing parsed"},
        {"error": "nothing parsed"},
        {"error": "KeyError: 'prediction'"},
    ]
