import json

import pytest

from capcal_tasks.answers.boxed import last_boxed
from capcal_tasks.answers.numeric import gsm8k_gold, numbers_equal, parse_number
from capcal_tasks.gsm8k.utils import extract_answer, is_correct


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
