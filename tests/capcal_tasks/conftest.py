"""Fixtures of the task tests: a local data folder (the real data in ../shared/data plus a GPQA fixture built
here), and processed documents of each dataset read through the tasks' own loaders."""

from __future__ import annotations

import csv
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
