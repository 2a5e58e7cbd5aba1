"""capcal eval's default batch size per engine (``capcal_models.batch_size``); its speed is measured in
benchmarks/default_batch_size.py, not here."""

from __future__ import annotations

import json

from capcal_models import batch_size
from capcal_models.batch_size import CONTEXT_TOKENS, CPU_ROW_CAP, MEMORY_SHARE, default_batch_size


def test_kv_bytes_per_row_of_smollm2(smollm2_path):
    """SmolLM2-135M: 30 layers, 3 KV heads of 64, float32: 2 * 30 * 3 * 64 * 4 bytes per token."""
    config = json.loads((smollm2_path / "config.json").read_text(encoding="utf-8"))
    assert batch_size._kv_bytes_per_row(config, None) == 2 * 30 * 3 * 64 * 4 * CONTEXT_TOKENS
    assert batch_size._kv_bytes_per_row(config, "bfloat16") == 2 * 30 * 3 * 64 * 2 * CONTEXT_TOKENS
    assert batch_size._kv_bytes_per_row({"text_config": config}, None) == 2 * 30 * 3 * 64 * 4 * CONTEXT_TOKENS
    assert batch_size._kv_bytes_per_row({"model_type": "unknown"}, None) is None


def test_capcal_hf_on_the_cpu_takes_the_cap_when_memory_allows(smollm2_path):
    choice = default_batch_size("capcal-hf", {"pretrained": str(smollm2_path)}, "cpu")
    per_row = 2 * 30 * 3 * 64 * 4 * CONTEXT_TOKENS
    free = batch_size._free_memory_bytes(False)
    assert free is not None
    assert choice.value == min(CPU_ROW_CAP, max(1, int(MEMORY_SHARE * free) // per_row))
    assert choice.reason.startswith(f"capcal-hf on the CPU: {choice.value} samples decoded at once")
    assert choice.record() == {"value": choice.value, "chosen_by": "capcal default", "reason": choice.reason}


def test_capcal_hf_rows_shrink_to_what_the_memory_holds(tmp_path):
    """A model whose row needs 80 layers x 64 KV heads x 128 x 4 bytes x 1024 tokens (10 GiB): one row, at
    least, and the reason names the size per row."""
    config = {
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "hidden_size": 8192,
        "torch_dtype": "float32",
    }
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    choice = default_batch_size("capcal-hf", {"pretrained": str(tmp_path)}, "cpu")
    per_row = 2 * 80 * 64 * 128 * 4 * CONTEXT_TOKENS
    assert choice.value == max(1, int(MEMORY_SHARE * batch_size._free_memory_bytes(False)) // per_row)
    assert choice.value < CPU_ROW_CAP and f"KV cache of {per_row // 2**20} MiB per" in choice.reason


def test_the_other_engines():
    assert default_batch_size("capcal-vllm", {}).value == "auto"
    api = default_batch_size("capcal-api", {"num_concurrent": 8})
    assert api.value == 1 and "num_concurrent=8" in api.reason
    assert default_batch_size("hf", {}).value == 1
    assert default_batch_size("capcal-hf", {}, "cpu").value == CPU_ROW_CAP  # no config to size from
