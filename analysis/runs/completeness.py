"""Is a run complete? Per (model, task, run): every question logged, every question with its k samples, every
confidence record joined to a question.

lm-eval writes the results and samples files only when a run finishes, so a run that was killed leaves no
files (its finished samples are in capcal's sample cache; re-running the same command resumes it). A run
that finished can still be short of what was asked for: questions missing from the samples file (a
truncated or hand-edited file), questions with fewer than the task's k responses, null responses (a
response that was never produced; never read as the text "None"), or empty responses (what ``capcal-api``
returns for requests that still failed at the end with ``allow_failures=True``, or a model that generated
nothing). A confidence run is incomplete when some of its records have no question in a sampling run of
the same model and target task (or its target task is not declared), or when its confidence parsed for
fewer than half of its records because something went wrong: a P(True) or self-check without a value, or a
verbalized confidence whose responses ``max_gen_toks`` cut. Complete means "ran as asked": a verbalized run
whose responses ended on their own (counted with the model's tokenizer) but never state ``\boxed{P}`` is
complete (the model does not answer in that form; re-running cannot change it); ``check_run`` lists it in
``attrs["notes"]`` and the report leaves the estimator out, saying why. ``check_run`` counts each of
these and names the likely cause of empty responses and unparsed confidences
(``analysis.checks.response_checks``); ``capcal check OUTPUT_DIR...`` prints them and exits with status 1
when a run is incomplete. Every samples file is read once (``analysis.runs.load_runs``); the results file of
a run with empty responses is read again for the model and chat template the cause depends on.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.checks.greedy_decoding import greedy_run_warning
from analysis.checks.response_checks import (
    empty_response_cause,
    tokenizer_source,
    unreadable_diagnosis,
)
from analysis.runs.files import iter_sample_records, read_results
from analysis.runs.identity import SamplesFile
from analysis.runs.joins import JoinReport, join_report, sampling_run_mismatch
from analysis.runs.selection import run_order
from analysis.runs.tables import load_runs
from capcal_tasks.sampled_protocol import protocol_lines
from capcal_tasks.sampling import is_sampling_config

__all__ = ["CHECK_COLUMNS", "check_run", "greedy_warnings"]

CHECK_COLUMNS = [
    "model",
    "task",
    "run_id",
    "questions",
    "questions_expected",
    "k",
    "questions_short_of_k",
    "null_responses",
    "empty_responses",
    "unmatched",
    "unparsed",
    "complete",
    "problems",
]
#: A confidence run is incomplete when its confidence parsed for fewer than this share of its records.
MIN_PARSED_SHARE = 0.5


def check_run(output_dir: str | Path | Sequence[str | Path]) -> pd.DataFrame:
    """One row per distinct (model, task, run) of capcal's sampling and confidence tasks under
    ``output_dir`` (a folder or several), with columns

    ``questions`` (logged questions or confidence records), ``questions_expected`` (lm-eval's "n-samples"
    count in the results file), ``k`` (the task's ``repeats``), ``questions_short_of_k`` (questions with
    fewer than k responses; an adaptive run's questions need the n their rule stopped at, checked on
    reading), ``null_responses`` (null responses), ``empty_responses`` (responses that are
    empty after stripping whitespace), ``unmatched`` (confidence records without a question of the same
    model and target task), ``unparsed`` (confidence records without a parsed confidence: a verbalized
    confidence that did not parse, a P(True) or self-check without a value), ``complete`` (no problem
    found) and ``problems`` (a readable list, empty when
    complete). ``result.attrs["labels"]``: (model, task, run_id, labels) of each run, where labels is "task
    checker" or the checker of a re-scored run (``capcal rescore``). The join reports of the confidence runs
    are in ``result.attrs["joins"]``. Malformed logs raise ``analysis.runs.RunFormatError`` (file and line);
    a folder without capcal sampling or confidence records raises ``FileNotFoundError`` saying what it holds
    instead. ``result.attrs["protocols"]``: (model, task, run_id, lines) of each wrapped lm-eval task
    (``capcal_tasks.sampled_task``; its calibration task, ``capcal_tasks.sampled_calibration``, too), the
    lines saying what capcal changed in its protocol.
    """
    roots = [output_dir] if isinstance(output_dir, (str, Path)) else list(output_dir)
    collection = load_runs(roots, select="all", allow_null_responses=True)
    table, elicited = collection.questions, collection.confidences
    if table.empty and elicited.empty:
        raise FileNotFoundError(
            f"no capcal sampling or confidence samples under {', '.join(map(str, roots))} "
            f"(expected samples_capcal_*.jsonl from --log_samples); {collection.found()}"
        )
    by_run = {file.run_key: file for file in collection.files}
    rows = [
        _sampling_row(by_run[run_key], task, run_id, group) for task, run_id, run_key, group in _runs(table)
    ]
    question_keys = set(zip(table["model_id"], table["task"], table["question_id"], strict=True))
    used = _used_sampling_runs(table, by_run)
    joins = []
    notes: list[str] = []
    for task, run_id, run_key, group in _runs(elicited):
        report = _confidence_join(by_run[run_key], task, group, question_keys)
        joins.append(report)
        row = _confidence_row(by_run[run_key], task, run_id, group, report, notes)
        problem = _other_sampling_run(by_run[run_key], group, used)
        if problem is not None:
            row.update(complete=False, problems="; ".join(filter(None, [row["problems"], problem])))
        rows.append(row)
    checks = pd.DataFrame(rows, columns=CHECK_COLUMNS)
    checks.attrs["joins"] = joins
    checks.attrs["notes"] = notes
    checks.attrs["labels"] = [(file.model, file.task, file.run_id, file.labels) for file in collection.files]
    checks.attrs[
        "protocols"
    ] = [  # a wrapped lm-eval task: what capcal changed (capcal_tasks.sampled_protocol)
        (file.model, file.task, file.run_id, protocol_lines(file.task_config))
        for file in [*collection.files, *collection.leaderboard_files]
        if protocol_lines(file.task_config)
    ]
    checks.attrs["duplicates"] = collection.duplicates
    checks.attrs["greedy"] = list(greedy_warnings(collection.files, table).values())
    checks.attrs["skipped"] = collection.skipped
    return checks


def greedy_warnings(files: Sequence[SamplesFile], questions: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(model_id, task) -> the warning for each sampling run in ``questions`` (a per-question table of
    ``load_runs``) whose results file records greedy decoding with k > 1 responses per question
    (``analysis.checks.greedy_decoding.greedy_run_warning``: its responses are one response repeated).
    ``capcal check`` prints these lines; the report gives them instead of a verdict."""
    by_run = {file.run_key: file for file in files}
    found: dict[tuple[str, str], str] = {}
    for task, _, run_key, group in _runs(questions):
        file = by_run.get(run_key)
        if file is None:
            continue
        engine = _results_config(file).get("model")
        warning = greedy_run_warning(
            task,
            file.model,
            file.task_config,
            _samples_per_question(file, group),
            engine if isinstance(engine, str) else None,
        )
        if warning is not None:
            found[(file.model_id, task)] = warning
    return found


