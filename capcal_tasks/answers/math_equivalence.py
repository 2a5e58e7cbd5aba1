r"""Mathematical answers (MATH-500, MATH): equivalence by math-verify, with a hard time limit per call.

``math_verify.verify(parse(gold), parse(prediction))`` decides, where both answers are parsed as
``\boxed{answer}`` (a bare answer such as ``3\sqrt{13}`` is otherwise parsed as its first number). When
math-verify fails (an exception, nothing parsed on either side, a crash or the time limit) the answers are
compared as strings with whitespace removed.

math-verify's own time limit uses ``signal.alarm``: it works only in the main thread and cannot interrupt a
long computation inside C code. capcal therefore runs math-verify in a separate worker process
(``python -m capcal_tasks.answers.math_equivalence``, started on first use, one per process) and kills and
restarts it when one call exceeds the limit, so no answer can hang a run. math-verify comes with
``lm-eval[math]`` (capcal's ``math`` extra), which pins antlr4 4.11; a plain ``pip install math-verify``
brings antlr4 4.13 and breaks LaTeX parsing.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

__all__ = ["DEFAULT_TIME_LIMIT_S", "MathEquivalenceChecker", "math_answers_equal"]

DEFAULT_TIME_LIMIT_S = 5.0
STARTUP_TIME_LIMIT_S = 120.0
_CACHE_SIZE = 200_000

logger = logging.getLogger(__name__)


def _as_boxed(answer: str) -> str:
    return "\\boxed{" + answer + "}"


def _strings_equal(gold: str, prediction: str) -> bool:
    return "".join(gold.split()) == "".join(prediction.split())


class MathEquivalenceChecker:
    """Decides ``gold == prediction`` with math-verify in a worker process, at most ``time_limit_s`` per call.

    Thread-safe; results are cached per (gold, prediction). ``timeouts`` and ``failures`` count the calls that
    fell back to string comparison because of the time limit or a math-verify error.
    """

    def __init__(self, time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> None:
        if time_limit_s <= 0:
            raise ValueError(f"time_limit_s must be positive, got {time_limit_s}")
        self.time_limit_s = time_limit_s
        self.timeouts = 0
        self.failures = 0
        self._worker: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], bool] = {}
        atexit.register(self.close)

    def equal(self, gold: str, prediction: str | None) -> bool:
        """Whether ``prediction`` is mathematically equivalent to ``gold`` (a missing prediction is not)."""
        if prediction is None or not prediction.strip():
            return False
        key = (gold, prediction)
        with self._lock:
            if key not in self._cache:
                if len(self._cache) >= _CACHE_SIZE:
                    self._cache.clear()
                self._cache[key] = self._decide(gold, prediction)
            return self._cache[key]

    def _decide(self, gold: str, prediction: str) -> bool:
        reply = self._ask({"gold": gold, "prediction": prediction})
        if reply is None:
            self.timeouts += 1
            logger.warning(
                "math-verify took more than %.1f s on prediction %.80r (gold %.80r); "
                "compared as strings instead",
                self.time_limit_s,
                prediction,
                gold,
            )
            return _strings_equal(gold, prediction)
        if reply.get("error"):
            self.failures += 1
            return _strings_equal(gold, prediction)
        return bool(reply["equal"])

    def _start(self) -> subprocess.Popen:
        package_root = str(Path(__file__).resolve().parents[2])
        python_path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
        environment = {**os.environ, "PYTHONPATH": python_path}
        worker = subprocess.Popen(
            [sys.executable, "-m", "capcal_tasks.answers.math_equivalence"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=environment,
        )
        ready = self._read_line(worker, STARTUP_TIME_LIMIT_S)
        if ready is None or json.loads(ready).get("ready") is not True:
            worker.kill()
            worker.wait()
            raise RuntimeError(
                "the math-verify worker did not start (is capcal's 'math' extra, lm-eval[math], installed?); "
                f"its first output was {ready!r}"
            )
        return worker

    @staticmethod
    def _read_line(worker: subprocess.Popen, time_limit_s: float) -> str | None:
        assert worker.stdout is not None
        deadline = time.monotonic() + time_limit_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            readable, _, _ = select.select([worker.stdout], [], [], remaining)
            if readable:
                line = worker.stdout.readline()
                return line if line else None

    def _ask(self, request: dict) -> dict | None:
        """The worker's reply, or None when it exceeded the time limit or died (it is then restarted)."""
        if self._worker is None or self._worker.poll() is not None:
            self._worker = self._start()
        worker = self._worker
        assert worker.stdin is not None
        try:
            worker.stdin.write(json.dumps(request) + "\n")
            worker.stdin.flush()
        except BrokenPipeError:
            self._stop_worker()
            return {"error": "the math-verify worker exited"}
        line = self._read_line(worker, self.time_limit_s)
        if line is None:
            self._stop_worker()
            return None
        return json.loads(line)

    def _stop_worker(self) -> None:
        if self._worker is not None:
            self._worker.kill()
            self._worker.wait()
            self._worker = None

    def close(self) -> None:
        """Stop the worker process (it is restarted on the next call)."""
        with self._lock:
            self._stop_worker()


_default_checker: MathEquivalenceChecker | None = None
_default_lock = threading.Lock()


def math_answers_equal(gold: str, prediction: str | None) -> bool:
    """``MathEquivalenceChecker.equal`` with a process-wide checker (time limit ``DEFAULT_TIME_LIMIT_S``, or
    the environment variable ``CAPCAL_MATH_VERIFY_TIME_LIMIT`` in seconds)."""
    global _default_checker
    with _default_lock:
        if _default_checker is None:
            limit = float(os.environ.get("CAPCAL_MATH_VERIFY_TIME_LIMIT", DEFAULT_TIME_LIMIT_S))
            _default_checker = MathEquivalenceChecker(limit)
    return _default_checker.equal(gold, prediction)


def _serve() -> None:
    """Worker loop: one JSON request per stdin line, one JSON reply per stdout line."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(
        sys.stderr.fileno(), sys.stdout.fileno()
    )  # stray prints of libraries must not corrupt the replies
    sys.stdout = sys.stderr
    logging.disable(logging.WARNING)  # math-verify warns that its own time limit is off
    from math_verify import parse, verify

    print(json.dumps({"ready": True}), file=replies, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            gold = parse(_as_boxed(request["gold"]), parsing_timeout=None)
            prediction = parse(_as_boxed(request["prediction"]), parsing_timeout=None)
            if not gold or not prediction:
                reply = {"error": "nothing parsed"}
            else:
                reply = {"equal": bool(verify(gold, prediction, timeout_seconds=None))}
        except Exception as error:  # any math-verify failure falls back to string comparison
            reply = {"error": f"{type(error).__name__}: {error}"}
        print(json.dumps(reply), file=replies, flush=True)


if __name__ == "__main__":
    _serve()
