"""The run reader: a valid log round-trips; malformed or partial logs fail with the file and line named."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.estimators.elicited import join_elicited, read_elicited
from analysis.runs import (
    LEADERBOARD_REASON,
    RunFormatError,
    load_run,
    load_runs,
    summarize,
    write_question_table,
)
from analysis.runs.completeness import check_run
from analysis.runs.files import read_results
from analysis.runs.tables import RUN_COLUMNS
from analysis.runs.versions import NOT_RECORDED, VERSION_COLUMNS, run_versions

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/: the hostile corpus' log writers
from hostile.logs import DATE, results_json  # noqa: E402
from hostile.logs import sampling_line as _line  # noqa: E402
from hostile.logs import write_run as _write_run  # noqa: E402


def test_valid_run_round_trips(tmp_path):
    _write_run(tmp_path, [_line(0, ["4", "4", "5", None]), _line(1, ["3", "3", "3", "4"])])
    table = load_run(tmp_path)
    assert list(table["question_id"]) == ["toy/0000", "toy/0001"]
    assert list(table["model"]) == ["toy-model"] * 2
    assert list(table["expected_accuracy"]) == [0.5, 0.25]
    assert table.loc[0, "extracted_answers"] == ["4", "4", "5", None]
    assert list(table.columns[-3:]) == ["pass_at_1", "pass_at_2", "pass_at_4"]
    summary = summarize(table)
    assert summary.loc[0, "questions"] == 2
    assert summary.loc[0, "mean_expected_accuracy"] == pytest.approx(0.375)
    assert summary.loc[0, "extraction_rate"] == pytest.approx(7 / 8)
    for suffix in (".jsonl", ".csv"):
        assert write_question_table(table, tmp_path / f"t{suffix}").stat().st_size > 0
    back = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert back[0]["correctness"] == [1, 1, 0, 0]
    parquet = pd.read_parquet(write_question_table(table, tmp_path / "t.parquet"))  # pyarrow: a datasets dep
    assert list(parquet.columns) == list(table.columns) and list(parquet["correctness"][0]) == [1, 1, 0, 0]
    assert list(parquet["expected_accuracy"]) == [0.5, 0.25]
    with pytest.raises(ValueError, match="unsupported"):
        write_question_table(table, tmp_path / "t.pickle")


def test_summarize_gives_every_column_per_run(tmp_path):
    """A run whose questions have 4, 4 and 2 responses (an interrupted or budgeted run): each column of the
    summary, k_min and k_max apart."""
    _write_run(
        tmp_path, [_line(0, ["4", "4", "5", None]), _line(1, ["3", "3", "3", "4"]), _line(2, ["4", "4"])]
    )
    (row,) = summarize(load_run(tmp_path)).to_dict("records")
    assert row == {
        "model": "toy-model",
        "task": "capcal_toy",
        "run_id": DATE,
        "questions": 3,
        "k_min": 2,
        "k_max": 4,
        "mean_expected_accuracy": pytest.approx(7 / 12),  # mu = 0.5, 0.25, 1
        "stderr": pytest.approx(np.sqrt(7) / 12),  # sqrt((1 + 16 + 25) / 144 / 2) / sqrt(3)
        "share_0_lt_mu_lt_1": pytest.approx(2 / 3),
        "extraction_rate": pytest.approx(9 / 10),
    }


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda line: json.dumps(line)[:-20], "malformed or truncated JSON"),
        (lambda line: {k: v for k, v in line.items() if k != "resps"}, "missing key"),
        (lambda line: {**line, "expected_accuracy": 0.9}, "is not the mean of its correctness"),
        (lambda line: {**line, "correctness": [1, 0, 1]}, "must be equal"),
        (lambda line: {**line, "correctness": [1, 0, 2, 0]}, "0/1 integers"),
        (lambda line: {**line, "correctness": [1.0, 0, 1, 0]}, "0/1 integers"),
        (lambda line: {**line, "resps": ["a", "b", "c", "d"]}, "one list of k responses"),
        (lambda line: "[1, 2]", "expected a JSON object"),
    ],
)
def test_malformed_lines_name_the_file_and_line(tmp_path, mutate, message):
    samples = _write_run(tmp_path, [_line(0, ["4"] * 4), mutate(_line(1, ["4", "1", "4", "2"]))])
    with pytest.raises(RunFormatError, match=message) as error:
        load_run(tmp_path)
    assert f"{samples}:2" in str(error.value)


def test_missing_samples_file_is_reported(tmp_path):
    samples = _write_run(tmp_path, [_line(0, ["4"] * 4)])
    samples.unlink()
    with pytest.raises(RunFormatError, match="--log_samples"):
        load_run(tmp_path)


def test_corrupt_results_file_is_reported(tmp_path):
    _write_run(tmp_path, [_line(0, ["4"] * 4)])
    results = next(tmp_path.rglob("results_*.json"))
    results.write_text('{"results": ')
    with pytest.raises(RunFormatError, match=str(results)):
        load_run(tmp_path)


def test_a_non_finite_number_outside_the_aggregates_is_located_in_its_own_section(tmp_path):
    """A NaN in a section capcal reads is refused at its own line, after that section's key, not at an
    earlier NaN of the aggregates (which lm-eval writes and capcal accepts)."""
    path = tmp_path / "results.json"
    path.write_text(
        "{\n"
        '  "results": {"capcal_toy": {"acc": NaN}},\n'
        '  "configs": {"capcal_toy": {"metadata": {"capcal_task": "sampling"}}},\n'
        '  "model_name": "toy-model",\n'
        '  "extra": {"x": NaN}\n'
        "}\n",
        encoding="utf-8",
    )
    with pytest.raises(RunFormatError) as refused:
        read_results(path)
    assert str(refused.value) == (
        f"{path}:5: non-finite number NaN in 'extra' (not JSON; lm-eval writes NaN only for aggregates)"
    )


@pytest.mark.parametrize(
    ("written", "shown"), [("true", "True"), ("2.5", "2.5"), ('"3"', "'3'"), ("-1", "-1")]
)
def test_n_samples_effective_must_be_a_count(tmp_path: Path, written: str, shown: str) -> None:
    """A bool, a fraction, a text or a negative number of effective samples is refused at its line; a count
    (0 too) or null is read: catches a check that lets a bool or a non-integer through."""
    path = tmp_path / "results.json"

    def results(effective: str) -> str:
        return (
            "{\n"
            '  "results": {"capcal_toy": {"acc": 0.5}},\n'
            '  "n-samples": {\n'
            '    "capcal_toy": {"original": 4, "effective": ' + effective + "}\n"
            "  }\n"
            "}\n"
        )

    path.write_text(results(written), encoding="utf-8")
    with pytest.raises(RunFormatError) as refused:
        read_results(path)
    assert (
        str(refused.value) == f"{path}:4: task capcal_toy: n-samples effective must be a count, got {shown}"
    )
    for accepted in ("0", "4", "null"):
        path.write_text(results(accepted), encoding="utf-8")
        assert read_results(path)[0]["n-samples"]["capcal_toy"]["original"] == 4


def test_run_versions_reads_each_runs_versions_from_its_results(tmp_path):
    """One row per run with every column named (``VERSION_COLUMNS``): the task's version and the lm-eval
    and capcal versions of its results file, "not recorded" where the results file has none."""
    results = {**results_json(), "versions": {"capcal_toy": 2.0}, "lm_eval_version": "0.4.13"}
    _write_run(tmp_path, [_line(0, ["4"] * 2)], results=results)
    (file,) = load_runs([tmp_path]).files
    table = run_versions([file])
    assert list(table.columns) == VERSION_COLUMNS
    assert table.to_dict(orient="records") == [
        {
            "model": file.model,
            "task": "capcal_toy",
            "run_id": file.run_id,
            "task_version": "2.0",
            "lm_eval_version": "0.4.13",
            "capcal_version": NOT_RECORDED,
        }
    ]


def test_invalid_utf8_is_reported(tmp_path):
    samples = _write_run(tmp_path, [_line(0, ["4"] * 4)])
    samples.write_bytes(samples.read_bytes() + b'{"doc_id": "\xff"}\n')
    with pytest.raises(RunFormatError, match="UTF-8") as error:
        load_run(tmp_path)
    assert f"{samples}:2:" in str(error.value)


def test_folders_without_capcal_samples(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a folder"):
        load_run(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no capcal sampling samples"):
        load_run(tmp_path)
    other = {"doc_id": 0, "doc": {}, "resps": [["x"]], "acc": 1}
    _write_run(tmp_path, [other], task="arc_easy", with_results=False)
    with pytest.raises(FileNotFoundError, match="no capcal sampling samples"):
        load_run(tmp_path)


# ---------------------------------------------------------------- folders, run identity and selection

LATER = "2026-05-06T07-08-09.000000"


def _run(
    root: Path,
    folder: str,
    lines: list[dict],
    *,
    task: str = "capcal_toy",
    date: str = DATE,
    model_name: str = "toy-model",
    model_args: str | None = None,
    metadata: dict | None = None,
) -> Path:
    directory = root / folder
    directory.mkdir(parents=True, exist_ok=True)
    samples = directory / f"samples_{task}_{date}.jsonl"
    samples.write_text("".join(json.dumps(x) + "\n" for x in lines))
    results: dict = {
        "results": {task: {}},
        "configs": {task: {"metadata": metadata or {"capcal_task": "sampling"}}},
        "model_name": model_name,
    }
    if model_args is not None:
        results["config"] = {"model": "hf", "model_args": model_args}
    (directory / f"results_{date}.json").write_text(json.dumps(results))
    return samples


LEADERBOARD_TASK = "capcal_arithmetic_calibration"


def _leaderboard_line(doc_id: int) -> dict:
    """A leaderboard task's samples line: its requests' responses and column items, no capcal record."""
    return {
        "doc_id": doc_id,
        "doc": {"question": f"What is {doc_id} + 1?", "question_id": f"arithmetic/{doc_id:04d}"},
        "target": str(doc_id + 1),
        "resps": [["2", "3"], [["-1.0", "False"]], [["-2.0", "False"]], ["no idea"]],
        "expected_accuracy": 0.5,
        "n_samples": 2,
        "ptrue_available": 1.0,
        "ptrue_brier": 0.25,
    }


def test_leaderboard_runs_are_listed_as_not_used_and_named_when_nothing_else_is_found(tmp_path):
    metadata = {"capcal_task": "leaderboard", "capcal_role": "evaluation"}
    _run(
        tmp_path,
        "logged",
        [_leaderboard_line(0), _leaderboard_line(1)],
        task=LEADERBOARD_TASK,
        metadata=metadata,
    )
    samples = _run(
        tmp_path, "unlogged", [], task=LEADERBOARD_TASK, metadata=metadata, model_name="other-model"
    )
    samples.unlink()  # a run without --log_samples: only its results file
    collection = load_runs([tmp_path])
    assert collection.questions.empty and collection.confidences.empty and not collection.files
    runs = collection.runs.set_index("model")
    assert sorted(runs.index) == ["other-model", "toy-model"]
    assert list(runs["kind"]) == ["leaderboard"] * 2 and not runs["used"].any()
    assert set(runs["reason"]) == {LEADERBOARD_REASON}
    assert runs.loc["other-model", "samples_path"] is None and runs.loc["toy-model", "records"] == 0
    # the unlogged run's identity: sha256 over its results file's digest and the task (what "select" matches)
    results_path = runs.loc["other-model", "results_path"]
    digest = hashlib.sha256(Path(results_path).read_bytes()).hexdigest()
    assert (
        runs.loc["other-model", "run_key"]
        == hashlib.sha256(f"{digest}\0{LEADERBOARD_TASK}".encode()).hexdigest()
    )
    expected = f"{LEADERBOARD_TASK} (leaderboard run {DATE}): {LEADERBOARD_REASON}"
    for read, nothing in [
        (load_run, "no capcal sampling samples"),
        (check_run, "no capcal sampling or confidence samples"),
        (read_elicited, "no capcal confidence-task samples"),
    ]:
        with pytest.raises(FileNotFoundError, match=nothing) as error:
            read(tmp_path)
        assert expected in str(error.value) and "\n" not in str(error.value), read

    _run(tmp_path, "sampled", [_line(0, ["4"] * 4)])  # beside a sampling run: still listed, left out
    collection = load_runs([tmp_path])
    assert len(collection.questions) == 1
    assert sorted(zip(collection.runs["kind"], collection.runs["used"], strict=True)) == [
        ("leaderboard", False),
        ("leaderboard", False),
        ("sampling", True),
    ]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="found no lm-eval results or samples files"):
        load_run(empty)


def test_run_reached_twice_is_read_once(tmp_path):
    """A folder given twice, a folder and its sub-folder, a backup/ copy: 2 questions, not 4 or 8."""
    _run(tmp_path, "m", [_line(0, ["4"] * 4), _line(1, ["5"] * 4)])
    shutil.copytree(tmp_path / "m", tmp_path / "m" / "backup")
    collection = load_runs([tmp_path, tmp_path / "m", tmp_path, tmp_path / "m" / "backup"])
    assert list(collection.questions["question_id"]) == ["toy/0000", "toy/0001"]
    assert len(collection.runs) == 1 and bool(collection.runs.loc[0, "used"])
    (copy, original) = collection.duplicates[0]
    assert "backup" in str(copy) and "backup" not in str(original)
    assert len(load_run(tmp_path)) == 2


def test_same_content_under_another_folder_name_is_one_run_different_content_is_not(tmp_path):
    _run(tmp_path, "a", [_line(0, ["4"] * 4)])
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    assert len(load_runs([tmp_path]).runs) == 1
    _run(tmp_path, "c", [_line(0, ["5"] * 4)])  # same model, task and time; different content
    collection = load_runs([tmp_path])
    runs = collection.runs
    assert len(runs) == 2 and runs["used"].sum() == 1
    assert "different content" in runs.loc[~runs["used"], "reason"].iloc[0]


def test_symlinked_folders_are_followed_and_loops_end(tmp_path):
    _run(tmp_path / "store", "model", [_line(0, ["4"] * 4)])
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(tmp_path / "store" / "model", out / "model")  # a model folder that is a symlink
    os.symlink(out, out / "model_again")  # a loop back to the output folder
    os.symlink(tmp_path / "store" / "model", tmp_path / "store" / "model" / "self")  # a loop onto itself
    collection = load_runs([out])
    assert list(collection.questions["doc_id"]) == [0] and len(collection.runs) == 1


def test_a_link_that_loops_on_itself_is_skipped_as_a_broken_link(tmp_path):
    """A symlink to itself cannot be followed (ELOOP): it is skipped with its reason, the run beside it read,
    and the run table keeps exactly its documented columns."""
    _run(tmp_path, "m", [_line(0, ["4"] * 4)])
    os.symlink(tmp_path / "m" / "loop", tmp_path / "m" / "loop")
    collection = load_runs([tmp_path])
    assert collection.skipped == [(tmp_path / "m" / "loop", "a broken link")]
    assert len(collection.questions) == 1
    assert list(collection.runs.columns) == list(RUN_COLUMNS) and list(collection.runs.index) == [0]


def test_folder_named_like_a_samples_file_is_skipped_with_a_reason(tmp_path):
    _run(tmp_path, "m", [_line(0, ["4"] * 4)])
    (tmp_path / "m" / f"samples_capcal_toy_{LATER}.jsonl").mkdir()
    collection = load_runs([tmp_path])
    assert len(collection.questions) == 1
    ((path, reason),) = collection.skipped
    assert path.name.startswith("samples_") and "named like" in reason


def test_latest_run_is_used_and_the_choice_is_recorded_and_can_be_overridden(tmp_path):
    old = _run(tmp_path, "m", [_line(0, ["4"] * 4)])
    new = _run(tmp_path, "m", [_line(0, ["5"] * 4)], date=LATER)
    collection = load_runs([tmp_path])
    assert list(collection.questions["expected_accuracy"]) == [0.0]  # the later run: all wrong
    runs = collection.runs.set_index("run_id")
    assert runs.loc[LATER, "reason"] == "latest run" and runs.loc[LATER, "samples_path"] == new
    assert not runs.loc[DATE, "used"] and runs.loc[DATE, "reason"].startswith("older than the used run")
    # what the folders hold, in one line: a used run without its reason, one left out with it
    assert collection.found() == (
        f"found instead: capcal_toy (sampling run {DATE}): {runs.loc[DATE, 'reason']}; "
        f"capcal_toy (sampling run {LATER})"
    )

    for select in (
        [DATE],
        [str(old)],
        [str(old.parent / f"results_{DATE}.json")],
        {("toy-model", "capcal_toy"): DATE},
    ):
        chosen = load_runs([tmp_path], select=select)
        assert list(chosen.questions["expected_accuracy"]) == [1.0], select
        assert chosen.runs.set_index("run_id").loc[DATE, "reason"] == "selected"
    key = runs.loc[DATE, "run_key"]
    assert list(load_runs([tmp_path], select=[key[:12]]).questions["run_id"]) == [DATE]
    assert list(load_runs([tmp_path], select=[key[:8]]).questions["run_id"]) == [DATE]  # the shortest prefix
    with pytest.raises(ValueError, match="matches no run"):
        load_runs([tmp_path], select=[key[:7]])  # too short to name a run
    with pytest.raises(ValueError, match="matches no run"):
        load_runs([tmp_path], select=["2031-01-01T00-00-00"])
    with pytest.raises(ValueError, match="matches no run"):
        load_runs([tmp_path], select={("toy-model", "capcal_toy"): "nothing"})
    with pytest.raises(ValueError) as several:  # two runs of one (model, task) selected: which to use?
        load_runs([tmp_path], select=[DATE, LATER])
    assert str(several.value) == f"select: several runs of (toy-model, capcal_toy) selected: {old}, {new}"
    assert sorted(load_run(tmp_path)["run_id"]) == [DATE, LATER]  # load_run keeps every distinct run


@pytest.fixture(scope="module")
def changed_checkpoint(smollm2_path, tmp_path_factory) -> Path:
    """SmolLM2 with one weight byte changed (other files linked): another model under the same name."""
    folder = tmp_path_factory.mktemp("changed") / "smollm2"
    folder.mkdir()
    for path in smollm2_path.iterdir():
        if path.name == "model.safetensors":
            shutil.copyfile(path, folder / path.name)
        else:
            os.symlink(path, folder / path.name)
    weights = folder / "model.safetensors"
    with weights.open("r+b") as handle:
        handle.seek(weights.stat().st_size - 1)
        last = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([last[0] ^ 0x01]))
    return folder


def test_model_identity_is_the_checkpoint_not_its_name(tmp_path, smollm2_path, changed_checkpoint):
    """Trailing slash and symlink join; a changed checkpoint under the same name does not."""
    from capcal_models.model_identity import checkpoint_fingerprint

    os.symlink(smollm2_path, tmp_path / "link")
    confidence = {
        "capcal_task": "verbalized",
        "capcal_role": "confidence",
        "capcal_target_task": "capcal_toy",
    }
    _run(tmp_path, "a", [_line(0, ["4"] * 4)], model_name="smollm2", model_args=f"pretrained={smollm2_path}")
    verbalized = {"doc_id": 0, "doc": {"question_id": "toy/0000"}, "resps": [["\\boxed{0.7}"]]}
    verbalized.update(verbalized_confidence=0.7, parse_success=1, parse_failures=0)
    _run(
        tmp_path,
        "b",
        [verbalized],
        task="capcal_toy_verbalized",
        model_name="smollm2/",
        model_args=f"pretrained={smollm2_path}/,dtype=float32",
        metadata=confidence,
    )
    _run(
        tmp_path,
        "c",
        [{**verbalized, "verbalized_confidence": 0.2}],
        task="capcal_toy_verbalized",
        date=LATER,
        model_name="smollm2",
        model_args=f"pretrained={tmp_path / 'link'}",
        metadata=confidence,
    )
    _run(
        tmp_path,
        "d",
        [_line(0, ["5"] * 4)],
        model_name="smollm2",
        model_args=f"pretrained={changed_checkpoint}",
    )
    collection = load_runs([tmp_path])
    fingerprint = checkpoint_fingerprint(smollm2_path)
    questions = collection.questions.set_index("model_id")
    assert set(questions.index) == {fingerprint, checkpoint_fingerprint(changed_checkpoint)}
    assert questions.loc[fingerprint, "expected_accuracy"] == 1.0  # not mixed with the changed model
    # the two confidence runs (trailing slash, symlink) are one model: the later is used, the other named
    runs = collection.runs[collection.runs["task"] == "capcal_toy_verbalized"]
    assert set(runs["model_id"]) == {fingerprint} and runs["used"].sum() == 1
    joined, (report,) = join_elicited(collection.questions, collection.confidences)
    joined = joined.set_index("model_id")
    assert joined.loc[fingerprint, "verbalized_confidence"] == 0.2
    assert np.isnan(joined.loc[checkpoint_fingerprint(changed_checkpoint), "verbalized_confidence"])
    assert report.matched == 1 and report.unmatched_right == 0
    assert collection.models[fingerprint]["source"] == "checkpoint"


def test_model_label_falls_back_to_the_recorded_model_arguments(tmp_path):
    """Without ``capcal_model.label`` or ``model_name``, the label is the results file's
    ``config.model_args`` checkpoint (``pretrained``, else ``model``, else the arguments as recorded),
    without a trailing slash; the output folder's name only when nothing is recorded."""
    from analysis.runs.identity import _label

    folder = tmp_path / "out-folder"

    def label(model_args: object) -> str:
        return _label({"model_name": "", "config": {"model": "hf", "model_args": model_args}}, folder)

    assert label("pretrained=org/some-model/,dtype=float32") == "org/some-model"
    assert label({"model": "org/other", "dtype": "float32"}) == "org/other"
    assert label("not key value") == "not key value"  # unparsable: kept as recorded
    assert label(None) == "out-folder"
    assert _label({"model_name": "named/", "config": {"model_args": "pretrained=x"}}, folder) == "named"
    assert _label(None, folder) == "out-folder"


