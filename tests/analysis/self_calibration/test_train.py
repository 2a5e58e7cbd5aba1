"""A reduced Self-Calibration training run on the real SmolLM2 (a few optimisation steps): the loss falls, a
run killed after a checkpoint resumes from it to the same adapter, and the merged model loads in lm-eval."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from analysis.self_calibration.train import TrainConfig

# Few steps, a learning rate large enough that 4 steps move the loss (the paper's 5e-5 needs many more).
CONFIG = dict(
    learning_rate=2e-3, train_batch_size=2, gradient_accumulation_steps=1, max_steps=4, save_steps=2,
    lora_r=8, lora_alpha=16, seed=3,
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
    # A micro-batch of causal-LM rows only (which the shuffle may draw) has no P("Yes") and a zero
    # confidence loss.
    assert len(logged) == 4 and all("confidence_loss" in entry for entry in logged)
    assert any("p_yes" in entry for entry in logged)
    assert all(entry["confidence_loss"] == 0.0 for entry in logged if "p_yes" not in entry)
    assert (trained.adapter_dir / "adapter_config.json").is_file()
    assert json.loads((trained.adapter_dir / "adapter_config.json").read_text())["r"] == 8
    for name in ("model.safetensors", "config.json", "tokenizer.json", "chat_template.jinja"):
        assert (trained.merged_dir / name).is_file(), name
    assert (trained.output_dir / "checkpoints" / "checkpoint-4").is_dir()


@pytest.mark.slow
def test_killed_run_resumes_from_its_checkpoint(trained, selfcal_data, smollm2_path, tmp_path, forked_cli):
    """SIGKILL right after checkpoint-2; the second call resumes there (2 more steps) and ends with the
    adapter of the uninterrupted run."""
    import torch

    from analysis.self_calibration.train import train_self_calibration

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    arguments = [str(selfcal_data.path), str(smollm2_path), str(tmp_path), json.dumps(CONFIG)]
    killed = forked_cli.run(KILL_AFTER_CHECKPOINT, arguments, tmp_path, 600, env)  # torch imported once
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
    assert TrainConfig().learning_rate == 5e-5 and TrainConfig().lr_scheduler_type == "micro_batch_cosine"
    assert TrainConfig().max_grad_norm == 0 and TrainConfig().weight_decay == 0.01  # no clipping; AdamW's
    assert TrainConfig().causal_lm_ratio == 0.7 and TrainConfig().gradient_accumulation_steps == 64
    assert TrainConfig().smooth_l1_beta == 0.25 and TrainConfig().lm_weight == 0.1
    with pytest.raises(ValueError, match="lora_r=0, learning_rate=-1"):
        TrainConfig(lora_r=0, learning_rate=-1)
    with pytest.raises(ValueError, match="target_modules"):
        TrainConfig(target_modules=())


def test_examples_per_epoch_of_one_is_accepted_and_zero_refused():
    """The budget check admits its boundary: ``examples_per_epoch`` 1 is valid, 0 is not (catches ``> 1``)."""
    assert TrainConfig(examples_per_epoch=1).examples_per_epoch == 1
    with pytest.raises(ValueError, match="examples_per_epoch=0"):
        TrainConfig(examples_per_epoch=0)


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


def test_method_schedule_is_a_cosine_over_micro_batches():
    """The method steps ``CosineAnnealingLR(T_max = micro-batches)`` once per optimisation step: with 64
    accumulation steps the last of 10 optimisation steps still has 99.9 % of the learning rate."""
    import math

    from analysis.self_calibration.train import method_lr_factor

    assert method_lr_factor(0, 640) == 1.0
    assert method_lr_factor(10, 640) == pytest.approx((1 + math.cos(math.pi * 10 / 640)) / 2)
    assert method_lr_factor(10, 640) > 0.999
    assert method_lr_factor(320, 640) == pytest.approx(0.5) and method_lr_factor(640, 640) == pytest.approx(0)


def _synthetic_examples(n: int, lm_every: int) -> list[dict]:
    """Encoded tuples without a tokenizer: target i/n, a causal-LM part on every ``lm_every``-th."""
    lm = {"input_ids": [1, 2, 3], "labels": [-100, 2, 3]}
    return [
        {"input_ids": [1, 2], "target": i / n, "yes_id": 5, "lm": lm if i % lm_every == 0 else None}
        for i in range(n)
    ]


def test_an_epoch_is_cut_to_whole_optimisation_steps_and_its_cosine_counts_micro_batches():
    from analysis.self_calibration.data import SelfCalibrationDataError
    from analysis.self_calibration.example_draw import plan_epoch
    from analysis.self_calibration.train_config import METHOD_SCHEDULE

    examples = _synthetic_examples(200, lm_every=3)
    training = list(range(0, 200, 2))  # every other tuple; the rest would be the validation questions
    config = TrainConfig(train_batch_size=2, gradient_accumulation_steps=4, examples_per_epoch=400, seed=1)
    plan = plan_epoch(examples, training, config)
    drawn = plan.drawn["confidence"] + plan.drawn["lm"]
    assert set(drawn) <= set(training)  # only training tuples are drawn
    assert plan.drawn["confidence"] and plan.drawn["lm"] and not plan.epoch[0]["lm"]
    assert len(plan.epoch) % 8 == 0 and plan.dropped < 8  # whole windows of 2 x 4 examples
    assert len(plan.epoch) + plan.dropped == len(drawn)
    micro = -(-(len(plan.epoch) + plan.dropped) // 2)  # the method's len(dataloader), before the cut
    assert config.lr_scheduler_type == METHOD_SCHEDULE and plan.schedule_micro_batches == micro
    # max_steps fixes the schedule (steps x accumulation) and keeps the whole epoch
    steps = plan_epoch(examples, training, TrainConfig(**{**vars(config), "max_steps": 3}))
    assert steps.schedule_micro_batches == 12 and steps.dropped == 0
    other = plan_epoch(examples, training, TrainConfig(**{**vars(config), "lr_scheduler_type": "linear"}))
    assert other.schedule_micro_batches is None and other.epoch == plan.epoch
    with pytest.raises(SelfCalibrationDataError, match="fewer than one optimisation step"):
        plan_epoch(examples, training[:3], TrainConfig(**{**vars(config), "examples_per_epoch": 4}))


def test_an_epochs_causal_lm_rows_carry_the_lm_parts_own_ids_and_labels():
    """A causal-LM row is the tuple's ``lm`` part (its ids, its labels masking the prompt), the tuple's
    ``yes_id``, target -1 and no confidence; a confidence row is the tuple itself."""
    from analysis.self_calibration.example_draw import plan_epoch

    examples = _synthetic_examples(60, lm_every=2)
    examples[0]["lm"] = {"input_ids": [7, 8, 9], "labels": [-100, -100, 9]}  # labels differ from the ids
    config = TrainConfig(train_batch_size=1, gradient_accumulation_steps=1, examples_per_epoch=120, seed=3)
    plan = plan_epoch(examples, list(range(60)), config)
    lm_rows = [row for row in plan.epoch if not row["confidence"]]
    assert lm_rows
    assert all(row["target"] == -1.0 and row["lm"] is None and row["yes_id"] == 5 for row in lm_rows)
    assert {(tuple(row["input_ids"]), tuple(row["labels"])) for row in lm_rows} <= {
        ((1, 2, 3), (-100, 2, 3)),
        ((7, 8, 9), (-100, -100, 9)),
    }
    assert 0 in plan.drawn["lm"] and ((7, 8, 9), (-100, -100, 9)) in {
        (tuple(row["input_ids"]), tuple(row["labels"])) for row in lm_rows
    }
    confidence_rows = [row for row in plan.epoch if row["confidence"]]
    assert all(row["input_ids"] == [1, 2] and row["lm"] is None for row in confidence_rows)


@pytest.mark.slow
@pytest.mark.parametrize(("accumulation", "max_grad_norm"), [(1, 0.0), (4, 0.0), (4, 1.0)])
def test_backward_gets_the_mean_over_the_accumulation_window(
    selfcal_data, smollm2_path, tmp_path, monkeypatch, accumulation, max_grad_norm
):
    """Instruments the real ``Trainer`` on SmolLM2: the loss passed to backward is the micro-batch loss
    divided by the accumulation steps (ratio 1/GA), the logged loss is the mean micro-batch loss of each
    step (per example at batch 1), gradients are clipped only when ``max_grad_norm`` > 0, and the learning
    rate follows the method's cosine over micro-batches."""
    import accelerate
    import numpy as np
    import torch

    from analysis.self_calibration import train as train_module
    from analysis.self_calibration.train import method_lr_factor, train_self_calibration

    computed, backward, clipped = [], [], []
    real_loss, real_backward = train_module.selfcal_loss, accelerate.Accelerator.backward
    real_clip = accelerate.Accelerator.clip_grad_norm_

    def recording_loss(*args, **kwargs):
        loss, parts = real_loss(*args, **kwargs)
        if torch.is_grad_enabled():
            computed.append(float(loss.detach()))
        return loss, parts

    def recording_backward(self, loss, **kwargs):
        backward.append(float(loss.detach()))
        return real_backward(self, loss, **kwargs)

    def recording_clip(self, parameters, max_norm, *args, **kwargs):
        clipped.append(max_norm)
        return real_clip(self, parameters, max_norm, *args, **kwargs)

    monkeypatch.setattr(train_module, "selfcal_loss", recording_loss)
    monkeypatch.setattr(accelerate.Accelerator, "backward", recording_backward)
    monkeypatch.setattr(accelerate.Accelerator, "clip_grad_norm_", recording_clip)
    steps = 2
    config = TrainConfig(
        train_batch_size=1, gradient_accumulation_steps=accumulation, max_steps=steps, save_steps=10,
        lora_r=4, learning_rate=1e-3, max_grad_norm=max_grad_norm, seed=5,
    )  # fmt: skip
    result = train_self_calibration(selfcal_data.path, smollm2_path, tmp_path, config, evaluate_loss=False)
    assert len(computed) == len(backward) == steps * accumulation
    ratios = np.array(backward) / np.array(computed)
    print(f"GA {accumulation}: backward / compute_loss = {ratios.round(6).tolist()}")
    np.testing.assert_allclose(ratios, 1.0 / accumulation, rtol=1e-6)
    logged = [entry for entry in result.summary["log_history"] if "loss" in entry]
    windows = np.array(computed).reshape(steps, accumulation).mean(axis=1)
    np.testing.assert_allclose([entry["loss"] for entry in logged], windows, rtol=1e-5)
    # Trainer measures the norm through clip_grad_norm_ even without clipping, with max_norm = inf
    assert clipped == ([max_grad_norm] * steps if max_grad_norm > 0 else [float("inf")] * steps)
    assert all(entry["grad_norm"] > 0 for entry in logged)
    expected_lr = [1e-3 * method_lr_factor(s, steps * accumulation) for s in range(steps)]
    np.testing.assert_allclose([entry["learning_rate"] for entry in logged], expected_lr, rtol=1e-6)


