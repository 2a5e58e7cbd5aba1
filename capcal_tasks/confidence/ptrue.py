"""P(True): the model's probability of answering "Yes", from the log-likelihoods of "Yes" and "No".

Tasks ``capcal_<dataset>_ptrue`` (capability form: "Are you able to answer the question correctly?") and
``capcal_<dataset>_ptrue_rc`` (response form: "Is your response correct?", on the first response of an earlier
run). lm-eval ``multiple_choice`` with the choices ``Yes`` / ``No`` and ``target_delimiter: " "``: lm-eval
scores the continuations " Yes" / " No" after a plain prompt and "Yes" / "No" (delimiter dropped) after a
chat template's generation prompt, as the two conventions require.

    P(True) = exp(lp_Yes) / (exp(lp_Yes) + exp(lp_No)) = 1 / (1 + exp(lp_No - lp_Yes))

Per-question fields: ``p_true``, ``logprob_yes``, ``logprob_no`` and, for the response form,
``response_correct`` (0/1, the scored response's correctness in the earlier run). The log-likelihoods are
exact (all tokens of the word, no top-k cut-off), so there are no parse failures. The record and the
formula are defined in ``capcal_tasks.confidence.records`` (``p_true`` is imported from there).
"""

from __future__ import annotations

from capcal_tasks.confidence.records import p_true, ptrue_record
from capcal_tasks.prompts import ptrue_capability_prompt, ptrue_response_prompt

__all__ = [
    "capability_prompt",
    "p_true",
    "process_results",
    "process_results_for_response",
    "response_prompt",
]


def capability_prompt(doc: dict) -> str:
    return ptrue_capability_prompt(doc["question_text"])


def response_prompt(doc: dict) -> str:
    """The response form, on the first of the earlier run's responses."""
    return ptrue_response_prompt(doc["question_text"], doc["responses"][0])


def process_results(doc: dict, results: list) -> dict:
    """Capability form: ``results`` are the (log-likelihood, is_greedy) pairs of Yes and No."""
    (logprob_yes, _), (logprob_no, _) = results
    return ptrue_record(logprob_yes, logprob_no)


def process_results_for_response(doc: dict, results: list) -> dict:
    """Response form: as ``process_results``, plus ``response_correct`` of the scored (first) response."""
    (logprob_yes, _), (logprob_no, _) = results
    return ptrue_record(logprob_yes, logprob_no, int(doc["response_correctness"][0]))
