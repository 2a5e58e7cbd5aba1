"""``capcal`` commands, each in a process of its own, forked from one that has imported the CLI's heavy
modules once.

A fresh ``python -c RUNNER ARGS`` per command spends about 5 s of CPU time importing lm-eval, datasets,
transformers and torch before it checks anything; the refusal tests of ``test_cli.py`` run about 40 such
commands. ``ForkedCli`` starts one server (``python THIS_FILE``) that imports those modules, then forks a
child per command. The child has the server's modules and nothing else of it: no model code (the runner's
check that SmolLM2's ``modeling_llama`` was never imported still means what it says), its own environment,
file descriptors 1 and 2 redirected to files of its own (every line the command writes, Python's or a
logging handler's, is captured), ``sys.argv`` as ``python -c`` sets it, and Python's way of ending:
``SystemExit`` gives the status, the atexit handlers run, the streams are flushed. What the imports
themselves print (a fresh process would print it in every command) is ``ForkedCli.import_output``, for the
caller to check.

Protocol: one JSON line per command on the server's stdin (``{"runner", "args", "cwd", "timeout", "env"}``),
one JSON line back (``{"returncode", "stdout", "stderr"}``). ``ForkedCli.popen`` starts a command without
waiting for it (``"start"``: the child's output goes to the files it names, the reply is its process id), for
the tests that stop a run with a signal; ``"poll"`` asks whether such a child has ended (its status, or
null). The child's ``os.environ`` is the command's
``env`` (the caller's whole environment by default); what the preloaded modules read from the environment at
import time is the server's (``tests/conftest.py``'s ``forked_cli`` starts it with the test
session's).

``python -m MODULE`` is ``runpy.run_module(MODULE, run_name="__main__", alter_sys=True)`` as the runner, a
console script ``runpy.run_path(SCRIPT, run_name="__main__")`` (``sys.argv[0]`` is then the script's path,
as when it is run).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# what a ``capcal eval`` command imports before it refuses an input (``sys.modules`` after one: the engine
# (torch, transformers' model code but no model's), the task code (sympy through the checkers), the runs'
# tables (scipy))
PRELOADED = (
    "analysis.cli",
    "analysis.evaluation.harness",
    "analysis.checks.output_checks",
    "analysis.runs",
    "lm_eval",
    "lm_eval.api.task",
    "lm_eval.tasks",
    "lm_eval.evaluator",
    "lm_eval.models.huggingface",
    "datasets",
    "torch",
    "transformers",
    "transformers.modeling_utils",
    "capcal_models",
    "capcal_models.hf",
    "capcal_tasks.checkers",
    "capcal_tasks.task_manager",
    "capcal_tasks.sampled_task",
)


# the runner of ``python -m analysis.cli`` (the ``capcal`` command)
CAPCAL_RUNNER = "import runpy\nrunpy.run_module('analysis.cli', run_name='__main__', alter_sys=True)\n"


class ForkedCli:
    """One server process; ``run(runner, args, cwd)`` is ``subprocess.run([sys.executable, "-c", runner,
    *args], cwd=cwd, capture_output=True, text=True)`` in a child forked from it."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self._server = subprocess.Popen(
            [sys.executable, __file__],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.import_output = json.loads(self._server.stdout.readline())

    def run(
        self, runner: str, args: list[str], cwd: Path, timeout: int, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        """The command's status (negative: the signal that ended it; SIGALRM after ``timeout`` seconds),
        stdout and stderr; its environment is ``env`` (None: this process's ``os.environ``)."""
        env = dict(os.environ if env is None else env)
        done = self._ask({"runner": runner, "args": args, "cwd": str(cwd), "timeout": timeout, "env": env})
        return subprocess.CompletedProcess(
            [sys.executable, "-c", runner, *args], done["returncode"], done["stdout"], done["stderr"]
        )

    def capcal(
        self, args: list[str], cwd: Path, timeout: int, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        """``capcal ARGS`` (``python -m analysis.cli ARGS``) in a child: ``run`` with ``CAPCAL_RUNNER``. A
        real run too: the model is loaded in the child, never in the server."""
        return self.run(CAPCAL_RUNNER, list(args), cwd, timeout, env)

    def popen(
        self,
        runner: str,
        args: list[str],
        cwd: Path,
        env: dict[str, str] | None = None,
        stdout: Path | None = None,
        stderr: Path | None = None,
        timeout: int = 1800,
    ) -> ForkedProcess:
        """``subprocess.Popen([sys.executable, "-c", runner, *args], cwd=cwd, env=env)`` in a child, its
        stdout and stderr written to the files ``stdout`` and ``stderr`` (None: discarded; the same path
        twice: one file); SIGALRM ends it after ``timeout`` seconds."""
        env = dict(os.environ if env is None else env)
        outputs = [str(path) if path is not None else os.devnull for path in (stdout, stderr)]
        reply = self._ask(
            {"start": True, "runner": runner, "args": args, "cwd": str(cwd), "timeout": timeout, "env": env,
             "outputs": outputs}
        )  # fmt: skip
        return ForkedProcess(self, reply["pid"])

    def popen_capcal(
        self,
        args: list[str],
        cwd: Path,
        env: dict[str, str] | None = None,
        stdout: Path | None = None,
        stderr: Path | None = None,
    ) -> ForkedProcess:
        """``capcal ARGS`` started in a child: ``popen`` with ``CAPCAL_RUNNER``."""
        return self.popen(CAPCAL_RUNNER, list(args), cwd, env, stdout, stderr)

    def _ask(self, request: dict) -> dict:
        self._server.stdin.write(json.dumps(request) + "\n")
        self._server.stdin.flush()
        line = self._server.stdout.readline()
        if not line:
            raise RuntimeError(f"the forked CLI server ended (status {self._server.poll()})")
        return json.loads(line)

    def close(self) -> None:
        self._server.stdin.close()
        self._server.wait(timeout=60)


class ForkedProcess:
    """A child started by ``ForkedCli.popen``: ``pid``, ``poll``, ``wait``, ``send_signal``, ``kill`` and
    ``returncode`` as ``subprocess.Popen`` has them (the server, its parent, reaps it)."""

    def __init__(self, server: ForkedCli, pid: int) -> None:
        self._server, self.pid, self.returncode = server, pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server._ask({"poll": self.pid})["returncode"]
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _captured_fd(fd: int, target: int) -> int:
    saved = os.dup(fd)
    os.dup2(target, fd)
    return saved


def _child(
    runner: str, args: list[str], cwd: str, timeout: int, env: dict[str, str], out: int, err: int
) -> None:
    """In the forked child: run ``runner`` as ``python -c`` would, and end as Python ends. Never returns."""
    import atexit
    import signal
    import traceback

    signal.alarm(timeout)
    os.environ.clear()
    os.environ.update(env)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.chdir(cwd)
    sys.argv = ["-c", *args]
    code = 0
    try:
        exec(compile(runner, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as stop:
        if stop.code is None:
            code = 0
        elif isinstance(stop.code, int):
            code = stop.code
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code & 0xFF)


def _serve() -> None:
    import importlib

    sys.path[0] = (
        ""  # as ``python -c``: the working folder first (the server's own folder is not on the path)
    )
    replies = os.fdopen(os.dup(1), "w")
    # the imports' own output (a fresh process would print it in every command) goes back to the caller
    with tempfile.TemporaryFile() as captured:
        saved_out, saved_err = _captured_fd(1, captured.fileno()), _captured_fd(2, captured.fileno())
        for name in PRELOADED:
            importlib.import_module(name)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        captured.seek(0)
        replies.write(json.dumps(captured.read().decode("utf-8", "replace")) + "\n")
        replies.flush()
    for line in sys.stdin:
        request = json.loads(line)
        if "poll" in request:  # a started child: its status once it has ended
            pid, status = os.waitpid(request["poll"], os.WNOHANG)
            returncode = os.waitstatus_to_exitcode(status) if pid else None
            replies.write(json.dumps({"returncode": returncode}) + "\n")
            replies.flush()
            continue
        if "start" in request:  # a child not waited for; its output to the named files
            out_path, err_path = request["outputs"]
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            out = os.open(out_path, flags, 0o644)
            err = out if err_path == out_path else os.open(err_path, flags, 0o644)
            pid = os.fork()
            if pid == 0:
                _child(request["runner"], request["args"], request["cwd"], request["timeout"], request["env"],
                       out, err)  # fmt: skip
            for fd in {out, err}:
                os.close(fd)
            replies.write(json.dumps({"pid": pid}) + "\n")
            replies.flush()
            continue
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            pid = os.fork()
            if pid == 0:
                _child(
                    request["runner"],
                    request["args"],
                    request["cwd"],
                    request["timeout"],
                    request["env"],
                    out.fileno(),
                    err.fileno(),
                )
            _, status = os.waitpid(pid, 0)
            returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            reply = {
                "returncode": returncode,
                "stdout": out.read().decode("utf-8", "replace"),
                "stderr": err.read().decode("utf-8", "replace"),
            }
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
    # nothing of the server's own is left to do: no interpreter shutdown (the preloaded modules' atexit
    # handlers took over a minute on a loaded machine), each child ran its own
    os._exit(0)


if __name__ == "__main__":
    _serve()
