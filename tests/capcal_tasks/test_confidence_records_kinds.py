"""Tests by kind (issue 49, point 2) of capcal_tasks.confidence.records: each writer's fields against the
argument they come from (distinct values, 0 kept as a value), P(True)'s two branches and their boundary,
the reader's boundaries (confidence 0, log-probability 0, the tolerance) on both sides, the response forms'
``response_correct``, selfcheck's per-index checks, and every refusal message whole. Expected P(True) values
are e^y / (e^y + e^n) written here."""

from __future__ import annotations

import math

import pytest

from capcal_tasks.confidence.records import (
    CONFIDENCE_FIELDS,
    CONFIDENCE_KINDS,
    P_TRUE_TOLERANCE,
    p_true,
    parse_confidence_record,
    ptrue_record,
    selfcheck_record,
    verbalized_record,
)
from capcal_tasks.records import RunFormatError

WHERE = "conf.jsonl:12"
DISAGREES = "disagrees with verbalized_confidence"
NO_QUESTION_ID = "'doc' has no question_id; cannot join it to the per-question table"


def _odds(yes: float, no: float) -> float:
    return math.exp(yes) / (math.exp(yes) + math.exp(no))


# --- writers ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("yes", "no"), [(-0.25, -2.0), (-2.0, -0.25), (-1.5, -1.5), (-3.0, -3.0 - 1e-12), (-3.0 - 1e-12, -3.0)]
)
def test_p_true_is_yes_over_yes_plus_no_on_both_branches(yes, no):
    assert p_true(yes, no) == pytest.approx(_odds(yes, no), rel=1e-12)


def test_p_true_is_stable_where_exp_underflows():
    assert p_true(-1000.0, -1.0) == pytest.approx(
        math.exp(-999.0), rel=1e-9, abs=0.0
    )  # 0.0 if computed plainly
    assert p_true(-1.0, -1000.0) == 1.0
    assert p_true(-1000.0, -1000.0) == 0.5  # e^-1000 / (2 e^-1000): nan if computed plainly


def test_verbalized_record_fields_with_zero_kept_as_a_value():
    assert verbalized_record(0.0) == {"verbalized_confidence": 0.0, "parse_success": 1, "parse_failures": 0}
    assert verbalized_record(None) == {"verbalized_confidence": None, "parse_success": 0, "parse_failures": 1}
    assert verbalized_record(0.375, 0) == {
        "verbalized_confidence": 0.375,
        "parse_success": 1,
        "parse_failures": 0,
        "response_correct": 0,
    }
    assert verbalized_record(None, True)["response_correct"] == 1
    assert type(verbalized_record(None, True)["response_correct"]) is int


def test_ptrue_record_fields_each_from_its_own_argument():
    record = ptrue_record(-0.5, -2.5, 0)
    assert record == {
        "p_true": pytest.approx(_odds(-0.5, -2.5)),
        "logprob_yes": -0.5,
        "logprob_no": -2.5,
        "response_correct": 0,
    }
    assert "response_correct" not in ptrue_record(-1, -2)
    assert type(ptrue_record(-1, -2)["logprob_yes"]) is float


def test_selfcheck_record_fields_each_from_its_own_argument():
    record = selfcheck_record([-0.25, -3.0], [-2.0, -0.125], [True, 0])
    assert record["p_yes"] == pytest.approx([math.exp(-0.25), math.exp(-3.0)])  # not renormalised
    assert record["p_yes_normalized"] == pytest.approx([_odds(-0.25, -2.0), _odds(-3.0, -0.125)])
    assert record["logprob_yes"] == [-0.25, -3.0] and record["logprob_no"] == [-2.0, -0.125]
    assert record["response_correctness"] == [1, 0] and type(record["response_correctness"][0]) is int
    with pytest.raises(ValueError):
        selfcheck_record([-1.0, -2.0], [-1.0], [1, 0])  # lists of different length


