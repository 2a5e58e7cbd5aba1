"""benchmarks/gpu_check.py (issue 46's GPU table) runs, at its ``--tiny`` size on the CPU: both engines at
both batch sizes through lm-eval, every sample drawn, the decode steps each engine needs (stock hf: one batch
of ``max_new_tokens - 1`` steps per ``batch_size`` requests; capcal-hf the same per ``batch_size`` samples),
ratios equal to the table's samples/s; ``--pack`` copies the config and tokenizer, no weights."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_check  # noqa: E402


def test_pack_copies_the_architecture_without_weights(smollm2_path, tmp_path):
    packed = gpu_check.pack(tmp_path / "packed", smollm2_path)
    names = sorted(path.name for path in packed.iterdir())
    assert "config.json" in names and "tokenizer.json" in names
    assert not any(name.endswith((".safetensors", ".bin")) for name in names)


@pytest.mark.slow
def test_the_tiny_gpu_check_runs_on_the_cpu(smollm2_path, tmp_path):
    source = gpu_check.pack(tmp_path / "source", smollm2_path)
    output = tmp_path / "check.json"
    gpu_check.main(["--tiny", "--model-source", str(source), "--output", str(output)])
    record = json.loads(output.read_text(encoding="utf-8"))
    rows = {(row["engine"], row["batch_size"]): row for row in record["rows"]}
    assert sorted(rows) == [("capcal-hf", 4), ("capcal-hf", 16), ("hf", 4), ("hf", 16)]
    for (_engine, batch), row in rows.items():
        assert row["samples"] == 16, row  # 4 questions x k = 4
        assert row["decode_steps"] == (16 // batch) * 7, row  # 8 new tokens: 1 from the prefill + 7 steps
    for batch in (4, 16):
        expected = (
            rows[("capcal-hf", batch)]["samples_per_second"] / rows[("hf", batch)]["samples_per_second"]
        )
        assert record["ratios"][f"batch {batch}"] == pytest.approx(expected)
    assert record["device"] == "cpu"
