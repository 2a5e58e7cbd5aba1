r"""Multiple-choice answers (MMLU, GPQA): lettered choices, a per-question choice shuffle, letter extraction.

Extraction (paper protocol), first rule that finds a letter wins:
1. the last ``\boxed{...}`` whose content is a choice letter (``B``, ``(B)``, ``\text{B}``, ``B. 42``);
2. the last "answer is (X)" / "answer is X";
3. the last "answer: X";
4. the last standalone capital A-D in the response, a list of all four letters ("A, B, C, or D", the
   instruction's words) left out (capcal's rule: the paper's code reads its D as the answer).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence

from capcal_tasks.answers.boxed import boxed_contents

__all__ = ["LETTERS", "extract_choice_letter", "format_choices", "shuffle_choices"]

LETTERS = ("A", "B", "C", "D")

_LETTER = r"\(?([A-D])\)?(?![A-Za-z0-9])"
_BOXED_LETTER = re.compile(rf"^\s*(?:\\text\s*\{{\s*)?{_LETTER}")
_ANSWER_IS = re.compile(rf"answer is\s*:?\s*\**\s*{_LETTER}", re.IGNORECASE)
_ANSWER_COLON = re.compile(rf"answer\s*:\s*\**\s*{_LETTER}", re.IGNORECASE)
_STANDALONE = re.compile(r"(?<![A-Za-z0-9])([A-D])(?![A-Za-z0-9])")
_LETTER_LIST = re.compile(r"\(?A\)?,\s*\(?B\)?,\s*\(?C\)?,?\s*(?:or\s+|and\s+)?\(?D\)?(?![A-Za-z0-9])")


def format_choices(question: str, choices: Sequence[str]) -> str:
    """The question followed by one line per choice: ``A. first``, ``B. second``, ..."""
    if len(choices) != len(LETTERS):
        raise ValueError(f"expected {len(LETTERS)} choices, got {len(choices)}")
    lines = [question.strip()] + [
        f"{letter}. {str(choice).strip()}" for letter, choice in zip(LETTERS, choices, strict=True)
    ]
    return "\n".join(lines)


def shuffle_choices(correct: str, incorrect: Sequence[str], seed_text: str) -> tuple[list[str], int]:
    """The choices in a per-question shuffled order and the index of the correct one.

    The order is a function of ``seed_text`` only (seed = first 8 bytes of its SHA-256), so every run, machine
    and Python version shows a question's choices in the same order.
    """
    seed = int.from_bytes(hashlib.sha256(seed_text.encode("utf-8")).digest()[:8], "big")
    choices = [correct, *incorrect]
    order = list(range(len(choices)))
    random.Random(seed).shuffle(order)
    return [choices[i] for i in order], order.index(0)


def extract_choice_letter(response: str) -> str | None:
    """The choice letter (A-D) a response states, or None."""
    if not response:
        return None
    for content in reversed(boxed_contents(response)):
        match = _BOXED_LETTER.match(content)
        if match:
            return match.group(1)
    for pattern in (_ANSWER_IS, _ANSWER_COLON):
        matches = pattern.findall(response)
        if matches:
            return matches[-1]
    matches = _STANDALONE.findall(_LETTER_LIST.sub(" ", response))
    return matches[-1] if matches else None
