"""terminal_text: escape sequences and control characters from logs never reach the terminal."""

from __future__ import annotations

import pytest

from analysis.text_safety import terminal_text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a\x1b[31mred\x1b[0m b", "ared b"),  # colours
        ("x\x1b[2J\x1b[Hy", "xy"),  # clear screen, cursor home
        ("x\x1b]0;owned\x07y", "xy"),  # OSC: window title (BEL-terminated)
        ("z\x1b]8;;https://evil\x1b\\link\x1b]8;;\x1b\\w", "zlinkw"),  # OSC 8 hyperlink (ST-terminated)
        ("a\x9b31mb", "ab"),  # 8-bit CSI
        ("p\x1bPq#0;2;0;0;0\x1b\\s", "ps"),  # DCS (sixel)
        ("safe\rOVERWRITTEN", "safeOVERWRITTEN"),  # carriage return
        ("bell\x07 back\x08space\x7f", "bell backspace"),
        ("\u202eevil\u2066x\u2069", "evilx"),  # bidi override and isolate
        ("zero\u200bwidth", "zerowidth"),
        ("tab\there\nnext line", "tab\there\nnext line"),  # kept
        ("café 中文 👩\u200d💻", "café 中文 👩\u200d💻"),  # text, including joined emoji, kept
        ("lone \x1b", "lone "),
        (None, "None"),  # str() of a non-string (a label, not model text)
    ],
)
def test_terminal_text(text, expected):
    assert terminal_text(text) == expected


def test_no_control_character_survives():
    hostile = "".join(chr(c) for c in range(0x00, 0xA0)) + "\u2028\u2029\u061c\u200e\u200f"
    cleaned = terminal_text(hostile)
    assert set(cleaned) - set(map(chr, range(0x20, 0x7F))) == {"\n", "\t"}
