r"""Short free-form answers checked against a list of gold aliases (TriviaQA, SimpleQA).

Extraction (paper protocol): the last ``\boxed{...}`` (nested braces counted), else the last "answer is X",
else the last non-empty line; LaTeX text wrappers and the punctuation around it are removed (straight and
curly quotes, ``. , ; : ! ?``, a closing bracket nothing in the answer opens).

Normalisation: lowercase, drop the articles a/an/the, drop punctuation, collapse whitespace.

Two labels:
- ``matches_an_alias`` (the paper's label): the normalised answer equals, contains, or is contained in a
  normalised alias, where containment is of whole words (a contiguous run of the other's words): "lewis"
  is contained in "sinclair lewis", but "2" is not contained in "march 2018" (the paper's code compares
  character substrings, which also accepts "201" for "2018"). An answer (or alias) that normalises to the
  empty string matches nothing (the paper's code counts an empty answer as contained in every alias). An alias
  whose words occur in the question itself ("Tony Blair" for a question that names Tony Blair) counts only
  when the answer equals it: a sentence that restates the question contains it without answering (capcal's
  rule; the paper's code credits it).
- ``equals_an_alias`` (stricter, reported beside it): the normalised answer equals a normalised alias.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from capcal_tasks.answers.boxed import last_boxed

__all__ = ["equals_an_alias", "extract_short_answer", "matches_an_alias", "normalize_answer"]

_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_PUNCTUATION = re.compile(r"[^\w\s]")
_WHITESPACE = re.compile(r"\s+")
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|emph|mbox)\s*\{([^{}]*)\}")
_ANSWER_IS = re.compile(r"answer is\s*:?\s*(.+)", re.IGNORECASE)
_EDGE_JUNK = " \t*_`\"'$.,;:!?“”‘’"


def normalize_answer(text: str) -> str:
    """Lowercase, drop a/an/the, drop punctuation, collapse whitespace (in this order)."""
    text = _ARTICLES.sub(" ", text.lower())
    text = _PUNCTUATION.sub("", text)
    return _WHITESPACE.sub(" ", text).strip()


def _clean(answer: str) -> str:
    while True:
        unwrapped = _TEXT_WRAPPER.sub(r"\1", answer)
        if unwrapped == answer:
            break
        answer = unwrapped
    answer = answer.strip().strip(_EDGE_JUNK).strip()
    while answer.endswith(")") and answer.count(")") > answer.count("("):  # "Paris)": the sentence's bracket
        answer = answer[:-1].strip(_EDGE_JUNK).strip()
    return answer


def extract_short_answer(response: str) -> str | None:
    r"""The answer a response states: its last ``\boxed{}``, else its last "answer is X" (to the end of that
    line), else its last non-empty line; None for an empty response."""
    if not response or not response.strip():
        return None
    boxed = last_boxed(response)
    if boxed is not None:
        return _clean(boxed)
    stated = _ANSWER_IS.findall(response)
    if stated:
        return _clean(stated[-1].splitlines()[0])
    lines = [line for line in response.splitlines() if line.strip()]
    return _clean(lines[-1])


def _normalized_aliases(aliases: Iterable[str]) -> list[str]:
    return [alias for alias in (normalize_answer(a) for a in aliases) if alias]


def _contains_words(text: str, part: str) -> bool:
    """Whether the words of ``part`` occur contiguously in ``text`` (both normalised, single-spaced)."""
    return f" {part} " in f" {text} "


def matches_an_alias(answer: str | None, aliases: Iterable[str], question: str = "") -> bool:
    """The paper's label: the normalised answer equals an alias, contains it, or is contained in it (as whole
    words); an empty normalised answer matches nothing. An alias whose words occur in ``question`` matches
    only an equal answer."""
    if answer is None:
        return False
    normalized = normalize_answer(answer)
    if not normalized:
        return False
    asked = normalize_answer(question)
    return any(
        normalized == alias
        or (
            not (asked and _contains_words(asked, alias))
            and (_contains_words(normalized, alias) or _contains_words(alias, normalized))
        )
        for alias in _normalized_aliases(aliases)
    )


def equals_an_alias(answer: str | None, aliases: Iterable[str]) -> bool:
    """The stricter label: the normalised answer equals a normalised alias."""
    if answer is None:
        return False
    normalized = normalize_answer(answer)
    return bool(normalized) and normalized in _normalized_aliases(aliases)
