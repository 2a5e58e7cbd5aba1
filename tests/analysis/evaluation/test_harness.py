"""``analysis.evaluation``: input checks before a model is loaded; runs saved as lm-eval's CLI saves them."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.evaluation import (
    EvaluationInputError,
    accepted_model_arguments,
    check_inputs,
    evaluate,
    format_results,
    parse_key_values,
)

REPO = Path(__file__).resolve().parents[3]
TINY_TASK, TINY_LIMIT, TINY_REPEATS = "capcal_gsm8k", 2, 2  # tests/analysis/conftest.py's tiny_run


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"repeats": 0}, "repeats must be a positive integer, got 0"),
        ({"repeats": True}, "repeats must be a positive integer, got True"),
        ({"repeats": 2.5}, "repeats must be a positive integer, got 2.5"),
        ({"limit": 0}, "limit must be positive"),
        ({"limit": -3}, "limit must be positive"),
        ({"limit": math.nan}, "limit must be positive"),
        ({"limit": 2.5}, "limit must be a whole number of questions when >= 1, got 2.5"),
        ({"metadata": ["samples_file"]}, "metadata must be a JSON object"),
        ({"model": "hff"}, "unknown model hff; did you mean hf?"),
        ({"model_args": "pretrained=x,dtpye=float32"}, "unknown model argument dtpye for hf"),
        (
            {"model_args": "pretrained"},
            "model arguments: expected key=value or a JSON object, got 'pretrained'",
        ),
        ({"model_args": "{bad"}, "model arguments: not valid JSON"),
        ({"model_args": "[1]"}, "model arguments: expected a JSON object, got [1]"),
        ({"model_args": "pretrained=/no/such/checkpoint"}, "pretrained=/no/such/checkpoint: no such file"),
        ({"include_path": "/no/such/tasks"}, "include_path /no/such/tasks: no such folder"),
        ({"data_dir": "/no/such/data"}, "data_dir /no/such/data: no such folder"),
    ],
)
def test_check_inputs_rejects_before_any_task_or_model_is_loaded(arguments, message):
    arguments = {"model": "hf", "tasks": "capcal_gsm8k", **arguments}
    with pytest.raises(EvaluationInputError) as caught:
        check_inputs(**arguments)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_check_inputs_names_the_unknown_task_and_the_closest_ones():
    with pytest.raises(
        EvaluationInputError, match=r"^unknown task capcal_gsm8kk; did you mean capcal_gsm8k\b"
    ):
        check_inputs("hf", ["capcal_gsm8k", "capcal_gsm8kk"])
    with pytest.raises(EvaluationInputError, match=r"task file /no/such/task.yaml not found"):
        check_inputs("hf", "/no/such/task.yaml")


def test_check_inputs_passes_task_configs_on_as_they_are():
    config = {"task": "my_gsm8k", "dataset_path": "json", "output_type": "generate_until"}
    checked = check_inputs("hf", ["capcal_gsm8k", config, "capcal_gsm8k"], data_dir="bundled")
    assert checked.tasks == ["capcal_gsm8k", config]


def test_check_inputs_finds_a_data_folder_without_the_files_the_tasks_read(tmp_path):
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "test.jsonl").write_text("{}\n")
    checked = check_inputs("hf", "capcal_gsm8k", data_dir=tmp_path)  # the one file capcal_gsm8k reads
    assert checked.tasks == ["capcal_gsm8k"]
    with pytest.raises(EvaluationInputError) as caught:
        check_inputs("hf", "capcal_gsm8k,capcal_math500", data_dir=tmp_path)
    assert str(caught.value) == (
        f"task capcal_math500 reads math500/test.jsonl, which is not in {tmp_path}; capcal ships it: "
        "--data_dir bundled"
    )
    # a tag stands for its tasks: capcal_sampling includes MMLU, whose CSV folder is not there either
    with pytest.raises(EvaluationInputError, match=r"task capcal_\w+ reads \S+, which is not in"):
        check_inputs("hf", "capcal_sampling", data_dir=tmp_path)


def test_check_inputs_runs_the_loader_of_a_response_level_task():
    with pytest.raises(EvaluationInputError, match=r"^task capcal_gsm8k_selfcheck: .*samples_file"):
        check_inputs("hf", "capcal_gsm8k_selfcheck")


def _earlier_run(folder: Path, fingerprint: str, label: str) -> Path:
    """A capcal_arithmetic samples file (two real questions, scored) and the results file lm-eval writes
    beside it, recording the run's model as capcal eval does (``capcal_model``): a stand-in for a finished
    run of the model ``fingerprint``."""
    from capcal_tasks.arithmetic.task import load_test, process_docs, process_results

    folder.mkdir(parents=True)
    date = "2026-01-02T03-04-05.000001"
    lines = []
    for doc_id, doc in enumerate(list(process_docs(load_test()["test"]))[:2]):
        responses = [f"{int(doc['gold_answer'])}", "0"]
        metrics = process_results(doc, [responses])
        lines.append({"doc_id": doc_id, "doc": doc, "resps": [responses], "filtered_resps": [responses],
                      "filter": "all_responses", "metrics": list(metrics), **metrics})  # fmt: skip
    samples = folder / f"samples_capcal_arithmetic_{date}.jsonl"
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    results = {"results": {"capcal_arithmetic": {}}, "configs": {}, "config": {"model": "capcal-hf"},
               "capcal_model": {"fingerprint": fingerprint, "label": label}}  # fmt: skip
    (folder / f"results_{date}.json").write_text(json.dumps(results), encoding="utf-8")
    return samples


def test_check_inputs_refuses_another_models_samples_file_for_a_self_check(tmp_path, smollm2_path):
    """A self-check (or a response-level confidence) scores the model's own responses: given the samples
    file of another checkpoint's run it is refused in one line, before any model loads (before: the run
    went through, and the report failed as a whole); the model's own run passes."""
    from capcal_models.model_identity import model_fingerprint_from_args

    ours = model_fingerprint_from_args("capcal-hf", {"pretrained": str(smollm2_path)})["fingerprint"]
    other = _earlier_run(tmp_path / "qwen", "f" * 64, "qwen2.5-coder-0.5b")
    own = _earlier_run(tmp_path / "smollm2", ours, "smollm2")
    task, model_args = "capcal_arithmetic_selfcheck", f"pretrained={smollm2_path}"
    with pytest.raises(EvaluationInputError) as error:
        check_inputs("capcal-hf", task, model_args=model_args, metadata={"samples_file": str(other)})
    assert str(error.value) == (
        f"task {task}: samples_file {other} is a run of qwen2.5-coder-0.5b (checkpoint ffffffffffff), not "
        f"of the model this run loads ({smollm2_path}, checkpoint {ours.split(':')[-1][:12]}): {task} scores "
        "the model's own responses; pass the samples file of a capcal_arithmetic run of this model (capcal "
        "eval --tasks capcal_arithmetic ... --log_samples)"
    )
    mapping = {"samples_file": {"arithmetic": str(other)}}
    with pytest.raises(EvaluationInputError, match="is a run of qwen2.5-coder-0.5b"):
        check_inputs("capcal-hf", task, model_args=model_args, metadata=mapping)
    checked = check_inputs(
        "capcal-hf",
        "capcal_arithmetic_selfcheck",
        model_args=f"pretrained={smollm2_path}",
        metadata={"samples_file": str(own)},
        apply_chat_template=True,
    )
    assert checked.tasks == ["capcal_arithmetic_selfcheck"]


