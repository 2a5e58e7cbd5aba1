"""Stock lm-eval tasks sampled k times by capcal (capcal_tasks.sampled_task), end to end on the real SmolLM2,
offline, their rows read from ../shared/data:

A. ``capcal eval --tasks <nine stock tasks of seven families> --repeats 2 --limit 2 --metadata
   capcal_confidences=ptrue,verbalized`` with capcal-hf, one run:
   every response's logged 0/1 label equals the UNMODIFIED task's own score of that response alone (its
   whole filter pipeline, take_first included, then its own ``process_results``), every extracted answer is
   that pipeline's output, the task's own metric in the results table is the mean of expected_accuracy, and
   ``capcal check`` joins every P(True) and verbalized record to its question and finds every run complete
   but the verbalized ones whose 24 tokens cut SmolLM2's reasoning before its \\boxed{P} (it says so), and
   ``capcal report`` writes a report that states the protocol and reads both confidences; each verbalized
   record is the task's own question asked in capcal's verbalized prompt, parsed by capcal's parser;
B. stock ``lm_eval`` (the ``hf`` model) on a YAML task of lm-eval's ``class:`` form that names the base task
   and k as metadata and on the P(True) task of it (a second YAML, ``SampledPTrueTask``), then the same
   re-score agreement, ``capcal check`` (the P(True) records joined) and ``capcal report`` on its output;
A'. the same run also names ``gsm8k_calibration`` (capcal_tasks.sampled_calibration): its results carry the
   calibration columns, equal to a hand computation from its logged labels, P(True) log-likelihoods and
   verbalized responses, each label the unmodified task's score; ``capcal check`` states its protocol;
B'. stock ``lm_eval`` on a third YAML of the ``class:`` form, ``SampledCalibrationTask``: the same;
C. ``capcal eval`` on three tasks the rule refuses (and a calibration task of one of them), one whose
   few-shot rows are not in the folder and one whose prompt does not allow the verbalized confidence asked
   for: exit 2, one line per task, before any model loads; ``<stock>_calibration`` without ``--repeats``:
   one line.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.evaluation import EvaluationInputError, check_inputs

# task -> (its YAML under lm-eval's task folder, the pipeline capcal keeps, the metric it reads)
STOCK_TASKS = {
    "gsm8k": ("gsm8k/gsm8k.yaml", "strict-match", "exact_match"),
    "gsm8k_cot": ("gsm8k/gsm8k-cot.yaml", "strict-match", "exact_match"),
    "triviaqa": ("triviaqa/default.yaml", "remove_whitespace", "exact_match"),
    "nq_open": ("nq_open/nq_open.yaml", "remove_whitespace", "exact_match"),
    "bbh_cot_fewshot_boolean_expressions": (
        "bbh/cot_fewshot/boolean_expressions.yaml",
        "get-answer",
        "exact_match",
    ),
    "bbh_cot_fewshot_date_understanding": (
        "bbh/cot_fewshot/date_understanding.yaml",
        "get-answer",
        "exact_match",
    ),
    "minerva_math500": ("minerva_math/minerva_math500.yaml", "none", "exact_match"),
    "aime25": ("aime/aime25.yaml", "none", "exact_match"),
    "mmlu_anatomy_generative": ("mmlu/generative/mmlu_anatomy.yaml", "get_response", "exact_match"),
}
LIMIT, K = 2, 2
CALIBRATION = "gsm8k_calibration"  # the calibration task of gsm8k (capcal_tasks.sampled_calibration)
LM_EVAL = str(Path(sys.executable).with_name("lm_eval"))


def _env(data_dir: Path) -> dict[str, str]:
    return {**os.environ, "CAPCAL_DATA_DIR": str(data_dir), "OMP_NUM_THREADS": "1"}


def _checked(result: subprocess.CompletedProcess, check: bool) -> subprocess.CompletedProcess:
    if check:
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result


def _run(command: list[str], data_dir: Path, check: bool = True) -> subprocess.CompletedProcess:
    """``command`` in a fresh process (stock ``lm_eval``: nothing of capcal imported before lm-eval's own
    loading of the task YAMLs)."""
    result = subprocess.run(command, env=_env(data_dir), capture_output=True, text=True, timeout=1800)
    return _checked(result, check)


def _capcal(
    forked_cli, arguments: list[str], data_dir: Path, check: bool = True
) -> subprocess.CompletedProcess:
    """``capcal ARGUMENTS`` in a process of its own, forked from ``forked_cli`` (tests/conftest.py: the server
    that imported lm-eval and torch once; a real run loads its model in that process)."""
    return _checked(forked_cli.capcal(arguments, Path.cwd(), 1800, env=_env(data_dir)), check)


def _samples(output: Path, task: str) -> list[dict]:
    files = list(output.rglob(f"samples_{task}_2*.jsonl"))
    assert len(files) == 1, files
    return [json.loads(line) for line in files[0].read_text().splitlines()]


def _results(output: Path) -> dict:
    files = list(output.rglob("results_*.json"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


@pytest.fixture(scope="module")
def capcal_run(tmp_path_factory, smollm2_path, shared_data, forked_cli) -> Path:
    output = tmp_path_factory.mktemp("wrapped")
    _capcal(
        forked_cli,
        ["eval", "--model", "capcal-hf", "--model_args", f"pretrained={smollm2_path}",
         "--tasks", ",".join([*STOCK_TASKS, CALIBRATION]), "--repeats", str(K),
         "--limit", str(LIMIT),
         "--gen_kwargs", "max_gen_toks=24", "--apply_chat_template", "--seed", "7",
         "--metadata", "capcal_confidences=ptrue,verbalized",
         "--log_samples", "--output_path", str(output)],
        shared_data,
    )  # fmt: skip
    return output


@pytest.mark.slow
@pytest.mark.parametrize("task", list(STOCK_TASKS))
def test_every_label_is_the_unmodified_tasks_score(capcal_run, shared_data, task, wrapped_rescore):
    relative, pipeline, metric = STOCK_TASKS[task]
    lines = _samples(capcal_run, task)
    assert [line["doc_id"] for line in lines] == list(range(LIMIT))
    wrapped_rescore.check_labels_are_the_unmodified_tasks_scores(
        lines, task, relative, pipeline, metric, shared_data, K
    )
    results = _results(capcal_run)["results"][task]
    mean = sum(line["expected_accuracy"] for line in lines) / len(lines)
    assert results[f"{metric},{pipeline}"] == pytest.approx(mean)
    assert results[f"expected_accuracy,{pipeline}"] == pytest.approx(mean)


@pytest.mark.slow
def test_capcal_check_and_report_read_wrapped_tasks(capcal_run, shared_data, tmp_path, forked_cli):
    checked = _capcal(forked_cli, ["check", str(capcal_run)], shared_data, check=False)
    runs = 3 * len(STOCK_TASKS)  # each task, its P(True) and its verbalized-confidence task
    # SmolLM2 reasons at length before a \boxed{P}, which 24 tokens cut: check calls such a verbalized run
    # incomplete (the run's limit is to blame, not the model) and says why; every other run is complete
    incomplete = [line for line in checked.stdout.splitlines() if line.startswith("incomplete: ")]
    for line in incomplete:
        assert line.split()[2] in {f"{task}_verbalized" for task in STOCK_TASKS}, line
        assert ": verbalized confidence parsed for " in line and "(likely cause: max_gen_toks=24 cut " in line
    assert f"{runs - len(incomplete)} of {runs} run(s) complete" in checked.stdout
    assert checked.returncode == (1 if incomplete else 0), checked.stderr[-2000:]
    for task in STOCK_TASKS:  # every P(True) and verbalized record joins a question of the wrapped task
        joined = f"-> {task}: matched {LIMIT} of {LIMIT} records and {LIMIT} {task} questions"
        for confidence in ("ptrue", "verbalized"):
            assert f"join {task}_{confidence} (" in checked.stdout
            assert checked.stdout.count(joined) == 2, (task, checked.stdout)
    assert "gsm8k: lm-eval task gsm8k (version 3.0) sampled k = 2 times per question" in checked.stdout
    # the calibration task's results are its columns (not a run check reads), but its protocol is stated
    assert (
        f"{CALIBRATION}: lm-eval task gsm8k (version 3.0) sampled k = 2 times per question" in checked.stdout
    )
    assert "temperature 0.0 -> 1.0" in checked.stdout
    assert "aime25: answer classes: none" in checked.stdout
    config = _results(capcal_run)["configs"]["gsm8k"]
    assert config["repeats"] == K and config["generation_kwargs"]["do_sample"] is True
    assert config["metadata"]["capcal_sampled"]["task_generation_kwargs"]["do_sample"] is False
    _capcal(forked_cli, ["report", str(capcal_run), "--output", str(tmp_path / "report")], shared_data)
    text = (tmp_path / "report" / "report.md").read_text()
    for task in STOCK_TASKS:  # each task's section reads its P(True) and verbalized runs
        assert f"| {task}_verbalized | confidence |  | {task} |" in text
    assert len(re.findall(r"_parse failures: ptrue 0/2; verbalized [0-2]/2_", text)) == len(STOCK_TASKS)
    # the report section states the protocol (plain Markdown: parentheses and arrows bare)
    assert "lm-eval task bbh_cot_fewshot_boolean_expressions (version 4.0) sampled k = 2" in text
    assert "temperature 0.0 -> 1.0" in text


def _check_calibration_columns(output: Path, task: str, pipeline: str, k: int) -> dict:
    """The results of the wrapped calibration task ``task`` carry every calibration column (or say why one is
    left out), equal to a hand computation from its samples: mu_i from the logged labels, P(True) from the
    logged Yes/No log-likelihoods, the verbalized confidence parsed from the logged response. Returns its
    configs entry."""
    from capcal_tasks.calibration_columns import COLUMNS
    from capcal_tasks.confidence.verbalized import parse_verbalized_confidence

    results = _results(output)
    row, config = results["results"][task], results["configs"][task]
    bookkeeping = config["capcal_calibration"]
    assert bookkeeping["samples_per_question"] == k
    for column in COLUMNS:
        assert f"{column.name},{pipeline}" in row or column.name in bookkeeping["left_out_columns"], column
    lines = _samples(output, task)
    mu = [sum(line["correctness"]) / k for line in lines]
    p_true = [
        1 / (1 + math.exp(float(line["resps"][2][0][0]) - float(line["resps"][1][0][0]))) for line in lines
    ]
    failed = [parse_verbalized_confidence(line["resps"][3][0]) is None for line in lines]
    assert row[f"expected_accuracy,{pipeline}"] == pytest.approx(sum(mu) / len(lines))
    brier = sum((p - m) ** 2 for p, m in zip(p_true, mu, strict=True)) / len(lines)
    assert row[f"ptrue_brier,{pipeline}"] == pytest.approx(brier)
    assert row[f"verbalized_parse_failure_rate,{pipeline}"] == pytest.approx(sum(failed) / len(lines))
    # k = 2: the leakage-free consistency needs k >= 4, said in the bookkeeping
    assert math.isnan(row[f"consistency_brier,{pipeline}"])
    assert "needs k >= 4" in bookkeeping["undefined_columns"]["consistency_brier"]
    assert config["metadata"]["capcal_task"] == "leaderboard"
    assert config["metadata"]["capcal_sampled"]["base_task"] == "gsm8k"
    return config


@pytest.mark.slow
def test_a_wrapped_calibration_task_reports_the_columns(capcal_run, shared_data, wrapped_rescore):
    lines = _samples(capcal_run, CALIBRATION)
    assert [line["doc_id"] for line in lines] == list(range(LIMIT))
    wrapped_rescore.check_calibration_labels_are_the_unmodified_tasks_scores(
        lines, CALIBRATION, "gsm8k/gsm8k.yaml", "strict-match", "exact_match", shared_data, K
    )
    config = _check_calibration_columns(capcal_run, CALIBRATION, "strict-match", K)
    assert config["verbalized_generation_kwargs"]["max_gen_toks"] == 24  # --gen_kwargs reaches it
    assert config["generation_kwargs"]["max_gen_toks"] == 24
    # it asks its confidences itself: capcal_confidences adds no separate task for it
    assert not {f"{CALIBRATION}_ptrue", f"{CALIBRATION}_verbalized"} & set(_results(capcal_run)["results"])


@pytest.mark.slow
def test_verbalized_records_ask_the_tasks_own_question(capcal_run):
    from capcal_tasks.confidence.verbalized import parse_verbalized_confidence

    results = _results(capcal_run)
    for task in STOCK_TASKS:
        questions = {line["doc_id"]: line for line in _samples(capcal_run, task)}
        lines = _samples(capcal_run, f"{task}_verbalized")
        assert sorted(line["doc_id"] for line in lines) == list(range(LIMIT))
        for line in lines:
            sampled = questions[line["doc_id"]]
            assert line["doc"]["question_id"] == f"{task}/doc-{sampled['doc_hash']}"  # lm-eval's doc hash
            prompt = line["arguments"]["gen_args_0"]["arg_0"]
            assert "How likely are you to answer the question correctly?" in prompt
            assert line["doc"]["question_text"] in prompt and line["doc"]["question_text"]
            assert line["target"] == sampled["target"]  # the base task's gold
            (response,) = line["resps"][0]
            assert line["verbalized_confidence"] == parse_verbalized_confidence(response)
            assert line["parse_success"] == int(line["verbalized_confidence"] is not None)
        table = results["results"][f"{task}_verbalized"]
        assert table["parse_failures,none"] == sum(1 - line["parse_success"] for line in lines)
        config = results["configs"][f"{task}_verbalized"]
        assert config["metadata"]["capcal_target_task"] == task
        assert config["generation_kwargs"]["max_gen_toks"] == 24  # --gen_kwargs reaches it
    assert results["configs"]["gsm8k_verbalized"]["generation_kwargs"]["do_sample"] is True


@pytest.mark.slow
def test_stock_lm_eval_runs_a_wrapped_task_and_its_ptrue_task(
    tmp_path, smollm2_path, shared_data, wrapped_rescore, forked_cli
):
    """lm-eval's ``class:`` route: a SampledTask YAML and a SampledPTrueTask YAML beside it (its target: its
    name without ``_ptrue``). ``--metadata capcal_confidences`` alone adds no task under stock lm_eval: the
    wrapped task says so in one warning line."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "gsm8k_k2.yaml").write_text(
        "task: gsm8k_k2\nclass: !function capcal_tasks.sampled_task.SampledTask\n"
        "metadata:\n  base_task: gsm8k\n  k: 2\n  filter: flexible-extract\n"
    )
    (tasks / "gsm8k_k2_ptrue.yaml").write_text(
        "task: gsm8k_k2_ptrue\nclass: !function capcal_tasks.sampled_task.SampledPTrueTask\n"
        "metadata:\n  base_task: gsm8k\n"
    )
    (tasks / "gsm8k_k2_calibration.yaml").write_text(
        "task: gsm8k_k2_calibration\n"
        "class: !function capcal_tasks.sampled_calibration.SampledCalibrationTask\n"
        "metadata:\n  base_task: gsm8k\n  k: 2\n  filter: flexible-extract\n"
    )
    output = tmp_path / "out"
    run = _run(
        [LM_EVAL, "--model", "hf", "--model_args", f"pretrained={smollm2_path}", "--include_path", str(tasks),
         "--tasks", "gsm8k_k2,gsm8k_k2_ptrue,gsm8k_k2_calibration", "--limit", "2", "--num_fewshot", "1",
         "--gen_kwargs", "max_gen_toks=16", "--apply_chat_template",
         "--metadata", '{"capcal_confidences": "ptrue"}',
         "--log_samples", "--output_path", str(output)],
        shared_data,
    )  # fmt: skip
    assert "task gsm8k_k2: metadata capcal_confidences is read by capcal eval only" in run.stderr
    lines = _samples(output, "gsm8k_k2")
    assert len(lines) == 2
    wrapped_rescore.check_labels_are_the_unmodified_tasks_scores(
        lines, "gsm8k_k2", "gsm8k/gsm8k.yaml", "flexible-extract", "exact_match", shared_data, 2
    )
    calibration = _samples(output, "gsm8k_k2_calibration")
    wrapped_rescore.check_calibration_labels_are_the_unmodified_tasks_scores(
        calibration, "gsm8k_k2_calibration", "gsm8k/gsm8k.yaml", "flexible-extract", "exact_match",
        shared_data, 2,
    )  # fmt: skip
    _check_calibration_columns(output, "gsm8k_k2_calibration", "flexible-extract", 2)
    ptrue = _samples(output, "gsm8k_k2_ptrue")
    assert len(ptrue) == 2 and all(0.0 <= line["p_true"] <= 1.0 for line in ptrue)
    checked = _capcal(forked_cli, ["check", str(output)], shared_data)
    assert "2 of 2 run(s) complete" in checked.stdout
    assert "gsm8k_k2: lm-eval task gsm8k (version 3.0) sampled k = 2 times" in checked.stdout
    assert "join gsm8k_k2_ptrue (" in checked.stdout
    assert "-> gsm8k_k2: matched 2 of 2 records and 2 gsm8k_k2 questions" in checked.stdout
    _capcal(forked_cli, ["report", str(output), "--output", str(tmp_path / "report")], shared_data)
    assert (tmp_path / "report" / "report.html").is_file()
    assert "p_true" in (tmp_path / "report" / "report.md").read_text()


