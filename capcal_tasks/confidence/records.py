"""The confidence record: the per-question fields capcal's confidence tasks log, written and read here.

The tasks' ``process_results`` (``verbalized``, ``ptrue``, ``selfcheck``) build their records with
:func:`verbalized_record`, :func:`ptrue_record` and :func:`selfcheck_record`; the reader
(``analysis.runs``, ``analysis.estimators.elicited``) validates them with :func:`parse_confidence_record`.
A record's kind is recognised by its fields:

========================  ==========================================================================
kind                      fields
========================  ==========================================================================
``verbalized``            ``verbalized_confidence`` (in [0, 1], null on a parse failure), ``parse_success``
                          (0/1, = 1 exactly when the confidence is not null), ``parse_failures`` (1 - success)
``verbalized_rc``         as ``verbalized`` plus ``response_correct`` (0/1 of the scored, first response)
``ptrue``                 ``p_true`` in [0, 1] (null = failure), ``logprob_yes``, ``logprob_no`` (<= 0);
                          p_true = exp(lp_yes) / (exp(lp_yes) + exp(lp_no)) within 1e-6
``ptrue_rc``              as ``ptrue`` plus ``response_correct``
``selfcheck``             per-response lists ``p_yes`` (= exp(lp_yes)), ``p_yes_normalized`` (as P(True)),
                          ``logprob_yes``, ``logprob_no``, ``response_correctness`` (0/1); null entries are
                          failures
========================  ==========================================================================

Non-finite numbers never reach this module (``capcal_tasks.records.strict_json`` rejects them).
"""

from __future__ import annotations

import math
from typing import Any

from capcal_tasks.records import RunFormatError, check_binary, check_count, check_finite, check_probability

__all__ = [
    "CONFIDENCE_FIELDS",
    "CONFIDENCE_KINDS",
    "P_TRUE_TOLERANCE",
    "confidence_kind",
    "p_true",
    "parse_confidence_record",
    "ptrue_record",
    "selfcheck_record",
    "verbalized_record",
]

CONFIDENCE_KINDS = ("verbalized", "verbalized_rc", "ptrue", "ptrue_rc", "selfcheck")
CONFIDENCE_FIELDS = {
    "verbalized": ("verbalized_confidence", "parse_success", "parse_failures"),
    "verbalized_rc": ("verbalized_confidence", "parse_success", "parse_failures", "response_correct"),
    "ptrue": ("p_true", "logprob_yes", "logprob_no"),
    "ptrue_rc": ("p_true", "logprob_yes", "logprob_no", "response_correct"),
    "selfcheck": ("p_yes", "p_yes_normalized", "logprob_yes", "logprob_no", "response_correctness"),
}
P_TRUE_TOLERANCE = 1e-6


def p_true(logprob_yes: float, logprob_no: float) -> float:
    """exp(lp_Yes) / (exp(lp_Yes) + exp(lp_No)) = 1 / (1 + exp(lp_No - lp_Yes)), computed stably."""
    difference = logprob_no - logprob_yes
    if difference > 0:
        odds = math.exp(-difference)
        return odds / (1.0 + odds)
    return 1.0 / (1.0 + math.exp(difference))


def verbalized_record(confidence: float | None, response_correct: int | None = None) -> dict:
    """A verbalized-confidence record: the parsed confidence (None = parse failure, logged as null and
    counted) and, for the response form, the scored response's correctness."""
    success = int(confidence is not None)
    record: dict = {
        "verbalized_confidence": confidence,
        "parse_success": success,
        "parse_failures": 1 - success,
    }
    if response_correct is not None:
        record["response_correct"] = int(response_correct)
    return record


def ptrue_record(logprob_yes: float, logprob_no: float, response_correct: int | None = None) -> dict:
    """A P(True) record from the log-likelihoods of "Yes" and "No"."""
    record: dict = {
        "p_true": p_true(logprob_yes, logprob_no),
        "logprob_yes": float(logprob_yes),
        "logprob_no": float(logprob_no),
    }
    if response_correct is not None:
        record["response_correct"] = int(response_correct)
    return record