def _runs(frame: pd.DataFrame) -> Iterator[tuple[str, str, str, pd.DataFrame]]:
    """(task, run_id, run_key, rows) of each run in a question or confidence table, by (model, task, run)."""
    for (_, task, run_id, run_key), group in frame.groupby(["model", "task", "run_id", "run_key"], sort=True):
        yield task, run_id, run_key, group


def _samples_per_question(file: SamplesFile, group: pd.DataFrame) -> int:
    """k: the task's ``repeats`` from the results file, else the most responses any question has. An
    adaptive run's questions need the n their record's rule stopped at, not k: ``parse_sampling_record``
    checks that n is a look and that the rule fired there and not before, so a truncated adaptive record
    raises ``RunFormatError`` (file:line) and the rest are complete."""
    repeats = file.task_config.get("repeats")
    if isinstance(repeats, int) and not isinstance(repeats, bool):
        return int(repeats)
    return int(group["n"].max())


def _empty_responses(group: pd.DataFrame) -> int:
    """Responses that are empty after stripping whitespace (null responses are counted apart), counted
    while the samples file was streamed (``load_runs``' ``empty_responses`` column)."""
    return int(group["empty_responses"].sum())


def _file_problems(file: SamplesFile, logged: int, noun: str, *, sampling: bool) -> list[str]:
    """What the results file beside a run's samples file says against it: missing, not a sampling task
    (``sampling`` runs only), or another count of ``noun`` (questions or records) than ``logged``."""
    problems = []
    if not file.has_results:
        problems.append(f"no results file beside {file.path.name}")
    elif sampling and not is_sampling_config(file.task_config):
        problems.append("the results file does not describe this task as a capcal sampling task")
    if file.logged_questions is not None and logged != file.logged_questions:
        problems.append(f"{logged} {noun} logged, the results file counts {file.logged_questions}")
    return problems


