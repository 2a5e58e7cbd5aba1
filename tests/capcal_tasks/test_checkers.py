r"""The named checkers of ``capcal rescore`` (``capcal_tasks.checkers``) on real documents of ../shared/data:
which tasks each applies to, their verdicts (exact vs alias on TriviaQA, math-verify vs string match on
MATH-500), the ``task`` checker equal to the task's own ``process_results``, and the provenance helpers the
readers use."""

from __future__ import annotations

import re

import datasets
import pytest

from capcal_tasks import checkers
from capcal_tasks.answers.aliases import normalize_answer
from capcal_tasks.checkers import (
    RULE_CHECKERS,
    CheckItem,
    Verdict,
    describe_labels,
    labels_of_an_earlier_version,
    parse_rescore_provenance,
    recheck_scorer,
    rule_checker,
)
from capcal_tasks.math import task as math_task
from capcal_tasks.records import RunFormatError
from capcal_tasks.sampling import task_checker, task_version
from capcal_tasks.triviaqa import task as triviaqa

SAMPLING_TASKS = ["capcal_triviaqa", "capcal_simpleqa", "capcal_gsm8k", "capcal_math500", "capcal_aime25",
                  "capcal_mmlu", "capcal_gpqa", "capcal_arithmetic"]  # fmt: skip
APPLIES = {
    "task": set(SAMPLING_TASKS),
    "alias": {"capcal_triviaqa", "capcal_simpleqa"},
    "exact": {"capcal_triviaqa", "capcal_simpleqa"},
    "math-verify": {"capcal_gsm8k", "capcal_math500", "capcal_aime25"},
    "math-string": {"capcal_math500"},
}


@pytest.fixture(scope="module")
def trivia_docs(shared_data) -> list[dict]:
    rows = triviaqa.read_triviaqa_jsonl(shared_data / "triviaqa" / "triviaqa_small.jsonl")
    return list(triviaqa.process_docs(datasets.Dataset.from_list(rows)))[:40]


@pytest.fixture(scope="module")
def math_docs(shared_data) -> list[dict]:
    rows = datasets.Dataset.from_json(str(shared_data / "math500" / "test.jsonl"))
    return list(math_task.process_docs_math500(rows))


def _item(task: str, doc: dict, response: str) -> CheckItem:
    return CheckItem(task, doc["question_id"], doc, response, None, doc.get("gold_answer"))


@pytest.fixture
def fresh_rule_checkers():
    """The rule checkers built within the test: the registry is cached per process, so a test run before
    (or the process a mutation run forks its tests from) may have built it already."""
    checkers._rule_checkers.cache_clear()
    yield
    checkers._rule_checkers.cache_clear()


@pytest.mark.parametrize("name", RULE_CHECKERS)
def test_each_checker_applies_to_its_tasks_only(name, fresh_rule_checkers):
    """A rule applies to the tasks of its answer form only (a rule built for every task would score the
    other tasks' answers by the wrong rule)."""
    checker = rule_checker(name)
    assert {task for task in SAMPLING_TASKS if checker.supports(task)} == APPLIES[name]
    assert not checker.supports("capcal_gsm8k_ptrue") and not checker.supports("no_such_task")
    assert checker.name == name and checker.judge_model is None and checker.version.startswith("capcal ")


def test_math_verify_version_names_math_verify():
    assert "math-verify 0." in rule_checker("math-verify").version


def test_unknown_rule_checker_is_refused():
    with pytest.raises(ValueError, match="unknown rule checker 'judge' \\(known: task, alias, exact"):
        rule_checker("judge")


def test_exact_and_alias_on_real_triviaqa_questions(trivia_docs):
    """The gold answer stated: both correct; the gold with a word added: the alias label only (containment);
    another question's gold: neither (unless the two golds share an alias)."""
    exact, alias = rule_checker("exact"), rule_checker("alias")
    differ = 0
    for index, doc in enumerate(trivia_docs):
        other = trivia_docs[(index + 1) % len(trivia_docs)]
        items = [
            _item("capcal_triviaqa", doc, f"The answer is {doc['gold_answer']}."),
            _item("capcal_triviaqa", doc, f"The answer is {doc['gold_answer']} indeed"),
            _item("capcal_triviaqa", doc, f"The answer is {other['gold_answer']}."),
        ]
        exact_verdicts, alias_verdicts = exact.check(items), alias.check(items)
        assert [v.correct for v in exact_verdicts][0] == 1 and [v.correct for v in alias_verdicts][0] == 1
        assert alias_verdicts[1].correct == 1 and alias_verdicts[1].extracted_answer.endswith(" indeed")
        assert alias_verdicts[1].raw is None and isinstance(alias_verdicts[1], Verdict)
        aliases = {normalize_answer(a) for a in doc["gold_aliases"]}
        expected_exact = int(normalize_answer(f"{doc['gold_answer']} indeed") in aliases)
        assert exact_verdicts[1].correct == expected_exact
        differ += alias_verdicts[1].correct - exact_verdicts[1].correct
        own = {normalize_answer(a) for a in doc["gold_aliases"]}
        if normalize_answer(other["gold_answer"]) not in own:
            assert exact_verdicts[2].correct == 0
    assert differ >= len(trivia_docs) - 2  # the labels differ on nearly every question


