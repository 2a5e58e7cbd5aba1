"""Per-question outputs of a repeated-sampling task (``repeats: k``).

lm-eval clones each question k times and, by default, keeps only the first response. capcal's sampling tasks
use ``keep_all_responses`` as their filter so that ``process_results`` receives all k responses, and
``score_responses`` turns them into the per-question record that capcal logs (as metric fields, which keep
their JSON types in lm-eval's samples file):

- ``extracted_answers``: the answer extracted from each response (None where none was found),
- ``correctness``: the 0/1 correctness vector z_1..z_k,
- ``n_samples``: k,
- ``expected_accuracy``: mu_hat = (1/k) sum_i z_i, the capability target,
- ``pass_at_{m}`` for m = 1, 2, 4, ... <= k: the unbiased pass@m estimator,
- ``majority_vote_accuracy``: accuracy of the most common extracted answer, ties averaged (see below).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence

import numpy as np

from capcal_metrics.pass_at_k import pass_at_k

__all__ = [
    "MAX_PASS_AT_K",
    "extraction_rate",
    "is_sampling_config",
    "keep_all_responses",
    "majority_vote_accuracy",
    "pass_at_k_levels",
    "response_accuracy",
    "score_responses",
]

MAX_PASS_AT_K = 1024


def is_sampling_config(config: dict) -> bool:
    """Whether a task config (as loaded, or as dumped into lm-eval's results files) is a capcal sampling task:
    its YAML sets ``metadata: {capcal_task: sampling}``."""
    return (config.get("metadata") or {}).get("capcal_task") == "sampling"


def keep_all_responses(resps: list[list[str]], docs: list[dict]) -> list[list[str]]:
    """lm-eval custom filter that keeps every one of the k responses of each question."""
    return resps


def pass_at_k_levels(n_samples: int) -> list[int]:
    """The pass@k levels reported for n samples: powers of two up to n."""
    levels, level = [], 1
    while level <= min(n_samples, MAX_PASS_AT_K):
        levels.append(level)
        level *= 2
    return levels


def majority_vote_accuracy(answer_classes: Sequence[Hashable | None], correctness: Sequence[int]) -> float:
    """Accuracy of majority voting over the extracted answers of one question.

    Responses without an extracted answer (None) do not vote. When several answers tie for the most votes,
    the vote's accuracy is the fraction of the tied answers that are correct (its expectation under a uniform
    tie-break), so the number does not depend on response order. No votes at all gives 0.
    """
    votes = Counter(a for a in answer_classes if a is not None)
    if not votes:
        return 0.0
    top = max(votes.values())
    winners = {answer for answer, count in votes.items() if count == top}
    answer_is_correct = {a: bool(z) for a, z in zip(answer_classes, correctness, strict=True) if a in winners}
    return float(np.mean([answer_is_correct[a] for a in winners]))


def score_responses(
    responses: Sequence[str],
    extract: Callable[[str], str | None],
    judge: Callable[[str | None], bool],
    answer_class: Callable[[str | None], Hashable | None] = lambda answer: answer,
) -> dict:
    """The per-question record of a sampling task from its k responses.

    Parameters
    ----------
    responses : the k sampled responses of one question.
    extract : response -> extracted answer (None when the response states none).
    judge : extracted answer -> whether it is correct.
    answer_class : extracted answer -> the key under which equal answers are grouped for majority voting
        (for example the parsed number, so "18" and "18.0" vote together); None means "no vote".
    """
    if isinstance(responses, str) or len(responses) == 0:
        raise ValueError(
            "score_responses: expected a non-empty list of responses (is the keep-all filter set?)"
        )
    extracted = [extract(response) for response in responses]
    correctness = [int(bool(judge(answer))) for answer in extracted]
    n, c = len(correctness), sum(correctness)
    record: dict = {
        "extracted_answers": extracted,
        "correctness": correctness,
        "n_samples": n,
        "expected_accuracy": c / n,
    }
    for level in pass_at_k_levels(n):
        record[f"pass_at_{level}"] = float(pass_at_k(n, c, level))
    record["majority_vote_accuracy"] = majority_vote_accuracy(
        [answer_class(a) for a in extracted], correctness
    )
    return record


def response_accuracy(correctness_vectors: list[list[int]]) -> float:
    """Aggregation of ``correctness``: the accuracy over all sampled responses of all questions."""
    flat = [z for vector in correctness_vectors for z in vector]
    return float(np.mean(flat)) if flat else float("nan")


def extraction_rate(extracted_answers: list[list[str | None]]) -> float:
    """Aggregation of ``extracted_answers``: the share of responses from which an answer was extracted."""
    flat = [a for answers in extracted_answers for a in answers]
    return float(np.mean([a is not None for a in flat])) if flat else float("nan")