# Every setting away from its default and from every other one, so a setting read from a sibling shows.
DISTINCT = dict(
    lora_r=7, lora_alpha=3, lora_dropout=0.125, target_modules=("k_proj", "o_proj"), learning_rate=1.5e-4,
    lr_scheduler_type="linear", warmup_steps=2, weight_decay=0.03, max_grad_norm=0.7, train_batch_size=9,
    gradient_accumulation_steps=5, epochs=2.5, max_steps=11, save_steps=6, save_total_limit=8,
    logging_steps=4, seed=13,
)  # fmt: skip


def test_the_adapter_takes_each_lora_setting_of_the_config():
    """``lora_config`` (what ``train_self_calibration`` hands to ``get_peft_model``): rank from ``lora_r``,
    scale from ``lora_alpha``, dropout, modules, a causal-LM task; the method's 32 / 16 / 0.05 / q, v by
    default. Fast: peft's config only, no model."""
    from analysis.self_calibration.train import lora_config

    lora = lora_config(TrainConfig(**DISTINCT))
    assert (lora.r, lora.lora_alpha, lora.lora_dropout) == (7, 3, 0.125)
    assert set(lora.target_modules) == {"k_proj", "o_proj"} and lora.task_type == "CAUSAL_LM"
    default = lora_config(TrainConfig())
    assert (default.r, default.lora_alpha, default.lora_dropout) == (32, 16, 0.05)
    assert set(default.target_modules) == {"q_proj", "v_proj"}


