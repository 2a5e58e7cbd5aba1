"""Tests by kind (issue 49, point 2) of capcal_tasks.sampling: every field ``parse_sampling_record`` returns
against the record field it comes from (distinct values throughout), the question id's three sources, the
pass@ levels' cap at 1024 on both sides, aggregations weighted by response (not by question), the majority
vote's ties and max (not min), the keywords ``score_responses`` passes on, and whole messages. Expected
values are hand constants or C(n, k) sums written here."""

from __future__ import annotations

import math
from math import comb

import pytest

from capcal_tasks.records import RunFormatError
from capcal_tasks.sampling import (
    extraction_rate,
    is_sampling_config,
    is_sampling_record,
    majority_vote_accuracy,
    parse_sampling_record,
    pass_at_k_levels,
    recheck_sampling_record,
    response_accuracy,
    sampling_record,
    score_responses,
    task_checker,
    task_process_results,
    task_version,
)

# --- pass_at_k_levels, majority vote, aggregations ---------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "levels"),
    [
        (0, []),
        (1, [1]),
        (2, [1, 2]),
        (3, [1, 2]),
        (1023, [2**i for i in range(10)]),
        (1024, [2**i for i in range(11)]),
        (2048, [2**i for i in range(11)]),  # capped at 1024
    ],
)
def test_pass_at_k_levels_are_powers_of_two_up_to_n_and_at_most_1024(n, levels):
    assert pass_at_k_levels(n) == levels


def test_majority_vote_takes_the_most_votes_and_averages_a_tie_over_the_tied_answers():
    # "w" has 3 votes and is wrong, "r" has 1 and is right: the vote is wrong (min would pick "r")
    assert majority_vote_accuracy(["r", "w", "w", "w"], [1, 0, 0, 0]) == 0.0
    assert majority_vote_accuracy(["w", "r", "r", "r"], [0, 1, 1, 1]) == 1.0
    # a three-way tie, one of the tied answers right: 1/3, whatever the order
    assert majority_vote_accuracy(["a", "b", "c"], [0, 1, 0]) == pytest.approx(1 / 3)
    assert majority_vote_accuracy(["c", "a", "b"], [0, 0, 1]) == pytest.approx(1 / 3)
    # a tie of two among three answers: the loser ("z", right) counts for nothing
    assert majority_vote_accuracy(["x", "y", "x", "y", "z"], [1, 0, 1, 0, 1]) == 0.5
    # None never wins, even with the most responses
    assert majority_vote_accuracy([None, None, None, "w"], [0, 0, 0, 0]) == 0.0


def test_response_accuracy_and_extraction_rate_weight_each_response_not_each_question():
    assert response_accuracy([[1, 1, 1, 1], [0]]) == pytest.approx(0.8)  # per question: 0.5
    assert extraction_rate([["a", "b", "c", None], [None]]) == pytest.approx(0.6)  # per question: 0.375
    assert math.isnan(response_accuracy([])) and math.isnan(response_accuracy([[], []]))
    assert math.isnan(extraction_rate([[]]))
    assert extraction_rate([["", "0"]]) == 1.0  # an empty text is an answer; only None is none


def test_is_sampling_config_and_record_read_their_own_keys():
    assert is_sampling_config({"metadata": {"capcal_task": "sampling"}})
    assert not is_sampling_config({"metadata": {"capcal_task": "ptrue"}, "capcal_task": "sampling"})
    assert not is_sampling_config({"metadata": None})
    assert is_sampling_record({"correctness": []})
    assert not is_sampling_record({"extracted_answers": [], "expected_accuracy": 1.0})


# --- sampling_record and score_responses ------------------------------------------------------------------


def test_sampling_record_votes_over_the_classes_given_not_the_extracted_answers():
    # extracted answers all differ; classes put the two wrong ones together: they win 2 to 1
    record = sampling_record(["7", "3.0", "3"], [1, 0, 0], ["seven", "three", "three"])
    assert record["majority_vote_accuracy"] == 0.0
    assert record["extracted_answers"] == ["7", "3.0", "3"] and record["correctness"] == [1, 0, 0]
    assert record["n_samples"] == 3 and record["expected_accuracy"] == pytest.approx(1 / 3)
    # pass@m = 1 - C(n - c, m) / C(n, m), n 3, c 1
    assert record["pass_at_1"] == pytest.approx(1 / 3) and record["pass_at_2"] == pytest.approx(1 - 1 / 3)
    assert "pass_at_4" not in record
    assert "majority_vote_accuracy" not in sampling_record(["7"], [1], None)


