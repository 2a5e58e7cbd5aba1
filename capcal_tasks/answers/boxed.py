"""Extraction of the last ``\\boxed{...}`` in a response, with nested braces."""

from __future__ import annotations

import re

__all__ = ["last_boxed"]

_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)\s*")


def last_boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{...}`` (or ``\fbox{...}``) in ``text``, or None.

    Braces are counted, so ``\boxed{\frac{1}{2}}`` gives ``\frac{1}{2}``. A box whose braces never close is
    skipped in favour of the previous complete one. ``\boxed 5`` (no braces) gives the next token.
    """
    if not text:
        return None
    starts = [m.end() for m in _BOX_COMMAND.finditer(text)]
    for start in reversed(starts):
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
            continue  # unbalanced: try an earlier box
        token = re.match(r"[^\s$]+", text[start:])
        if token:
            return token.group(0)
    return None
