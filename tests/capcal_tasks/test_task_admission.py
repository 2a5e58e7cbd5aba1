"""The static rule that admits or refuses an lm-eval task for k-sample scoring
(capcal_tasks.task_admission), on lm-eval 0.4.13's own task YAMLs (read as its task index reads them:
includes merged, functions not imported), one test per rule; and the local rows a wrapped task reads
without the hub (capcal_tasks.local_rows). No model, no task index."""

from __future__ import annotations

import json

import pytest
from lm_eval.tasks._yaml_loader import load_yaml

from capcal_tasks.local_rows import MissingLocalRows, local_dataset, local_file, needed_splits
from capcal_tasks.sampled_protocol import has_answer_classes, protocol_lines
from capcal_tasks.task_admission import RefusedTask, admit, refusal_lines
from capcal_tasks.task_names import lm_eval_tasks_dir

TASKS = lm_eval_tasks_dir()


def stock(relative: str) -> dict:
    """An lm-eval task's YAML as its task index holds it."""
    return load_yaml(TASKS / relative, resolve_func=False, recursive=True)


def test_admits_gsm8k_with_its_first_pipeline_or_the_one_named():
    config = stock("gsm8k/gsm8k.yaml")
    first = admit("gsm8k", config)
    assert (first.pipeline, first.metric, first.extracts) == ("strict-match", "exact_match", True)
    assert [step["function"] for step in first.filters] == ["regex"]  # the final take_first dropped
    flexible = admit("gsm8k", config, {"filter": "flexible-extract"})
    assert flexible.pipeline == "flexible-extract"
    assert flexible.filters[0]["group_select"] == -1
    by_task = admit("gsm8k", config, {"filter": {"gsm8k": "flexible-extract", "other": "x"}})
    assert by_task.pipeline == "flexible-extract"
    with pytest.raises(RefusedTask, match="no filter pipeline named 'loose'.*strict-match, flexible-extract"):
        admit("gsm8k", config, {"filter": "loose"})


def test_answer_classes_only_where_the_metric_sees_the_answer():
    # triviaqa: whole short responses, compared by exact_match itself: its normalisation gives the classes
    assert admit("triviaqa", stock("triviaqa/default.yaml")).extracts
    # aime25: whole responses reach its own process_results, which extracts out of sight: no classes
    aime = admit("aime25", stock("aime/aime25.yaml"))
    assert (aime.pipeline, aime.filters, aime.extracts) == ("none", (), False)


def test_refuses_a_task_that_already_samples():
    with pytest.raises(RefusedTask, match=r"already samples 64 responses per question \(repeats: 64\)"):
        admit("gsm8k_cot_self_consistency", stock("gsm8k/gsm8k-cot-self-consistency.yaml"))


@pytest.mark.parametrize(
    ("pipeline", "voting"), [("maj@64", "majority_vote"), ("maj@8", "majority_vote, take_first_k")]
)
def test_refuses_a_voting_pipeline(pipeline, voting):
    config = {**stock("gsm8k/gsm8k-cot-self-consistency.yaml"), "repeats": 1}
    assert admit("sc", config).pipeline == "score-first"  # its first pipeline scores each response
    with pytest.raises(RefusedTask, match=f"pipeline {pipeline} holds {voting}: it scores a vote"):
        admit("sc", config, {"filter": pipeline})


def test_refuses_a_pipeline_not_ending_in_take_first():
    with pytest.raises(RefusedTask, match=r"pipeline create_test ends in custom \(.*build_predictions\)"):
        admit("humaneval", stock("humaneval/humaneval.yaml"))


def test_refuses_what_is_not_generate_until():
    with pytest.raises(RefusedTask, match="output_type is multiple_choice, not generate_until"):
        admit("arc_challenge", stock("arc/arc_challenge.yaml"))


def test_refuses_corpus_metrics():
    with pytest.raises(RefusedTask, match=r"metrics \(bleu, ter, chrf\) are corpus-level"):
        admit("wmt16-de-en", stock("translation/wmt16_de-en.yaml"))


def test_refuses_a_task_without_a_zero_one_metric_and_names_the_one_to_choose():
    config = stock("ifeval/ifeval.yaml")
    with pytest.raises(RefusedTask, match="--metadata correct_metric=prompt_level_strict_acc$"):
        admit("ifeval", config)
    named = admit("ifeval", config, {"correct_metric": "prompt_level_strict_acc"})
    assert (named.metric, named.metric_named) == ("prompt_level_strict_acc", True)
    with pytest.raises(RefusedTask, match="inst_level_strict_acc is not aggregated by mean"):
        admit("ifeval", config, {"correct_metric": "inst_level_strict_acc"})
    with pytest.raises(RefusedTask, match="has no metric 'acc'"):
        admit("ifeval", config, {"correct_metric": "acc"})


def test_refuses_a_python_task_class():
    with pytest.raises(RefusedTask, match="Python task class"):
        admit("squadv2", stock("squadv2/squadv2.yaml"))


def test_refusals_are_one_line_each():
    text = refusal_lines([("a", "why a"), ("b", "why b")])
    assert text.splitlines() == ["task a: why a", "task b: why b"]