@pytest.mark.parametrize("method_schedule", [True, False])
def test_the_trainer_takes_each_optimisation_setting_of_the_config(tmp_path, method_schedule):
    """``training_arguments``: each ``TrainConfig`` setting reaches its ``TrainingArguments`` field (the
    seed as the data seed too); the schedule is ``constant`` when the method's cosine runs in the trainer,
    the config's own otherwise."""
    from analysis.self_calibration.train import training_arguments

    arguments = training_arguments(TrainConfig(**DISTINCT), tmp_path / "checkpoints", method_schedule)
    assert arguments.output_dir == str(tmp_path / "checkpoints")
    assert (arguments.per_device_train_batch_size, arguments.gradient_accumulation_steps) == (9, 5)
    assert (arguments.learning_rate, arguments.weight_decay, arguments.max_grad_norm) == (1.5e-4, 0.03, 0.7)
    assert (arguments.warmup_steps, arguments.num_train_epochs, arguments.max_steps) == (2, 2.5, 11)
    assert (arguments.logging_steps, arguments.save_steps, arguments.save_total_limit) == (4, 6, 8)
    assert (arguments.seed, arguments.data_seed) == (13, 13)
    assert arguments.lr_scheduler_type == ("constant" if method_schedule else "linear")
    assert arguments.save_strategy == "steps" and arguments.optim == "adamw_torch"
    assert arguments.report_to == [] and arguments.remove_unused_columns is False  # the rows keep "lm"
    assert arguments.dataloader_num_workers == 0


