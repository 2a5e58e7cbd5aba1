r"""The answer checkers on every question of the real data in ../shared/data.

For each dataset, through the task's own loader, ``process_docs`` and ``process_results``: a response that
states the gold answer as a model would (in ``\boxed{}``) must be judged correct, and one that states another
question's gold answer must be judged wrong, each for at least 99.5% of the questions. MATH-500 states the
last ``\boxed{}`` of each solution and is checked against the ``answer`` field. Disagreements are printed
(``pytest -s``), with one summary line per dataset.

The adversarial table (issue 34): responses that state no answer of their own must be judged wrong for at
least 99.5% of the questions: (a) the question restated, (b) the question with its lettered choices, (c) the
whole prompt echoed verbatim (question and instruction), (d) an empty response and a refusal ("I don't
know."); (e) the gold named inside a denial ("It is not X.") is reported without a target. GPQA ships no
questions here, so its code path (shuffled choices) runs on MMLU's test questions in GPQA's CSV form; graded
arithmetic uses its generated test and train questions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from capcal_tasks.aime import task as aime
from capcal_tasks.answers.aliases import normalize_answer
from capcal_tasks.answers.boxed import last_boxed
from capcal_tasks.arithmetic import task as arithmetic
from capcal_tasks.gpqa import task as gpqa
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
    prompt: Callable[[dict], str] = lambda doc: doc["question_text"]  # the sampling prompt (doc_to_text)
    stem: Callable[[dict], str] = lambda doc: doc["question_text"]  # the question without its choices


def _docs(load, process_docs, split: str) -> Callable[[], list[dict]]:
    return lambda: list(process_docs(load()[split]))


def _triviaqa_small(shared: Path) -> list[dict]:
    import datasets

    rows = triviaqa.read_triviaqa_jsonl(shared / "triviaqa" / "triviaqa_small.jsonl")
    return list(triviaqa.process_docs(datasets.Dataset.from_list(rows)))


def _gsm8k_gold_text(doc: dict) -> str:
    return doc["answer"].rpartition("####")[2].strip()


def _gpqa_from_mmlu() -> list[dict]:
    """MMLU's test questions in GPQA's CSV form (the correct answer and the three others), through GPQA's
    ``process_docs`` (which shuffles the choices per question)."""
    import datasets

    rows = [
        {
            "Question": doc["question"],
            "Correct Answer": doc["choices"][doc["answer"]],
            **{
                f"Incorrect Answer {i}": choice
                for i, choice in enumerate((c for j, c in enumerate(doc["choices"]) if j != doc["answer"]), 1)
            },
        }
        for doc in mmlu.load_test()["test"]
    ]
    return list(gpqa.process_docs(datasets.Dataset.from_list(rows)))


def _arithmetic_docs() -> list[dict]:
    splits = arithmetic.load_test()
    return [doc for split in ("test", "train") for doc in arithmetic.process_docs(splits[split])]


def _datasets(shared: Path) -> list[CheckedDataset]:
    alias_key = lambda doc: normalize_answer(doc["gold_answer"])  # noqa: E731
    return [
        CheckedDataset(
            "gsm8k test", _docs(gsm8k.load_test, gsm8k.process_docs, "test"), gsm8k.process_results,
            _gsm8k_gold_text, lambda doc: doc["gold_answer"], prompt=gsm8k.doc_to_text,
        ),
        CheckedDataset(
            "math500 test", _docs(math.load_math500, math.process_docs_math500, "test"), math.process_results,
            lambda doc: last_boxed(doc["solution"]), lambda doc: "".join(doc["gold_answer"].split()),
            prompt=math.doc_to_text,
        ),
        CheckedDataset(
            "aime2025", _docs(aime.load_test, aime.process_docs, "test"), aime.process_results,
            lambda doc: str(doc["gold_answer"]), lambda doc: doc["gold_answer"], prompt=aime.doc_to_text,
        ),
        CheckedDataset(
            "arithmetic (test and train)", _arithmetic_docs, arithmetic.process_results,
            arithmetic.doc_to_target, lambda doc: doc["gold_answer"], prompt=arithmetic.doc_to_text,
        ),
        CheckedDataset(
            "triviaqa sm_sub (validation)",
            _docs(triviaqa.load_validation, triviaqa.process_docs, "validation"),
            triviaqa.process_results, lambda doc: doc["gold_answer"], alias_key, prompt=triviaqa.doc_to_text,
        ),
        CheckedDataset(
            "triviaqa sm_sub (validation), exact label",
            _docs(triviaqa.load_validation, triviaqa.process_docs, "validation"),
            triviaqa.process_results, lambda doc: doc["gold_answer"], alias_key, "exact_alias_correctness",
            prompt=triviaqa.doc_to_text,
        ),
        CheckedDataset(
            "triviaqa small", lambda: _triviaqa_small(shared), triviaqa.process_results,
            lambda doc: doc["gold_answer"], alias_key, prompt=triviaqa.doc_to_text,
        ),
        CheckedDataset(
            "simpleqa", _docs(simpleqa.load_test, simpleqa.process_docs, "test"), simpleqa.process_results,
            lambda doc: doc["gold_answer"], alias_key, prompt=simpleqa.doc_to_text,
        ),
        CheckedDataset(
            "simpleqa, exact label", _docs(simpleqa.load_test, simpleqa.process_docs, "test"),
            simpleqa.process_results, lambda doc: doc["gold_answer"], alias_key, "exact_alias_correctness",
            prompt=simpleqa.doc_to_text,
        ),
        CheckedDataset(
            "mmlu test", _docs(mmlu.load_test, mmlu.process_docs, "test"), mmlu.process_results,
            lambda doc: doc["gold_answer"], lambda doc: doc["gold_answer"], prompt=mmlu.doc_to_text,
            stem=lambda doc: doc["question"].strip(),
        ),
        CheckedDataset(
            "mmlu validation", _docs(mmlu.load_validation, mmlu.process_docs, "validation"),
            mmlu.process_results, lambda doc: doc["gold_answer"], lambda doc: doc["gold_answer"],
            prompt=mmlu.doc_to_text, stem=lambda doc: doc["question"].strip(),
        ),
        CheckedDataset(
            "gpqa code path (mmlu test questions)", _gpqa_from_mmlu, gpqa.process_results,
            lambda doc: doc["gold_answer"], lambda doc: doc["gold_answer"], prompt=gpqa.doc_to_text,
            stem=lambda doc: doc["Question"].strip(),
        ),
    ]  # fmt: skip


def _response(answer: str) -> str:
    return f"Let me work through this step by step.\nSo the final answer is \\boxed{{{answer}}}."


def _judged_correct(dataset: CheckedDataset, doc: dict, answer: str) -> bool:
    return bool(dataset.process_results(doc, [[_response(answer)]])[dataset.label][0])


DATASET_NAMES = [dataset.name for dataset in _datasets(Path("."))]


@pytest.fixture(scope="module")
def dataset_docs(local_data) -> Callable[[CheckedDataset], tuple[dict, ...]]:
    """The docs of a dataset, read from ``local_data`` once for the module's two tests of it (which only
    read them: no checker changes a doc; MMLU's 14,042 test questions take seconds to read)."""
    loaded: dict[str, tuple[dict, ...]] = {}

    def docs(dataset: CheckedDataset) -> tuple[dict, ...]:
        if dataset.name not in loaded:
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("CAPCAL_DATA_DIR", str(local_data))
                loaded[dataset.name] = tuple(dataset.load())
        return loaded[dataset.name]

    return docs


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_checker_agrees_with_gold_answers(name, local_data, dataset_docs, monkeypatch):
    monkeypatch.setenv("CAPCAL_DATA_DIR", str(local_data))
    dataset = next(d for d in _datasets(local_data) if d.name == name)
    docs = dataset_docs(dataset)
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


