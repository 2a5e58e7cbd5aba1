"""The confidence records' reader (``capcal_tasks.confidence.records.parse_confidence_record``) on selfcheck
records built by the writer (``selfcheck_record``): the fields it returns, and the one-line error naming the
line and the field for each way a record can be wrong."""

from __future__ import annotations

import math

import pytest

from capcal_tasks.confidence.records import (
    P_TRUE_TOLERANCE,
    p_true,
    parse_confidence_record,
    selfcheck_record,
)
from capcal_tasks.records import RunFormatError

WHERE = "samples.jsonl:3"


def _selfcheck(**fields) -> dict:
    """A selfcheck line over two responses as the task writes it, with ``fields`` replaced."""
    record = {"doc_id": 0, "doc": {"question_id": "toy/0"}}
    record.update(selfcheck_record([math.log(0.5), math.log(0.25)], [math.log(0.5), math.log(0.75)], [1, 0]))
    record.update(fields)
    return record


def test_a_selfcheck_record_as_written_is_read_back():
    row = parse_confidence_record(_selfcheck(), "selfcheck", WHERE)
    assert row["p_yes"] == pytest.approx([0.5, 0.25], abs=1e-15)
    assert row["p_yes_normalized"] == pytest.approx([0.5, 0.25], abs=1e-15)
    assert row["response_correctness"] == [1, 0] and row["parse_success"] == 1
    assert (row["doc_id"], row["question_id"], row["kind"]) == (0, "toy/0", "selfcheck")


def test_a_verbalized_record_returns_every_field_with_the_unused_ones_empty():
    """A verbalized record's row has every documented key: its value and success, and NaN / None for the
    log-probabilities and selfcheck lists it does not carry (a misspelt key would be a missing column)."""
    record = {"doc_id": 4, "doc": {"question_id": "toy/4"}, "verbalized_confidence": 0.75, "parse_success": 1}
    row = parse_confidence_record(record, "verbalized", WHERE)
    assert list(row) == [
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
    assert (row["kind"], row["doc_id"], row["question_id"]) == ("verbalized", 4, "toy/4")
    assert (row["confidence"], row["parse_success"], row["response_correct"]) == (0.75, 1, None)
    assert math.isnan(row["logprob_yes"]) and math.isnan(row["logprob_no"])
    assert (row["p_yes"], row["p_yes_normalized"], row["response_correctness"]) == (None, None, None)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"p_yes": [0.5, 1.5]}, "p_yes = 1.5 is not a probability in [0, 1]"),
        ({"p_yes_normalized": [0.5, -0.5]}, "p_yes_normalized = -0.5 is not a probability in [0, 1]"),
        ({"response_correctness": [1, 2]}, "response_correctness must be 0 or 1, got 2"),
        ({"response_correctness": [True, 0]}, "response_correctness must be 0 or 1, got True"),
        ({"p_yes": [0.5, 0.9]}, "p_yes[1] = 0.9 is not exp(logprob_yes) = 0.25"),
        (
            {"logprob_yes": [math.log(0.5)]},
            "selfcheck lists p_yes, p_yes_normalized, response_correctness, logprob_yes, logprob_no "
            "differ in length",
        ),
        ({"logprob_no": "x"}, "selfcheck field logprob_no must be a non-empty list"),
    ],
)
def test_a_wrong_selfcheck_record_is_refused_naming_the_field(fields, message):
    """Each check names the field as the record spells it (p_yes, response_correctness, the logged
    log-probabilities) after the line, so the message points at what to fix."""
    with pytest.raises(RunFormatError) as raised:
        parse_confidence_record(_selfcheck(**fields), "selfcheck", WHERE)
    assert str(raised.value) == f"{WHERE}: {message}"


def test_p_yes_within_the_tolerance_of_exp_logprob_yes_is_accepted():
    """p_yes may differ from exp(logprob_yes) by up to P_TRUE_TOLERANCE, that difference included (a P(Yes)
    of exactly 1e-6 beside exp(-69) = 1e-30 differs by exactly the tolerance in float arithmetic)."""
    yes, no = -69.0, -1e-3
    assert abs(P_TRUE_TOLERANCE - math.exp(yes)) == P_TRUE_TOLERANCE
    record = _selfcheck(
        p_yes=[P_TRUE_TOLERANCE],
        p_yes_normalized=[p_true(yes, no)],
        logprob_yes=[yes],
        logprob_no=[no],
        response_correctness=[0],
    )
    assert parse_confidence_record(record, "selfcheck", WHERE)["p_yes"] == [P_TRUE_TOLERANCE]
    with pytest.raises(RunFormatError, match=r"p_yes\[0\] = 2e-06 is not exp\(logprob_yes\)"):
        parse_confidence_record({**record, "p_yes": [2 * P_TRUE_TOLERANCE]}, "selfcheck", WHERE)
