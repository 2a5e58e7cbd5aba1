"""Reading prompt activations written by ``capcal-hf`` (model argument ``activations=DIR``).

``load_activations(directory, table)`` returns the activations of the questions of a per-question table
(``analysis.runs.load_runs(...).questions``), row by row: ``last_token[i]`` and ``prompt_mean[i]`` belong to
``table.iloc[rows[i]]``, matched on (task, question_id). Each is a float32 array of shape
``(num_layers + 1, hidden_size)``, embeddings first. The folder format (``capcal_models.activation_format``)
is shared with the writer. Every load reports its join (``PromptActivations.join``): questions without
activations and activations without a question are counted, with the first ids. With ``missing="raise"``
(the default) a question without activations is an error; with ``missing="report"`` the rows that have
activations are returned (``rows``) and the others are only counted.

When the table has a ``model_id`` (a checkpoint fingerprint) and the folder's index records the model's
fingerprint, they must agree: activations of another checkpoint are refused, whatever the model's name.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from safetensors import safe_open

from analysis.runs.joins import JoinReport, join_report
from capcal_models.activation_format import INDEX_NAME, read_index
from capcal_tasks.records import RunFormatError

__all__ = ["ActivationFormatError", "PromptActivations", "load_activations", "read_activation_index"]


class ActivationFormatError(RunFormatError):
    """A missing, malformed or inconsistent activations folder; the message names the file."""


@dataclass(frozen=True)
class PromptActivations:
    """Activations aligned with a table: row i of each array belongs to row ``rows[i]`` of the table."""

    last_token: np.ndarray  # (rows, num_layers + 1, hidden_size): hidden states of the last prompt token
    prompt_mean: np.ndarray  # (rows, num_layers + 1, hidden_size): mean over the prompt tokens
    model: str
    rows: np.ndarray | None = None  # positions in the table (all rows, in order, with missing="raise")
    join: JoinReport | None = None
    model_fingerprint: str | None = None


def read_activation_index(directory: str | Path) -> dict:
    """The parsed and validated ``index.json`` of an activations folder."""
    path = Path(directory) / INDEX_NAME
    if not path.is_file():
        raise ActivationFormatError(f"{path}: no activations index (run capcal-hf with activations=DIR)")
    try:
        return read_index(Path(directory))
    except RunFormatError as error:
        raise ActivationFormatError(str(error)) from None


def _check_model(index: dict, table: pd.DataFrame, path: Path) -> list[str]:
    """Notes on the model identity of the join; ``ActivationFormatError`` for another checkpoint."""
    fingerprint = index.get("model_fingerprint")
    if "model_id" not in table.columns:
        return ["the table has no model_id: the activations' model is not checked"]
    ids = {str(m) for m in table["model_id"]}
    resolved = {m for m in ids if not m.startswith("unresolved:")}
    if fingerprint is None:
        return [f"activations of {index.get('model')!r} record no checkpoint fingerprint: model not checked"]
    others = resolved - {fingerprint}
    if others:
        raise ActivationFormatError(
            f"{path}: activations of checkpoint {fingerprint} ({index.get('model')}), but the table's "
            f"questions are of {', '.join(sorted(others))}: another model"
        )
    if ids - resolved:
        return ["the table's model is unresolved (label only): the activations' model is not checked"]
    return []


def load_activations(
    directory: str | Path, table: pd.DataFrame, *, missing: str = "raise"
) -> PromptActivations:
    """Activations of the rows of ``table`` (columns ``task`` and ``question_id``), in the table's order.

    ``missing="raise"``: raises ``KeyError`` naming the questions that have no activations in ``directory``;
    ``missing="report"``: leaves them out (``rows`` lists the table positions returned) and counts them in
    ``join``. Raises ``ActivationFormatError`` for a malformed folder or activations of another checkpoint.
    """
    if missing not in ("raise", "report"):
        raise ValueError(f"missing must be 'raise' or 'report', got {missing!r}")
    directory = Path(directory)
    index = read_activation_index(directory)
    for column in ("task", "question_id"):
        if column not in table.columns:
            raise KeyError(f"the table has no {column!r} column (expected analysis.runs.load_runs output)")
    notes = _check_model(index, table, directory / INDEX_NAME)
    entries = index.get("entries", {})
    keys = list(zip(table["task"], table["question_id"], strict=True))
    stored = [(task, qid) for task, questions in entries.items() for qid in questions]
    report = join_report(
        f"activations {directory}",
        keys,
        stored,
        left_name="questions",
        right_name="activations",
        notes=notes,
    )
    present = [row for row, (task, qid) in enumerate(keys) if qid in entries.get(task, {})]
    if len(present) < len(keys) and missing == "raise":
        absent = [f"{task}/{qid}" for task, qid in keys if qid not in entries.get(task, {})]
        shown = ", ".join(absent[:5]) + (f" and {len(absent) - 5} more" if len(absent) > 5 else "")
        raise KeyError(f"{directory}: no activations for {len(absent)} of {len(keys)} questions: {shown}")

    if present and ("num_layers_with_embeddings" not in index or "hidden_size" not in index):
        raise ActivationFormatError(f"{directory / INDEX_NAME}: entries without num_layers/hidden_size")
    shape = (
        len(present),
        int(index.get("num_layers_with_embeddings", 0)),
        int(index.get("hidden_size", 0)),
    )
    last_token = np.empty(shape, dtype=np.float32)
    prompt_mean = np.empty(shape, dtype=np.float32)
    rows_by_shard: dict[str, list[tuple[int, dict]]] = defaultdict(list)
    for out_row, row in enumerate(present):
        task, qid = keys[row]
        entry = entries[task][qid]
        rows_by_shard[entry["shard"]].append((out_row, entry))
    for shard, shard_rows in rows_by_shard.items():
        path = directory / shard
        if not path.is_file():
            raise ActivationFormatError(f"{directory / INDEX_NAME}: shard {shard} is missing")
        try:
            with safe_open(str(path), framework="numpy") as handle:
                names = set(handle.keys())
                for out_row, entry in shard_rows:
                    for name, target in (("last_token", last_token), ("prompt_mean", prompt_mean)):
                        if entry[name] not in names:
                            raise ActivationFormatError(f"{path}: tensor {entry[name]} is missing")
                        array = handle.get_tensor(entry[name])
                        if array.shape != shape[1:]:
                            raise ActivationFormatError(
                                f"{path}: tensor {entry[name]} has shape {array.shape}, expected {shape[1:]}"
                            )
                        target[out_row] = array
        except ActivationFormatError:
            raise
        except Exception as error:  # noqa: BLE001 - safetensors raises its own types for a damaged file
            raise ActivationFormatError(f"{path}: not a readable safetensors file ({error})") from None
    return PromptActivations(
        last_token=last_token,
        prompt_mean=prompt_mean,
        model=str(index.get("model")),
        rows=np.asarray(present, dtype=int),
        join=report,
        model_fingerprint=index.get("model_fingerprint"),
    )
