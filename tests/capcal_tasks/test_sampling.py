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
