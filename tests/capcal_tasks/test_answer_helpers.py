r"""The answer helpers' contracts beyond the checks of test_answers.py: the documented choice shuffle, a
choice list at the very end of a prompt, and the math-verify worker's fall-backs (a failure, the time
limit, a worker that cannot start), with the warnings and messages they give."""

from __future__ import annotations

import hashlib
import logging
import random
from pathlib import Path

import pytest

from capcal_tasks.answers import math_equivalence
from capcal_tasks.answers.choices import extract_choice_letter, shuffle_choices
from capcal_tasks.answers.math_equivalence import MathEquivalenceChecker
from capcal_tasks.answers.prompt_echo import remove_prompt_text


def test_shuffle_choices_follows_its_documented_seed():
    """The order is random.Random(seed).shuffle of the choice indexes, seed = the first 8 bytes of the
    SHA-256 of the UTF-8 seed text, big-endian: recomputed here from that description."""
    choices = ["right", "w1", "w2", "w3"]
    for seed_text in ("Q1", "mmlu/anatomy/17", "¿Qué? 中文", ""):
        seed = int.from_bytes(hashlib.sha256(seed_text.encode("utf-8")).digest()[:8], "big")
        order = [0, 1, 2, 3]
        random.Random(seed).shuffle(order)
        assert shuffle_choices("right", ["w1", "w2", "w3"], seed_text) == (
            [choices[i] for i in order],
            order.index(0),
        ), seed_text


_PROMPT_ENDING_IN_CHOICES = "Which city is the capital of France?\nA. Rome\nB. Madrid\nC. Berlin\nD. Paris"


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("D. Paris", "D. Paris"),  # one choice standing alone is an answer, not an echo
        ("C. Berlin", "C. Berlin"),
        ("A. Rome\nB. Madrid\nC. Berlin\nD. Paris\nD. Paris", ""),  # the list of choices is the prompt's
    ],
)
def test_a_choice_list_that_ends_the_prompt_is_still_a_choice_list(response, expected):
    """The prompt's last four lines are its choice list: a single choice line repeated is kept (a short
    line of the prompt otherwise would be dropped)."""
    assert remove_prompt_text(response, _PROMPT_ENDING_IN_CHOICES) == expected
    assert (
        extract_choice_letter(remove_prompt_text("So the answer:\nD. Paris", _PROMPT_ENDING_IN_CHOICES))
        == "D"
    )


def test_math_verify_failures_fall_back_to_whitespace_free_strings():
    """Answers math-verify parses to nothing ("$", an empty \\text{}) are compared as strings without
    whitespace, and counted as failures (not time-outs)."""
    checker = MathEquivalenceChecker(time_limit_s=60.0)  # generous: these calls must not time out
    try:
        assert checker.equal("$$", " $ $ ") is True
        assert checker.equal("$", r"\text{}") is False
        assert (checker.failures, checker.timeouts) == (2, 0)
    finally:
        checker.close()


def test_the_shared_checker_takes_its_time_limit_from_the_environment(monkeypatch):
    """math_answers_equal's process-wide checker uses CAPCAL_MATH_VERIFY_TIME_LIMIT when set (a missing
    prediction is decided without starting the worker)."""
    monkeypatch.setattr(math_equivalence, "_default_checker", None)
    monkeypatch.setenv("CAPCAL_MATH_VERIFY_TIME_LIMIT", "2.5")
    assert math_equivalence.math_answers_equal("5", None) is False
    assert math_equivalence._default_checker is not None
    assert math_equivalence._default_checker.time_limit_s == 2.5


def test_math_verify_time_out_is_logged_with_its_limit_and_answers(caplog):
    """A call past the time limit gives a warning naming the limit, the prediction and the gold."""
    caplog.set_level(logging.WARNING, logger="capcal_tasks.answers.math_equivalence")
    checker = MathEquivalenceChecker(time_limit_s=0.5)  # sympy computes this power tower for minutes
    try:
        assert checker.equal("5", r"9^{9^{9^{9}}}") is False
        assert (checker.timeouts, checker.failures) == (1, 0)
    finally:
        checker.close()
    assert [record.getMessage() for record in caplog.records] == [
        "math-verify took more than 0.5 s on prediction '9^{9^{9^{9}}}' (gold '5'); "
        "compared as strings instead"
    ]


def test_a_worker_that_cannot_start_names_the_missing_extra(tmp_path: Path, monkeypatch):
    """The worker runs with the caller's PYTHONPATH (after capcal's own folder): a math_verify there that
    cannot be imported, as without the 'math' extra, stops it before it is ready, and the error says what to
    install and what the worker printed (nothing)."""
    package = tmp_path / "math_verify"
    package.mkdir()
    (package / "__init__.py").write_text('raise ImportError("math_verify stands in for a missing install")\n')
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    checker = MathEquivalenceChecker()
    try:
        with pytest.raises(RuntimeError) as raised:
            checker.equal("1", "1")
    finally:
        checker.close()
    assert str(raised.value) == (
        "the math-verify worker did not start (is capcal's 'math' extra, lm-eval[math], installed?); "
        "its first output was None"
    )


def test_the_worker_runs_the_callers_capcal_before_another_on_pythonpath(tmp_path: Path, monkeypatch):
    """The worker's PYTHONPATH starts with the caller's own capcal folder: a capcal_tasks elsewhere on the
    caller's PYTHONPATH (another checkout; here a stand-in worker that calls every answer equal) does not
    run in its place, wherever the caller runs from."""
    answers = tmp_path / "other_checkout" / "capcal_tasks" / "answers"
    answers.mkdir(parents=True)
    (answers.parent / "__init__.py").write_text("")
    (answers / "__init__.py").write_text("")
    (answers / "math_equivalence.py").write_text(
        "import json, sys\n"
        "print(json.dumps({'ready': True}), flush=True)\n"
        "for line in sys.stdin:\n"
        "    print(json.dumps({'equal': True}), flush=True)\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "other_checkout"))
    monkeypatch.chdir(tmp_path)  # `python -m` puts the working folder first: not capcal's here
    # under mutmut's coverage pass (tests/README.md) the worker's code reads mutmut's settings from the
    # working folder; these are they (nothing else reads this file)
    (tmp_path / "setup.cfg").write_text("[mutmut]\nsource_paths = capcal_tasks\n")
    checker = MathEquivalenceChecker(time_limit_s=60.0)
    try:
        assert checker.equal("1", "2") is False
        assert checker.equal("2", "2") is True
        assert (checker.failures, checker.timeouts) == (0, 0)
    finally:
        checker.close()