def test_an_alias_the_question_names_is_credited_only_when_stated_alone(trivia_docs):
    """An alias whose words the question holds ("Highest mountain in Africa" for "Which volcano in Tanzania is
    the highest mountain in Africa?") counts only when the answer equals it, as in the task's own checker: a
    response that restates the question around it is not credited by the alias rule, one naming the mountain
    is."""
    doc = next(doc for doc in trivia_docs if doc["gold_answer"] == "Kilimanjaro")
    assert "highest mountain in Africa" in doc["question_text"]
    responses = [
        "The answer is the dormant volcano that is the highest mountain in Africa.",
        "It is the highest mountain in Africa, of course",
        "The answer is Kilimanjaro, the highest mountain in Africa.",
        "The answer is the highest mountain in Africa.",
    ]
    record = rule_checker("alias").score("capcal_triviaqa", doc, responses)
    assert record["correctness"] == [0, 0, 1, 1]
    assert record["correctness"] == triviaqa.process_results(doc, [responses])["correctness"]


def test_task_checker_is_the_tasks_process_results(trivia_docs):
    doc = trivia_docs[0]
    responses = [f"The answer is {doc['gold_answer']}.", "I do not know", f"answer is {doc['gold_answer']}!"]
    record = rule_checker("task").score("capcal_triviaqa", doc, responses)
    assert record == triviaqa.process_results(doc, [responses])
    assert "exact_alias_correctness" in record  # the task's own record, exact label included
    alias_record = rule_checker("alias").score("capcal_triviaqa", doc, responses)
    assert alias_record["correctness"] == record["correctness"]
    assert alias_record["majority_vote_accuracy"] == record["majority_vote_accuracy"]
    assert "exact_alias_correctness" not in alias_record  # a re-scored record holds its checker's labels only


def test_math_verify_and_string_match_on_real_math500_answers(math_docs):
    """A simple fraction stated as its decimal ("0.5" for "\\frac{1}{2}"): math-verify accepts, the string
    match does not; the gold with spaces added: both accept; the gold plus one: neither."""
    verify, string = rule_checker("math-verify"), rule_checker("math-string")
    fractions = []
    for doc in math_docs:
        match = re.fullmatch(r"\\frac\{(\d+)\}\{(2|4|5|8)\}", doc["gold_answer"])
        if match:
            fractions.append((doc, str(int(match[1]) / int(match[2]))))
    integers = [doc for doc in math_docs if doc["gold_answer"].isdigit()][:5]
    assert len(fractions) >= 3 and len(integers) == 5, "MATH-500 holds simple fractions and integers"
    for doc in integers:
        items = [_item("capcal_math500", doc, f"So \\boxed{{ {doc['gold_answer']} }}")]
        assert verify.check(items)[0].correct == 1 and string.check(items)[0].correct == 1
        wrong = [_item("capcal_math500", doc, f"\\boxed{{{int(doc['gold_answer']) + 1}}}")]
        assert verify.check(wrong)[0].correct == 0 and string.check(wrong)[0].correct == 0
    for doc, decimal in fractions:
        items = [_item("capcal_math500", doc, f"\\boxed{{{decimal}}}")]
        assert verify.check(items)[0].correct == 1 and string.check(items)[0].correct == 0, (
            doc["gold_answer"],
            decimal,
        )
    gold = integers[0]["gold_answer"]
    record = verify.score("capcal_math500", integers[0], [f"\\boxed{{{gold}}}", "no box"])
    assert record["correctness"] == [1, 0] and record["extracted_answers"] == [gold, None]


def test_majority_vote_groups_every_correct_answer_into_one_class(trivia_docs):
    """Three correct answers in three wordings against one wrong answer given twice: the correct answers vote
    as one class (3 votes to 2), under the alias rule and under the task's own checker; grouped by their
    text instead, the wrong answer would win the vote."""
    doc = trivia_docs[0]
    other = next(
        d
        for d in trivia_docs
        if normalize_answer(d["gold_answer"]) not in map(normalize_answer, doc["gold_aliases"])
    )
    gold = doc["gold_answer"]
    responses = [f"The answer is {gold}.", f"The answer is {gold} indeed", f"The answer is {gold} for sure"]
    responses += [f"The answer is {other['gold_answer']}."] * 2
    for name in ("alias", "task"):
        record = rule_checker(name).score("capcal_triviaqa", doc, responses)
        assert record["correctness"] == [1, 1, 1, 0, 0], name
        assert len({normalize_answer(a) for a in record["extracted_answers"][:3]}) == 3
        assert record["majority_vote_accuracy"] == 1.0, name


