"""The split guard of fitted estimators: fingerprints, split digests, the refusal to score seen questions."""

from __future__ import annotations

import hashlib

import pytest

from analysis.estimators import SplitLeakageError
from analysis.estimators.split_guard import (
    held_out_question_ids,
    ids_digest,
    question_fingerprints,
    question_id_hash,
)


def test_fingerprint_is_the_sha256_prefix_of_the_id():
    assert question_id_hash("gsm8k:17") == hashlib.sha256(b"gsm8k:17").hexdigest()[:16]
    assert question_fingerprints(["a", "b", "a"]) == frozenset({question_id_hash("a"), question_id_hash("b")})


def test_split_digest_ignores_order_but_not_membership():
    assert ids_digest(["q2", "q1", "q3"]) == ids_digest(["q1", "q2", "q3"])
    assert ids_digest(["q1", "q2"]) != ids_digest(["q1", "q2", "q3"])
    assert ids_digest(["q1"]) == hashlib.sha256(b"q1").hexdigest()


def test_held_out_ids_pass_and_come_back_as_strings():
    seen = question_fingerprints(["train-1", "train-2"])
    assert held_out_question_ids([3, "test-1"], seen, length=2, what="this probe") == ["3", "test-1"]


def test_seen_questions_are_refused_with_a_count_and_examples():
    seen = question_fingerprints([f"train-{i}" for i in range(10)])
    asked = ["test-1", *(f"train-{i}" for i in range(5))]
    with pytest.raises(
        SplitLeakageError, match=r"^this probe was fitted or tuned on 5 of these 6 questions"
    ) as error:
        held_out_question_ids(asked, seen, length=6, what="this probe")
    assert "'train-0', 'train-1', 'train-2' and 2 more" in str(error.value)
    assert isinstance(error.value, ValueError)  # callers catching bad input catch leakage too


@pytest.mark.parametrize(
    ("ids", "length", "message"),
    [(["a", "a"], 2, "duplicates"), (["a"], 2, "one per row"), ("ab", 2, "not a single string")],
)
def test_bad_ids_are_rejected_before_the_leakage_check(ids, length, message):
    with pytest.raises(ValueError, match=message):
        held_out_question_ids(ids, frozenset(), length=length, what="this probe")
