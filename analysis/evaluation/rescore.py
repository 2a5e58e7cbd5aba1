"""Re-scoring a run: the logged responses of a capcal sampling run judged again by another checker, without
re-running the model (``capcal rescore OUTPUT_DIR --checker NAME``).

``rescore`` reads each sampling run under a folder (validated as ``analysis.runs.load_runs`` reads it),
asks the checker for a verdict on every logged response (``capcal_tasks.checkers``: the rule checkers
``task``, ``alias``, ``exact``, ``math-verify``, ``math-string``; or ``judge``, the LLM judge of
``analysis.judge``), and writes a new lm-eval results + samples pair, one per run re-scored, in a new
folder (by default ``OUTPUT_DIR/rescored/<checker>/<model folder>/``):

- each samples line is the source line (``doc``, ``resps``, ``filtered_resps``, hashes, ...) with the scoring
  fields recomputed by the task's scoring code (``capcal_tasks.sampling.score_responses``: ``correctness``,
  ``extracted_answers``, ``expected_accuracy``, pass@k, majority vote), plus ``source_correctness`` (the
  source run's labels) and ``checker_outputs`` (the checker's raw output per response; null for rules);
- the results file is the source's (model, config, task config) with the task's metric table recomputed as
  lm-eval aggregates it (means with their standard errors) and ``capcal_rescore``: ``source_run`` (samples
  and results paths, run id, run key, its labels, and its own ``capcal_rescore`` when it was a re-scored run:
  the chain), ``checker``, ``checker_version``, ``judge_model``, ``created`` and ``counts`` (``responses``,
  ``unparseable_verdicts``, ``contradictory_questions``, ``questions_left_out`` with the first
  ``left_out_ids``, ``labels_changed``).

A question with a verdict that could not be read (``Verdict.correct`` None) is left out of the samples file,
counted and listed, never guessed; so is a question whose verdicts contradict each other (equal judged
answers judged differently). Rule checkers score each question with their own scoring function, so
``--checker task`` reproduces the run's labels exactly. A checker that judges whole responses (the judge)
records the response text as the judged answer, so majority voting groups identical responses only.

Which run is re-scored: per (model, task), the latest run that holds its task's own labels, else the latest
re-scored one (``run`` picks another, as ``load_runs``' ``select``); a re-scored run re-scored again records
its source's provenance inside its own.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from analysis.runs import SamplesFile, load_runs
from capcal_tasks.checkers import (
    RULE_CHECKERS,
    Checker,
    CheckItem,
    RuleChecker,
    Verdict,
    describe_labels,
    rule_checker,
)
from capcal_tasks.records import RunFormatError, iter_json_lines, read_json_file
from capcal_tasks.sampling import (
    extraction_rate,
    is_sampling_record,
    parse_sampling_record,
    response_accuracy,
    score_responses,
)

__all__ = [
    "CHECKERS",
    "RescoreResult",
    "RescoredRun",
    "get_checker",
    "rescore",
    "rescore_notes",
]

CHECKERS = (*RULE_CHECKERS, "judge")
JUDGE_OPTIONS = ("base_url", "model", "api_key_env", "num_concurrent", "cache_path", "max_retries", "timeout")
JUDGE_OPTIONS += ("max_tokens", "temperature", "top_p", "seed")  # the judge's sampling settings
LEFT_OUT_LISTED = 20  # ids of left-out questions listed in the provenance
# The scoring fields of a sampling record, replaced by the checker's (the rest of the line is kept).
_SCORING_FIELDS = re.compile(
    r"^(correctness|extracted_answers|n_samples|expected_accuracy|pass_at_\d+|majority_vote_accuracy|"
    r"exact_alias_correctness|exact_alias_expected_accuracy|source_correctness|checker_outputs)$"
)
# Aggregations of the metrics that are not means (lm-eval reports "N/A" as their standard error).
_AGGREGATIONS = {
    "correctness": response_accuracy,
    "exact_alias_correctness": response_accuracy,
    "extracted_answers": extraction_rate,
}


def get_checker(name: str, **options: Any) -> Checker:
    """The checker ``name``: a rule checker of ``capcal_tasks.checkers`` (no options), or ``judge``, the LLM
    judge ``analysis.judge.JudgeChecker(**options)`` (options: base_url, model, api_key_env, num_concurrent,
    cache_path, max_retries, timeout). ``ValueError`` (one line) for an unknown name or options a checker
    does not take."""
    options = {key: value for key, value in options.items() if value is not None}
    if name == "judge":
        unknown = sorted(set(options) - set(JUDGE_OPTIONS))
        if unknown:
            raise ValueError(f"checker judge: unknown option(s) {', '.join(unknown)}")
        if not options.get("base_url"):
            raise ValueError("checker judge needs base_url (an OpenAI-compatible server, --base_url)")
        try:
            from analysis.judge import JudgeChecker
        except ImportError as error:
            raise ValueError(f"checker judge is not available ({error})") from None
        return JudgeChecker(**options)
    if name not in RULE_CHECKERS:
        raise ValueError(f"unknown checker {name!r} (known: {', '.join(CHECKERS)})")
    if options:
        raise ValueError(f"checker {name} takes no options, got {', '.join(sorted(options))}")
    return rule_checker(name)


@dataclass(frozen=True)
class RescoredRun:
    """One run re-scored: the task, the source run's files, the files written and the counts."""

    task: str
    source_samples: Path
    source_results: Path | None
    results_path: Path
    samples_path: Path
    questions: int  # questions written
    responses: int  # responses checked
    unparseable_verdicts: int
    questions_left_out: list[str]  # ids of the questions left out (unreadable or contradictory verdicts)
    labels_changed: int  # responses whose label differs from the source's, among the questions written
    contradictory_questions: int = 0  # questions left out because equal judged answers got different verdicts