def test_local_files_of_the_stock_datasets():
    assert local_file("openai/gsm8k", "main", "test") == "gsm8k/test.jsonl"
    assert local_file("SaylorTwift/bbh", "navigate", "test") == "bbh/navigate.json"
    assert local_file("cais/mmlu", "anatomy", "dev") == "mmlu/dev/anatomy_dev.csv"
    assert local_file("google-research-datasets/nq_open", None, "validation") == "nq_open/NQ-open.dev.jsonl"
    assert local_file("mandarjoshi/trivia_qa", "rc", "validation") is None  # with context: not the file
    assert local_file("unknown/dataset", None, "test") is None


def test_few_shot_splits_needed():
    gsm8k = stock("gsm8k/gsm8k.yaml")
    assert needed_splits(gsm8k, None) == ("test", ["train"])  # 5-shot from train
    assert needed_splits(gsm8k, 0) == ("test", [])
    bbh = stock("bbh/cot_fewshot/boolean_expressions.yaml")
    assert needed_splits(bbh, None) == ("test", [])  # its examples are in the YAML


def test_local_rows_are_the_files_rows(tmp_path, shared_data):
    bbh = stock("bbh/cot_fewshot/boolean_expressions.yaml")
    rows = local_dataset("bbh_b", bbh, root=shared_data)()["test"]
    source = json.loads((shared_data / "bbh" / "boolean_expressions.json").read_text())["examples"]
    assert len(rows) == len(source) == 250
    assert rows[7] == {"input": source[7]["input"], "target": source[7]["target"]}
    mmlu = stock("mmlu/generative/mmlu_anatomy.yaml")
    split = local_dataset("mmlu_anatomy_generative", mmlu, root=shared_data)()
    first = split["test"][0]
    assert first["choices"][0] == "paralysis of the facial muscles."  # the CSV's first row, column A
    assert first["answer"] == 0 and first["subject"] == "anatomy" and len(split["test"]) == 135
    assert len(split["dev"]) == 5  # the few-shot split a zero-shot run does not need: read when there
    nq_open = stock("nq_open/nq_open.yaml")
    nq_rows = local_dataset("nq_open", nq_open, root=shared_data)()
    assert len(nq_rows["validation"]) == 3610
    assert len(nq_rows["train"]) == 0  # not in the folder and not needed zero-shot: empty, never read
    with pytest.raises(MissingLocalRows, match=r"split train, from .*nq_open/NQ-open.train.jsonl"):
        local_dataset("nq_open", nq_open, num_fewshot=1, root=shared_data)
    with pytest.raises(
        MissingLocalRows, match=r"split test, from .*/bbh/boolean_expressions.json, which is not"
    ):
        local_dataset("bbh_b", bbh, root=tmp_path)
    gsm8k = stock("gsm8k/gsm8k.yaml")
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "test.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n')
    with pytest.raises(MissingLocalRows, match=r"split train, from .*gsm8k/train.jsonl"):  # 5-shot needs it
        local_dataset("gsm8k", gsm8k, root=tmp_path)
    assert local_dataset("gsm8k", gsm8k, num_fewshot=0, root=tmp_path)()["test"][0]["question"] == "q"


def test_protocol_lines_show_what_the_run_used():
    config = {
        "task": "gsm8k",
        "num_fewshot": 5,
        "generation_kwargs": {"until": ["Q:"], "do_sample": True, "temperature": 0.7, "max_gen_toks": 64},
        "metadata": {
            "capcal_sampled": {
                "base_task": "gsm8k",
                "base_version": 3.0,
                "pipeline": "flexible-extract",
                "pipeline_filters": ["regex"],
                "metric": "exact_match",
                "answer_classes": "filter output",
                "k": 8,
                "task_generation_kwargs": {"until": ["Q:"], "do_sample": False, "temperature": 0.0},
                "num_fewshot": 5,
            }
        },
    }
    lines = protocol_lines(config)
    assert lines[0] == "gsm8k: lm-eval task gsm8k (version 3.0) sampled k = 8 times per question"
    # the settings the run used (after --gen_kwargs), not those the wrapper set, each with who changed it
    assert lines[2] == (
        "gsm8k: generation settings changed: do_sample False -> True, max_gen_toks None -> 64, "
        "temperature 0.0 -> 0.7"
    )  # an older protocol, without generation_changed: no attribution
    config["metadata"]["capcal_sampled"]["generation_changed"] = {
        "do_sample": [False, True],
        "temperature": [0.0, 1.0],
        "top_k": [None, 0],
    }
    config["generation_kwargs"]["top_k"] = 0
    assert protocol_lines(config)[2] == (
        "gsm8k: generation settings changed: do_sample False -> True (capcal), max_gen_toks None -> 64 "
        "(--gen_kwargs), temperature 0.0 -> 0.7 (capcal, then --gen_kwargs), top_k None -> 0 (capcal)"
    )
    assert has_answer_classes(config)
    config["metadata"]["capcal_sampled"]["answer_classes"] = None
    assert not has_answer_classes(config) and "consistency left out" in protocol_lines(config)[4]
    assert protocol_lines({"task": "capcal_gsm8k", "metadata": {"capcal_task": "sampling"}}) == []
