"""capcal eval's default batch size per engine (``capcal_models.batch_size``); its speed is measured in
benchmarks/default_batch_size.py, not here.

Expected values are worked out here from the documented formula, never from the module's own memory reading:
the free memory comes from a ``/proc/meminfo`` written by the test (its ``MemAvailable`` is in kB, so each
figure is chosen where reading it as bytes, or as 1000 bytes, changes the number of rows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capcal_models import batch_size, linux_proc
from capcal_models.batch_size import CONTEXT_TOKENS, CPU_ROW_CAP, default_batch_size

# SmolLM2-135M's sizes (its config.json): 30 layers, 9 heads of 64 (hidden 576), 3 KV heads, float32
SMOLLM2 = {"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "hidden_size": 576}
SMOLLM2_ROW_BYTES = 2 * 30 * 3 * 64 * 4 * 1024  # keys and values, 1024 tokens: 47,185,920 bytes (45 MiB)
MEMINFO = """MemTotal:       {total} kB
MemFree:          123456 kB
MemAvailable:   {available} kB
Buffers:          100000 kB
"""


@pytest.fixture()
def meminfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Set the machine's MemAvailable (kB) as ``/proc/meminfo`` would show it."""

    def set_available(kilobytes: int | None) -> None:
        text = MEMINFO.format(total=2 * (kilobytes or 1), available=kilobytes)
        if kilobytes is None:
            text = "\n".join(line for line in text.splitlines() if not line.startswith("MemAvailable"))
        path = tmp_path / "meminfo"
        path.write_text(text, encoding="utf-8")
        monkeypatch.setattr(linux_proc, "MEMINFO", path)

    return set_available


def _model(folder: Path, config: dict) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return {"pretrained": str(folder)}


def test_kv_bytes_per_row_of_smollm2(smollm2_path):
    """SmolLM2-135M's own config: 30 layers, 3 KV heads of 64, float32: 2 * 30 * 3 * 64 * 4 bytes a token."""
    config = json.loads((smollm2_path / "config.json").read_text(encoding="utf-8"))
    assert CONTEXT_TOKENS == 1024
    assert batch_size._kv_bytes_per_row(config, None) == SMOLLM2_ROW_BYTES
    assert batch_size._kv_bytes_per_row(config, "bfloat16") == SMOLLM2_ROW_BYTES // 2
    assert batch_size._kv_bytes_per_row({"text_config": config}, None) == SMOLLM2_ROW_BYTES
    assert batch_size._kv_bytes_per_row({"model_type": "unknown"}, None) is None


def test_the_free_memory_is_meminfos_kilobytes_times_1024(meminfo):
    meminfo(16_384_000)
    assert batch_size._free_memory_bytes(False) == 16_777_216_000  # 16,384,000 x 1024, not x 1000 or x 1
    meminfo(None)  # no MemAvailable line (an old kernel)
    assert batch_size._free_memory_bytes(False) is None


def test_capcal_hf_rows_are_what_half_the_available_memory_holds(meminfo, tmp_path):
    """4,000,000 kB available = 4,096,000,000 bytes; half of it holds 43 rows of 47,185,920 bytes (43.4):
    read as 1000-byte kB it would be 42 rows, as bytes 1 row; the reason names the row and the memory."""
    meminfo(4_000_000)
    choice = default_batch_size("capcal-hf", _model(tmp_path / "m", SMOLLM2), "cpu")
    assert choice.value == 43
    assert choice.reason == (
        "capcal-hf on the CPU: 43 samples decoded at once (KV cache of 45 MiB per 1024-token row in half of "
        "3.8 GiB free)"
    )  # 4,096,000,000 / 2**30 = 3.81
    assert choice.record() == {"value": 43, "chosen_by": "capcal default", "reason": choice.reason}
    float16 = default_batch_size("capcal-hf", {**_model(tmp_path / "m", SMOLLM2), "dtype": "float16"}, "cpu")
    assert float16.value == 86  # half the bytes per row: 2,048,000,000 // 23,592,960


def test_capcal_hf_on_the_cpu_takes_the_cap_when_memory_allows(meminfo, tmp_path):
    """64 GiB available holds 728 SmolLM2 rows in its half: the CPU cap, 128, is taken and named; one row
    fewer than the cap fits in 128 * 45 MiB * 2 - 1 byte."""
    meminfo(64 * 2**20)
    choice = default_batch_size("capcal-hf", _model(tmp_path / "m", SMOLLM2), "cpu")
    assert choice.value == CPU_ROW_CAP == 128
    assert choice.reason == "capcal-hf on the CPU: 128 samples decoded at once (the CPU cap)"
    meminfo(128 * SMOLLM2_ROW_BYTES * 2 // 1024 - 1)  # the boundary: just under 128 rows' worth
    assert default_batch_size("capcal-hf", _model(tmp_path / "m", SMOLLM2), "cpu").value == 127
    meminfo(128 * SMOLLM2_ROW_BYTES * 2 // 1024)  # exactly 128 rows
    assert default_batch_size("capcal-hf", _model(tmp_path / "m", SMOLLM2), "cpu").value == 128


def test_capcal_hf_rows_shrink_to_what_the_memory_holds(meminfo, tmp_path):
    """A model whose row needs 80 layers x 64 KV heads x 128 x 4 bytes x 1024 tokens (5 GiB): 64,000,000 kB
    available (61.0 GiB) holds 6 rows in its half; 8,000,000 kB holds none, and one row is the floor."""
    config = {
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "hidden_size": 8192,
        "torch_dtype": "float32",
    }
    model_args = _model(tmp_path / "big", config)
    meminfo(64_000_000)
    choice = default_batch_size("capcal-hf", model_args, "cpu")
    assert choice.value == 6  # 32,768,000,000 // 5,368,709,120
    assert "KV cache of 5120 MiB per 1024-token row in half of 61.0 GiB free" in choice.reason
    meminfo(8_000_000)
    assert default_batch_size("capcal-hf", model_args, "cpu").value == 1


def test_capcal_hf_takes_the_cap_when_memory_or_the_config_cannot_be_read(meminfo, tmp_path):
    meminfo(None)
    choice = default_batch_size("capcal-hf", _model(tmp_path / "m", SMOLLM2), "cpu")
    assert choice.value == CPU_ROW_CAP
    assert choice.reason == "capcal-hf on the CPU: 128 samples decoded at once (the CPU cap)"
    meminfo(1000)  # 1 MB: one row, had the config been read
    assert default_batch_size("capcal-hf", {}, "cpu").value == CPU_ROW_CAP  # no config to size from
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json", encoding="utf-8")
    assert default_batch_size("capcal-hf", {"pretrained": str(tmp_path / "broken")}, "cpu").value == 128


def test_the_other_engines():
    assert default_batch_size("capcal-vllm", {}).value == "auto"
    api = default_batch_size("capcal-api", {"num_concurrent": 8})
    assert api.value == 1 and "num_concurrent=8" in api.reason
    assert default_batch_size("hf", {}).value == 1