def test_unresolved_models_are_those_without_a_checkpoint_fingerprint(tmp_path: Path) -> None:
    """A run whose results file records the checkpoint's fingerprint is resolved; runs with no model
    arguments or no results file are known only by their labels: catches a lookup that misreads the source."""
    fingerprinted = {**results_json(model="fp-model"), "capcal_model": {"fingerprint": "f" * 64}}
    _write_run(tmp_path, [_line(0, ["4", "4"])], folder="a", results=fingerprinted)
    _write_run(tmp_path, [_line(0, ["4", "5"])], folder="b", results=results_json(model="label-model"))
    _write_run(tmp_path, [_line(0, ["5", "5"])], folder="c-folder", with_results=False)
    collection = load_runs([tmp_path / "a", tmp_path / "b", tmp_path / "c-folder"])
    assert {m["label"]: m["source"] for m in collection.models.values()} == {
        "fp-model": "checkpoint",
        "label-model": "unresolved",
        "c-folder": "unresolved",
    }
    assert collection.unresolved_models() == ["c-folder", "label-model"]
    assert collection.models["f" * 64] == {
        "fingerprint": "f" * 64,
        "label": "fp-model",
        "source": "checkpoint",
        "reason": "results file",
    }
    assert collection.models["unresolved:c-folder"] == {
        "fingerprint": None,
        "label": "c-folder",
        "source": "unresolved",
        "reason": "no results file",
    }