def selfcheck_record(logprob_yes: list[float], logprob_no: list[float], correctness: list[int]) -> dict:
    """A Self-Calibration record over k responses: p_yes = exp(lp_Yes) (not renormalised), p_yes_normalized
    = P(True) per response, the log-likelihoods, and each response's correctness in the earlier run."""
    yes, no = [float(v) for v in logprob_yes], [float(v) for v in logprob_no]
    return {
        "p_yes": [math.exp(v) for v in yes],
        "p_yes_normalized": [p_true(a, b) for a, b in zip(yes, no, strict=True)],
        "logprob_yes": yes,
        "logprob_no": no,
        "response_correctness": [int(z) for z in correctness],
    }


def confidence_kind(record: dict) -> str | None:
    """The kind of a confidence record by its fields, or None for a line of another task."""
    if "p_yes_normalized" in record or "p_yes" in record:
        return "selfcheck"
    if "verbalized_confidence" in record:
        return "verbalized_rc" if "response_correct" in record else "verbalized"
    if "p_true" in record:
        return "ptrue_rc" if "response_correct" in record else "ptrue"
    return None


def _probability_or_nan(value: Any, where: str, name: str) -> float:
    """A probability, or NaN for null (a failure that is counted, never replaced)."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RunFormatError(f"{where}: {name} must be a number or null, got {value!r}")
    return check_probability(value, where, name)


def _logprob(value: Any, where: str, name: str) -> float:
    value = check_finite(value, where, name)
    if value > 0:
        raise RunFormatError(f"{where}: {name} = {value!r} is a log-probability above 0")
    return value


def _check_p_true(value: float, logprob_yes: Any, logprob_no: Any, where: str, name: str) -> tuple:
    yes, no = _logprob(logprob_yes, where, "logprob_yes"), _logprob(logprob_no, where, "logprob_no")
    if not math.isnan(value):
        implied = p_true(yes, no)
        if abs(value - implied) > P_TRUE_TOLERANCE:
            raise RunFormatError(
                f"{where}: {name} = {value!r} contradicts its log-probabilities "
                f"(exp(lp_yes) / (exp(lp_yes) + exp(lp_no)) = {implied!r})"
            )
    return yes, no


def _list(record: dict, name: str, where: str) -> list:
    value = record.get(name)
    if not isinstance(value, list) or not value:
        raise RunFormatError(f"{where}: selfcheck field {name} must be a non-empty list")
    return value


def parse_confidence_record(record: dict, kind: str, where: str) -> dict:
    """The validated fields of one confidence record of ``kind`` (see the module docstring).

    Returns ``doc_id``, ``question_id``, ``confidence`` (the verbalized value or P(True); NaN on a failure),
    ``parse_success``, ``response_correct`` (response forms), ``logprob_yes`` / ``logprob_no`` and, for
    selfcheck, the lists ``p_yes``, ``p_yes_normalized``, ``response_correctness``. Raises ``RunFormatError``
    naming ``where`` for a missing question id, a wrong type or range, lists that differ in length, a
    parse_success that contradicts the value, or a P(True) that contradicts its log-probabilities.
    """
    if kind not in CONFIDENCE_KINDS:
        raise RunFormatError(f"{where}: unknown confidence kind {kind!r}")
    doc_id, question_id = _doc_id_and_question_id(record, where)
    row: dict[str, Any] = {
        "kind": kind,
        "doc_id": doc_id,
        "question_id": question_id,
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
        row.update(_verbalized_fields(record, where))
    elif kind in ("ptrue", "ptrue_rc"):
        row.update(_ptrue_fields(record, where))
    else:
        row.update(_selfcheck_fields(record, where))
    if kind.endswith("_rc"):
        row["response_correct"] = check_binary(record.get("response_correct"), where, "response_correct")
    return row


def _doc_id_and_question_id(record: dict, where: str) -> tuple[int, str]:
    """The record's ``doc_id`` (an integer >= 0) and its doc's ``question_id`` (non-empty text), which joins
    it to the per-question table."""
    doc = record.get("doc")
    if not isinstance(doc, dict) or not isinstance(doc.get("question_id"), str) or not doc["question_id"]:
        raise RunFormatError(f"{where}: 'doc' has no question_id; cannot join it to the per-question table")
    if "doc_id" not in record:
        raise RunFormatError(f"{where}: missing key(s) doc_id")
    if isinstance(record["doc_id"], bool) or not isinstance(record["doc_id"], int):
        raise RunFormatError(f"{where}: 'doc_id' must be an integer, got {record['doc_id']!r}")
    return check_count(record["doc_id"], where, "'doc_id'"), doc["question_id"]


def _verbalized_fields(record: dict, where: str) -> dict[str, Any]:
    """``confidence`` and ``parse_success`` of a verbalized record: success = 1 exactly when the confidence
    is not null, and ``parse_failures`` (when logged) = 1 - success."""
    confidence = _probability_or_nan(record["verbalized_confidence"], where, "verbalized_confidence")
    success = check_binary(
        record.get("parse_success", int(not math.isnan(confidence))), where, "parse_success"
    )
    if success != int(not math.isnan(confidence)):
        raise RunFormatError(f"{where}: parse_success={success} disagrees with verbalized_confidence")
    if "parse_failures" in record and check_binary(record["parse_failures"], where, "parse_failures") != (
        1 - success
    ):
        raise RunFormatError(f"{where}: parse_failures disagrees with parse_success={success}")
    return {"confidence": confidence, "parse_success": success}


def _ptrue_fields(record: dict, where: str) -> dict[str, Any]:
    """``confidence`` (P(True), NaN when null), ``parse_success`` and the log-probabilities of a P(True)
    record, P(True) checked against them."""
    confidence = _probability_or_nan(record["p_true"], where, "p_true")
    for name in ("logprob_yes", "logprob_no"):
        if name not in record:
            raise RunFormatError(f"{where}: missing key(s) {name} (P(True) is checked against them)")
    yes, no = _check_p_true(confidence, record["logprob_yes"], record["logprob_no"], where, "p_true")
    return {
        "confidence": confidence,
        "parse_success": int(not math.isnan(confidence)),
        "logprob_yes": yes,
        "logprob_no": no,
    }


def _selfcheck_fields(record: dict, where: str) -> dict[str, Any]:
    """The per-response lists of a selfcheck record (equal lengths; p_yes_normalized checked against the
    log-probabilities and p_yes = exp(logprob_yes) when they are logged) and ``parse_success`` (no NaN)."""
    names = ["p_yes", "p_yes_normalized", "response_correctness"]
    names += [name for name in ("logprob_yes", "logprob_no") if name in record]
    lists = {name: _list(record, name, where) for name in names}
    if len({len(value) for value in lists.values()}) != 1:
        raise RunFormatError(f"{where}: selfcheck lists {', '.join(names)} differ in length")
    p_yes = [_probability_or_nan(v, where, "p_yes") for v in lists["p_yes"]]
    p_norm = [_probability_or_nan(v, where, "p_yes_normalized") for v in lists["p_yes_normalized"]]
    correctness = [check_binary(v, where, "response_correctness") for v in lists["response_correctness"]]
    if "logprob_yes" in lists and "logprob_no" in lists:
        for index, (yes, no) in enumerate(zip(lists["logprob_yes"], lists["logprob_no"], strict=True)):
            yes, no = _check_p_true(p_norm[index], yes, no, where, f"p_yes_normalized[{index}]")
            if not math.isnan(p_yes[index]) and abs(p_yes[index] - math.exp(yes)) > P_TRUE_TOLERANCE:
                raise RunFormatError(
                    f"{where}: p_yes[{index}] = {p_yes[index]!r} is not exp(logprob_yes) = {math.exp(yes)!r}"
                )
    return {
        "p_yes": p_yes,
        "p_yes_normalized": p_norm,
        "response_correctness": correctness,
        "parse_success": int(not any(math.isnan(v) for v in p_norm)),
    }
