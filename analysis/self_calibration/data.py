r"""Self-Calibration training data: SSC targets from a sampling run and the self-check run on its responses.

Huang et al. 2025 ("Efficient Test-Time Scaling via Self-Calibration", arXiv 2503.00031): for each training
question, the model's N sampled responses y_1..y_N (a capcal sampling run) and each response's self-check
confidence c_i = P("Yes") after "Is the answer correct? (Yes/No)" (the ``capcal_<dataset>_selfcheck`` run on
those responses). Responses without an extracted answer are dropped; the others are grouped by extracted
answer a(y_i), and each response's target is the soft self-consistency of its group::

    SSC(a) = sum_{i: a(y_i) = a} c_i / sum_{i parseable} c_i

A response enters the causal-LM loss when its SSC exceeds ``lm_threshold`` (0.75 in the paper).

Each tuple carries the exact text the self-check scored (``context``: prompt, response, check question,
rendered as that run rendered it, chat template included) and ``yes_text`` (the continuation scored), so
that training optimises the very P("Yes") the self-check measures; ``response_start`` / ``response_end``
are the response's character span in ``context`` (from the sampling run's prompt, a prefix of the context;
-1 when it is not one: the tuple then gets no LM loss, counted in the card).

Only training questions enter: the sampling task must be declared a calibration split and not an
evaluation task (``capcal_tasks.relations``), and no question may be one of ``exclude_question_ids`` (the
held-out questions of a comparison). Questions are left out, counted by reason, never guessed: no self-check
record, a missing confidence, no parseable response, a zero total confidence.

Output folder: ``train.jsonl`` (one tuple per line; ``datasets.load_dataset("json", data_files=...)`` loads
it), ``card.json`` (counts, target histogram, source runs, settings) and ``README.md`` (the same, readable).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.estimators.elicited import join_elicited
from analysis.rendering import markdown_text
from analysis.runs import SamplesFile, iter_sample_records, load_runs
from analysis.runs.joins import JoinReport
from capcal_tasks.records import RunFormatError
from capcal_tasks.relations import CALIBRATION, EVALUATION, RelationError, task_relations

__all__ = [
    "CONFIDENCE_FIELDS",
    "DATA_FILE",
    "DEFAULT_LM_THRESHOLD",
    "TUPLE_FIELDS",
    "SelfCalibrationDataError",
    "CheckedRun",
    "CheckedSides",
    "TrainingData",
    "build_training_data",
    "read_checked_run",
    "read_checked_sides",
    "read_training_data",
    "ssc_targets",
    "target_histogram",
]

DATA_FILE = "train.jsonl"
CARD_FILE = "card.json"
DEFAULT_LM_THRESHOLD = 0.75
CONFIDENCE_FIELDS = ("p_yes", "p_yes_normalized")
HISTOGRAM_BINS = 10
TUPLE_FIELDS = (
    "question_id",
    "task",
    "response_index",
    "context",
    "yes_text",
    "response",
    "response_start",
    "response_end",
    "extracted_answer",
    "confidence",
    "ssc",
    "lm_loss",
    "correct",
)


class SelfCalibrationDataError(ValueError):
    """Input that cannot give Self-Calibration training data (an evaluation split, mismatched runs, ...)."""


@dataclass(frozen=True)
class TrainingData:
    """Where the tuples were written (``path``, ``card``, ``readme``) and the card's content."""

    path: Path
    card: Path
    readme: Path
    counts: dict[str, int]
    histogram: list[dict[str, float]]