@pytest.mark.slow
def test_refusals_come_before_the_model(smollm2_path, shared_data, tmp_path, forked_cli):
    refused = _capcal(
        forked_cli,
        ["eval", "--model", "capcal-hf", "--model_args", f"pretrained={smollm2_path}",
         "--tasks", "gsm8k_cot_self_consistency,wmt16-de-en,arc_challenge,nq_open,"
         "arc_challenge_chat,arc_challenge_calibration,gsm8k_cot_llama_calibration",
         "--repeats", "8", "--num_fewshot", "1", "--metadata", "capcal_confidences=ptrue,verbalized",
         "--output_path", str(tmp_path)],
        shared_data,
        check=False,
    )  # fmt: skip
    assert refused.returncode == 2
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("capcal eval: error: task gsm8k_cot_self_consistency: already samples 64")
    assert lines[1].startswith("task wmt16-de-en: its metrics (bleu, ter, chrf) are corpus-level")
    assert lines[2].startswith("task arc_challenge: output_type is multiple_choice")
    # nq_open is admitted, but one example per prompt needs its train split, which is not in the folder
    assert lines[3].startswith("task nq_open: reads google-research-datasets/nq_open, split train, from ")
    assert lines[3].endswith(
        "nq_open/NQ-open.train.jsonl, which is not there; put that file there or unset CAPCAL_DATA_DIR"
    )
    # arc_challenge_chat is admitted, but its prompt ends in instructions for the answer
    assert lines[4].startswith(
        "task arc_challenge_chat: capcal_confidences asks for the verbalized confidence, which its prompt "
        "does not allow: its prompt ends in "
    )
    # a calibration task's base is admitted or refused as the base alone
    assert lines[5].startswith("task arc_challenge_calibration: output_type is multiple_choice")
    # gsm8k_cot_llama's prompt does not allow the verbalized confidence either, but its calibration task
    # asks P(True) only and says why in its results: not refused
    assert len(lines) == 6, refused.stderr  # nothing else: no model was loaded
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_greedy_gen_kwargs_are_refused_on_a_wrapped_task(shared_data, monkeypatch):
    """A wrapped stock task samples (gsm8k's greedy settings become temperature 1.0), but ``--gen_kwargs
    temperature=0`` would make its k responses one response repeated: refused before any model loads, as on
    capcal's own tasks; without it the same inputs pass."""
    monkeypatch.setenv("CAPCAL_DATA_DIR", str(shared_data))
    with pytest.raises(EvaluationInputError) as refused:
        check_inputs("capcal-hf", ["gsm8k"], repeats=4, gen_kwargs="temperature=0")
    assert str(refused.value).startswith(
        "greedy decoding with k = 4 responses per question on gsm8k: temperature=0, so the k responses are "
    )
    assert "drop temperature=0 from --gen_kwargs" in str(refused.value)
    check_inputs("capcal-hf", ["gsm8k"], repeats=4, gen_kwargs="temperature=0.7")


