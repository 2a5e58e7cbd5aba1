"""Self-Calibration training data: SSC grouping, refusals of evaluation questions, hostile input."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from analysis.self_calibration.data import (
    TUPLE_FIELDS,
    SelfCalibrationDataError,
    build_training_data,
    read_training_data,
    ssc_targets,
    target_histogram,
)
from analysis.self_calibration.example_draw import balanced_indices
from capcal_tasks.records import RunFormatError

# ---------------------------------------------------------------- pure parts


def test_ssc_groups_by_answer_and_drops_unparseable():
    """SSC(a) = sum of the group's confidences / sum over all parseable responses (Huang et al.)."""
    answers = ["4", " 4", "5", None, "", "6"]
    confidences = [0.5, 0.3, 0.2, 0.9, 0.7, 0.0]
    targets = ssc_targets(answers, confidences)
    assert targets[3] is None and targets[4] is None  # unparseable: no target, not in the denominator
    assert targets[0] == pytest.approx(0.8) and targets[1] == pytest.approx(0.8)  # " 4" groups with "4"
    assert targets[2] == pytest.approx(0.2)
    assert targets[5] == 0.0
    groups = {a.strip(): t for a, t in zip(answers, targets, strict=True) if t is not None}
    assert sum(groups.values()) == pytest.approx(1)


def test_ssc_refuses_undefined_and_bad_confidences():
    with pytest.raises(ValueError, match="sum to 0"):
        ssc_targets(["1", "2"], [0.0, 0.0])
    for bad in (float("nan"), 1.5, -0.1, "0.5", None):
        with pytest.raises(ValueError, match="not a number in"):
            ssc_targets(["1"], [bad])
    with pytest.raises(ValueError, match="2 answers but 1"):
        ssc_targets(["1", "2"], [0.5])
    assert ssc_targets([None, None], [0.2, 0.3]) == [None, None]


def test_target_histogram_counts_the_last_bin_closed():
    histogram = target_histogram([0.0, 0.05, 0.1, 0.95, 1.0, 1.0])
    assert [b["count"] for b in histogram] == [2, 1, 0, 0, 0, 0, 0, 0, 0, 3]


def test_balanced_indices_give_each_bucket_equal_weight():
    targets = [0.02] * 90 + [0.5] * 9 + [1.0]  # 3 buckets, very unequal
    drawn = balanced_indices(targets, 3000, seed=0)
    buckets = np.bincount([0 if i < 90 else 1 if i < 99 else 2 for i in drawn], minlength=3) / 3000
    assert np.allclose(buckets, 1 / 3, atol=0.04)
    assert drawn == balanced_indices(targets, 3000, seed=0)  # seeded
    assert drawn != balanced_indices(targets, 3000, seed=1)


def _tuple(**changes) -> dict:
    item = {
        "question_id": "arithmetic/q1", "task": "capcal_arithmetic_train", "response_index": 0,
        "context": "Q? A: 4. Is the answer correct? (Yes/No)", "yes_text": "Yes", "response": "4",
        "response_start": 6, "response_end": 7, "extracted_answer": "4", "confidence": 0.5, "ssc": 0.8,
        "lm_loss": True, "correct": 1,
    }  # fmt: skip
    item.update(changes)
    return item


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ssc": 1.5}, "ssc must be a number in"),
        ({"ssc": True}, "ssc must be a number in"),
        ({"response_end": 999}, "response span 6..999 is not inside the context"),
        ({"response_start": -1, "response_end": -1}, "lm_loss must be a boolean"),
        ({"lm_loss": "yes"}, "lm_loss must be a boolean"),
        ({"context": None}, "context and yes_text must be strings"),
    ],
)
def test_read_training_data_names_file_and_line_of_a_bad_tuple(tmp_path, change, message):
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(_tuple()) + "\n" + json.dumps(_tuple(**change)) + "\n")
    with pytest.raises(SelfCalibrationDataError, match=f"{path}:2: {message}"):
        read_training_data(path)


def test_read_training_data_hostile_files(tmp_path):
    path = tmp_path / "train.jsonl"
    item = _tuple()
    del item["ssc"]
    path.write_text(json.dumps(item) + "\n")
    with pytest.raises(SelfCalibrationDataError, match=r"train.jsonl:1: missing field\(s\) ssc"):
        read_training_data(tmp_path)  # the folder is accepted
    path.write_text(json.dumps(_tuple())[:-1].replace('"ssc": 0.8', '"ssc": NaN') + "}\n")
    with pytest.raises(RunFormatError, match="train.jsonl:1"):
        read_training_data(path)
    path.write_text("")
    with pytest.raises(SelfCalibrationDataError, match="no training tuples"):
        read_training_data(path)
    with pytest.raises(SelfCalibrationDataError, match="no such training data file"):
        read_training_data(tmp_path / "missing.jsonl")


