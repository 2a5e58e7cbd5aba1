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


def test_each_step_passes_the_loops_settings_to_its_lm_eval_run(tmp_path, monkeypatch) -> None:
    """The loop's sampling and self-check runs get every setting of the loop, each under its own argument
    (the metadata, the seeds, the batch size, the data folder, the sample cache, the questions), every
    setting distinct from the others and from its default. ``evaluate`` is stood in for (no model runs)."""
    import analysis.evaluation
    from analysis.self_calibration.loop import _ModelSteps

    calls: list[tuple[str, list, dict]] = []
    monkeypatch.setattr(
        analysis.evaluation, "evaluate", lambda model, tasks, **kwargs: calls.append((model, tasks, kwargs))
    )
    settings = LoopSettings(
        seed=77, batch_size=5, data_dir="/data/here", sample_cache=False, limit=9, max_gen_toks=21,
        train_temperature=0.6, train_docs=[4, 2], eval_docs=[3], sampler="capcal-hf", checker="hf",
    )  # fmt: skip
    steps = _ModelSteps(settings, "capcal_arithmetic_train", {"arithmetic_per_level": 3})
    model = tmp_path / "model"
    model.mkdir()  # no tokenizer files: no chat template
    steps.sample(model, steps.sampling("capcal_arithmetic_train", 6), tmp_path / "a")
    steps.sample(model, steps.sampling("capcal_arithmetic", 4), tmp_path / "b")
    steps.check(model, "capcal_arithmetic_selfcheck", tmp_path / "a" / "samples.jsonl", tmp_path / "c")
    seeds = {"random_seed": 77, "numpy_random_seed": 77, "torch_random_seed": 77, "fewshot_random_seed": 77}
    shared = {"data_dir": "/data/here", "batch_size": 5, "apply_chat_template": False, "log_samples": True}
    (
        (train_model, train_tasks, train),
        (eval_model, eval_tasks, held_out),
        (check_model, check_tasks, check),
    ) = calls
    assert (train_model, train_tasks) == ("capcal-hf", ["capcal_arithmetic_train"])
    assert train == {
        "model_args": {"pretrained": str(model), "sample_cache": False}, "repeats": 6,
        "metadata": {"arithmetic_per_level": 3}, "output_path": tmp_path / "a", "limit": 9,
        "gen_kwargs": {"max_gen_toks": 21, "temperature": 0.6},
        "samples": {"capcal_arithmetic_train": [4, 2]},
        **shared, **seeds,
    }  # fmt: skip
    assert (eval_model, eval_tasks) == ("capcal-hf", ["capcal_arithmetic"])
    assert held_out["gen_kwargs"] == {"max_gen_toks": 21}  # the held-out questions at the task's temperature
    assert held_out["samples"] == {"capcal_arithmetic": [3]} and held_out["repeats"] == 4
    assert (check_model, check_tasks) == ("hf", ["capcal_arithmetic_selfcheck"])
    assert check == {
        "model_args": {"pretrained": str(model)}, "output_path": tmp_path / "c",
        "metadata": {"arithmetic_per_level": 3, "samples_file": str(tmp_path / "a" / "samples.jsonl")},
        **shared, **seeds,
    }  # fmt: skip


@pytest.mark.parametrize("template_file", ["chat_template.jinja", "tokenizer_config.json", None])
def test_each_step_applies_the_chat_template_exactly_when_the_model_has_one(
    tmp_path, monkeypatch, template_file
) -> None:
    """A model folder with a chat template (its own ``chat_template.jinja``, or one in
    ``tokenizer_config.json``) is sampled and self-checked with it; one without, plain (``evaluate`` stood in
    for)."""
    import json

    import analysis.evaluation
    from analysis.self_calibration.loop import _ModelSteps

    calls: list[dict] = []
    monkeypatch.setattr(analysis.evaluation, "evaluate", lambda model, tasks, **kwargs: calls.append(kwargs))
    model = tmp_path / "model"
    model.mkdir()
    (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": None}), encoding="utf-8")
    if template_file == "chat_template.jinja":
        (model / template_file).write_text("{{ messages }}", encoding="utf-8")
    elif template_file == "tokenizer_config.json":
        (model / template_file).write_text(json.dumps({"chat_template": "{{ messages }}"}), encoding="utf-8")
    steps = _ModelSteps(LoopSettings(), "capcal_arithmetic_train", {})
    steps.sample(model, steps.sampling("capcal_arithmetic", 4), tmp_path / "a")
    steps.check(model, "capcal_arithmetic_selfcheck", tmp_path / "a" / "samples.jsonl", tmp_path / "c")
    assert [call["apply_chat_template"] for call in calls] == [template_file is not None] * 2


def test_the_loops_settings_refuse_a_temperature_that_does_not_sample_and_an_unknown_reuse_mode() -> None:
    """``train_temperature`` must be above 0 (0 is greedy decoding: the N training responses would be one
    response N times); None (the task's own) and any positive value are taken. ``reuse`` is "auto" or
    "strict"."""
    for temperature in (0, 0.0, -0.5):
        with pytest.raises(
            ValueError, match=rf"^train_temperature must be > 0 \(sampling\), got {temperature!r}$"
        ):
            LoopSettings(train_temperature=temperature)
    for temperature in (None, 1e-6, 0.8, 2.0):
        assert LoopSettings(train_temperature=temperature).train_temperature == temperature
    assert LoopSettings(reuse="strict").reuse == "strict"
    with pytest.raises(ValueError, match=r"^reuse must be one of auto, strict, got 'always'$"):
        LoopSettings(reuse="always")
