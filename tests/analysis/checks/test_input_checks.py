"""``analysis.checks.input_checks``: a chat model without its chat template on capcal's chat prompts is
refused; a ``repeats`` that leaves analyses out is named, with what it leaves out. Real checkpoints
(SmolLM2-Instruct has a chat template, Gemma-3-270M base has none) and capcal's real task configs."""

from __future__ import annotations

import json

import pytest

from analysis.checks.input_checks import (
    CONSISTENCY_MIN_K,
    chat_template_problem,
    checkpoint_has_chat_template,
    expects_chat_template,
    repeats_notices,
)
from analysis.report.registry import EstimatorContext
from capcal_tasks.task_manager import CapcalTaskManager


@pytest.fixture(scope="module")
def configs() -> dict[str, dict]:
    manager = CapcalTaskManager(include_defaults=False)
    names = ["capcal_arithmetic", "capcal_arithmetic_qa", "capcal_arithmetic_verbalized", "capcal_gsm8k"]
    names += ["capcal_arithmetic_calibration", "capcal_arithmetic_ptrue"]
    return manager.task_configs(names)


@pytest.fixture(scope="module")
def gemma3_path():
    from capcal_models.prepare import prepare_model

    return prepare_model("gemma3-270m").path


def test_the_chat_template_is_read_from_the_checkpoint_files(smollm2_path, gemma3_path, tmp_path):
    assert checkpoint_has_chat_template(smollm2_path) is True
    assert checkpoint_has_chat_template(gemma3_path) is False
    assert checkpoint_has_chat_template("HuggingFaceTB/SmolLM2-135M-Instruct") is None  # a hub id: unknown
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    assert checkpoint_has_chat_template(tmp_path) is True
    (tmp_path / "tokenizer_config.json").write_text("{not json")
    assert checkpoint_has_chat_template(tmp_path) is None


def test_capcal_tasks_expect_a_chat_template_except_the_base_model_prompt_variants(configs):
    expecting = {name for name, config in configs.items() if expects_chat_template(config)}
    assert expecting == set(configs) - {"capcal_arithmetic_qa"}  # it declares capcal_questions_of
    assert not expects_chat_template({"task": "gsm8k", "metadata": {"version": 3}})  # lm-eval's own


def test_a_chat_model_without_its_template_is_refused_with_both_ways_out(configs, smollm2_path, gemma3_path):
    chat = {"pretrained": str(smollm2_path)}
    problem = chat_template_problem(chat, {"capcal_arithmetic": configs["capcal_arithmetic"]}, False)
    assert problem == (
        f"{smollm2_path} is a chat model (its tokenizer has a chat template) and the prompts of "
        "capcal_arithmetic are written for a chat template: add --apply_chat_template (without it such a "
        "model may answer nothing at all), or --plain_prompts to run the plain prompts anyway"
    )
    assert chat_template_problem(chat, configs, True) is None
    assert chat_template_problem(chat, configs, "chatml") is None  # a named template
    assert chat_template_problem(chat, configs, False, plain_prompts=True) is None
    base_prompts = {"capcal_arithmetic_qa": configs["capcal_arithmetic_qa"]}
    assert chat_template_problem(chat, base_prompts, False) is None
    assert chat_template_problem({"pretrained": str(gemma3_path)}, configs, False) is None
    # the tokenizer argument wins over the checkpoint
    mixed = {"pretrained": str(gemma3_path), "tokenizer": str(smollm2_path)}
    shown = "capcal_arithmetic, capcal_arithmetic_calibration, capcal_arithmetic_ptrue and 2 more"
    assert chat_template_problem(mixed, configs, False).startswith(
        f"{smollm2_path} is a chat model (its tokenizer has a chat template) and the prompts of {shown} are"
    )


def test_consistency_needs_k_above_the_smallest_k_of_the_estimator():
    """The registry scores k' in consistency_ks strictly below n: the smallest n with a value is min + 1."""
    assert CONSISTENCY_MIN_K == min(EstimatorContext.__dataclass_fields__["consistency_ks"].default) + 1


@pytest.mark.parametrize(
    ("repeats", "expected"),
    [
        (None, []),
        (16, []),
        (CONSISTENCY_MIN_K, []),
        (
            1,
            [
                "--repeats 1 on capcal_arithmetic, capcal_arithmetic_calibration, capcal_arithmetic_qa and 1 "
                "more: with one response per question mu_hat is 0 or 1, so capability calibration is only "
                "response calibration; the consistency estimator "
                f"(k >= {CONSISTENCY_MIN_K}), pass@k for k > 1 and majority vote will be missing; use "
                "--repeats 16 (the tasks' default)"
            ],
        ),
        (
            CONSISTENCY_MIN_K - 1,
            [
                f"--repeats {CONSISTENCY_MIN_K - 1} on capcal_arithmetic, capcal_arithmetic_calibration, "
                "capcal_arithmetic_qa and 1 more: the consistency estimator needs k >= "
                f"{CONSISTENCY_MIN_K} and will be missing, and mu_hat takes only {CONSISTENCY_MIN_K} values; "
                "use --repeats 16 (the tasks' default)"
            ],
        ),
    ],
)
def test_repeats_below_what_the_analyses_need_is_named(configs, repeats, expected):
    assert repeats_notices(repeats, configs) == expected


def test_repeats_on_tasks_that_do_not_sample_k_responses_has_no_effect(configs):
    confidence_only = {
        name: configs[name] for name in ("capcal_arithmetic_verbalized", "capcal_arithmetic_ptrue")
    }
    assert repeats_notices(4, confidence_only) == [
        "--repeats 4 has no effect: none of the tasks samples k responses per question"
    ]
