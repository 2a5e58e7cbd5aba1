"""``capcal eval``: lm-eval's flags parsed into one ``evaluate`` call; every input that cannot work is one
line on stderr (exit status 2) before any model is loaded; a failed run is one line (exit 1), the traceback
only with ``--debug``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from analysis.cli import build_parser
from analysis.cli.arguments import parse_dict_flag, parse_seed
from analysis.cli.eval_command import eval_request

REPO = Path(__file__).resolve().parents[2]
# Runs ``capcal ARGS`` in a fresh process, then prints whether SmolLM2's model code was ever imported.
RUNNER = (
    "import sys\n"
    "from analysis.cli import main\n"
    "status = main(sys.argv[1:])\n"
    "print('model code imported:', any(name.endswith('modeling_llama') for name in sys.modules))\n"
    "sys.exit(status)\n"
)


@pytest.fixture(scope="module")
def forked_capcal(forked_cli) -> Callable[..., subprocess.CompletedProcess]:
    """``capcal(*arguments)``, each command in a process of its own forked from one server that imported
    lm-eval, datasets, transformers and torch once (``forked_cli``: about 5 s of CPU time saved per
    command)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return lambda *arguments: forked_cli.run(RUNNER, list(arguments), REPO, timeout=300, env=env)


@pytest.fixture(scope="module")
def incomplete_data(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("data")
    (folder / "gsm8k").mkdir()
    (folder / "gsm8k" / "test.jsonl").write_text('{"question": "1+1?", "answer": "#### 2"}\n')
    return folder


INVALID = {
    "unknown task": (
        ["--tasks", "capcal_gsm8kk"],
        "unknown task capcal_gsm8kk; did you mean capcal_gsm8k, capcal_gsm8k_all or capcal_gsm8k_train?",
    ),
    "limit 0": (["--tasks", "capcal_gsm8k", "--limit", "0"], "limit must be positive"),
    "negative limit": (["--tasks", "capcal_gsm8k", "--limit", "-2"], "limit must be positive"),
    "fractional limit above 1": (
        ["--tasks", "capcal_gsm8k", "--limit", "2.5"],
        "a whole number of questions",
    ),
    "limit not a number": (["--tasks", "capcal_gsm8k", "--limit", "ten"], "invalid float value: 'ten'"),
    "repeats 0": (["--tasks", "capcal_gsm8k", "--repeats", "0"], "repeats must be a positive integer, got 0"),
    "missing data folder": (
        ["--tasks", "capcal_gsm8k", "--data_dir", "/no/such/data"],
        "data_dir /no/such/data: no such folder",
    ),
    "data folder without the task's files": (
        ["--tasks", "capcal_gsm8k,capcal_math500", "--data_dir", "{data}"],
        "task capcal_math500 reads math500/test.jsonl, which is not in {data}",
    ),
    "missing model path": (
        ["--model_args", "pretrained=/no/such/smollm2", "--tasks", "capcal_gsm8k"],
        "pretrained=/no/such/smollm2: no such file or folder",
    ),
    "model argument typo": (
        ["--model_args", "pretrained={model},dtpye=float32", "--tasks", "capcal_gsm8k"],
        "unknown model argument dtpye for capcal-hf (capcal_models.hf.CapcalHFLM); did you mean dtype?",
    ),
    "model argument without a value": (
        ["--model_args", "pretrained={model},sample_cache", "--tasks", "capcal_gsm8k"],
        "--model_args: expected key=value or a JSON object, got 'sample_cache'",
    ),
    "unknown model": (
        ["--model", "capcal-hff", "--tasks", "capcal_gsm8k"],
        "unknown model capcal-hff; did you",
    ),
    "metadata not JSON": (
        ["--tasks", "capcal_gsm8k", "--metadata", "{samples_file: x}"],
        "--metadata: not valid",
    ),
    "metadata not an object": (
        ["--tasks", "capcal_gsm8k", "--metadata", "[1, 2]"],
        "--metadata: expected a JSON object, got [1, 2]",
    ),
    "unknown flag": (
        ["--tasks", "capcal_gsm8k", "--model_arg", "x=1"],
        "unrecognized arguments: --model_arg x=1; did you mean --model_args?",
    ),
    "log_samples without output_path": (
        ["--tasks", "capcal_gsm8k", "--log_samples"],
        "--log_samples and --predict_only need --output_path",
    ),
    "missing include_path": (
        ["--tasks", "capcal_gsm8k", "--include_path", "/no/such/tasks"],
        "include_path /no/such/tasks: no such folder",
    ),
    "seed not an integer": (
        ["--tasks", "capcal_gsm8k", "--seed", "abc"],
        "argument --seed: expected an integer",
    ),
    "samples with limit": (
        ["--tasks", "capcal_gsm8k", "--samples", '{"capcal_gsm8k": [0]}', "--limit", "1"],
        "--samples and --limit cannot be used together",
    ),
    "multiturn without chat template": (
        ["--tasks", "capcal_gsm8k", "--fewshot_as_multiturn"],
        "--fewshot_as_multiturn needs --apply_chat_template",
    ),
    "response-level task without its samples file": (
        ["--tasks", "capcal_gsm8k_selfcheck"],
        "task capcal_gsm8k_selfcheck: capcal's response-level gsm8k tasks score the responses of an earlier",
    ),
    # issue 25: the mistakes of a new user, and the ones found trying to break the checks
    "chat model without its chat template": (
        ["--tasks", "capcal_arithmetic", "--repeats", "4", "--limit", "3"],
        "{model} is a chat model (its tokenizer has a chat template) and the prompts of capcal_arithmetic "
        "are written for a chat template: add --apply_chat_template (without it such a model may answer "
        "nothing at all), or --plain_prompts to run the plain prompts anyway",
    ),
    "dataset not on disk, offline, shipped with capcal": (
        ["--tasks", "capcal_gsm8k", "--apply_chat_template"],
        "task capcal_gsm8k reads openai/gsm8k (main), split 'test' from the Hugging Face hub, but the "
        "Hugging Face hub is offline here (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE) and it is not cached; "
        "capcal ships this dataset: add --data_dir bundled",
    ),
    "gated dataset not on disk": (
        ["--tasks", "capcal_gpqa", "--apply_chat_template"],
        "it is not cached; pass --data_dir DIR, a folder holding gpqa/gpqa_diamond.csv "
        "(docs/tasks-and-data.md)",
    ),
    "lm-eval's own task, dataset not on disk": (
        ["--tasks", "gsm8k"],
        "task gsm8k reads openai/gsm8k (main), split 'test', but the Hugging Face hub is offline here",
    ),
    "unknown task close to an lm-eval task": (
        ["--tasks", "gsm8kk"],
        "unknown task gsm8kk; did you mean gsm8k",
    ),
    "part of a longer task name": (
        ["--tasks", "capcal_gsm8k_al"],
        "unknown task capcal_gsm8k_al; did you mean capcal_gsm8k_all",
    ),
    "no task name at all": (["--tasks", ","], "no tasks given"),
    "output path is a file": (
        ["--tasks", "capcal_gsm8k", "--output_path", "{data}/gsm8k/test.jsonl"],
        "output_path {data}/gsm8k/test.jsonl: a file, not a folder",
    ),
    "output path under a file": (
        ["--tasks", "capcal_gsm8k", "--output_path", "{data}/gsm8k/test.jsonl/out"],
        "output_path {data}/gsm8k/test.jsonl/out: {data}/gsm8k/test.jsonl is a file, not a folder",
    ),
    "activations folder under a file": (
        ["--model_args", "pretrained={model},activations={data}/gsm8k/test.jsonl/acts"]
        + ["--tasks", "capcal_gsm8k"],
        "activations={data}/gsm8k/test.jsonl/acts: {data}/gsm8k/test.jsonl is a file, not a folder",
    ),
    "max_gen_toks 0": (
        ["--tasks", "capcal_gsm8k", "--gen_kwargs", "max_gen_toks=0"],
        "gen_kwargs max_gen_toks=0: must be a positive integer",
    ),
    "negative temperature": (
        ["--tasks", "capcal_gsm8k", "--gen_kwargs", "temperature=-0.5"],
        "gen_kwargs temperature=-0.5: must be a number >= 0",
    ),
    "negative num_fewshot": (["--tasks", "capcal_gsm8k", "--num_fewshot", "-1"], "num_fewshot -1: must be"),
    "batch size not a number": (
        ["--tasks", "capcal_gsm8k", "--batch_size", "big"],
        "batch_size 'big': must be a positive integer, auto or auto:N",
    ),
    # issue 47: a plausible wrong result, or a late failure, turned into one line before the model loads
    "greedy decoding with repeats": (
        ["--tasks", "capcal_arithmetic", "--repeats", "8", "--gen_kwargs", "temperature=0,max_gen_toks=16"]
        + ["--apply_chat_template"],
        "greedy decoding with k = 8 responses per question on capcal_arithmetic: temperature=0, so the k "
        "responses are one response repeated (mu_hat only 0 or 1, nothing to calibrate); drop temperature=0 "
        "from --gen_kwargs (capcal_arithmetic samples at temperature 0.7), or run --repeats 1",
    ),
    "few-shot examples from the evaluation split": (
        ["--tasks", "capcal_gsm8k", "--num_fewshot", "2", "--data_dir", "bundled", "--apply_chat_template"],
        "--num_fewshot 2: capcal_gsm8k has no few-shot split, so lm-eval would draw the examples from the "
        "evaluation questions themselves; run without --num_fewshot",
    ),
    "sample cache that cannot be written": (
        ["--model_args", "pretrained={model},cache_path={data}/gsm8k/test.jsonl/cache.sqlite"]
        + ["--tasks", "capcal_arithmetic", "--apply_chat_template"],
        "cache_path={data}/gsm8k/test.jsonl/cache.sqlite: {data}/gsm8k/test.jsonl is a file, not a folder; "
        "set CAPCAL_HOME to a writable folder, or add cache_path=FILE (a writable place) or "
        "sample_cache=false to --model_args",
    ),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_an_input_that_cannot_work_is_one_line_before_any_model_is_loaded(
    case, smollm2_path, incomplete_data, forked_capcal
):
    """Every case names the real SmolLM2 checkpoint (unless the model is the problem): a check that let the
    input through would load it, which the runner reports. Each runs in a process of its own
    (``forked_capcal``)."""
    flags, message = INVALID[case]
    places = {"{model}": str(smollm2_path), "{data}": str(incomplete_data)}
    for placeholder, value in places.items():
        flags = [flag.replace(placeholder, value) for flag in flags]
        message = message.replace(placeholder, value)
    model = [] if "--model" in flags else ["--model", "capcal-hf"]
    model += [] if "--model_args" in flags else ["--model_args", f"pretrained={smollm2_path}"]
    result = forked_capcal("eval", *model, *flags)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.endswith("\n") and result.stderr.count("\n") == 1, result.stderr[-3000:]
    assert result.stderr.startswith("capcal eval: error: ")
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == "model code imported: False\n"


def test_a_failed_run_is_one_line_and_the_traceback_needs_debug(tmp_path, forked_capcal):
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "test.jsonl").write_text("not json\n")  # present, so the checks pass; unreadable
    flags = [
        "eval",
        "--model",
        "dummy",
        "--tasks",
        "capcal_gsm8k",
        "--data_dir",
        str(tmp_path),
        "--limit",
        "1",
    ]
    result = forked_capcal(*flags)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        f"capcal eval: error: ValueError: {tmp_path}/gsm8k/test.jsonl:1: not valid JSON (Expecting value) "
        "(--debug shows the traceback)"
    )
    assert "Traceback" not in result.stderr
    debug = forked_capcal(*flags, "--debug")
    assert debug.returncode == 1 and "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.splitlines()[-1].startswith("capcal eval: error: ValueError: ")


