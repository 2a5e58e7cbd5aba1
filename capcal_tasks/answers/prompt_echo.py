r"""The prompt's own text in a response, removed before an answer is extracted (a rule of capcal's).

A small model often restates its prompt: the question, its lettered choices, the instruction. That text is
not an answer, but the paper's extractors read answers from it: the last standalone A-D of an echoed choice
list, the last line of a restated question that names an alias, the last number of "What is 1 * 7?".
``remove_prompt_text(response, prompt)`` deletes it first, so the extractors only see what the model wrote
itself:

1. every occurrence of a line of the prompt, or of a sentence of such a line, that has at least
   ``MIN_FRAGMENT_WORDS`` words, as a run of whole words compared without regard to case or spacing (a
   choice line excepted);
2. every response line equal to a shorter line of the prompt (same comparison);
3. the response lines equal to the prompt's choice lines (its four consecutive lines ``A. text`` to
   ``D. text``), when the response repeats at least two of them: a list of the choices is the prompt's,
   while a single one standing alone ("D. Paris") is an answer.

A response that repeats nothing of its prompt is returned unchanged.
"""

from __future__ import annotations

import functools
import re

__all__ = ["MIN_FRAGMENT_WORDS", "remove_prompt_text"]

MIN_FRAGMENT_WORDS = 3

_CHOICE_LETTERS = ("A", "B", "C", "D")
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+")
_WORD = re.compile(r"\S+")


def _key(text: str) -> str:
    """Text compared without regard to case or spacing."""
    return " ".join(text.lower().split())


def _choice_line_indexes(lines: list[str]) -> set[int]:
    """The indexes of the lettered choice lists in ``lines``: four consecutive lines "A. ", "B. ", "C. ",
    "D. " (a question line that merely starts "B. F. Skinner" is not one)."""
    found: set[int] = set()
    for start in range(len(lines) - len(_CHOICE_LETTERS) + 1):
        block = range(start, start + len(_CHOICE_LETTERS))
        if all(lines[i].startswith(f"{letter}. ") for i, letter in zip(block, _CHOICE_LETTERS, strict=True)):
            found.update(block)
    return found


@functools.lru_cache(maxsize=64)
def _prompt_parts(prompt: str) -> tuple[dict[str, list[tuple[str, ...]]], frozenset[str], frozenset[str]]:
    """(the long fragments as lowercase word tuples, indexed by their first word; the keys of the short
    lines; the keys of the choice lines)."""
    lines = [line.strip() for line in prompt.splitlines() if line.strip()]
    choice_indexes = _choice_line_indexes(lines)
    choices = frozenset(_key(lines[i]) for i in choice_indexes)
    others = [line for i, line in enumerate(lines) if i not in choice_indexes]
    fragments = {
        tuple(piece.lower().split())
        for line in others
        for piece in (line, *_SENTENCE_END.split(line))
        if len(piece.split()) >= MIN_FRAGMENT_WORDS
    }
    by_first_word: dict[str, list[tuple[str, ...]]] = {}
    for fragment in sorted(fragments, key=len, reverse=True):
        by_first_word.setdefault(fragment[0], []).append(fragment)
    short = frozenset(_key(line) for line in others if len(line.split()) < MIN_FRAGMENT_WORDS)
    return by_first_word, short, choices


def _without_fragments(response: str, by_first_word: dict[str, list[tuple[str, ...]]]) -> str:
    """``response`` with every occurrence of a fragment (a run of whole words, case ignored) blanked out."""
    words = list(_WORD.finditer(response))
    lowered = [word.group(0).lower() for word in words]
    spans: list[tuple[int, int]] = []
    for position, word in enumerate(lowered):
        for fragment in by_first_word.get(word, ()):
            end = position + len(fragment)
            if tuple(lowered[position:end]) == fragment:
                spans.append((words[position].start(), words[end - 1].end()))
                break
    if not spans:
        return response
    pieces, cursor = [], 0
    for start, end in spans:
        if end <= cursor:
            continue
        pieces.append(response[cursor : max(start, cursor)])
        pieces.append(" ")
        cursor = end
    pieces.append(response[cursor:])
    return "".join(pieces)


def remove_prompt_text(response: str, prompt: str) -> str:
    """``response`` without the text it repeats of ``prompt`` (the rules in the module docstring)."""
    if not response or not prompt:
        return response
    by_first_word, short, choices = _prompt_parts(prompt)
    text = _without_fragments(response, by_first_word)
    lines = text.splitlines()
    keys = [_key(line) for line in lines]
    echoed_choices = {key for key in keys if key in choices}
    drop = short | (echoed_choices if len(echoed_choices) >= 2 else frozenset())
    if not any(key in drop for key in keys):
        return text
    return "\n".join(line for line, key in zip(lines, keys, strict=True) if key not in drop)
