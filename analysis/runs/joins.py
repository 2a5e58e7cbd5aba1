"""Joins that say what they could not match.

Every join of capcal's tables (sampling questions <-> confidence records, <-> activations, one model's
questions <-> another's for routing) produces a :class:`JoinReport`: how many keys each side had, how many
matched, and how many (with the first few ids) of each side found no partner. Nothing is dropped silently:
the report (``summary()``) is shown in the report and by ``capcal check``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

__all__ = [
    "FIRST_IDS",
    "JoinReport",
    "join_questions",
    "join_report",
    "pair_models",
    "sampling_run_mismatch",
]

FIRST_IDS = 5


def _show(key: Hashable) -> str:
    if isinstance(key, tuple):
        return " / ".join(str(part) for part in key)
    return str(key)


@dataclass(frozen=True)
class JoinReport:
    """The outcome of one join: ``left_count`` and ``right_count`` distinct keys, ``matched`` in both, and
    for each side the count and first ids (in input order) of keys without a partner; ``notes`` say what the
    join relied on (an unresolved model identity, an undeclared target task)."""

    name: str
    left_count: int
    right_count: int
    matched: int
    unmatched_left: int
    unmatched_left_ids: tuple[str, ...]
    unmatched_right: int
    unmatched_right_ids: tuple[str, ...]
    left_name: str = "left"
    right_name: str = "right"
    notes: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Every key of both sides matched."""
        return self.unmatched_left == 0 and self.unmatched_right == 0

    def summary(self) -> str:
        """One line: ``name: matched m of L left and R right; n left without right (first: ...); ...``."""
        parts = [
            f"{self.name}: matched {self.matched} of {self.left_count} {self.left_name} "
            f"and {self.right_count} {self.right_name}"
        ]
        for count, ids, side, other in (
            (self.unmatched_left, self.unmatched_left_ids, self.left_name, self.right_name),
            (self.unmatched_right, self.unmatched_right_ids, self.right_name, self.left_name),
        ):
            if count:
                parts.append(f"{count} {side} without {other} (first: {', '.join(ids)})")
        parts.extend(self.notes)
        return "; ".join(parts)


def join_report(
    name: str,
    left_keys: Iterable[Hashable],
    right_keys: Iterable[Hashable],
    *,
    left_name: str = "left",
    right_name: str = "right",
    notes: Sequence[str] = (),
    first: int = FIRST_IDS,
) -> JoinReport:
    """The :class:`JoinReport` of joining two key sequences (duplicates count once)."""
    left = list(dict.fromkeys(left_keys))
    right = list(dict.fromkeys(right_keys))
    right_set, left_set = set(right), set(left)
    only_left = [key for key in left if key not in right_set]
    only_right = [key for key in right if key not in left_set]
    return JoinReport(
        name=name,
        left_count=len(left),
        right_count=len(right),
        matched=len(left) - len(only_left),
        unmatched_left=len(only_left),
        unmatched_left_ids=tuple(_show(key) for key in only_left[:first]),
        unmatched_right=len(only_right),
        unmatched_right_ids=tuple(_show(key) for key in only_right[:first]),
        left_name=left_name,
        right_name=right_name,
        notes=tuple(notes),
    )


def join_questions(
    left: str,
    right: str,
    left_ids: Iterable[Hashable],
    right_ids: Iterable[Hashable],
    *,
    right_rows: str = "questions",
    notes: Sequence[str] = (),
) -> JoinReport:
    """``join_report`` of ``left``'s questions with ``right``'s rows (``right_rows``: its questions, or e.g.
    its records), named ``"<left> <-> <right>"``."""
    return join_report(
        f"{left} <-> {right}",
        left_ids,
        right_ids,
        left_name=f"{left} questions",
        right_name=f"{right} {right_rows}",
        notes=notes,
    )


def pair_models(
    table: pd.DataFrame, model_a: str, model_b: str, *, on: Sequence[str] = ("task", "question_id")
) -> tuple[pd.DataFrame, pd.DataFrame, JoinReport]:
    """The rows of two models' questions (``model_a`` / ``model_b``: a model_id or a label), aligned on
    ``on``: (rows of a, rows of b, report), row i of each belonging to the same question. Questions that
    only one model answered are counted in the report and left out of both frames."""
    on = list(on)

    def rows(model: str) -> pd.DataFrame:
        column = "model_id" if "model_id" in table.columns and (table["model_id"] == model).any() else "model"
        part = table[table[column] == model]
        if part.empty:
            raise ValueError(f"no questions of model {model}")
        if part.duplicated(on).any():
            raise ValueError(f"model {model} has several rows per {tuple(on)}; use one run per task")
        return part

    a, b = rows(model_a), rows(model_b)
    a_keys = list(map(tuple, a[on].to_numpy()))
    b_keys = list(map(tuple, b[on].to_numpy()))
    notes = [
        f"{model} is known only by its label (unresolved checkpoint)"
        for model, part in ((model_a, a), (model_b, b))
        if "model_id" in part.columns and str(part["model_id"].iloc[0]).startswith("unresolved:")
    ]
    report = join_report(
        f"{model_a} <-> {model_b}",
        a_keys,
        b_keys,
        left_name=str(model_a),
        right_name=str(model_b),
        notes=notes,
    )
    common = set(a_keys) & set(b_keys)
    a = a[[key in common for key in a_keys]].sort_values(on).reset_index(drop=True)
    b = b[[key in common for key in b_keys]].sort_values(on).reset_index(drop=True)
    return a, b, report


def sampling_run_mismatch(kind: str, record: Mapping, correctness: Sequence[int]) -> str | None:
    """Why a confidence record scored other responses than the sampling run's question whose k-vector of
    0/1 ``correctness`` it is joined to, or None: a response form (``*_rc``) whose ``response_correct``
    differs from the first response's, a self-check whose ``response_correctness`` is not the whole vector
    (it then belongs to another sampling run, another model's or one re-run with another k, and its
    per-response confidences would be misaligned)."""
    vector = [int(value) for value in correctness]
    if kind.endswith("_rc") and record["response_correct"] != vector[0]:
        return (
            f"scores a response with correctness {int(record['response_correct'])}, but the sampling run's "
            f"first response has {vector[0]}"
        )
    if kind == "selfcheck" and [int(v) for v in record["response_correctness"]] != vector:
        return f"has response correctness {list(record['response_correctness'])}, the sampling run {vector}"
    return None