# ---------------------------------------------------------------- on real runs (SmolLM2)


@pytest.mark.slow
def test_tuples_from_real_runs(selfcal_runs, selfcal_data):
    """Every parseable response becomes one tuple whose target is its answer group's SSC, recomputed here
    from the self-check run's P(Yes); the file loads with datasets; the card counts add up."""
    import datasets

    tuples = read_training_data(selfcal_data.path)
    assert all(set(TUPLE_FIELDS) <= set(t) for t in tuples)
    checks = {}
    samples_file = next((selfcal_runs["train_selfcheck"]).glob("*/samples_*.jsonl"))
    for line in samples_file.read_text().splitlines():
        record = json.loads(line)
        checks[record["doc"]["question_id"]] = record
    by_question: dict[str, list[dict]] = {}
    for item in tuples:
        by_question.setdefault(item["question_id"], []).append(item)
    for qid, items in by_question.items():
        record = checks[qid]
        answers, p_yes = record["doc"]["response_answers"], record["p_yes"]
        parseable = [i for i, a in enumerate(answers) if a is not None and str(a).strip()]
        assert [t["response_index"] for t in items] == parseable
        total = sum(p_yes[i] for i in parseable)
        for item in items:
            group = [i for i in parseable if str(answers[i]).strip() == item["extracted_answer"].strip()]
            assert item["ssc"] == pytest.approx(sum(p_yes[i] for i in group) / total, abs=1e-9)
            assert item["confidence"] == pytest.approx(p_yes[item["response_index"]])
            assert item["lm_loss"] == (item["ssc"] > 0.5)
            span = item["context"][item["response_start"] : item["response_end"]]
            assert span == item["response"].strip()  # the LM loss covers exactly the response
            assert item["context"].endswith("<|im_start|>assistant\n") and item["yes_text"] == "Yes"
        assert math.isclose(sum({t["extracted_answer"]: t["ssc"] for t in items}.values()), 1.0)
    counts = selfcal_data.counts
    assert (
        counts["tuples"]
        == len(tuples)
        == counts["responses_in_run"] - counts["responses_unparseable_dropped"]
    )
    assert counts["questions_used"] == len(by_question)
    card = json.loads(selfcal_data.card.read_text())
    assert sum(b["count"] for b in card["target_histogram"]) == len(tuples)
    assert card["sources"]["sampling"]["task"] == "capcal_arithmetic_train"
    loaded = datasets.load_dataset("json", data_files=str(selfcal_data.path), split="train")
    assert loaded.num_rows == len(tuples) and loaded[0]["ssc"] == tuples[0]["ssc"]


@pytest.mark.slow
def test_refuses_evaluation_questions(selfcal_runs, tmp_path):
    """An evaluation task's run is refused by its declared role; training questions listed as held-out are
    refused by id; a results file whose task config is changed to an evaluation role is refused too."""
    with pytest.raises(SelfCalibrationDataError, match="task capcal_arithmetic is declared evaluation"):
        build_training_data(selfcal_runs["eval_sample"], selfcal_runs["train_selfcheck"], tmp_path / "a")
    first = json.loads(selfcal_runs["train_samples_file"].read_text().splitlines()[0])["doc"]["question_id"]
    with pytest.raises(SelfCalibrationDataError, match="held-out"):
        build_training_data(
            selfcal_runs["train_sample"], selfcal_runs["train_selfcheck"], tmp_path / "b",
            exclude_question_ids=[first],
        )  # fmt: skip
    relabelled = tmp_path / "relabelled"
    shutil.copytree(selfcal_runs["train_sample"], relabelled)
    results = next(relabelled.glob("*/results_*.json"))
    content = json.loads(results.read_text())
    metadata = content["configs"]["capcal_arithmetic_train"]["metadata"]
    metadata.update(capcal_role="evaluation", capcal_calibration_tasks=[])
    results.write_text(json.dumps(content))
    with pytest.raises(SelfCalibrationDataError, match="declared evaluation"):
        build_training_data(relabelled, selfcal_runs["train_selfcheck"], tmp_path / "c")
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()


@pytest.mark.slow
def test_refuses_a_selfcheck_of_other_responses(selfcal_runs, tmp_path):
    """A self-check run whose responses differ from the sampling run's is refused, naming the line."""
    tampered = tmp_path / "tampered"
    shutil.copytree(selfcal_runs["train_selfcheck"], tampered)
    samples = next(tampered.glob("*/samples_*.jsonl"))
    lines = samples.read_text().splitlines()
    record = json.loads(lines[0])
    record["doc"]["responses"][0] = "something else entirely"
    lines[0] = json.dumps(record)
    samples.write_text("\n".join(lines) + "\n")
    with pytest.raises(SelfCalibrationDataError, match="line 1 .* scored other responses"):
        build_training_data(selfcal_runs["train_sample"], tampered, tmp_path / "out")


