"""Responses that came back empty or unreadable, and their likely cause: the checks after a run.

A run can finish without an error and still hold nothing to score: SmolLM2-135M-Instruct, run on
capcal_arithmetic without ``--apply_chat_template``, answered the empty string 12 times out of 12. ``capcal
eval`` (``response_notices`` on the run's samples) and ``capcal check`` (``empty_response_cause`` on a
results file) say so on stderr, with the likely cause:

- empty responses from a chat model run without its chat template: that (add ``--apply_chat_template``);
- empty responses otherwise: generation stopped at once (a stop sequence of the task's ``until`` at the
  start of the response, or an end-of-text token), or requests that failed (``capcal-api`` with
  ``allow_failures``);
- non-empty responses without an answer (``extracted_answers`` None) or a verbalized confidence that did not
  parse (``parse_success`` 0): when most of them reach ``max_gen_toks`` (their length counted with the
  model's own tokenizer, ``responses_cut_by_limit``), the limit cut them before their final answer (raise
  it); when they end before it, the responses are complete and do not give it in the form the task reads
  (SmolLM2-135M-Instruct never writes ``\boxed{P}``: raising ``max_gen_toks`` changes nothing). Without the
  tokenizer, a ``max_gen_toks`` below ``SHORT_GENERATION_TOKENS`` is named as the possible cause.

"Most" is more than ``MOSTLY`` of a task's responses.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from analysis.checks.input_checks import checkpoint_has_chat_template

__all__ = [
    "MOSTLY",
    "SHORT_GENERATION_TOKENS",
    "aggregate_notices",
    "empty_response_cause",
    "response_notices",
    "responses_cut_by_limit",
    "tokenizer_source",
    "unreadable_diagnosis",
]

#: A task's responses are "mostly" empty or unreadable above this share.
MOSTLY = 0.5
#: A ``max_gen_toks`` below this is named as the likely cause of responses without an answer (capcal's
#: sampling tasks default to 1024; the worked example's arithmetic answers fit in 16).
SHORT_GENERATION_TOKENS = 64


def _texts(value: Any) -> list[str]:
    """The response strings of a samples record's ``resps`` (a list of lists of strings)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence):
        return [text for item in value for text in _texts(item)]
    return []


def empty_response_cause(
    model_args: Mapping[str, Any] | str | None, chat_template_applied: bool | None, model: str | None = None
) -> str:
    """The likely cause of empty responses, as a phrase: a chat model (``model_args``' local
    ``tokenizer``/``pretrained`` has a chat template) run without its chat template
    (``chat_template_applied`` False); failed API requests (``model`` capcal-api); else generation stopping
    at once."""
    source = None
    if isinstance(model_args, Mapping):
        source = model_args.get("tokenizer") or model_args.get("pretrained")
    elif isinstance(model_args, str):
        pairs = dict(item.split("=", 1) for item in model_args.split(",") if "=" in item)
        source = pairs.get("tokenizer") or pairs.get("pretrained")
    if chat_template_applied is False and isinstance(source, str) and checkpoint_has_chat_template(source):
        return "the model has a chat template and the run did not apply it (add --apply_chat_template)"
    if model == "capcal-api":
        return (
            "requests that still failed after their retries (allow_failures), or generation that stopped "
            "at once"
        )
    return (
        "generation stopped at once: a stop sequence of the task's 'until' at the start of the response, or "
        "an end-of-text token (see the prompts with --write_out)"
    )


def tokenizer_source(model_args: Mapping[str, Any] | str | None) -> str | None:
    """The local tokenizer folder of a run's ``model_args`` (``tokenizer``, else ``pretrained``), or None."""
    if isinstance(model_args, str):
        model_args = dict(item.split("=", 1) for item in model_args.split(",") if "=" in item)
    if not isinstance(model_args, Mapping):
        return None
    source = model_args.get("tokenizer") or model_args.get("pretrained")
    return source if isinstance(source, str) and source else None