def _row(
    file: SamplesFile, task: str, run_id: str, questions: int, problems: list[str], **counts: Any
) -> dict:
    """A ``CHECK_COLUMNS`` row; ``counts`` sets ``k`` and the problem counts (0, k None, when not given)."""
    return {
        "model": file.model,
        "task": task,
        "run_id": run_id,
        "questions": questions,
        "questions_expected": file.logged_questions,
        "k": counts.get("k"),
        "questions_short_of_k": counts.get("questions_short_of_k", 0),
        "null_responses": counts.get("null_responses", 0),
        "empty_responses": counts.get("empty_responses", 0),
        "unmatched": counts.get("unmatched", 0),
        "unparsed": counts.get("unparsed", 0),
        "complete": not problems,
        "problems": "; ".join(problems),
    }


def _sampling_row(file: SamplesFile, task: str, run_id: str, group: pd.DataFrame) -> dict:
    """The check of one sampling run: questions short of k, null and empty responses, the results file."""
    k = _samples_per_question(file, group)
    short = int(((group["n"] < k) & (group["sampling"] == "fixed k")).sum())
    null = int(group["null_responses"].sum())
    empty = _empty_responses(group)
    problems = _file_problems(file, len(group), "questions", sampling=True)
    if short:
        problems.append(f"{short} question(s) with fewer than k = {k} responses")
    if null:
        problems.append(f"{null} null response(s) (missing)")
    if empty:
        problems.append(f"{empty} empty response(s) (likely cause: {_empty_cause(file)})")
    return _row(
        file,
        task,
        run_id,
        len(group),
        problems,
        k=k,
        questions_short_of_k=short,
        null_responses=null,
        empty_responses=empty,
    )


def _used_sampling_runs(
    table: pd.DataFrame, by_run: dict[str, SamplesFile]
) -> dict[tuple[str, str], tuple[SamplesFile, dict[str, list[int]]]]:
    """(model_id, task) -> the sampling run the report uses by default (the latest, ``run_order``) and its
    questions' correctness vectors by question id."""
    used = {}
    for (model_id, task), group in table.groupby(["model_id", "task"], sort=False):
        latest = max(set(group["run_key"]), key=lambda key: run_order(by_run[key]))
        rows = group[group["run_key"] == latest]
        vectors = {qid: list(c) for qid, c in zip(rows["question_id"], rows["correctness"], strict=True)}
        used[(model_id, task)] = (by_run[latest], vectors)
    return used


def _other_sampling_run(
    file: SamplesFile,
    group: pd.DataFrame,
    used: dict[tuple[str, str], tuple[SamplesFile, dict[str, list[int]]]],
) -> str | None:
    """A problem when a response-level confidence run (self-check, ``*_rc``) scored other responses than
    the sampling run of its target task that the report uses (``sampling_run_mismatch``: another model's
    run, or step 1 re-run with another k into the same folder); the report would leave it out. Names the
    file, the run, and the fix."""
    kind = str(group["kind"].iloc[0])
    target = _target_task(group)
    if not (kind == "selfcheck" or kind.endswith("_rc")) or (file.model_id, target) not in used:
        return None
    sampling, vectors = used[(file.model_id, target)]
    for record in group.to_dict("records"):
        vector = vectors.get(record["question_id"])
        why = None if vector is None else sampling_run_mismatch(kind, record, vector)
        if why is not None:
            return (
                f"{file.path} (run {file.run_id}) scored other responses than the {target} run the report "
                f"uses, {sampling.path} (run {sampling.run_id}): question {record['question_id']} {why}; "
                f're-run {file.task} with --metadata \'{{"samples_file": "{sampling.path}"}}\' (the '
                "report leaves it out)"
            )
    return None


def _target_task(group: pd.DataFrame) -> str | None:
    """The sampling task a confidence run scores (one per run), None when it declares none."""
    target = group["target_task"].iloc[0]
    return None if pd.isna(target) else str(target)