# (name, response) pairs of the adversarial table; each is judged for every question of a dataset at once, as
# the k responses of one process_results call.
NO_ANSWER_RESPONSES: tuple[tuple[str, Callable[[CheckedDataset, dict], str]], ...] = (
    ("(a) question restated", lambda dataset, doc: dataset.stem(doc)),
    ("(b) question and choices restated", lambda dataset, doc: doc["question_text"]),
    ("(c) prompt echoed verbatim", lambda dataset, doc: dataset.prompt(doc)),
    ("(d) empty response", lambda dataset, doc: ""),
    ("(d) refusal", lambda dataset, doc: "I don't know."),
)
DENIAL = "(e) gold named inside a denial"


def _denial(dataset: CheckedDataset, doc: dict) -> str:
    return f"It is not {dataset.stated_gold(doc)}."


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_responses_without_an_answer_are_judged_wrong(name, local_data, dataset_docs, monkeypatch):
    """Adversarial table: (a)-(d) judged wrong for >= 99.5% of the questions; (e) printed, no target."""
    monkeypatch.setenv("CAPCAL_DATA_DIR", str(local_data))
    dataset = next(d for d in _datasets(local_data) if d.name == name)
    docs = dataset_docs(dataset)
    n = len(docs)
    assert n >= 30
    cases = [*NO_ANSWER_RESPONSES, (DENIAL, _denial)]
    accepted: dict[str, list] = {case: [] for case, _ in cases}
    for doc in docs:
        responses = [make(dataset, doc) for _, make in cases]
        labels = dataset.process_results(doc, [responses])[dataset.label]
        for (case, _), label, response in zip(cases, labels, responses, strict=True):
            if label:
                accepted[case].append((doc["question_id"], response[-120:], doc["gold_answer"]))
    for case, found in accepted.items():
        print(f"\n{name}: {case} judged correct ({len(found)}): {found[:10]}")
    print(
        f"ADVERSARIAL AGREEMENT {name}: "
        + "; ".join(
            f"{case} judged wrong {n - len(found)}/{n} ({100 * (1 - len(found) / n):.2f}%)"
            for case, found in accepted.items()
        )
    )
    for case, _ in NO_ANSWER_RESPONSES:
        assert 1 - len(accepted[case]) / n >= REQUIRED_AGREEMENT, (case, accepted[case][:5])