@functools.lru_cache(maxsize=4)
def _tokenizer(source: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(source, local_files_only=True)


def responses_cut_by_limit(texts: Sequence[str], max_gen_toks: Any, source: str | None) -> list[bool] | None:
    """For each of ``texts``, whether it reached ``max_gen_toks`` tokens (re-encoded with the tokenizer at
    ``source``; one token of slack for re-encoding), i.e. was cut by the limit rather than ended by the
    model; None when that cannot be told (no integer limit, no local tokenizer)."""
    if not isinstance(max_gen_toks, int) or isinstance(max_gen_toks, bool) or source is None:
        return None
    try:
        tokenizer = _tokenizer(source)
    except Exception:  # noqa: BLE001 - a hub id offline, a folder without tokenizer files: cannot tell
        return None
    lengths = [len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in texts]
    return [length >= max_gen_toks - 1 for length in lengths]


def unreadable_diagnosis(
    config: Mapping[str, Any],
    confidence: bool,
    texts: Sequence[str] = (),
    source: str | None = None,
    readable: Sequence[bool] = (),
) -> tuple[str, bool]:
    """(the likely cause, as a phrase, of non-empty responses without an answer (``confidence``: without a
    verbalized confidence); whether the run's settings are to blame). From the task's ``config`` (its
    ``generation_kwargs.max_gen_toks``), the responses ``texts`` counted with the tokenizer at ``source``
    (``responses_cut_by_limit``) and whether each was read (``readable``, aligned with ``texts``):

    - the responses that ended on their own (before the limit) mostly unread as well: the model does not
      state it in that form, whatever the limit (not the run's fault: SmolLM2-135M-Instruct, whose
      verbalized responses either stop early without ``\\boxed{P}`` or run on to the limit);
    - else most responses cut by the limit: ``max_gen_toks`` (the run's fault: raise it);
    - without a tokenizer: a ``max_gen_toks`` below ``SHORT_GENERATION_TOKENS`` as the possible cause."""
    tokens = (config.get("generation_kwargs") or {}).get("max_gen_toks")
    what = (
        "a confidence as \\boxed{P}" if confidence else "an answer in the form the task reads (\\boxed{...})"
    )
    cut = responses_cut_by_limit(texts, tokens, source) if texts else None
    if cut is not None:
        ended = [bool(read) for read, was_cut in zip(readable, cut, strict=False) if not was_cut]
        if ended and sum(ended) <= MOSTLY * len(ended):
            return (
                f"the model does not state {what}: only {sum(ended)} of the {len(ended)} responses that "
                f"ended on their own before max_gen_toks={tokens} do, so raising the limit ({sum(cut)} "
                "responses reached it) is unlikely to help; look at a few with capcal analyze --responses",
                False,
            )
        if sum(cut) > MOSTLY * len(texts):
            return (
                f"max_gen_toks={tokens} cut {sum(cut)} of {len(texts)} responses before their end (raise it)",
                True,
            )
        return (
            f"{len(texts) - sum(cut)} of {len(texts)} responses end on their own before "
            f"max_gen_toks={tokens} and some do not state {what}; look at a few with capcal analyze "
            "--responses",
            True,
        )
    if isinstance(tokens, int) and tokens < SHORT_GENERATION_TOKENS:
        return f"max_gen_toks={tokens} may cut the responses before their final answer (raise it)", True
    return f"the responses do not state {what}; look at a few with capcal analyze --responses", True


def _flags_per_response(records: Sequence[Mapping[str, Any]]) -> list[bool]:
    """Whether each response of verbalized-confidence ``records`` parsed (``parse_success``, one per record,
    repeated over the record's responses), aligned with their flattened ``resps``."""
    return [bool(record.get("parse_success")) for record in records for _ in _texts(record.get("resps"))]


def response_notices(
    samples: Mapping[str, Sequence[Mapping[str, Any]]],
    configs: Mapping[str, Mapping[str, Any]],
    *,
    model_args: Mapping[str, Any] | str | None = None,
    chat_template_applied: bool | None = None,
    model: str | None = None,
) -> list[str]:
    """One line per task whose responses came back mostly (``MOSTLY``) empty, or mostly without an answer
    (sampling tasks: ``extracted_answers`` None) or a confidence (verbalized: ``parse_success`` 0), with the
    likely cause. ``samples``: task -> samples records (lm-eval's ``results["samples"]``); ``configs``: task
    -> config (``results["configs"]``); only generation tasks are looked at."""
    notices = []
    for task, records in samples.items():
        config = configs.get(task) or {}
        if config.get("output_type", "generate_until") != "generate_until" or not records:
            continue
        texts = [text for record in records for text in _texts(record.get("resps"))]
        if not texts:
            continue
        empty = sum(1 for text in texts if not text.strip())
        if empty > MOSTLY * len(texts):
            cause = empty_response_cause(model_args, chat_template_applied, model)
            notices.append(f"task {task}: {empty} of {len(texts)} responses are empty; likely cause: {cause}")
            continue
        answers = [a for record in records for a in record.get("extracted_answers") or []]
        parsed = [record["parse_success"] for record in records if "parse_success" in record]
        source = tokenizer_source(model_args)
        if answers and sum(a is None for a in answers) > MOSTLY * len(answers):
            missing = sum(a is None for a in answers)
            read = [a is not None for a in answers]
            notices.append(
                f"task {task}: no answer could be read from {missing} of {len(answers)} responses; likely "
                f"cause: {unreadable_diagnosis(config, False, texts, source, read)[0]}"
            )
        elif parsed and sum(not value for value in parsed) > MOSTLY * len(parsed):
            missing = sum(not value for value in parsed)
            notices.append(
                f"task {task}: no confidence could be read from {missing} of {len(parsed)} responses; likely "
                f"cause: {unreadable_diagnosis(config, True, texts, source, _flags_per_response(records))[0]}"
            )
    return notices


def aggregate_notices(results: Mapping[str, Any]) -> list[str]:
    """``response_notices`` for a run without logged samples, from lm-eval's aggregates in ``results``: a
    sampling task whose ``extracted_answers`` rate (the share of responses with an answer) is below
    ``1 - MOSTLY``, a verbalized task whose ``parse_success`` mean is; with the likely cause. (Empty
    responses cannot be told from unreadable ones without the samples.)"""
    notices = []
    configs = results.get("configs") or {}
    for task, metrics in (results.get("results") or {}).items():
        for key, what, confidence in (
            ("extracted_answers,all_responses", "an answer", False),
            ("parse_success,none", "a confidence", True),
        ):
            rate = metrics.get(key) if isinstance(metrics, Mapping) else None
            if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate < 1 - MOSTLY:
                cause = unreadable_diagnosis(configs.get(task) or {}, confidence=confidence)[0]
                notices.append(
                    f"task {task}: {what} could be read from only {rate:.0%} of the responses (empty or "
                    f"unreadable; --log_samples keeps them); likely cause: {cause}"
                )
    return notices
