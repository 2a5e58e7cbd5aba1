"""Question ids (``capcal_tasks.question_id``), each expected value written out with hashlib and json in the
test: the dataset-scoped hash of the question text, and the id of a document without one, which must be the
``doc_hash`` lm-eval writes into its samples files for that document."""

from __future__ import annotations

import datetime
import hashlib
import json

import numpy as np
import pytest

from capcal_tasks.question_id import doc_question_id, fallback_question_id, question_id


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_a_question_id_is_the_dataset_and_16_hex_digits_of_the_whitespace_collapsed_text():
    assert question_id("gsm8k", "How many apples?") == "gsm8k/" + _sha("How many apples?")[:16]
    spaced = question_id("gsm8k", "  How   many\napples?\t")
    assert spaced == question_id("gsm8k", "How many apples?")  # runs of whitespace are one space
    assert question_id("gsm8k", "How many apples ?") != spaced  # but a space is not nothing
    assert question_id("math500", "How many apples?").endswith(spaced.split("/")[1])  # the dataset prefixes
    assert question_id("math500", "How many apples?") != spaced
    assert question_id("d", "Ünïcode ✓") == "d/" + _sha("Ünïcode ✓")[:16]  # the UTF-8 bytes


def test_a_document_with_its_own_question_id_is_keyed_by_it():
    assert doc_question_id("task", {"question_id": "gsm8k/abc", "question": "q"}) == "gsm8k/abc"
    assert doc_question_id("task", {"question_id": 17}) == "17"


@pytest.mark.parametrize("own", [None, ""])
def test_a_document_without_one_gets_lm_evals_doc_hash(own):
    """lm-eval's samples files carry ``doc_hash``: sha256 of ``json.dumps(doc, indent=2,
    ensure_ascii=False)``, a value JSON lacks written as lm-eval's ``handle_non_serializable`` writes it
    (NumPy numbers as numbers, a set as a list, anything else as its ``str``)."""
    doc = {
        "question": "Wie viele Äpfel?",  # not escaped: ensure_ascii=False
        "count": np.int64(3),
        "share": np.float32(0.5),
        "flag": np.bool_(True),
        "labels": {"a"},
        "when": datetime.date(2024, 5, 1),
        "question_id": own,
    }
    written = json.dumps(
        {
            "question": "Wie viele Äpfel?",
            "count": 3,
            "share": 0.5,
            "flag": True,
            "labels": ["a"],
            "when": "2024-05-01",
            "question_id": own,
        },
        indent=2,
        ensure_ascii=False,
    )
    assert doc_question_id("my_task", doc) == f"my_task/doc-{_sha(written)}"
    assert fallback_question_id("my_task", _sha(written)) == f"my_task/doc-{_sha(written)}"


def test_a_document_that_is_not_a_dict_is_hashed_whole():
    assert doc_question_id("t", ["a", 1]) == "t/doc-" + _sha(json.dumps(["a", 1], indent=2))
    assert doc_question_id("t", "plain text") == "t/doc-" + _sha('"plain text"')
