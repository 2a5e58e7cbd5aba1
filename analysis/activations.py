"""Reading prompt activations written by ``capcal-hf`` (model argument ``activations=DIR``).

``load_activations(directory, table)`` returns the activations of the questions of a per-question table
(``analysis.runs.load_run``), row by row: ``last_token[i]`` and ``prompt_mean[i]`` belong to
``table.iloc[i]``, matched on (task, question_id). Each is a float32 array of shape
``(num_layers + 1, hidden_size)``, embeddings first (the folder layout is described in
``capcal_models.activations``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from safetensors import safe_open

__all__ = ["ActivationFormatError", "PromptActivations", "load_activations", "read_activation_index"]

INDEX_NAME = "index.json"


class ActivationFormatError(ValueError):
    """A missing, malformed or inconsistent activations folder; the message names the file."""


@dataclass(frozen=True)
class PromptActivations:
    """Activations aligned with a table: row i of each array belongs to row i of the table."""

    last_token: np.ndarray  # (rows, num_layers + 1, hidden_size): hidden states of the last prompt token
    prompt_mean: np.ndarray  # (rows, num_layers + 1, hidden_size): mean over the prompt tokens
    model: str


def read_activation_index(directory: str | Path) -> dict:
    """The parsed ``index.json`` of an activations folder."""
    path = Path(directory) / INDEX_NAME
    if not path.is_file():
        raise ActivationFormatError(f"{path}: no activations index (run capcal-hf with activations=DIR)")
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ActivationFormatError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None
    if not isinstance(index, dict) or index.get("format") != "capcal-activations":
        raise ActivationFormatError(f"{path}: not a capcal activations index")
    if index.get("version") != 1:
        raise ActivationFormatError(f"{path}: unsupported version {index.get('version')!r} (expected 1)")
    return index


def load_activations(directory: str | Path, table: pd.DataFrame) -> PromptActivations:
    """Activations of every row of ``table`` (columns ``task`` and ``question_id``), in the table's order.

    Raises ``KeyError`` naming the questions that have no activations in ``directory`` and
    ``ActivationFormatError`` for a malformed folder.
    """
    directory = Path(directory)
    index = read_activation_index(directory)
    for column in ("task", "question_id"):
        if column not in table.columns:
            raise KeyError(f"the table has no {column!r} column (expected analysis.runs.load_run output)")
    entries = index.get("entries", {})
    rows = list(zip(table["task"], table["question_id"], strict=True))
    missing = [f"{task}/{qid}" for task, qid in rows if qid not in entries.get(task, {})]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise KeyError(f"{directory}: no activations for {len(missing)} of {len(rows)} questions: {shown}")

    shape = (len(rows), int(index["num_layers_with_embeddings"]), int(index["hidden_size"]))
    last_token = np.empty(shape, dtype=np.float32)
    prompt_mean = np.empty(shape, dtype=np.float32)
    rows_by_shard: dict[str, list[tuple[int, dict]]] = defaultdict(list)
    for row, (task, qid) in enumerate(rows):
        entry = entries[task][qid]
        rows_by_shard[entry["shard"]].append((row, entry))
    for shard, shard_rows in rows_by_shard.items():
        path = directory / shard
        if not path.is_file():
            raise ActivationFormatError(f"{directory / INDEX_NAME}: shard {shard} is missing")
        with safe_open(str(path), framework="numpy") as handle:
            for row, entry in shard_rows:
                for name, target in (("last_token", last_token), ("prompt_mean", prompt_mean)):
                    array = handle.get_tensor(entry[name])
                    if array.shape != shape[1:]:
                        raise ActivationFormatError(
                            f"{path}: tensor {entry[name]} has shape {array.shape}, expected {shape[1:]}"
                        )
                    target[row] = array
    return PromptActivations(last_token=last_token, prompt_mean=prompt_mean, model=str(index.get("model")))
