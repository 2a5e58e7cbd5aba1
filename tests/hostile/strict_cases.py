"""Hostile cases for strict records, run identity, folders and joins (issue 10), registered in
``cases.CASES``.

Each violation must give a one-line ``RunFormatError`` naming file:line, or the right table (a run read once,
the latest run used and the other listed with its reason, a join that counts what it could not match).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.estimators.elicited import join_elicited, read_elicited
from analysis.runs import RunFormatError, load_run, load_runs
from analysis.runs.completeness import check_run
from capcal_tasks.confidence.ptrue import p_true

from .cases import LINE2, Raises, Returns, _mutated, assert_equal, case, good, run_with_second_line
from .logs import DATE, LATER, MODEL_FOLDER, TASK, confidence_line, results_json, sampling_line, write_run

STRICT = "strict records"
FOLDERS = "folders and run identity"
JOINS = "joins"


def _raw(record: dict) -> str:
    return json.dumps(record)


# ---------------------------------------------------------------- strict JSON


@case(
    "duplicate_key_in_samples_line",
    STRICT,
    "Python's json keeps the last of two equal keys silently; which one was meant is unknown",
    Raises(RunFormatError, LINE2, "duplicate key 'expected_accuracy'"),
)
def _(root: Path) -> Any:
    text = _raw(_mutated()).rstrip("}") + ', "expected_accuracy": 0.25}'
    return run_with_second_line(root, text)


@case(
    "duplicate_key_in_results_file",
    STRICT,
    "a results file with two model_name keys names two models",
    Raises(RunFormatError, "{results}:3", "duplicate key 'model_name'"),
)
def _(root: Path) -> Any:
    text = '{"results": {"capcal_toy": {}},\n"model_name": "a",\n"model_name": "b",\n'
    text += '"configs": {"capcal_toy": {"metadata": {"capcal_task": "sampling"}}}}'
    write_run(root, [good(0)], results=text)
    return load_run(root)


@case(
    "infinity_in_pass_at",
    STRICT,
    "Infinity is not JSON and no pass@k",
    Raises(RunFormatError, LINE2, "non-finite number Infinity"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, json.dumps(_mutated(pass_at_1=math.inf)))


@case(
    "minus_infinity_in_results",
    STRICT,
    "-Infinity in a results file",
    Raises(RunFormatError, "{results}:1", "non-finite number -Infinity"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)], results=json.dumps({**results_json(), "x": -math.inf}))
    return load_run(root)


@case(
    "nan_aggregate_in_results_accepted",
    STRICT,
    "lm-eval writes NaN for an undefined aggregate (a mean over no parsed confidence, a stderr of n=1): "
    "lm-eval's own, not read by capcal, accepted there only",
    Returns(lambda table: assert_equal(list(table["doc_id"]), [0])),
)
def _(root: Path) -> Any:
    results = results_json()
    results["results"][TASK] = {"expected_accuracy,all_responses": 1.0, "stderr": math.nan}
    results["groups"] = {"g": {"x": -math.inf}}
    write_run(root, [good(0)], results=json.dumps(results))
    return load_run(root)


@case(
    "nan_in_results_config",
    STRICT,
    "NaN outside lm-eval's aggregate sections (here: a task config) is rejected with its line",
    Raises(RunFormatError, "{results}:10", "non-finite number NaN in 'configs'"),
)
def _(root: Path) -> Any:
    results = results_json()
    results["configs"][TASK]["temperature"] = math.nan
    write_run(root, [good(0)], results=json.dumps(results, indent=1))
    return load_run(root)


@case(
    "deeply_nested_samples_line",
    STRICT,
    "100k nested arrays overflow the parser's recursion: an error with file and line, no RecursionError",
    Raises(RunFormatError, LINE2, "nested too deeply"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, "[" * 100_000 + "]" * 100_000)


@case(
    "deeply_nested_results_file",
    STRICT,
    "the same in a results file",
    Raises(RunFormatError, "{results}:1", "nested too deeply"),
)
def _(root: Path) -> Any:
    nested = '{"results": {}, "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    write_run(root, [good(0)], results=nested)
    return load_run(root)


@case(
    "deeply_nested_object_in_doc",
    STRICT,
    "nesting inside an otherwise valid record",
    Raises(RunFormatError, LINE2, "nested too deeply"),
)
def _(root: Path) -> Any:
    text = _raw(_mutated()).replace(
        '"doc": {', '"deep": ' + '{"a": ' * 60_000 + "1" + "}" * 60_000 + ', "doc": {'
    )
    return run_with_second_line(root, text)


# ---------------------------------------------------------------- derived fields


@case(
    "pass_at_7_5",
    STRICT,
    "pass@k is a probability; 7.5 is what the correctness vector can never imply",
    Raises(RunFormatError, LINE2, "pass_at_1 = 7.5"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(pass_at_1=7.5))


@case(
    "pass_at_slightly_wrong",
    STRICT,
    "a plausible but wrong pass@2: 1 of 4 correct implies 1 - C(3,2)/C(4,2) = 0.5, not 0.6",
    Raises(RunFormatError, LINE2, "pass_at_2 = 0.6"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(pass_at_2=0.6))


@case(
    "pass_at_as_text",
    STRICT,
    "a number written as text",
    Raises(RunFormatError, LINE2, "pass_at_4 must be a finite number, got '1.0'"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(pass_at_4="1.0"))


@case(
    "pass_at_null",
    STRICT,
    "null is not a pass@k value (never read as 0)",
    Raises(RunFormatError, LINE2, "pass_at_1 must be a finite number, got None"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(pass_at_1=None))


@case(
    "pass_at_level_above_k",
    STRICT,
    "pass@8 from 4 samples does not exist",
    Raises(RunFormatError, LINE2, "pass_at_8 is not a pass@m level for k = 4"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(pass_at_8=1.0))


@case(
    "pass_at_bad_name",
    STRICT,
    "pass_at_two is not a level",
    Raises(RunFormatError, LINE2, "pass_at_two is not a pass@m level"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(pass_at_two=0.5))


@case(
    "majority_vote_42",
    STRICT,
    "an accuracy of 42",
    Raises(RunFormatError, LINE2, "majority_vote_accuracy = 42.0 is not in [0, 1]"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(majority_vote_accuracy=42))


@case(
    "majority_vote_contradicts_answers",
    STRICT,
    "the only correct answer is also the most common one: the vote is right (1), not 0",
    Raises(RunFormatError, LINE2, "majority_vote_accuracy 0.0 is not what the extracted answers"),
)
def _(root: Path) -> Any:
    line = sampling_line(1, ["4", "4", "5", None])
    return run_with_second_line(root, {**line, "majority_vote_accuracy": 0.0})


@case(
    "majority_vote_as_text",
    STRICT,
    "text in a numeric field",
    Raises(RunFormatError, LINE2, "majority_vote_accuracy must be a finite number"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(majority_vote_accuracy="1"))


@case(
    "n_samples_wrong",
    STRICT,
    "n_samples must be the number of responses logged",
    Raises(RunFormatError, LINE2, "n_samples 5 is not the 4 responses logged"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(n_samples=5))


@case(
    "n_samples_float",
    STRICT,
    "4.0 is not a count",
    Raises(RunFormatError, LINE2, "n_samples must be an integer"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(n_samples=4.0))


@case(
    "correctness_contradicts_extracted_answers",
    STRICT,
    "the same extracted answer '4' judged correct once and wrong once: the vector is not the checker's",
    Raises(RunFormatError, LINE2, "the extracted answer '4' is judged both correct and incorrect"),
)
def _(root: Path) -> Any:
    line = sampling_line(1, ["4", "4", "5", "5"])
    line.update(
        correctness=[1, 0, 0, 0], expected_accuracy=0.25, pass_at_1=0.25, pass_at_2=0.5, pass_at_4=1.0
    )
    line["majority_vote_accuracy"] = 0.5
    return run_with_second_line(root, line)


@case(
    "no_answer_marked_correct",
    STRICT,
    "a response without an extracted answer cannot be correct",
    Raises(RunFormatError, LINE2, "response 4 has no extracted answer but is marked correct"),
)
def _(root: Path) -> Any:
    line = sampling_line(1, ["4", "5", "5", None])
    line.update(
        correctness=[1, 0, 0, 1], expected_accuracy=0.5, pass_at_1=0.5, pass_at_2=5 / 6, pass_at_4=1.0
    )
    return run_with_second_line(root, line)


@case(
    "null_response",
    STRICT,
    "a null response is missing, never the text 'None'",
    Raises(RunFormatError, LINE2, "response 3 is null"),
)
def _(root: Path) -> Any:
    line = _mutated()  # response 3 has no extracted answer; here the response itself is null
    line["resps"] = [[*line["resps"][0][:2], None, line["resps"][0][3]]]
    return run_with_second_line(root, line)


def _check_null_counted(checks: Any) -> None:
    assert int(checks.loc[0, "null_responses"]) == 1 and not bool(checks.loc[0, "complete"])


@case(
    "null_response_in_check",
    STRICT,
    "capcal check counts a null response as missing: the run is incomplete, never complete",
    Returns(_check_null_counted),
)
def _(root: Path) -> Any:
    line = _mutated()  # response 3 has no extracted answer; here the response itself is null
    line["resps"] = [[*line["resps"][0][:2], None, line["resps"][0][3]]]
    write_run(root, [good(0), line])
    return check_run(root)


@case(
    "response_is_a_number",
    STRICT,
    "responses are text; a number means another writer",
    Raises(RunFormatError, LINE2, "response 1 must be text, got int"),
)
def _(root: Path) -> Any:
    line = _mutated()
    line["resps"] = [[4, *line["resps"][0][1:]]]
    return run_with_second_line(root, line)


@case(
    "extracted_answer_is_a_number",
    STRICT,
    "extracted answers are text or null",
    Raises(RunFormatError, LINE2, "extracted answer 1 must be text or null, got int"),
)
def _(root: Path) -> Any:
    line = _mutated()
    line["extracted_answers"][0] = 4
    return run_with_second_line(root, line)


@case(
    "doc_id_negative",
    STRICT,
    "lm-eval's doc ids count from 0",
    Raises(RunFormatError, LINE2, "'doc_id' must be an integer >= 0"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(doc_id=-3))


@case(
    "question_id_not_text",
    STRICT,
    "a question id is a non-empty string",
    Raises(RunFormatError, LINE2, "doc question_id must be non-empty text"),
)
def _(root: Path) -> Any:
    line = _mutated()
    line["doc"]["question_id"] = 17
    return run_with_second_line(root, line)


@case(
    "null_target_not_text",
    STRICT,
    "a null gold target stays null (never the text 'None')",
    Returns(
        lambda table: assert_equal((pd.isna(table.loc[1, "target"]), table.loc[0, "target"]), (True, "4"))
    ),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(target=None))


# ---------------------------------------------------------------- results-file config


def _results_with(**config: object) -> str:
    results = results_json()
    results["configs"][TASK].update(config)
    return json.dumps(results, indent=1)


@case(
    "repeats_zero",
    STRICT,
    "repeats: 0 asks for no samples",
    Raises(RunFormatError, "{results}:", "repeats must be a positive integer, got 0"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)], results=_results_with(repeats=0))
    return load_run(root)


@case(
    "repeats_as_text",
    STRICT,
    "repeats '16' is text",
    Raises(RunFormatError, "{results}:", "repeats must be a positive integer, got '16'"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)], results=_results_with(repeats="16"))
    return load_run(root)


@case(
    "repeats_true",
    STRICT,
    "true is not a count",
    Raises(RunFormatError, "{results}:", "repeats must be a positive integer, got True"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)], results=_results_with(repeats=True))
    return load_run(root)


@case(
    "repeats_line_named",
    STRICT,
    "the error names the line of the bad repeats",
    Raises(RunFormatError, "{results}:10", "repeats must be a positive integer, got -4"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)], results=_results_with(repeats=-4))
    return load_run(root)


@case(
    "capcal_model_not_an_object",
    STRICT,
    "the model identity written by capcal eval must be an object",
    Raises(RunFormatError, "{results}", "'capcal_model' must be an object"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)], results={**results_json(), "capcal_model": "sha256:x"})
    return load_run(root)


@case(
    "capcal_rescore_not_an_object",
    STRICT,
    "the labels' provenance written by capcal rescore must be an object",
    Raises(RunFormatError, "{results}", "'capcal_rescore' must be a JSON object"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)], results={**results_json(), "capcal_rescore": "judge"})
    return load_run(root)


# ---------------------------------------------------------------- confidence records

CONF = "capcal_toy_ptrue"


def _confidence_path(task: str = CONF) -> str:
    return "{tmp}/" + MODEL_FOLDER + "/samples_" + task + "_" + DATE + ".jsonl"


def _elicited(root: Path, *lines: str, task: str = CONF) -> Any:
    write_run(root, list(lines), task=task, results={"results": {task: {}}, "model_name": "toy-model"})
    return read_elicited(root)


@case(
    "p_true_contradicts_logprobs",
    STRICT,
    "P(True) must be exp(lp_yes)/(exp(lp_yes)+exp(lp_no)); 0.9 with equal log-probabilities is 0.5",
    Raises(RunFormatError, _confidence_path() + ":2", "p_true = 0.9 contradicts its log-probabilities"),
)
def _(root: Path) -> Any:
    return _elicited(root, confidence_line(0, "ptrue"), confidence_line(1, "ptrue", p_true=0.9))


def _check_p_true(elicited: Any) -> None:
    assert abs(elicited.loc[0, "confidence"] - p_true(-0.1, -2.0)) < 1e-15


@case(
    "p_true_within_1e_6",
    STRICT,
    "a P(True) rounded to 7 digits is the same number",
    Returns(_check_p_true),
)
def _(root: Path) -> Any:
    return _elicited(
        root, confidence_line(0, "ptrue", p_true=p_true(-0.1, -2.0), logprob_yes=-0.1, logprob_no=-2.0)
    )


@case(
    "p_true_without_logprobs",
    STRICT,
    "a P(True) that cannot be checked is not trusted",
    Raises(RunFormatError, _confidence_path() + ":1", "missing key(s) logprob_yes"),
)
def _(root: Path) -> Any:
    return _elicited(root, json.dumps({"doc_id": 0, "doc": {"question_id": "toy/0"}, "p_true": 0.5}))


@case(
    "logprob_positive",
    STRICT,
    "a log-probability above 0",
    Raises(RunFormatError, _confidence_path() + ":1", "logprob_yes = 0.5 is a log-probability above 0"),
)
def _(root: Path) -> Any:
    return _elicited(root, confidence_line(0, "ptrue", logprob_yes=0.5))


@case(
    "selfcheck_p_yes_contradicts_logprob",
    STRICT,
    "p_yes is exp(logprob_yes)",
    Raises(RunFormatError, _confidence_path("capcal_toy_selfcheck") + ":1", "p_yes[1] = 0.9 is not exp"),
)
def _(root: Path) -> Any:
    lp = math.log(0.5)
    line = confidence_line(
        0,
        "selfcheck",
        p_yes=[0.5, 0.9],
        p_yes_normalized=[0.5, 0.5],
        logprob_yes=[lp, lp],
        logprob_no=[lp, lp],
    )
    return _elicited(root, line, task="capcal_toy_selfcheck")


@case(
    "verbalized_parse_failures_contradicts",
    STRICT,
    "parse_failures must be 1 - parse_success",
    Raises(RunFormatError, _confidence_path("capcal_toy_verbalized") + ":1", "parse_failures disagrees"),
)
def _(root: Path) -> Any:
    return _elicited(root, confidence_line(0, parse_failures=1), task="capcal_toy_verbalized")


@case(
    "confidence_duplicate_key",
    STRICT,
    "duplicate keys in a confidence record",
    Raises(RunFormatError, _confidence_path() + ":1", "duplicate key 'p_true'"),
)
def _(root: Path) -> Any:
    return _elicited(root, confidence_line(0, "ptrue").rstrip("}") + ', "p_true": 0.9}')


# ---------------------------------------------------------------- folders and run identity


def _check_once(collection: Any) -> None:
    assert list(collection.questions["doc_id"]) == [0, 1], collection.questions["doc_id"].tolist()
    assert len(collection.runs) == 1 and len(collection.duplicates) >= 1


@case(
    "backup_copy_inside_output",
    FOLDERS,
    "a backup/ copy of a run inside the output folder was read twice (questions: 4 for 2); read once",
    Returns(_check_once),
)
def _(root: Path) -> Any:
    write_run(root, [good(0), good(1)])
    shutil.copytree(root / MODEL_FOLDER, root / MODEL_FOLDER / "backup")
    return load_runs([root])


@case(
    "folder_given_twice",
    FOLDERS,
    "the same folder passed twice is one run",
    Returns(lambda c: assert_equal((len(c.questions), len(c.runs)), (2, 1))),
)
def _(root: Path) -> Any:
    write_run(root, [good(0), good(1)])
    return load_runs([root, root, root / MODEL_FOLDER])


@case(
    "folder_and_its_subfolder",
    FOLDERS,
    "a folder and its own sub-folder (either order) are read once",
    Returns(lambda c: assert_equal((len(c.questions), len(c.runs)), (2, 1))),
)
def _(root: Path) -> Any:
    write_run(root, [good(0), good(1)])
    return load_runs([root / MODEL_FOLDER, root])


@case(
    "copy_under_another_name",
    FOLDERS,
    "a byte-identical copy in a sibling folder is the same run (identity is content, not path)",
    Returns(_check_once),
)
def _(root: Path) -> Any:
    write_run(root, [good(0), good(1)])
    shutil.copytree(root / MODEL_FOLDER, root / "copy_of_model")
    return load_runs([root])


@case(
    "symlinked_model_folder",
    FOLDERS,
    "a model folder that is a symlink was not read at all; it is followed",
    Returns(lambda c: assert_equal(list(c.questions["doc_id"]), [0, 1])),
)
def _(root: Path) -> Any:
    write_run(root / "elsewhere", [good(0), good(1)])
    (root / "out").mkdir()
    os.symlink(root / "elsewhere" / MODEL_FOLDER, root / "out" / "model_link")
    return load_runs([root / "out"])


@case(
    "symlink_loop",
    FOLDERS,
    "a link to an ancestor folder ends, each folder read once",
    Returns(lambda c: assert_equal((len(c.questions), len(c.runs)), (2, 1))),
    time_limit_s=20,
)
def _(root: Path) -> Any:
    write_run(root, [good(0), good(1)])
    os.symlink(root, root / MODEL_FOLDER / "loop")
    os.symlink(root / MODEL_FOLDER, root / MODEL_FOLDER / "self")
    return load_runs([root])


@case(
    "broken_symlink",
    FOLDERS,
    "a dangling link is not a run",
    Returns(lambda c: assert_equal(len(c.questions), 2)),
)
def _(root: Path) -> Any:
    write_run(root, [good(0), good(1)])
    os.symlink(root / "nowhere", root / "dangling")
    return load_runs([root])


def _check_skipped_directory(collection: Any) -> None:
    assert len(collection.questions) == 1
    assert any("named like" in reason for _, reason in collection.skipped), collection.skipped


@case(
    "directory_named_like_samples_file",
    FOLDERS,
    "was an IsADirectoryError traceback; skipped with a reason",
    Returns(_check_skipped_directory),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)])
    (root / MODEL_FOLDER / f"samples_capcal_other_{LATER}.jsonl").mkdir()
    return load_runs([root])


@case(
    "directory_named_like_results_file",
    FOLDERS,
    "a folder called results_<time>.json is skipped with a reason",
    Returns(_check_skipped_directory),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)])
    (root / "other" / f"results_{LATER}.json").mkdir(parents=True)
    return load_runs([root])


def _check_latest(collection: Any) -> None:
    assert list(collection.questions["run_id"]) == [LATER]
    runs = collection.runs.set_index("run_id")
    assert bool(runs.loc[LATER, "used"]) and runs.loc[LATER, "reason"] == "latest run"
    assert not bool(runs.loc[DATE, "used"]) and "older than the used run" in runs.loc[DATE, "reason"]


@case(
    "several_runs_latest_used_and_said",
    FOLDERS,
    "two runs of one (model, task): the latest is used, the other listed with the reason",
    Returns(_check_latest),
)
def _(root: Path) -> Any:
    write_run(root, [sampling_line(0, ["4"] * 4)])
    write_run(root, [sampling_line(0, ["5"] * 4)], date=LATER)
    return load_runs([root])


def _check_selected(collection: Any) -> None:
    assert list(collection.questions["run_id"]) == [DATE]
    runs = collection.runs.set_index("run_id")
    assert runs.loc[DATE, "reason"] == "selected" and "not selected" in runs.loc[LATER, "reason"]


@case(
    "several_runs_user_selects_older",
    FOLDERS,
    "the user picks the older run by its run id",
    Returns(_check_selected),
)
def _(root: Path) -> Any:
    write_run(root, [sampling_line(0, ["4"] * 4)])
    write_run(root, [sampling_line(0, ["5"] * 4)], date=LATER)
    return load_runs([root], select=[DATE])


@case(
    "select_by_path_per_model_task",
    FOLDERS,
    "the user picks a run by its samples path for one (model, task)",
    Returns(_check_selected),
)
def _(root: Path) -> Any:
    path = write_run(root, [sampling_line(0, ["4"] * 4)])
    write_run(root, [sampling_line(0, ["5"] * 4)], date=LATER)
    return load_runs([root], select={("toy-model", TASK): str(path)})


@case(
    "select_matches_nothing",
    FOLDERS,
    "a selector that matches no run is an error, not a silent default",
    Raises(ValueError, "", "matches no run"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)])
    return load_runs([root], select=["2030-01-01T00-00-00"])


@case(
    "trailing_slash_same_unresolved_model",
    FOLDERS,
    "pretrained=/x/m/ and /x/m are one model (label without the slash), said to be unresolved",
    Returns(lambda c: assert_equal(sorted(set(c.questions["model_id"])), ["unresolved:/x/m"])),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)], folder="a", results=results_json(model="/x/m/"))
    write_run(root, [good(1)], folder="b", task="capcal_other", results=results_json("capcal_other", "/x/m"))
    return load_runs([root])


# ---------------------------------------------------------------- joins


def _join_lines(root: Path, target: str | None, qids: list[str], task: str = "capcal_toy_verbalized") -> None:
    metadata = {"capcal_task": "verbalized", "capcal_role": "confidence"}
    if target:
        metadata["capcal_target_task"] = target
    lines = [confidence_line(i, doc={"question_id": q, "question_text": "q"}) for i, q in enumerate(qids)]
    results = {"results": {task: {}}, "configs": {task: {"metadata": metadata}}, "model_name": "toy-model"}
    write_run(root, lines, task=task, folder="conf", results=results)


def _check_unmatched(value: Any) -> None:
    joined, (report,) = value
    assert (report.matched, report.unmatched_right, report.unmatched_left) == (2, 2, 1)
    assert "toy/0090" in " ".join(report.unmatched_right_ids)
    assert joined["verbalized_confidence"].notna().sum() == 2


@case(
    "confidence_questions_not_in_sampling_run",
    JOINS,
    "records whose questions are not in the sampling run were dropped and the report said 'failures 0'",
    Returns(_check_unmatched),
)
def _(root: Path) -> Any:
    write_run(root, [good(0), good(1), good(2)])
    _join_lines(root, TASK, ["toy/0000", "toy/0001", "toy/0090", "toy/0091"])
    collection = load_runs([root])
    return join_elicited(collection.questions, collection.confidences)


def _check_task_in_key(value: Any) -> None:
    joined, (report,) = value
    assert joined["verbalized_confidence"].isna().all()  # the Verified records do not attach to SimpleQA
    assert report.unmatched_right == 2 and report.matched == 0


@case(
    "shared_question_ids_other_task",
    JOINS,
    "SimpleQA and SimpleQA-Verified share question ids: a confidence task joins only its target task",
    Returns(_check_task_in_key),
)
def _(root: Path) -> Any:
    write_run(root, [good(0), good(1)])
    _join_lines(root, "capcal_toy_verified", ["toy/0000", "toy/0001"])
    collection = load_runs([root])
    return join_elicited(collection.questions, collection.confidences)


def _check_undeclared(value: Any) -> None:
    joined, (report,) = value
    assert joined["verbalized_confidence"].isna().all() and report.unmatched_right == 1
    assert "no declared target task" in report.summary()


@case(
    "confidence_task_without_declaration",
    JOINS,
    "a confidence task that declares no target is not guessed from its name: counted, not joined",
    Returns(_check_undeclared),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)])
    task = "capcal_toy_verbalized"
    write_run(root, [confidence_line(0)], task=task, folder="conf", results={"results": {task: {}}})
    collection = load_runs([root])
    return join_elicited(collection.questions, collection.confidences)


def _check_other_model(value: Any) -> None:
    joined, (report,) = value
    assert joined["verbalized_confidence"].isna().all() and report.unmatched_right == 1


@case(
    "confidence_of_another_model",
    JOINS,
    "a confidence run of another model does not attach by question id",
    Returns(_check_other_model),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)], results=results_json(model="model-a"))
    task = "capcal_toy_verbalized"
    metadata = {"capcal_task": "verbalized", "capcal_role": "confidence", "capcal_target_task": TASK}
    results = {"results": {task: {}}, "configs": {task: {"metadata": metadata}}, "model_name": "model-b"}
    write_run(root, [confidence_line(0)], task=task, folder="conf", results=results)
    collection = load_runs([root])
    return join_elicited(collection.questions, collection.confidences)


def _gsm8k_line(doc_id: int, responses: list[str], gold: float = 4.0) -> dict:
    from capcal_tasks.gsm8k.task import process_results

    doc = {"question": f"q{doc_id}", "question_id": f"gsm8k/{doc_id:04d}", "gold_answer": gold}
    record = process_results(doc, [responses])
    return {"doc_id": doc_id, "doc": doc, "target": str(gold), "resps": [responses], **record}


def _gsm8k_run(root: Path, lines: list[dict]) -> Any:
    task = "capcal_gsm8k"
    results = {"results": {task: {}}, "configs": {task: {"metadata": {"capcal_task": "sampling"}}}}
    write_run(root, lines, task=task, results={**results, "model_name": "toy-model"})
    return load_run(root)


def _gsm8k_samples() -> str:
    return "{tmp}/" + MODEL_FOLDER + "/samples_capcal_gsm8k_" + DATE + ".jsonl"


@case(
    "correctness_vector_swapped_checker_rerun",
    STRICT,
    "a correctness vector consistent with every derived field but not with the gold: the task's own "
    "checker (re-run, gold logged in the doc) finds it",
    Raises(
        RunFormatError,
        _gsm8k_samples() + ":2",
        "response 1 is logged with correctness 0, the task's checker gives 1",
    ),
)
def _(root: Path) -> Any:
    good_line = _gsm8k_line(0, ["\\boxed{4}", "\\boxed{5}"])
    bad = _gsm8k_line(1, ["\\boxed{4}", "\\boxed{4}", "\\boxed{5}", "\\boxed{5}"])
    bad["correctness"] = [0, 0, 1, 1]
    bad["doc"]["gold_answer"] = 4.0
    return _gsm8k_run(root, [good_line, bad])


@case(
    "extracted_answer_not_the_responses",
    STRICT,
    "an extracted answer that the task's extractor does not find in its response",
    Raises(
        RunFormatError, _gsm8k_samples() + ":1", "extracted answer 2 is '5', the task's extractor gives '6'"
    ),
)
def _(root: Path) -> Any:
    line = _gsm8k_line(0, ["\\boxed{4}", "\\boxed{6}"])
    line["extracted_answers"] = ["4", "5"]
    return _gsm8k_run(root, [line])


@case(
    "real_gsm8k_records_pass_the_recheck",
    STRICT,
    "records written by the task's own process_results load unchanged",
    Returns(lambda table: assert_equal(list(table["expected_accuracy"]), [0.5, 0.0])),
)
def _(root: Path) -> Any:
    return _gsm8k_run(
        root, [_gsm8k_line(0, ["\\boxed{4}", "4.5"]), _gsm8k_line(1, ["\\boxed{3}", "\\boxed{5}"])]
    )
