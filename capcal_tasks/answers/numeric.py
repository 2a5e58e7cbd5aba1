"""Numeric answers (GSM8K): parse a number from an extracted answer and compare within a tolerance."""

from __future__ import annotations

import math
import re

__all__ = ["ABSOLUTE_TOLERANCE", "gsm8k_gold", "numbers_equal", "parse_number"]

ABSOLUTE_TOLERANCE = 1e-6
# Punctuation that may follow a stated number ("18.", "18,", "18;"); "!" is kept (5! is not 5).
_TRAILING_PUNCTUATION = ".,;:?"

_LATEX_WRAPPERS = re.compile(r"\\(?:text|textbf|mathrm|mbox)\s*\{([^{}]*)\}")
_FRACTION = re.compile(r"^(-?)\\[dt]?frac\s*\{\s*(-?[\d.]+)\s*\}\s*\{\s*(-?[\d.]+)\s*\}$")
# A number, optionally followed by unit words ("18 dollars", "5 km"), nothing else.
_NUMBER = re.compile(r"^(-?(?:\d+(?:\.\d*)?|\.\d+))(?:\s*[A-Za-z][A-Za-z\s.]*)?$")


def parse_number(answer: str | None) -> float | None:
    r"""The number an extracted answer states, or None when it is not a single number.

    Accepts thousands separators, currency and percent signs, ``\text{...}`` units, LaTeX ``\frac{a}{b}``,
    trailing punctuation (``. , ; : ?``, not ``!``) and trailing unit words; rejects anything with a second
    number ("3 or 4").
    """
    if answer is None:
        return None
    text = _LATEX_WRAPPERS.sub(r" \1", answer)
    for junk in ("\\$", "$", "\\%", "%", "\\!", "\\,", "\\ ", "£", "€"):
        text = text.replace(junk, " ")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text).strip().rstrip(_TRAILING_PUNCTUATION).strip()
    fraction = _FRACTION.match(text)
    if fraction:
        sign, numerator, denominator = fraction.groups()
        try:
            value = float(numerator) / float(denominator)
        except (ValueError, ZeroDivisionError):
            return None
        return -value if sign else value
    match = _NUMBER.match(text)
    if not match:
        return None
    value = float(match.group(1))
    return value if math.isfinite(value) else None


def gsm8k_gold(answer_field: str) -> float:
    """The gold number of a GSM8K ``answer`` field: what follows ``####``."""
    _, separator, gold = answer_field.rpartition("####")
    if not separator:
        raise ValueError(f"GSM8K answer has no '####' line: {answer_field[-80:]!r}")
    value = parse_number(gold.strip())
    if value is None:
        raise ValueError(f"GSM8K gold answer is not a number: {gold.strip()!r}")
    return value


def numbers_equal(predicted: float | None, gold: float, tolerance: float = ABSOLUTE_TOLERANCE) -> bool:
    """``|predicted - gold| <= tolerance``; a missing prediction is wrong."""
    return predicted is not None and abs(predicted - gold) <= tolerance
