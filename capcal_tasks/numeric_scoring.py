"""The sampling record of a dataset whose gold answer is a number (GSM8K, graded arithmetic).

An extracted answer is correct when it parses as a number equal to the gold within 1e-6
(``capcal_tasks.answers.numeric``); majority voting groups answers by their parsed value, so "18" and "18.0"
vote together. Each task keeps its own extractor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from capcal_tasks.answers.numeric import numbers_equal, parse_number
from capcal_tasks.sampling import score_responses

__all__ = ["number_is_correct", "score_number_responses"]


def number_is_correct(answer: str | None, gold: float) -> bool:
    """Whether ``answer`` states the number ``gold``."""
    return numbers_equal(parse_number(answer), gold)


def score_number_responses(
    responses: Sequence[str], gold: float | str, extract: Callable[[str], str | None], prompt: str = ""
) -> dict:
    """Per-question record (``capcal_tasks.sampling.score_responses``) of k responses against the gold
    number; the text a response repeats of ``prompt`` is not read as its answer."""
    gold = float(gold)
    return score_responses(
        responses,
        extract=extract,
        judge=lambda answer: number_is_correct(answer, gold),
        answer_class=parse_number,
        prompt=prompt,
    )
