r"""MMLU (``cais/mmlu``, all): four-choice questions in 57 subjects.

Tasks: ``capcal_mmlu`` (test; the paper samples 1000 of it) and ``capcal_mmlu_validation`` (validation, the
calibration split), plus their confidence tasks. Identical questions (same text and choices, 105 repeats in
the test split) are kept once. Local files: Hendrycks et al.'s CSVs, ``mmlu/test/<subject>_test.csv`` and
``mmlu/val/<subject>_val.csv`` (no header; question, A, B, C, D, answer letter). The question is shown with
its choices as ``A. ...`` lines, in the original order; a response is correct when the letter it states
(``capcal_tasks.answers.choices``) is the gold letter.
"""

from __future__ import annotations

from pathlib import Path

import datasets

from capcal_tasks.answers.choices import LETTERS, extract_choice_letter, format_choices
from capcal_tasks.data_sources import HubSplit, load_split, read_csv, unique_questions
from capcal_tasks.prompts import CHOICE_INSTRUCTION, logged_sampling_prompt, sampling_prompt
from capcal_tasks.question_id import question_id
from capcal_tasks.sampling import score_responses

DATASET = "mmlu"
INSTRUCTION = CHOICE_INSTRUCTION
_CSV_FIELDS = ("question", "A", "B", "C", "D", "answer")


def read_hendrycks_folder(folder: Path) -> list[dict]:
    """Rows ``{question, subject, choices, answer (0-3)}`` of every ``<subject>_<split>.csv`` in ``folder``,
    subjects in alphabetical order (as the hub's ``all`` config)."""
    files = sorted(folder.glob("*.csv"))
    if not files:
        raise FileNotFoundError(f"{folder}: no MMLU CSV files")
    rows = []
    for path in files:
        subject = path.stem.rsplit("_", 1)[0]
        for line_number, record in enumerate(read_csv(path, fieldnames=_CSV_FIELDS), start=1):
            letter = record["answer"].strip()
            if letter not in LETTERS:
                raise ValueError(f"{path}: row {line_number}: answer {letter!r} is not one of A-D")
            rows.append(
                {
                    "question": record["question"],
                    "subject": subject,
                    "choices": [record[choice] for choice in LETTERS],
                    "answer": LETTERS.index(letter),
                }
            )
    return rows


def load_test(**metadata) -> datasets.DatasetDict:
    """custom_dataset of the test tasks: ``cais/mmlu`` (all) test, or ``mmlu/test/*.csv``."""
    return load_split("test", "mmlu/test", read_hendrycks_folder, HubSplit("cais/mmlu", "all", "test"))


def load_validation(**metadata) -> datasets.DatasetDict:
    """custom_dataset of the validation tasks: ``cais/mmlu`` (all) validation, or ``mmlu/val/*.csv``."""
    return load_split(
        "validation", "mmlu/val", read_hendrycks_folder, HubSplit("cais/mmlu", "all", "validation")
    )


def process_docs(dataset: datasets.Dataset) -> datasets.Dataset:
    """Adds ``question_text`` (question and lettered choices), ``question_id`` (hash of that text) and
    ``gold_answer`` (the letter); keeps the first of identical questions."""

    def add_fields(batch: dict) -> dict:
        texts = [format_choices(q, c) for q, c in zip(batch["question"], batch["choices"], strict=True)]
        return {
            "question_id": [question_id(DATASET, text) for text in texts],
            "question_text": texts,
            "gold_answer": [LETTERS[int(answer)] for answer in batch["answer"]],
        }

    return unique_questions(dataset.map(add_fields, batched=True))


def doc_to_text(doc: dict) -> str:
    return sampling_prompt(doc["question_text"], INSTRUCTION)


def extract_answer(response: str) -> str | None:
    return extract_choice_letter(response)


def is_correct(answer: str | None, gold: str) -> bool:
    return answer == gold


def process_results(doc: dict, results: list) -> dict:
    gold = doc["gold_answer"]
    return score_responses(
        results[0],
        extract=extract_answer,
        judge=lambda a: is_correct(a, gold),
        prompt=logged_sampling_prompt(doc, INSTRUCTION),
    )
