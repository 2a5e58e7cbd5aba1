"""Integer answers (AIME): the extracted answer must state a single integer equal to the gold integer."""

from __future__ import annotations

from capcal_tasks.answers.numeric import parse_number

__all__ = ["parse_integer"]


def parse_integer(answer: str | None) -> int | None:
    r"""The integer an extracted answer states, or None when it states no single integer.

    Reuses ``numeric.parse_number`` (thousands separators, ``\text{}`` units, ``\frac{a}{b}``), then requires
    an integral value: "070" gives 70, "70.0" gives 70, "70.5" and "3 or 4" give None.
    """
    value = parse_number(answer)
    if value is None or not value.is_integer():
        return None
    return int(value)
