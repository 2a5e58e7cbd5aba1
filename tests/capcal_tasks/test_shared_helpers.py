"""The helpers the task modules share: numeric scoring (GSM8K, arithmetic), alias ``process_results``
(TriviaQA, SimpleQA), the question fields of ``process_docs``, CSV column checks and JSON-object parsing."""

from __future__ import annotations

import re

import datasets
import pytest

from capcal_tasks.alias_scoring import process_alias_results, score_alias_responses
from capcal_tasks.answers.boxed import last_boxed
from capcal_tasks.data_sources import add_question_fields, read_csv_with_columns, read_jsonl
from capcal_tasks.numeric_scoring import number_is_correct, score_number_responses
from capcal_tasks.prompts import SHORT_ANSWER_INSTRUCTION, sampling_prompt
from capcal_tasks.question_id import question_id
from capcal_tasks.records import parse_json_object


def test_numeric_scoring_groups_equal_numbers_and_uses_the_tasks_extractor():
    responses = [r"\boxed{18}", r"\boxed{18.0}", r"\boxed{17}", "no box"]
    record = score_number_responses(responses, "18", last_boxed)
    assert record["extracted_answers"] == ["18", "18.0", "17", None]
    assert record["correctness"] == [1, 1, 0, 0] and record["expected_accuracy"] == 0.5
    assert record["majority_vote_accuracy"] == 1.0  # "18" and "18.0" vote together
    assert number_is_correct("1,000", 1000.0) and not number_is_correct(None, 0.0)


def test_alias_process_results_scores_the_docs_aliases():
    doc = {"question_text": "Which city is the capital of France?", "gold_aliases": ["Paris", "France"]}
    responses = ["Paris", "Lyon", "Which city is the capital of France?\nParis"]
    prompt = sampling_prompt(doc["question_text"], SHORT_ANSWER_INSTRUCTION)
    record = process_alias_results(doc, [responses])
    assert record == score_alias_responses(responses, doc["gold_aliases"], doc["question_text"], prompt)
    assert record["correctness"] == [1, 0, 1] and record["extracted_answers"][2] == "Paris"


def test_the_exact_alias_label_sits_beside_the_lenient_one_with_its_own_mean():
    """``exact_alias_correctness``: the normalised answer equals an alias (the lenient ``correctness`` also
    takes an answer that contains one or is contained in one); ``exact_alias_expected_accuracy``: its mean."""
    record = score_alias_responses(
        [r"\boxed{Paris}", r"\boxed{the city of Paris}", r"\boxed{paris.}", r"\boxed{Lyon}"], ["Paris"]
    )
    assert record["correctness"] == [1, 1, 1, 0]
    assert record["exact_alias_correctness"] == [1, 0, 1, 0]
    assert record["exact_alias_expected_accuracy"] == 0.5 and record["expected_accuracy"] == 0.75


def test_alias_scoring_majority_vote_groups_every_alias_of_the_answer_and_wrong_answers_by_normalised_text():
    """Two correct answers in two alias forms outvote a wrong one given twice (2 against 2 would tie: the
    tie's accuracy is 1/2); a wrong answer in two spellings is one class."""
    aliases = ["The Penguin", "Oswald Cobblepot"]
    record = score_alias_responses(
        [r"\boxed{The Penguin}", r"\boxed{Oswald Cobblepot}", r"\boxed{Joker}"], aliases
    )
    assert record["correctness"] == [1, 1, 0] and record["majority_vote_accuracy"] == 1.0
    # grouped: {correct: 2, joker: 2} tie -> 1/2; by raw text the two spellings of Joker would not add up
    tied = score_alias_responses(
        [r"\boxed{The Penguin}", r"\boxed{Oswald Cobblepot}", r"\boxed{Joker}", r"\boxed{the joker}"], aliases
    )
    assert tied["correctness"] == [1, 1, 0, 0] and tied["majority_vote_accuracy"] == 0.5


def test_an_alias_named_in_the_question_counts_only_when_stated_alone():
    """Issue 34: "Oswald Chesterfield Cobblepot" is an alias of the answer and part of the question."""
    question = "By what name is comic book villain Oswald Chesterfield Cobblepot better known?"
    aliases = ["The Penguin", "Oswald Chesterfield Cobblepot"]
    responses = [
        question,  # the question restated: its text is removed, nothing is left
        "He is the villain Oswald Chesterfield Cobblepot.",  # contains the alias the question names
        r"\boxed{Oswald Chesterfield Cobblepot}",  # states it as the answer
        "He is better known as the Penguin.",  # contains an alias the question does not name
    ]
    prompt = sampling_prompt(question, SHORT_ANSWER_INSTRUCTION)
    assert score_alias_responses(responses, aliases, question, prompt)["correctness"] == [0, 0, 1, 1]
    assert score_alias_responses(responses, aliases)["correctness"] == [1, 1, 1, 1]  # the paper's label


def test_question_fields_are_added_in_order_and_repeats_dropped():
    dataset = datasets.Dataset.from_list(
        [{"q": " What? ", "a": "1"}, {"q": "Why?", "a": "2"}, {"q": " What? ", "a": "3"}]
    )
    docs = add_question_fields(dataset, "demo", "q", lambda doc: {"gold_answer": int(doc["a"])})
    assert len(docs) == 2 and docs.column_names == ["q", "a", "question_id", "question_text", "gold_answer"]
    assert docs[0]["question_id"] == question_id("demo", " What? ") and docs[0]["question_text"] == "What?"
    assert [doc["gold_answer"] for doc in docs] == [1, 2]


def test_csv_columns_are_checked(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text("problem,answer\nWhat?,1\n", encoding="utf-8")
    assert read_csv_with_columns(path, ("problem", "answer")) == [{"problem": "What?", "answer": "1"}]
    with pytest.raises(ValueError, match=r"rows.csv: missing column\(s\) metadata, topic$"):
        read_csv_with_columns(path, ("problem", "topic", "metadata"))


def test_json_objects_are_parsed_with_one_line_errors(tmp_path):
    assert parse_json_object('{"a": 1}', "x") == {"a": 1}
    with pytest.raises(ValueError, match=r"^f:3: not valid JSON \(Expecting value\)$"):
        parse_json_object("nope", "f:3")
    with pytest.raises(ValueError, match=r"^f:3: expected a JSON object$"):
        parse_json_object("[1]", "f:3")
    with pytest.raises(
        ValueError, match=r"^--metadata: not valid JSON \(Expecting value at column 1\): nope$"
    ):
        parse_json_object("nope", "--metadata", echo=True)
    with pytest.raises(ValueError, match=r"^--metadata: expected a JSON object, got \[1\]$"):
        parse_json_object("[1]", "--metadata", echo=True)
    path = tmp_path / "data.jsonl"
    path.write_text('{"a": 1}\n\n[2]\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:3: expected a JSON object$"):
        read_jsonl(path)
