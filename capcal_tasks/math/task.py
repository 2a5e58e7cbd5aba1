r"""MATH: competition mathematics with LaTeX answers, checked by math-verify equivalence.

Tasks: ``capcal_math500`` (MATH-500, ``HuggingFaceH4/MATH-500`` test, 500 problems; its ``answer`` field is
the gold) and ``capcal_math_train`` (the MATH training set, ``EleutherAI/hendrycks_math``, 7500 problems in
seven subject configs; the gold is the last ``\boxed{}`` of the solution; disjoint from MATH-500, which is
drawn from MATH's test set), plus their confidence tasks. Local files: ``math500/test.jsonl`` and
``math/train.jsonl`` (JSON lines with the hub's keys: ``problem``, ``solution``, and ``answer`` for MATH-500).
A response is correct when its last ``\boxed{}`` (braces counted) is equivalent to the gold under math-verify
(``capcal_tasks.answers.math_equivalence``).
"""

from __future__ import annotations

import logging

import datasets

from capcal_tasks.answers.boxed import last_boxed
from capcal_tasks.answers.math_equivalence import math_answers_equal
from capcal_tasks.data_sources import HubSplit, add_question_fields, load_split, read_jsonl
from capcal_tasks.prompts import MATH_INSTRUCTION, logged_sampling_prompt, sampling_prompt
from capcal_tasks.sampling import score_responses

DATASET = "math"
# math-verify runs symbolic comparisons under a time limit: too slow (and time-dependent) to re-run on every
# read of a log, so analysis.runs does not re-score MATH records (capcal_tasks.sampling.task_checker).
EXPENSIVE_CHECKER = True
INSTRUCTION = MATH_INSTRUCTION
MATH_SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)

logger = logging.getLogger(__name__)


def load_math500(**metadata) -> datasets.DatasetDict:
    """custom_dataset of the MATH-500 tasks: ``HuggingFaceH4/MATH-500`` test, or ``math500/test.jsonl``."""
    return load_split(
        "test", "math500/test.jsonl", read_jsonl, HubSplit("HuggingFaceH4/MATH-500", None, "test")
    )


def load_train(**metadata) -> datasets.DatasetDict:
    """custom_dataset of the MATH train tasks: the seven ``EleutherAI/hendrycks_math`` train configs,
    concatenated, or ``math/train.jsonl``."""
    hub = [HubSplit("EleutherAI/hendrycks_math", subject, "train") for subject in MATH_SUBJECTS]
    return load_split("train", "math/train.jsonl", read_jsonl, hub)


def process_docs_math500(dataset: datasets.Dataset) -> datasets.Dataset:
    """Adds ``question_id``, ``question_text`` and ``gold_answer`` (the ``answer`` field)."""
    return add_question_fields(
        dataset, DATASET, "problem", lambda doc: {"gold_answer": doc["answer"].strip()}
    )


def process_docs_train(dataset: datasets.Dataset) -> datasets.Dataset:
    r"""Adds the fields as for MATH-500, with the last ``\boxed{}`` of the solution as ``gold_answer``;
    a problem whose solution has no box is dropped (and counted in a warning)."""
    with_box = dataset.filter(lambda doc: last_boxed(doc["solution"]) is not None)
    if len(with_box) < len(dataset):
        logger.warning("MATH train: %d problems without a boxed answer dropped", len(dataset) - len(with_box))
    return add_question_fields(
        with_box, DATASET, "problem", lambda doc: {"gold_answer": last_boxed(doc["solution"])}
    )


def doc_to_text(doc: dict) -> str:
    return sampling_prompt(doc["question_text"], INSTRUCTION)


extract_answer = last_boxed  # the last \boxed{} of a response


def is_correct(answer: str | None, gold: str) -> bool:
    return math_answers_equal(gold, answer)


def process_results(doc: dict, results: list) -> dict:
    """Sampling record; majority voting groups all correct answers into one class (they are equivalent to
    the gold) and the others by their whitespace-free text."""
    gold = doc["gold_answer"]

    def answer_class(answer: str | None) -> tuple | None:
        if answer is None:
            return None
        return ("correct",) if is_correct(answer, gold) else ("answer", "".join(answer.split()))

    return score_responses(
        results[0],
        extract=extract_answer,
        judge=lambda a: is_correct(a, gold),
        answer_class=answer_class,
        prompt=logged_sampling_prompt(doc, INSTRUCTION),
    )
