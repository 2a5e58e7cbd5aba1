"""The confidence records' reader (``capcal_tasks.confidence.records.parse_confidence_record``) on selfcheck
records built by the writer (``selfcheck_record``): the fields it returns, and the one-line error naming the
line and the field for each way a record can be wrong."""

from __future__ import annotations

import math

import pytest

from capcal_tasks.confidence.records import (
    P_TRUE_TOLERANCE,
    confidence_kind,
    p_true,
    parse_confidence_record,
    ptrue_record,
    selfcheck_record,
    verbalized_record,
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


def test_confidence_kind_names_each_record_by_its_fields():
    """Each writer's record is its kind, and a sampling line none; a selfcheck line that lacks one of its two
    probability lists is still a selfcheck line, so the reader names the missing list instead of skipping the
    line as another task's."""
    selfcheck = _selfcheck()
    without_p_yes = {name: value for name, value in selfcheck.items() if name != "p_yes"}
    without_normalized = {name: value for name, value in selfcheck.items() if name != "p_yes_normalized"}
    records = [
        selfcheck,
        without_p_yes,
        without_normalized,
        verbalized_record(0.5),
        verbalized_record(None, 1),
        ptrue_record(math.log(0.5), math.log(0.5)),
        ptrue_record(math.log(0.5), math.log(0.5), 0),
        {"doc_id": 0, "correctness": [1, 0]},
    ]
    assert [confidence_kind(record) for record in records] == [
        "selfcheck",
        "selfcheck",
        "selfcheck",
        "verbalized",
        "verbalized_rc",
        "ptrue",
        "ptrue_rc",
        None,
    ]
    with pytest.raises(RunFormatError) as raised:
        parse_confidence_record(without_p_yes, confidence_kind(without_p_yes), WHERE)
    assert str(raised.value) == f"{WHERE}: selfcheck field p_yes must be a non-empty list"


def _ptrue(**fields) -> dict:
    """A P(True) line (P(True) = 0.2) as the task writes it, with ``fields`` replaced."""
    record = {"doc_id": 1, "doc": {"question_id": "toy/1"}}
    record.update(ptrue_record(math.log(0.2), math.log(0.8)))
    record.update(fields)
    return record


def test_a_ptrue_record_as_written_is_read_back():
    row = parse_confidence_record(_ptrue(), "ptrue", WHERE)
    assert row["confidence"] == pytest.approx(0.2, abs=1e-15) and row["parse_success"] == 1
    assert (row["logprob_yes"], row["logprob_no"]) == (math.log(0.2), math.log(0.8))
    assert (row["kind"], row["doc_id"], row["question_id"], row["p_yes"]) == ("ptrue", 1, "toy/1", None)
    failed = parse_confidence_record(_ptrue(p_true=None), "ptrue", WHERE)
    assert math.isnan(failed["confidence"]) and failed["parse_success"] == 0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"p_true": 1.5}, "p_true = 1.5 is not a probability in [0, 1]"),
        ({"p_true": "0.2"}, "p_true must be a number or null, got '0.2'"),
        ({"p_true": True}, "p_true must be a number or null, got True"),
        ({"p_true": 0.5}, "p_true = 0.5 contradicts its log-probabilities (exp(lp_yes) / (exp(lp_yes) + "),
        ({"logprob_yes": 0.5}, "logprob_yes = 0.5 is a log-probability above 0"),
    ],
)
def test_a_wrong_ptrue_record_is_refused_naming_the_field(fields, message):
    """Each check names the field as the record spells it (p_true, logprob_yes) after the line."""
    with pytest.raises(RunFormatError) as raised:
        parse_confidence_record(_ptrue(**fields), "ptrue", WHERE)
    assert str(raised.value).startswith(f"{WHERE}: {message}")


def test_a_ptrue_record_without_its_log_probabilities_is_refused():
    record = _ptrue()
    del record["logprob_no"]
    with pytest.raises(RunFormatError) as raised:
        parse_confidence_record(record, "ptrue", WHERE)
    assert str(raised.value) == f"{WHERE}: missing key(s) logprob_no (P(True) is checked against them)"