def test_score_responses_passes_the_prompt_to_echo_removal_and_each_function_its_own_input():
    prompt = "What is 6 + 1? Answer with a number."
    seen: dict[str, list] = {"extract": [], "judge": [], "class": []}

    def extract(response):
        seen["extract"].append(response)
        return response.split()[-1] if response.strip() else None

    def judge(answer):
        seen["judge"].append(answer)
        return answer == "7"

    def answer_class(answer):
        seen["class"].append(answer)
        return None if answer is None else f"class-{answer}"

    record = score_responses(
        [f"{prompt} so 7", "  ", "it is 8"], extract, judge, answer_class=answer_class, prompt=prompt
    )
    assert seen["extract"] == ["  so 7", "  ", "it is 8"]  # the echoed prompt removed, nothing else
    assert seen["judge"] == ["7", None, "8"] and seen["class"] == ["7", None, "8"]
    assert record["extracted_answers"] == ["7", None, "8"] and record["correctness"] == [1, 0, 0]
    assert record["majority_vote_accuracy"] == 0.5  # class-7 against class-8, one vote each
    # without the prompt, the echo stays in the response extract sees
    seen["extract"].clear()
    score_responses([f"{prompt} so 7"], extract, judge)
    assert seen["extract"] == [f"{prompt} so 7"]


def test_score_responses_refuses_a_string_or_no_responses_with_the_whole_message():
    for bad in ([], "one response"):
        with pytest.raises(ValueError) as raised:
            score_responses(bad, extract=str, judge=bool)
        assert str(raised.value) == (
            "score_responses: expected a non-empty list of responses (is the keep-all filter set?)"
        )
    assert score_responses(["x"], extract=str, judge=bool)["n_samples"] == 1  # one response is enough


# --- parse_sampling_record -------------------------------------------------------------------------------


def _line(**changes) -> dict:
    """A record of 4 responses, 2 correct ("7"), every field distinct."""
    line = {
        "doc_id": 11,
        "doc_hash": "abc123",
        "doc": {"question_id": "toy/q-5", "question": "six plus one"},
        "resps": [["so 7", "it is 7", "maybe 3", "no idea"]],
        "correctness": [1, 1, 0, 0],
        "extracted_answers": ["7", "7", "3", None],
        "n_samples": 4,
        "expected_accuracy": 0.5,
        "pass_at_1": 0.5,
        "pass_at_2": 1 - comb(2, 2) / comb(4, 2),
        "pass_at_4": 1.0,
        "majority_vote_accuracy": 1.0,
    }
    line.update(changes)
    return line


def test_parse_sampling_record_returns_each_field_from_its_own_source():
    fields = parse_sampling_record(_line(), "f.jsonl:3", "toy_task")
    assert fields == {
        "doc_id": 11,
        "doc": {"question_id": "toy/q-5", "question": "six plus one"},
        "question_id": "toy/q-5",
        "responses": ["so 7", "it is 7", "maybe 3", "no idea"],
        "null_responses": 0,
        "extracted_answers": ["7", "7", "3", None],
        "correctness": [1, 1, 0, 0],
        "n": 4,
        "expected_accuracy": 0.5,
        "majority_vote_accuracy": 1.0,
        "pass_at": {1: 0.5, 2: 5 / 6, 4: 1.0},
        "source_correctness": None,
        "adaptive": None,
    }


def test_the_question_id_comes_from_the_doc_else_the_doc_hash_else_the_doc_id():
    assert parse_sampling_record(_line(), "f:1", "toy_task")["question_id"] == "toy/q-5"
    no_id = _line(doc={"question": "six plus one"})
    assert parse_sampling_record(no_id, "f:1", "toy_task")["question_id"] == "toy_task/doc-abc123"
    no_hash = _line(doc={"question": "six plus one"}, doc_hash="")
    assert parse_sampling_record(no_hash, "f:1", "toy_task")["question_id"] == "toy_task/doc-11"
    no_hash.pop("doc_hash")
    assert parse_sampling_record(no_hash, "f:1", "toy_task")["question_id"] == "toy_task/doc-11"


