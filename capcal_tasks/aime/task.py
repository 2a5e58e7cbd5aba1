r"""AIME 2025 (I and II, 30 problems): integer answers 0-999.

Task: ``capcal_aime25`` (hub ``math-ai/aime25`` test), plus its confidence tasks. Local files: MathArena's
original layout under ``aime2025/``: ``aime_2025_I/answers.csv`` (``id,answer``) with
``aime_2025_I/problems/<id>.tex``, and the same for ``aime_2025_II`` (the problem statements are (c) MAA and
are not shipped with capcal). A response is correct when its last ``\boxed{}`` states the gold integer
(``capcal_tasks.answers.integer``).
"""

from __future__ import annotations

from pathlib import Path

import datasets

from capcal_tasks.answers.boxed import last_boxed
from capcal_tasks.answers.integer import parse_integer
from capcal_tasks.data_sources import HubSplit, add_question_fields, load_split, read_csv
from capcal_tasks.prompts import NUMBER_INSTRUCTION, logged_sampling_prompt, sampling_prompt
from capcal_tasks.sampling import score_responses

DATASET = "aime"
INSTRUCTION = NUMBER_INSTRUCTION
AIME_2025_EXAMS = ("aime_2025_I", "aime_2025_II")


def read_matharena_folder(folder: Path) -> list[dict]:
    """AIME 2025 I and II from MathArena's files, as rows ``{id, problem, answer}``."""
    rows = []
    for exam in AIME_2025_EXAMS:
        answers = folder / exam / "answers.csv"
        if not answers.is_file():
            raise FileNotFoundError(f"{answers} not found (MathArena's AIME 2025 layout)")
        for line_number, record in enumerate(read_csv(answers), start=2):
            if set(record) != {"id", "answer"}:
                raise ValueError(f"{answers}: expected the header 'id,answer', got {','.join(record)}")
            if parse_integer(record["answer"]) is None:
                raise ValueError(f"{answers}:{line_number}: answer {record['answer']!r} is not an integer")
            problem = folder / exam / "problems" / f"{record['id'].strip()}.tex"
            if not problem.is_file():
                raise FileNotFoundError(f"{problem} not found (named by {answers}:{line_number})")
            rows.append(
                {
                    "id": f"{exam}/{record['id'].strip()}",
                    "problem": problem.read_text(encoding="utf-8"),
                    "answer": record["answer"].strip(),
                }
            )
    return rows


def load_test(**metadata) -> datasets.DatasetDict:
    """custom_dataset: ``math-ai/aime25`` test, or MathArena's files under ``aime2025/``."""
    return load_split("test", "aime2025", read_matharena_folder, HubSplit("math-ai/aime25", None, "test"))


def process_docs(dataset: datasets.Dataset) -> datasets.Dataset:
    """Adds ``question_id``, ``question_text`` and ``gold_answer`` (an int)."""

    def gold_answer(doc: dict) -> dict:
        gold = parse_integer(str(doc["answer"]))
        if gold is None:
            raise ValueError(f"AIME gold answer is not an integer: {doc['answer']!r}")
        return {"gold_answer": gold}

    return add_question_fields(dataset, DATASET, "problem", gold_answer)


def doc_to_text(doc: dict) -> str:
    return sampling_prompt(doc["question_text"], INSTRUCTION)


extract_answer = last_boxed  # the last \boxed{} of a response


def is_correct(answer: str | None, gold: int) -> bool:
    return parse_integer(answer) == gold


def process_results(doc: dict, results: list) -> dict:
    gold = int(doc["gold_answer"])
    return score_responses(
        results[0],
        extract=extract_answer,
        judge=lambda a: is_correct(a, gold),
        answer_class=parse_integer,
        prompt=logged_sampling_prompt(doc, INSTRUCTION),
    )
