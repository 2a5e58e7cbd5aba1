"""Reading one run: each line of its samples file validated (and re-checked) into a row, sampling questions
or confidence records, streamed line by line.

See the "Records" and "Re-scored runs" items of :mod:`analysis.runs`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from analysis.runs.identity import SamplesFile
from capcal_tasks.checkers import recheck_scorer
from capcal_tasks.confidence.records import CONFIDENCE_KINDS, confidence_kind, parse_confidence_record
from capcal_tasks.records import RunFormatError, iter_json_lines
from capcal_tasks.relations import capcal_task_declarations, parse_declaration
from capcal_tasks.sampling import (
    is_sampling_config,
    is_sampling_record,
    parse_sampling_record,
    recheck_sampling_record,
)

__all__ = ["RunRows", "read_run", "sampling_fields", "sampling_label"]


def _question_text(doc: dict, record: dict) -> str:
    for key in ("question", "problem", "Question"):
        if isinstance(doc.get(key), str):
            return doc[key]
    arguments = record.get("arguments") or {}
    first = arguments.get("gen_args_0") if isinstance(arguments, dict) else None
    value = first.get("arg_0") if isinstance(first, dict) else None
    return value if isinstance(value, str) else ""


def _target(record: dict) -> str | None:
    """The logged gold target: "" when absent, None when null (never the text "None")."""
    if "target" not in record:
        return ""
    target = record["target"]
    if target is None:
        return None
    return target if isinstance(target, str) else str(target)


def _target_task(file: SamplesFile) -> str | None:
    relation = parse_declaration(file.task, file.task_config.get("metadata"), str(file.results_path))
    if relation is None:
        relation = capcal_task_declarations().get(file.task)
    return relation.target_task if relation is not None else None


def _not_capcal(record: dict) -> bool:
    """Whether a samples line is none of capcal's records (NaN there is another task's business)."""
    return not is_sampling_record(record) and confidence_kind(record) is None


@dataclass
class RunRows:
    file: SamplesFile
    kind: str  # "sampling", a confidence kind, or "other"
    rows: list[dict]


def read_run(file: SamplesFile, allow_null_responses: bool, keep_responses: bool = False) -> RunRows:
    """The rows of one samples file: sampling questions, or confidence records (kind by fields); a
    leaderboard task's file is not read (its results are the results file's columns). A question twice in
    one file raises ``RunFormatError``. Lines are read one at a time; a sampling row keeps its responses
    only with ``keep_responses``."""
    declared = (file.task_config.get("metadata") or {}).get("capcal_task")
    if declared == "leaderboard":
        return RunRows(file, "leaderboard", [])
    sampling_rows: list[dict] = []
    confidence_rows: list[dict] = []
    first_line: dict[str, int] = {}
    target_task: Any = ...  # read from the task's declaration at the first confidence record
    checker = recheck_scorer(file.task, file.rescore, (file.task_config.get("metadata") or {}).get("version"))
    for line_number, record in iter_json_lines(file.path, _not_capcal):
        where = f"{file.path}:{line_number}"
        if is_sampling_record(record):
            row = _sampling_row(file, record, where, checker, allow_null_responses, keep_responses)
            rows, identifier = sampling_rows, row["question_id"]
        else:
            kind = confidence_kind(record)
            if kind is None:
                continue
            if declared in CONFIDENCE_KINDS and declared != kind:
                raise RunFormatError(f"{where}: fields of a {kind} task, but the task config says {declared}")
            if target_task is ...:
                target_task = _target_task(file)
            row = {
                **_run_fields(file),
                "target_task": target_task,
                **parse_confidence_record(record, kind, where),
            }
            rows, identifier = confidence_rows, f"{kind}\0{row['question_id']}"
        if identifier in first_line:
            raise RunFormatError(
                f"{where}: question {row['question_id']} appears twice "
                f"(first on line {first_line[identifier]})"
            )
        first_line[identifier] = line_number
        rows.append(row)
    return _run_rows(file, sampling_rows, confidence_rows)


def _run_fields(file: SamplesFile) -> dict[str, str]:
    """The columns every row of a run starts with: model, model_id, task, run_id, run_key."""
    return {
        "model": file.model,
        "model_id": file.model_id,
        "task": file.task,
        "run_id": file.run_id,
        "run_key": file.run_key,
    }


def _sampling_row(
    file: SamplesFile,
    record: dict,
    where: str,
    checker: Callable | None,
    allow_null_responses: bool,
    keep_responses: bool = False,
) -> dict:
    """The per-question row of one sampling record, validated (``parse_sampling_record``) and, with the
    task's ``checker``, re-scored against the gold in its doc (not when a response is null). The row holds
    the first response, the counts of null and empty (whitespace-only) responses, and all responses only
    with ``keep_responses``."""
    fields = parse_sampling_record(record, where, file.task, allow_null_responses=allow_null_responses)
    if checker is not None and not fields["null_responses"]:
        recheck_sampling_record(fields, checker, where)
    responses = fields["responses"]
    row = {
        **_run_fields(file),
        "doc_id": fields["doc_id"],
        "question_id": fields["question_id"],
        "question": _question_text(fields["doc"], record),
        "target": _target(record),
        "first_response": responses[0],
        "extracted_answers": fields["extracted_answers"],
        "correctness": fields["correctness"],
        "n": fields["n"],
        "expected_accuracy": fields["expected_accuracy"],
        "null_responses": fields["null_responses"],
        "empty_responses": sum(1 for text in responses if text is not None and not text.strip()),
    }
    row.update(sampling_fields(fields["correctness"], fields["adaptive"]))
    if keep_responses:
        row["responses"] = responses
    if fields["majority_vote_accuracy"] is not None:
        row["majority_vote_accuracy"] = fields["majority_vote_accuracy"]
    if fields.get("source_correctness") is not None:
        row["source_correctness"] = fields["source_correctness"]
    for m, value in fields["pass_at"].items():
        row[f"pass_at_{m}"] = value
    return row


def sampling_label(adaptive: dict | None) -> str:
    """How a question was sampled: "fixed k", or "adaptive (looks 16, 32, 64, rule unanimity)" with the
    rule's parameters (``confidence_width`` W, alpha) from a record's ``adaptive`` object."""
    if adaptive is None:
        return "fixed k"
    rule = adaptive["rule"]
    name = (
        rule["name"]
        if rule["name"] == "unanimity"
        else f"{rule['name']} {rule['width']:g} alpha {rule['alpha']:g}"
    )
    return f"adaptive (looks {', '.join(map(str, adaptive['looks']))}, rule {name})"


def sampling_fields(correctness: list[int], adaptive: dict | None) -> dict[str, Any]:
    """The per-question sampling columns, one path for both kinds of run: ``sampling`` (``sampling_label``),
    ``s`` (successes), ``mu_hat`` and ``mu_squared_hat`` (unbiased for mu and mu^2: the adaptive record's
    path-count estimates, or s/n and s(s - 1)/(n(n - 1)) at fixed k, NaN for n = 1), ``looks`` ([n] at fixed
    k) and ``rule`` (the adaptive rule object, None at fixed k); with ``looks`` and ``rule``,
    ``capcal_tasks.adaptive_records.sequential_plan`` gives the plan."""
    n, s = len(correctness), int(sum(correctness))
    if adaptive is not None:
        return {
            "sampling": sampling_label(adaptive),
            "s": s,
            "mu_hat": float(adaptive["mu_hat"]),
            "mu_squared_hat": float(adaptive["mu_squared_hat"]),
            "looks": list(adaptive["looks"]),
            "rule": dict(adaptive["rule"]),
        }
    return {
        "sampling": "fixed k",
        "s": s,
        "mu_hat": s / n,
        "mu_squared_hat": s * (s - 1) / (n * (n - 1)) if n > 1 else float("nan"),
        "looks": [n],
        "rule": None,
    }


def _run_rows(file: SamplesFile, sampling_rows: list[dict], confidence_rows: list[dict]) -> RunRows:
    """A samples file's rows with its kind: "sampling", its confidence kinds joined by "+", or "other" (no
    capcal record). Both kinds in one file, or none in a sampling task's file, raise ``RunFormatError``."""
    if sampling_rows and confidence_rows:
        raise RunFormatError(f"{file.path}: sampling and confidence records in one samples file")
    if not sampling_rows and not confidence_rows and is_sampling_config(file.task_config):
        raise RunFormatError(
            f"{file.path}: no capcal sampling records in the samples file of a sampling task "
            "(empty; the run may have been interrupted)"
        )
    if sampling_rows:
        return RunRows(file, "sampling", sampling_rows)
    if confidence_rows:
        kinds = sorted({row["kind"] for row in confidence_rows})
        return RunRows(file, "+".join(kinds), confidence_rows)
    return RunRows(file, "other", [])
