"""A reduced Self-Calibration training run on the real SmolLM2 (a few optimisation steps): the loss falls, a
run killed after a checkpoint resumes from it to the same adapter, and the merged model loads in lm-eval."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.self_calibration.train import TrainConfig

# Few steps, a learning rate large enough that 4 steps move the loss (the paper's 5e-5 needs many more).
CONFIG = dict(
    learning_rate=2e-3, train_batch_size=2, gradient_accumulation_steps=1, max_steps=4, save_steps=2,
    examples_per_epoch=8, lora_r=8, lora_alpha=16, seed=3,
)  # fmt: skip

KILL_AFTER_CHECKPOINT = """
import json, os, signal, sys
from transformers import TrainerCallback
from analysis.self_calibration.train import TrainConfig, train_self_calibration

class KillAfterSave(TrainerCallback):
    def on_save(self, args, state, control, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)  # a hard kill right after the first checkpoint

data, base, out, config = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
train_self_calibration(data, base, out, TrainConfig(**config), callbacks=[KillAfterSave()])
"""


@pytest.fixture(scope="module")
def trained(selfcal_data, smollm2_path, tmp_path_factory):
    from analysis.self_calibration.train import train_self_calibration

    return train_self_calibration(
        selfcal_data.path, smollm2_path, tmp_path_factory.mktemp("trained"), TrainConfig(**CONFIG)
    )


def _adapter(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path / "adapter_model.safetensors"))


@pytest.mark.slow
def test_loss_falls_and_outputs_are_written(trained):
    summary = trained.summary
    assert summary["global_step"] == 4 and summary["steps_this_run"] == 4 and summary["resumed_from"] is None
    assert summary["loss_after"]["loss"] < summary["loss_before"]["loss"]
    assert summary["loss_after"]["confidence_loss"] < summary["loss_before"]["confidence_loss"]
    logged = [entry for entry in summary["log_history"] if "loss" in entry]
    assert len(logged) == 4 and all("confidence_loss" in entry and "p_yes" in entry for entry in logged)
    assert (trained.adapter_dir / "adapter_config.json").is_file()
    assert json.loads((trained.adapter_dir / "adapter_config.json").read_text())["r"] == 8
    for name in ("model.safetensors", "config.json", "tokenizer.json", "chat_template.jinja"):
        assert (trained.merged_dir / name).is_file(), name
    assert (trained.output_dir / "checkpoints" / "checkpoint-4").is_dir()


@pytest.mark.slow
def test_killed_run_resumes_from_its_checkpoint(trained, selfcal_data, smollm2_path, tmp_path):
    """SIGKILL right after checkpoint-2; the second call resumes there (2 more steps) and ends with the
    adapter of the uninterrupted run."""
    import torch

    from analysis.self_calibration.train import train_self_calibration

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    arguments = [str(selfcal_data.path), str(smollm2_path), str(tmp_path), json.dumps(CONFIG)]
    killed = subprocess.run([sys.executable, "-c", KILL_AFTER_CHECKPOINT, *arguments], env=env, check=False)
    assert killed.returncode == -9
    assert (tmp_path / "checkpoints" / "checkpoint-2").is_dir() and not (tmp_path / "merged").exists()
    resumed = train_self_calibration(selfcal_data.path, smollm2_path, tmp_path, TrainConfig(**CONFIG))
    assert resumed.summary["resumed_from"].endswith("checkpoint-2")
    assert resumed.summary["steps_this_run"] == 2 and resumed.summary["global_step"] == 4
    expected, got = _adapter(trained.adapter_dir), _adapter(resumed.adapter_dir)
    assert expected.keys() == got.keys()
    for key in expected:
        torch.testing.assert_close(got[key], expected[key], rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_merged_model_loads_in_lm_eval(trained):
    """lm-eval's own ``hf`` model loads the merged checkpoint with ``pretrained=`` and samples from it."""
    from analysis.evaluation import evaluate

    results = evaluate(
        "hf", ["capcal_arithmetic"], model_args={"pretrained": str(trained.merged_dir)}, repeats=2, limit=1,
        data_dir="bundled", apply_chat_template=True, gen_kwargs={"max_gen_toks": 4}, log_samples=True,
    )  # fmt: skip
    record = results["samples"]["capcal_arithmetic"][0]
    assert len(record["resps"][0]) == 2 and record["n_samples"] == 2


def test_train_config_validates_and_is_configurable():
    config = TrainConfig(lora_r=4, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    assert config.target_modules == ("q_proj", "k_proj", "v_proj", "o_proj")
    assert (
        TrainConfig().lora_r == 32 and TrainConfig().lora_alpha == 16 and TrainConfig().lora_dropout == 0.05
    )
    assert TrainConfig().learning_rate == 5e-5 and TrainConfig().lr_scheduler_type == "cosine"
    assert TrainConfig().smooth_l1_beta == 0.25 and TrainConfig().lm_weight == 0.1
    with pytest.raises(ValueError, match="lora_r=0, learning_rate=-1"):
        TrainConfig(lora_r=0, learning_rate=-1)
    with pytest.raises(ValueError, match="target_modules"):
        TrainConfig(target_modules=())


def test_cli_exposes_every_training_setting():
    """``capcal selfcal train`` and ``run`` have a flag per ``TrainConfig`` field (``run`` shares --seed)."""
    import dataclasses

    from analysis.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(
        ["selfcal", "train", "data", "--model", "smollm2", "--output", "out", "--lora_r", "8",
         "--target_modules", "q_proj", "k_proj", "--balanced", "false", "--learning_rate", "1e-4"]
    )  # fmt: skip
    assert (args.lora_r, args.target_modules, args.balanced, args.learning_rate) == (
        8, ["q_proj", "k_proj"], False, 1e-4,
    )  # fmt: skip
    assert args.lora_alpha is None  # not given: TrainConfig's default applies
    run = parser.parse_args(
        ["selfcal", "run", "--output_dir", "o", "--eval_docs", "0", "5", "--max_steps", "3"]
    )
    assert run.eval_docs == [0, 5] and run.max_steps == 3
    for field in dataclasses.fields(TrainConfig):
        assert hasattr(run, field.name), field.name