def test_an_answer_empty_under_its_key_does_not_vote(trivia_docs, math_docs):
    """An extracted answer that is empty once normalised ("The", an empty box) is no vote: one correct
    answer against two such answers is a correct majority vote."""
    doc = trivia_docs[0]
    responses = [f"The answer is {doc['gold_answer']}.", "The answer is The.", "The answer is The."]
    record = rule_checker("alias").score("capcal_triviaqa", doc, responses)
    assert record["extracted_answers"][1:] == ["The", "The"] and record["correctness"] == [1, 0, 0]
    assert record["majority_vote_accuracy"] == 1.0
    math_doc = next(d for d in math_docs if d["gold_answer"].isdigit())
    record = rule_checker("math-string").score(
        "capcal_math500", math_doc, [f"\\boxed{{{math_doc['gold_answer']}}}", "\\boxed{ }", "\\boxed{}"]
    )
    assert record["extracted_answers"] == [math_doc["gold_answer"], "", ""]
    assert record["correctness"] == [1, 0, 0]
    assert record["majority_vote_accuracy"] == 1.0


def test_describe_labels():
    assert describe_labels(None) == "task checker"
    provenance = {
        "checker": "exact",
        "checker_version": "capcal 0.1.0",
        "judge_model": None,
        "source_run": {},
    }
    assert describe_labels(provenance) == "rescored: exact (capcal 0.1.0)"
    judged = {**provenance, "checker": "judge", "checker_version": "simpleqa-grader 1", "judge_model": "m"}
    assert describe_labels(judged) == "rescored: judge (simpleqa-grader 1), judge m"


@pytest.mark.parametrize(
    "value, message",
    [
        ([], "'capcal_rescore' must be a JSON object"),
        ({"checker": "", "checker_version": "1", "source_run": {}}, "capcal_rescore.checker must be"),
        ({"checker": "exact", "checker_version": 2, "source_run": {}}, "capcal_rescore.checker_version"),
        (
            {"checker": "exact", "checker_version": "1", "judge_model": 3, "source_run": {}},
            "capcal_rescore.judge_model",
        ),
        ({"checker": "exact", "checker_version": "1"}, "capcal_rescore.source_run must be a JSON object"),
    ],
)
def test_malformed_provenance_is_one_line_naming_the_file(value, message):
    with pytest.raises(RunFormatError, match=f"^results.json: {message}"):
        parse_rescore_provenance(value, "results.json")
    assert parse_rescore_provenance(None, "results.json") is None


def test_readers_recheck_with_the_recorded_rule_when_cheap():
    def provenance(checker: str) -> dict:
        return {"checker": checker, "checker_version": "v", "judge_model": None, "source_run": {}}

    assert recheck_scorer("capcal_triviaqa", None) is task_checker("capcal_triviaqa")
    assert recheck_scorer("capcal_triviaqa", provenance("task")) is task_checker("capcal_triviaqa")
    assert recheck_scorer("capcal_triviaqa", provenance("exact")) is rule_checker("exact").scorer(
        "capcal_triviaqa"
    )
    assert recheck_scorer("capcal_math500", provenance("math-verify")) is None  # math-verify: too slow
    assert recheck_scorer("capcal_math500", provenance("task")) is None  # MATH's own checker is math-verify
    assert recheck_scorer("capcal_triviaqa", provenance("judge")) is None  # a model: never re-run on read


def test_labels_of_an_earlier_task_version_are_read_as_written():
    """Issue 34: version 2.0 of the sampling tasks changed their labels; a run logged by 1.0 is not
    re-checked with the new checker (it would disagree), and its labels say which version wrote them."""
    assert task_version("capcal_mmlu") == 2.0 and task_version("capcal_triviaqa_train") == 2.1  # issue 47
    assert task_version("capcal_mmlu_verbalized") is None  # not a sampling task
    assert labels_of_an_earlier_version("capcal_mmlu", 1.0)
    assert not labels_of_an_earlier_version("capcal_mmlu", "2.0") and not labels_of_an_earlier_version(
        "capcal_mmlu", None
    )
    assert recheck_scorer("capcal_mmlu", None, 1.0) is None
    assert recheck_scorer("capcal_mmlu", None, 2.0) is task_checker("capcal_mmlu")
    assert describe_labels(None, "capcal_mmlu", 1.0) == "task checker of version 1.0 (installed: 2.0)"
    assert describe_labels(None, "capcal_mmlu", 2.0) == "task checker"
