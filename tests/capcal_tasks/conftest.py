"""Fixtures of the task tests: a local data folder (the real data in ../shared/data plus a GPQA fixture built
here), and processed documents of each dataset read through the tasks' own loaders."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

# Made-up four-choice questions in GPQA's CSV format: GPQA's own questions must not be published in plain
# text, so the GPQA task is tested on these.
GPQA_FIXTURE_ROWS = [
    ("Which element has atomic number 26?", "Iron", "Cobalt", "Nickel", "Manganese"),
    (
        "Which particle mediates the electromagnetic force?",
        "The photon",
        "The gluon",
        "The W boson",
        "The Z boson",
    ),
    ("How many chromosomes does a typical human somatic cell contain?", "46", "23", "44", "48"),
    ("What is the SI unit of magnetic flux?", "Weber", "Tesla", "Henry", "Gauss"),
    (
        "Which organelle carries out oxidative phosphorylation?",
        "Mitochondrion",
        "Ribosome",
        "Nucleolus",
        "Golgi body",
    ),
]
GPQA_COLUMNS = [
    "Question",
    "Correct Answer",
    "Incorrect Answer 1",
    "Incorrect Answer 2",
    "Incorrect Answer 3",
    "Record ID",
    "High-level domain",
]


def write_gpqa_fixture(path: Path) -> Path:
    """A GPQA-format CSV (the upstream columns) holding GPQA_FIXTURE_ROWS."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(GPQA_COLUMNS)
        for index, row in enumerate(GPQA_FIXTURE_ROWS):
            writer.writerow([*row, f"fixture{index}", "Science"])
    return path


@pytest.fixture(scope="session")
def local_data(shared_data, tmp_path_factory) -> Path:
    """A CAPCAL_DATA_DIR folder: the shared datasets (linked) and ``gpqa/gpqa_diamond.csv`` (the fixture)."""
    root = tmp_path_factory.mktemp("capcal_data")
    for entry in shared_data.iterdir():
        if entry.is_dir():
            (root / entry.name).symlink_to(entry, target_is_directory=True)
    write_gpqa_fixture(root / "gpqa" / "gpqa_diamond.csv")
    return root


@pytest.fixture(scope="session")
def loaded_task(local_data) -> Callable[..., object]:
    """``load(name, metadata=None)``: task ``name`` as lm-eval loads it (``CapcalTaskManager``, capcal's
    folder, ``metadata``) from ``local_data``, loaded once per session (and xdist worker) for every task
    test that only reads it and builds its own requests (``build_all_requests`` replaces a task's
    instances on each call; none of these tests changes a task's config). MMLU's 14,042 questions take
    seconds of CPU time per load, and the task tests of several files load the same tasks. A test that
    checks a load itself (another data folder, a setting that must not leak) loads its own."""
    from capcal_tasks.task_manager import CapcalTaskManager

    tasks: dict[tuple[str, str], object] = {}

    def load(name: str, metadata: dict | None = None) -> object:
        key = (name, json.dumps(metadata, sort_keys=True))
        if key not in tasks:
            previous = os.environ.get("CAPCAL_DATA_DIR")
            os.environ["CAPCAL_DATA_DIR"] = str(local_data)
            try:
                manager = CapcalTaskManager(include_defaults=False, metadata=metadata)
                tasks[key] = manager.load([name])["tasks"][name]
            finally:
                if previous is None:
                    os.environ.pop("CAPCAL_DATA_DIR", None)
                else:
                    os.environ["CAPCAL_DATA_DIR"] = previous
        return tasks[key]

    return load


@pytest.fixture(scope="session")
def smollm2_chat_template(smollm2_path) -> Callable[..., str]:
    """SmolLM2's chat template as lm-eval's ``chat_template`` argument takes it: ``render(messages,
    add_generation_prompt=True)`` -> the rendered text."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_path)

    def render(messages, add_generation_prompt=True):
        return tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    return render


@pytest.fixture(scope="session")
def unmodified_task(wrapped_rescore, shared_data) -> Callable[[str], object]:
    """``load(relative)``: lm-eval's task as its YAML ``relative`` (under lm-eval's task folder) defines it,
    nothing of capcal's, its rows from ../shared/data (``wrapped_rescore.unmodified_task``)."""
    return lambda relative: wrapped_rescore.unmodified_task(relative, shared_data)