def test_responses_are_kept_only_when_asked_for(tmp_path):
    """By default the table keeps each question's first response (and counts the rest); ``responses=True``
    adds every response text, exactly as logged (load_run and load_runs alike: catches a default that keeps
    them)."""
    lines = [_line(0, ["4", "5"]), _line(1, [None, "4"], responses=[" \n ", "  \\boxed{4}  "])]
    _write_run(tmp_path, lines)
    table = load_run(tmp_path)
    assert "responses" not in table.columns
    assert list(table["first_response"]) == ["... \\boxed{4}", " \n "]
    full = load_run(tmp_path, responses=True)
    assert list(full["responses"]) == [line["resps"][0] for line in lines]
    assert full.drop(columns="responses").equals(table)
    collection = load_runs([tmp_path], allow_null_responses=True)
    assert list(collection.questions["empty_responses"]) == [0, 1]
    assert "responses" not in collection.questions.columns  # load_runs keeps them only when asked too
    kept = load_runs([tmp_path], allow_null_responses=True, responses=True).questions
    assert list(kept["responses"]) == [line["resps"][0] for line in lines]
    assert kept.drop(columns="responses").equals(collection.questions)


def test_question_text_and_target_follow_the_doc_keys_then_the_prompt(tmp_path):
    """The question column is the doc's first text among "question", "problem" (MATH-style docs) and
    "Question", else the logged prompt, else ""; the target column is the logged target as text, "" when
    absent and a missing value (not the text "None") when null."""
    lines = [_line(doc_id, ["4", "5"]) for doc_id in range(6)]
    docs = [
        {"problem": "P0", "Question": "Q0"},
        {"Question": "Q1"},
        {"question": "q2", "problem": "p2", "Question": "Q2"},
        {"question": 7, "problem": ["not text"]},
        {},
        {},
    ]
    for doc_id, (line, doc) in enumerate(zip(lines, docs, strict=True)):
        line["doc"] = {**doc, "question_id": f"toy/{doc_id:04d}"}
    del lines[3]["target"]
    lines[4]["target"] = None
    del lines[5]["arguments"]
    lines[5]["target"] = 12
    _write_run(tmp_path, lines)
    table = load_run(tmp_path)
    assert list(table["question"]) == ["P0", "Q1", "q2", "What is 3 + 4 - 3?", "What is 4 + 4 - 4?", ""]
    assert list(table["target"][:4]) == ["4", "4", "4", ""]
    assert list(table["target"].isna()) == [False, False, False, False, True, False]  # null, not "None"
    assert table.loc[5, "target"] == "12"


