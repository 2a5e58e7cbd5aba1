"""Hostile cases for the inputs of analyze, check and report (issue 25), registered in ``cases.CASES``.

A link that loops in a run folder is a one-line file error; a confidence source that never parsed makes its
run incomplete; runs with nothing to score are named before the report is built, and a folder with nothing
at all to score is an error.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from analysis.report.input_notices import NothingToScoreError, report_notices
from analysis.runs import RunFormatError, load_run, load_runs
from analysis.runs.completeness import check_run

from .cases import Raises, Returns, case, good
from .logs import TASK, confidence_line, results_path, samples_path, sampling_line, write_run

INPUTS = "inputs of analyze, check and report"
LOOP = "Too many levels of symbolic links"


def _looping_samples(root: Path) -> None:
    write_run(root, [good(0)])
    samples = samples_path(root)
    samples.unlink()
    os.symlink(samples.name, samples)  # a link to itself


@case(
    "samples_file_links_to_itself_analyze",
    INPUTS,
    "was an OSError traceback in capcal analyze; the file is named instead",
    Raises(RunFormatError, "{samples}", LOOP),
)
def _(root: Path) -> Any:
    _looping_samples(root)
    return load_run(root)


@case(
    "samples_file_links_to_itself_check",
    INPUTS,
    "was an OSError traceback in capcal check",
    Raises(RunFormatError, "{samples}", "a link that loops or points nowhere? fix or remove it"),
)
def _(root: Path) -> Any:
    _looping_samples(root)
    return check_run(root)


@case(
    "results_file_links_to_itself",
    INPUTS,
    "the results file of a run is a link to itself",
    Raises(RunFormatError, "{results}", LOOP),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)])
    results = results_path(root)
    results.unlink()
    os.symlink(results.name, results)
    return load_runs([root])


@case(
    "two_samples_links_pointing_at_each_other",
    INPUTS,
    "a loop of two links: the first one met is named",
    Raises(RunFormatError, "{tmp}/model__x/samples_capcal_", LOOP),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)])
    samples = samples_path(root)
    samples.unlink()
    other = samples.with_name(samples.name.replace(TASK, "capcal_other"))
    os.symlink(other.name, samples)
    os.symlink(samples.name, other)
    return load_run(root)


@case(
    "samples_link_to_a_missing_file",
    INPUTS,
    "a dangling link named like a samples file: a file error, not a silently empty folder",
    Raises(RunFormatError, "{samples}", "No such file or directory"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)])
    samples = samples_path(root)
    samples.unlink()
    os.symlink("gone.jsonl", samples)
    return load_run(root)


def _confidence_run(root: Path, lines: list[str], model: str = "toy-model") -> None:
    task = "capcal_toy_verbalized"
    metadata = {"capcal_task": "verbalized", "capcal_role": "confidence", "capcal_target_task": TASK}
    results = {"results": {task: {}}, "configs": {task: {"metadata": metadata}}, "model_name": model}
    write_run(root, lines, task=task, folder=f"conf_{model}", results=results)


def _never_parsed(line: int) -> str:
    return confidence_line(line, verbalized_confidence=None, parse_success=0, parse_failures=1)


def _check_unparsed(checks: Any) -> None:
    row = checks.set_index("task").loc["capcal_toy_verbalized"]
    assert (row["unparsed"], bool(row["complete"])) == (3, False), row.to_dict()
    assert row["problems"].startswith("verbalized confidence parsed for 0 of 3 records, fewer than half")
    assert "\\boxed{P}" in row["problems"]  # the likely cause
    assert bool(checks.set_index("task").loc[TASK, "complete"])


@case(
    "verbalized_confidence_never_parsed",
    INPUTS,
    "40 of 40 verbalized records without \\boxed{P}: capcal check called the run complete",
    Returns(_check_unparsed),
)
def _(root: Path) -> Any:
    write_run(root, [good(0), good(1), good(2)])
    _confidence_run(root, [_never_parsed(i) for i in range(3)])
    return check_run(root)


def _check_half_parsed(checks: Any) -> None:
    row = checks.set_index("task").loc["capcal_toy_verbalized"]
    assert (row["unparsed"], bool(row["complete"])) == (1, True), row.to_dict()


@case(
    "verbalized_confidence_half_parsed",
    INPUTS,
    "one of two unparsed is not fewer than half parsed: complete, the count still shown",
    Returns(_check_half_parsed),
)
def _(root: Path) -> Any:
    write_run(root, [good(0), good(1)])
    _confidence_run(root, [confidence_line(0), _never_parsed(1)])
    return check_run(root)


@case(
    "report_of_confidence_runs_only",
    INPUTS,
    "a report of bookkeeping tables with exit status 0; now an error naming what the folder holds",
    Raises(
        NothingToScoreError, "{tmp}", "no capcal sampling run; found confidence runs of capcal_toy_verbalized"
    ),
)
def _(root: Path) -> Any:
    _confidence_run(root, [confidence_line(0)])
    return report_notices([root])


@case(
    "report_of_an_empty_folder",
    INPUTS,
    "nothing at all: an error, not an empty report",
    Raises(NothingToScoreError, "{tmp}", "found no lm-eval results or samples files"),
)
def _(root: Path) -> Any:
    return report_notices([root])


def _check_notices(notices: list[str]) -> None:
    assert notices == [
        "capcal_toy_verbalized (other-model) scores capcal_toy, which has no sampling run of that model "
        "here: its confidences are left out",
        "--activations /no/such/activations: no such folder; the probe is left out",
        "capcal_toy (toy-model) has k = 1 response per question: mu_hat is 0 or 1, so capability calibration "
        "is only response calibration, and consistency and pass@k (k > 1) are missing",
    ], notices


@case(
    "report_inputs_that_leave_things_out",
    INPUTS,
    "a wrong --activations folder, a confidence run of a model without a sampling run, and k = 1 were silent",
    Returns(_check_notices),
)
def _(root: Path) -> Any:
    write_run(root, [sampling_line(i, ["4"]) for i in range(3)])
    _confidence_run(root, [confidence_line(0)], model="other-model")
    return report_notices([root], activations_dir="/no/such/activations")


def _check_small_calibration(notices: list[str]) -> None:
    (notice,) = notices
    assert notice == (
        "capcal_toy (toy-model): its calibration split capcal_toy_train has 4 questions (was it run with "
        "--limit?); isotonic recalibration needs 10 and is left out, and a probe fitted on 3 of them (a "
        "quarter validates it) is weak; run capcal_toy_train without --limit"
    )


def _check_small_calibration_without_probe(notices: list[str]) -> None:
    (notice,) = notices
    assert notice == (
        "capcal_toy (toy-model): its calibration split capcal_toy_train has 4 questions (was it run with "
        "--limit?); isotonic recalibration needs 10 and is left out; run capcal_toy_train without --limit"
    )


def _declared(task: str, metadata: dict) -> dict:
    """A results file whose config declares the task's relations (as capcal's YAMLs do)."""
    metadata = {"capcal_task": "sampling", **metadata}
    return {"results": {task: {}}, "configs": {task: {"metadata": metadata}}, "model_name": "toy-model"}


EVALUATION = {"capcal_role": "evaluation", "capcal_calibration_tasks": ["capcal_toy_train"]}
CALIBRATION = {"capcal_role": "calibration"}


@case(
    "calibration_split_cut_by_limit",
    INPUTS,
    "--limit also limits the calibration split: isotonic recalibration disappeared without a word",
    Returns(_check_small_calibration),
)
def _(root: Path) -> Any:
    for task, count, metadata in ((TASK, 12, EVALUATION), ("capcal_toy_train", 4, CALIBRATION)):
        lines = [sampling_line(i, ["4"] * 8, question_id=f"{task}/{i}") for i in range(count)]
        write_run(root, lines, task=task, folder=task, results=_declared(task, metadata))
    return report_notices([root], activations_dir=root)


@case(
    "calibration_split_cut_by_limit_without_activations",
    INPUTS,
    "the terminal warned of a weak probe although there were no activations and so no probe",
    Returns(_check_small_calibration_without_probe),
)
def _(root: Path) -> Any:
    for task, count, metadata in ((TASK, 12, EVALUATION), ("capcal_toy_train", 4, CALIBRATION)):
        lines = [sampling_line(i, ["4"] * 8, question_id=f"{task}/{i}") for i in range(count)]
        write_run(root, lines, task=task, folder=task, results=_declared(task, metadata))
    return report_notices([root])
