import json
import sys
import threading
import time
from pathlib import Path

import pytest

from capcal_tasks.answers.aliases import (
    equals_an_alias,
    extract_short_answer,
    matches_an_alias,
    normalize_answer,
)
from capcal_tasks.answers.boxed import boxed_contents, last_boxed
from capcal_tasks.answers.choices import extract_choice_letter, format_choices, shuffle_choices
from capcal_tasks.answers.integer import parse_integer
from capcal_tasks.answers.math_equivalence import MathEquivalenceChecker
from capcal_tasks.answers.numeric import gsm8k_gold, numbers_equal, parse_number
from capcal_tasks.answers.prompt_echo import remove_prompt_text
from capcal_tasks.confidence.verbalized import parse_verbalized_confidence
from capcal_tasks.gsm8k.task import extract_answer, is_correct

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/time_limits.py
from time_limits import contention  # noqa: E402


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so \boxed{18}.", "18"),
        (r"\boxed{1} then \boxed{2}", "2"),
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{a{b{c}}d}", "a{b{c}}d"),
        (r"\boxed {7}", "7"),
        (r"\fbox{9}", "9"),
        (r"\boxed 5 apples", "5"),
        (r"\boxed{3} and an unfinished \boxed{4", "3"),
        ("no box here", None),
        ("", None),
        (r"\boxed{", None),
    ],
)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("18", 18.0),
        ("-3", -3.0),
        ("1,234", 1234.0),
        ("$18.00", 18.0),
        (r"\$5", 5.0),
        ("50%", 50.0),
        ("18 dollars", 18.0),
        (r"18 \text{ eggs}", 18.0),
        (r"\frac{3}{4}", 0.75),
        (".5", 0.5),
        ("7.", 7.0),
        ("3 or 4", None),
        ("x = 4", None),
        ("", None),
        (None, None),
        (r"\frac{1}{0}", None),
    ],
)
def test_parse_number(answer, expected):
    assert parse_number(answer) == expected


def test_numbers_equal_tolerance():
    assert numbers_equal(18.0000001, 18.0)
    assert not numbers_equal(18.01, 18.0)
    assert not numbers_equal(None, 18.0)


def test_gsm8k_gold_requires_marker():
    assert gsm8k_gold("work...\n#### 1,000") == 1000.0
    with pytest.raises(ValueError, match="####"):
        gsm8k_gold("no final answer")


def test_gsm8k_checker_on_every_real_question(shared_data):
    """Every GSM8K test gold answer written as \\boxed{gold} is correct; another question's gold is wrong."""
    records = [json.loads(line) for line in (shared_data / "gsm8k" / "test.jsonl").open()]
    assert len(records) == 1319
    golds = [gsm8k_gold(record["answer"]) for record in records]
    gold_strings = [record["answer"].rpartition("####")[2].strip() for record in records]

    right = [
        is_correct(extract_answer(f"Reasoning...\n\\boxed{{{text}}}"), gold)
        for text, gold in zip(gold_strings, golds, strict=True)
    ]
    disagreements = [(i, gold_strings[i]) for i, ok in enumerate(right) if not ok]
    print("gold judged wrong:", disagreements)
    assert sum(right) == 1319

    wrong_judged_correct = []
    for i, gold in enumerate(golds):
        j = next(j for j in range(i + 1, i + len(golds)) if golds[j % len(golds)] != gold) % len(golds)
        if is_correct(extract_answer(f"\\boxed{{{gold_strings[j]}}}"), gold):
            wrong_judged_correct.append((i, gold_strings[j]))
        if is_correct(extract_answer(f"\\boxed{{{gold + 1:g}}}"), gold):
            wrong_judged_correct.append((i, gold + 1))
    print("wrong answers judged correct:", wrong_judged_correct)
    assert wrong_judged_correct == []