def test_training_seeds_transformers_with_the_configs_seed(monkeypatch, tmp_path):
    """``train_self_calibration`` seeds Python's, numpy's and torch's generators (transformers' ``set_seed``:
    the adapter's initial weights, dropout) with ``config.seed`` before anything random happens; every other
    setting is distinct from it. The run stops at its next step, loading a tokenizer from a folder that
    does not exist (no model loads); the generators' states are read against generators seeded here, then
    put back."""
    import random

    import numpy as np
    import torch

    from analysis.self_calibration import train as train_module

    saved = random.getstate(), np.random.get_state(), torch.random.get_rng_state()
    monkeypatch.setattr(train_module, "read_training_data", lambda data: [])
    config = TrainConfig(seed=7, max_length=333, lora_r=5, lora_alpha=11, loss_eval_examples=13)
    try:
        with pytest.raises(OSError):
            train_module.train_self_calibration(
                tmp_path / "data", tmp_path / "no_model", tmp_path / "out", config
            )
        assert torch.initial_seed() == 7
        assert random.random() == random.Random(7).random()
        assert np.random.random() == np.random.RandomState(7).random_sample()
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
        torch.random.set_rng_state(saved[2])


@pytest.mark.parametrize("method_schedule", [True, False])
def test_the_trainer_gets_the_configs_loss_weights_and_the_epochs_micro_batches(
    monkeypatch, tiny_smollm2_path, tmp_path, method_schedule
):
    """``train_self_calibration`` hands its trainer the smooth-L1 ``beta`` from ``smooth_l1_beta``, the
    causal-LM weight from ``lm_weight`` and the epoch plan's micro-batch count for the method's cosine (None
    when the config's own schedule runs), each distinct from every other setting. Fast: a random-weight
    2-layer model of SmolLM2's architecture, twelve synthetic tuples, and a trainer that records its
    arguments and stops the run."""
    from analysis.self_calibration import train as train_module
    from analysis.self_calibration.train_config import METHOD_SCHEDULE

    model = tiny_smollm2_path
    monkeypatch.setattr(
        train_module, "read_training_data", lambda data: [{"question_id": f"q{i}"} for i in range(12)]
    )
    monkeypatch.setattr(train_module, "encode_tuples", lambda tuples, tok, length: _synthetic_examples(12, 2))
    given = {}

    class Stop(Exception):
        pass

    class Recorder:
        def __init__(self, **kwargs):
            given.update(kwargs)
            raise Stop

    monkeypatch.setattr(train_module, "_trainer_class", lambda: Recorder)
    config = TrainConfig(
        smooth_l1_beta=0.375, lm_weight=2.5, seed=7, train_batch_size=3, gradient_accumulation_steps=2,
        max_steps=5, lr_scheduler_type=METHOD_SCHEDULE if method_schedule else "linear",
    )  # fmt: skip
    with pytest.raises(Stop):
        train_module.train_self_calibration(
            tmp_path / "data", model, tmp_path / "out", config, evaluate_loss=False
        )
    assert (given["beta"], given["lm_weight"]) == (0.375, 2.5)
    # the method's cosine runs over max_steps x accumulation = 5 x 2 micro-batches
    assert given["micro_batches"] == (10 if method_schedule else None)