def test_the_kinds_and_their_fields_are_the_documented_ones():
    assert CONFIDENCE_KINDS == ("verbalized", "verbalized_rc", "ptrue", "ptrue_rc", "selfcheck")
    for kind in ("verbalized", "ptrue"):
        assert CONFIDENCE_FIELDS[f"{kind}_rc"] == (*CONFIDENCE_FIELDS[kind], "response_correct")
    assert set(verbalized_record(0.5)) == set(CONFIDENCE_FIELDS["verbalized"])
    assert set(ptrue_record(-1, -2, 1)) == set(CONFIDENCE_FIELDS["ptrue_rc"])
    assert set(selfcheck_record([-1], [-2], [1])) == set(CONFIDENCE_FIELDS["selfcheck"])


# --- reader: ids and kinds --------------------------------------------------------------------------------


def _line(**fields) -> dict:
    record = {"doc_id": 7, "question_id": "record/level", "doc": {"question_id": "toy/q7", "doc_id": 99}}
    record.update(fields)
    return record


@pytest.mark.parametrize(
    ("record", "kind", "message"),
    [
        (_line(verbalized_confidence=0.5), "verbal", "unknown confidence kind 'verbal'"),
        ({"doc_id": 7, "doc": {"id": "x"}, "p_true": 0.5}, "ptrue", NO_QUESTION_ID),
        ({"doc_id": 7, "doc": {"question_id": ""}}, "ptrue", NO_QUESTION_ID),
        ({"doc_id": 7, "doc": "toy/q7"}, "ptrue", NO_QUESTION_ID),
        ({"doc": {"question_id": "toy/q7"}}, "ptrue", "missing key(s) doc_id"),
        (_line(doc_id=True), "ptrue", "'doc_id' must be an integer, got True"),
        (_line(doc_id="7"), "ptrue", "'doc_id' must be an integer, got '7'"),
        (_line(doc_id=-1), "ptrue", "'doc_id' must be an integer >= 0, got -1"),
    ],
)  # fmt: skip
def test_ids_and_kind_are_refused_with_the_whole_message(record, kind, message):
    with pytest.raises(RunFormatError) as raised:
        parse_confidence_record(record, kind, WHERE)
    assert str(raised.value) == f"{WHERE}: {message}"


def test_doc_id_zero_is_accepted_and_the_ids_come_from_record_and_doc():
    row = parse_confidence_record(_line(doc_id=0, verbalized_confidence=0.5), "verbalized", WHERE)
    assert (row["doc_id"], row["question_id"]) == (0, "toy/q7")


# --- reader: verbalized -----------------------------------------------------------------------------------


def test_a_verbalized_confidence_of_zero_is_a_parsed_value():
    row = parse_confidence_record(_line(verbalized_confidence=0, parse_success=1), "verbalized", WHERE)
    assert (row["confidence"], row["parse_success"]) == (0.0, 1)
    row = parse_confidence_record(_line(verbalized_confidence=1), "verbalized", WHERE)  # success not logged
    assert (row["confidence"], row["parse_success"]) == (1.0, 1)
    row = parse_confidence_record(_line(verbalized_confidence=None), "verbalized", WHERE)
    assert math.isnan(row["confidence"]) and row["parse_success"] == 0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"verbalized_confidence": 0.5, "parse_success": 0}, f"parse_success=0 {DISAGREES}"),
        ({"verbalized_confidence": None, "parse_success": 1}, f"parse_success=1 {DISAGREES}"),
        (
            {"verbalized_confidence": 0.5, "parse_success": 1, "parse_failures": 1},
            "parse_failures disagrees with parse_success=1",
        ),
        (
            {"verbalized_confidence": None, "parse_failures": 0},
            "parse_failures disagrees with parse_success=0",
        ),
        ({"verbalized_confidence": 0.5, "parse_success": 2}, "parse_success must be 0 or 1, got 2"),
        ({"verbalized_confidence": 1.25}, "verbalized_confidence = 1.25 is not a probability in [0, 1]"),
        ({"verbalized_confidence": "0.5"}, "verbalized_confidence must be a number or null, got '0.5'"),
    ],
)  # fmt: skip
def test_a_wrong_verbalized_record_is_refused_with_the_whole_message(fields, message):
    with pytest.raises(RunFormatError) as raised:
        parse_confidence_record(_line(**fields), "verbalized", WHERE)
    assert str(raised.value) == f"{WHERE}: {message}"


