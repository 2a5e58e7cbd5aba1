"""Joins report what they could not match: JoinReport, sampling <-> confidence, <-> activations, model <->
model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from analysis.estimators.elicited import attach_elicited, join_elicited
from analysis.runs import load_runs
from analysis.runs.activations import ActivationFormatError, load_activations
from analysis.runs.joins import JoinReport, join_report, pair_models
from capcal_models.activations import ActivationWriter
from capcal_tasks.confidence import verbalized
from capcal_tasks.sampling import score_responses

DATE = "2026-04-05T06-07-08.000000"


def _sampling(doc_id: int, qid: str, answers: list[str]) -> dict:
    record = score_responses(answers, extract=lambda r: r, judge=lambda a: a == "4")
    return {"doc_id": doc_id, "doc": {"question_id": qid}, "resps": [answers], **record}


def _confidence(doc_id: int, qid: str, text: str) -> dict:
    return {
        "doc_id": doc_id,
        "doc": {"question_id": qid},
        "resps": [[text]],
        **verbalized.process_results({}, [text]),
    }


def _write(folder: Path, task: str, lines: list[dict], metadata: dict, model: str = "toy") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"samples_{task}_{DATE}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    path = folder / f"results_{DATE}.json"
    results = (
        json.loads(path.read_text()) if path.exists() else {"results": {}, "configs": {}, "model_name": model}
    )
    results["results"][task] = {}
    results["configs"][task] = {"metadata": metadata}
    path.write_text(json.dumps(results))


SAMPLING = {"capcal_task": "sampling", "capcal_role": "evaluation", "capcal_calibration_tasks": []}


def _confidence_of(target: str) -> dict:
    return {"capcal_task": "verbalized", "capcal_role": "confidence", "capcal_target_task": target}


def test_join_report_counts_and_first_ids():
    report = join_report(
        "x", ["a", "b", "c", "c"], ["b", "d", "e"], left_name="questions", right_name="records"
    )
    assert (report.left_count, report.right_count, report.matched) == (3, 3, 1)
    assert (report.unmatched_left, report.unmatched_left_ids) == (2, ("a", "c"))
    assert (report.unmatched_right, report.unmatched_right_ids) == (2, ("d", "e"))
    assert not report.complete
    assert report.summary() == (
        "x: matched 1 of 3 questions and 3 records; 2 questions without records (first: a, c); "
        "2 records without questions (first: d, e)"
    )
    many = join_report("y", [(i, "q") for i in range(9)], [], first=5)
    assert len(many.unmatched_left_ids) == 5 and many.unmatched_left_ids[0] == "0 / q"
    assert join_report("z", [1], [1]).complete and isinstance(many, JoinReport)


def test_shared_question_ids_join_only_the_declared_target_task(tmp_path):
    """Two sampling tasks over one dataset share question ids (SimpleQA and SimpleQA-Verified): each
    confidence task attaches to its own target, and the records with no question are counted."""
    folder = tmp_path / "toy"
    _write(folder, "capcal_qa", [_sampling(i, f"qa/{i}", ["4", "5"]) for i in range(3)], SAMPLING)
    _write(folder, "capcal_qa_verified", [_sampling(i, f"qa/{i}", ["4", "4"]) for i in (1, 2)], SAMPLING)
    _write(
        folder,
        "capcal_qa_verified_verbalized",
        [_confidence(i, f"qa/{i}", r"\boxed{0.9}") for i in (1, 2, 7)],
        _confidence_of("capcal_qa_verified"),
    )
    collection = load_runs([tmp_path])
    joined, (report,) = join_elicited(collection.questions, collection.confidences)
    by_key = joined.set_index(["task", "question_id"])["verbalized_confidence"]
    assert by_key[("capcal_qa_verified", "qa/1")] == 0.9 and by_key[("capcal_qa_verified", "qa/2")] == 0.9
    assert by_key.loc["capcal_qa"].isna().all()  # same ids, other task: nothing attached
    assert (report.matched, report.unmatched_left, report.unmatched_right) == (2, 0, 1)
    assert report.unmatched_right_ids[0].endswith("capcal_qa_verified / qa/7")
    assert "1 verbalized records without questions" in report.summary()
    assert "unresolved" in report.summary()  # the model is known by its label only, and the report says so
    assert attach_elicited(collection.questions, collection.confidences).attrs["joins"] == [report]


def test_pair_models_reports_questions_of_one_model_only(tmp_path):
    """Row i of both frames is the same question, with that question's own values, for ids whose text
    order (qa/10 < qa/11 < qa/9) differs from their numeric and file order, in another order per model."""
    a_answers = {8: ["4"], 9: ["5"], 10: ["4"], 11: ["5"]}  # mu_hat: 1, 0, 1, 0
    b_answers = {12: ["4", "4"], 11: ["4", "4"], 10: ["5", "5"], 9: ["4", "5"]}  # 1, 1, 0, 0.5
    _write(
        tmp_path / "a", "capcal_qa", [_sampling(i, f"qa/{i}", a) for i, a in a_answers.items()], SAMPLING,
        "small",
    )  # fmt: skip
    b_lines = [_sampling(n, f"qa/{i}", a) for n, (i, a) in enumerate(b_answers.items())]
    _write(tmp_path / "b", "capcal_qa", b_lines, SAMPLING, "large")
    table = load_runs([tmp_path]).questions
    small, large, report = pair_models(table, "small", "large")
    assert list(small["question_id"]) == list(large["question_id"])
    assert sorted(small["question_id"]) == ["qa/10", "qa/11", "qa/9"]
    for (_, a_row), (_, b_row) in zip(small.iterrows(), large.iterrows(), strict=True):
        i = int(a_row["question_id"].split("/")[1])
        assert a_row["expected_accuracy"] == np.mean([x == "4" for x in a_answers[i]]), i
        assert b_row["expected_accuracy"] == np.mean([x == "4" for x in b_answers[i]]), i
    assert (report.matched, report.unmatched_left, report.unmatched_right) == (3, 1, 1)
    assert report.unmatched_left_ids == ("capcal_qa / qa/8",)
    assert report.unmatched_right_ids == ("capcal_qa / qa/12",)
    assert report.summary() == (
        "small <-> large: matched 3 of 4 small and 4 large; 1 small without large (first: capcal_qa / qa/8); "
        "1 large without small (first: capcal_qa / qa/12); small is known only by its label (unresolved "
        "checkpoint); large is known only by its label (unresolved checkpoint)"
    )
    for frame in (small, large):  # each model's rows as they were, renumbered 0..2
        assert list(frame.columns) == list(table.columns) and list(frame.index) == list(range(3))
    by_id = pair_models(table, "unresolved:small", "unresolved:large")  # a model named by its model_id
    assert by_id[0].equals(small) and by_id[1].equals(large)
    with pytest.raises(ValueError, match="no questions of model"):
        pair_models(table, "small", "medium")
    twice = pd.concat([table, table[table["model"] == "small"]])
    with pytest.raises(
        ValueError,
        match=r"^model small has several rows per \('task', 'question_id'\); use one run per task$",
    ):
        pair_models(twice, "small", "large")
    # model ids win over labels: a label that is another model's id selects that model
    relabelled = table.assign(model=table["model"].map({"small": "unresolved:large", "large": "other"}))
    assert list(pair_models(relabelled, "unresolved:large", "unresolved:small")[0]["model"].unique()) == [
        "other"
    ]


def _activations(directory: Path, keys: list[tuple[str, str]], model: str = "toy") -> None:
    writer = ActivationWriter(directory, model_name=model, shard_size=8)
    for n, (task, qid) in enumerate(keys):
        states = tuple(torch.full((1, 2, 3), float(n + layer)) for layer in range(2))
        writer.add(task, qid, f"prompt {qid}", states)
    writer.flush()


def test_activations_join_reports_missing_or_raises(tmp_path):
    _activations(tmp_path, [("t", "q1"), ("t", "q2"), ("t", "q9")])
    table = pd.DataFrame({"task": ["t", "t", "u"], "question_id": ["q2", "q1", "q1"]})
    with pytest.raises(KeyError, match="u/q1"):
        load_activations(tmp_path, table)
    partial = load_activations(tmp_path, table, missing="report")
    assert list(partial.rows) == [0, 1] and partial.last_token.shape == (2, 2, 3)
    assert float(partial.last_token[0, 0, 0]) == 1.0  # q2 was written second
    assert (partial.join.matched, partial.join.unmatched_left, partial.join.unmatched_right) == (2, 1, 1)
    assert partial.join.unmatched_left_ids == ("u / q1",) and partial.join.unmatched_right_ids == ("t / q9",)


def test_activations_of_another_checkpoint_are_refused(tmp_path, smollm2_path):
    from capcal_models.model_identity import checkpoint_fingerprint

    _activations(tmp_path, [("t", "q1")], model=str(smollm2_path))
    fingerprint = checkpoint_fingerprint(smollm2_path)
    table = pd.DataFrame({"task": ["t"], "question_id": ["q1"], "model_id": [fingerprint]})
    assert load_activations(tmp_path, table).model_fingerprint == fingerprint
    other = table.assign(model_id="sha256:" + "0" * 64)
    with pytest.raises(ActivationFormatError, match="another model"):
        load_activations(tmp_path, other)
    unresolved = table.assign(model_id="unresolved:toy")
    assert "not checked" in load_activations(tmp_path, unresolved).join.summary()
