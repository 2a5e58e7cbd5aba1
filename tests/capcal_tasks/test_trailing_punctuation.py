"""The extraction audit (issue 47): an answer followed by punctuation is read as the answer, on every dataset.

Each case scores responses through the task's own ``process_results`` (the labels a run records) with a
hand-made doc; the expected correctness and extracted answer are written by hand from the response text.
Before the audit, graded arithmetic read "3," out of "2 + 1 is 3, ..." and judged it wrong, and a brace-less
``\\boxed 70,`` (AIME, GSM8K) kept its comma.
"""

from __future__ import annotations

import pytest

from capcal_tasks.aime import task as aime
from capcal_tasks.answers.boxed import boxed_contents
from capcal_tasks.arithmetic import task as arithmetic
from capcal_tasks.checkers import describe_labels, recheck_scorer
from capcal_tasks.gpqa import task as gpqa
from capcal_tasks.gsm8k import task as gsm8k
from capcal_tasks.math import task as math500
from capcal_tasks.mmlu import task as mmlu
from capcal_tasks.sampling import task_checker
from capcal_tasks.simpleqa import task as simpleqa
from capcal_tasks.triviaqa import task as triviaqa

PUNCTUATION = [",", ".", ";", ":", "!", "?", ")", '"', "'", "”"]


def _scored(module, doc: dict, responses: list[str]) -> dict:
    return module.process_results(doc, [responses])


@pytest.mark.parametrize("mark", PUNCTUATION)
def test_arithmetic_reads_the_number_before_any_punctuation(mark):
    doc = {"question_text": "What is 2 + 1?", "gold_answer": 3.0}
    record = _scored(arithmetic, doc, [f"2 + 1 is 3{mark} \nIt is easy.", f"It is 3{mark} I am sure."])
    assert record["correctness"] == [1, 1]
    assert record["extracted_answers"] == ["3", "3"]


@pytest.mark.parametrize(
    ("response", "extracted", "correct"),
    [
        ("2 + 1 is 3, \nIt is...", "3", 1),  # the case
        ("It is 7, I am sure.", "7", 0),  # 7 read, and judged against 3
        ("The sum is 1,234,567.", "1,234,567", 0),  # thousands groups stay one number
        ("3,4", "4", 0),  # not a thousands group: two numbers, the last one read
        ("Answer: 3.", "3", 1),
        ("Answer: 3.0;", "3.0", 1),
        ("(3)", "3", 1),
    ],
)
def test_arithmetic_extraction_cases(response, extracted, correct):
    doc = {"question_text": "What is 2 + 1?", "gold_answer": 3.0}
    record = _scored(arithmetic, doc, [response])
    assert (record["extracted_answers"][0], record["correctness"][0]) == (extracted, correct)


def test_a_thousands_number_with_a_comma_after_it_is_one_number():
    doc = {"question_text": "What is 999 * 999?", "gold_answer": 998001.0}
    record = _scored(arithmetic, doc, ["It is 998,001, I think.", "998001."])
    assert record["extracted_answers"] == ["998,001", "998001"]
    assert record["correctness"] == [1, 1]


@pytest.mark.parametrize("mark", [",", ".", ";", ":", "?", ")", '"', "'"])
@pytest.mark.parametrize("module", [gsm8k, aime], ids=["gsm8k", "aime25"])
def test_a_braceless_box_drops_the_punctuation_after_it(module, mark):
    doc = {"question_text": "How many?", "gold_answer": 70}
    record = _scored(module, doc, [f"So the answer is \\boxed 70{mark} done", f"\\boxed{{70}}{mark}"])
    assert record["extracted_answers"] == ["70", "70"]
    assert record["correctness"] == [1, 1]


def test_a_factorial_in_a_braceless_box_is_not_its_number():
    doc = {"question_text": "How many?", "gold_answer": 5}
    record = _scored(aime, doc, ["\\boxed 5!"])
    assert record["extracted_answers"] == ["5!"] and record["correctness"] == [0]


@pytest.mark.parametrize("mark", [",", ".", ";", ":", "?"])
def test_gsm8k_boxed_number_with_punctuation_inside_the_box(mark):
    doc = {"question_text": "How many?", "gold_answer": 18.0}
    record = _scored(gsm8k, doc, [f"\\boxed{{18{mark}}}", f"\\boxed{{18 dollars{mark}}}"])
    assert record["correctness"] == [1, 1]


@pytest.mark.parametrize("mark", PUNCTUATION)
def test_math500_box_followed_by_punctuation(mark):
    doc = {"question_text": "Compute.", "gold_answer": "\\frac{1}{2}"}
    record = _scored(math500, doc, [f"The answer is $\\boxed{{\\frac{{1}}{{2}}}}${mark} Done."])
    assert record["extracted_answers"] == ["\\frac{1}{2}"]
    assert record["correctness"] == [1]


@pytest.mark.parametrize("mark", PUNCTUATION)
@pytest.mark.parametrize("module", [mmlu, gpqa], ids=["mmlu", "gpqa"])
def test_a_choice_letter_followed_by_punctuation(module, mark):
    doc = {"question_text": "Which?\nA. one\nB. two\nC. three\nD. four", "gold_answer": "B"}
    responses = [f"The answer is B{mark} so", f"Answer: B{mark}", f"\\boxed{{B}}{mark}", f"I pick (B){mark}"]
    record = _scored(module, doc, responses)
    assert record["extracted_answers"] == ["B"] * 4
    assert record["correctness"] == [1] * 4


@pytest.mark.parametrize("mark", PUNCTUATION)
@pytest.mark.parametrize("module", [triviaqa, simpleqa], ids=["triviaqa", "simpleqa"])
def test_a_short_answer_followed_by_punctuation(module, mark):
    doc = {"question_text": "What is the capital of France?", "gold_aliases": ["Paris"]}
    responses = [f"Paris{mark}", f"The answer is Paris{mark}", f"\\boxed{{Paris}}{mark}"]
    record = module.process_results(doc, [responses])
    assert record["correctness"] == [1, 1, 1]
    assert record["extracted_answers"] == ["Paris"] * 3


CHANGED = [
    "capcal_arithmetic",
    "capcal_arithmetic_train",
    "capcal_gsm8k",
    "capcal_gsm8k_train",
    "capcal_aime25",
    "capcal_math500",
    "capcal_math_train",
    "capcal_triviaqa",
    "capcal_triviaqa_train",
    "capcal_simpleqa",
    "capcal_simpleqa_verified",
]


@pytest.mark.parametrize("task", CHANGED)
def test_runs_labelled_before_the_audit_are_read_as_written(task):
    """The audit changes labels, so these tasks' version moved to 2.1: a run logged by 2.0 (whose "3," the
    new extractor reads as "3") is read as written, not re-checked into a format error."""
    assert recheck_scorer(task, None, "2.0") is None
    assert describe_labels(None, task, "2.0") == "task checker of version 2.0 (installed: 2.1)"
    assert recheck_scorer(task, None, "2.1") is task_checker(task)  # re-checked (MATH's math-verify: never)


@pytest.mark.parametrize(
    ("response", "content"),
    [
        ("\\boxed f(2)", "f(2)"),  # the ")" closes the token's own "(": kept
        ("\\boxed f(2))", "f(2)"),  # one ")" more than it opens: dropped
        ("\\boxed [1,2].", "[1,2]"),  # "]" kept, the full stop dropped
        ("\\boxed (x+1)),", "(x+1)"),
    ],
)
def test_a_braceless_box_keeps_a_closing_bracket_that_its_token_opens(response, content):
    assert boxed_contents(response) == [content]
