r"""GSM8K (``openai/gsm8k``, main): grade-school word problems whose gold answer is the number after ``####``.

Tasks: ``capcal_gsm8k`` (test, 1319 questions) and ``capcal_gsm8k_train`` (train, 7473; for probes and
recalibration), plus their confidence tasks. Local files: ``gsm8k/test.jsonl``, ``gsm8k/train.jsonl`` (the
hub's JSON lines, keys ``question`` and ``answer``). A response is correct when its last ``\boxed{}`` states a
number within 1e-6 of the gold number (``capcal_tasks.answers.numeric``).
"""

from __future__ import annotations

import datasets

from capcal_tasks.answers.boxed import last_boxed
from capcal_tasks.answers.numeric import gsm8k_gold
from capcal_tasks.data_sources import HubSplit, add_question_fields, load_split, read_jsonl
from capcal_tasks.numeric_scoring import number_is_correct, score_number_responses
from capcal_tasks.prompts import NUMBER_INSTRUCTION, logged_sampling_prompt, sampling_prompt

DATASET = "gsm8k"
INSTRUCTION = NUMBER_INSTRUCTION


def load_test(**metadata) -> datasets.DatasetDict:
    """custom_dataset of the test tasks: ``openai/gsm8k`` test, or ``gsm8k/test.jsonl`` locally."""
    return load_split("test", "gsm8k/test.jsonl", read_jsonl, HubSplit("openai/gsm8k", "main", "test"))


def load_train(**metadata) -> datasets.DatasetDict:
    """custom_dataset of the train tasks: ``openai/gsm8k`` train, or ``gsm8k/train.jsonl`` locally."""
    return load_split("train", "gsm8k/train.jsonl", read_jsonl, HubSplit("openai/gsm8k", "main", "train"))


def process_docs(dataset: datasets.Dataset) -> datasets.Dataset:
    """Adds ``question_id``, ``question_text`` (the question as posed) and ``gold_answer`` (a float)."""
    return add_question_fields(
        dataset, DATASET, "question", lambda doc: {"gold_answer": gsm8k_gold(doc["answer"])}
    )


def doc_to_text(doc: dict) -> str:
    return sampling_prompt(doc["question_text"], INSTRUCTION)


extract_answer = last_boxed  # the last \boxed{} of a response


is_correct = number_is_correct


def process_results(doc: dict, results: list) -> dict:
    return score_number_responses(
        results[0], doc["gold_answer"], extract_answer, prompt=logged_sampling_prompt(doc, INSTRUCTION)
    )
