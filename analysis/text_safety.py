"""Text from logs made safe for a terminal.

Model output, question text, model names and file names come from files anyone can write. Printed raw, an
ANSI escape sequence in them can recolour, move the cursor, rewrite earlier lines, set the window title or
hide text. ``terminal_text`` removes every escape sequence (CSI ``ESC [ ... final``, OSC ``ESC ] ... BEL/ST``,
other ``ESC x`` pairs, and their 8-bit C1 forms) and every other control or format character (C0, DEL, C1,
Unicode bidirectional overrides and isolates, zero-width space), keeping newline and tab.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["terminal_text"]

_ESCAPES = re.compile(
    r"""
    (?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]              # CSI: ESC [ params intermediates final (or 8-bit CSI)
    | (?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])     # OSC, DCS, SOS, PM, APC ...
      .*?(?:\x07|\x1b\\|\x9c|$)                   # ... up to BEL or ST (or the end of the text)
    | \x1b[ -/]*[0-~]                             # other escape sequences: ESC intermediates final
    | \x1b                                        # a lone ESC
    """,
    re.VERBOSE | re.DOTALL,
)
_KEEP = {"\n", "\t", "\u200c", "\u200d"}  # zero-width (non-)joiners shape scripts and emoji sequences


def _printable(character: str) -> bool:
    if character in _KEEP:
        return True
    category = unicodedata.category(character)
    # Cc: control characters (C0, DEL, C1); Cf: format characters (bidi overrides and isolates, zero-width
    # space, ...); Cs: lone surrogates (cannot be encoded); Zl/Zp: line/paragraph separators.
    return category not in {"Cc", "Cf", "Cs", "Zl", "Zp"}


def terminal_text(text: object) -> str:
    """``str(text)`` without escape sequences or control/format characters (newline and tab are kept;
    a carriage return is dropped, so it cannot overwrite what was printed before it on the line)."""
    stripped = _ESCAPES.sub("", str(text))
    return "".join(character for character in stripped if _printable(character))