@dataclass(frozen=True)
class RescoreResult:
    """What ``rescore`` wrote: the output folder, the checker, and one ``RescoredRun`` per run."""

    output_dir: Path
    checker: str
    checker_version: str
    judge_model: str | None
    runs: list[RescoredRun] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # (samples file, why) of runs not re-scored


def rescore(
    output_dir: str | Path,
    checker: str,
    *,
    output_dir_out: str | Path | None = None,
    tasks: Sequence[str] | None = None,
    run: str | None = None,
    **checker_options: Any,
) -> RescoreResult:
    """Re-score the sampling runs under ``output_dir`` with ``checker`` (see the module docstring).

    ``tasks``: only these tasks (each must have a run); ``run``: re-score this run (run id, run key prefix,
    or path of its results or samples file) instead of the latest of its (model, task); ``output_dir_out``:
    where to write (default ``output_dir/rescored/<checker>``). Without ``tasks`` and ``run``, the runs of
    tasks the checker does not apply to are skipped and listed (``RescoreResult.skipped``). Raises
    ``ValueError`` (one line) for an unknown checker, a task named (or a run selected) that the checker
    cannot check, no run it can check, or an output folder that already holds files of the runs it would
    write; ``RunFormatError`` (file and line) for malformed logs.
    """
    judge = get_checker(checker, **checker_options)
    found = _source_runs(Path(output_dir), tasks, run)
    sources = [file for file in found if judge.supports(file.task)]
    refused = [file for file in found if not judge.supports(file.task)]
    if refused and (tasks or run or not sources):
        raise ValueError(
            f"checker {checker} does not apply to task {refused[0].task} ({refused[0].path}); "
            f"{_applicable(checker)}"
        )
    out_root = Path(output_dir_out) if output_dir_out is not None else Path(output_dir) / "rescored" / checker
    result = RescoreResult(out_root, checker, judge.version, judge.judge_model)
    result.skipped.extend(
        (file.path, f"checker {checker} does not apply to task {file.task}") for file in refused
    )
    stamp = datetime.now(timezone.utc)
    for index, file in enumerate(sources):
        run_id = (stamp + timedelta(microseconds=index)).strftime("%Y-%m-%dT%H-%M-%S.%f")  # one per run
        result.runs.append(_rescore_run(file, judge, out_root / file.path.parent.name, run_id, stamp))
    return result


