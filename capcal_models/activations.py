"""Writing prompt activations (for linear probes) while capcal-hf samples.

For every unique prompt, from the prefill capcal-hf runs anyway (no extra forward pass), two float32 arrays of
shape ``(num_layers + 1, hidden_size)`` (embeddings first, then each decoder layer's output as transformers'
``output_hidden_states`` returns it):

- ``last_token``: the hidden states of the last prompt token (after the chat template and generation prompt);
- ``prompt_mean``: the mean over all prompt tokens (including any BOS/system-prompt tokens).

The folder's layout and index are defined in ``capcal_models.activation_format`` (shared with the reader,
``analysis.runs.activations``). The index records the model's checkpoint fingerprint
(``capcal_models.model_identity``) when the model is a local checkpoint.

Shards and the index are written to a temporary file and renamed into place, so a reader never sees a partial
file. A folder can collect several runs of the same model: a question already present with the same prompt
is not written again; the same question with a different prompt raises an error. ``analysis.runs.activations``
reads the folder.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

from capcal_models.activation_format import (
    FORMAT,
    INDEX_NAME,
    SHARD_PATTERN,
    new_index,
    prompt_sha256,
    read_index,
    shard_name,
)
from capcal_models.model_identity import checkpoint_fingerprint

__all__ = ["INDEX_NAME", "ActivationWriter", "prompt_sha256", "shard_name"]


def _replace_atomically(path: Path, write) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    try:
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class ActivationWriter:
    """Collects per-prompt activations and writes them in shards of ``shard_size`` prompts."""

    def __init__(
        self,
        directory: str | Path,
        model_name: str,
        shard_size: int = 256,
        model_fingerprint: str | None = None,
    ) -> None:
        self.directory = Path(directory).expanduser().resolve()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.model_name = model_name
        if model_fingerprint is None and Path(model_name).expanduser().is_dir():
            try:
                model_fingerprint = checkpoint_fingerprint(model_name)
            except ValueError:
                model_fingerprint = None  # a folder that is not a checkpoint: known by its name only
        self.model_fingerprint = model_fingerprint
        self.shard_size = shard_size
        self.index = self._read_index()
        self._pending: list[tuple[str, str, dict, torch.Tensor, torch.Tensor]] = []
        self._pending_keys: dict[tuple[str, str], str] = {}

    def _read_index(self) -> dict:
        path = self.directory / INDEX_NAME
        if not path.is_file():
            return new_index(self.model_name, self.model_fingerprint)
        index = read_index(self.directory)
        known = index.get("model_fingerprint")
        if known and self.model_fingerprint and known != self.model_fingerprint:
            raise ValueError(
                f"{path}: holds activations of checkpoint {known}, not {self.model_fingerprint} "
                f"({self.model_name}); use one activations folder per model"
            )
        if index.get("model") != self.model_name and not (known and known == self.model_fingerprint):
            raise ValueError(
                f"{path}: holds activations of model {index.get('model')!r}, not {self.model_name!r}; "
                "use one activations folder per model"
            )
        return index

    def _known_prompt(self, task: str, question_id: str) -> str | None:
        entry = self.index["entries"].get(task, {}).get(question_id)
        if entry is not None:
            return entry["prompt_sha256"]
        return self._pending_keys.get((task, question_id))

    def wants(self, task: str, question_id: str, prompt: str) -> bool:
        """Whether this prompt's activations still have to be recorded (raises if the question has another
        prompt in this folder)."""
        known = self._known_prompt(task, question_id)
        if known is None:
            return True
        if known != prompt_sha256(prompt):
            raise ValueError(
                f"{self.directory}: question {task}/{question_id} already has activations of another prompt "
                "(another chat template, system prompt or few-shot setting?); use a new activations folder"
            )
        return False

    def add(self, task: str, question_id: str, prompt: str, hidden_states: tuple[torch.Tensor, ...]) -> None:
        """Record one prompt from its prefill hidden states (``(1, prompt_len, hidden)`` tensors)."""
        if not self.wants(task, question_id, prompt):
            return
        stacked = torch.stack(
            [layer[0] for layer in hidden_states]
        ).float()  # (layers + 1, prompt_len, hidden)
        entry = {"prompt_tokens": int(stacked.shape[1]), "prompt_sha256": prompt_sha256(prompt)}
        last_token = stacked[:, -1].contiguous().cpu()
        prompt_mean = stacked.mean(dim=1).contiguous().cpu()
        self._check_shape(last_token.shape)
        self._pending.append((task, question_id, entry, last_token, prompt_mean))
        self._pending_keys[(task, question_id)] = entry["prompt_sha256"]
        if len(self._pending) >= self.shard_size:
            self.flush()

    def _check_shape(self, shape: torch.Size) -> None:
        layers, hidden = int(shape[0]), int(shape[1])
        expected = (self.index.get("num_layers_with_embeddings"), self.index.get("hidden_size"))
        if expected == (None, None):
            self.index["num_layers_with_embeddings"], self.index["hidden_size"] = layers, hidden
        elif expected != (layers, hidden):
            raise ValueError(f"{self.directory}: activations of shape {expected}, got {(layers, hidden)}")

    def _next_shard_number(self) -> int:
        numbers = [int(m.group(1)) for p in self.directory.iterdir() if (m := SHARD_PATTERN.match(p.name))]
        return max(numbers, default=-1) + 1

    def flush(self) -> None:
        """Write the collected prompts as a new shard and update the index (both atomically)."""
        if not self._pending:
            return
        shard = shard_name(self._next_shard_number())
        tensors, new_entries = {}, []
        for number, (task, question_id, entry, last_token, prompt_mean) in enumerate(self._pending):
            tensors[f"{number}.last_token"] = last_token
            tensors[f"{number}.prompt_mean"] = prompt_mean
            keys = {
                "shard": shard,
                "last_token": f"{number}.last_token",
                "prompt_mean": f"{number}.prompt_mean",
            }
            new_entries.append((task, question_id, {**keys, **entry}))
        metadata = {"format": FORMAT, "model": self.model_name}
        _replace_atomically(self.directory / shard, lambda path: save_file(tensors, path, metadata=metadata))
        for task, question_id, entry in new_entries:
            self.index["entries"].setdefault(task, {})[question_id] = entry
        text = json.dumps(self.index, indent=1, sort_keys=True)
        _replace_atomically(
            self.directory / INDEX_NAME, lambda path: Path(path).write_text(text, encoding="utf-8")
        )
        self._pending.clear()
        self._pending_keys.clear()