def test_pass_at_is_returned_sorted_by_level_and_majority_none_when_not_logged():
    line = _line()
    reordered = {key: line[key] for key in line if not key.startswith("pass_at_")}
    reordered.update(pass_at_4=1.0, pass_at_1=0.5)  # logged out of order, pass_at_2 left out
    reordered.pop("majority_vote_accuracy")
    fields = parse_sampling_record(reordered, "f:1", "t")
    assert list(fields["pass_at"].items()) == [(1, 0.5), (4, 1.0)]
    assert fields["majority_vote_accuracy"] is None


def test_null_responses_are_refused_unless_allowed_and_then_counted():
    line = _line(resps=[["so 7", None, "maybe 3", None]], correctness=[1, 0, 0, 0])
    line.update(extracted_answers=["7", None, "3", None], expected_accuracy=0.25, pass_at_1=0.25)
    line.update(pass_at_2=0.5, majority_vote_accuracy=0.5)
    with pytest.raises(RunFormatError) as raised:
        parse_sampling_record(line, "f:2", "t")
    assert str(raised.value) == (
        "f:2: response 2 is null (a missing response, never read as text); the run is incomplete: re-run it "
        "or check it with capcal check"
    )
    fields = parse_sampling_record(line, "f:2", "t", allow_null_responses=True)
    assert fields["null_responses"] == 2 and fields["responses"] == ["so 7", None, "maybe 3", None]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"doc_id": -1}, "'doc_id' must be an integer >= 0, got -1"),
        ({"doc": ["x"]}, "'doc' must be a JSON object, got list"),
        ({"doc": {"question_id": ""}}, "doc question_id must be non-empty text, got ''"),
        ({"resps": ["so 7"]}, "'resps' must hold one list of k responses"),
        ({"resps": [["so 7", 7, "maybe 3", "no idea"]]}, "response 2 must be text, got int"),
        (
            {"correctness": [1, 1, 0, 2]},
            "'correctness' entries (a list of 0/1 integers) must be 0 or 1, got 2",
        ),
        ({"extracted_answers": ["7", "7", 3, None]}, "extracted answer 3 must be text or null, got int"),
        (
            {"extracted_answers": ["7", "7", "3"]},
            "4 responses, 4 correctness values and 3 extracted answers; they must be equal and non-zero",
        ),
        (
            {"extracted_answers": ["7", "7", "3", "7"]},
            "the extracted answer '7' is judged both correct and incorrect (response 4); the correctness "
            "vector contradicts the extracted answers",
        ),
        (
            {"correctness": [1, 1, 0, 1], "extracted_answers": ["7", "7", "3", None]},
            "response 4 has no extracted answer but is marked correct",
        ),
        ({"n_samples": 5}, "n_samples 5 is not the 4 responses logged"),
        ({"n_samples": 3}, "n_samples 3 is not the 4 responses logged"),
        (
            {"correctness": [1] * 4, "extracted_answers": ["7"] * 4, "expected_accuracy": True},
            "expected_accuracy True is not the mean of its correctness vector (4/4)",
        ),
        (
            {
                "correctness": [1, 0, 0, 0],
                "extracted_answers": ["7", "3", "3", None],
                "expected_accuracy": 0.25,
                "pass_at_1": 0.25,
                "pass_at_2": 0.4,
            },
            "pass_at_2 = 0.4, but the correctness vector (1 of 4 correct) implies 0.5",
        ),
        (
            {"expected_accuracy": 0.75},
            "expected_accuracy 0.75 is not the mean of its correctness vector (2/4)",
        ),
        (
            {"expected_accuracy": True},
            "expected_accuracy True is not the mean of its correctness vector (2/4)",
        ),
        (
            {"pass_at_2": 0.5},
            f"pass_at_2 = 0.5, but the correctness vector (2 of 4 correct) implies {1 - 1 / 6!r}",
        ),
        ({"pass_at_8": 1.0}, "pass_at_8 is not a pass@m level for k = 4 samples (1 <= m <= k)"),
        ({"pass_at_0": 1.0}, "pass_at_0 is not a pass@m level for k = 4 samples (1 <= m <= k)"),
        ({"majority_vote_accuracy": 1.5}, "majority_vote_accuracy = 1.5 is not in [0, 1]"),
        ({"source_correctness": [1, 0, 1]}, "source_correctness has 3 values, not 4"),
    ],
)
def test_parse_sampling_record_messages_whole(changes, message):
    with pytest.raises(RunFormatError) as raised:
        parse_sampling_record(_line(**changes), "run.jsonl:8", "t")
    assert str(raised.value) == f"run.jsonl:8: {message}"