def test_boxed_contents_in_order_with_nesting():
    assert boxed_contents(r"\boxed{1} x \boxed{\frac{1}{2}} y \boxed{") == ["1", r"\frac{1}{2}"]
    assert boxed_contents(r"\boxed{\boxed{3}}") == [r"\boxed{3}", "3"]
    assert boxed_contents("") == []


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("70", 70), ("070", 70), ("70.0", 70), ("1,000", 1000), (r"\text{70}", 70), ("70.5", None),
     ("3 or 4", None), ("x", None), (None, None)],
)  # fmt: skip
def test_parse_integer(answer, expected):
    assert parse_integer(answer) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("The Beatles!", "beatles"), ("  A   Tale of Two Cities ", "tale of two cities"), ("Anne", "anne"),
     ("£", ""), ("U.S.A.", "us")],  # the paper's order: articles go before punctuation (the "a" of U.S.A.)
)  # fmt: skip
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (r"I think \boxed{Sinclair Lewis}.", "Sinclair Lewis"),
        (r"\boxed{\text{Paris}}", "Paris"),
        (r"\boxed{a} then \boxed{f(x^{2})}", "f(x^{2})"),
        ("Some thoughts.\nThe answer is: **Mount Everest**.\nDone", "Mount Everest"),
        ("Some thoughts\n\nParis, France.\n", "Paris, France"),
        ("", None),
        ("   \n", None),
    ],
)
def test_extract_short_answer(response, expected):
    assert extract_short_answer(response) == expected


def test_alias_labels():
    aliases = ["Sinclair Lewis", "Harry Sinclair Lewis"]
    assert matches_an_alias("sinclair lewis", aliases) and equals_an_alias("The Sinclair Lewis.", aliases)
    assert matches_an_alias("Lewis", aliases) and not equals_an_alias("Lewis", aliases)  # contained
    assert matches_an_alias("Writer Harry Sinclair Lewis of Minnesota", aliases)  # contains
    assert not matches_an_alias("Lew", aliases)  # containment is of whole words
    assert not matches_an_alias("2", ["March 2018"]) and matches_an_alias("2018", ["March 2018"])
    assert not matches_an_alias("The", aliases) and not matches_an_alias(
        "...", aliases
    )  # empty after normalising
    assert not matches_an_alias(None, aliases) and not equals_an_alias(None, aliases)
    assert not matches_an_alias("Paris", ["£"])


def test_an_alias_the_question_names_matches_only_an_equal_answer():
    question = "Who succeeded Tony Blair as Prime Minister in 2007?"
    aliases = ["Gordon Brown", "Brown", "Tony Blair"]  # a noisy alias list, as TriviaQA's can be
    assert matches_an_alias("The successor of Tony Blair", aliases)  # the paper's label: contains an alias
    assert not matches_an_alias("The successor of Tony Blair", aliases, question)
    assert matches_an_alias("Tony Blair", aliases, question)  # stated alone, it is the answer given
    assert matches_an_alias("It was Gordon Brown", aliases, question)  # an alias the question does not name


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (r"\boxed{B}", "B"), (r"\boxed{(C)}", "C"), (r"\boxed{D. 42}", "D"), (r"\boxed{\text{A}}", "A"),
        (r"\boxed{B} then \boxed{42}", "B"), ("The answer is (C).", "C"), ("the answer is D", "D"),
        ("Answer: B", "B"), ("I pick A over B. Final: C", "C"), ("No letter here", None),
        (r"\boxed{Answer}", None), ("", None), ("one of A, B, C, or D", None), ("(A, B, C or D): B", "B"),
        # "answer is X" is tried before "answer: X" (a draft marked "Answer:" then a stated answer)
        ("Answer: A would be my first guess, but the answer is C.", "C"),
    ],
)  # fmt: skip
def test_extract_choice_letter(response, expected):
    assert extract_choice_letter(response) == expected


_CHOICE_PROMPT = (
    "Which city is the capital of France?\nA. Rome\nB. Madrid\nC. Berlin\nD. Paris\n\n"
    "After your reasoning, provide your final answer choice X (A, B, C, or D) in the format of \\boxed{X}."
)


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("Paris", "Paris"),  # repeats nothing: unchanged, byte for byte
        ("which city IS the   capital\nof France? Paris", "  Paris"),  # case and spacing ignored
        ("A. Rome\nB. Madrid\nC. Berlin\nD. Paris", ""),  # the list of choices is the prompt's
        ("D. Paris", "D. Paris"),  # one choice standing alone is an answer
        ("The answer is D. Paris", "The answer is D. Paris"),  # a choice line is never cut out of a line
        ("Which city is the capital of France? A. Rome", "  A. Rome"),
        (_CHOICE_PROMPT.splitlines()[-1], " "),  # the instruction, a sentence of the prompt
        (
            "provide your final answer choice X (A, B, C, or D)",
            "provide your final answer choice X (A, B, C, or D)",
        ),
        ("Which city", "Which city"),  # fewer than three words of a line: not the prompt's
    ],
)
def test_remove_prompt_text(response, expected):
    assert remove_prompt_text(response, _CHOICE_PROMPT) == expected
    assert remove_prompt_text(response, "") == response


