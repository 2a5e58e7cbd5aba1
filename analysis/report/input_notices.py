"""What the runs given to ``capcal report`` cannot score, said before the report is built.

``report_notices`` reads the folders as the report does (``analysis.report.analyze.load_report_data``) and
returns one line per input that leaves something out, for stderr and the report summary's warnings
(``build_report(..., notices=...)``):

- a confidence run whose target task has no sampling run of the same model (nothing to score it against);
- an ``--activations`` folder that does not exist (no probe);
- an evaluation task whose declared (or ``--calibration``) split has no sampling run, or fewer questions than
  a fitted estimator needs (``MIN_RECALIBRATION_QUESTIONS``: isotonic recalibration; ``--limit`` limits the
  calibration split too), or a calibration run with k = 1;
- a sampling run with k = 1 (mu_hat is 0 or 1: capability calibration is only response calibration) or
  k < ``analysis.checks.input_checks.CONSISTENCY_MIN_K`` (no consistency estimate);
- a sampling run decoded greedily with k > 1 (its k responses are one response repeated: no verdict,
  ``analysis.runs.completeness.greedy_warnings``).

When nothing at all can be computed (no sampling run and no leaderboard run in the folders) it raises
``NothingToScoreError`` instead, naming what the folders hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from analysis.checks.input_checks import CONSISTENCY_MIN_K
from analysis.estimators.adaptive import first_look
from analysis.report.analyze import load_report_data
from analysis.report.registry import MIN_RECALIBRATION_QUESTIONS, probe_training_questions
from analysis.runs.completeness import greedy_warnings
from analysis.runs.versions import run_versions, version_mix_warnings
from capcal_tasks.relations import RelationError, task_relations

__all__ = ["NothingToScoreError", "k_notices", "report_notices"]


class NothingToScoreError(ValueError):
    """The folders hold no run the report can compute anything from; the message says what they hold."""


def _k(questions: pd.DataFrame) -> int:
    """The responses per question of a run's questions (the smallest, as the estimators use it)."""
    return int(questions["n"].min()) if len(questions) else 0


def k_notices(questions: pd.DataFrame) -> list[str]:
    """One line per (model, task, run) of a per-question table (``analysis.runs``) whose k leaves estimators
    out (a line two runs share, once): k = 1 (mu_hat is 0 or 1: capability calibration is only response
    calibration) or k below ``CONSISTENCY_MIN_K`` (no consistency estimate); for an adaptive run, a first
    look l_1 below it (its consistency uses each question's first l_1 samples). ``capcal analyze`` and
    ``capcal report`` print them."""
    notices = []
    keys = ["model", "task", *(["run_id"] if "run_id" in questions.columns else [])]
    for (model, task, *_), group in questions.groupby(keys, sort=True):  # one plan per run
        look = first_look(group)
        if look is not None:
            if look < CONSISTENCY_MIN_K:
                notices.append(
                    f"{task} ({model}) was sampled adaptively with a first look of {look} responses: the "
                    "consistency estimator uses each question's first-look responses (drawn before any "
                    f"stopping decision), needs {CONSISTENCY_MIN_K} or more, and is missing"
                )
            continue
        k = _k(group)
        if k == 1:
            notices.append(
                f"{task} ({model}) has k = 1 response per question: mu_hat is 0 or 1, so capability "
                "calibration is only response calibration, and consistency and pass@k (k > 1) are missing"
            )
        elif k < CONSISTENCY_MIN_K:
            notices.append(
                f"{task} ({model}) has k = {k} responses per question: the consistency estimator needs "
                f"k >= {CONSISTENCY_MIN_K} and is missing"
            )
    return list(dict.fromkeys(notices))  # two runs of one task and k say it once


def report_notices(
    output_dirs: Sequence[str | Path],
    activations_dir: str | Path | None = None,
    calibration: Mapping[str, Sequence[str]] | None = None,
    select: Sequence[str] | None = None,
) -> list[str]:
    """One line per thing the report will leave out for want of input (the module docstring), in the order
    found. ``calibration`` and ``select`` as in ``ReportOptions``. Raises ``NothingToScoreError`` when no
    sampling or leaderboard run is found, and what the runs' loading raises (``RunFormatError``, ...)."""
    data = load_report_data(output_dirs, select or None)
    collection = data.collection
    questions, confidences = collection.questions, collection.confidences
    leaderboard = collection.runs[collection.runs["kind"] == "leaderboard"] if len(collection.runs) else []
    if questions.empty and not len(leaderboard):
        where = ", ".join(map(str, output_dirs))
        held = (
            "found confidence runs of " + ", ".join(sorted(set(confidences["task"]))) + " (they score a "
            "sampling run's questions: run the sampling task with --log_samples into these folders)"
            if not confidences.empty
            else collection.found()
        )
        raise NothingToScoreError(f"nothing to score under {where}: no capcal sampling run; {held}")
    notices: list[str] = list(data.path_notes)
    sampled = set(zip(questions["model_id"], questions["task"], strict=True))
    if not confidences.empty:
        for (model_id, model, task, target), _ in confidences.groupby(
            ["model_id", "model", "task", "target_task"], dropna=False, sort=True
        ):
            if isinstance(target, str) and (model_id, target) not in sampled:
                notices.append(
                    f"{task} ({model}) scores {target}, which has no sampling run of that model here: "
                    "its confidences are left out"
                )
    given = activations_dir is not None and Path(activations_dir).expanduser().is_dir()
    if activations_dir is not None and not given:
        notices.append(f"--activations {activations_dir}: no such folder; the probe is left out")
    try:
        relations = task_relations(data.configs, calibration)
    except RelationError:
        relations = None  # the report says what is wrong with the declarations
    notices += version_mix_warnings(run_versions(collection.files))
    notices += k_notices(questions)
    notices += list(greedy_warnings(collection.files, questions).values())
    for (model_id, model, task), _ in questions.groupby(["model_id", "model", "task"], sort=True):
        if relations is None or task not in relations or not relations.is_evaluation(task):
            continue
        for split in relations.calibration_tasks(task):
            rows = questions[(questions["model_id"] == model_id) & (questions["task"] == split)]
            if rows.empty:
                notices.append(
                    f"{task} ({model}): its calibration split {split} has no sampling run here; the probe "
                    "and isotonic recalibration are left out"
                )
            elif len(rows) < MIN_RECALIBRATION_QUESTIONS:
                probed = given or (model_id, task) in data.activations  # else there is no probe to warn of
                weak = (
                    f", and a probe fitted on {probe_training_questions(len(rows))} of them (a quarter "
                    "validates it) is weak"
                    if probed
                    else ""
                )
                notices.append(
                    f"{task} ({model}): its calibration split {split} has {len(rows)} questions (was it run "
                    f"with --limit?); isotonic recalibration needs {MIN_RECALIBRATION_QUESTIONS} and is left "
                    f"out{weak}; run {split} without --limit"
                )
    return notices
