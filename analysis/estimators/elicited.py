"""Elicited confidences (verbalized, P(True), Self-Calibration's per-response check) joined to the questions.

The confidence record (fields, kinds, validation) is defined once, in ``capcal_tasks.confidence.records``,
next to the tasks that write it; ``analysis.runs.load_runs`` reads it (``RunCollection.confidences``).
:func:`read_elicited` is that table for one folder; :func:`join_elicited` joins it to the per-question
table on (model_id, target task, question_id), where the target task is the sampling task the confidence
task declares it scores (``capcal_target_task``; SimpleQA and SimpleQA-Verified share question ids, so the
task is part of the key), and returns a :class:`analysis.runs.joins.JoinReport` per kind: confidence records
without a question in the table are counted, never silently dropped. :func:`parse_failure_counts` reports
how many confidences could not be parsed; a failure stays NaN, it is never replaced by 0.5.

:func:`read_elicited` returns ``ELICITED_COLUMNS``: ``model, model_id, task, target_task, run_id, kind,
doc_id, question_id, confidence, parse_success, response_correct, logprob_yes, logprob_no, p_yes,
p_yes_normalized, response_correctness`` (``confidence`` is the verbalized value or P(True); per-response
columns hold lists for ``selfcheck``, None otherwise).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.runs.identity import UNRESOLVED
from analysis.runs.joins import JoinReport, join_report, sampling_run_mismatch
from analysis.runs.tables import CONFIDENCE_COLUMNS, load_table
from capcal_tasks.confidence.records import CONFIDENCE_KINDS

__all__ = [
    "ELICITED_COLUMNS",
    "ELICITED_KINDS",
    "attach_elicited",
    "join_elicited",
    "parse_failure_counts",
    "read_elicited",
]

ELICITED_KINDS = CONFIDENCE_KINDS
ELICITED_COLUMNS = CONFIDENCE_COLUMNS
# Column names that attach_elicited adds for each kind.
_ATTACHED = {
    "verbalized": ("verbalized_confidence", "verbalized_parse_success"),
    "verbalized_rc": ("verbalized_rc_confidence", "verbalized_rc_parse_success"),
    "ptrue": ("p_true", "p_true_parse_success"),
    "ptrue_rc": ("p_true_rc", "p_true_rc_parse_success"),
}


def read_elicited(output_dir: str | Path) -> pd.DataFrame:
    """Every confidence record under ``output_dir`` (every distinct run) as one row (``ELICITED_COLUMNS``).

    Raises ``RunFormatError`` naming the file and line for a malformed record (see
    ``capcal_tasks.confidence.records``) and ``FileNotFoundError`` when no confidence record is found
    (saying what the folder holds instead).
    """
    return load_table(output_dir, "confidences")


def _check_columns(frame: pd.DataFrame, columns: Sequence[str], name: str) -> None:
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise ValueError(f"{name} has no column(s) {', '.join(missing)}")


def _join_columns(table: pd.DataFrame, elicited: pd.DataFrame, on: Sequence[str] | None) -> tuple:
    """(table key columns, elicited key columns, notes)."""
    if on is not None:
        on = [on] if isinstance(on, str) else list(on)
        return on, on, ["joined on " + ", ".join(on) + " (given)"]
    model = "model_id" if "model_id" in table.columns and "model_id" in elicited.columns else "model"
    notes = [] if model == "model_id" else ["joined on the model label (no model_id column)"]
    return [model, "task", "question_id"], [model, "target_task", "question_id"], notes


def join_elicited(
    table: pd.DataFrame,
    elicited: pd.DataFrame,
    *,
    on: Sequence[str] | None = None,
    on_mismatch: str = "raise",
) -> tuple[pd.DataFrame, list[JoinReport]]:
    """The per-question ``table`` with one column pair per elicited kind, and one ``JoinReport`` per kind.

    Joined on (model_id, task) = (model_id, target_task) and question_id (``on`` overrides: the same
    columns on both sides). Adds ``verbalized_confidence`` / ``verbalized_parse_success``, ``p_true`` /
    ``p_true_parse_success``, ``verbalized_rc_confidence`` / ``verbalized_rc_parse_success``, ``p_true_rc``
    / ``p_true_rc_parse_success`` and, for ``selfcheck``, the per-response lists ``selfcheck_p_yes`` /
    ``selfcheck_p_yes_normalized``, for the kinds present. A question without a record gets NaN (None for
    lists) and parse_success <NA>. Each report counts the questions of the targeted tasks without a record
    and the records without a question (another model, another task, a question not in the run, or an
    undeclared target task), with the first ids.

    Raises ``ValueError`` when a (kind, key) occurs twice in ``elicited`` (use one run per task), or when a
    joined record contradicts the table: a response-form ``response_correct`` that differs from the table's
    first response, or selfcheck ``response_correctness`` that differs from the table's correctness vector
    (the confidences then belong to another sampling run and would be misaligned). With ``on_mismatch=
    "leave_out"`` such a kind is not attached instead, and ``result.attrs["left_out"]`` maps it to that
    one line (the report leaves the estimator out with a warning).
    """
    if on_mismatch not in ("raise", "leave_out"):
        raise ValueError(f"on_mismatch must be 'raise' or 'leave_out', got {on_mismatch!r}")
    left_out: dict[str, str] = {}
    left_on, right_on, base_notes = _join_columns(table, elicited, on)
    _check_columns(table, [*left_on, "correctness"], "table")
    _check_columns(elicited, [*right_on, "kind", "confidence", "parse_success"], "elicited")
    if table.duplicated(left_on).any():
        raise ValueError(
            f"table has several rows per {tuple(left_on)}; select one run (or join on more columns)"
        )
    out = table.copy()
    keys = list(map(tuple, table[left_on].to_numpy()))
    reports = []
    for kind, group in elicited.groupby("kind", sort=True):
        records = _records_by_key(kind, group, right_on)
        if on is None:
            targets = set(group["target_task"].dropna())
            left_keys = [key for key in keys if key[1] in targets]
            notes = base_notes + _join_notes(kind, group, right_on[0])
        else:
            left_keys, notes = keys, list(base_notes)
        reports.append(
            join_report(
                f"{kind} <-> questions",
                left_keys,
                list(records),
                left_name="questions",
                right_name=f"{kind} records",
                notes=notes,
            )
        )
        matched = [records.get(key) for key in keys]
        mismatch = _mismatch(kind, keys, list(table["correctness"]), matched)
        if mismatch is not None and on_mismatch == "raise":
            raise ValueError(mismatch)
        if mismatch is not None:
            left_out[kind] = mismatch
            continue
        _attach(out, kind, matched)
    out.attrs["left_out"] = left_out
    return out, reports


def _records_by_key(kind: str, group: pd.DataFrame, right_on: Sequence[str]) -> dict[tuple, dict]:
    """The records of one kind by their join key (in order); ``ValueError`` for an unknown kind or a key
    that occurs twice."""
    if kind not in ELICITED_KINDS:
        raise ValueError(f"unknown elicited kind {kind!r}")
    duplicated = group.duplicated(right_on)
    if duplicated.any():
        example = tuple(group.loc[duplicated, right_on].iloc[0])
        raise ValueError(f"{kind}: several records for {example}; use one run per (model, task)")
    group_keys = list(map(tuple, group[right_on].to_numpy()))
    return dict(zip(group_keys, group.to_dict("records"), strict=True))


def _join_notes(kind: str, group: pd.DataFrame, model_column: str) -> list[str]:
    """What a join on the declared target tasks cannot do: records of tasks without a declared target task
    (counted per task), and models known only by their label."""
    notes = []
    undeclared = group[group["target_task"].isna()]
    for task, count in undeclared["task"].value_counts().sort_index().items():
        notes.append(f"{count} {kind} record(s) of {task}: no declared target task (capcal_target_task)")
    unresolved = sorted(
        {str(m)[len(UNRESOLVED) :] for m in group[model_column] if str(m).startswith(UNRESOLVED)}
    )
    if unresolved:
        notes.append(f"model(s) {', '.join(unresolved)} known only by label (unresolved checkpoint)")
    return notes


def _mismatch(kind: str, keys: list[tuple], correctness: list, matched: list[dict | None]) -> str | None:
    """The first joined record of ``kind`` that scored other responses than the table's
    (``analysis.runs.joins.sampling_run_mismatch``), as one line naming its run, or None."""
    for key, vector, record in zip(keys, correctness, matched, strict=True):
        if record is None:
            continue
        why = sampling_run_mismatch(kind, record, list(vector))
        if why is not None:
            run = f" (run {record['run_id']})" if record.get("run_id") else ""
            return (
                f"{kind} record of {record.get('task', kind)}{run} for {key} {why}: different sampling runs; "
                "per-response confidences would be misaligned"
            )
    return None


def _attach(out: pd.DataFrame, kind: str, matched: list[dict | None]) -> None:
    """Add the columns of one kind to ``out`` (row by row from ``matched``; NaN, None or <NA> without a
    record): the confidence and parse success, or selfcheck's per-response lists."""
    success = pd.array([pd.NA if r is None else int(r["parse_success"]) for r in matched], dtype="Int64")
    if kind == "selfcheck":
        out["selfcheck_p_yes"] = [None if r is None else list(r["p_yes"]) for r in matched]
        out["selfcheck_p_yes_normalized"] = [
            None if r is None else list(r["p_yes_normalized"]) for r in matched
        ]
        out["selfcheck_parse_success"] = success
        return
    value_column, success_column = _ATTACHED[kind]
    out[value_column] = np.array([math.nan if r is None else float(r["confidence"]) for r in matched])
    out[success_column] = success


