"""P(True) from an API's top log-probabilities at the first answer token (P(True) as defined
in "On Calibration of LLMs: From Response To Capability", its confidence-elicitation section).

Chat endpoints give no prompt log-likelihoods, so P(True) there comes from one short generation with
``logprobs`` / ``top_logprobs``: the first answer token is the first non-blank generated token after the end
of the thinking (the last ``</think>``, or a harmony ``<|channel|>final<|message|>`` header), or the first
non-blank token when the model does not think. At that position

    P(True) = exp(lp_Yes) / (exp(lp_Yes) + exp(lp_No))      (normalised)
    P(Yes)  = exp(lp_Yes)                                   (raw, Self-Calibration's convention)

A word missing from the top log-probabilities gets ``MISSING_LOGPROB`` (-100); both missing is a parse
failure. Tokens are matched on their text without surrounding white space ("Yes" in chat, " Yes" in raw
completions are both the word Yes); several matching tokens are combined with logsumexp.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "HARMONY_FINAL_HEADER",
    "MISSING_LOGPROB",
    "PTrue",
    "TokenLogprobs",
    "answer_loglikelihoods",
    "answer_logprob",
    "answer_record",
    "chat_token_logprobs",
    "completion_token_logprobs",
    "first_answer_position",
    "p_true_from_top_logprobs",
]

MISSING_LOGPROB = -100.0
HARMONY_FINAL_HEADER = "<|channel|>final<|message|>"
DEFAULT_THINKING_ENDS = ("</think>", HARMONY_FINAL_HEADER)


@dataclass(frozen=True)
class TokenLogprobs:
    """One generated token: its text, its log-probability and the top alternatives (text -> logprob)."""

    token: str
    logprob: float
    top: dict[str, float]


def chat_token_logprobs(choice: dict) -> list[TokenLogprobs]:
    """The tokens of a chat-completions choice (``logprobs.content``, requested with ``top_logprobs``)."""
    content = (choice.get("logprobs") or {}).get("content") or []
    return [
        TokenLogprobs(
            entry["token"],
            float(entry["logprob"]),
            {alt["token"]: float(alt["logprob"]) for alt in entry.get("top_logprobs") or []},
        )
        for entry in content
    ]


def completion_token_logprobs(choice: dict) -> list[TokenLogprobs]:
    """The tokens of a completions choice (``logprobs.tokens``, ``token_logprobs``, ``top_logprobs``)."""
    logprobs = choice.get("logprobs") or {}
    tokens = logprobs.get("tokens") or []
    values = logprobs.get("token_logprobs") or [None] * len(tokens)
    tops = logprobs.get("top_logprobs") or [None] * len(tokens)
    return [
        TokenLogprobs(token, MISSING_LOGPROB if value is None else float(value), dict(top or {}))
        for token, value, top in zip(tokens, values, tops, strict=True)
    ]


def first_answer_position(
    tokens: Sequence[TokenLogprobs],
    thinking_ends: Sequence[str] = DEFAULT_THINKING_ENDS,
    require_thinking_end: bool = False,
) -> int | None:
    """Index of the first answer token: the first non-blank token after the last thinking end marker.

    Without a marker, the first non-blank token, or None when ``require_thinking_end`` (a thinking model that
    never finished thinking has not answered). None also when no non-blank token follows.
    """
    text = ""
    starts = []
    for token in tokens:
        starts.append(len(text))
        text += token.token
    answer_start = -1
    for marker in thinking_ends:
        found = text.rfind(marker)
        if found >= 0:
            answer_start = max(answer_start, found + len(marker))
    if answer_start < 0:
        if require_thinking_end:
            return None
        answer_start = 0
    for index, (token, start) in enumerate(zip(tokens, starts, strict=True)):
        if start >= answer_start and token.token.strip():
            return index
    return None


def answer_logprob(top: dict[str, float], answer: str) -> float:
    """Log-probability of ``answer`` among the top tokens (logsumexp of the tokens that strip to it), or
    ``MISSING_LOGPROB`` when none does."""
    word = answer.strip()
    matches = [logprob for token, logprob in top.items() if token.strip() == word]
    if not matches:
        return MISSING_LOGPROB
    largest = max(matches)
    return largest + math.log(sum(math.exp(value - largest) for value in matches))


@dataclass(frozen=True)
class PTrue:
    """P(True) at one answer position."""

    logprob_yes: float
    logprob_no: float
    parsed: bool

    @property
    def p_true(self) -> float:
        """exp(lp_Yes) / (exp(lp_Yes) + exp(lp_No)), computed stably; NaN when not parsed."""
        if not self.parsed:
            return math.nan
        return 1.0 / (1.0 + math.exp(self.logprob_no - self.logprob_yes))

    @property
    def p_yes(self) -> float:
        """exp(lp_Yes), not renormalised against No; NaN when not parsed."""
        return math.exp(self.logprob_yes) if self.parsed else math.nan


def p_true_from_top_logprobs(top: dict[str, float] | None, yes: str = "Yes", no: str = "No") -> PTrue:
    """P(True) from the top log-probabilities at the answer position (None: no answer position found)."""
    if top is None:
        return PTrue(MISSING_LOGPROB, MISSING_LOGPROB, parsed=False)
    logprob_yes, logprob_no = answer_logprob(top, yes), answer_logprob(top, no)
    parsed = logprob_yes > MISSING_LOGPROB or logprob_no > MISSING_LOGPROB
    return PTrue(logprob_yes, logprob_no, parsed)


def answer_record(tokens: Sequence[TokenLogprobs], think_end_token: str | None = None) -> str:
    """The top log-probabilities at the first answer token and the token chosen there, as the JSON string
    that capcal-api caches: ``{"top": {token: logprob}, "token": chosen}``, or both null when the response has
    no answer position (``first_answer_position``; a ``think_end_token`` is required to have been passed).
    The chosen token is added to ``top`` when the server left it out."""
    ends = (think_end_token, *DEFAULT_THINKING_ENDS) if think_end_token else DEFAULT_THINKING_ENDS
    index = first_answer_position(tokens, ends, require_thinking_end=think_end_token is not None)
    if index is None:
        return json.dumps({"top": None, "token": None})
    token = tokens[index]
    top = dict(token.top)
    top.setdefault(token.token, token.logprob)
    return json.dumps({"top": top, "token": token.token}, ensure_ascii=False)


def answer_loglikelihoods(record: str | None, words: Sequence[str]) -> list[tuple[float, bool]]:
    """lm-eval's ``(log-likelihood, is_greedy)`` for each answer word, read from one ``answer_record``
    (None: the request failed). The log-likelihood is ``answer_logprob`` (``MISSING_LOGPROB`` when the word is
    not among the top tokens); ``is_greedy`` says whether the chosen token is the word (white space stripped).
    """
    answer = json.loads(record) if record is not None else {"top": None, "token": None}
    top, chosen = answer.get("top"), answer.get("token")
    return [
        (
            MISSING_LOGPROB if top is None else answer_logprob(top, word),
            chosen is not None and chosen.strip() == word.strip(),
        )
        for word in words
    ]