@pytest.mark.parametrize("kind", ["verbalized_rc", "ptrue_rc"])
def test_the_response_forms_read_response_correct_and_the_others_ignore_it(kind):
    fields = (
        {"verbalized_confidence": 0.5}
        if kind == "verbalized_rc"
        else {"p_true": _odds(-0.5, -1.5), "logprob_yes": -0.5, "logprob_no": -1.5}
    )
    assert parse_confidence_record(_line(**fields, response_correct=0), kind, WHERE)["response_correct"] == 0
    assert parse_confidence_record(_line(**fields, response_correct=1), kind, WHERE)["response_correct"] == 1
    plain = kind.removesuffix("_rc")
    assert (
        parse_confidence_record(_line(**fields, response_correct=1), plain, WHERE)["response_correct"] is None
    )
    with pytest.raises(RunFormatError) as raised:
        parse_confidence_record(_line(**fields), kind, WHERE)
    assert str(raised.value) == f"{WHERE}: response_correct must be 0 or 1, got None"


# --- reader: ptrue ----------------------------------------------------------------------------------------


def test_a_log_probability_of_zero_is_accepted_and_above_zero_refused():
    row = parse_confidence_record(
        _line(p_true=_odds(0.0, -2.0), logprob_yes=0, logprob_no=-2.0), "ptrue", WHERE
    )
    assert (row["logprob_yes"], row["logprob_no"]) == (0.0, -2.0)
    assert row["confidence"] == pytest.approx(_odds(0.0, -2.0))
    with pytest.raises(RunFormatError) as raised:
        parse_confidence_record(_line(p_true=0.5, logprob_yes=-1.0, logprob_no=1e-9), "ptrue", WHERE)
    assert str(raised.value) == f"{WHERE}: logprob_no = 1e-09 is a log-probability above 0"


def test_p_true_within_the_tolerance_is_accepted_and_beyond_it_refused():
    exact = 0.5  # logprob_yes = logprob_no
    at = parse_confidence_record(
        _line(p_true=exact + 0.5e-6, logprob_yes=-1.0, logprob_no=-1.0), "ptrue", WHERE
    )
    assert at["confidence"] == exact + 0.5e-6
    assert P_TRUE_TOLERANCE == 1e-6
    beyond = exact + 2e-6
    with pytest.raises(RunFormatError) as raised:
        parse_confidence_record(_line(p_true=beyond, logprob_yes=-1.0, logprob_no=-1.0), "ptrue", WHERE)
    assert str(raised.value) == (
        f"{WHERE}: p_true = {beyond!r} contradicts its log-probabilities "
        "(exp(lp_yes) / (exp(lp_yes) + exp(lp_no)) = 0.5)"
    )


def test_a_ptrue_record_reads_yes_and_no_from_their_own_keys():
    row = parse_confidence_record(
        _line(p_true=_odds(-0.5, -1.5), logprob_yes=-0.5, logprob_no=-1.5), "ptrue", WHERE
    )
    assert (row["logprob_yes"], row["logprob_no"], row["parse_success"]) == (-0.5, -1.5, 1)
    swapped = _odds(-1.5, -0.5)
    with pytest.raises(RunFormatError, match=r"^conf.jsonl:12: p_true = 0\.26"):
        parse_confidence_record(_line(p_true=swapped, logprob_yes=-0.5, logprob_no=-1.5), "ptrue", WHERE)
    # a null P(True) is a failure, its log-probabilities still checked
    failed = parse_confidence_record(_line(p_true=None, logprob_yes=-0.5, logprob_no=-1.5), "ptrue", WHERE)
    assert math.isnan(failed["confidence"]) and failed["parse_success"] == 0
    assert (failed["logprob_yes"], failed["logprob_no"]) == (-0.5, -1.5)
    with pytest.raises(RunFormatError) as raised:
        parse_confidence_record(_line(p_true=None, logprob_yes=0.25, logprob_no=-1.0), "ptrue", WHERE)
    assert str(raised.value) == f"{WHERE}: logprob_yes = 0.25 is a log-probability above 0"


# --- reader: selfcheck ------------------------------------------------------------------------------------


