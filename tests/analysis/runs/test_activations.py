"""Prompt activations: capcal-hf writes them during a real lm-eval run, analysis.runs.activations reads them
back aligned with the per-question table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.numpy import load_file, save_file

from analysis.runs import load_run
from analysis.runs.activations import ActivationFormatError, load_activations, read_activation_index
from capcal_models.activations import ActivationWriter

LAYERS, HIDDEN = 4, 8  # synthetic hidden states: embeddings + 3 layers


def _hidden_states(seed: int, prompt_tokens: int) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, prompt_tokens, HIDDEN, generator=generator) for _ in range(LAYERS))


def _write(directory: Path, prompts: dict[tuple[str, str], tuple[str, int]], shard_size: int = 2) -> dict:
    """Write synthetic activations; return (task, question_id) -> the hidden states written."""
    writer = ActivationWriter(directory, model_name="test-model", shard_size=shard_size)
    written = {}
    for seed, (key, (prompt, tokens)) in enumerate(prompts.items()):
        written[key] = _hidden_states(seed, tokens)
        writer.add(*key, prompt, written[key])
    writer.flush()
    return written


PROMPTS = {
    ("task_a", "q1"): ("prompt one", 5),
    ("task_a", "q2"): ("prompt two", 3),
    ("task_b", "q1"): ("prompt three", 7),
}


def test_activations_load_row_by_row_in_the_tables_order(tmp_path):
    written = _write(tmp_path, PROMPTS)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "activations-00000.safetensors",
        "activations-00001.safetensors",
        "index.json",
    ]  # shards of 2 prompts, no temporary files left
    table = pd.DataFrame({"task": ["task_b", "task_a", "task_a"], "question_id": ["q1", "q2", "q1"]})
    activations = load_activations(tmp_path, table)
    assert activations.last_token.shape == (3, LAYERS, HIDDEN) == activations.prompt_mean.shape
    assert activations.last_token.dtype == np.float32 and activations.model == "test-model"
    for row, key in enumerate(zip(table["task"], table["question_id"], strict=True)):
        stacked = torch.stack([layer[0] for layer in written[key]])  # (layers, tokens, hidden)
        np.testing.assert_array_equal(activations.last_token[row], stacked[:, -1].numpy())
        np.testing.assert_allclose(activations.prompt_mean[row], stacked.mean(dim=1).numpy(), rtol=1e-6)
    index = read_activation_index(tmp_path)
    assert index["num_layers_with_embeddings"] == LAYERS and index["hidden_size"] == HIDDEN
    assert index["entries"]["task_a"]["q1"]["prompt_tokens"] == 5


def test_missing_questions_raise_naming_them(tmp_path):
    _write(tmp_path, PROMPTS)
    table = pd.DataFrame({"task": ["task_a", "task_c"], "question_id": ["q1", "q9"]})
    with pytest.raises(KeyError, match="task_c/q9"):
        load_activations(tmp_path, table)


def test_missing_questions_beyond_five_are_counted_not_named(tmp_path):
    """The error names the first five questions without activations and counts the rest ("and 1 more" from
    the sixth on): catches a cut-off that drops the count of a sixth missing question."""
    _write(tmp_path, PROMPTS)
    for absent, suffix in ((5, ""), (6, " and 1 more"), (7, " and 2 more")):
        ids = [f"q{i}" for i in range(1, absent + 1)]
        table = pd.DataFrame({"task": ["task_a"] + ["task_c"] * absent, "question_id": ["q1", *ids]})
        with pytest.raises(KeyError) as raised:
            load_activations(tmp_path, table)
        named = ", ".join(f"task_c/{i}" for i in ids[:5])
        assert raised.value.args[0] == (
            f"{tmp_path}: no activations for {absent} of {absent + 1} questions: {named}{suffix}"
        )


def test_missing_questions_can_be_left_out_and_the_rows_index_the_table(tmp_path):
    """``missing="report"``: the rows returned are integer positions in the table (``iloc`` takes them), also
    when no question has activations; the join counts the questions left out."""
    written = _write(tmp_path, PROMPTS)
    table = pd.DataFrame({"task": ["task_c", "task_a", "task_a"], "question_id": ["q9", "q2", "q8"]})
    some = load_activations(tmp_path, table, missing="report")
    assert some.rows.tolist() == [1] and some.rows.dtype.kind == "i"
    assert table.iloc[some.rows]["question_id"].tolist() == ["q2"] and some.join.unmatched_left == 2
    np.testing.assert_array_equal(
        some.last_token[0], torch.stack([h[0, -1] for h in written["task_a", "q2"]])
    )
    none = load_activations(tmp_path, table.iloc[[0, 2]], missing="report")
    assert (
        none.rows.dtype.kind == "i"
        and none.rows.shape == (0,)
        and none.last_token.shape == (0, LAYERS, HIDDEN)
    )
    assert table.iloc[none.rows].empty and none.join.unmatched_left == 2


def test_the_join_report_names_questions_and_activations(tmp_path):
    """The join's one-line summary names its sides "questions" and "activations" and carries the note that
    a table without ``model_id`` leaves the model unchecked."""
    _write(tmp_path, PROMPTS)
    table = pd.DataFrame({"task": ["task_c", "task_a", "task_a"], "question_id": ["q9", "q2", "q8"]})
    join = load_activations(tmp_path, table, missing="report").join
    assert join.summary() == (
        f"activations {tmp_path}: matched 1 of 3 questions and 3 activations; "
        "2 questions without activations (first: task_c / q9, task_a / q8); "
        "2 activations without questions (first: task_a / q1, task_b / q1); "
        "the table has no model_id: the activations' model is not checked"
    )


def test_activations_of_another_checkpoint_are_refused_naming_both(tmp_path):
    """Activations recorded for one checkpoint are not joined to questions of another: the error names the
    index file, the activations' checkpoint and model name, and the table's checkpoint."""
    writer = ActivationWriter(tmp_path, model_name="test-model", model_fingerprint="sha-aaa")
    writer.add("task_a", "q1", "prompt one", _hidden_states(0, 2))
    writer.flush()
    table = pd.DataFrame({"task": ["task_a"], "question_id": ["q1"], "model_id": ["sha-bbb"]})
    message = (
        f"{tmp_path / 'index.json'}: activations of checkpoint sha-aaa (test-model), but the table's "
        "questions are of sha-bbb: another model"
    )
    with pytest.raises(ActivationFormatError) as refused:
        load_activations(tmp_path, table)
    assert str(refused.value) == message
    same = load_activations(tmp_path, table.assign(model_id="sha-aaa"))
    assert same.model_fingerprint == "sha-aaa" and same.join.notes == ()


def test_a_folder_collects_runs_but_refuses_another_prompt_or_model(tmp_path):
    _write(tmp_path, PROMPTS)
    writer = ActivationWriter(tmp_path, model_name="test-model")
    assert not writer.wants("task_a", "q1", "prompt one")  # already there: not written again
    assert writer.wants("task_a", "q3", "prompt four")
    with pytest.raises(ValueError, match="another prompt"):
        writer.wants("task_a", "q1", "prompt one, with another chat template")
    with pytest.raises(ValueError, match="one activations folder per model"):
        ActivationWriter(tmp_path, model_name="another-model")
    writer.add("task_a", "q3", "prompt four", _hidden_states(9, 2))
    writer.flush()
    assert "activations-00002.safetensors" in {p.name for p in tmp_path.iterdir()}
    table = pd.DataFrame({"task": ["task_a", "task_a"], "question_id": ["q3", "q1"]})
    assert load_activations(tmp_path, table).last_token.shape == (2, LAYERS, HIDDEN)


def test_malformed_folders_raise(tmp_path):
    table = pd.DataFrame({"task": ["task_a"], "question_id": ["q1"]})
    with pytest.raises(ActivationFormatError, match="no activations index"):
        load_activations(tmp_path, table)
    (tmp_path / "index.json").write_text("{not json")
    with pytest.raises(ActivationFormatError, match="not valid JSON"):
        load_activations(tmp_path, table)
    _write(tmp_path / "run", PROMPTS)
    (tmp_path / "run" / "activations-00000.safetensors").unlink()
    with pytest.raises(ActivationFormatError, match="missing"):
        load_activations(tmp_path / "run", table)


def test_a_tensor_missing_from_its_shard_is_named(tmp_path):
    """The index lists a tensor its shard does not hold: the error names the shard file and the tensor."""
    _write(tmp_path, PROMPTS, shard_size=8)
    index = json.loads((tmp_path / "index.json").read_text())
    entry = index["entries"]["task_a"]["q2"]
    shard = tmp_path / entry["shard"]
    tensors = load_file(str(shard))
    del tensors[entry["prompt_mean"]]
    save_file(tensors, str(shard))
    table = pd.DataFrame({"task": ["task_a"], "question_id": ["q2"]})
    with pytest.raises(ActivationFormatError) as error:
        load_activations(tmp_path, table)
    assert str(error.value) == f"{shard}: tensor {entry['prompt_mean']} is missing"


def test_an_index_without_sizes_loads_when_no_question_has_activations(tmp_path):
    """The sizes are needed only to read entries: with none of the table's questions present (left out with
    ``missing="report"``), an index without them gives empty (0, 0, 0) arrays instead of an error."""
    _write(tmp_path, PROMPTS)
    index = json.loads((tmp_path / "index.json").read_text())
    del index["num_layers_with_embeddings"], index["hidden_size"]
    (tmp_path / "index.json").write_text(json.dumps(index))
    table = pd.DataFrame({"task": ["task_c"], "question_id": ["q9"]})
    none = load_activations(tmp_path, table, missing="report")
    assert none.last_token.shape == none.prompt_mean.shape == (0, 0, 0) and none.rows.tolist() == []
    with pytest.raises(ActivationFormatError, match="entries without num_layers/hidden_size"):
        load_activations(tmp_path, pd.DataFrame({"task": ["task_a"], "question_id": ["q1"]}))


# ------------------------------------------------------------------------------------------ real run

LIMIT, K, MAX_GEN_TOKS = 3, 2, 8


@pytest.fixture(scope="module")
def capcal_hf_run(tmp_path_factory, smollm2_path) -> tuple[Path, Path]:
    """``capcal eval --model capcal-hf ... activations=DIR`` on capcal_gsm8k: (output folder, activations)."""
    root = tmp_path_factory.mktemp("capcal_hf_run")
    output, activations = root / "out", root / "activations"
    command = [
        sys.executable, "-m", "analysis.cli", "eval", "--model", "capcal-hf",
        "--model_args", f"pretrained={smollm2_path},activations={activations},sample_cache=False",
        "--tasks", "capcal_gsm8k", "--limit", str(LIMIT), "--repeats", str(K), "--data_dir", "bundled",
        "--gen_kwargs", f"max_gen_toks={MAX_GEN_TOKS}", "--apply_chat_template", "--batch_size", "8",
        "--seed", "7", "--log_samples", "--output_path", str(output),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "expected_accuracy" in result.stdout
    return output, activations


@pytest.mark.slow
def test_capcal_hf_runs_capcal_gsm8k_end_to_end(capcal_hf_run):
    table = load_run(capcal_hf_run[0], responses=True)
    assert len(table) == LIMIT and set(table["n"]) == {K}
    assert all(len(responses) == K for responses in table["responses"])
    assert table["question_id"].str.startswith("gsm8k/").all()


@pytest.mark.slow
def test_activations_of_a_run_load_aligned_with_its_questions(capcal_hf_run, smollm2_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    output, directory = capcal_hf_run
    table = load_run(output).sample(frac=1.0, random_state=0).reset_index(drop=True)  # any row order
    activations = load_activations(directory, table)
    assert activations.last_token.shape == (LIMIT, 31, 576) == activations.prompt_mean.shape  # SmolLM2
    assert np.isfinite(activations.last_token).all() and np.isfinite(activations.prompt_mean).all()

    # Row 0's arrays are the hidden states of row 0's prompt, recomputed here with transformers.
    samples_file = next(output.rglob("samples_capcal_gsm8k_*.jsonl"))
    prompts = {}
    for line in samples_file.read_text().splitlines():
        record = json.loads(line)
        prompts[record["doc"]["question_id"]] = record["arguments"]["gen_args_0"]["arg_0"]
    tokenizer = AutoTokenizer.from_pretrained(smollm2_path)
    model = AutoModelForCausalLM.from_pretrained(smollm2_path).eval()
    input_ids = tokenizer(prompts[table["question_id"][0]], return_tensors="pt").input_ids
    with torch.inference_mode():
        hidden = torch.stack(model(input_ids, output_hidden_states=True).hidden_states)[:, 0]
    index = read_activation_index(directory)
    entry = index["entries"]["capcal_gsm8k"][table["question_id"][0]]
    assert entry["prompt_tokens"] == input_ids.shape[1]
    np.testing.assert_allclose(activations.last_token[0], hidden[:, -1].numpy(), atol=1e-4)
    np.testing.assert_allclose(activations.prompt_mean[0], hidden.mean(dim=1).numpy(), atol=1e-4)
    assert not np.allclose(activations.last_token[1], hidden[:, -1].numpy(), atol=1e-4)
