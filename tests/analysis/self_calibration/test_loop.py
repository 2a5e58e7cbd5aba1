"""The whole loop on the real SmolLM2 at a tiny size: a changed setting retrains (and redoes every step after
training), a tampered output is not reused, ``--reuse strict`` stops with one line, and the comparison names
the training settings and both models' identities."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.self_calibration.fingerprint import read_step_record
from analysis.self_calibration.loop import LoopSettings, run_self_calibration_loop
from analysis.self_calibration.train import TrainConfig

STEPS = [
    "sample train", "check train", "sample eval", "check eval", "data", "train", "resample eval",
    "recheck eval", "compare",
]  # fmt: skip
AFTER_TRAINING = ["train", "resample eval", "recheck eval", "compare"]
LOOP = dict(train_repeats=3, repeats=2, limit=3, max_gen_toks=8, resamples=50, batch_size=16)
TRAINING = dict(gradient_accumulation_steps=2, max_steps=2, save_steps=1, lora_r=4)
CLI = ["--model", "smollm2", "--train_repeats", "3", "--repeats", "2", "--limit", "3", "--max_gen_toks", "8",
       "--resamples", "50", "--batch_size", "16", "--gradient_accumulation_steps", "2", "--max_steps", "2",
       "--save_steps", "1", "--lora_r", "4"]  # fmt: skip


def _loop(output: Path, **training):
    return run_self_calibration_loop(output, LoopSettings(**LOOP), TrainConfig(**{**TRAINING, **training}))


@pytest.fixture(scope="module")
def first_loop(smollm2_path, tmp_path_factory):
    output = tmp_path_factory.mktemp("selfcal_loop")
    return output, _loop(output)


@pytest.mark.slow
def test_a_changed_setting_retrains_and_redoes_every_later_step(first_loop):
    output, first = first_loop
    assert first.reused == []
    results = json.loads(next((output / "before" / "train_sample").glob("*/results_*.json")).read_text())
    assert results["configs"]["capcal_arithmetic_train"]["generation_kwargs"]["temperature"] == 0.8
    again = _loop(output)
    assert again.reused == STEPS  # nothing changed: nothing runs
    changed = _loop(output, learning_rate=3e-4)
    assert changed.reused == STEPS[:5]  # the model's settings changed: it and every step after it ran again
    training = json.loads((output / "train" / "training.json").read_text())
    assert training["config"]["learning_rate"] == 3e-4
    assert read_step_record(output / "train")["settings"]["learning_rate"] == 3e-4
    comparison = json.loads((output / "compare" / "comparison.json").read_text())
    assert comparison["settings"]["training"]["config"]["learning_rate"] == 3e-4
    from capcal_models.model_identity import checkpoint_fingerprint

    after_id = checkpoint_fingerprint(output / "train" / "merged")
    assert comparison["settings"]["after"]["model_identity"] == after_id
    assert comparison["settings"]["training"]["trained_model"] == after_id
    assert comparison["settings"]["before"]["model_identity"] != after_id
    for name in ("after/eval_sample", "after/eval_selfcheck"):  # the after runs are of the retrained model
        assert read_step_record(output / name)["inputs"]["model"] == after_id
    report = (output / "compare" / "report.md").read_text()
    assert "| learning_rate | 0.0003 |" in report and after_id in report
    loop = json.loads((output / "loop.json").read_text())
    assert loop["train_config"]["learning_rate"] == 3e-4 and loop["trained_model_identity"] == after_id


@pytest.mark.slow
def test_a_tampered_output_is_not_reused_and_strict_stops(first_loop, capsys):
    from analysis.cli import main

    output, _ = first_loop
    samples = next((output / "before" / "eval_selfcheck").glob("*/samples_*.jsonl"))
    lines = samples.read_text().splitlines()
    record = json.loads(lines[0])
    record["p_yes"] = [0.999 for _ in record["p_yes"]]  # an edited confidence
    lines[0] = json.dumps(record)
    samples.write_text("\n".join(lines) + "\n")
    settings = json.loads((output / "loop.json").read_text())["train_config"]
    arguments = ["selfcal", "run", "--output_dir", str(output), *CLI]
    arguments += ["--learning_rate", str(settings["learning_rate"])]
    code = main([*arguments, "--reuse", "strict"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "step 'check eval'" in err[0] and "modified after" in err[0]
    result = _loop(output, learning_rate=settings["learning_rate"])
    assert "check eval" not in result.reused and "compare" not in result.reused
    assert {"sample train", "check train", "sample eval", "train", "resample eval"} <= set(result.reused)
    rewritten = next((output / "before" / "eval_selfcheck").glob("*/samples_*.jsonl"))
    assert json.loads(rewritten.read_text().splitlines()[0])["p_yes"] != record["p_yes"]
    capsys.readouterr()  # the re-run's lm-eval logs
    code = main([*arguments, "--lora_r", "8", "--reuse", "strict"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "step 'train'" in err[0] and "setting lora_r" in err[0]
    assert json.loads((output / "train" / "training.json").read_text())["config"]["lora_r"] == 4


@pytest.mark.parametrize(
    ("per_level", "train_per_level", "metadata"),
    [
        (3, 7, {"arithmetic_per_level": 3, "arithmetic_train_per_level": 7}),
        (3, None, {"arithmetic_per_level": 3}),
        (None, 7, {"arithmetic_train_per_level": 7}),
        (None, None, {}),
    ],
)
def test_the_question_counts_reach_the_runs_metadata_each_under_its_own_key(
    tmp_path, monkeypatch, per_level, train_per_level, metadata
) -> None:
    """The held-out and the training questions per level are two settings of graded arithmetic, each passed
    to the loop's lm-eval runs under its own metadata key and only when set (the task's defaults otherwise).
    The loop is stopped where its runs are set up (no model runs)."""
    from analysis.self_calibration import loop

    class Stop(Exception):
        pass

    received = []

    def model_steps(settings, train_task, given):
        received.append((train_task, dict(given)))
        raise Stop

    monkeypatch.setattr(loop, "_ModelSteps", model_steps)
    settings = LoopSettings(per_level=per_level, train_per_level=train_per_level, seed=11)
    with pytest.raises(Stop):
        run_self_calibration_loop(tmp_path / "loop", settings)
    assert received == [("capcal_arithmetic_train", metadata)]