def _applicable(checker: str) -> str:
    if checker not in RULE_CHECKERS:
        return "it checks other tasks"
    return f"{checker} checks: {rule_checker(checker).description}"


def _source_runs(output_dir: Path, tasks: Sequence[str] | None, run: str | None) -> list[SamplesFile]:
    """The sampling runs to re-score: per (model, task) the latest run with its task's own labels, else the
    latest re-scored one; ``run`` selects one instead."""
    collection = load_runs([output_dir], select=[run] if run else "all")
    sampling = {
        str(row.samples_path)
        for row in collection.runs.itertuples()
        if row.kind == "sampling" and row.used and (run is None or row.reason == "selected")
    }
    files = [file for file in collection.files if str(file.path) in sampling]
    if tasks:
        missing = sorted(set(tasks) - {file.task for file in files})
        if missing:
            raise ValueError(
                f"no sampling run of {', '.join(missing)} under {output_dir}; {collection.found()}"
            )
        files = [file for file in files if file.task in set(tasks)]
    if not files:
        raise ValueError(f"no capcal sampling run to re-score under {output_dir}; {collection.found()}")
    chosen: dict[tuple[str, str], SamplesFile] = {}
    for file in sorted(files, key=lambda f: (f.rescore is None, f.run_id, str(f.path))):
        chosen[(file.model_id, file.task)] = file  # the last one wins: own labels first, then the latest
    return sorted(chosen.values(), key=lambda f: (f.model, f.task))


def _question_text(doc: dict) -> str:
    for key in ("question_text", "question", "problem", "Question"):
        if isinstance(doc.get(key), str):
            return doc[key]
    return ""


def _items(file: SamplesFile, fields: dict) -> list[CheckItem]:
    doc = fields["doc"]
    aliases = doc.get("gold_aliases")
    return [
        CheckItem(
            task=file.task,
            question_id=fields["question_id"],
            doc=doc,
            response=response,
            extracted_answer=answer,
            gold=doc.get("gold_answer"),
            question=_question_text(doc),
            gold_aliases=tuple(aliases) if isinstance(aliases, list) else (),
            response_index=index,
        )
        for index, (response, answer) in enumerate(
            zip(fields["responses"], fields["extracted_answers"], strict=True)
        )
    ]


def _scored_by_verdicts(items: list[CheckItem], verdicts: list[Verdict]) -> dict | None:
    """The scoring fields from a model-based checker's verdicts (all readable). The judged answer is the one
    the verdict names; where it names none, the response text for a correct verdict (the checker judged the
    whole response) and the source's extracted answer for an incorrect one. Majority voting groups equal
    judged answers. None when equal judged answers got different verdicts (never resolved by a guess)."""
    judged = {
        index: verdict.extracted_answer
        if verdict.extracted_answer is not None
        else (item.response if verdict.correct else item.extracted_answer)
        for index, (item, verdict) in enumerate(zip(items, verdicts, strict=True))
    }
    correct: dict[str | None, bool] = {None: False}
    for index, verdict in enumerate(verdicts):
        if correct.setdefault(judged[index], bool(verdict.correct)) != bool(verdict.correct):
            return None
    order = iter(range(len(items)))

    def extract(_: str) -> str | None:
        return judged[next(order)]

    responses = [item.response for item in items]
    return score_responses(responses, extract=extract, judge=lambda answer: correct[answer])


