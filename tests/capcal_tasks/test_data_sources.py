"""``capcal_tasks.data_sources``: what a task's loader reads, found without reading it, and whether a hub
dataset can be loaded here (cached, or the hub reachable) before any model is loaded."""

from __future__ import annotations

import datasets
import huggingface_hub.constants
import pytest

from capcal_tasks.data_sources import (
    HubSplit,
    PlannedRead,
    data_read_by,
    hub_split_problem,
    local_files_read_by,
    shipped_with_capcal,
    unique_questions,
)
from capcal_tasks.gpqa import task as gpqa
from capcal_tasks.gsm8k import task as gsm8k

GSM8K_TEST = HubSplit("openai/gsm8k", "main", "test")


def test_a_loader_is_planned_not_run():
    reads = data_read_by(gsm8k.load_test)
    assert reads == [PlannedRead("gsm8k/test.jsonl", (GSM8K_TEST,))]
    assert local_files_read_by(gsm8k.load_test) == ["gsm8k/test.jsonl"]


def test_what_ships_with_capcal():
    assert shipped_with_capcal("gsm8k/test.jsonl")
    (gpqa_read,) = data_read_by(gpqa.load_diamond)
    assert not shipped_with_capcal(gpqa_read.local_path)  # gated: never bundled


@pytest.fixture
def empty_caches(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    return tmp_path


def test_offline_and_not_cached_is_a_reason(empty_caches):
    assert hub_split_problem(GSM8K_TEST) == (
        "the Hugging Face hub is offline here (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE) and it is not cached"
    )


@pytest.mark.parametrize("cached", ["datasets/openai___gsm8k", "hub/datasets--openai--gsm8k"])
def test_a_cached_dataset_loads_offline(empty_caches, cached):
    (empty_caches / cached).mkdir(parents=True)
    assert hub_split_problem(GSM8K_TEST) is None


def test_unique_questions_keeps_the_first_of_identical_questions_in_order():
    """The question ids are read as one column (a row-by-row read of MMLU's 14,042 ids took about a second
    of each load); the first occurrence of each id is kept, in the dataset's order."""
    ids = ["q3", "q1", "q3", "q2", "q1", "q4"]
    dataset = datasets.Dataset.from_dict({"question_id": ids, "row": list(range(len(ids)))})
    kept = unique_questions(dataset)
    assert kept["row"][:] == [0, 1, 3, 5] and kept["question_id"][:] == ["q3", "q1", "q2", "q4"]
    distinct = datasets.Dataset.from_dict({"question_id": ["a", "b"], "row": [0, 1]})
    assert unique_questions(distinct) is distinct
