"""Reading the LLM judge's verdicts: a strict parser that never guesses.

The paper (after OpenAI simple-evals) reads a SimpleQA grade as correct iff the stripped, upper-cased output
ends with "A", and a MATH equivalence as correct iff the stripped, lower-cased output is or ends with "yes";
anything else counts as incorrect, so "BANANA" would be a correct grade and "I cannot say yes" a correct
equivalence. capcal reads the same verdicts but refuses what is not one: after dropping a thinking part (up to
the last ``</think>`` or harmony ``<|channel|>final<|message|>``), white space, Markdown emphasis, quotes and
one final period around it, the output must be

- grader (A/B/C): a letter, optionally in parentheses, optionally with its grade name ("A", "(B)",
  "C: NOT_ATTEMPTED", "Grade: A"), or the grade name alone ("CORRECT", "NOT ATTEMPTED"); a letter and a name
  that disagree ("A: INCORRECT") are refused;
- equivalence (Yes/No): "Yes" or "No";

case-insensitive. Anything else (empty, several verdicts, prose, an unfinished thinking part) is
unparseable: ``correct`` is None, the raw text is kept, and callers count it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from analysis.judge.prompts import JUDGE_PROMPTS, MATH_EQUIVALENCE

__all__ = ["PARSER_VERSION", "ParsedVerdict", "parse_verdict"]

PARSER_VERSION = "1"
THINKING_ENDS = ("</think>", "<|channel|>final<|message|>")
THINKING_STARTS = ("<think>", "<|channel|>analysis")
GRADE_NAMES = {"CORRECT": "A", "INCORRECT": "B", "NOT_ATTEMPTED": "C", "NOT ATTEMPTED": "C"}
_NAME = r"(CORRECT|INCORRECT|NOT[_ ]ATTEMPTED)"
_GRADE = re.compile(rf"(?:GRADE\s*[:=-]?\s*)?(?:\(([ABC])\)|([ABC]))(?:\s*[:.)=-]?\s*{_NAME})?")
_NAME_ONLY = re.compile(_NAME)
_TRIM = " \t\r\n*_`\"'"


@dataclass(frozen=True)
class ParsedVerdict:
    """A verdict read from the judge's output: the grade ("A", "B", "C", "Yes", "No"; None when
    unparseable) and the correctness it means (1, 0, None)."""

    grade: str | None
    correct: int | None


UNPARSEABLE = ParsedVerdict(None, None)


def final_text(raw: str) -> str | None:
    """The output after its thinking part; None when a thinking part is opened and never closed."""
    for end in THINKING_ENDS:
        if end in raw:
            raw = raw.rsplit(end, 1)[1]
    if any(start in raw for start in THINKING_STARTS):
        return None
    return raw


def _trimmed(text: str) -> str:
    text = text.strip(_TRIM)
    if text.endswith("."):
        text = text[:-1]
    return text.strip(_TRIM)


def parse_verdict(prompt: str, raw: str | None) -> ParsedVerdict:
    """The verdict in the judge output ``raw`` for the prompt named ``prompt`` (see the module docstring)."""
    if prompt not in JUDGE_PROMPTS:
        raise ValueError(f"unknown judge prompt {prompt!r}; known: {', '.join(JUDGE_PROMPTS)}")
    if raw is None:
        return UNPARSEABLE
    text = final_text(raw)
    if text is None:
        return UNPARSEABLE
    text = _trimmed(text)
    if prompt == MATH_EQUIVALENCE:
        word = text.lower()
        return {"yes": ParsedVerdict("Yes", 1), "no": ParsedVerdict("No", 0)}.get(word, UNPARSEABLE)
    return _parse_grade(text)


def _parse_grade(text: str) -> ParsedVerdict:
    """A SimpleQA grade (the ``SIMPLEQA_GRADER`` prompt's verdict) from the trimmed final text."""
    upper = text.upper()
    match = _GRADE.fullmatch(upper)
    if match is not None:
        letter, name = match.group(1) or match.group(2), match.group(3)
        if name is not None and GRADE_NAMES[name] != letter:
            return UNPARSEABLE
    elif _NAME_ONLY.fullmatch(upper):
        letter = GRADE_NAMES[upper]
    else:
        return UNPARSEABLE
    return ParsedVerdict(letter, int(letter == "A"))