def ssc_targets(
    answers: Sequence[str | None], confidences: Sequence[float], answer_key: Callable[[str], str] = str.strip
) -> list[float | None]:
    """Soft self-consistency of each response's answer group: ``sum_{j: a_j = a_i} c_j / sum_{j parseable}
    c_j`` (Huang et al. 2025); None for an unparseable response (answer None or empty after ``answer_key``).
    ``ValueError`` when a confidence is not finite in [0, 1], or the parseable confidences sum to 0."""
    if len(answers) != len(confidences):
        raise ValueError(f"{len(answers)} answers but {len(confidences)} confidences")
    keys = [None if a is None or not answer_key(str(a)) else answer_key(str(a)) for a in answers]
    totals: dict[str, float] = {}
    for key, c in zip(keys, confidences, strict=True):
        if not (isinstance(c, (int, float)) and math.isfinite(c) and 0.0 <= c <= 1.0):
            raise ValueError(f"confidence {c!r} is not a number in [0, 1]")
        if key is not None:
            totals[key] = totals.get(key, 0.0) + float(c)
    total = sum(totals.values())
    if keys and any(k is not None for k in keys) and total <= 0.0:
        raise ValueError("the parseable responses' confidences sum to 0: SSC is undefined")
    return [None if key is None else totals[key] / total for key in keys]


def target_histogram(targets: Iterable[float], bins: int = HISTOGRAM_BINS) -> list[dict[str, float]]:
    """Counts of ``targets`` in ``bins`` equal-width bins of [0, 1] ([lo, hi), the last closed)."""
    values = np.asarray(list(targets), dtype=float)
    counts, edges = np.histogram(values, bins=bins, range=(0.0, 1.0))
    return [
        {"low": round(float(edges[i]), 6), "high": round(float(edges[i + 1]), 6), "count": int(counts[i])}
        for i in range(bins)
    ]


def _one_run(files: Sequence[SamplesFile], kind: str, folder: str | Path) -> SamplesFile:
    if len(files) != 1:
        found = ", ".join(f"{f.task} ({f.path})" for f in files) or "none"
        raise SelfCalibrationDataError(f"{folder}: expected exactly one {kind} run, found {found}")
    return files[0]


def _check_training_split(file: SamplesFile) -> None:
    """Refuse a sampling run whose task is not a declared calibration (training) split."""
    try:
        relation = task_relations({file.task: (file.task_config, str(file.results_path))}).get(file.task)
    except RelationError as error:
        raise SelfCalibrationDataError(f"{error}; Self-Calibration training data refused") from None
    if relation.has(EVALUATION) or not relation.has(CALIBRATION):
        roles = ", ".join(sorted(relation.roles)) or "nothing"
        raise SelfCalibrationDataError(
            f"{file.results_path or file.path}: task {file.task} is declared {roles} "
            f"({relation.source}); Self-Calibration training data may only come from a calibration "
            "(training) split, never from evaluation questions"
        )


def _contexts(path: Path, kind: str) -> dict[str, tuple[int, dict]]:
    """question_id -> (line number, record) of a samples file."""
    out: dict[str, tuple[int, dict]] = {}
    for line_number, record in iter_sample_records(path):
        doc = record.get("doc")
        qid = doc.get("question_id") if isinstance(doc, dict) else None
        if isinstance(qid, str):
            out[qid] = (line_number, record)
    return out


def _argument(record: dict, index: int, where: str) -> tuple[str, Any]:
    arguments = record.get("arguments")
    entry = arguments.get(f"gen_args_{index}") if isinstance(arguments, dict) else None
    if not isinstance(entry, dict) or not isinstance(entry.get("arg_0"), str):
        raise RunFormatError(f"{where}: no logged request arguments gen_args_{index} (context)")
    return entry["arg_0"], entry.get("arg_1")


def _response_span(context: str, prompt: str, response: str) -> tuple[int, int]:
    """The response's character span in the self-check context: right after the sampling prompt when that
    is a prefix of the context; (-1, -1) otherwise."""
    text = response.strip()
    if text and context.startswith(prompt) and context[len(prompt) :].startswith(text):
        return len(prompt), len(prompt) + len(text)
    return -1, -1