def test_check_inputs_resolves_patterns_and_merges_model_args_into_the_task_metadata(smollm2_path):
    checked = check_inputs(
        "capcal-hf",
        ["capcal_arithmetic", "capcal_arithmetic*ptrue"],
        model_args=f"pretrained={smollm2_path},seed=3",
        repeats=2,
        data_dir="bundled",
        metadata={"arithmetic_per_level": 2},
        apply_chat_template=True,
    )
    assert checked.tasks == ["capcal_arithmetic", "capcal_arithmetic_ptrue", "capcal_arithmetic_train_ptrue"]
    assert checked.model_args == {"pretrained": str(smollm2_path), "seed": 3}
    assert checked.metadata == {"pretrained": str(smollm2_path), "seed": 3, "arithmetic_per_level": 2}
    assert checked.task_manager.repeats == 2


def test_key_value_arguments_are_parsed_as_lm_eval_parses_them():
    assert parse_key_values("pretrained=/m,batch_size=8,trust_remote_code=True,dtype=float32") == {
        "pretrained": "/m",
        "batch_size": 8,
        "trust_remote_code": True,
        "dtype": "float32",
    }
    assert parse_key_values('{"pretrained": "/m", "max_length": 512}') == {
        "pretrained": "/m",
        "max_length": 512,
    }
    assert parse_key_values(None) == {} and parse_key_values({"a": 1}) == {"a": 1}


