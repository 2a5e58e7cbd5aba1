from math import comb

import pytest

from capcal_tasks.sampling import majority_vote_accuracy, pass_at_k_levels, score_responses


def _record(answers, gold="1"):
    return score_responses(
        [f"\\boxed{{{a}}}" if a is not None else "no answer" for a in answers],
        extract=lambda r: r[7:-1] if r.startswith("\\boxed{") else None,
        judge=lambda a: a == gold,
    )


def test_record_fields_and_expected_accuracy():
    record = _record(["1", "2", "1", None, "1", "3", "1", "2"])
    assert record["correctness"] == [1, 0, 1, 0, 1, 0, 1, 0]
    assert record["extracted_answers"] == ["1", "2", "1", None, "1", "3", "1", "2"]
    assert record["n_samples"] == 8
    assert record["expected_accuracy"] == pytest.approx(4 / 8)
    assert [k for k in record if k.startswith("pass_at_")] == [
        "pass_at_1",
        "pass_at_2",
        "pass_at_4",
        "pass_at_8",
    ]
    for k in (1, 2, 4, 8):
        assert record[f"pass_at_{k}"] == pytest.approx(1 - comb(8 - 4, k) / comb(8, k))
    assert record["majority_vote_accuracy"] == 1.0


def test_majority_vote_ties_are_averaged_and_none_does_not_vote():
    assert majority_vote_accuracy(["a", "b"], [1, 0]) == 0.5
    assert majority_vote_accuracy([None, None, "b"], [0, 0, 0]) == 0.0
    assert majority_vote_accuracy([None, None, "a"], [0, 0, 1]) == 1.0
    assert majority_vote_accuracy([None, None], [0, 0]) == 0.0


def test_pass_at_k_levels():
    assert pass_at_k_levels(1) == [1]
    assert pass_at_k_levels(12) == [1, 2, 4, 8]
    assert pass_at_k_levels(16) == [1, 2, 4, 8, 16]


def test_empty_or_unfiltered_responses_are_rejected():
    with pytest.raises(ValueError, match="keep-all"):
        score_responses([], extract=str, judge=bool)
    with pytest.raises(ValueError, match="keep-all"):
        score_responses("a single string", extract=str, judge=bool)


def _line(record: dict, responses: list) -> dict:
    return {"doc_id": 0, "doc": {"question_id": "toy/0"}, "resps": [responses], **record}


@pytest.mark.parametrize("grouping", ["text", "merge_correct", "numeric", "drop_some"])
def test_every_record_score_responses_writes_is_read_back(grouping):
    """The reader accepts whatever the writer writes, for the answer groupings capcal's tasks use (by text;
    all correct answers in one class as MATH and the alias tasks do; a parsed number as GSM8K does; some
    wrong answers without a vote), over many random questions."""
    import random

    from capcal_tasks.sampling import parse_sampling_record

    rng = random.Random(grouping)
    pool = ["1", "1.0", "01", "2", "2.0", "3", "x", None]

    def answer_class(answer):
        if answer is None:
            return None
        if grouping == "merge_correct":
            return ("correct",) if float(answer in ("1", "1.0", "01")) else ("answer", answer)
        if grouping == "numeric":
            return float(answer) if answer != "x" else None
        if grouping == "drop_some":
            return None if answer in ("x", "3") else answer
        return answer

    for _ in range(400):
        k = rng.choice([1, 2, 3, 4, 5, 8, 16])
        answers = [rng.choice(pool) for _ in range(k)]
        responses = [f"\\boxed{{{a}}}" if a is not None else "none" for a in answers]
        record = score_responses(
            responses,
            extract=lambda r: r[7:-1] if r.startswith("\\boxed{") else None,
            judge=lambda a: a in ("1", "1.0", "01"),
            answer_class=answer_class,
        )
        fields = parse_sampling_record(_line(record, responses), "f.jsonl:1", "capcal_toy")
        assert fields["correctness"] == record["correctness"]
        assert fields["majority_vote_accuracy"] == record["majority_vote_accuracy"]


def test_reader_recomputes_derived_fields():
    from capcal_tasks.records import RunFormatError
    from capcal_tasks.sampling import parse_sampling_record

    responses = ["\\boxed{1}", "\\boxed{2}", "\\boxed{1}", "none"]
    record = _record(["1", "2", "1", None])
    assert parse_sampling_record(_line(record, responses), "f:1", "t")["pass_at"] == pytest.approx(
        {1: 0.5, 2: 5 / 6, 4: 1.0}
    )
    for key, value, message in [
        ("pass_at_2", 0.8, "pass_at_2 = 0.8"),
        ("majority_vote_accuracy", 0.5, "majority_vote_accuracy 0.5"),
        ("n_samples", 3, "n_samples 3"),
        ("expected_accuracy", 0.75, "expected_accuracy 0.75"),
    ]:
        with pytest.raises(RunFormatError, match=f"^f:7: {message}"):
            parse_sampling_record(_line({**record, key: value}, responses), "f:7", "t")