@pytest.mark.slow
def test_a_calibration_task_needs_repeats(shared_data, monkeypatch):
    """``<stock>_calibration`` takes k from ``--repeats``: without it (or with 1) one line before any model
    loads; with it the same inputs pass."""
    monkeypatch.setenv("CAPCAL_DATA_DIR", str(shared_data))
    for repeats in (None, 1):
        with pytest.raises(EvaluationInputError) as refused:
            check_inputs("capcal-hf", [CALIBRATION], repeats=repeats)
        assert str(refused.value) == (
            f"task {CALIBRATION}: the calibration task of gsm8k samples k responses per question, k from "
            f"--repeats (got {repeats}); give --repeats K with K >= 2"
        )
    check_inputs("capcal-hf", [CALIBRATION], repeats=2)


@pytest.mark.slow
def test_an_unknown_confidence_name_is_refused_by_the_input_check(shared_data, monkeypatch):
    """``capcal_confidences`` naming a confidence capcal does not know is one line of the input check (before
    any model loads), with or without ``repeats``; the known names pass it."""
    monkeypatch.setenv("CAPCAL_DATA_DIR", str(shared_data))
    for repeats in (4, None):
        with pytest.raises(EvaluationInputError, match="unknown confidence 'verbalised'; choose from ptrue"):
            check_inputs(
                "capcal-hf", ["gsm8k"], repeats=repeats, metadata={"capcal_confidences": "verbalised"}
            )
    check_inputs("capcal-hf", ["gsm8k"], repeats=4, metadata={"capcal_confidences": "ptrue,verbalized"})
