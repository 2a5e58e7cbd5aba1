"""The on-disk format of a prompt-activations folder, shared by its writer and its reader.

Layout::

    activations-00000.safetensors   tensors "<n>.last_token" and "<n>.prompt_mean"
    activations-00001.safetensors   ...
    index.json      {"format": "capcal-activations", "version": 1, "model": ..., "model_fingerprint": ...,
                     "dtype": "float32", "num_layers_with_embeddings": L + 1, "hidden_size": d,
                     "entries": {task: {question_id: {"shard", "last_token", "prompt_mean",
                                                      "prompt_tokens", "prompt_sha256"}}}}

``model_fingerprint`` (``capcal_models.model_identity.checkpoint_fingerprint``; null when the model is not a
local checkpoint) lets a reader refuse activations of another model. The writer is
``capcal_models.activations.ActivationWriter``, the reader ``analysis.runs.activations``; both validate an
index with :func:`parse_index`.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from capcal_tasks.records import RunFormatError, read_json_file

__all__ = [
    "ENTRY_KEYS",
    "FORMAT",
    "INDEX_NAME",
    "SHARD_PATTERN",
    "VERSION",
    "new_index",
    "parse_index",
    "prompt_sha256",
    "read_index",
    "shard_name",
]

INDEX_NAME = "index.json"
FORMAT = "capcal-activations"
VERSION = 1
SHARD_PATTERN = re.compile(r"^activations-(\d{5})\.safetensors$")
ENTRY_KEYS = ("shard", "last_token", "prompt_mean", "prompt_tokens", "prompt_sha256")


def shard_name(number: int) -> str:
    return f"activations-{number:05d}.safetensors"


def prompt_sha256(prompt: str) -> str:
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def new_index(model_name: str, model_fingerprint: str | None) -> dict:
    """The index of an empty activations folder."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "model": model_name,
        "model_fingerprint": model_fingerprint,
        "dtype": "float32",
        "entries": {},
    }


def _positive(index: dict, key: str, path: Path) -> None:
    value = index.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise RunFormatError(f"{path}: {key} must be a positive integer, got {value!r}")


def parse_index(index: Any, path: Path) -> dict:
    """``index`` checked against the format; ``RunFormatError`` naming ``path`` for any violation."""
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise RunFormatError(f"{path}: not a capcal activations index")
    if index.get("version") != VERSION:
        raise RunFormatError(f"{path}: unsupported version {index.get('version')!r} (expected {VERSION})")
    fingerprint = index.get("model_fingerprint")
    if fingerprint is not None and not isinstance(fingerprint, str):
        raise RunFormatError(f"{path}: model_fingerprint must be text or null")
    _positive(index, "num_layers_with_embeddings", path)
    _positive(index, "hidden_size", path)
    entries = index.get("entries", {})
    if not isinstance(entries, dict):
        raise RunFormatError(f"{path}: 'entries' must be a JSON object")
    for task, questions in entries.items():
        if not isinstance(questions, dict):
            raise RunFormatError(f"{path}: entries of task {task} must be a JSON object")
        for question_id, entry in questions.items():
            missing = [key for key in ENTRY_KEYS if not isinstance(entry, dict) or key not in entry]
            if missing:
                raise RunFormatError(f"{path}: entry {task}/{question_id} lacks {', '.join(missing)}")
            if not isinstance(entry["shard"], str) or not SHARD_PATTERN.match(entry["shard"]):
                raise RunFormatError(f"{path}: entry {task}/{question_id} names no shard file")
    return index


def read_index(directory: Path) -> dict:
    """The validated ``index.json`` of an activations folder (strict JSON)."""
    path = Path(directory) / INDEX_NAME
    return parse_index(read_json_file(path), path)