def attach_elicited(
    table: pd.DataFrame,
    elicited: pd.DataFrame,
    *,
    on: Sequence[str] | None = None,
    on_mismatch: str = "raise",
) -> pd.DataFrame:
    """``join_elicited``'s table; its join reports are in ``result.attrs["joins"]``, the kinds it left out
    (``on_mismatch="leave_out"``) in ``result.attrs["left_out"]``."""
    out, reports = join_elicited(table, elicited, on=on, on_mismatch=on_mismatch)
    out.attrs["joins"] = reports
    return out


def parse_failure_counts(elicited: pd.DataFrame, table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Parse failures per (model, task, kind): ``questions`` (records), ``parse_failures`` (records without a
    usable confidence: verbalized without ``\\boxed{P}`` in [0, 1], P(True) null/NaN, selfcheck with any NaN
    entry), ``failure_rate`` = failures / questions, and for selfcheck ``response_failures`` (NaN entries) out
    of ``responses``. With the per-question ``table``, ``missing`` counts the table's questions of that model
    and target task that have no record of that kind."""
    _check_columns(elicited, ["model", "task", "kind", "question_id", "parse_success"], "elicited")
    if table is not None:
        _check_columns(table, ["model", "question_id"], "table")
    rows = []
    for (model, task, kind), group in elicited.groupby(["model", "task", "kind"], sort=True):
        failures = int((group["parse_success"].astype(int) == 0).sum())
        row = {
            "model": model,
            "task": task,
            "kind": kind,
            "questions": len(group),
            "parse_failures": failures,
            "failure_rate": failures / len(group),
            "responses": pd.NA,
            "response_failures": pd.NA,
            "missing": pd.NA,
        }
        if kind == "selfcheck":
            values = [v for lst in group["p_yes_normalized"] for v in lst]
            row["responses"] = len(values)
            row["response_failures"] = int(sum(math.isnan(v) for v in values))
        if table is not None:
            if "target_task" in group.columns and "model_id" in group.columns and "model_id" in table.columns:
                targets = set(group["target_task"].dropna())
                own = table[table["model_id"].isin(set(group["model_id"])) & table["task"].isin(targets)]
                wanted = set(own["question_id"])
            else:
                prefixes = {question_id.split("/", 1)[0] for question_id in group["question_id"]}
                candidates = table.loc[table["model"] == model, "question_id"]
                wanted = {q for q in candidates if q.split("/", 1)[0] in prefixes}
            row["missing"] = len(wanted - set(group["question_id"]))
        rows.append(row)
    return pd.DataFrame(rows)