def test_lines_longer_than_a_read_block(tmp_path, monkeypatch):
    """Samples lines are read in blocks: a line spread over many blocks, blank lines and a last line without
    a newline keep their content and their line numbers."""
    import capcal_tasks.records as records

    monkeypatch.setattr(records, "_CHUNK_BYTES", 7)
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b'{"a": "' + b"x" * 50 + b'"}\n\n  \n{"b": 1}\n{"c": [1, 2]}')
    assert list(records.iter_json_lines(path)) == [(1, {"a": "x" * 50}), (4, {"b": 1}), (5, {"c": [1, 2]})]
    path.write_bytes(b'{"a": 1}\n{"b": 2\n')
    with pytest.raises(RunFormatError, match=f"{path}:2: malformed"):
        list(records.iter_json_lines(path))


def test_a_question_table_file_holds_the_tables_columns_only_whatever_its_index(tmp_path):
    """A table selected from a larger one keeps its row labels (here 7 and 3); no written format adds them
    as a column: a CSV, JSON-lines or Parquet reader (pyarrow's own, not pandas' round trip) sees exactly
    the table's columns, rows in the table's order."""
    import pyarrow.parquet as pq

    table = pd.DataFrame({"question_id": ["q7", "q3"], "expected_accuracy": [0.5, 0.25]}, index=[7, 3])
    parquet = pq.read_table(write_question_table(table, tmp_path / "t.parquet"))
    assert parquet.column_names == ["question_id", "expected_accuracy"]
    assert parquet.to_pydict() == {"question_id": ["q7", "q3"], "expected_accuracy": [0.5, 0.25]}
    csv_lines = write_question_table(table, tmp_path / "t.csv").read_text().splitlines()
    assert csv_lines == ["question_id,expected_accuracy", "q7,0.5", "q3,0.25"]
    lines = write_question_table(table, tmp_path / "t.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {"question_id": "q7", "expected_accuracy": 0.5},
        {"question_id": "q3", "expected_accuracy": 0.25},
    ]


