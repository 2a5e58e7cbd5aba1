"""The batch size ``capcal eval`` uses when the user gives none: one that is fast on this machine.

lm-eval's default ``--batch_size 1`` makes capcal-hf decode one sample at a time (its batch size is the
number of samples decoded at once): 7.6x slower than 64 rows on a 2-core AMD EPYC (issue 36), and 128 rows
were faster still (docs/benchmarks.md). So each capcal engine gets a default of its own, stated in the run's
log line and recorded in the results (``config.capcal_batch_size``):

- ``capcal-hf``: ``rows = min(cap, budget // kv_bytes_per_row)``, the most rows whose KV cache fits half of
  the free memory (GPU memory on CUDA, else available RAM), where
  ``kv_bytes_per_row = 2 * layers * kv_heads * head_dim * dtype_bytes * CONTEXT_TOKENS`` (keys and values of
  every layer for a row of ``CONTEXT_TOKENS`` tokens), read from the model's ``config.json``. ``cap`` is
  ``CPU_ROW_CAP`` on a CPU (on the benchmark machine more rows are no faster: docs/benchmarks.md) and
  ``GPU_ROW_CAP`` on a GPU. Log-likelihood requests use the same number as their segments per pass.
- ``capcal-vllm``: ``auto``: vLLM schedules its own continuous batch; capcal hands it ``chunk_samples``
  samples per call (``capcal_models.vllm``).
- ``capcal-api``: 1: every request is one prompt; how many run at once is the model argument
  ``num_concurrent``.
- any other model: lm-eval's default, 1.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from capcal_models import linux_proc

__all__ = ["BatchSizeChoice", "CONTEXT_TOKENS", "CPU_ROW_CAP", "GPU_ROW_CAP", "default_batch_size"]

CONTEXT_TOKENS = 1024  # prompt plus generated tokens of one row, for the memory estimate
CPU_ROW_CAP = 128  # rows decoded at once on a CPU (docs/benchmarks.md: "The default batch size")
GPU_ROW_CAP = 256
MEMORY_SHARE = 0.5  # share of the free memory the rows' KV caches may take

_DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "float64": 8}


@dataclasses.dataclass(frozen=True)
class BatchSizeChoice:
    """The batch size chosen for a run and why (one line), as logged and recorded in the results."""

    value: int | str
    reason: str

    def record(self) -> dict[str, Any]:
        """The results' ``config.capcal_batch_size`` entry."""
        return {"value": self.value, "chosen_by": "capcal default", "reason": self.reason}


def _free_memory_bytes(on_gpu: bool) -> int | None:
    """Free GPU memory (``torch.cuda.mem_get_info``) or available RAM (``/proc/meminfo`` MemAvailable)."""
    if on_gpu:
        import torch

        return int(torch.cuda.mem_get_info()[0])
    return linux_proc.available_memory_bytes()


def _kv_bytes_per_row(config: Mapping[str, Any], dtype: str | None) -> int | None:
    """``2 * layers * kv_heads * head_dim * dtype_bytes * CONTEXT_TOKENS`` from a ``config.json``; None
    when the config lacks the sizes (a multimodal config nests them under ``text_config``)."""
    config = config.get("text_config") or config
    layers = config.get("num_hidden_layers")
    heads = config.get("num_attention_heads")
    hidden = config.get("hidden_size")
    if not all(isinstance(value, int) and value > 0 for value in (layers, heads, hidden)):
        return None
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or hidden // heads
    name = str(dtype or config.get("torch_dtype") or config.get("dtype") or "float32").removeprefix("torch.")
    dtype_bytes = _DTYPE_BYTES.get(name, 4)
    return 2 * layers * kv_heads * head_dim * dtype_bytes * CONTEXT_TOKENS


def _on_gpu(device: str | None) -> bool:
    if device is not None and not str(device).startswith("cuda"):
        return False
    import torch

    return bool(torch.cuda.is_available())


def capcal_hf_rows(model_args: Mapping[str, Any], device: str | None) -> BatchSizeChoice:
    """capcal-hf's default: ``min(cap, MEMORY_SHARE * free_memory // kv_bytes_per_row)`` rows, at least 1
    (the module docstring); ``cap`` alone when the model's config or the free memory cannot be read."""
    on_gpu = _on_gpu(device)
    cap = GPU_ROW_CAP if on_gpu else CPU_ROW_CAP
    where = "GPU" if on_gpu else "CPU"
    pretrained = model_args.get("pretrained")
    config_file = Path(str(pretrained)).expanduser() / "config.json" if pretrained else None
    per_row = None
    if config_file is not None and config_file.is_file():
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            config = None
        if isinstance(config, dict):
            per_row = _kv_bytes_per_row(config, model_args.get("dtype") or model_args.get("torch_dtype"))
    free = _free_memory_bytes(on_gpu)
    if per_row is None or free is None:
        return BatchSizeChoice(
            cap, f"capcal-hf on the {where}: {cap} samples decoded at once (the {where} cap)"
        )
    fits = max(1, int(MEMORY_SHARE * free) // per_row)
    rows = min(cap, fits)
    why = (
        f"the {where} cap"
        if rows == cap
        else f"KV cache of {per_row / 2**20:.0f} MiB per {CONTEXT_TOKENS}-token row in half of "
        f"{free / 2**30:.1f} GiB free"
    )
    return BatchSizeChoice(rows, f"capcal-hf on the {where}: {rows} samples decoded at once ({why})")


def default_batch_size(
    model: Any, model_args: Mapping[str, Any] | None = None, device: str | None = None
) -> BatchSizeChoice:
    """The batch size for a run given no ``--batch_size``: per engine as the module docstring says.

    ``model`` is a registered model name or an lm-eval ``LM`` object (an object keeps lm-eval's default:
    its batch size was set when it was built)."""
    model_args = model_args or {}
    if model == "capcal-hf":
        return capcal_hf_rows(model_args, device)
    if model == "capcal-vllm":
        return BatchSizeChoice(
            "auto", "capcal-vllm: auto (vLLM batches continuously; chunk_samples per call)"
        )
    if model == "capcal-api":
        concurrent = model_args.get("num_concurrent", 1)
        return BatchSizeChoice(
            1, f"capcal-api: 1 prompt per request, num_concurrent={concurrent} requests at once"
        )
    name = model if isinstance(model, str) else type(model).__name__
    return BatchSizeChoice(1, f"{name}: lm-eval's default 1")
