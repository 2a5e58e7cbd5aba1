r"""Verbalized confidence: the model states a probability P in ``\boxed{P}``.

Tasks ``capcal_<dataset>_verbalized`` (capability form: "How likely are you to answer the question
correctly?") and ``capcal_<dataset>_verbalized_rc`` (response form, on the first response of an earlier run).
One generation per question. Parsing: drop everything up to the last ``</think>``; the confidence is
the LAST ``\boxed{number}`` whose value lies in [0, 1]. A response without one is a parse failure: it is
logged as ``verbalized_confidence: null`` with ``parse_success: 0`` and counted, never replaced by 0.5 (the
paper's fallback after three tries).

Per-question fields (metric fields of lm-eval's samples file): ``verbalized_confidence`` (float or null),
``parse_success`` (0/1), ``parse_failures`` (1 - parse_success), and for the response form
``response_correct`` (0/1, the scored response's correctness in the earlier run). In the results table
``verbalized_confidence`` is the mean over parsed questions, ``parse_success`` the success rate and
``parse_failures`` the number of failures.
"""

from __future__ import annotations

import logging
import re

from capcal_tasks.answers.boxed import boxed_contents
from capcal_tasks.confidence.records import verbalized_record
from capcal_tasks.prompts import verbalized_capability_prompt, verbalized_response_prompt

__all__ = [
    "capability_prompt",
    "failure_count",
    "mean_of_parsed",
    "parse_verbalized_confidence",
    "process_results",
    "process_results_for_response",
    "response_prompt",
]

_PROBABILITY = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*$")

logger = logging.getLogger(__name__)


def capability_prompt(doc: dict) -> str:
    return verbalized_capability_prompt(doc["question_text"])


def response_prompt(doc: dict) -> str:
    """The response form, on the first of the earlier run's responses."""
    return verbalized_response_prompt(doc["question_text"], doc["responses"][0])


def parse_verbalized_confidence(response: str) -> float | None:
    r"""The last ``\boxed{number}`` with a value in [0, 1] after the last ``</think>``, or None."""
    text = response.rsplit("</think>", 1)[-1]
    for content in reversed(boxed_contents(text)):
        match = _PROBABILITY.match(content)
        if match:
            value = float(match.group(1))
            if 0.0 <= value <= 1.0:
                return value
    return None


def process_results(doc: dict, results: list) -> dict:
    """Capability form: ``results[0]`` is the one generated response."""
    return verbalized_record(parse_verbalized_confidence(results[0]))


def process_results_for_response(doc: dict, results: list) -> dict:
    """Response form: as ``process_results``, plus ``response_correct`` of the scored (first) response."""
    return verbalized_record(parse_verbalized_confidence(results[0]), int(doc["response_correctness"][0]))


def mean_of_parsed(confidences: list[float | None]) -> float:
    """Aggregation of ``verbalized_confidence``: the mean over the questions whose confidence was parsed."""
    parsed = [c for c in confidences if c is not None]
    return sum(parsed) / len(parsed) if parsed else float("nan")


def failure_count(failures: list[int]) -> int:
    """Aggregation of ``parse_failures``: the number of questions without a parsable confidence (warned)."""
    count = int(sum(failures))
    if count:
        logger.warning(
            "verbalized confidence: %d of %d responses had no \\boxed{P} with P in [0, 1] (logged as null)",
            count,
            len(failures),
        )
    return count
