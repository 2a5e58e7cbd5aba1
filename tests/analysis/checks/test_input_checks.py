"""``analysis.checks.input_checks``: a chat model without its chat template on capcal's chat prompts is
refused; a ``repeats`` that leaves analyses out is named, with what it leaves out. Real checkpoints
(SmolLM2-Instruct has a chat template, Gemma-3-270M base has none) and capcal's real task configs."""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path

import pytest

from analysis.checks.input_checks import (
    CONSISTENCY_MIN_K,
    chat_template_problem,
    checkpoint_has_chat_template,
    expects_chat_template,
    repeats_notices,
    writable_file_problem,
    writable_folder_problem,
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


# --- run settings, sample counts, output paths: each refusal whole, at its boundaries (mutation triage) ----


@pytest.mark.parametrize(
    ("gen_kwargs", "num_fewshot", "batch_size", "expected"),
    [
        ({"max_gen_toks": 0}, None, None, "gen_kwargs max_gen_toks=0: must be a positive integer"),
        ({"max_gen_toks": True}, None, None, "gen_kwargs max_gen_toks=True: must be a positive integer"),
        ({"max_gen_toks": 2.0}, None, None, "gen_kwargs max_gen_toks=2.0: must be a positive integer"),
        ({"max_gen_toks": None}, None, None, "gen_kwargs max_gen_toks=None: must be a positive integer"),
        ({"temperature": -0.5}, None, None, "gen_kwargs temperature=-0.5: must be a number >= 0"),
        ({"temperature": "hot"}, None, None, "gen_kwargs temperature='hot': must be a number >= 0"),
        ({"temperature": False}, None, None, "gen_kwargs temperature=False: must be a number >= 0"),
        ({"temperature": float("nan")}, None, None, "gen_kwargs temperature=nan: must be a number >= 0"),
        ({"top_p": 0}, None, None, "gen_kwargs top_p=0: must be in (0, 1]"),
        ({"top_p": 1.5}, None, None, "gen_kwargs top_p=1.5: must be in (0, 1]"),
        ({"top_p": "1"}, None, None, "gen_kwargs top_p='1': must be in (0, 1]"),
        ({"until": 3}, None, None, "gen_kwargs until=3: must be a text or a list of texts"),
        ({"until": ["a", 3]}, None, None, "gen_kwargs until=['a', 3]: must be a text or a list of texts"),
        ({"until": ("a",)}, None, None, "gen_kwargs until=('a',): must be a text or a list of texts"),
        ({}, -1, None, "num_fewshot -1: must be an integer >= 0"),
        ({}, 1.5, None, "num_fewshot 1.5: must be an integer >= 0"),
        ({}, None, 0, "batch_size 0: must be a positive integer, auto or auto:N"),
        ({}, None, "auto:0", "batch_size 'auto:0': must be a positive integer, auto or auto:N"),
        ({}, None, "08", "batch_size '08': must be a positive integer, auto or auto:N"),
        ({}, None, "auto:8x", "batch_size 'auto:8x': must be a positive integer, auto or auto:N"),
        ({}, None, " 8", "batch_size ' 8': must be a positive integer, auto or auto:N"),
        # the first bad setting in the documented order is the one named
        (
            {"max_gen_toks": 0, "temperature": -1},
            -1,
            0,
            "gen_kwargs max_gen_toks=0: must be a positive integer",
        ),
        ({"temperature": -1, "top_p": 2}, None, None, "gen_kwargs temperature=-1: must be a number >= 0"),
        ({"top_p": 2, "until": 1}, None, None, "gen_kwargs top_p=2: must be in (0, 1]"),
        ({"until": 1}, -1, 0, "gen_kwargs until=1: must be a text or a list of texts"),
        ({}, -1, 0, "num_fewshot -1: must be an integer >= 0"),
    ],
)
def test_a_bad_run_setting_is_named_whole(gen_kwargs, num_fewshot, batch_size, expected) -> None:
    from analysis.checks.input_checks import run_settings_problem

    assert run_settings_problem(None, gen_kwargs, num_fewshot, batch_size) == expected


@pytest.mark.parametrize(
    ("gen_kwargs", "num_fewshot", "batch_size"),
    [
        ({"max_gen_toks": 1, "temperature": 0, "top_p": 1, "until": "\n"}, 0, 1),
        ({"temperature": 0.7, "top_p": 1e-9, "until": []}, 5, "auto"),
        ({"until": ["a", "b"], "do_sample": True}, None, "auto:4"),
        (None, None, 16),
        ({}, None, "10"),
    ],
)
def test_good_run_settings_pass(gen_kwargs, num_fewshot, batch_size) -> None:
    from analysis.checks.input_checks import run_settings_problem

    assert run_settings_problem(None, gen_kwargs, num_fewshot, batch_size) is None


def test_an_output_path_that_cannot_hold_results_is_named(tmp_path) -> None:
    from analysis.checks.input_checks import run_settings_problem

    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    assert run_settings_problem(a_file) == f"output_path {a_file}: a file, not a folder"
    under = a_file / "out"
    assert run_settings_problem(under) == f"output_path {under}: {a_file} is a file, not a folder"
    json_under = a_file / "results.json"
    assert run_settings_problem(json_under) == f"output_path {json_under}: {a_file} is a file, not a folder"
    existing_json = tmp_path / "results.json"
    existing_json.write_text("{}")
    assert run_settings_problem(existing_json) is None  # a .json file name is a results file: allowed
    assert run_settings_problem(tmp_path / "new" / "deeper") is None
    # the output path is checked before the generation settings
    assert run_settings_problem(a_file, {"max_gen_toks": 0}) == f"output_path {a_file}: a file, not a folder"
    assert run_settings_problem(tmp_path, {"max_gen_toks": 0}) == (
        "gen_kwargs max_gen_toks=0: must be a positive integer"
    )


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder holding ``kept.json`` that cannot be written: as root (who passes permission checks), a
    tmpfs remounted read-only (skipped with the reason when mounting is impossible), else permissions 0o555;
    unmounted or restored afterwards."""
    folder = tmp_path / "read_only"
    folder.mkdir()
    if os.geteuid() != 0:
        (folder / "kept.json").write_text("{}")
        (folder / "kept.json").chmod(0o444)
        folder.chmod(0o555)
        try:
            yield folder
        finally:
            folder.chmod(0o755)
        return
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip() or mounted.returncode}")
    try:
        (folder / "kept.json").write_text("{}")
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True, capture_output=True)
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_folder_or_file_that_cannot_be_written_is_named(read_only_folder: Path, tmp_path: Path) -> None:
    """Denied by its permissions (or a read-only file system): "is not writable", told by ``os.access`` before
    any file is made there; the nearest existing folder is named for a path to be created under it; an
    existing file that cannot be written is named itself. Writable ones pass."""
    denied = f"{read_only_folder} is not writable"
    assert writable_folder_problem(read_only_folder) == denied
    assert writable_folder_problem(read_only_folder / "new" / "deeper") == denied
    assert writable_file_problem(read_only_folder / "results.json") == denied
    kept = read_only_folder / "kept.json"
    assert writable_file_problem(kept) == f"{kept} is not writable"
    writable = tmp_path / "writable.json"
    writable.write_text("{}")
    assert writable_file_problem(writable) is None and writable_file_problem(tmp_path / "new.json") is None
    assert writable_folder_problem(tmp_path / "new" / "deeper") is None
    assert writable_file_problem(tmp_path) == f"{tmp_path} is a folder, not a file"


def test_repeats_and_sample_counts_are_refused_above_their_limits_only() -> None:
    from analysis.checks.input_checks import (
        MAX_REPEATS,
        MAX_SAMPLES,
        repeats_problem,
        sample_count_problem,
        sample_plan_line,
    )

    assert repeats_problem(None) is None and repeats_problem(MAX_REPEATS) is None
    assert repeats_problem(MAX_REPEATS + 1, allow_large=True) is None
    assert repeats_problem(MAX_REPEATS + 1) == (
        f"--repeats {MAX_REPEATS + 1} is above 1000 responses per question (mu_hat's standard error is "
        "already at most 0.016 at k = 1000); add --allow_large if you mean it"
    )
    rows = [("a", 300, 1000), ("b", 200, 1000)]  # exactly MAX_SAMPLES
    assert sum(q * k for _, q, k in rows) == MAX_SAMPLES and sample_count_problem(rows) is None
    over = [("a", 300, 1000), ("b", 201, 1000)]
    assert sample_count_problem(over, allow_large=True) is None
    assert sample_count_problem(over) == (
        "this run would draw 501,000 responses, above 500,000 (a paper-scale run; about 10 hours on a 2-core "
        "CPU); lower --repeats or --limit, or add --allow_large if you mean it"
    )
    assert sample_plan_line(rows) == (
        "will draw 500,000 responses (a: 300 questions x k = 1000, b: 200 questions x k = 1000)"
    )


def test_planned_samples_cut_the_documents_as_lm_eval_does() -> None:
    """Real loaded tasks (capcal_arithmetic: 80 test questions, k = 16; its P(True) task: k = 1)."""
    from lm_eval.tasks import get_task_dict

    from analysis.checks.input_checks import planned_samples

    manager = CapcalTaskManager(include_defaults=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # lm-eval 0.4.13 deprecates get_task_dict
        tasks = get_task_dict(["capcal_arithmetic", "capcal_arithmetic_ptrue"], manager)

    def planned(limit, samples=None) -> dict:
        return {name: (questions, k) for name, questions, k in planned_samples(tasks, limit, samples)}

    assert planned(None) == {"capcal_arithmetic": (80, 16), "capcal_arithmetic_ptrue": (80, 1)}
    assert planned(5) == {"capcal_arithmetic": (5, 16), "capcal_arithmetic_ptrue": (5, 1)}
    assert planned(500) == {"capcal_arithmetic": (80, 16), "capcal_arithmetic_ptrue": (80, 1)}
    assert planned(0.01)["capcal_arithmetic"] == (1, 16)  # a fraction rounds up
    assert planned(0.5)["capcal_arithmetic"] == (40, 16)
    assert planned(1.0)["capcal_arithmetic"] == (1, 16)  # 1 is a count, as in lm-eval
    chosen = planned(None, {"capcal_arithmetic": [0, 3, 7]})
    assert chosen == {"capcal_arithmetic": (3, 16), "capcal_arithmetic_ptrue": (80, 1)}