def test_the_method_schedule_ramps_then_follows_the_cosine_over_micro_batches(tmp_path):
    """The trainer's ``create_optimizer_and_scheduler`` makes the method's scheduler (not None, so the
    learning rate moves): a linear warm-up over 2 steps, then ``lr (1 + cos(pi s / 8))`` / 2 over the 8
    micro-batches, not over the 4 optimisation steps the trainer asks for. Fast: a ``torch.nn.Linear``,
    no language model."""
    import math

    import torch

    from analysis.self_calibration.train import _trainer_class, training_arguments

    config = TrainConfig(learning_rate=0.1, warmup_steps=2)
    arguments = training_arguments(config, tmp_path / "checkpoints", method_schedule=True)
    trainer = _trainer_class()(
        model=torch.nn.Linear(2, 1), args=arguments, beta=0.25, lm_weight=0.1, micro_batches=8
    )
    trainer.create_optimizer_and_scheduler(num_training_steps=4)
    rates = []
    for _ in range(6):
        rates.append(trainer.optimizer.param_groups[0]["lr"])
        trainer.optimizer.step()
        trainer.lr_scheduler.step()
    cosine = [(1 + math.cos(math.pi * s / 8)) / 2 for s in range(6)]
    ramp = [0.0, 0.5, 1.0, 1.0, 1.0, 1.0]  # step / warmup_steps while below 2
    assert rates == pytest.approx([0.1 * r * c for r, c in zip(ramp, cosine, strict=True)], rel=1e-12)
    assert rates[4] == pytest.approx(0.05)  # half-way through the 8 micro-batches


def test_the_summary_counts_confidence_and_lm_examples_each_from_its_own_draw(tiny_smollm2_path, tmp_path):
    """``training.json`` counts the drawn confidence examples under ``confidence_examples`` and the
    causal-LM ones under ``lm_examples`` (4 and 2 here, so reading one for the other shows). Fast: one
    optimisation step of a random-weight 2-layer model of SmolLM2's architecture on four hand-written tuples;
    the data file, the encoding, the epoch plan, the adapter and the trainer are the real ones."""
    from analysis.self_calibration.train import train_self_calibration

    lines = []
    for i in range(4):  # one question each; targets 0, 0.25, 0.5, 0.75 (four buckets); causal-LM on 0 and 2
        response = f"{i} + {i} = {2 * i}."
        context = f"Question: what is {i} + {i}?\nAnswer: {response}\nIs the answer correct? (Yes/No)"
        start = context.index(response)
        lines.append(
            {
                "question_id": f"q{i}", "task": "toy", "response_index": 0, "context": context,
                "yes_text": " Yes", "response": response, "response_start": start,
                "response_end": start + len(response), "extracted_answer": str(2 * i), "confidence": None,
                "ssc": i / 4, "lm_loss": i % 2 == 0, "correct": True,
            }
        )  # fmt: skip
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    config = TrainConfig(
        validation_fraction=0.0, train_batch_size=1, gradient_accumulation_steps=1, max_steps=1, save_steps=1
    )
    result = train_self_calibration(data, tiny_smollm2_path, tmp_path / "out", config, evaluate_loss=False)
    # no budget: cap = ceil(4 / 21) = 1 per bucket, four buckets -> 4 confidence examples; budget
    # ceil(4 / 0.3) = 14, floor(14 * 0.7) = 9 >= the 2 causal-LM tuples -> both drawn
    summary = result.summary
    assert (summary["confidence_examples"], summary["lm_examples"]) == (4, 2)
    assert summary["confidence_examples_distinct"] == 4 and summary["examples_per_epoch"] == 6
    written = json.loads((tmp_path / "out" / "training.json").read_text(encoding="utf-8"))
    assert (written["confidence_examples"], written["lm_examples"]) == (4, 2)
