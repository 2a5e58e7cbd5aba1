"""Config checks for every capcal task, modelled on lm-eval's own task tests: docs load, prompts render
without trailing whitespace, requests build (with repeats), offline against ../shared/data."""

from __future__ import annotations

import pytest
from lm_eval.tasks import TaskManager

from capcal_tasks import tasks_dir
from capcal_tasks.task_manager import CapcalTaskManager, is_sampling_task

CAPCAL_TASKS = sorted(
    name for name in TaskManager(include_path=str(tasks_dir()), include_defaults=False).all_subtasks
)


@pytest.fixture(autouse=True)
def local_data(shared_data, monkeypatch):
    monkeypatch.setenv("CAPCAL_DATA_DIR", str(shared_data))


def test_capcal_tasks_are_indexed():
    assert "capcal_gsm8k" in CAPCAL_TASKS


@pytest.mark.parametrize("name", CAPCAL_TASKS)
def test_task_config(name):
    task = CapcalTaskManager(include_defaults=False).load([name])["tasks"][name]
    docs = list(task.eval_docs)
    assert len(docs) > 0
    for doc in docs[:20]:
        prompt = task.doc_to_text(doc)
        assert isinstance(prompt, str) and prompt.strip()
        assert prompt == prompt.rstrip(), "prompt ends in whitespace"
        assert str(task.doc_to_target(doc)).strip()
    if is_sampling_task(task):
        assert task.config.generation_kwargs["do_sample"] is True, "sampling tasks must set do_sample: true"
        assert "until" in task.config.generation_kwargs, "an unset `until` stops at the first blank line"
        assert len({doc["question_id"] for doc in docs}) == len(docs), "question ids must be unique"
    task.build_all_requests(limit=3, rank=0, world_size=1)
    assert len(task.instances) == 3
    assert all(instance.repeats == task.config.repeats for instance in task.instances)


def test_repeats_override_applies_to_sampling_tasks_only():
    loaded = CapcalTaskManager(repeats=3, include_defaults=False).load(["capcal_gsm8k"])["tasks"]
    assert loaded["capcal_gsm8k"].config.repeats == 3
    assert CapcalTaskManager(include_defaults=False).load(["capcal_gsm8k"])["tasks"]["capcal_gsm8k"].config.repeats == 16
    with pytest.raises(ValueError, match="positive integer"):
        CapcalTaskManager(repeats=0)


def test_gsm8k_prompt_is_the_paper_prompt():
    task = CapcalTaskManager(include_defaults=False).load(["capcal_gsm8k"])["tasks"]["capcal_gsm8k"]
    doc = next(iter(task.eval_docs))
    assert task.doc_to_text(doc) == (
        doc["question"].strip()
        + "\n\nAfter your reasoning, provide your final answer number X in the format of \\boxed{X}."
    )
    assert doc["gold_answer"] == 18.0
    assert doc["question_id"].startswith("gsm8k/")
