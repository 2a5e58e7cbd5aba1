r"""GPQA diamond (``Idavidrein/gpqa``, gpqa_diamond, 198 questions): graduate-level four-choice science.

Task: ``capcal_gpqa``, plus its confidence tasks. GPQA is gated on the hub (accept its terms and log in, e.g.
``HF_TOKEN``) and password-protected upstream; its authors ask that the questions not be published in plain
text, so capcal ships none. Local file: ``gpqa/gpqa_diamond.csv`` (the CSV from the upstream ``dataset.zip``,
with the columns ``Question``, ``Correct Answer``, ``Incorrect Answer 1..3``). The four answers are shown in a
per-question shuffled order (seeded by the question text, ``capcal_tasks.answers.choices.shuffle_choices``);
a response is correct when the letter it states is the correct answer's letter.
"""

from __future__ import annotations

from pathlib import Path

import datasets

from capcal_tasks.answers.choices import LETTERS, extract_choice_letter, format_choices, shuffle_choices
from capcal_tasks.data_sources import HubSplit, load_split, read_csv_with_columns, unique_questions
from capcal_tasks.prompts import CHOICE_INSTRUCTION, logged_sampling_prompt, sampling_prompt
from capcal_tasks.question_id import question_id
from capcal_tasks.sampling import score_responses

DATASET = "gpqa"
INSTRUCTION = CHOICE_INSTRUCTION
REQUIRED_COLUMNS = (
    "Question",
    "Correct Answer",
    "Incorrect Answer 1",
    "Incorrect Answer 2",
    "Incorrect Answer 3",
)


def read_gpqa_csv(path: Path) -> list[dict]:
    """Rows of a GPQA CSV; it must have the question and answer columns."""
    return read_csv_with_columns(path, REQUIRED_COLUMNS)


def load_diamond(**metadata) -> datasets.DatasetDict:
    """custom_dataset: ``Idavidrein/gpqa`` (gpqa_diamond) train, or ``gpqa/gpqa_diamond.csv`` locally."""
    return load_split(
        "train", "gpqa/gpqa_diamond.csv", read_gpqa_csv, HubSplit("Idavidrein/gpqa", "gpqa_diamond", "train")
    )


def process_docs(dataset: datasets.Dataset) -> datasets.Dataset:
    """Adds ``choices`` (shuffled per question), ``question_text``, ``question_id`` and ``gold_answer``."""

    def add_fields(doc: dict) -> dict:
        question = doc["Question"].strip()
        incorrect = [doc[f"Incorrect Answer {i}"].strip() for i in (1, 2, 3)]
        choices, gold_index = shuffle_choices(doc["Correct Answer"].strip(), incorrect, seed_text=question)
        text = format_choices(question, choices)
        return {
            "question_id": question_id(DATASET, question),
            "question_text": text,
            "choices": choices,
            "gold_answer": LETTERS[gold_index],
        }

    return unique_questions(dataset.map(add_fields))


def doc_to_text(doc: dict) -> str:
    return sampling_prompt(doc["question_text"], INSTRUCTION)


def extract_answer(response: str) -> str | None:
    return extract_choice_letter(response)


def process_results(doc: dict, results: list) -> dict:
    gold = doc["gold_answer"]
    return score_responses(
        results[0],
        extract=extract_answer,
        judge=lambda a: a == gold,
        prompt=logged_sampling_prompt(doc, INSTRUCTION),
    )
