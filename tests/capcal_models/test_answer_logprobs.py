"""P(True) at the first answer token, from synthetic token streams (no reasoning model runs here): the
answer position after thinking and harmony headers, P(True) from the top log-probabilities, the record
capcal-api caches and the log-likelihoods lm-eval gets from it. The real-server check (first-token P(True)
against exact log-likelihoods) is in test_api.py."""

from __future__ import annotations

import json
import math

import pytest

from capcal_models.answer_logprobs import (
    MISSING_LOGPROB,
    TokenLogprobs,
    answer_loglikelihoods,
    answer_record,
    chat_token_logprobs,
    completion_token_logprobs,
    first_answer_position,
    p_true_from_top_logprobs,
)


def _tokens(*texts: str, top: dict[int, dict[str, float]] | None = None) -> list[TokenLogprobs]:
    top = top or {}
    return [TokenLogprobs(text, -0.1, top.get(i, {text: -0.1})) for i, text in enumerate(texts)]


def test_token_logprobs_are_read_from_each_api_shape() -> None:
    """A chat choice's ``logprobs.content`` (each alternative a {token, logprob} object) and a completions
    choice's parallel lists (``tokens``, ``token_logprobs``, ``top_logprobs`` as token -> logprob; a null
    log-probability is ``MISSING_LOGPROB``), read into the same tokens."""
    chat = {
        "logprobs": {
            "content": [
                {"token": "Yes", "logprob": -0.25, "top_logprobs": [
                    {"token": "Yes", "logprob": -0.25}, {"token": "No", "logprob": -1.5}]},
                {"token": ".", "logprob": -0.5, "top_logprobs": []},
            ]
        }
    }  # fmt: skip
    expected = [TokenLogprobs("Yes", -0.25, {"Yes": -0.25, "No": -1.5}), TokenLogprobs(".", -0.5, {})]
    assert chat_token_logprobs(chat) == expected
    assert chat_token_logprobs({"logprobs": None}) == [] and chat_token_logprobs({}) == []
    completion = {
        "logprobs": {
            "tokens": ["Yes", "."],
            "token_logprobs": [-0.25, None],
            "top_logprobs": [{"Yes": -0.25, "No": -1.5}, None],
        }
    }
    assert completion_token_logprobs(completion) == [
        TokenLogprobs("Yes", -0.25, {"Yes": -0.25, "No": -1.5}),
        TokenLogprobs(".", MISSING_LOGPROB, {}),
    ]


def test_first_answer_token_follows_the_thinking() -> None:
    thinking = _tokens("<think>", "Hmm", " maybe", "</think>", "\n\n", "Yes", ".")
    assert first_answer_position(thinking) == 5
    harmony = _tokens("<|channel|>", "analysis", "<|message|>", "No", "<|end|>", "<|start|>", "assistant")
    harmony += _tokens("<|channel|>", "final", "<|message|>", "Yes", "<|return|>")
    assert first_answer_position(harmony) == len(harmony) - 2
    assert first_answer_position(_tokens("\n", " Yes")) == 1
    unfinished = _tokens("<think>", "Hmm", " maybe")
    assert first_answer_position(unfinished, require_thinking_end=True) is None


def test_p_true_from_top_logprobs() -> None:
    both = p_true_from_top_logprobs({"Yes": math.log(0.3), " Yes": math.log(0.1), "No": math.log(0.2)})
    assert both.parsed and both.p_true == pytest.approx(0.4 / 0.6) and both.p_yes == pytest.approx(0.4)
    only_no = p_true_from_top_logprobs({"No": -0.5, "Maybe": -1.0})
    assert only_no.parsed and only_no.logprob_yes == MISSING_LOGPROB and only_no.p_true < 1e-40
    neither = p_true_from_top_logprobs({"Maybe": -0.1})
    assert not neither.parsed and math.isnan(neither.p_true) and math.isnan(neither.p_yes)
    assert not p_true_from_top_logprobs(None).parsed


def test_the_record_holds_the_answer_tokens_top_and_adds_the_chosen_token() -> None:
    # the server's top list left out the chosen token "No" (it may, when top_logprobs is small)
    tokens = _tokens("<think>", "no", "</think>", " ", "No", top={4: {"Yes": -0.2, "Maybe": -3.0}})
    record = json.loads(answer_record(tokens))
    assert record == {"token": "No", "top": {"Yes": -0.2, "Maybe": -3.0, "No": -0.1}}
    # a thinking model that never finished thinking has not answered: only with its think_end_token set
    unfinished = _tokens("<mythink>", "Yes")
    assert json.loads(answer_record(unfinished, think_end_token="</mythink>")) == {"top": None, "token": None}
    assert json.loads(answer_record(unfinished))["token"] == "<mythink>"
    custom = _tokens("<mythink>", "No", "</mythink>", "Yes")
    assert json.loads(answer_record(custom, think_end_token="</mythink>"))["token"] == "Yes"


def test_loglikelihoods_of_the_answer_words_from_a_record() -> None:
    record = json.dumps({"top": {" Yes": math.log(0.6), "Yes": math.log(0.1), "No": -2.0}, "token": " Yes"})
    (yes, yes_greedy), (no, no_greedy), (maybe, maybe_greedy) = answer_loglikelihoods(
        record, ["Yes", " No", "Maybe"]
    )
    assert yes == pytest.approx(math.log(0.7)) and yes_greedy
    assert no == -2.0 and not no_greedy
    assert maybe == MISSING_LOGPROB and not maybe_greedy
    # a failed request (None) and a response with no answer position: every word missing, none greedy
    for empty in (None, json.dumps({"top": None, "token": None})):
        assert answer_loglikelihoods(empty, ["Yes", "No"]) == [(MISSING_LOGPROB, False)] * 2