def build_training_data(
    sampling_dir: str | Path,
    selfcheck_dir: str | Path,
    output_dir: str | Path,
    *,
    confidence: str = "p_yes",
    lm_threshold: float = DEFAULT_LM_THRESHOLD,
    exclude_question_ids: Iterable[str] = (),
    answer_key: Callable[[str], str] = str.strip,
) -> TrainingData:
    """Write the training tuples of the (one) sampling run under ``sampling_dir`` and the (one) self-check
    run under ``selfcheck_dir`` to ``output_dir`` (module docstring).

    ``confidence``: the self-check field used as c_i (``p_yes``, the paper's unnormalised P("Yes"), or
    ``p_yes_normalized``). ``lm_threshold``: SSC above it enters the LM loss. ``exclude_question_ids``:
    held-out questions that must not appear (``SelfCalibrationDataError`` naming them when they do).
    Raises ``SelfCalibrationDataError`` (or ``RunFormatError``, file and line) for input that cannot work.
    """
    if confidence not in CONFIDENCE_FIELDS:
        raise SelfCalibrationDataError(f"confidence must be one of {', '.join(CONFIDENCE_FIELDS)}")
    if not (0.0 <= float(lm_threshold) <= 1.0):
        raise SelfCalibrationDataError(f"lm_threshold must lie in [0, 1], got {lm_threshold}")
    run = read_checked_run(sampling_dir, selfcheck_dir)
    sampling, selfcheck, joined = run.sampling, run.selfcheck, run.table
    _check_training_split(sampling)
    excluded = set(exclude_question_ids)
    overlap = [q for q in joined["question_id"] if q in excluded]
    if overlap:
        raise SelfCalibrationDataError(
            f"{sampling.path}: {len(overlap)} question(s) are held-out (evaluation) questions, e.g. "
            f"{', '.join(overlap[:3])}; they may not enter Self-Calibration training data"
        )
    prompts = _contexts(sampling.path, "sampling")
    checked = _contexts(selfcheck.path, "selfcheck")
    counts = {
        "questions_in_run": int(len(joined)),
        "responses_in_run": int(joined["n"].sum()),
        "questions_without_selfcheck": int(run.join.unmatched_left),
        "selfcheck_records_without_question": int(run.join.unmatched_right),
        "questions_missing_confidence": 0,
        "questions_without_parseable_response": 0,
        "questions_zero_total_confidence": 0,
        "responses_unparseable_dropped": 0,
        "responses_without_lm_span": 0,
    }
    tuples: list[dict] = []
    column = f"selfcheck_{confidence}" if confidence == "p_yes_normalized" else "selfcheck_p_yes"
    for row in joined.itertuples(index=False):
        values = getattr(row, column)
        if values is None:
            continue  # counted in questions_without_selfcheck
        if any(v is None or not math.isfinite(v) for v in values):
            counts["questions_missing_confidence"] += 1
            continue
        answers = list(row.extracted_answers)
        unparseable = sum(1 for a in answers if a is None or not answer_key(str(a)))
        if unparseable == len(answers):
            counts["questions_without_parseable_response"] += 1
            continue
        try:
            targets = ssc_targets(answers, values, answer_key)
        except ValueError:
            counts["questions_zero_total_confidence"] += 1
            continue
        counts["responses_unparseable_dropped"] += unparseable
        tuples += _question_tuples(row, targets, values, prompts, checked, lm_threshold, counts)
    if not tuples:
        raise SelfCalibrationDataError(
            f"no training tuples from {sampling.path} and {selfcheck.path}: {counts}"
        )
    counts["tuples"] = len(tuples)
    counts["lm_tuples"] = sum(1 for t in tuples if t["lm_loss"])
    counts["questions_used"] = len({t["question_id"] for t in tuples})
    return _write(
        Path(output_dir),
        tuples,
        counts,
        sampling,
        selfcheck,
        confidence=confidence,
        lm_threshold=lm_threshold,
    )


@dataclass(frozen=True)
class CheckedRun:
    """A sampling run joined to the self-check run on its responses: ``table`` is the per-question table
    (``analysis.runs``) with the per-response lists ``selfcheck_p_yes`` / ``selfcheck_p_yes_normalized``
    (None for a question without a self-check record, counted in ``join``)."""

    table: pd.DataFrame
    sampling: SamplesFile
    selfcheck: SamplesFile
    join: JoinReport


