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

from capcal_tasks.alias_scoring import score_alias_responses
from capcal_tasks.answers.aliases import extract_short_answer
from capcal_tasks.data_sources import HubSplit, load_split, read_csv, unique_questions
from capcal_tasks.prompts import SHORT_ANSWER_INSTRUCTION, sampling_prompt
from capcal_tasks.question_id import question_id

DATASET = "simpleqa"
INSTRUCTION = SHORT_ANSWER_INSTRUCTION


def read_simpleqa_csv(path: Path) -> list[dict]:
    """Rows of a SimpleQA CSV; it must have ``problem`` and ``answer`` columns."""
    rows = read_csv(path)
    missing = {"problem", "answer"} - set(rows[0] if rows else {})
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    return rows


def load_test(**metadata) -> datasets.DatasetDict:
    """custom_dataset of the original SimpleQA tasks: ``basicv8vc/SimpleQA`` test, or
    ``simpleqa/simple_qa_test_set.csv``."""
    return load_split(
        "test",
        "simpleqa/simple_qa_test_set.csv",
        read_simpleqa_csv,
        HubSplit("basicv8vc/SimpleQA", None, "test"),
    )


def load_verified(**metadata) -> datasets.DatasetDict:
    """custom_dataset of the SimpleQA-Verified tasks: ``google/simpleqa-verified`` eval, or
    ``simpleqa/simpleqa_verified.csv``."""
    return load_split(
        "eval",
        "simpleqa/simpleqa_verified.csv",
        read_simpleqa_csv,
        HubSplit("google/simpleqa-verified", None, "eval"),
    )


def process_docs(dataset: datasets.Dataset) -> datasets.Dataset:
    """Adds ``question_id``, ``question_text``, ``gold_answer`` and ``gold_aliases`` (the gold answer)."""

    def add_fields(doc: dict) -> dict:
        return {
            "question_id": question_id(DATASET, doc["problem"]),
            "question_text": doc["problem"].strip(),
            "gold_answer": doc["answer"].strip(),
            "gold_aliases": [doc["answer"].strip()],
        }

    return unique_questions(dataset.map(add_fields))


def doc_to_text(doc: dict) -> str:
    return sampling_prompt(doc["question_text"], INSTRUCTION)


def extract_answer(response: str) -> str | None:
    return extract_short_answer(response)


def process_results(doc: dict, results: list) -> dict:
    return score_alias_responses(results[0], doc["gold_aliases"])
