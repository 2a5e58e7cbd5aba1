r"""TriviaQA (``mandarjoshi/trivia_qa``, rc.nocontext): trivia questions with answer aliases, no context.

Tasks: ``capcal_triviaqa`` (validation, the paper's evaluation split) and ``capcal_triviaqa_train`` (train,
for probes and recalibration), plus their confidence tasks. Questions are de-duplicated by their text (the hub
split repeats some questions). Local files: ``triviaqa/triviaqa_sm_sub.jsonl`` for validation (llm-foundry's
3000-question random subsample of validation, keys ``context`` = "Question: ...\nAnswer:", ``answer``,
``aliases``) and ``triviaqa/train.jsonl`` for train; either file may hold llm-foundry records or the hub's
records (``question``, ``answer: {value, aliases, normalized_aliases}``). Checking: the paper's alias match
and the exact alias label beside it (``capcal_tasks.alias_scoring``).
"""

from __future__ import annotations

from pathlib import Path

import datasets

from capcal_tasks.alias_scoring import process_alias_results
from capcal_tasks.answers.aliases import extract_short_answer
from capcal_tasks.data_sources import HubSplit, add_question_fields, load_split, read_jsonl
from capcal_tasks.prompts import SHORT_ANSWER_INSTRUCTION, sampling_prompt

DATASET = "triviaqa"
INSTRUCTION = SHORT_ANSWER_INSTRUCTION
HUB_PATH, HUB_NAME = "mandarjoshi/trivia_qa", "rc.nocontext"
_FOUNDRY_PREFIX, _FOUNDRY_SUFFIX = "Question: ", "\nAnswer:"


def read_triviaqa_jsonl(path: Path) -> list[dict]:
    """Records ``{question, answer: {value, aliases, normalized_aliases}}`` from llm-foundry's or the hub's
    JSON lines; a record in neither form raises an error naming the file and line."""
    rows = []
    for line_number, record in enumerate(read_jsonl(path), start=1):
        where = f"{path}:{line_number}"
        if "context" in record:
            context = record["context"]
            if not (context.startswith(_FOUNDRY_PREFIX) and context.endswith(_FOUNDRY_SUFFIX)):
                raise ValueError(f"{where}: context is not 'Question: ...\\nAnswer:'")
            question = context[len(_FOUNDRY_PREFIX) : -len(_FOUNDRY_SUFFIX)]
            answer = {"value": record["answer"], "aliases": list(record["aliases"]), "normalized_aliases": []}
        elif isinstance(record.get("question"), str) and isinstance(record.get("answer"), dict):
            question, hub_answer = record["question"], record["answer"]
            answer = {
                "value": hub_answer["value"],
                "aliases": list(hub_answer.get("aliases", [])),
                "normalized_aliases": list(hub_answer.get("normalized_aliases", [])),
            }
        else:
            raise ValueError(f"{where}: expected llm-foundry keys (context, answer, aliases) or the hub's")
        rows.append({"question": question, "answer": answer})
    return rows


def load_validation(**metadata) -> datasets.DatasetDict:
    """custom_dataset of the validation tasks: the hub's rc.nocontext validation, or
    ``triviaqa/triviaqa_sm_sub.jsonl`` locally."""
    return load_split(
        "validation",
        "triviaqa/triviaqa_sm_sub.jsonl",
        read_triviaqa_jsonl,
        HubSplit(HUB_PATH, HUB_NAME, "validation"),
    )


def load_train(**metadata) -> datasets.DatasetDict:
    """custom_dataset of the train tasks: the hub's rc.nocontext train, or ``triviaqa/train.jsonl``."""
    return load_split(
        "train", "triviaqa/train.jsonl", read_triviaqa_jsonl, HubSplit(HUB_PATH, HUB_NAME, "train")
    )


def process_docs(dataset: datasets.Dataset) -> datasets.Dataset:
    """Adds ``question_id``, ``question_text``, ``gold_answer`` (the answer's value) and ``gold_aliases``
    (value, aliases and normalised aliases, without repeats); keeps the first of identical questions."""

    def gold_fields(doc: dict) -> dict:
        answer = doc["answer"]
        aliases = [answer["value"], *answer.get("aliases", []), *answer.get("normalized_aliases", [])]
        return {
            "gold_answer": answer["value"],
            "gold_aliases": list(dict.fromkeys(alias for alias in aliases if alias)),
        }

    return add_question_fields(dataset, DATASET, "question", gold_fields)


def doc_to_text(doc: dict) -> str:
    return sampling_prompt(doc["question_text"], INSTRUCTION)


extract_answer = extract_short_answer
process_results = process_alias_results