def read_checked_run(sampling_dir: str | Path, selfcheck_dir: str | Path) -> CheckedRun:
    """The one sampling run under ``sampling_dir`` joined on (model_id, question_id) to the one self-check
    run under ``selfcheck_dir`` (``analysis.estimators.elicited.join_elicited``, which refuses a self-check
    run of other responses). ``SelfCalibrationDataError`` when a folder does not hold exactly one such run."""
    collection = load_runs([sampling_dir, selfcheck_dir], responses=True)
    files = collection.files
    sampling = _one_run([f for f in files if not _is_confidence(collection, f)], "sampling", sampling_dir)
    selfcheck = _one_run([f for f in files if _is_confidence(collection, f)], "self-check", selfcheck_dir)
    checks = collection.confidences[collection.confidences["kind"] == "selfcheck"]
    if checks.empty:
        raise SelfCalibrationDataError(f"{selfcheck.path}: no selfcheck records")
    questions = collection.questions[collection.questions["run_key"] == sampling.run_key]
    try:
        joined, reports = join_elicited(
            questions.reset_index(drop=True), checks, on=["model_id", "question_id"]
        )
    except ValueError as error:
        raise SelfCalibrationDataError(f"{selfcheck.path}: {error}") from None
    return CheckedRun(joined, sampling, selfcheck, reports[0])


@dataclass(frozen=True)
class CheckedSides:
    """The two sides of a before/after comparison and the training questions it must leave out."""

    before: CheckedRun
    after: CheckedRun
    training_question_ids: list[str]


def read_checked_sides(
    before: tuple[str | Path, str | Path],
    after: tuple[str | Path, str | Path],
    training_data: str | Path | None = None,
) -> CheckedSides:
    """Both sides, each a (sampling folder, self-check folder) pair read with :func:`read_checked_run`, and
    the question ids of ``training_data`` (a ``train.jsonl`` or its folder, :func:`read_training_data`;
    none when None)."""
    trained = [t["question_id"] for t in read_training_data(training_data)] if training_data else []
    return CheckedSides(read_checked_run(*before), read_checked_run(*after), trained)


def _is_confidence(collection: Any, file: SamplesFile) -> bool:
    runs = collection.runs
    kinds = runs.loc[runs["samples_path"] == file.path, "kind"]
    return bool(len(kinds)) and str(kinds.iloc[0]) != "sampling"


def _question_tuples(
    row: Any,
    targets: list[float | None],
    values: list[float],
    prompts: dict[str, tuple[int, dict]],
    checked: dict[str, tuple[int, dict]],
    lm_threshold: float,
    counts: dict[str, int],
) -> list[dict]:
    line, sampling_record = prompts[row.question_id]
    check_line, check_record = checked[row.question_id]
    prompt, _ = _argument(sampling_record, 0, f"sampling record line {line}")
    responses = check_record["doc"].get("responses")
    if list(responses or []) != list(row.responses):
        raise SelfCalibrationDataError(
            f"self-check record line {check_line} (question {row.question_id}) scored other responses than "
            f"the sampling run's line {line}: different runs"
        )
    out = []
    for index, (response, target) in enumerate(zip(row.responses, targets, strict=True)):
        if target is None:
            continue
        context, yes_text = _argument(check_record, 2 * index, f"self-check record line {check_line}")
        start, end = _response_span(context, prompt, response)
        counts["responses_without_lm_span"] += start < 0
        out.append(
            {
                "question_id": row.question_id,
                "task": row.task,
                "response_index": index,
                "context": context,
                "yes_text": str(yes_text),
                "response": response,
                "response_start": start,
                "response_end": end,
                "extracted_answer": str(row.extracted_answers[index]),
                "confidence": float(values[index]),
                "ssc": float(target),
                "lm_loss": bool(target > lm_threshold and start >= 0),
                "correct": int(row.correctness[index]),
            }
        )
    return out


def _source(file: SamplesFile) -> dict[str, str]:
    return {
        "task": file.task,
        "model": file.model,
        "model_id": file.model_id,
        "run_id": file.run_id,
        "run_key": file.run_key,
        "samples_file": str(file.path),
        "results_file": str(file.results_path),
    }