def test_missing_keys_are_named_in_order():
    line = _line()
    for key in ("resps", "doc_id", "expected_accuracy"):
        line.pop(key)
    with pytest.raises(RunFormatError) as raised:
        parse_sampling_record(line, "f:1", "t")
    assert str(raised.value) == "f:1: missing key(s) doc_id, resps, expected_accuracy"


def test_pass_at_levels_one_and_k_are_accepted():
    line = _line()
    line.pop("pass_at_2")
    assert parse_sampling_record(line, "f:1", "t")["pass_at"] == {1: 0.5, 4: 1.0}


def test_source_correctness_is_returned_as_logged():
    fields = parse_sampling_record(_line(source_correctness=[0, 1, 1, 0]), "f:1", "t")
    assert fields["source_correctness"] == [0, 1, 1, 0] and fields["correctness"] == [1, 1, 0, 0]


def test_exact_alias_fields_are_checked_against_correctness_and_their_mean():
    ok = _line(exact_alias_correctness=[1, 0, 0, 0], exact_alias_expected_accuracy=0.25)
    parse_sampling_record(ok, "f:1", "t")
    for changes, message in (
        (
            {"exact_alias_correctness": [0, 0, 1, 0], "exact_alias_expected_accuracy": 0.25},
            "an exact alias match is not marked correct in 'correctness'",
        ),
        (
            {"exact_alias_correctness": [1, 0, 0], "exact_alias_expected_accuracy": 0.25},
            "exact_alias_correctness must be a list of 4 0/1 values",
        ),
        (
            {"exact_alias_correctness": [1, 1, 0, 0], "exact_alias_expected_accuracy": 0.25},
            "exact_alias_expected_accuracy 0.25 is not the mean of exact_alias_correctness",
        ),
        (
            {"exact_alias_correctness": [1, 0, 0, 0]},
            "exact_alias_expected_accuracy None is not the mean of exact_alias_correctness",
        ),
    ):
        with pytest.raises(RunFormatError) as raised:
            parse_sampling_record(_line(**changes), "f:4", "t")
        assert str(raised.value) == f"f:4: {message}"


# --- majority vote check ------------------------------------------------------------------------------------


def _vote_line(extracted, correctness, majority):
    n, c = len(correctness), sum(correctness)
    line = {
        "doc_id": 0,
        "doc": {"question_id": "q"},
        "resps": [[f"r{i}" for i in range(n)]],
        "correctness": correctness,
        "extracted_answers": extracted,
        "expected_accuracy": c / n,
        "majority_vote_accuracy": majority,
    }
    return line


@pytest.mark.parametrize(
    ("extracted", "correctness", "majority", "by_text"),
    [
        # by text: "w" 2 votes against "a" 1 and "b" 1: 0; a grouping of "a" and "b" (both right) ties: 1/2
        (["a", "b", "w", "w"], [1, 1, 0, 0], 0.0, None),
        (["a", "b", "w", "w"], [1, 1, 0, 0], 0.5, None),
        (["a", "b", "w", "w"], [1, 1, 0, 0], 1.0, None),  # "a" and "b" one class, plus a wrong one dropped
        # value 0 needs the wrong answers to outnumber the largest right group: 1 wrong vs 2 "a" -> refused
        (["a", "a", "w"], [1, 1, 0], 0.0, 1.0),
        # 2 wrong vs 2 "a": a tie, so 0 is not possible but 1/2 is
        (["a", "a", "w", "v"], [1, 1, 0, 0], 0.0, 1.0),
        (["a", "a", "w", "v"], [1, 1, 0, 0], 0.5, None),
        # 1 wrong vs 2 "a": the wrong answers are fewer than the group, no tie: 1/2 refused
        (["a", "a", "w"], [1, 1, 0], 0.5, 1.0),
        # 1 with no right answer at all: refused; 0 then always possible
        (["w", "v"], [0, 0], 1.0, 0.0),
        (["w", "v"], [0, 0], 0.0, None),
        # 1/3 needs three tied classes: two distinct answers allow halves only
        (["a", "w"], [1, 0], 1 / 3, 0.5),
        (["a", "w", "v"], [1, 0, 0], 1 / 3, None),
        # 1/3 is allowed with three distinct answers, though the vote by text gives 1
        (["a", "a", "w", "v"], [1, 1, 0, 0], 1 / 3, None),
    ],
)
def test_the_majority_vote_check_allows_exactly_what_some_grouping_gives(
    extracted, correctness, majority, by_text
):
    """by_text: the vote over the texts (counted by hand) named in the refusal; None: the value is allowed."""
    line = _vote_line(extracted, correctness, majority)
    if by_text is None:
        assert parse_sampling_record(line, "f:1", "t")["majority_vote_accuracy"] == majority
    else:
        with pytest.raises(RunFormatError) as raised:
            parse_sampling_record(line, "f:1", "t")
        assert str(raised.value) == (
            f"f:1: majority_vote_accuracy {majority!r} is not what the extracted answers and correctness "
            f"imply ({by_text!r})"
        )


