"""Where task data comes from: the Hugging Face hub by default, a local copy when configured.

Set ``CAPCAL_DATA_DIR`` (or ``capcal eval --data_dir DIR``) to a folder laid out like capcal's bundled data
(``gsm8k/test.jsonl``, ...) to read local files instead of the hub; the value ``bundled`` selects the data
that ships inside the capcal package (only what its license allows, with the license).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import datasets

__all__ = [
    "BUNDLED_DATA_DIR",
    "DATA_DIR_ENV",
    "load_splits",
    "local_data_dir",
    "question_id",
    "read_jsonl",
]

DATA_DIR_ENV = "CAPCAL_DATA_DIR"
BUNDLED_DATA_DIR = Path(__file__).resolve().parent / "data"


def local_data_dir() -> Path | None:
    """The configured local data folder, or None to use the hub."""
    value = os.environ.get(DATA_DIR_ENV, "").strip()
    if not value:
        return None
    path = BUNDLED_DATA_DIR if value == "bundled" else Path(value).expanduser().resolve()
    if not path.is_dir():
        raise FileNotFoundError(f"{DATA_DIR_ENV}={value!r} is not a folder")
    return path


def question_id(dataset: str, text: str) -> str:
    """A stable id for a question: the dataset name and a hash of the question's text."""
    digest = hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()[:16]
    return f"{dataset}/{digest}"


def read_jsonl(path: Path) -> list[dict]:
    """Records of a JSON-lines file; a malformed line raises an error naming the file and line."""
    records = []
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{line_number}: not valid JSON ({error.msg})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{line_number}: expected a JSON object")
            records.append(record)
    return records


def load_splits(
    local_files: dict[str, str],
    hub_path: str,
    hub_name: str | None = None,
) -> datasets.DatasetDict:
    """Splits of a dataset: ``local_files`` (split -> JSON-lines path under the data folder) when a local data
    folder is configured, else ``datasets.load_dataset(hub_path, hub_name)``."""
    root = local_data_dir()
    if root is None:
        return datasets.load_dataset(hub_path, hub_name)
    splits = {}
    for split, relative in local_files.items():
        path = root / relative
        if not path.is_file():
            raise FileNotFoundError(f"{DATA_DIR_ENV}: {path} not found (needed for split {split!r})")
        splits[split] = datasets.Dataset.from_list(read_jsonl(path))
    return datasets.DatasetDict(splits)