def _selfcheck(**fields) -> dict:
    record = _line(
        p_yes=[math.exp(-0.25), math.exp(-3.0), None],
        p_yes_normalized=[_odds(-0.25, -2.0), _odds(-3.0, -0.125), None],
        logprob_yes=[-0.25, -3.0, -1.0],
        logprob_no=[-2.0, -0.125, -1.0],
        response_correctness=[1, 0, 1],
    )
    record.update(fields)
    return record


def test_selfcheck_lists_are_returned_per_index_and_a_null_is_a_failure():
    row = parse_confidence_record(_selfcheck(), "selfcheck", WHERE)
    assert row["p_yes"][:2] == [math.exp(-0.25), math.exp(-3.0)] and math.isnan(row["p_yes"][2])
    assert row["p_yes_normalized"][:2] == [_odds(-0.25, -2.0), _odds(-3.0, -0.125)]
    assert math.isnan(row["p_yes_normalized"][2])
    assert row["response_correctness"] == [1, 0, 1]
    assert row["parse_success"] == 0  # one null normalised value
    assert math.isnan(row["confidence"]) and math.isnan(row["logprob_yes"])  # no single values for selfcheck
    whole = _selfcheck(p_yes_normalized=[_odds(-0.25, -2.0), _odds(-3.0, -0.125), 0.5])
    assert (
        parse_confidence_record(whole, "selfcheck", WHERE)["parse_success"] == 1
    )  # a null p_yes is no failure


def test_selfcheck_names_the_index_that_contradicts_its_log_probabilities():
    wrong = _selfcheck(p_yes_normalized=[_odds(-0.25, -2.0), 0.75, None])
    with pytest.raises(RunFormatError) as raised:
        parse_confidence_record(wrong, "selfcheck", WHERE)
    assert str(raised.value) == (
        f"{WHERE}: p_yes_normalized[1] = 0.75 contradicts its log-probabilities "
        f"(exp(lp_yes) / (exp(lp_yes) + exp(lp_no)) = {p_true(-3.0, -0.125)!r})"
    )
    # p_yes is checked where the normalised value is null too
    p_yes_wrong = _selfcheck(p_yes=[math.exp(-0.25), math.exp(-3.0), 0.5])
    with pytest.raises(RunFormatError) as raised:
        parse_confidence_record(p_yes_wrong, "selfcheck", WHERE)
    assert str(raised.value) == f"{WHERE}: p_yes[2] = 0.5 is not exp(logprob_yes) = {math.exp(-1.0)!r}"
    above = _selfcheck(logprob_no=[-2.0, -0.125, 0.5])
    with pytest.raises(RunFormatError) as raised:
        parse_confidence_record(above, "selfcheck", WHERE)
    assert str(raised.value) == f"{WHERE}: logprob_no = 0.5 is a log-probability above 0"


def test_selfcheck_without_log_probabilities_checks_the_lists_it_has():
    record = _selfcheck(p_yes_normalized=[0.75, 0.125, 0.5])  # contradicts the log-probabilities...
    for name in ("logprob_yes", "logprob_no"):
        record.pop(name)
    row = parse_confidence_record(record, "selfcheck", WHERE)  # ...which are not logged
    assert row["p_yes_normalized"] == [0.75, 0.125, 0.5]
    only_yes = _selfcheck(p_yes_normalized=[0.75, 0.125, 0.5])
    only_yes.pop("logprob_no")
    assert parse_confidence_record(only_yes, "selfcheck", WHERE)["parse_success"] == 1
    short = _selfcheck(response_correctness=[1, 0])
    short.pop("logprob_yes")
    with pytest.raises(RunFormatError) as raised:
        parse_confidence_record(short, "selfcheck", WHERE)
    assert str(raised.value) == (
        f"{WHERE}: selfcheck lists p_yes, p_yes_normalized, response_correctness, logprob_no differ in length"
    )
    with pytest.raises(RunFormatError) as raised:
        parse_confidence_record(_selfcheck(p_yes=[]), "selfcheck", WHERE)
    assert str(raised.value) == f"{WHERE}: selfcheck field p_yes must be a non-empty list"