def test_other_commands_report_argument_errors_in_one_line(capsys):
    from analysis.cli import main

    assert main(["report"]) == 2
    assert (
        capsys.readouterr().err == "capcal report: error: the following arguments are required: OUTPUT_DIR\n"
    )
    assert main(["nonsense"]) == 2
    assert capsys.readouterr().err.startswith("capcal: error: argument COMMAND: invalid choice: 'nonsense'")


def test_models_prepare_names_every_model_capcal_can_prepare(capsys):
    from capcal_models.prepare import MODELS

    with pytest.raises(SystemExit):
        build_parser().parse_args(["models", "prepare", "--help"])
    usage = " ".join(capsys.readouterr().out.split())
    assert all(name in usage for name in MODELS), usage


def test_models_without_an_action_is_one_usage_error(capsys):
    """``capcal models`` alone: argparse's usage error naming the missing ACTION (exit 2), not a run that
    does nothing or fails later."""
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["models"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith("the following arguments are required: ACTION")


def test_models_list_names_every_model_in_aligned_columns(capsys):
    from analysis.cli import main
    from capcal_models.prepare import MODELS

    assert main(["models", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in lines[::2]]
    assert names == list(MODELS)
    pairs = zip(lines[::2], names, strict=True)
    columns = {len(line) - len(line[len(name) :].lstrip()) for line, name in pairs}
    columns |= {len(line) - len(line.lstrip()) for line in lines[1::2]}
    assert len(columns) == 1  # every path and description starts in the same column


def test_the_demos_second_model_is_the_same_from_the_cli_and_the_library():
    from analysis.demo import DEFAULT_STRONG_MODEL

    assert build_parser().parse_args(["demo"]).strong_model == DEFAULT_STRONG_MODEL


def test_the_demo_elicits_the_second_models_verbalized_confidence_only_when_asked():
    import inspect

    from analysis.demo import run_demo

    defaults = inspect.signature(run_demo).parameters
    parsed = build_parser().parse_args(["demo"])
    assert parsed.strong_verbalized is None is defaults["strong_verbalized_max_gen_toks"].default
    assert parsed.verbalized_max_gen_toks == defaults["verbalized_max_gen_toks"].default == 48
    assert build_parser().parse_args(["demo", "--strong_verbalized", "256"]).strong_verbalized == 256


def test_each_flag_of_capcal_demo_reaches_run_demo_as_given(monkeypatch):
    """Every flag of ``capcal demo`` given a value away from its default (and from the others'): ``run_demo``
    gets that value, an integer where the flag counts something, under its own keyword (the model run is
    stood in for: the CLI only parses and calls). Without flags it gets ``run_demo``'s own defaults."""
    import inspect

    import analysis.demo
    from analysis.cli import demo as demo_command

    calls = []
    signature = inspect.signature(analysis.demo.run_demo)
    monkeypatch.setattr(analysis.demo, "run_demo", lambda **given: calls.append(given))
    counts = {
        "--repeats": ("repeats", 3),
        "--train_repeats": ("train_repeats", 5),
        "--strong_repeats": ("strong_repeats", 7),
        "--per_level": ("per_level", 2),
        "--train_per_level": ("train_per_level", 4),
        "--max_gen_toks": ("max_gen_toks", 9),
        "--verbalized_max_gen_toks": ("verbalized_max_gen_toks", 11),
        "--strong_verbalized": ("strong_verbalized_max_gen_toks", 13),
        "--batch_size": ("batch_size", 6),
        "--resamples": ("resamples", 17),
    }
    texts = {
        "--output_dir": ("output_dir", "elsewhere"),
        "--task": ("task", "capcal_gsm8k"),
        "--model": ("cheap_model", "gemma3-270m"),
        "--strong_model": ("strong_model", "qwen2.5-coder-1.5b"),
    }
    argv = ["demo"] + [
        item for flag, (_, value) in {**counts, **texts}.items() for item in (flag, str(value))
    ]
    assert demo_command.run(build_parser().parse_args(argv)) == 0
    expected = {keyword: value for keyword, value in {**counts, **texts}.values()}
    assert calls[-1] == expected
    assert all(type(calls[-1][keyword]) is int for keyword, _ in counts.values())
    demo_command.run(build_parser().parse_args(["demo", "--strong_model", "none"]))
    assert calls[-1]["strong_model"] is None
    demo_command.run(build_parser().parse_args(["demo"]))
    defaults = {name: parameter.default for name, parameter in signature.parameters.items()}
    defaults.pop("seed")  # not a flag of capcal demo
    assert calls[-1] == defaults


def test_each_flag_of_capcal_selfcal_reaches_its_action_as_given(monkeypatch, capsys):
    """``capcal selfcal data|train|compare|run``, every flag away from its default (and from the others'):
    the library function gets each value under its own keyword or position, numbers as numbers, the
    dataclass flags as the dataclass built with those values (the library is stood in for: the CLI only
    parses and calls); then the lines it prints, each from its own field of the result."""
    from types import SimpleNamespace

    from analysis.cli.selfcal import run
    from analysis.self_calibration import compare, data, loop, train
    from analysis.self_calibration.loop import LoopSettings
    from analysis.self_calibration.train_config import TrainConfig

    calls = {}

    def record(name, result):
        return lambda *args, **kwargs: calls.__setitem__(name, (args, kwargs)) or result

    monkeypatch.setattr(loop, "question_ids_of", lambda path: [f"ids of {path}"])
    monkeypatch.setattr(loop, "model_path", lambda name: f"path of {name}")
    built = SimpleNamespace(counts={"tuples": 12, "questions": 3}, path="d/train.jsonl", readme="d/README.md")
    monkeypatch.setattr(data, "build_training_data", record("data", built))
    argv = ["selfcal", "data", "S", "C", "--output", "O", "--confidence", "p_yes_normalized"]
    assert run(build_parser().parse_args([*argv, "--lm_threshold", "0.25", "--exclude_run", "E"])) == 0
    assert calls["data"] == (
        ("S", "C", "O"),
        {"confidence": "p_yes_normalized", "lm_threshold": 0.25, "exclude_question_ids": ["ids of E"]},
    )
    assert capsys.readouterr().out == "12 tuples -> d/train.jsonl (card d/README.md)\n"
    run(build_parser().parse_args(argv))
    assert calls["data"][1]["lm_threshold"] == 0.75 and calls["data"][1]["exclude_question_ids"] == []
    capsys.readouterr()

    trained = SimpleNamespace(adapter_dir="t/adapter", merged_dir="t/merged")
    monkeypatch.setattr(train, "train_self_calibration", record("train", trained))
    argv = [
        "selfcal",
        "train",
        "D",
        "--model",
        "M",
        "--output",
        "T",
        "--lora_r",
        "7",
        "--learning_rate",
        "0.0003",
    ]
    run(build_parser().parse_args([*argv, "--seed", "13", "--target_modules", "k_proj", "o_proj"]))
    config = TrainConfig(lora_r=7, learning_rate=3e-4, seed=13, target_modules=("k_proj", "o_proj"))
    assert calls["train"] == (("D", "path of M", "T", config), {})
    assert capsys.readouterr().out == "adapter t/adapter\nmerged  t/merged\n"

    compared = SimpleNamespace(files={"html": "c/report.html", "markdown": "c/report.md"})
    monkeypatch.setattr(compare, "compare_runs", record("compare", compared))
    argv = ["selfcal", "compare", "B", "BC", "A", "AC", "--output", "R", "--training_data", "D"]
    run(
        build_parser().parse_args(
            [*argv, "--confidence", "p_yes_normalized", "--tolerance", "0.05", "--resamples", "17"]
        )
    )
    assert calls["compare"] == (
        ("B", "BC", "A", "AC", "R"),
        {"training_data": "D", "confidence": "p_yes_normalized", "tolerance": 0.05, "n_resamples": 17},
    )
    assert type(calls["compare"][1]["n_resamples"]) is int
    assert capsys.readouterr().out == "report: c/report.html\nsummary: c/report.md\n"

    looped = SimpleNamespace(
        step_seconds={"sample": 31.6, "train": 4.0}, reused={"train"}, comparison=compared
    )
    monkeypatch.setattr(loop, "run_self_calibration_loop", record("run", looped))
    argv = ["selfcal", "run", "--output_dir", "L", "--model", "gemma3-270m", "--train_repeats", "5"]
    run(
        build_parser().parse_args(
            [*argv, "--repeats", "3", "--seed", "9", "--lora_alpha", "11", "--per_level", "4"]
        )
    )
    settings = LoopSettings(model="gemma3-270m", train_repeats=5, repeats=3, seed=9, per_level=4)
    # one --seed for the loop and its training (TrainConfig's own flag is left out)
    assert calls["run"] == (("L", settings, TrainConfig(lora_alpha=11, seed=9)), {})
    assert capsys.readouterr().out == "steps: sample 32 s, train reused\nreport: c/report.html\n"


def test_each_flag_of_capcal_report_reaches_build_report_as_given(monkeypatch, tmp_path):
    """``capcal report`` with every flag away from its default: ``build_report`` gets the folders, output,
    activations and a ``ReportOptions`` holding that resample count, seed, calibration override and run
    selection (the analysis is stood in for: the CLI only parses and calls); without flags, the defaults."""
    from types import SimpleNamespace

    import analysis.report
    import analysis.report.input_notices
    from analysis.cli import report as report_command
    from analysis.report import ReportOptions

    calls = []

    def build_report(output_dirs, output, **given):
        calls.append((output_dirs, output, given))
        return SimpleNamespace(html="r.html", markdown="r.md")

    monkeypatch.setattr(analysis.report, "build_report", build_report)
    monkeypatch.setattr(analysis.report.input_notices, "report_notices", lambda *args: [])
    output = str(tmp_path / "report")
    argv = ["report", "a", "b", "--output", output, "--activations", "acts", "--resamples", "17"]
    argv += ["--seed", "5", "--calibration", "capcal_aime25=capcal_math_train", "--run", "r1", "--run", "r2"]
    assert report_command.run(build_parser().parse_args(argv)) == 0
    dirs, out, given = calls[-1]
    assert (dirs, out, given["activations_dir"]) == (["a", "b"], output, "acts")
    options = given["options"]
    assert (options.n_resamples, options.seed, options.select) == (17, 5, ["r1", "r2"])
    assert options.calibration == {"capcal_aime25": ["capcal_math_train"]}
    assert report_command.run(build_parser().parse_args(["report", "a", "--output", output])) == 0
    defaults = ReportOptions()
    options = calls[-1][2]["options"]
    assert (options.n_resamples, options.seed, options.select) == (defaults.n_resamples, defaults.seed, None)


def test_eval_flags_become_one_evaluate_call():
    args = build_parser().parse_args(
        ["eval", "--model", "capcal-hf", "-a", "pretrained=/m,seed=3", "batch_size=8", "--tasks", "a,b", "c"]
        + ["--gen_kwargs", "max_gen_toks=16,temperature=0.7", "--metadata", '{"samples_file": "/s.jsonl"}']
        + ["--limit", "5", "--repeats", "4", "--data_dir", "bundled", "--apply_chat_template", "--seed", "7"]
        + ["--log_samples", "--output_path", "out", "--cache_requests", "refresh", "--num_fewshot", "2"]
    )
    request = eval_request(args)
    assert request["model"] == "capcal-hf" and request["tasks"] == ["a", "b", "c"]
    assert request["model_args"] == {"pretrained": "/m", "seed": 3, "batch_size": 8}
    assert request["gen_kwargs"] == {"max_gen_toks": 16, "temperature": 0.7}
    assert request["metadata"] == {"samples_file": "/s.jsonl"}
    assert (request["limit"], request["repeats"], request["data_dir"]) == (5.0, 4, "bundled")
    assert request["apply_chat_template"] is True and request["fewshot_as_multiturn"] is None
    assert [
        request[f"{name}_seed"] for name in ("random", "numpy_random", "torch_random", "fewshot_random")
    ] == [7] * 4
    assert request["log_samples"] and request["output_path"] == "out" and request["num_fewshot"] == 2
    assert (
        request["cache_requests"]
        and request["rewrite_requests_cache"]
        and not request["delete_requests_cache"]
    )
    assert request["device"] == "cuda:0"  # lm_eval's default
    assert request["batch_size"] is None  # evaluate chooses one per engine (capcal_models.batch_size)


def test_each_switch_of_capcal_eval_is_off_by_default_and_reaches_evaluate_alone_when_given():
    """Every ``store_true`` flag of ``capcal eval`` (listed by hand, not read from the parser): off by
    default, on when given last on the line (a flag that took a value would fail there), and it changes its
    own request key and no other (``--predict_only`` also logs the samples, as lm_eval does)."""
    base = ["eval", "--model", "hf", "--tasks", "t", "--output_path", "out"]
    default = eval_request(build_parser().parse_args(base))
    switches = {
        "--log_samples": {"log_samples"},
        "--predict_only": {"predict_only", "log_samples"},
        "--check_integrity": {"check_integrity"},
        "--write_out": {"write_out"},
        "--confirm_run_unsafe_code": {"confirm_run_unsafe_code"},
        "--plain_prompts": {"plain_prompts"},
        "--allow_large": {"allow_large"},
        "--trust_remote_code": {"model_args"},
    }
    for flag, keys in switches.items():
        given = eval_request(build_parser().parse_args([*base, flag]))
        assert {key for key in given if given[key] != default[key]} == keys, flag
        for key in keys - {"model_args"}:
            assert (default[key], given[key]) == (False, True), flag
    assert default["model_args"] == {}
    assert eval_request(build_parser().parse_args([*base, "--trust_remote_code"]))["model_args"] == {
        "trust_remote_code": True
    }
    for flag in ("--show_config", "--debug", "--adaptive"):
        name = flag.removeprefix("--")
        assert getattr(build_parser().parse_args(base), name) is False, flag
        assert getattr(build_parser().parse_args([*base, flag]), name) is True, flag


def test_each_valued_flag_of_capcal_eval_reaches_its_own_request_key_alone():
    """Every flag of ``capcal eval`` that takes a value (listed by hand), given alone with a value away from
    its default: the request keys it changes, and their values, written out (a flag read into a sibling's key,
    or a sibling's value read into its own, changes another key or none)."""
    base = ["eval", "--model", "hf", "--tasks", "t", "--output_path", "out"]
    default = eval_request(build_parser().parse_args(base))
    flags = {
        ("--model", "capcal-hf"): {"model": "capcal-hf"},
        ("--tasks", "a,b"): {"tasks": ["a", "b"]},
        ("--model_args", "pretrained=m,dtype=float32"): {
            "model_args": {"pretrained": "m", "dtype": "float32"}
        },
        ("--repeats", "3"): {"repeats": 3},
        ("--data_dir", "bundled"): {"data_dir": "bundled"},
        ("--include_path", "more_tasks"): {"include_path": "more_tasks"},
        ("--metadata", "per_level=2"): {"metadata": {"per_level": 2}},
        ("--output_path", "elsewhere"): {"output_path": "elsewhere"},
        ("--limit", "5"): {"limit": 5},
        ("--samples", '{"t": [0, 2]}'): {"samples": {"t": [0, 2]}},
        ("--system_instruction", "Be brief."): {"system_instruction": "Be brief."},
        ("--num_fewshot", "2"): {"num_fewshot": 2},
        ("--batch_size", "6"): {"batch_size": "6"},
        ("--max_batch_size", "9"): {"max_batch_size": 9},
        ("--device", "cpu"): {"device": "cpu"},
        ("--use_cache", "cache.sqlite"): {"use_cache": "cache.sqlite"},
        ("--cache_requests", "true"): {"cache_requests": True},
        ("--cache_requests", "delete"): {"delete_requests_cache": True},
        ("--gen_kwargs", "max_gen_toks=7"): {"gen_kwargs": {"max_gen_toks": 7}},
        ("--apply_chat_template", "chatml"): {"apply_chat_template": "chatml"},
    }
    for (flag, value), expected in flags.items():
        given = eval_request(build_parser().parse_args([*base, flag, value]))
        assert {key: given[key] for key in given if given[key] != default[key]} == expected, flag


def test_lm_eval_dictionary_flags_and_seeds():
    assert parse_dict_flag(['{"a": [1, 2]}', "b=x,c=2"], "--metadata") == {"a": [1, 2], "b": "x", "c": 2}
    assert parse_dict_flag(None, "--gen_kwargs") == {}
    with pytest.raises(ValueError, match=r"^--gen_kwargs: expected key=value or a JSON object, got 'oops'$"):
        parse_dict_flag(["max_gen_toks=3,oops"], "--gen_kwargs")
    assert parse_seed("5") == [5, 5, 5, 5]
    assert parse_seed("1,None,3,4") == [1, None, 3, 4]
    assert parse_seed("1,2,3") == [1, 2, 3, 1234]


@pytest.fixture(scope="module")
def forked_capcal_in(forked_cli) -> Callable[..., subprocess.CompletedProcess]:
    """``capcal ARGS`` run from ``folder`` (a folder outside any git work tree), in a process forked from
    ``forked_cli`` (a real run loads its model in that process)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return lambda folder, *arguments: forked_cli.run(RUNNER, list(arguments), folder, timeout=600, env=env)


@pytest.fixture(scope="module")
def dummy_runs(tmp_path_factory, forked_capcal_in) -> tuple[Path, list[subprocess.CompletedProcess]]:
    """lm-eval's dummy model (it answers "lol") on two arithmetic tasks with k = 1, each into its own
    folder, from a folder outside any git work tree: (that folder, the two runs)."""
    root = tmp_path_factory.mktemp("dummy_runs")
    runs = [
        forked_capcal_in(root, "eval", "--model", "dummy", "--tasks", task, "--repeats", "1", "--limit", "2",
                   "--gen_kwargs", "max_gen_toks=8", "--log_samples", "--output_path", f"out_{task}")
        for task in ("capcal_arithmetic", "capcal_arithmetic_train")
    ]  # fmt: skip
    return root, runs


def test_eval_warns_before_the_run_about_k_and_after_it_about_unreadable_responses(dummy_runs):
    _, (run, _) = dummy_runs
    assert run.returncode == 0, run.stderr[-3000:]
    warnings = [line for line in run.stderr.splitlines() if line.startswith("capcal eval: warning: ")]
    assert warnings == [
        "capcal eval: warning: --repeats 1 on capcal_arithmetic: with one response per question mu_hat is 0 "
        "or 1, so capability calibration is only response calibration; the consistency estimator (k >= 6), "
        "pass@k for k > 1 and majority vote will be missing; use --repeats 16 (the tasks' default)",
        "capcal eval: warning: task capcal_arithmetic: no answer could be read from 2 of 2 responses; likely "
        "cause: max_gen_toks=8 may cut the responses before their final answer (raise it)",
    ]
    assert run.stderr.index(warnings[0]) < run.stderr.index("Running generate_until requests")


def test_eval_prints_none_of_lm_evals_misleading_lines(dummy_runs):
    """capcal's tasks set do_sample: true and read their data through custom_dataset: lm-eval's lines
    saying otherwise are filtered; lm-eval's git call finds capcal's checkout."""
    _, runs = dummy_runs
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
        assert "Ensure 'do_sample=True'" not in run.stderr
        assert "Custom kwargs can be passed" not in run.stderr
        assert "not a git repository" not in run.stderr


def test_check_takes_several_folders(dummy_runs, forked_capcal_in):
    root, _ = dummy_runs
    result = forked_capcal_in(root, "check", "out_capcal_arithmetic", "out_capcal_arithmetic_train")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "capcal_arithmetic " in result.stdout and "capcal_arithmetic_train" in result.stdout
    assert "\n2 of 2 run(s) complete\n" in result.stdout


def test_a_symlink_loop_is_one_line_in_analyze_check_and_report(tmp_path, forked_capcal_in):
    folder = tmp_path / "runs" / "model__x"
    folder.mkdir(parents=True)
    samples = folder / "samples_capcal_arithmetic_2026-01-02T03-04-05.123456.jsonl"
    os.symlink(samples.name, samples)
    for command in (["analyze"], ["check"], ["report", "--output", str(tmp_path / "report")]):
        result = forked_capcal_in(tmp_path, *command, "runs")
        assert result.returncode == 2, result.stderr[-3000:]
        assert result.stderr == (
            f"capcal {command[0]}: error: runs/model__x/{samples.name}: cannot be read (Too many levels of "
            "symbolic links); a link that loops or points nowhere? fix or remove it\n"
        )


@pytest.mark.slow
def test_the_new_users_run_without_a_chat_template_is_explained_at_every_step(
    tmp_path, smollm2_path, forked_capcal_in
):
    """The issue's run, with --plain_prompts to get past the refusal: SmolLM2-Instruct answers (mostly)
    nothing; eval, check and report each say so and why."""
    flags = ["--model", "capcal-hf", "--model_args", f"pretrained={smollm2_path},sample_cache=False"]
    flags += ["--tasks", "capcal_arithmetic", "--repeats", "4", "--limit", "3", "--plain_prompts"]
    flags += ["--gen_kwargs", "max_gen_toks=16", "--log_samples", "--output_path", "out"]
    run = forked_capcal_in(tmp_path, "eval", *flags)
    assert run.returncode == 0, run.stderr[-3000:]
    cause = "the model has a chat template and the run did not apply it (add --apply_chat_template)"
    # sampled at temperature 0.7, SmolLM2 without its template ends at once on most responses, not all
    found = re.search(
        rf"capcal eval: warning: task capcal_arithmetic: (\d+) of 12 responses are empty; likely cause: "
        rf"{re.escape(cause)}\n",
        run.stderr,
    )
    assert found and int(found[1]) > 6, run.stderr[-3000:]  # "mostly": above response_checks.MOSTLY = 0.5
    check = forked_capcal_in(tmp_path, "check", "out")
    assert check.returncode == 1 and f"{found[1]} empty response(s) (likely cause: {cause})" in check.stdout
    flags = ["--activations", "acts", "--output", "report", "--resamples", "50"]
    report = forked_capcal_in(tmp_path, "report", "out", *flags)
    warnings = [line for line in report.stderr.splitlines() if line.startswith("capcal report: warning: ")]
    assert "capcal report: warning: --activations acts: no such folder; the probe is left out" in warnings
    # its declared calibration split was not run
    assert any("calibration split capcal_arithmetic_train has no sampling run here" in w for w in warnings)


def test_an_unknown_task_is_refused_before_lm_evals_task_code_or_datasets_is_imported():
    """What keeps the refusal fast (about 1.5 s of CPU time here, not asserted): lm-eval's task index and
    the datasets library are never imported for a name that no task YAML contains."""
    code = (
        "import sys\n"
        "from analysis.cli import main\n"
        "status = main(['eval', '--model', 'capcal-hf', '--tasks', 'capcal_gsm8kk', '--limit', '2'])\n"
        "print(status, sorted(m for m in ('lm_eval.tasks', 'datasets', 'torch') if m in sys.modules))\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    assert result.stdout == "2 []\n", result.stderr[-3000:]
    assert result.stderr.startswith("capcal eval: error: unknown task capcal_gsm8kk; did you mean ")
