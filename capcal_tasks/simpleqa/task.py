r"""SimpleQA (OpenAI): short fact-seeking questions with one gold answer.

Tasks: ``capcal_simpleqa`` (the original 4326 questions; hub ``basicv8vc/SimpleQA`` test, a copy of
OpenAI's ``simple_qa_test_set.csv``) and ``capcal_simpleqa_verified`` (SimpleQA-Verified, Google DeepMind's
1000-question corrected subset, hub ``google/simpleqa-verified`` split ``eval``; the paper's evaluation set),
plus their confidence tasks. Local files: ``simpleqa/simple_qa_test_set.csv`` (``metadata,problem,answer``)
and ``simpleqa/simpleqa_verified.csv`` (SimpleQA-Verified's CSV, with ``problem`` and ``answer`` columns).
Checking: the paper's alias match against the one gold answer, and the exact label beside it
(``capcal_tasks.alias_scoring``); the paper re-labels with an LLM judge, capcal keeps the rule-based label.
"""

from __future__ import annotations

from pathlib import Path

import datasets

from capcal_tasks.alias_scoring import process_alias_results
from capcal_tasks.answers.aliases import extract_short_answer
from capcal_tasks.data_sources import HubSplit, add_question_fields, load_split, read_csv_with_columns
from capcal_tasks.prompts import SHORT_ANSWER_INSTRUCTION, sampling_prompt

DATASET = "simpleqa"
INSTRUCTION = SHORT_ANSWER_INSTRUCTION


def read_simpleqa_csv(path: Path) -> list[dict]:
    """Rows of a SimpleQA CSV; it must have ``problem`` and ``answer`` columns."""
    return read_csv_with_columns(path, ("problem", "answer"))


def _load(split: str, file_name: str, hub_path: str) -> datasets.DatasetDict:
    """Split ``split`` of the hub dataset ``hub_path``, or ``simpleqa/<file_name>`` locally."""
    return load_split(split, f"simpleqa/{file_name}", read_simpleqa_csv, HubSplit(hub_path, None, split))


def load_test(**metadata) -> datasets.DatasetDict:
    """custom_dataset of the original SimpleQA tasks: ``basicv8vc/SimpleQA`` test, or
    ``simpleqa/simple_qa_test_set.csv``."""
    return _load("test", "simple_qa_test_set.csv", "basicv8vc/SimpleQA")


def load_verified(**metadata) -> datasets.DatasetDict:
    """custom_dataset of the SimpleQA-Verified tasks: ``google/simpleqa-verified`` eval, or
    ``simpleqa/simpleqa_verified.csv``."""
    return _load("eval", "simpleqa_verified.csv", "google/simpleqa-verified")


def process_docs(dataset: datasets.Dataset) -> datasets.Dataset:
    """Adds ``question_id``, ``question_text``, ``gold_answer`` and ``gold_aliases`` (the gold answer)."""

    def gold_fields(doc: dict) -> dict:
        return {"gold_answer": doc["answer"].strip(), "gold_aliases": [doc["answer"].strip()]}

    return add_question_fields(dataset, DATASET, "problem", gold_fields)


def doc_to_text(doc: dict) -> str:
    return sampling_prompt(doc["question_text"], INSTRUCTION)


extract_answer = extract_short_answer
process_results = process_alias_results
