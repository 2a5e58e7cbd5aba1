"""The run-plan checks of issue 47, made before a model loads: greedy decoding with k > 1, few-shot examples
without a few-shot split, a sample cache that cannot be written, and a run without ``--log_samples``.

The task configs are capcal's own (``CapcalTaskManager.task_configs``, no dataset loaded); lm-eval's own
``normalize_gen_kwargs`` is the oracle of the greedy rule."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from analysis.checks.greedy_decoding import greedy_reason, greedy_repeats_problem, greedy_run_warning
from analysis.checks.input_checks import fewshot_problem, log_samples_notice, sample_cache_problem

ARITHMETIC = ["capcal_arithmetic", "capcal_arithmetic_qa", "capcal_arithmetic_calibration"]
NO_FEWSHOT_SPLIT = [
    "capcal_arithmetic_train",
    "capcal_gsm8k",
    "capcal_aime25",
    "capcal_math500",
    "capcal_arithmetic_verbalized",
    "capcal_gsm8k_ptrue",
    "capcal_arithmetic_selfcheck",
]


@pytest.fixture(scope="module")
def configs() -> dict[str, dict]:
    from capcal_tasks.task_manager import task_manager_for

    manager, names = task_manager_for([*ARITHMETIC, *NO_FEWSHOT_SPLIT, "capcal_mmlu_calibration"])
    return manager.task_configs(names)


# ---------------------------------------------------------------- greedy decoding


SETTINGS = [
    {},
    {"temperature": 0},
    {"temperature": 0.0, "do_sample": True},
    {"temperature": 0.7},
    {"temperature": 0.7, "do_sample": True},
    {"temperature": 0.7, "do_sample": False},
    {"do_sample": False},
    {"do_sample": True, "temperature": 1.0, "top_p": 1.0},
    {"do_sample": "false", "temperature": 1.0},
    {"max_gen_toks": 16},
]


@pytest.mark.parametrize("setting", SETTINGS, ids=str)
def test_the_greedy_rule_is_lm_evals(setting):
    """lm-eval decodes greedily where ``normalize_gen_kwargs`` leaves ``do_sample`` false or temperature 0."""
    from lm_eval.models.utils import normalize_gen_kwargs

    oracle = dict(setting)
    if isinstance(oracle.get("do_sample"), str):
        oracle["do_sample"] = oracle["do_sample"] == "true"
    normalized = normalize_gen_kwargs(oracle)
    greedy = not normalized["do_sample"] or float(normalized.get("temperature", 1.0)) == 0.0
    assert (greedy_reason(setting) is not None) == greedy


def test_greedy_reasons_name_the_setting():
    assert greedy_reason({"do_sample": True, "temperature": 0}) == "temperature=0"
    assert greedy_reason({"do_sample": False, "temperature": 0.7}) == "do_sample=False"
    assert greedy_reason({"do_sample": True, "temperature": 0.7, "top_k": 1}) == "top_k=1"
    assert greedy_reason({}) == "no temperature and no do_sample (lm-eval then decodes greedily)"
    # an engine whose requests carry temperature 0 when none is set (lm-eval's API payloads)
    assert (
        greedy_reason({"do_sample": True}, "capcal-api") == "no temperature (capcal-api sends temperature 0)"
    )
    assert greedy_reason({"do_sample": True}, "capcal-hf") is None


def test_temperature_zero_with_repeats_is_refused_with_the_fix(configs):
    arithmetic = {name: configs[name] for name in ["capcal_arithmetic"]}
    assert greedy_repeats_problem(arithmetic, 8, {"temperature": 0, "max_gen_toks": 16}, "capcal-hf") == (
        "greedy decoding with k = 8 responses per question on capcal_arithmetic: temperature=0, so the k "
        "responses are one response repeated (mu_hat only 0 or 1, nothing to calibrate); drop temperature=0 "
        "from --gen_kwargs (capcal_arithmetic samples at temperature 0.7), or run --repeats 1"
    )
    # the task's own k (16) when --repeats is not given; do_sample=False the same
    problem = greedy_repeats_problem(arithmetic, None, {"do_sample": False}, "hf")
    assert problem.startswith(
        "greedy decoding with k = 16 responses per question on capcal_arithmetic: do_sample"
    )
    assert "drop do_sample=False from --gen_kwargs" in problem


def test_greedy_with_one_response_or_sampling_settings_passes(configs):
    sampling = {name: configs[name] for name in ARITHMETIC}
    assert greedy_repeats_problem(sampling, 1, {"temperature": 0}) is None  # one greedy response: fine
    assert greedy_repeats_problem(sampling, 8, {"temperature": 0.5, "max_gen_toks": 8}) is None
    assert greedy_repeats_problem(sampling, None, None) is None
    # confidence tasks ask once per question: greedy is what they are meant to do
    confidence = {name: configs[name] for name in ["capcal_arithmetic_verbalized", "capcal_gsm8k_ptrue"]}
    assert greedy_repeats_problem(confidence, 8, {"temperature": 0}) is None


def test_a_task_that_is_greedy_by_itself_with_repeats_is_refused():
    """A user's task (YAML) with ``repeats`` and lm-eval's greedy default: the fix is to sample."""
    own = {"task": "my_task", "output_type": "generate_until", "repeats": 4,
           "generation_kwargs": {"until": ["\n"], "do_sample": False}}  # fmt: skip
    assert greedy_repeats_problem({"my_task": own}) == (
        "greedy decoding with k = 4 responses per question on my_task: do_sample=False, so the k responses "
        "are one response repeated (mu_hat only 0 or 1, nothing to calibrate); add --gen_kwargs "
        "do_sample=true,temperature=1.0 (or another temperature > 0) to sample, or run --repeats 1"
    )
    unset = {**own, "generation_kwargs": {"until": ["\n"]}}
    assert "no temperature and no do_sample" in greedy_repeats_problem({"my_task": unset})
    assert greedy_repeats_problem({"my_task": {**own, "repeats": 1}}) is None
    assert greedy_repeats_problem({"my_task": {**own, "output_type": "multiple_choice"}}) is None


def test_a_greedy_run_on_disk_is_warned_of_only_with_k_above_one():
    config = {"output_type": "generate_until", "generation_kwargs": {"do_sample": True, "temperature": 0}}
    assert greedy_run_warning("capcal_arithmetic", "smollm2", config, 8) == (
        "capcal_arithmetic (smollm2) was decoded greedily (temperature=0 in the results file's "
        "generation_kwargs) with k = 8: its k responses per question are one response repeated, so mu_hat is "
        "only 0 or 1 and no estimator can be judged on it (no verdict); run it again with sampling (the "
        "task's own generation_kwargs, without temperature=0 or do_sample=false)"
    )
    assert greedy_run_warning("capcal_arithmetic", "smollm2", config, 1) is None
    sampled = {"generation_kwargs": {"do_sample": True, "temperature": 0.7}}
    assert greedy_run_warning("capcal_arithmetic", "smollm2", sampled, 8) is None
    assert greedy_run_warning("capcal_arithmetic", "smollm2", {}, 8) is None  # nothing recorded: nothing said


# ---------------------------------------------------------------- few-shot


def test_fewshot_without_a_fewshot_split_is_refused(configs):
    chosen = {
        name: configs[name] for name in ["capcal_gsm8k", "capcal_arithmetic", "capcal_arithmetic_train"]
    }
    assert fewshot_problem(2, chosen) == (
        "--num_fewshot 2: capcal_arithmetic_train, capcal_gsm8k have no few-shot split, so lm-eval would "
        "draw the examples from the evaluation questions themselves; run without --num_fewshot (capcal's "
        "prompts are zero-shot; capcal_arithmetic and capcal_arithmetic_qa take examples from their train "
        "split)"
    )
    everything = fewshot_problem(1, configs)
    for name in NO_FEWSHOT_SPLIT[:3]:
        assert name in everything or "more" in everything


def test_fewshot_from_a_disjoint_split_or_zero_shot_passes(configs):
    arithmetic = {name: configs[name] for name in ARITHMETIC}
    assert fewshot_problem(3, arithmetic) is None  # the train split, disjoint from test
    assert fewshot_problem(0, configs) is None and fewshot_problem(None, configs) is None
    # a split named but equal to the evaluation split is the evaluation split
    same = {**configs["capcal_arithmetic"], "fewshot_split": "test"}
    assert "have no few-shot split" in fewshot_problem(1, {"a": same, "b": same})
    # lm-eval's own tasks are not capcal's to refuse
    assert fewshot_problem(5, {"gsm8k": {"task": "gsm8k", "test_split": "test"}}) is None
    # examples given in the task's own fewshot_config (no split at all) are a few-shot source; in another key
    # of the config (its metadata) they are not
    gsm8k = {key: value for key, value in configs["capcal_gsm8k"].items() if key != "fewshot_config"}
    given = {**gsm8k, "fewshot_config": {"sampler": "first_n", "samples": [{"question": "q", "answer": "1"}]}}
    assert fewshot_problem(2, {"capcal_gsm8k": given}) is None
    elsewhere = {**gsm8k, "metadata": {**gsm8k["metadata"], "samples": [{"question": "q"}]}}
    assert "capcal_gsm8k has no few-shot split" in fewshot_problem(2, {"capcal_gsm8k": elsewhere})


def test_a_yaml_num_fewshot_counts_when_the_flag_is_not_given(configs):
    own = {**configs["capcal_gsm8k"], "num_fewshot": 4}
    assert fewshot_problem(None, {"capcal_gsm8k": own}).startswith(
        "num_fewshot (in the task's YAML): capcal_gsm8k has no few-shot split"
    )


# ---------------------------------------------------------------- the sample cache


@pytest.fixture
def read_only_home(tmp_path):
    """A CAPCAL_HOME on a read-only file system (a tmpfs remounted read-only; as root, permissions do not
    stop writes), unmounted afterwards; skipped with the reason when mounting is impossible."""
    home = tmp_path / "home"
    home.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16k,ro", "tmpfs", str(home)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip() or mounted.returncode}")
    try:
        yield home
    finally:
        subprocess.run(["umount", str(home)], check=True)


def test_a_sample_cache_on_a_read_only_home_is_refused(read_only_home, monkeypatch, tmp_path):
    monkeypatch.setenv("CAPCAL_HOME", str(read_only_home))
    expected = (
        f"the sample cache {read_only_home}/cache/hf/samples.sqlite (under CAPCAL_HOME): {read_only_home} is "
        "not writable; set CAPCAL_HOME to a writable folder, or add cache_path=FILE (a writable place) or "
        "sample_cache=false to --model_args"
    )
    assert sample_cache_problem("capcal-hf", {"pretrained": "/m"}) == expected
    assert sample_cache_problem("capcal-vllm", {}).startswith(
        f"the sample cache {read_only_home}/cache/vllm/"
    )
    assert sample_cache_problem("capcal-hf", {"sample_cache": "false"}) is None
    assert sample_cache_problem("capcal-hf", {"cache_path": str(tmp_path / "c.sqlite")}) is None
    assert sample_cache_problem("hf", {}) is None  # lm-eval's own models keep no capcal sample cache
    assert sample_cache_problem("capcal-api", {"cache_path": str(read_only_home / "c.sqlite")}) == (
        f"cache_path={read_only_home / 'c.sqlite'}: {read_only_home} is not writable; set CAPCAL_HOME to a "
        "writable folder, or add cache_path=FILE (a writable place) or sample_cache=false to --model_args"
    )


def test_a_home_under_a_file_is_refused(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("CAPCAL_HOME", str(tmp_path / "file" / "home"))
    assert f"{tmp_path / 'file'} is a file, not a folder" in sample_cache_problem("capcal-hf", {})
    monkeypatch.setenv("CAPCAL_HOME", str(tmp_path / "new"))
    assert sample_cache_problem("capcal-hf", {}) is None  # created when needed


# ---------------------------------------------------------------- --log_samples


def test_a_run_without_log_samples_is_warned_of(configs):
    chosen = {name: configs[name] for name in ["capcal_arithmetic", "capcal_gsm8k_ptrue"]}
    assert log_samples_notice(False, "out", chosen) == (
        "no --log_samples: the responses of capcal_arithmetic, capcal_gsm8k_ptrue will not be saved, and "
        "capcal check, analyze and report read nothing but them; add --log_samples to keep this run for them"
    )
    assert log_samples_notice(False, None, chosen).endswith(
        "add --log_samples --output_path DIR to keep this run for them"
    )
    assert log_samples_notice(True, "out", chosen) is None
    # the leaderboard tasks report their columns in the results file; lm-eval's tasks are not capcal's
    leaderboard = {"capcal_mmlu_calibration": configs["capcal_mmlu_calibration"], "gsm8k": {"task": "gsm8k"}}
    assert log_samples_notice(False, "out", leaderboard) is None


def test_check_inputs_refuses_and_warns_before_any_model_loads(smollm2_path, tmp_path, monkeypatch):
    """``check_inputs`` (the library behind ``capcal eval``) raises the refusals and returns the notice."""
    from analysis.evaluation import EvaluationInputError, check_inputs

    arguments = {"pretrained": str(smollm2_path)}
    common = {"apply_chat_template": True}
    checked = check_inputs("capcal-hf", "capcal_arithmetic", arguments, log_samples=False, **common)
    assert [n for n in checked.notices if n.startswith("no --log_samples")] == [
        log_samples_notice(False, None, {"capcal_arithmetic": checked.configs["capcal_arithmetic"]})
    ]
    with pytest.raises(EvaluationInputError, match=r"^greedy decoding with k = 6 responses per question"):
        check_inputs(
            "capcal-hf", "capcal_arithmetic", arguments, repeats=6, gen_kwargs="temperature=0", **common
        )
    with pytest.raises(EvaluationInputError, match=r"^--num_fewshot 2: capcal_gsm8k has no few-shot split"):
        check_inputs("capcal-hf", "capcal_gsm8k", arguments, num_fewshot=2, data_dir="bundled", **common)
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("CAPCAL_HOME", str(tmp_path / "file" / "home"))
    with pytest.raises(EvaluationInputError, match=r"^the sample cache .*is a file, not a folder"):
        check_inputs("capcal-hf", "capcal_arithmetic", arguments, **common)
    assert os.environ["CAPCAL_HOME"].endswith("home")
    assert Path(arguments["pretrained"]).is_dir()
