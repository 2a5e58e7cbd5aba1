"""Elicited confidences (verbalized, P(True), Self-Calibration's per-response check) from lm-eval logs.

capcal's confidence tasks (``capcal_tasks.confidence``) log one samples line per question, with the stable
``question_id`` in ``doc``. :func:`read_elicited` reads every such line under an lm-eval output folder into
one long table, :func:`attach_elicited` joins it to the per-question table of ``analysis.runs.load_run`` on
(model, question_id), and :func:`parse_failure_counts` reports how many confidences could not be parsed
(METHODS.md: record parse success per query and report the failure rate, never hide it; a failure stays NaN,
it is never replaced by 0.5).

Column contract of a samples line (metric fields written by the tasks' ``process_results``); the kind is
recognised by its fields and, where the results file has the task's config, checked against its
``metadata.capcal_task``:

========================  ==========================================================================
kind                      fields
========================  ==========================================================================
``verbalized``            ``verbalized_confidence`` (in [0, 1], null on failure), ``parse_success`` (0/1)
``verbalized_rc``         as ``verbalized`` plus ``response_correct`` (0/1 of the scored, first response)
``ptrue``                 ``p_true`` (float in [0, 1]; null/NaN = failure), ``logprob_yes``, ``logprob_no``
``ptrue_rc``              as ``ptrue`` plus ``response_correct``
``selfcheck``             per-response lists ``p_yes``, ``p_yes_normalized`` (null/NaN entries = failure),
                          ``response_correctness`` (0/1, the earlier run's correctness)
========================  ==========================================================================

:func:`read_elicited` returns columns ``model, task, run_id, kind, doc_id, question_id, confidence,
parse_success, response_correct, logprob_yes, logprob_no, p_yes, p_yes_normalized, response_correctness``
(``confidence`` is the verbalized value or P(True); per-response columns hold lists for ``selfcheck``,
None otherwise).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.runs import RunFormatError, find_samples_files, iter_sample_records

__all__ = [
    "ELICITED_COLUMNS",
    "ELICITED_KINDS",
    "attach_elicited",
    "parse_failure_counts",
    "read_elicited",
]

ELICITED_KINDS = ("verbalized", "verbalized_rc", "ptrue", "ptrue_rc", "selfcheck")
ELICITED_COLUMNS = [
    "model",
    "task",
    "run_id",
    "kind",
    "doc_id",
    "question_id",
    "confidence",
    "parse_success",
    "response_correct",
    "logprob_yes",
    "logprob_no",
    "p_yes",
    "p_yes_normalized",
    "response_correctness",
]
# Column names that attach_elicited adds for each kind.
_ATTACHED = {
    "verbalized": ("verbalized_confidence", "verbalized_parse_success"),
    "verbalized_rc": ("verbalized_rc_confidence", "verbalized_rc_parse_success"),
    "ptrue": ("p_true", "p_true_parse_success"),
    "ptrue_rc": ("p_true_rc", "p_true_rc_parse_success"),
}


def _kind_of(record: dict) -> str | None:
    if "p_yes_normalized" in record or "p_yes" in record:
        return "selfcheck"
    if "verbalized_confidence" in record:
        return "verbalized_rc" if "response_correct" in record else "verbalized"
    if "p_true" in record:
        return "ptrue_rc" if "response_correct" in record else "ptrue"
    return None


def _probability_or_nan(value: Any, where: str, name: str) -> float:
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RunFormatError(f"{where}: {name} must be a number or null, got {value!r}")
    value = float(value)
    if math.isfinite(value) and not 0.0 <= value <= 1.0:
        raise RunFormatError(f"{where}: {name} = {value!r} is not a probability in [0, 1]")
    return value if math.isfinite(value) else math.nan


def _binary(value: Any, where: str, name: str) -> int:
    if value not in (0, 1) or isinstance(value, float):
        raise RunFormatError(f"{where}: {name} must be 0 or 1, got {value!r}")
    return int(value)


def _row(record: dict, kind: str, where: str) -> dict:
    doc = record.get("doc")
    if not isinstance(doc, dict) or not isinstance(doc.get("question_id"), str):
        raise RunFormatError(f"{where}: 'doc' has no question_id; cannot join it to the per-question table")
    doc_id = record.get("doc_id", -1)
    if isinstance(doc_id, bool) or not isinstance(doc_id, int):
        raise RunFormatError(f"{where}: 'doc_id' must be an integer, got {doc_id!r}")
    row: dict[str, Any] = {
        "kind": kind,
        "doc_id": doc_id,
        "question_id": doc["question_id"],
        "confidence": math.nan,
        "parse_success": 0,
        "response_correct": None,
        "logprob_yes": math.nan,
        "logprob_no": math.nan,
        "p_yes": None,
        "p_yes_normalized": None,
        "response_correctness": None,
    }
    if kind in ("verbalized", "verbalized_rc"):
        confidence = _probability_or_nan(record["verbalized_confidence"], where, "verbalized_confidence")
        success = record.get("parse_success", int(not math.isnan(confidence)))
        success = _binary(success, where, "parse_success")
        if success != int(not math.isnan(confidence)):
            raise RunFormatError(f"{where}: parse_success={success} disagrees with verbalized_confidence")
        row.update(confidence=confidence, parse_success=success)
    elif kind in ("ptrue", "ptrue_rc"):
        confidence = _probability_or_nan(record["p_true"], where, "p_true")
        row.update(confidence=confidence, parse_success=int(not math.isnan(confidence)))
        for name in ("logprob_yes", "logprob_no"):
            value = record.get(name)
            row[name] = (
                float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
            )
    else:
        lists = {}
        for name in ("p_yes", "p_yes_normalized", "response_correctness"):
            value = record.get(name)
            if not isinstance(value, list) or not value:
                raise RunFormatError(f"{where}: selfcheck field {name} must be a non-empty list")
            lists[name] = value
        if len({len(value) for value in lists.values()}) != 1:
            raise RunFormatError(
                f"{where}: selfcheck lists p_yes, p_yes_normalized, response_correctness differ in length"
            )
        p_yes = [_probability_or_nan(v, where, "p_yes") for v in lists["p_yes"]]
        p_norm = [_probability_or_nan(v, where, "p_yes_normalized") for v in lists["p_yes_normalized"]]
        correctness = [_binary(v, where, "response_correctness") for v in lists["response_correctness"]]
        row.update(
            p_yes=p_yes,
            p_yes_normalized=p_norm,
            response_correctness=correctness,
            parse_success=int(not any(math.isnan(v) for v in p_norm)),
        )
    if kind.endswith("_rc"):
        row["response_correct"] = _binary(record.get("response_correct"), where, "response_correct")
    return row


def read_elicited(output_dir: str | Path) -> pd.DataFrame:
    """Every confidence-task samples line under ``output_dir`` as one row (columns: ``ELICITED_COLUMNS``).

    Lines of other tasks (e.g. the sampling tasks) are skipped. Raises ``RunFormatError`` naming the file and
    line for malformed JSON, a missing question_id, an out-of-range probability, or a kind that contradicts
    the task's ``metadata.capcal_task``; ``FileNotFoundError`` when no confidence-task line is found.
    """
    root = Path(output_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder")
    rows = []
    for file in find_samples_files(root):
        declared_kind = (file.task_config.get("metadata") or {}).get("capcal_task")
        for line_number, record in iter_sample_records(file.path):
            kind = _kind_of(record)
            if kind is None:
                continue
            where = f"{file.path}:{line_number}"
            if declared_kind in ELICITED_KINDS and declared_kind != kind:
                raise RunFormatError(
                    f"{where}: fields of a {kind} task, but the task config says {declared_kind}"
                )
            rows.append(
                {"model": file.model, "task": file.task, "run_id": file.run_id, **_row(record, kind, where)}
            )
    if not rows:
        raise FileNotFoundError(
            f"no capcal confidence-task samples under {root} (verbalized, P(True), selfcheck)"
        )
    return pd.DataFrame(rows, columns=ELICITED_COLUMNS)


def _check_columns(frame: pd.DataFrame, columns: Sequence[str], name: str) -> None:
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise ValueError(f"{name} has no column(s) {', '.join(missing)}")


def attach_elicited(
    table: pd.DataFrame, elicited: pd.DataFrame, *, on: Sequence[str] = ("model", "question_id")
) -> pd.DataFrame:
    """The per-question ``table`` with one column pair per elicited kind, joined on ``on``.

    Adds ``verbalized_confidence`` / ``verbalized_parse_success``, ``p_true`` / ``p_true_parse_success``,
    ``verbalized_rc_confidence`` / ``verbalized_rc_parse_success``, ``p_true_rc`` /
    ``p_true_rc_parse_success``
    and, for ``selfcheck``, the per-response lists ``selfcheck_p_yes`` / ``selfcheck_p_yes_normalized``, for
    the kinds present. A question without a record gets NaN (None for lists) and parse_success <NA>.

    Raises ``ValueError`` when a (kind, key) occurs twice in ``elicited`` (filter it by run first), or when a
    joined record contradicts the table: a response-form ``response_correct`` that differs from the table's
    first response, or selfcheck ``response_correctness`` that differs from the table's correctness vector
    (the confidences then belong to another sampling run and would be misaligned).
    """
    on = [on] if isinstance(on, str) else list(on)
    _check_columns(table, [*on, "correctness"], "table")
    _check_columns(elicited, [*on, "kind", "confidence", "parse_success"], "elicited")
    if table.duplicated(on).any():
        raise ValueError(f"table has several rows per {tuple(on)}; select one run (or join on more columns)")
    out = table.copy()
    keys = list(map(tuple, table[on].to_numpy()))
    for kind, group in elicited.groupby("kind", sort=True):
        if kind not in ELICITED_KINDS:
            raise ValueError(f"unknown elicited kind {kind!r}")
        duplicated = group.duplicated(on)
        if duplicated.any():
            example = tuple(group.loc[duplicated, on].iloc[0])
            raise ValueError(f"{kind}: several records for {example}; filter elicited by run_id first")
        records = dict(zip(map(tuple, group[on].to_numpy()), group.to_dict("records"), strict=True))
        matched = [records.get(key) for key in keys]
        for row, record in enumerate(matched):
            if record is None:
                continue
            correctness = list(table["correctness"].iloc[row])
            if kind.endswith("_rc") and record["response_correct"] != correctness[0]:
                raise ValueError(
                    f"{kind} record for {keys[row]} scores a response with correctness "
                    f"{record['response_correct']}, "
                    f"but the table's first response has {correctness[0]}: different sampling runs"
                )
            if kind == "selfcheck" and list(record["response_correctness"]) != correctness:
                raise ValueError(
                    f"selfcheck record for {keys[row]} has response correctness "
                    f"{record['response_correctness']}, the table {correctness}: different sampling runs; "
                    "per-response confidences would be misaligned"
                )
        if kind == "selfcheck":
            out["selfcheck_p_yes"] = [None if r is None else list(r["p_yes"]) for r in matched]
            out["selfcheck_p_yes_normalized"] = [
                None if r is None else list(r["p_yes_normalized"]) for r in matched
            ]
            out["selfcheck_parse_success"] = pd.array(
                [pd.NA if r is None else int(r["parse_success"]) for r in matched], dtype="Int64"
            )
            continue
        value_column, success_column = _ATTACHED[kind]
        out[value_column] = np.array([math.nan if r is None else float(r["confidence"]) for r in matched])
        out[success_column] = pd.array(
            [pd.NA if r is None else int(r["parse_success"]) for r in matched], dtype="Int64"
        )
    return out


def parse_failure_counts(elicited: pd.DataFrame, table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Parse failures per (model, task, kind): ``questions`` (records), ``parse_failures`` (records without a
    usable confidence: verbalized without ``\\boxed{P}`` in [0, 1], P(True) null/NaN, selfcheck with any NaN
    entry), ``failure_rate`` = failures / questions, and for selfcheck ``response_failures`` (NaN entries) out
    of ``responses``. With the per-question ``table``, ``missing`` counts the table's questions of that model
    and dataset (question-id prefix, e.g. ``gsm8k/``) that have no record of that kind."""
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
            prefixes = {question_id.split("/", 1)[0] for question_id in group["question_id"]}
            candidates = table.loc[table["model"] == model, "question_id"]
            wanted = {q for q in candidates if q.split("/", 1)[0] in prefixes}
            row["missing"] = len(wanted - set(group["question_id"]))
        rows.append(row)
    return pd.DataFrame(rows)