# --- task checkers and the re-check -------------------------------------------------------------------------


def test_task_version_and_checker_of_a_capcal_task_and_none_for_another(monkeypatch):
    from capcal_tasks import tasks_dir

    assert task_version("not_a_capcal_task") is None
    assert task_process_results("not_a_capcal_task") is None and task_checker("not_a_capcal_task") is None
    found = task_process_results("capcal_arithmetic")
    assert found is not None and found[1].__name__ == "capcal_tasks.arithmetic.task"
    assert task_checker("capcal_arithmetic") is found[0] is found[1].process_results
    # the version under the YAML's metadata, read here line by line
    text = (tasks_dir() / "arithmetic" / "capcal_arithmetic.yaml").read_text(encoding="utf-8")
    (line,) = [line for line in text.splitlines() if line.startswith("  version:")]
    assert task_version("capcal_arithmetic") == float(line.split(":")[1].split("#")[0])
    # an expensive checker (MATH's) is not re-run on every read, though its process_results is known
    assert (
        "capcal_tasks.math.task.process_results" in (tasks_dir() / "math" / "capcal_math500.yaml").read_text()
    )
    from types import SimpleNamespace

    from capcal_tasks import sampling

    def process_results(doc, results):
        return {}

    for expensive, expected in ((True, None), (False, process_results)):
        module = SimpleNamespace(EXPENSIVE_CHECKER=expensive)
        monkeypatch.setattr(sampling, "task_process_results", lambda task, m=module: (process_results, m))
        assert task_checker("capcal_math500") is expected


def _checker(extracted, correctness):
    calls = []

    def checker(doc, results):
        calls.append((doc, results))
        return {"extracted_answers": extracted, "correctness": correctness}

    return checker, calls


def test_recheck_passes_doc_and_responses_and_names_the_first_difference_from_one():
    fields = {
        "doc": {"q": 1},
        "responses": ["r1", "r2"],
        "extracted_answers": ["7", "3"],
        "correctness": [1, 0],
    }
    checker, calls = _checker(["7", "3"], [1, 0])
    recheck_sampling_record(fields, checker, "f:1")
    assert calls == [({"q": 1}, [["r1", "r2"]])]
    checker, _ = _checker(["7", "4"], [1, 0])
    with pytest.raises(RunFormatError) as raised:
        recheck_sampling_record(fields, checker, "f:2")
    assert str(raised.value) == "f:2: extracted answer 2 is '3', the task's extractor gives '4'"
    checker, _ = _checker(["7", "3"], [0, 0])
    with pytest.raises(RunFormatError) as raised:
        recheck_sampling_record(fields, checker, "f:3")
    assert str(raised.value) == (
        "f:3: response 1 is logged with correctness 1, the task's checker gives 0 against the gold in the "
        "logged doc"
    )

    def failing(doc, results):
        raise KeyError("answer")

    with pytest.raises(RunFormatError) as raised:
        recheck_sampling_record(fields, failing, "f:4")
    assert str(raised.value) == "f:4: the task's checker cannot re-score this record (KeyError: 'answer')"
