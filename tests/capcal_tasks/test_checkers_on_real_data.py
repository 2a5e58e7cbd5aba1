r"""The answer checkers on every question of the real data in ../shared/data.

For each dataset, through the task's own loader, ``process_docs`` and ``process_results``: a response that
states the gold answer as a model would (in ``\boxed{}``) must be judged correct, and one that states another
question's gold answer must be judged wrong, each for at least 99.5% of the questions. MATH-500 states the
last ``\boxed{}`` of each solution and is checked against the ``answer`` field. Disagreements are printed
(``pytest -s``), with one summary line per dataset.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from capcal_tasks.aime import task as aime
from capcal_tasks.answers.aliases import normalize_answer
from capcal_tasks.answers.boxed import last_boxed
from capcal_tasks.gsm8k import task as gsm8k
from capcal_tasks.math import task as math
from capcal_tasks.mmlu import task as mmlu
from capcal_tasks.simpleqa import task as simpleqa
from capcal_tasks.triviaqa import task as triviaqa

REQUIRED_AGREEMENT = 0.995


@dataclass(frozen=True)
class CheckedDataset:
    name: str
    load: Callable[[], list[dict]]
    process_results: Callable[[dict, list], dict]
    stated_gold: Callable[[dict], str]  # the gold answer as a response would state it
    gold_key: Callable[[dict], object]  # two questions with equal keys have the same gold answer
    label: str = "correctness"


def _docs(load, process_docs, split: str) -> Callable[[], list[dict]]:
    return lambda: list(process_docs(load()[split]))


def _triviaqa_small(shared: Path) -> list[dict]:
    import datasets

    rows = triviaqa.read_triviaqa_jsonl(shared / "triviaqa" / "triviaqa_small.jsonl")
    return list(triviaqa.process_docs(datasets.Dataset.from_list(rows)))


def _gsm8k_gold_text(doc: dict) -> str:
    return doc["answer"].rpartition("####")[2].strip()


def _datasets(shared: Path) -> list[CheckedDataset]:
    alias_key = lambda doc: normalize_answer(doc["gold_answer"])  # noqa: E731
    return [
        CheckedDataset(
            "gsm8k test", _docs(gsm8k.load_test, gsm8k.process_docs, "test"), gsm8k.process_results,
            _gsm8k_gold_text, lambda doc: doc["gold_answer"],
        ),
        CheckedDataset(
            "math500 test", _docs(math.load_math500, math.process_docs_math500, "test"), math.process_results,
            lambda doc: last_boxed(doc["solution"]), lambda doc: "".join(doc["gold_answer"].split()),
        ),
        CheckedDataset(
            "aime2025", _docs(aime.load_test, aime.process_docs, "test"), aime.process_results,
            lambda doc: str(doc["gold_answer"]), lambda doc: doc["gold_answer"],
        ),
        CheckedDataset(
            "triviaqa sm_sub (validation)",
            _docs(triviaqa.load_validation, triviaqa.process_docs, "validation"),
            triviaqa.process_results, lambda doc: doc["gold_answer"], alias_key,
        ),
        CheckedDataset(
            "triviaqa sm_sub (validation), exact label",
            _docs(triviaqa.load_validation, triviaqa.process_docs, "validation"),
            triviaqa.process_results, lambda doc: doc["gold_answer"], alias_key, "exact_alias_correctness",
        ),
        CheckedDataset(
            "triviaqa small", lambda: _triviaqa_small(shared), triviaqa.process_results,
            lambda doc: doc["gold_answer"], alias_key,
        ),
        CheckedDataset(
            "simpleqa", _docs(simpleqa.load_test, simpleqa.process_docs, "test"), simpleqa.process_results,
            lambda doc: doc["gold_answer"], alias_key,
        ),
        CheckedDataset(
            "simpleqa, exact label", _docs(simpleqa.load_test, simpleqa.process_docs, "test"),
            simpleqa.process_results, lambda doc: doc["gold_answer"], alias_key, "exact_alias_correctness",
        ),
        CheckedDataset(
            "mmlu test", _docs(mmlu.load_test, mmlu.process_docs, "test"), mmlu.process_results,
            lambda doc: doc["gold_answer"], lambda doc: doc["gold_answer"],
        ),
        CheckedDataset(
            "mmlu validation", _docs(mmlu.load_validation, mmlu.process_docs, "validation"),
            mmlu.process_results, lambda doc: doc["gold_answer"], lambda doc: doc["gold_answer"],
        ),
    ]  # fmt: skip


def _response(answer: str) -> str:
    return f"Let me work through this step by step.\nSo the final answer is \\boxed{{{answer}}}."


def _judged_correct(dataset: CheckedDataset, doc: dict, answer: str) -> bool:
    return bool(dataset.process_results(doc, [[_response(answer)]])[dataset.label][0])


DATASET_NAMES = [dataset.name for dataset in _datasets(Path("."))]


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_checker_agrees_with_gold_answers(name, local_data, monkeypatch):
    monkeypatch.setenv("CAPCAL_DATA_DIR", str(local_data))
    dataset = next(d for d in _datasets(local_data) if d.name == name)
    docs = dataset.load()
    n = len(docs)
    assert n >= 30

    gold_rejected = [
        (doc["question_id"], dataset.stated_gold(doc), doc["gold_answer"])
        for doc in docs
        if not _judged_correct(dataset, doc, dataset.stated_gold(doc))
    ]
    wrong_accepted = []
    keys = [dataset.gold_key(doc) for doc in docs]
    for i, doc in enumerate(docs):
        j = next(j % n for j in range(i + 1, i + n) if keys[j % n] != keys[i])
        other_gold = dataset.stated_gold(docs[j])
        if _judged_correct(dataset, doc, other_gold):
            wrong_accepted.append((doc["question_id"], other_gold, doc["gold_answer"]))

    gold_rate, wrong_rate = 1 - len(gold_rejected) / n, 1 - len(wrong_accepted) / n
    print(f"\n{name}: gold rejected ({len(gold_rejected)}): {gold_rejected[:25]}")
    print(f"{name}: another question's gold accepted ({len(wrong_accepted)}): {wrong_accepted[:25]}")
    print(
        f"CHECKER AGREEMENT {name}: "
        f"gold judged correct {n - len(gold_rejected)}/{n} ({100 * gold_rate:.2f}%), "
        f"wrong judged wrong {n - len(wrong_accepted)}/{n} ({100 * wrong_rate:.2f}%)"
    )
    assert gold_rate >= REQUIRED_AGREEMENT
    assert wrong_rate >= REQUIRED_AGREEMENT
