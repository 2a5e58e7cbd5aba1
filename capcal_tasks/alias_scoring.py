"""The sampling record of an alias-matched dataset (TriviaQA, SimpleQA): two correctness labels.

``correctness`` / ``expected_accuracy`` / pass@k / majority vote use the paper's label (normalised answer
equals, contains or is contained in an alias; ``capcal_tasks.answers.aliases.matches_an_alias``). Beside it,
the stricter exact label (normalised answer equals an alias):

- ``exact_alias_correctness``: the 0/1 vector of the exact label,
- ``exact_alias_expected_accuracy``: its mean, the capability target under the exact label.
"""

from __future__ import annotations

from collections.abc import Sequence

from capcal_tasks.answers.aliases import (
    equals_an_alias,
    extract_short_answer,
    matches_an_alias,
    normalize_answer,
)
from capcal_tasks.prompts import SHORT_ANSWER_INSTRUCTION, logged_sampling_prompt
from capcal_tasks.sampling import score_responses

__all__ = ["process_alias_results", "score_alias_responses"]


def score_alias_responses(
    responses: Sequence[str], aliases: Sequence[str], question: str = "", prompt: str = ""
) -> dict:
    """Per-question record of k responses against the gold aliases (see the module docstring).

    The text a response repeats of ``prompt`` is not read as its answer (``score_responses``), and an alias
    that occurs in ``question`` matches only an equal answer (``matches_an_alias``). Majority voting groups
    all answers that match an alias into one class and the others by their normalised text.
    """

    def judge(answer: str | None) -> bool:
        return matches_an_alias(answer, aliases, question)

    def answer_class(answer: str | None) -> tuple | None:
        if answer is None or not normalize_answer(answer):
            return None
        return ("correct",) if judge(answer) else ("answer", normalize_answer(answer))

    record = score_responses(
        responses, extract=extract_short_answer, judge=judge, answer_class=answer_class, prompt=prompt
    )
    exact = [int(equals_an_alias(answer, aliases)) for answer in record["extracted_answers"]]
    record["exact_alias_correctness"] = exact
    record["exact_alias_expected_accuracy"] = sum(exact) / len(exact)
    return record


def process_alias_results(doc: dict, results: list) -> dict:
    """The ``process_results`` of an alias-matched task: its k responses against ``doc["gold_aliases"]``,
    the prompt being the question with the short-answer instruction (TriviaQA's and SimpleQA's
    ``doc_to_text``)."""
    return score_alias_responses(
        results[0],
        doc["gold_aliases"],
        str(doc.get("question_text") or ""),
        logged_sampling_prompt(doc, SHORT_ANSWER_INSTRUCTION),
    )