def test_the_confidence_table_has_its_documented_columns_in_order(tmp_path):
    """``RunCollection.confidences`` (and ``read_elicited``) lists the columns of ``CONFIDENCE_COLUMNS`` in
    the documented order, each value under its own name; catches a reordered column list."""
    metadata = {"capcal_task": "verbalized", "capcal_role": "confidence", "capcal_target_task": "capcal_toy"}
    verbalized = {"doc_id": 3, "doc": {"question_id": "toy/0003"}, "resps": [["\\boxed{0.7}"]]}
    verbalized.update(verbalized_confidence=0.7, parse_success=1, parse_failures=0)
    _run(tmp_path, "v", [verbalized], task="capcal_toy_verbalized", metadata=metadata)
    columns = [
        "model", "model_id", "task", "target_task", "run_id", "run_key", "kind", "doc_id", "question_id",
        "confidence", "parse_success", "response_correct", "logprob_yes", "logprob_no", "p_yes",
        "p_yes_normalized", "response_correctness",
    ]  # fmt: skip
    for table in (load_runs([tmp_path]).confidences, read_elicited(tmp_path)):
        assert list(table.columns) == columns
        row = table.iloc[0]
        assert row[["model", "task", "target_task", "kind"]].tolist() == [
            "toy-model", "capcal_toy_verbalized", "capcal_toy", "verbalized"
        ]  # fmt: skip
        assert row[["doc_id", "question_id", "confidence"]].tolist() == [3, "toy/0003", 0.7]
