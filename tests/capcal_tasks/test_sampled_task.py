"""SampledTask (capcal_tasks.sampled_task) and the P(True) task on its questions
(capcal_tasks.sampled_confidence), on lm-eval's real gsm8k and aime25 tasks with their rows from
../shared/data, scored on hand-written responses (no model, no task index)."""

from __future__ import annotations

import json

import datasets
import pytest
from lm_eval.api.task import ConfigurableTask
from lm_eval.tasks._yaml_loader import load_yaml
from lm_eval.utils import handle_non_serializable, hash_string

from capcal_tasks.local_rows import local_dataset
from capcal_tasks.sampled_confidence import ptrue_task, question_text
from capcal_tasks.sampled_task import SampledPTrueTask, SampledTask, sampling_generation_kwargs
from capcal_tasks.task_admission import RefusedTask
from capcal_tasks.task_names import lm_eval_tasks_dir


def _stock(relative: str, data_dir) -> ConfigurableTask:
    path = lm_eval_tasks_dir() / relative
    config = load_yaml(path, resolve_func=True)
    for key in ("tag", "group"):
        config.pop(key, None)
    rows = local_dataset(config["task"], load_yaml(path, resolve_func=False, recursive=True), root=data_dir)()
    config["custom_dataset"] = lambda **_: datasets.DatasetDict(dict(rows))
    return ConfigurableTask(config=config)


@pytest.fixture(scope="module")
def gsm8k(shared_data) -> ConfigurableTask:
    return _stock("gsm8k/gsm8k.yaml", shared_data)


def _scored(task: SampledTask, doc: dict, responses: list[str]) -> dict:
    """The record of one question, the responses passed through the wrapped task's own pipeline."""
    task.build_all_requests(limit=1, rank=0, world_size=1)
    (instance,) = [i for i in task.instances if i.doc_id == 0]
    instance.resps = list(responses)
    task.apply_filters()
    (filtered,) = instance.filtered_resps.values()
    return task.process_results(doc, [filtered])


def test_each_response_is_scored_by_the_tasks_own_metric(gsm8k):
    wrapped = SampledTask(base=gsm8k, k=4)
    doc = gsm8k.eval_docs[0]  # Janet's ducks: 18
    assert doc["answer"].endswith("#### 18")
    record = _scored(wrapped, doc, ["so #### 18", "it is #### 18.", "#### 7", "no idea"])
    assert record["extracted_answers"] == ["18", "18.", "7", None]  # regex's [invalid] is no answer
    assert record["correctness"] == [1, 1, 0, 0]  # gsm8k's exact_match drops a final "."
    assert record["n_samples"] == 4 and record["expected_accuracy"] == 0.5
    assert record["exact_match"] == 0.5  # the task's own metric, averaged over the k responses
    assert record["pass_at_1"] == pytest.approx(0.5) and record["pass_at_2"] == pytest.approx(1 - 1 / 6)
    # "18" and "18." are one class (the metric cannot tell them apart): 2 votes against 1
    assert record["majority_vote_accuracy"] == 1.0
    assert wrapped.config.repeats == 4 and wrapped.config.task == "gsm8k"
    assert wrapped.config.metadata["capcal_task"] == "sampling"
    assert gsm8k.config.repeats == 1 and gsm8k.config.generation_kwargs["do_sample"] is False  # untouched


def test_the_chosen_pipeline_is_kept(gsm8k):
    wrapped = SampledTask(base=gsm8k, k=2, metadata={"filter": "flexible-extract"})
    record = _scored(wrapped, gsm8k.eval_docs[0], ["She makes 9 * 2 = 18 dollars", "maybe 16 - 3 = 13"])
    assert record["extracted_answers"] == ["18", "13"]  # the last number of each response
    assert record["correctness"] == [1, 0]
    with pytest.raises(RefusedTask, match="no filter pipeline named 'x'"):
        SampledTask(base=gsm8k, k=2, metadata={"filter": "x"})


def test_whole_responses_have_no_answer_classes(shared_data):
    aime = _stock("aime/aime25.yaml", shared_data)
    wrapped = SampledTask(base=aime, k=2)
    doc = aime.eval_docs[0]
    record = _scored(wrapped, doc, [f"so \\boxed{{{doc['answer']}}}", "\\boxed{1}"])
    assert record["correctness"] == [1, 0]
    assert "majority_vote_accuracy" not in record
    assert wrapped.config.metadata["capcal_sampled"]["answer_classes"] is None


def test_greedy_settings_become_sampling_and_say_so():
    settings, changed = sampling_generation_kwargs({"until": ["Q:"], "do_sample": False, "temperature": 0.0})
    assert settings == {"until": ["Q:"], "do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": 0}
    assert changed == {
        "do_sample": [False, True],
        "temperature": [0.0, 1.0],
        "top_p": [None, 1.0],
        "top_k": [None, 0],
    }
    kept, none = sampling_generation_kwargs(
        {"until": [], "do_sample": True, "temperature": 0.6, "top_p": 0.95}
    )
    assert kept == {"until": [], "do_sample": True, "temperature": 0.6, "top_p": 0.95} and none == {}
    assert sampling_generation_kwargs({"until": []}, temperature=0.7)[0]["temperature"] == 0.7


def test_question_text_of_a_stock_prompt():
    assert question_text("Question: How many eggs?\nAnswer:") == "How many eggs?"
    assert question_text("Q: not ( True )\nA: Let's think step by step.\n") == "not ( True )"
    assert question_text("Problem:\nFind x.\n\nSolution:") == "Find x."
    assert question_text("A plain prompt with Answer: inside") == "A plain prompt with Answer: inside"


def test_ptrue_records_join_the_wrapped_samples(gsm8k):
    task = ptrue_task(gsm8k, "gsm8k")
    assert task.config.task == "gsm8k_ptrue"
    assert task.config.metadata["capcal_target_task"] == "gsm8k"
    doc = task.eval_docs[0]
    original = gsm8k.eval_docs[0]
    # lm-eval's doc_hash of the wrapped task's logged doc (evaluator.py: hash of the JSON-dumped doc)
    logged = hash_string(json.dumps(original, indent=2, default=handle_non_serializable, ensure_ascii=False))
    assert doc["question_id"] == f"gsm8k/doc-{logged}"
    assert doc["question_text"] == original["question"]
    prompt = task.doc_to_text(doc)
    assert prompt.startswith(f"Question: {original['question']}\n\nAre you able to answer")
    assert task.doc_to_choice(doc) == ["Yes", "No"]


def test_a_ptrue_yaml_task_without_its_wrapped_task_is_refused_before_any_task_loads():
    """lm-eval's ``class:`` route to P(True): the wrapped task whose questions it asks about is named by
    ``metadata.target_task`` or by the task's own name (``<target>_ptrue``); with neither, one line."""
    with pytest.raises(
        RefusedTask, match=r"^task gsm8k_confidence: metadata.target_task must name the wrapped"
    ):
        SampledPTrueTask(config={"task": "gsm8k_confidence", "metadata": {"base_task": "gsm8k"}})