def test_accepted_model_arguments_follow_the_class_hierarchy():
    from lm_eval.api.registry import get_model

    import capcal_models  # noqa: F401  (registers capcal's wrappers)

    hf = accepted_model_arguments(get_model("hf"))
    capcal_hf = accepted_model_arguments(get_model("capcal-hf"))
    assert {"pretrained", "dtype", "batch_size", "device_map", "attn_implementation"} <= hf
    assert hf < capcal_hf and {"seed", "activations", "cache_path", "sample_cache"} <= capcal_hf
    api = accepted_model_arguments(get_model("capcal-api"))
    assert {"base_url", "num_concurrent", "tokenizer", "model"} <= api and "dtype" not in api


def test_evaluate_checks_its_inputs_before_loading_the_model(smollm2_path, forked_cli):
    # the checkpoint exists: without the check, the model would load and the typo fail inside transformers
    code = (
        "import sys\n"
        "from analysis.evaluation import EvaluationInputError, evaluate\n"
        "try:\n"
        f"    evaluate('capcal-hf', 'capcal_gsm8k', model_args='pretrained={smollm2_path},dtpye=float32')\n"
        "except EvaluationInputError as error:\n"
        "    print(error)\n"
        "print(sorted(m for m in sys.modules if m.endswith('modeling_llama')))\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # a process of its own, forked from the server that imported lm-eval and torch once (``forked_cli``)
    result = forked_cli.run(code, [], REPO, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    message, loaded = result.stdout.splitlines()
    assert message == (
        "unknown model argument dtpye for capcal-hf (capcal_models.hf.CapcalHFLM); did you mean dtype?"
    )
    assert loaded == "[]"  # SmolLM2's model code (LlamaForCausalLM) was never imported


@pytest.mark.slow
def test_evaluate_saves_the_run_as_lm_eval_does_with_the_model_identity(tiny_run, smollm2_path):
    from capcal_models.model_identity import checkpoint_fingerprint

    output, results = tiny_run
    (folder,) = [path for path in output.iterdir() if path.is_dir()]
    assert folder.name == str(smollm2_path).replace("/", "__")  # lm-eval's model_name_sanitized
    (results_file,) = folder.glob("results_*.json")
    (samples_file,) = folder.glob(f"samples_{TINY_TASK}_*.jsonl")
    stamp = re.fullmatch(r"results_(.+)\.json", results_file.name).group(1)
    assert samples_file.name == f"samples_{TINY_TASK}_{stamp}.jsonl"
    assert results["capcal_files"] == {"results": results_file, "samples": {TINY_TASK: samples_file}}

    saved = json.loads(results_file.read_text(encoding="utf-8"))
    assert "samples" not in saved and "capcal_files" not in saved
    for key in ("results", "configs", "config", "n-samples", "task_hashes", "model_name", "date"):
        assert key in saved, key
    assert saved["capcal_model"]["source"] == "checkpoint"
    assert saved["capcal_model"]["fingerprint"] == checkpoint_fingerprint(smollm2_path)
    assert saved["config"]["model"] == "capcal-hf" and saved["config"]["limit"] == TINY_LIMIT
    assert saved["configs"][TINY_TASK]["repeats"] == TINY_REPEATS
    assert saved["configs"][TINY_TASK]["metadata"]["pretrained"] == str(smollm2_path)  # model_args | metadata
    lines = samples_file.read_text(encoding="utf-8").splitlines()
    assert len(lines) == TINY_LIMIT and all(
        len(json.loads(line)["resps"][0]) == TINY_REPEATS for line in lines
    )
    assert len(results["samples"][TINY_TASK]) == TINY_LIMIT  # and the returned results keep the samples


@pytest.mark.slow
def test_the_saved_run_reads_back_with_load_run(tiny_run):
    from analysis.runs import load_run

    output, _ = tiny_run
    table = load_run(output)
    assert len(table) == TINY_LIMIT and set(table["task"]) == {TINY_TASK}
    assert (table["n"] == TINY_REPEATS).all()


@pytest.mark.slow
def test_format_results_is_lm_evals_summary(tiny_run):
    _, results = tiny_run
    text = format_results(results)
    assert text.splitlines()[0].startswith("capcal-hf ({'pretrained': ")
    assert "limit: 2" in text.splitlines()[0]
    assert re.search(rf"\|{TINY_TASK}\s*\|", text) and "expected_accuracy" in text


@pytest.mark.slow
def test_the_layout_is_the_one_lm_evals_cli_writes(tmp_path):
    """The same run (lm-eval's dummy model) through ``lm_eval --output_path`` and through ``evaluate``: the
    same files, the same keys in the results file (plus capcal_model and capcal_version) and in every sample
    line."""
    from capcal_tasks import tasks_dir

    common = ["--model", "dummy", "--tasks", "capcal_arithmetic", "--limit", "2", "--log_samples"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    lm_eval = [sys.executable, "-m", "lm_eval", *common, "--include_path", str(tasks_dir())]
    result = subprocess.run(
        [*lm_eval, "--output_path", str(tmp_path / "lm_eval")], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    evaluate("dummy", "capcal_arithmetic", limit=2, output_path=tmp_path / "capcal", log_samples=True)

    def layout(root: Path) -> tuple[list[str], set[str], set[str]]:
        (folder,) = root.iterdir()  # lm-eval's model_name_sanitized
        names = sorted(
            re.sub(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d+", "TIME", path.name) for path in folder.iterdir()
        )
        (results_file,) = root.rglob("results_*.json")
        (samples_file,) = root.rglob("samples_*.jsonl")
        sample_keys = set(json.loads(samples_file.read_text(encoding="utf-8").splitlines()[0]))
        return names, set(json.loads(results_file.read_text(encoding="utf-8"))), sample_keys

    names, result_keys, sample_keys = layout(tmp_path / "lm_eval")
    assert names == ["results_TIME.json", "samples_capcal_arithmetic_TIME.jsonl"]
    added = {"capcal_model", "capcal_version"}
    assert layout(tmp_path / "capcal") == (names, result_keys | added, sample_keys)


def test_a_default_batch_size_is_logged_with_its_reason_and_recorded(caplog, tmp_path):
    """Without --batch_size, the size capcal picks is logged as "batch size N: REASON (...)" and recorded in
    the saved results' ``capcal_batch_size`` with the same reason (lm-eval's dummy model: lm-eval's default
    1); a given --batch_size is recorded as given."""
    import logging

    with caplog.at_level(logging.INFO, logger="capcal_models.batch_size"):
        results = evaluate("dummy", "capcal_arithmetic", limit=1, repeats=2, output_path=tmp_path / "default")
    reason = "dummy: lm-eval's default 1"
    lines = [r.getMessage() for r in caplog.records if r.name == "capcal_models.batch_size"]
    assert lines == [f"batch size 1: {reason} (--batch_size N sets another)"]
    assert results["config"]["capcal_batch_size"] == {
        "value": 1,
        "chosen_by": "capcal default",
        "reason": reason,
    }
    results = evaluate(
        "dummy", "capcal_arithmetic", limit=1, repeats=2, batch_size=3, output_path=tmp_path / "given"
    )
    assert results["config"]["capcal_batch_size"] == {"value": 3, "chosen_by": "--batch_size"}


def test_an_incomplete_saved_run_has_its_results_and_its_samples_renamed_and_is_refused_in_one_line(tmp_path):
    """The check after lm-eval saved a run: a samples file holding 1 of its task's 2 logged questions
    refuses the run (``IncompleteOutputError``, one line naming the file and the counts) and renames the
    results file and every samples file ``*.incomplete``, so that no reader takes the run for complete."""
    from analysis.checks.output_checks import IncompleteOutputError
    from analysis.evaluation.harness import _check_saved

    results_path = tmp_path / "results_2026.json"
    results_path.write_text("{}")
    short, whole = tmp_path / "samples_a_2026.jsonl", tmp_path / "samples_b_2026.jsonl"
    short.write_text('{"doc_id": 0}\n')
    whole.write_text('{"doc_id": 0}\n{"doc_id": 1}\n')
    files = {"results": results_path, "samples": {"a": short, "b": whole}}
    results = {
        "samples": {"a": [{}, {}], "b": [{}, {}]},
        "configs": {"a": {"output_type": "generate_until"}, "b": {"output_type": "generate_until"}},
    }
    with pytest.raises(IncompleteOutputError) as raised:
        _check_saved(results, files, [], "hf", {})
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(
        "the run's output is incomplete: samples_a_2026.jsonl holds 1 of 2 questions (no write error was"
        " reported); renamed 3 file(s) *.incomplete; "
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "results_2026.json.incomplete",
        "samples_a_2026.jsonl.incomplete",
        "samples_b_2026.jsonl.incomplete",
    ]
    # complete: nothing raised, nothing renamed
    short.with_name(short.name + ".incomplete").rename(short)
    short.write_text('{"doc_id": 0}\n{"doc_id": 1}\n')
    whole.with_name(whole.name + ".incomplete").rename(whole)
    results_path.with_name(results_path.name + ".incomplete").rename(results_path)
    _check_saved(results, files, [], "hf", {})
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "results_2026.json",
        "samples_a_2026.jsonl",
        "samples_b_2026.jsonl",
    ]


def test_the_saved_results_hold_lm_evals_task_hash_of_the_logged_samples(tmp_path):
    """Catches ``save_run`` saving the aggregates without the samples: lm-eval's results file then has an
    empty ``task_hashes`` (the sha256 of the task's doc, prompt and target hashes, joined in order)."""
    import hashlib

    from lm_eval.loggers import EvaluationTracker

    from analysis.evaluation.harness import save_run

    samples = [
        {
            "doc_id": doc,
            "doc": {"question": f"q{doc}"},
            "target": "7",
            "arguments": [["Q: what is 3 + 4?", {"until": ["."]}]],
            "resps": [["7"]],
            "filtered_resps": ["7"],
            "doc_hash": f"d{doc}",
            "prompt_hash": f"p{doc}",
            "target_hash": f"t{doc}",
        }
        for doc in range(2)
    ]
    results = {
        "results": {"toy": {"alias": "toy"}},
        "configs": {"toy": {"output_type": "generate_until"}},
        "samples": {"toy": samples},
    }
    tracker = EvaluationTracker(output_path=str(tmp_path))
    saved = save_run(results, tracker, tmp_path, True, "dummy", {}, {"value": 1})
    written = json.loads(saved["capcal_files"]["results"].read_text(encoding="utf-8"))
    assert written["task_hashes"] == {"toy": hashlib.sha256(b"d0p0t0d1p1t1").hexdigest()}
    assert len(saved["samples"]["toy"]) == 2  # and the returned results keep the samples


def test_a_run_without_log_samples_is_warned_that_check_and_report_will_have_nothing(tmp_path):
    """``evaluate``'s ``log_samples`` reaches its input checks: without it the warning that ``capcal check``,
    ``analyze`` and ``report`` read the samples files is given (once, before the run); with it, not.
    lm-eval's dummy model (no model loads)."""
    warned = {}
    for log_samples in (False, True):
        received: list[str] = []
        evaluate(
            "dummy", "capcal_arithmetic", limit=2, output_path=tmp_path / str(log_samples),
            log_samples=log_samples, notify=received.append,
        )  # fmt: skip
        warned[log_samples] = [line for line in received if line.startswith("no --log_samples")]
    assert warned == {
        True: [],
        False: [
            "no --log_samples: the responses of capcal_arithmetic will not be saved, and capcal check, "
            "analyze and report read nothing but them; add --log_samples to keep this run for them"
        ],
    }


def test_the_printed_summary_opens_with_the_runs_settings_line_as_lm_eval_prints_it():
    """``format_results``' first line is lm-eval's settings line, every value from the results' ``config``
    (the model arguments without trust_remote_code, the batch sizes lm-eval chose), few-shot as asked;
    then lm-eval's own table. A hand-built results dictionary; ``capcal_adaptive`` beside ``config`` holds
    other values, so a line read from it shows."""
    row = {"alias": "capcal_toy", "correctness,all_responses": 0.5, "correctness_stderr,all_responses": 0.1}
    config = {
        "model": "capcal-hf",
        "model_args": {"pretrained": "/m", "trust_remote_code": True},
        "gen_kwargs": {"max_gen_toks": 8},
        "limit": 6.0,
        "batch_size": "auto",
        "batch_sizes": [16, 8],
    }
    results = {
        "results": {"capcal_toy": row},
        "versions": {"capcal_toy": 1.0},
        "n-shot": {"capcal_toy": 0},
        "higher_is_better": {"capcal_toy": {"correctness": True}},
        "configs": {"capcal_toy": {}},
        "config": config,
        "capcal_adaptive": {"model": "other", "limit": 99, "batch_size": 1, "looks": [2, 4], "tasks": {}},
    }
    lines = format_results(results, num_fewshot=3).splitlines()
    assert lines[0] == (
        "capcal-hf ({'pretrained': '/m'}), gen_kwargs: ({'max_gen_toks': 8}), limit: 6.0, num_fewshot: 3, "
        "batch_size: auto (16,8)"
    )
    cells = [[cell.strip() for cell in line.split("|")[1:-1]] for line in (lines[1], lines[3])]
    assert cells == [
        ["Tasks", "Version", "Filter", "n-shot", "Metric", "", "Value", "", "Stderr"],
        ["capcal_toy", "1", "all_responses", "0", "correctness", "↑", "0.5", "±", "0.1"],
    ]


def test_a_plan_with_several_problems_is_refused_for_the_first_in_the_documented_order(tmp_path):
    """``check_inputs``' checks of the plan run in the order its docstring gives: greedy decoding with k > 1,
    then few-shot examples without a few-shot split, then an unwritable sample cache. A plan with all three
    is refused for the greedy decoding; fixed one at a time, for the next."""
    from analysis.evaluation import EvaluationInputError
    from analysis.evaluation.harness import _run_plan_checks

    (tmp_path / "file").write_text("not a folder")
    unwritable = {"cache_path": str(tmp_path / "file" / "samples.sqlite")}
    config = {
        "t": {
            "output_type": "generate_until",
            "test_split": "test",
            "repeats": 4,
            "generation_kwargs": {"do_sample": False, "until": ["\n"]},
            "metadata": {"capcal_task": "sampling"},
        }
    }
    sampling = {"do_sample": True, "temperature": 1.0}
    for gen_kwargs, num_fewshot, start in [
        (None, 2, "greedy decoding with k = 4 responses per question on t"),
        (sampling, 2, "--num_fewshot 2: t has no few-shot split"),
        (
            sampling,
            None,
            f"cache_path={unwritable['cache_path']}: {tmp_path / 'file'} is a file, not a folder",
        ),
    ]:
        with pytest.raises(EvaluationInputError) as refused:
            _run_plan_checks("capcal-hf", unwritable, config, 4, gen_kwargs, num_fewshot, False, None)
        assert str(refused.value).startswith(start)
    assert _run_plan_checks("capcal-hf", {}, config, 4, sampling, None, True, None) == []
