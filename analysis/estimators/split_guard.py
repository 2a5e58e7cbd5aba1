"""The split guard of fitted estimators: they remember the questions they were fitted or tuned on and refuse
to score them.

A fitted estimator (linear probe, isotonic recalibrator) stores the SHA-256 fingerprints of those question
ids (the first 16 hex digits each, :func:`question_fingerprints`) and one digest per split
(:func:`ids_digest`), so the ids themselves need not be saved. Scoring goes through
:func:`held_out_question_ids`, which raises :class:`SplitLeakageError` for any seen question: scoring it would
leak the training targets into the evaluation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from analysis.runs.validation import check_question_ids

__all__ = [
    "SplitLeakageError",
    "held_out_question_ids",
    "ids_digest",
    "question_fingerprints",
    "question_id_hash",
]


class SplitLeakageError(ValueError):
    """An estimator fitted on some questions was asked to score (or evaluate on) one of them."""


def question_id_hash(question_id: str) -> str:
    """A question id's fingerprint: the first 16 hex digits of its SHA-256 (what saved estimators store)."""
    return hashlib.sha256(question_id.encode("utf-8")).hexdigest()[:16]


def question_fingerprints(question_ids: Iterable[str]) -> frozenset[str]:
    """The fingerprints (:func:`question_id_hash`) of the questions an estimator was fitted or tuned on."""
    return frozenset(question_id_hash(question_id) for question_id in question_ids)


def ids_digest(question_ids: Iterable[str]) -> str:
    """SHA-256 of the sorted, newline-joined question ids: one fingerprint of a whole split."""
    return hashlib.sha256("\n".join(sorted(question_ids)).encode("utf-8")).hexdigest()


def held_out_question_ids(
    question_ids: Sequence[Any], seen: frozenset[str], *, length: int, what: str
) -> list[str]:
    """The ids of the ``length`` rows to score (distinct strings, :func:`check_question_ids`), after checking
    that none is among the fingerprints ``seen``; else :class:`SplitLeakageError` naming ``what`` refused."""
    ids = check_question_ids(question_ids, length=length)
    leaked = [q for q in ids if question_id_hash(q) in seen]
    if leaked:
        shown = ", ".join(repr(q) for q in leaked[:3]) + (
            f" and {len(leaked) - 3} more" if len(leaked) > 3 else ""
        )
        raise SplitLeakageError(
            f"{what} was fitted or tuned on {len(leaked)} of these {len(ids)} questions ({shown}); "
            "scoring them would leak the training targets into the evaluation. Score only held-out questions."
        )
    return ids