def _confidence_join(
    file: SamplesFile, task: str, group: pd.DataFrame, question_keys: set[tuple[str, str, str]]
) -> JoinReport:
    """The join of a confidence run's records to the questions of the same model and its target task
    (``question_keys``: (model_id, task, question_id) of every sampling question)."""
    model_id = file.model_id
    target = _target_task(group)
    keys = list(group["question_id"])  # one model and one target task per run: question ids suffice
    targets = [qid for m, task_name, qid in question_keys if m == model_id and task_name == target]
    notes = [] if target is not None else [f"{task} declares no target task (capcal_target_task)"]
    if str(model_id).startswith("unresolved:"):
        notes.append(f"model {file.model} known only by its label (unresolved checkpoint)")
    return join_report(
        f"{task} ({file.model}) -> {target or 'no target'}",
        keys,
        targets,
        left_name="records",
        right_name=f"{target} questions" if target else "target questions",
        notes=notes,
    )


def _responses(file: SamplesFile) -> tuple[list[str], list[bool]]:
    """Every response string of a verbalized-confidence samples file (its records' ``resps``) and whether
    each parsed (its record's ``parse_success``)."""
    texts: list[str] = []
    readable: list[bool] = []
    for _, record in iter_sample_records(file.path):
        for item in record.get("resps") or []:
            found = [text for text in (item if isinstance(item, list) else [item]) if isinstance(text, str)]
            texts += found
            readable += [bool(record.get("parse_success"))] * len(found)
    return texts, readable


def _confidence_row(
    file: SamplesFile, task: str, run_id: str, group: pd.DataFrame, report: JoinReport, notes: list[str]
) -> dict:
    """The check of one confidence run: the results file, records without a question (``report``), and
    confidences that did not parse: a problem, or a note in ``notes`` when a verbalized run's responses are
    not to blame (``unreadable_diagnosis``: the model does not state the confidence), module docstring."""
    problems = _file_problems(file, len(group), "records", sampling=False)
    if report.unmatched_left:
        problems.append(report.summary())
    elif _target_task(group) is None:
        problems.append(report.notes[0])
    parsed = _parsed_records(group)
    if parsed < MIN_PARSED_SHARE * len(group):
        kind = str(group["kind"].iloc[0])
        verbalized = kind.startswith("verbalized")
        texts, readable = _responses(file) if verbalized else ([], [])
        source = tokenizer_source(_results_config(file).get("model_args"))
        cause, run_fault = unreadable_diagnosis(file.task_config, verbalized, texts, source, readable)
        line = (
            f"{kind} confidence parsed for {parsed} of {len(group)} records, fewer than half "
            f"(likely cause: {cause})"
        )
        if run_fault:
            problems.append(line)
        else:  # ran as asked: the model's answer, not the run
            notes.append(f"{file.model} {task} {run_id}: {line}; the run is complete")
    return _row(
        file,
        task,
        run_id,
        len(group),
        problems,
        unmatched=report.unmatched_left,
        unparsed=len(group) - parsed,
    )


def _parsed_records(group: pd.DataFrame) -> int:
    """Confidence records with a parsed confidence: a finite ``confidence`` (verbalized, P(True)), or a
    self-check list with a finite P(Yes)."""
    parsed = group["confidence"].notna() & group["confidence"].map(lambda v: v == v)
    if "p_yes" in group.columns:
        lists = group["p_yes"].map(
            lambda v: isinstance(v, list) and any(isinstance(x, (int, float)) and x == x for x in v)
        )
        parsed = parsed | lists
    return int(parsed.sum())


def _results_file(file: SamplesFile) -> dict:
    """The run's results file as a dict (empty when it has none or cannot be read)."""
    if file.results_path is None:
        return {}
    try:
        loaded, _ = read_results(file.results_path)  # NaN aggregates (every parse failed) are lm-eval's own
    except (OSError, ValueError):
        return {}
    return loaded


def _results_config(file: SamplesFile) -> dict:
    """The ``config`` of the run's results file (model, model_args), empty when there is none."""
    config = _results_file(file).get("config")
    return config if isinstance(config, dict) else {}


def _empty_cause(file: SamplesFile) -> str:
    """The likely cause of a sampling run's empty responses (``empty_response_cause``), from its results
    file's model arguments and whether a chat template was applied (its ``chat_template``)."""
    results = _results_file(file)
    config = _results_config(file)
    applied = None if "chat_template" not in results else results.get("chat_template") is not None
    model = config.get("model") if isinstance(config.get("model"), str) else None
    return empty_response_cause(config.get("model_args"), applied, model)
