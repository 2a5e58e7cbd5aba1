"""Extraction of ``\\boxed{...}`` contents from a response, with nested braces."""

from __future__ import annotations

import re

__all__ = ["boxed_contents", "last_boxed"]

_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)\s*")


def _box_content(text: str, start: int) -> str | None:
    """Content of the box whose command ends at ``start``: the balanced ``{...}`` (braces counted), or the
    next token for ``\\boxed 5``; None when the braces never close."""
    if start < len(text) and text[start] == "{":
        depth = 0
        for position in range(start, len(text)):
            char = text[position]
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    return text[start + 1 : position].strip()
        return None
    token = re.match(r"[^\s$]+", text[start:])
    return token.group(0) if token else None


def boxed_contents(text: str) -> list[str]:
    r"""Contents of every complete ``\boxed{...}`` (or ``\fbox{...}``) in ``text``, in order of their start.

    A nested box appears twice: ``\boxed{\boxed{3}}`` gives ``[r"\boxed{3}", "3"]``.
    """
    if not text:
        return []
    contents = (_box_content(text, match.end()) for match in _BOX_COMMAND.finditer(text))
    return [content for content in contents if content is not None]


def last_boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{...}`` (or ``\fbox{...}``) in ``text``, or None.

    Braces are counted, so ``\boxed{\frac{1}{2}}`` gives ``\frac{1}{2}``. A box whose braces never close is
    skipped in favour of the previous complete one. ``\boxed 5`` (no braces) gives the next token.
    """
    contents = boxed_contents(text)
    return contents[-1] if contents else None