def _rescore_run(
    file: SamplesFile, checker: Checker, folder: Path, run_id: str, stamp: datetime
) -> RescoredRun:
    """Check every response of one run and write the rescored pair into ``folder``."""
    lines: list[tuple[int, dict, dict]] = []
    for line_number, record in iter_json_lines(file.path):
        if not is_sampling_record(record):
            continue
        fields = parse_sampling_record(record, f"{file.path}:{line_number}", file.task)
        lines.append((line_number, record, fields))
    items = [item for _, _, fields in lines for item in _items(file, fields)]
    rule = isinstance(checker, RuleChecker)  # a rule scores whole questions with its own scoring function
    verdicts = [] if rule else list(checker.check(items))
    if not rule and len(verdicts) != len(items):
        raise ValueError(f"checker {checker.name} gave {len(verdicts)} verdicts for {len(items)} responses")
    records, left_out, unparseable, contradictory, changed = [], [], 0, 0, 0
    position = 0
    for line_number, record, fields in lines:
        k = fields["n"]
        where = f"{file.path}:{line_number}"
        if rule:
            scored, outputs = checker.score(file.task, fields["doc"], fields["responses"]), [None] * k
        else:
            mine, their_items = verdicts[position : position + k], items[position : position + k]
            position += k
            bad = sum(v.correct not in (0, 1) for v in mine)
            unparseable += bad
            if bad:
                left_out.append(fields["question_id"])
                continue
            scored, outputs = _scored_by_verdicts(their_items, mine), [v.raw for v in mine]
            if scored is None:
                contradictory += 1
                left_out.append(fields["question_id"])
                continue
        new = {key: value for key, value in record.items() if not _SCORING_FIELDS.match(key)}
        new["metrics"] = list(scored)
        new.update(scored)
        new["source_correctness"] = fields["correctness"]
        new["checker_outputs"] = outputs
        try:
            parse_sampling_record(new, where, file.task)
        except RunFormatError:  # verdicts the record cannot hold (a correct response without an answer)
            contradictory += 1
            left_out.append(fields["question_id"])
            continue
        changed += sum(a != b for a, b in zip(new["correctness"], fields["correctness"], strict=True))
        records.append(new)
    if not records:
        raise ValueError(
            f"{file.path}: no question left to write ({len(left_out)} left out for unreadable or "
            "contradictory verdicts)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    samples_path = folder / f"samples_{file.task}_{run_id}.jsonl"
    results_path = folder / f"results_{run_id}.json"
    for path in (samples_path, results_path):
        if path.exists():
            raise ValueError(f"{path} exists already; choose another output folder")
    provenance = {
        "source_run": {
            "samples_file": str(file.path),
            "results_file": str(file.results_path) if file.results_path else None,
            "run_id": file.run_id,
            "run_key": file.run_key,
            "task": file.task,
            "labels": describe_labels(file.rescore),
            "capcal_rescore": file.rescore,
        },
        "checker": checker.name,
        "checker_version": checker.version,
        "judge_model": checker.judge_model,
        "created": stamp.isoformat(timespec="seconds"),
        "counts": {
            "questions": len(records),
            "responses": len(items),
            "unparseable_verdicts": unparseable,
            "contradictory_questions": contradictory,
            "questions_left_out": len(left_out),
            "left_out_ids": left_out[:LEFT_OUT_LISTED],
            "labels_changed": changed,
        },
    }
    _write_samples(samples_path, records)
    _write_results(results_path, file, records, provenance, run_id)
    return RescoredRun(
        file.task,
        file.path,
        file.results_path,
        results_path,
        samples_path,
        len(records),
        len(items),
        unparseable,
        left_out,
        changed,
        contradictory,
    )


def _write_samples(path: Path, records: Iterable[dict]) -> None:
    temporary = path.with_name(path.name + ".partial")
    with temporary.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")
    os.replace(temporary, path)


def _metric_table(task: str, records: list[dict], source: dict) -> dict:
    """The task's row of lm-eval's results table from the records: each metric aggregated as lm-eval does
    (a mean with its standard error s/sqrt(n); the response-level aggregations with "N/A")."""
    from lm_eval.api.metrics import mean, mean_stderr

    filter_key = records[0].get("filter", "all_responses")
    row: dict[str, Any] = {key: source[key] for key in ("name", "alias") if key in source}
    row["sample_len"] = len(records)
    for metric in records[0]["metrics"]:
        values = [record[metric] for record in records if metric in record]
        aggregate = _AGGREGATIONS.get(metric)
        if aggregate is not None:
            row[f"{metric},{filter_key}"] = aggregate(values)
            row[f"{metric}_stderr,{filter_key}"] = "N/A"
        else:
            row[f"{metric},{filter_key}"] = float(mean(values))
            row[f"{metric}_stderr,{filter_key}"] = float(mean_stderr(values)) if len(values) > 1 else "N/A"
    return row


def _write_results(path: Path, file: SamplesFile, records: list[dict], provenance: dict, run_id: str) -> None:
    """The source results file restricted to the task, its metric table recomputed, ``capcal_rescore``
    added; the source's model identity recorded as ``capcal_model`` when it was resolved."""
    source = read_json_file(file.results_path) if file.results_path else {}
    task = file.task
    results: dict[str, Any] = {"results": {}}  # lm-eval's order: the metric table first
    for key, value in source.items():
        if key == "groups" or key == "group_subtasks":
            continue
        if isinstance(value, dict) and key in (
            "configs",
            "versions",
            "n-shot",
            "higher_is_better",
            "n-samples",
        ):
            results[key] = {task: value[task]} if task in value else {}
        elif key != "results":
            results[key] = value
    results["results"] = {task: _metric_table(task, records, (source.get("results") or {}).get(task) or {})}
    original = ((source.get("n-samples") or {}).get(task) or {}).get("original", len(records))
    results.setdefault("n-samples", {})[task] = {"original": original, "effective": len(records)}
    if task in results.get("higher_is_better", {}):
        directions = results["higher_is_better"][task]
        results["higher_is_better"][task] = {m: directions.get(m, True) for m in records[0]["metrics"]}
    if not file.model_id.startswith("unresolved:") and not source.get("capcal_model"):
        results["capcal_model"] = {"fingerprint": file.model_id, "label": file.model}
    results["date"] = (
        datetime.strptime(run_id, "%Y-%m-%dT%H-%M-%S.%f").replace(tzinfo=timezone.utc).timestamp()
    )
    results["capcal_rescore"] = provenance
    text = json.dumps(results, indent=2, ensure_ascii=False, allow_nan=True, default=str)
    temporary = path.with_name(path.name + ".partial")
    temporary.write_text(text + "\n", encoding="utf-8")
    os.replace(temporary, path)


def rescore_notes(files: Iterable[SamplesFile]) -> list[str]:
    """One line per re-scored run among ``files``: its labels and source, and the questions it left out for
    unreadable or contradictory verdicts (a report shows these)."""
    notes = []
    for file in files:
        if file.rescore is None:
            continue
        counts = file.rescore.get("counts") or {}
        source = file.rescore.get("source_run") or {}
        note = (
            f"{file.task} run {file.run_id}: {describe_labels(file.rescore)}, re-scored from run "
            f"{source.get('run_id')} ({source.get('labels', 'task checker')})"
        )
        left_out = counts.get("questions_left_out") or 0
        if left_out:
            ids = ", ".join(map(str, counts.get("left_out_ids") or []))
            more = "" if left_out <= len(counts.get("left_out_ids") or []) else ", ..."
            note += (
                f"; {left_out} question(s) left out for unreadable or contradictory verdicts "
                f"({counts.get('unparseable_verdicts', 0)} unreadable verdicts, "
                f"{counts.get('contradictory_questions', 0)} questions with contradictory ones): {ids}{more}"
            )
        notes.append(note)
    return notes