def _write(
    output_dir: Path,
    tuples: list[dict],
    counts: dict[str, int],
    sampling: SamplesFile,
    selfcheck: SamplesFile,
    **settings: Any,
) -> TrainingData:
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / DATA_FILE
    with path.open("w", encoding="utf-8") as handle:
        for item in tuples:
            handle.write(json.dumps(item, ensure_ascii=False, allow_nan=False) + "\n")
    histogram = target_histogram(t["ssc"] for t in tuples)
    card = {
        "counts": counts,
        "target_histogram": histogram,
        "mean_target": float(np.mean([t["ssc"] for t in tuples])),
        "accuracy_of_tuples": float(np.mean([t["correct"] for t in tuples])),
        "sources": {"sampling": _source(sampling), "selfcheck": _source(selfcheck)},
        "settings": settings,
    }
    card_path = output_dir / CARD_FILE
    card_path.write_text(json.dumps(card, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    readme = output_dir / "README.md"
    readme.write_text(_card_markdown(card), encoding="utf-8")
    return TrainingData(path, card_path, readme, counts, histogram)


def _card_markdown(card: dict) -> str:
    lines = [
        "# Self-Calibration training data",
        "",
        f'Tuples in `{DATA_FILE}` (load with `datasets.load_dataset("json", data_files=...)`); targets are '
        "soft self-consistency scores (Huang et al. 2025).",
        "",
        "| count | value |",
        "|---|---|",
        *[f"| {markdown_text(k)} | {v} |" for k, v in card["counts"].items()],
        "",
        "Target histogram:",
        "",
        "| SSC bin | tuples |",
        "|---|---|",
        *[f"| [{b['low']:.1f}, {b['high']:.1f}) | {b['count']} |" for b in card["target_histogram"]],
        "",
        "Source runs:",
        "",
        *[
            f"- {name}: task {markdown_text(s['task'])}, model {markdown_text(s['model'])}, run "
            f"{markdown_text(s['run_id'])} ({markdown_text(s['samples_file'])})"
            for name, s in card["sources"].items()
        ],
        "",
        f"Settings: {markdown_text(json.dumps(card['settings']))}",
        "",
    ]
    return "\n".join(lines)


def read_training_data(path: str | Path) -> list[dict]:
    """The tuples of a ``train.jsonl`` (or its folder), each checked: every field of ``TUPLE_FIELDS``,
    ``ssc`` in [0, 1], a span inside the context. ``SelfCalibrationDataError`` names the file and line."""
    path = Path(path)
    path = path / DATA_FILE if path.is_dir() else path
    if not path.is_file():
        raise SelfCalibrationDataError(f"{path}: no such training data file")
    tuples = []
    for line_number, record in iter_sample_records(path):
        where = f"{path}:{line_number}"
        missing = [f for f in TUPLE_FIELDS if f not in record]
        if missing:
            raise SelfCalibrationDataError(f"{where}: missing field(s) {', '.join(missing)}")
        if not isinstance(record["context"], str) or not isinstance(record["yes_text"], str):
            raise SelfCalibrationDataError(f"{where}: context and yes_text must be strings")
        ssc = record["ssc"]
        if isinstance(ssc, bool) or not isinstance(ssc, (int, float)) or not 0.0 <= ssc <= 1.0:
            raise SelfCalibrationDataError(f"{where}: ssc must be a number in [0, 1], got {ssc!r}")
        start, end = record["response_start"], record["response_end"]
        if not (isinstance(start, int) and isinstance(end, int)) or (
            start >= 0 and not start < end <= len(record["context"])
        ):
            raise SelfCalibrationDataError(f"{where}: response span {start}..{end} is not inside the context")
        if not isinstance(record["lm_loss"], bool) or (record["lm_loss"] and start < 0):
            raise SelfCalibrationDataError(f"{where}: lm_loss must be a boolean (false without a span)")
        tuples.append(record)
    if not tuples:
        raise SelfCalibrationDataError(f"{path}: no training tuples")
    return tuples
