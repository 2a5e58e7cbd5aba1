r"""Graded arithmetic: a synthetic calibration dataset where small models have a real spread of capability.

Questions "What is a + b?" / "What is a * b?" at five levels of difficulty (1-digit addition, 1-digit
multiplication, 2-digit addition, 2-digit multiplication, 3-digit addition), generated deterministically from
a seed, so nothing is downloaded and the questions are the same on every machine. The ``test`` and ``train``
splits use different seeds and share no question. SmolLM2-135M-Instruct at temperature 0.7 solves the easy
levels often and the hard ones rarely: many questions have 0 < mu < 1, which capability calibration needs
(GSM8K is near 0 for this model).

Prompt: the question, a blank line, "Answer with just the number." A response is correct when its last
``\boxed{}`` or, without a box, the last number of its first paragraph (the text before the first blank line)
equals a + b (or a * b). Base models without a chat template can be given few-shot examples from the training
questions (``--num_fewshot N``); they then continue with the next example after a blank line, which the
first-paragraph rule ignores.
"""

from __future__ import annotations

import random
import re

import datasets

from capcal_tasks.answers.boxed import last_boxed
from capcal_tasks.numeric_scoring import number_is_correct, score_number_responses
from capcal_tasks.prompts import logged_sampling_prompt, sampling_prompt
from capcal_tasks.question_id import question_id

DATASET = "arithmetic"
INSTRUCTION = "Answer with just the number."
LEVELS: dict[str, tuple[str, int]] = {
    "1-digit addition": ("+", 1),
    "1-digit multiplication": ("*", 1),
    "2-digit addition": ("+", 2),
    "2-digit multiplication": ("*", 2),
    "3-digit addition": ("+", 3),
}
SPLIT_SEEDS = {"test": 20260101, "train": 20260202}
DEFAULT_PER_LEVEL = {"test": 16, "train": 24}
# A number: digits, thousands groups of exactly three (",\d{3}"), a decimal part; never the punctuation after
# it ("3," in "2 + 1 is 3, ..." is 3; "7." ending a sentence is 7).
_LAST_NUMBER = re.compile(r"-?\d+(?:,\d{3}(?!\d))*(?:\.\d+)?")


def generate_questions(split: str, per_level: int, exclude: set[str] = frozenset()) -> list[dict]:
    """``per_level`` distinct questions per level for ``split``, none of whose text is in ``exclude``."""
    rng = random.Random(SPLIT_SEEDS[split])
    records = []
    for level, (operator, digits) in LEVELS.items():
        low, high = (1 if digits == 1 else 10 ** (digits - 1)), 10**digits - 1
        seen: set[str] = set()
        while len(seen) < per_level:
            a, b = rng.randint(low, high), rng.randint(low, high)
            question = f"What is {a} {operator} {b}?"
            if question in seen or question in exclude:
                continue
            seen.add(question)
            records.append(
                {"question": question, "answer": a + b if operator == "+" else a * b, "level": level}
            )
    return records


def _splits(metadata: dict) -> datasets.DatasetDict:
    test_per_level = int(metadata.get("arithmetic_per_level") or DEFAULT_PER_LEVEL["test"])
    train_per_level = int(metadata.get("arithmetic_train_per_level") or DEFAULT_PER_LEVEL["train"])
    test = generate_questions("test", test_per_level)
    train = generate_questions("train", train_per_level, exclude={r["question"] for r in test})
    return datasets.DatasetDict(
        {"test": datasets.Dataset.from_list(test), "train": datasets.Dataset.from_list(train)}
    )


def load_test(**metadata) -> datasets.DatasetDict:
    """custom_dataset of the test tasks: the ``test`` split, and ``train`` for few-shot examples.

    ``--metadata '{"arithmetic_per_level": N, "arithmetic_train_per_level": M}'`` sets the sizes.
    """
    return _splits(metadata)


def load_train(**metadata) -> datasets.DatasetDict:
    """custom_dataset of the train tasks (for probes and recalibration; disjoint from test)."""
    return _splits(metadata)


def process_docs(dataset: datasets.Dataset) -> datasets.Dataset:
    """Adds ``question_id``, ``question_text`` and ``gold_answer``."""

    def add_fields(doc: dict) -> dict:
        return {
            "question_id": question_id(DATASET, doc["question"]),
            "question_text": doc["question"],
            "gold_answer": float(doc["answer"]),
        }

    return dataset.map(add_fields)


def doc_to_text(doc: dict) -> str:
    return sampling_prompt(doc["question_text"], INSTRUCTION)


def doc_to_target(doc: dict) -> str:
    """The gold answer as a model should write it (also the few-shot examples' answer)."""
    return str(doc["answer"])


def extract_answer(response: str) -> str | None:
    """The last ``\\boxed{}``, else the last number of the first paragraph of the response."""
    boxed = last_boxed(response)
    if boxed is not None:
        return boxed
    first_paragraph = response.strip().split("\n\n", 1)[0]
    numbers = _LAST_NUMBER.findall(first_paragraph)
    return numbers[-1] if numbers else None


is_correct = number_is_correct


def process_results(doc: dict, results: list) -> dict:
    return score_number_responses(
        results[0], doc["gold_answer"], extract_answer, prompt=logged_sampling_prompt(doc, INSTRUCTION)
    )