@pytest.mark.slow
def test_cli_data_one_line_refusal(selfcal_runs, tmp_path, capsys):
    from analysis.cli import main

    code = main(["selfcal", "data", str(selfcal_runs["eval_sample"]), str(selfcal_runs["train_selfcheck"]),
                 "--output", str(tmp_path / "out")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "declared evaluation" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    arguments = [str(selfcal_runs["train_sample"]), str(selfcal_runs["train_selfcheck"])]
    arguments += ["--output", str(tmp_path / "ok"), "--exclude_run", str(selfcal_runs["eval_samples_file"])]
    code = main(["selfcal", "data", *arguments])
    assert (
        code == 0
        and (tmp_path / "ok" / "train.jsonl").is_file()
        and (tmp_path / "ok" / "README.md").is_file()
    )


def test_method_bucket_rule_is_floor_division_capped_at_the_last_slot():
    """``min(t // 0.05, 20)`` with Python floats (``model_training/train.py`` line 218): 21 slots, SSC = 1
    falls in bucket 19 (1.0 // 0.05 = 19) and binary floats move 0.5 and 0.95 down one (0.5 // 0.05 = 9)."""
    from analysis.self_calibration.example_draw import bucket_slots, target_buckets

    assert bucket_slots() == 21
    assert target_buckets([0.0, 0.049, 0.05, 0.1, 0.15, 0.5, 0.949, 0.95, 0.999, 1.0]).tolist() == [
        0, 0, 1, 2, 2, 9, 18, 18, 19, 19,
    ]  # fmt: skip


def test_method_draw_caps_each_bucket_without_replacement():
    """Per bucket min(size, cap) distinct tuples, cap = floor(B (1 - r) / 21); min(LM tuples, floor(B r))
    distinct causal-LM examples; seeded."""
    from analysis.self_calibration.example_draw import draw_examples, target_buckets
    from analysis.self_calibration.train_config import TrainConfig

    rng = np.random.default_rng(5)
    targets = np.concatenate([rng.uniform(0, 0.1, 300), rng.uniform(0.4, 0.5, 40), [1.0] * 7])
    flags = targets > 0.75
    config = TrainConfig(examples_per_epoch=1400)  # cap = floor(1400 * 0.3 / 21) = 20
    drawn = draw_examples(targets, flags, config)
    confidence = drawn["confidence"]
    assert len(confidence) == len(set(confidence))  # without replacement
    buckets = target_buckets(targets)
    drawn_per_bucket = np.bincount(buckets[confidence], minlength=21)
    sizes = np.bincount(buckets, minlength=21)
    assert drawn_per_bucket.tolist() == np.minimum(sizes, 20).tolist()
    assert sorted(drawn["lm"]) == np.flatnonzero(flags).tolist()  # 7 LM tuples < floor(1400 * 0.7)
    assert drawn == draw_examples(targets, flags, config)
    assert drawn != draw_examples(targets, flags, TrainConfig(examples_per_epoch=1400, seed=1))
    small = draw_examples(targets, flags, TrainConfig(examples_per_epoch=70))  # cap = floor(21 / 21) = 1
    assert np.bincount(buckets[small["confidence"]], minlength=21).max() == 1
    default = draw_examples(targets, flags, TrainConfig())  # no budget: cap = ceil(347 / 21) = 17
    assert (
        np.bincount(buckets[default["confidence"]], minlength=21).tolist() == np.minimum(sizes, 17).tolist()
    )
    natural = draw_examples(targets, flags, TrainConfig(balanced=False, examples_per_epoch=100))
    assert len(natural["confidence"]) == 30 and len(set(natural["confidence"])) == 30
    replaced = draw_examples(targets, flags, TrainConfig(with_replacement=True, examples_per_epoch=1000))
    assert len(replaced["confidence"]) == 300 and len(set(replaced["confidence"])) < 300


def test_validation_split_holds_out_whole_questions():
    from analysis.self_calibration.example_draw import split_validation

    tuples = [{"question_id": f"q{i // 3}"} for i in range(60)]  # 20 questions x 3 tuples
    training, validation = split_validation(tuples, 0.1, seed=0)
    held = {tuples[i]["question_id"] for i in validation}
    assert len(held) == 2 and len(validation) == 6 and sorted(training + validation) == list(range(60))
    assert held.isdisjoint(tuples[i]["question_id"] for i in training)
    assert split_validation(tuples, 0.0, seed=0) == (list(range(60)), [])


def test_an_unknown_confidence_field_is_refused_naming_the_two_in_order(tmp_path):
    with pytest.raises(SelfCalibrationDataError) as refused:
        build_training_data(
            tmp_path / "sampling", tmp_path / "selfcheck", tmp_path / "out", confidence="p_no"
        )
    assert str(refused.value) == "confidence must be one of p_yes, p_yes_normalized"