def test_a_question_line_that_looks_like_a_choice_is_still_the_question():
    prompt = "B. F. Skinner was known for\nA. operant conditioning\nB. dreams\nC. archetypes\nD. memory"
    assert remove_prompt_text("B. F. Skinner was known for", prompt).strip() == ""
    assert extract_choice_letter(remove_prompt_text("B. F. Skinner was known for", prompt)) is None


def test_shuffle_choices_is_seeded_by_the_question():
    choices, gold = shuffle_choices("right", ["w1", "w2", "w3"], seed_text="Q1")
    assert sorted(choices) == ["right", "w1", "w2", "w3"] and choices[gold] == "right"
    assert shuffle_choices("right", ["w1", "w2", "w3"], seed_text="Q1") == (choices, gold)
    golds = {shuffle_choices("right", ["w1", "w2", "w3"], seed_text=f"Q{i}")[1] for i in range(40)}
    assert golds == {0, 1, 2, 3}
    assert format_choices("Q?", choices).splitlines()[1 + gold] == f"{'ABCD'[gold]}. right"


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (r"Reasoning... \boxed{0.7}", 0.7), (r"\boxed{0.7} but finally \boxed{.25}", 0.25),
        (r"\boxed{0.3} and the answer \boxed{42}", 0.3), (r"\boxed{1}", 1.0), (r"\boxed{0}", 0.0),
        (r"<think>\boxed{0.9}</think> so \boxed{0.2}", 0.2), (r"<think>\boxed{0.9}</think> nothing", None),
        (r"\boxed{P}", None), (r"\boxed{1.5}", None), ("P = 0.8", None), ("", None),
    ],
)  # fmt: skip
def test_parse_verbalized_confidence(response, expected):
    assert parse_verbalized_confidence(response) == expected


@pytest.fixture(scope="module")
def math_checker():
    checker = MathEquivalenceChecker(time_limit_s=3.0)
    yield checker
    checker.close()


@pytest.mark.parametrize(
    ("gold", "prediction", "expected"),
    [
        (r"\frac{1}{2}", "0.5", True), (r"3\sqrt{13}", r"\sqrt{117}", True),
        (r"\left( 3, \frac{\pi}{2} \right)", r"(3, \pi/2)", True), (r"\text{Evelyn}", r"\text{Evelyn}", True),
        (r"\frac{1}{2}", r"\frac{1}{3}", False), ("5", "x=5", True), ("6", "x=5", False),
        (r"\text{Evelyn}", "Bob", False), ("5", None, False), ("5", "", False),
    ],
)  # fmt: skip
def test_math_equivalence(math_checker, gold, prediction, expected):
    assert math_checker.equal(gold, prediction) is expected


def test_math_equivalence_times_out_on_pathological_latex(math_checker):
    """A power tower makes sympy compute for minutes: the call is cut at the limit, the worker restarted."""
    scale = contention()  # a timeout that must fire: wall-clock time, its slack scaled by the contention
    started = time.monotonic()
    assert math_checker.equal("5", r"9^{9^{9^{9}}}") is False
    assert time.monotonic() - started < 3.0 + 2.0 * max(scale, contention())
    assert math_checker.timeouts >= 1
    assert math_checker.equal("4", "2+2") is True  # a fresh worker answers the next call


def test_math_equivalence_time_limit_holds_outside_the_main_thread():
    """math-verify's own (signal) time limit works only in the main thread; capcal's works in any thread."""
    checker = MathEquivalenceChecker(time_limit_s=2.0)
    outcome = []
    thread = threading.Thread(target=lambda: outcome.append(checker.equal("7", r"10^{10^{10^{10}}}")))
    scale = contention()
    started = time.monotonic()
    thread.start()
    thread.join(timeout=30)
    checker.close()
    assert outcome == [False] and time.monotonic() - started < 2.0 + 5.0 * max(scale, contention())
