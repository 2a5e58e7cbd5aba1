"""Extraction of ``\\boxed{...}`` contents from a response, with nested braces.

One linear pass pairs the braces, so hostile responses (thousands of unclosed or nested boxes, megabytes of
text) take time proportional to their length.
"""

from __future__ import annotations

import re

__all__ = ["boxed_contents", "last_boxed"]

_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)\s*")
_BRACE = re.compile(r"[{}]")
_TOKEN = re.compile(r"[^\s$]+")
_SENTENCE_PUNCTUATION = frozenset(".,;:?\"'”’")
_CLOSING = {")": "(", "]": "["}


def _matching_braces(text: str, start: int = 0) -> dict[int, int]:
    """Position of the matching ``}`` of every ``{`` at or after ``start`` that is closed (a stray ``}``
    closes nothing). The match of a ``{`` depends only on the text after it, so braces before ``start``
    need not be paired."""
    closing: dict[int, int] = {}
    open_positions: list[int] = []
    for match in _BRACE.finditer(text, start):
        if match.group() == "{":
            open_positions.append(match.start())
        elif open_positions:
            closing[open_positions.pop()] = match.start()
    return closing


def _without_trailing_punctuation(token: str) -> str:
    """A brace-less box's token without the sentence punctuation after it (``\\boxed 5,`` is 5): ``. , ; :
    ?`` and quotes, and a closing ``)`` or ``]`` that nothing in the token opens; ``!`` is kept (``5!``)."""
    unopened = {closing: token.count(closing) - token.count(opening) for closing, opening in _CLOSING.items()}
    end = len(token)
    while end:
        last = token[end - 1]
        if last in _SENTENCE_PUNCTUATION:
            end -= 1
        elif last in _CLOSING and unopened[last] > 0:
            unopened[last] -= 1
            end -= 1
        else:
            break
    return token[:end]


def boxed_contents(text: str) -> list[str]:
    r"""Contents of every complete ``\boxed{...}`` (or ``\fbox{...}``) in ``text``, in order of their start.

    The content is the balanced ``{...}`` (braces counted), or the next token for ``\boxed 5`` without the
    punctuation that follows it (``\boxed 5,`` gives ``5``); a box whose braces never close is skipped. A
    nested box appears twice: ``\boxed{\boxed{3}}`` gives
    ``[r"\boxed{3}", "3"]``.
    """
    if not text:
        return []
    closing: dict[int, int] | None = None
    contents = []
    for match in _BOX_COMMAND.finditer(text):
        start = match.end()
        if start < len(text) and text[start] == "{":
            if closing is None:
                closing = _matching_braces(text, start)
            end = closing.get(start)
            if end is not None:
                contents.append(text[start + 1 : end].strip())
        else:
            token = _TOKEN.match(text, start)
            content = _without_trailing_punctuation(token.group(0)) if token else ""
            if content:
                contents.append(content)
    return contents


def last_boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{...}`` (or ``\fbox{...}``) in ``text``, or None.

    Braces are counted, so ``\boxed{\frac{1}{2}}`` gives ``\frac{1}{2}``. A box whose braces never close is
    skipped in favour of the previous complete one. ``\boxed 5`` (no braces) gives the next token.
    """
    contents = boxed_contents(text)
    return contents[-1] if contents else None
