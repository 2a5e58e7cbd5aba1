"""Reading lm-eval output folders into capcal's tables: which runs there are, which are used, and their rows.

lm-eval writes ``<output>/<model>/results_<time>.json`` and, with ``--log_samples``,
``samples_<task>_<time>.jsonl`` beside it. One *run* is one task's samples file with its results file.

- **Discovery** walks each folder, following symlinked folders; a folder reached again (a symlink loop, a
  folder given twice, a folder and its own sub-folder) is walked once. A directory named like a results or
  samples file is skipped, with the reason recorded (``RunCollection.skipped``).
- **Run identity** is the run's own content: ``run_key`` = sha256 of (its results file's sha256, its
  samples file's bytes). Two copies of one run (a ``backup/`` copy inside the output folder) are read
  once; the copy left out is listed in ``RunCollection.duplicates`` (as is a folder reached twice).
- **Model identity** (``capcal_models.model_identity``): the results file's ``capcal_model.fingerprint``,
  else the fingerprint of the checkpoint named in its ``config.model_args`` when that folder exists, else
  ``unresolved:<label>``. lm-eval's ``model_name`` is only a label: a trailing slash or a symlink to the
  same checkpoint joins; two checkpoints under one name do not.
- **Selection**: where a (model, task) has several runs, ``load_runs`` uses the latest (``run_id``, the
  time in the file name) unless ``select`` names others, and records in ``RunCollection.runs`` which runs it
  used and why it left out the others. Runs it never uses are listed there too, with the reason: a
  leaderboard task (``capcal_<dataset>_calibration``: its calibration columns are in the results file), a
  task of a results file without its samples file, or a samples file without capcal records.
- **Records** are validated by the module that writes them: sampling records by
  ``capcal_tasks.sampling.parse_sampling_record`` (and, for capcal's tasks with a cheap deterministic
  checker, re-scored by the task's own ``process_results`` against the gold in the logged doc), confidence
  records by
  ``capcal_tasks.confidence.records.parse_confidence_record``; JSON strictly by ``capcal_tasks.records``.
  Any violation raises ``RunFormatError`` (a ``ValueError``) naming the file and line.
- **Re-scored runs** (``capcal rescore``, ``analysis.rescore``): a results file with ``capcal_rescore``
  holds another checker's labels for a run's logged responses. It is a run of the same (model, task) like any
  other; its records are re-checked with the checker it records when that one is a cheap rule (not with the
  task's own, unless that is the one recorded), and the ``labels`` column of ``runs`` says which labels each
  run holds ("task checker" or "rescored: <checker> (<version>)[, judge <model>]"). Its questions carry
  ``source_correctness``.

The per-question table (``RunCollection.questions``, ``load_run``) has one row per (model, task, run,
question)::

    model, model_id, task, run_id, run_key, doc_id, question_id, question, target, first_response,
    extracted_answers, correctness, n, expected_accuracy, majority_vote_accuracy, pass_at_1, pass_at_2, ...

**Responses are streamed.** Each samples line is parsed, validated (and re-checked) and dropped; the table
keeps the first response of each question (``first_response``) and, only with ``responses=True``, every
response (a ``responses`` column of lists). A run of 14,000 questions x 100 responses of 4 KB (11 GB of
samples) is read in bounded memory that way (``benchmarks/scale_run.py``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from capcal_models.model_identity import model_fingerprint_from_args, parse_model_args
from capcal_tasks.checkers import describe_labels, parse_rescore_provenance, recheck_scorer
from capcal_tasks.confidence.records import CONFIDENCE_KINDS, confidence_kind, parse_confidence_record
from capcal_tasks.records import RunFormatError, iter_json_lines, read_json_with_digest
from capcal_tasks.relations import capcal_task_declarations, parse_declaration
from capcal_tasks.sampling import (
    is_sampling_config,
    is_sampling_record,
    parse_sampling_record,
    recheck_sampling_record,
)

__all__ = [
    "CONFIDENCE_COLUMNS",
    "LEADERBOARD_REASON",
    "QUESTION_COLUMNS",
    "RUN_COLUMNS",
    "RunCollection",
    "RunFormatError",
    "SamplesFile",
    "find_samples_files",
    "iter_sample_records",
    "load_run",
    "load_runs",
    "load_table",
    "summarize",
    "write_question_table",
]

_DATE_ID = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"
_SAMPLES_NAME = re.compile(rf"^samples_(?P<task>.+)_(?P<date>{_DATE_ID})\.jsonl$")
_RESULTS_NAME = re.compile(rf"^results_(?P<date>{_DATE_ID})\.json$")
QUESTION_COLUMNS = [
    "model",
    "model_id",
    "task",
    "run_id",
    "run_key",
    "doc_id",
    "question_id",
    "question",
    "target",
    "first_response",
    "extracted_answers",
    "correctness",
    "n",
    "expected_accuracy",
]
CONFIDENCE_COLUMNS = [
    "model",
    "model_id",
    "task",
    "target_task",
    "run_id",
    "run_key",
    "kind",
    "doc_id",
    "question_id",
    "confidence",
    "parse_success",
    "response_correct",
    "logprob_yes",
    "logprob_no",
    "p_yes",
    "p_yes_normalized",
    "response_correctness",
]
RUN_COLUMNS = [
    "model_id",
    "model",
    "task",
    "kind",
    "run_id",
    "run_key",
    "results_path",
    "samples_path",
    "records",
    "used",
    "reason",
    "labels",
]
UNRESOLVED = "unresolved:"
LEADERBOARD_REASON = "not used: leaderboard task (its calibration columns are in the results file)"
# Kinds of runs that load_runs lists but never uses, with the reason it gives.
UNUSABLE_KINDS = {
    "leaderboard": LEADERBOARD_REASON,
    "other": "not used: no capcal sampling or confidence records in the samples file",
}
# What load_table looked for, by table.
_EXPECTED = {
    "questions": ("sampling samples", "expected samples_capcal_*.jsonl from --log_samples"),
    "confidences": ("confidence-task samples", "verbalized, P(True), selfcheck"),
}
AGGREGATE_SECTIONS = ("results", "groups")  # lm-eval's aggregates: NaN allowed (an undefined mean or stderr)


@dataclass(frozen=True)
class SamplesFile:
    """One lm-eval samples file (one run of one task) with what its results file says about it."""

    path: Path
    task: str
    run_id: str
    model: str  # display label
    task_config: dict  # the task's config from the results file ({} when there is no results file)
    has_results: bool = True  # False: no results file beside it (lm-eval writes both at the end of a run)
    logged_questions: int | None = None  # the results file's "n-samples" (effective) count for the task
    model_id: str = ""  # checkpoint fingerprint, or "unresolved:<label>"
    results_path: Path | None = None
    run_key: str = ""  # the run's content identity (see the module docstring)
    rescore: dict | None = None  # the results file's ``capcal_rescore`` (a re-scored run), else None

    @property
    def labels(self) -> str:
        """Which labels the run holds (``capcal_tasks.checkers.describe_labels``)."""
        return describe_labels(self.rescore)


@dataclass
class RunCollection:
    """What ``load_runs`` found: tables of the used runs and an account of every run it saw.

    ``questions``: per-question table of the used sampling runs (module docstring). ``confidences``: one row
    per confidence record of the used confidence runs (``CONFIDENCE_COLUMNS``; ``target_task`` is the
    sampling task it scores, from the task's declaration, None when undeclared). ``runs``: one row per
    distinct run (``RUN_COLUMNS``), ``used`` and the ``reason``. ``duplicates``: (path, same-as path) of
    run files and folders read once. ``skipped``: (path, reason) of entries not read. ``models``:
    model_id -> identity (``fingerprint``, ``label``, ``source``, ``reason``). ``files``: the used runs.
    """

    questions: pd.DataFrame
    confidences: pd.DataFrame
    runs: pd.DataFrame
    duplicates: list[tuple[Path, Path]] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    models: dict[str, dict] = field(default_factory=dict)
    files: list[SamplesFile] = field(default_factory=list)  # the used runs' files

    def unresolved_models(self) -> list[str]:
        """Labels of the models known only by their label (no checkpoint fingerprint)."""
        return sorted(m["label"] for m in self.models.values() if m.get("source") != "checkpoint")

    def found(self, most: int = 5) -> str:
        """One line on what the folders hold: each run (task, kind, run id; for a run left out, why) and
        each entry skipped, at most ``most`` of them; "found no lm-eval results or samples files" when there
        is nothing."""
        items = [
            f"{run.task} ({run.kind} run {run.run_id})" + ("" if run.used else f": {run.reason}")
            for run in self.runs.itertuples()
        ]
        items += [f"{path}: skipped, {reason}" for path, reason in self.skipped]
        if not items:
            return "found no lm-eval results or samples files"
        more = f"; and {len(items) - most} more" if len(items) > most else ""
        return "found instead: " + "; ".join(items[:most]) + more


# ---------------------------------------------------------------- discovery


def _walk(
    roots: Sequence[Path], skipped: list[tuple[Path, str]], revisits: list[tuple[Path, Path]]
) -> list[tuple[Path, list[os.DirEntry]]]:
    """(folder, entries) of every folder under ``roots``, following symlinks; each real folder once (a
    folder reached again is added to ``revisits`` as (path, first path))."""
    seen: dict[tuple[int, int], Path] = {}
    folders: list[tuple[Path, list[os.DirEntry]]] = []
    stack = [Path(root) for root in reversed(roots)]
    while stack:
        folder = stack.pop()
        try:
            stat = folder.stat()
        except OSError as error:
            skipped.append((folder, f"cannot be read ({error.strerror})"))
            continue
        identity = (stat.st_dev, stat.st_ino)
        if identity in seen:
            revisits.append((folder, seen[identity]))
            continue
        seen[identity] = folder
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError as error:
            skipped.append((folder, f"cannot be listed ({error.strerror})"))
            continue
        folders.append((folder, entries))
        children = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=True):
                    children.append(Path(entry.path))
            except OSError:
                skipped.append((Path(entry.path), "a broken link"))
        stack.extend(reversed(children))
    return folders


def _results_where(path: Path, text_key: str, value: Any = ...) -> str:
    """``path:line`` of ``"text_key": value`` (of ``"text_key":`` without a value) in a results file (1 when
    not found)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return f"{path}:1"
    pattern = re.escape(json.dumps(text_key)) + r"\s*:"
    if value is not ...:
        pattern += r"\s*" + re.escape(json.dumps(value))
    match = re.search(pattern, text)
    return f"{path}:{text.count(chr(10), 0, match.start()) + 1 if match else 1}"


def _constant_where(path: Path, key: str, constant: str) -> str:
    """``path:line`` of the first ``constant`` (NaN, Infinity) after the top-level ``"key":``."""
    text = path.read_text(encoding="utf-8")
    match = re.search(re.escape(json.dumps(key)) + r"\s*:", text)
    start = match.end() if match else 0
    found = re.search(r"(?<![\w\"-])" + re.escape(constant) + r"(?![\w\"])", text[start:])
    position = start + found.start() if found else start
    return f"{path}:{text.count(chr(10), 0, position) + 1}"


def _non_finite(value: Any) -> str | None:
    """The first NaN/Infinity in a parsed JSON value (as its JSON constant), or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return "NaN" if math.isnan(item) else ("Infinity" if item > 0 else "-Infinity")
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _read_results(path: Path) -> tuple[dict, str]:
    """A results file, validated, and the sha256 of its bytes (one read). NaN is lm-eval's own value for an
    undefined aggregate or standard error (the mean verbalized confidence when every parse failed), so it is
    accepted in the ``results`` and ``groups`` sections, which capcal does not read, and rejected anywhere
    else, like everywhere in the samples files."""
    constants: list[str] = []
    results, digest = read_json_with_digest(path, nonfinite=constants)
    if not isinstance(results, dict) or "results" not in results:
        raise RunFormatError(f"{path}: not an lm-eval results file (no 'results' key)")
    if constants:
        for key, value in results.items():
            constant = None if key in AGGREGATE_SECTIONS else _non_finite(value)
            if constant is not None:
                raise RunFormatError(
                    f"{_constant_where(path, key, constant)}: non-finite number {constant} in '{key}' "
                    "(not JSON; lm-eval writes NaN only for aggregates)"
                )
    for key in ("configs", "config"):
        if not isinstance(results.get(key) or {}, dict):
            raise RunFormatError(f"{path}: '{key}' must be a JSON object, got {type(results[key]).__name__}")
    configs = results.get("configs") or {}
    for task, config in configs.items():
        if not isinstance(config, dict) or not isinstance(config.get("metadata") or {}, dict):
            raise RunFormatError(f"{path}: the config of task {task} (and its metadata) must be JSON objects")
        if "repeats" in config:
            repeats = config["repeats"]
            if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
                raise RunFormatError(
                    f"{_results_where(path, 'repeats', repeats)}: task {task}: repeats must be a positive "
                    f"integer, got {repeats!r}"
                )
    for task, counts in (results.get("n-samples") or {}).items():
        effective = counts.get("effective") if isinstance(counts, dict) else None
        if effective is not None and (
            isinstance(effective, bool) or not isinstance(effective, int) or effective < 0
        ):
            raise RunFormatError(
                f"{_results_where(path, 'effective', effective)}: task {task}: n-samples effective must be a "
                f"count, got {effective!r}"
            )
    identity = results.get("capcal_model")
    if identity is not None and not (
        isinstance(identity, dict)
        and isinstance(identity.get("fingerprint"), (str, type(None)))
        and isinstance(identity.get("label", ""), str)
    ):
        raise RunFormatError(f"{path}: 'capcal_model' must be an object with a fingerprint (text or null)")
    parse_rescore_provenance(results.get("capcal_rescore"), str(path))
    return results, digest


def _label(results: dict | None, folder: Path) -> str:
    """The results file's ``capcal_model.label`` or ``model_name`` (for hf: the checkpoint path), else the
    output sub-folder's name; without a trailing slash."""
    if results:
        identity = results.get("capcal_model") or {}
        name = identity.get("label") or results.get("model_name")
        model_args = (results.get("config") or {}).get("model_args")
        if not name and model_args:
            try:
                arguments = parse_model_args(model_args)
            except ValueError:
                arguments = {}
            name = arguments.get("pretrained") or arguments.get("model") or str(model_args)
        if name:
            text = str(name)
            return text.rstrip("/") or text
    return folder.name


class _Identities:
    """Model identities of results files, each (model, model_args) fingerprinted once per load."""

    def __init__(self) -> None:
        self.cache: dict[str, dict] = {}
        self.models: dict[str, dict] = {}

    def of(self, results: dict | None, folder: Path) -> tuple[str, str]:
        label = _label(results, folder)
        identity = (results or {}).get("capcal_model")
        if isinstance(identity, dict) and identity.get("fingerprint"):
            found = {
                "fingerprint": identity["fingerprint"],
                "label": label,
                "source": "checkpoint",
                "reason": "results file",
            }
        elif results and (results.get("config") or {}).get("model_args") is not None:
            config = results["config"]
            key = repr((config.get("model"), config.get("model_args")))
            if key not in self.cache:
                self.cache[key] = model_fingerprint_from_args(str(config.get("model")), config["model_args"])
            found = {**self.cache[key], "label": label}
        else:
            found = {
                "fingerprint": None,
                "label": label,
                "source": "unresolved",
                "reason": "no model arguments in the results file" if results else "no results file",
            }
        model_id = found["fingerprint"] or f"{UNRESOLVED}{label}"
        self.models.setdefault(model_id, found)
        return model_id, self.models[model_id]["label"]


def _run_key(results_digest: str | None, samples: Path) -> str:
    """sha256 over the results file's digest and the samples file's bytes: the run's content identity."""
    digest = hashlib.sha256(f"{results_digest or '-'}\0".encode())
    with samples.open("rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass
class _Found:
    """What discovery found: the runs to read, and an account of everything else."""

    files: list[SamplesFile] = field(default_factory=list)
    duplicates: list[tuple[Path, Path]] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    unlogged: list[dict] = field(default_factory=list)  # RUN_COLUMNS rows of tasks without a samples file
    keys: dict[str, Path] = field(default_factory=dict)  # run_key -> first path

    def first(self, run_key: str, path: Path) -> bool:
        """Whether ``run_key`` is seen for the first time; if not, ``path`` is listed as a duplicate."""
        if run_key in self.keys:
            self.duplicates.append((path, self.keys[run_key]))
            return False
        self.keys[run_key] = path
        return True


def _run_files(
    entries: list[os.DirEntry], skipped: list[tuple[Path, str]]
) -> tuple[dict[str, Path], list[tuple[Path, str, str]]]:
    """A folder's results files ({date: path}) and samples files ([(path, task, date)]), by name."""
    results_files: dict[str, Path] = {}
    samples_files: list[tuple[Path, str, str]] = []
    for entry in entries:
        path = Path(entry.path)
        results_match, samples_match = _RESULTS_NAME.match(entry.name), _SAMPLES_NAME.match(entry.name)
        if not (results_match or samples_match):
            continue
        try:
            is_folder = entry.is_dir(follow_symlinks=True)
            os.stat(path)  # a link that loops or points nowhere cannot be read: say so, naming the file
        except OSError as error:
            raise RunFormatError(
                f"{path}: cannot be read ({error.strerror}); a link that loops or points nowhere? "
                "fix or remove it"
            ) from None
        if is_folder:
            skipped.append((path, "a folder named like an lm-eval results/samples file, not read"))
        elif results_match:
            results_files[results_match["date"]] = path
        else:
            samples_files.append((path, samples_match["task"], samples_match["date"]))
    return results_files, samples_files


def _unlogged_reason(config: dict) -> tuple[str, str]:
    """(kind, reason) of a task in a results file without its samples file (never a sampling task)."""
    declared = (config.get("metadata") or {}).get("capcal_task")
    if declared == "leaderboard":
        return "leaderboard", LEADERBOARD_REASON
    if declared:
        return str(declared), "not used: no samples file (run lm-eval with --log_samples)"
    return "other", "not used: not a capcal task, and no samples file"


def _unlogged_runs(
    found: _Found, folder: Path, results_path: Path, read: tuple[dict, str], identities: _Identities
) -> None:
    """Add to ``found.unlogged`` every task of a results file that has no samples file beside it; a
    sampling task without one raises ``RunFormatError`` (the run was made without ``--log_samples``)."""
    results, digest = read
    date = _RESULTS_NAME.match(results_path.name)["date"]
    for task, config in (results.get("configs") or {}).items():
        if (folder / f"samples_{task}_{date}.jsonl").is_file():
            continue
        if is_sampling_config(config):
            raise RunFormatError(
                f"{results_path}: task {task} has no samples file "
                f"samples_{task}_{date}.jsonl; run lm-eval with --log_samples"
            )
        run_key = hashlib.sha256(f"{digest}\0{task}".encode()).hexdigest()
        if not found.first(run_key, results_path):
            continue
        kind, reason = _unlogged_reason(config)
        model_id, label = identities.of(results, folder)
        found.unlogged.append(
            {
                "model_id": model_id,
                "model": label,
                "task": task,
                "kind": kind,
                "run_id": date,
                "run_key": run_key,
                "results_path": results_path,
                "samples_path": None,
                "records": 0,
                "used": False,
                "reason": reason,
                "labels": describe_labels(results.get("capcal_rescore")),
            }
        )


def _logged_count(results: dict | None, task: str) -> int | None:
    """The results file's "n-samples" effective count for ``task``, None when it has none."""
    counts = ((results or {}).get("n-samples") or {}).get(task)
    effective = counts.get("effective") if isinstance(counts, dict) else None
    return effective if isinstance(effective, int) and not isinstance(effective, bool) else None


def _discover_folder(
    found: _Found, folder: Path, entries: list[os.DirEntry], identities: _Identities
) -> None:
    """Add one folder's runs to ``found``: each samples file with its results file (same date)."""
    results_files, samples_files = _run_files(entries, found.skipped)
    read = {date: _read_results(path) for date, path in results_files.items()}
    for date, path in results_files.items():
        _unlogged_runs(found, folder, path, read[date], identities)
    for path, task, date in samples_files:
        results, digest = read.get(date, (None, None))
        run_key = _run_key(digest, path)
        if not found.first(run_key, path):
            continue
        model_id, label = identities.of(results, folder)
        config = ((results or {}).get("configs") or {}).get(task) or {}
        found.files.append(
            SamplesFile(
                path,
                task,
                date,
                label,
                config,
                results is not None,
                _logged_count(results, task),
                model_id,
                results_files.get(date),
                run_key,
                (results or {}).get("capcal_rescore"),
            )
        )


def _discover(roots: Sequence[str | Path]) -> tuple[_Found, dict[str, dict]]:
    """Every distinct run under ``roots`` and the model identities; ``FileNotFoundError`` for a root that is
    not a folder."""
    paths = [Path(root) for root in roots]
    for root in paths:
        if not root.is_dir():
            raise FileNotFoundError(f"{root} is not a folder")
    found, identities = _Found(), _Identities()
    revisits: list[tuple[Path, Path]] = []
    for folder, entries in _walk(paths, found.skipped, revisits):
        _discover_folder(found, folder, entries, identities)
    found.duplicates += revisits
    return found, identities.models


def find_samples_files(output_dir: str | Path) -> list[SamplesFile]:
    """Every distinct lm-eval samples file under ``output_dir`` (copies read once), paired with its results
    file. Raises ``RunFormatError`` for an unreadable results file, or a capcal sampling task in a results
    file whose samples file is missing (the run was made without ``--log_samples``)."""
    return _discover([output_dir])[0].files


def iter_sample_records(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, record) of every non-empty line of a samples file, strictly parsed
    (``capcal_tasks.records.iter_json_lines``)."""
    return iter_json_lines(path)


# ---------------------------------------------------------------- reading one run


def _question_text(doc: dict, record: dict) -> str:
    for key in ("question", "problem", "Question"):
        if isinstance(doc.get(key), str):
            return doc[key]
    arguments = record.get("arguments") or {}
    first = arguments.get("gen_args_0") if isinstance(arguments, dict) else None
    value = first.get("arg_0") if isinstance(first, dict) else None
    return value if isinstance(value, str) else ""


def _target(record: dict) -> str | None:
    """The logged gold target: "" when absent, None when null (never the text "None")."""
    if "target" not in record:
        return ""
    target = record["target"]
    if target is None:
        return None
    return target if isinstance(target, str) else str(target)


def _target_task(file: SamplesFile) -> str | None:
    relation = parse_declaration(file.task, file.task_config.get("metadata"), str(file.results_path))
    if relation is None:
        relation = capcal_task_declarations().get(file.task)
    return relation.target_task if relation is not None else None


def _not_capcal(record: dict) -> bool:
    """Whether a samples line is none of capcal's records (NaN there is another task's business)."""
    return not is_sampling_record(record) and confidence_kind(record) is None


@dataclass
class _RunRows:
    file: SamplesFile
    kind: str  # "sampling", a confidence kind, or "other"
    rows: list[dict]


def _read_run(file: SamplesFile, allow_null_responses: bool, keep_responses: bool = False) -> _RunRows:
    """The rows of one samples file: sampling questions, or confidence records (kind by fields); a
    leaderboard task's file is not read (its results are the results file's columns). A question twice in
    one file raises ``RunFormatError``. Lines are read one at a time; a sampling row keeps its responses
    only with ``keep_responses``."""
    declared = (file.task_config.get("metadata") or {}).get("capcal_task")
    if declared == "leaderboard":
        return _RunRows(file, "leaderboard", [])
    sampling_rows: list[dict] = []
    confidence_rows: list[dict] = []
    first_line: dict[str, int] = {}
    target_task: Any = ...  # read from the task's declaration at the first confidence record
    checker = recheck_scorer(file.task, file.rescore)
    for line_number, record in iter_json_lines(file.path, _not_capcal):
        where = f"{file.path}:{line_number}"
        if is_sampling_record(record):
            row = _sampling_row(file, record, where, checker, allow_null_responses, keep_responses)
            rows, identifier = sampling_rows, row["question_id"]
        else:
            kind = confidence_kind(record)
            if kind is None:
                continue
            if declared in CONFIDENCE_KINDS and declared != kind:
                raise RunFormatError(f"{where}: fields of a {kind} task, but the task config says {declared}")
            if target_task is ...:
                target_task = _target_task(file)
            row = {
                **_run_fields(file),
                "target_task": target_task,
                **parse_confidence_record(record, kind, where),
            }
            rows, identifier = confidence_rows, f"{kind}\0{row['question_id']}"
        if identifier in first_line:
            raise RunFormatError(
                f"{where}: question {row['question_id']} appears twice "
                f"(first on line {first_line[identifier]})"
            )
        first_line[identifier] = line_number
        rows.append(row)
    return _run_rows(file, sampling_rows, confidence_rows)


def _run_fields(file: SamplesFile) -> dict[str, str]:
    """The columns every row of a run starts with: model, model_id, task, run_id, run_key."""
    return {
        "model": file.model,
        "model_id": file.model_id,
        "task": file.task,
        "run_id": file.run_id,
        "run_key": file.run_key,
    }


def _sampling_row(
    file: SamplesFile,
    record: dict,
    where: str,
    checker: Callable | None,
    allow_null_responses: bool,
    keep_responses: bool = False,
) -> dict:
    """The per-question row of one sampling record, validated (``parse_sampling_record``) and, with the
    task's ``checker``, re-scored against the gold in its doc (not when a response is null). The row holds
    the first response, the counts of null and empty (whitespace-only) responses, and all responses only
    with ``keep_responses``."""
    fields = parse_sampling_record(record, where, file.task, allow_null_responses=allow_null_responses)
    if checker is not None and not fields["null_responses"]:
        recheck_sampling_record(fields, checker, where)
    responses = fields["responses"]
    row = {
        **_run_fields(file),
        "doc_id": fields["doc_id"],
        "question_id": fields["question_id"],
        "question": _question_text(fields["doc"], record),
        "target": _target(record),
        "first_response": responses[0],
        "extracted_answers": fields["extracted_answers"],
        "correctness": fields["correctness"],
        "n": fields["n"],
        "expected_accuracy": fields["expected_accuracy"],
        "null_responses": fields["null_responses"],
        "empty_responses": sum(1 for text in responses if text is not None and not text.strip()),
    }
    if keep_responses:
        row["responses"] = responses
    if fields["majority_vote_accuracy"] is not None:
        row["majority_vote_accuracy"] = fields["majority_vote_accuracy"]
    if fields.get("source_correctness") is not None:
        row["source_correctness"] = fields["source_correctness"]
    for m, value in fields["pass_at"].items():
        row[f"pass_at_{m}"] = value
    return row


def _run_rows(file: SamplesFile, sampling_rows: list[dict], confidence_rows: list[dict]) -> _RunRows:
    """A samples file's rows with its kind: "sampling", its confidence kinds joined by "+", or "other" (no
    capcal record). Both kinds in one file, or none in a sampling task's file, raise ``RunFormatError``."""
    if sampling_rows and confidence_rows:
        raise RunFormatError(f"{file.path}: sampling and confidence records in one samples file")
    if not sampling_rows and not confidence_rows and is_sampling_config(file.task_config):
        raise RunFormatError(
            f"{file.path}: no capcal sampling records in the samples file of a sampling task "
            "(empty; the run may have been interrupted)"
        )
    if sampling_rows:
        return _RunRows(file, "sampling", sampling_rows)
    if confidence_rows:
        kinds = sorted({row["kind"] for row in confidence_rows})
        return _RunRows(file, "+".join(kinds), confidence_rows)
    return _RunRows(file, "other", [])


# ---------------------------------------------------------------- selection


def _matches(selector: str, file: SamplesFile) -> bool:
    selector = str(selector)
    if selector in (file.run_id, file.run_key) or (len(selector) >= 8 and file.run_key.startswith(selector)):
        return True
    candidates = [file.path] + ([file.results_path] if file.results_path else [])
    try:
        resolved = Path(selector).expanduser().resolve()
    except (OSError, RuntimeError):
        return False
    return any(resolved in (c.resolve(), c.parent.resolve()) for c in candidates)


def _selectors_for(
    select: Mapping | Iterable[str] | str | None, model_id: str, label: str, task: str
) -> list[str] | None:
    if select is None or isinstance(select, str):
        return None
    if isinstance(select, Mapping):
        for (model, wanted_task), value in select.items():
            if wanted_task == task and model in (model_id, label):
                return [value] if isinstance(value, str) else list(value)
        return None
    return list(select)


def _choose(
    runs: list[_RunRows], select: Mapping | Iterable[str] | str | None
) -> tuple[list[tuple[_RunRows, bool, str]], set[str]]:
    """(run, used, reason) for every run; and the selectors that matched something."""
    groups: dict[tuple[str, str], list[_RunRows]] = {}
    for run in runs:
        groups.setdefault((run.file.model_id, run.file.task), []).append(run)
    decided = []
    matched: set[str] = set()
    for (model_id, task), group in groups.items():
        group.sort(key=lambda r: (r.file.run_id, str(r.file.path)), reverse=True)
        if select == "all":
            decided += [(run, True, "all runs kept (load_run)") for run in group]
            continue
        selectors = _selectors_for(select, model_id, group[0].file.model, task)
        chosen = []
        if selectors is not None:
            for selector in selectors:
                hits = [run for run in group if _matches(selector, run.file)]
                if hits:
                    matched.add(str(selector))
                    chosen += [run for run in hits if run not in chosen]
            if isinstance(select, Mapping) and not chosen:
                raise ValueError(f"select: {selectors} matches no run of ({group[0].file.model}, {task})")
        if chosen:
            if len(chosen) > 1:
                raise ValueError(
                    f"select: several runs of ({group[0].file.model}, {task}) selected: "
                    + ", ".join(str(run.file.path) for run in chosen)
                )
            used = chosen[0]
            reason_used = "selected"
        else:
            used = group[0]
            reason_used = "latest run" if len(group) > 1 else "only run"
        for run in group:
            if run is used:
                decided.append((run, True, reason_used))
            elif reason_used == "selected":
                decided.append((run, False, f"not selected (used {used.file.run_id}: {used.file.path})"))
            elif run.file.run_id == used.file.run_id:
                decided.append(
                    (
                        run,
                        False,
                        f"same time as the used run {used.file.path}, different content; pass select",
                    )
                )
            else:
                decided.append((run, False, f"older than the used run {used.file.run_id}"))
    return decided, matched


def _question_frame(rows: list[dict], keep_null_column: bool, keep_responses: bool = False) -> pd.DataFrame:
    """The per-question table: ``QUESTION_COLUMNS``, then ``responses`` (with ``keep_responses``), the other
    fields (``null_responses`` and ``empty_responses`` with ``keep_null_column``), the pass@m columns."""
    counts = ["null_responses", "empty_responses"]
    base = QUESTION_COLUMNS + (["responses"] if keep_responses else [])
    if not rows:
        return pd.DataFrame(columns=base + (counts if keep_null_column else []))
    table = pd.DataFrame(rows)
    if not keep_null_column:
        table = table.drop(columns=counts)
    pass_columns = sorted((c for c in table.columns if c.startswith("pass_at_")), key=lambda c: int(c[8:]))
    other = [c for c in table.columns if c not in base and c not in pass_columns]
    return table[base + other + pass_columns].reset_index(drop=True)


def load_runs(
    output_dirs: str | Path | Sequence[str | Path],
    select: Mapping[tuple[str, str], str | Sequence[str]] | Iterable[str] | str | None = None,
    *,
    allow_null_responses: bool = False,
    responses: bool = False,
) -> RunCollection:
    """Every capcal run under ``output_dirs``, read once each, with one run used per (model, task).

    ``select``: None (the latest run of each (model, task)), ``"all"`` (every distinct run), a list of run
    ids / run keys / paths (results file, samples file or their folder) that pick a run wherever they match,
    or a mapping ``{(model, task): run id or path}`` (model: its model_id or label). A selector that matches
    no run raises ``ValueError``. ``allow_null_responses``: keep null responses as None and count them in a
    ``null_responses`` column (``capcal check``) instead of raising; with it the table also counts
    whitespace-only responses (``empty_responses``). ``responses``: keep every response text in a
    ``responses`` column (lists of k texts); by default only ``first_response`` is kept and the files are
    streamed line by line, so memory does not grow with the size of the responses.

    Raises ``RunFormatError`` (file and line) for malformed logs and ``FileNotFoundError`` for a path that
    is not a folder. A folder without capcal records gives empty tables; ``runs`` still lists every run
    found, with why it is not used (a leaderboard task, whose calibration columns are in its results file; a
    task without a samples file; another task).
    """
    roots = [output_dirs] if isinstance(output_dirs, (str, Path)) else list(output_dirs)
    found, models = _discover(roots)
    runs = [_read_run(file, allow_null_responses, responses) for file in found.files]
    decided, matched = _choose([run for run in runs if run.kind not in UNUSABLE_KINDS], select)
    if select is not None and not isinstance(select, (str, Mapping)):
        unmatched = [s for s in select if str(s) not in matched]
        if unmatched:
            raise ValueError(f"select: {', '.join(map(str, unmatched))} matches no run")
    decided += [(run, False, UNUSABLE_KINDS[run.kind]) for run in runs if run.kind in UNUSABLE_KINDS]
    used = [run for run, is_used, _ in decided if is_used]
    runs_table = pd.DataFrame(
        [_run_row(run, is_used, reason) for run, is_used, reason in decided] + found.unlogged,
        columns=RUN_COLUMNS,
    )
    if not runs_table.empty:
        runs_table = runs_table.sort_values(["model", "task", "run_id"], kind="stable").reset_index(drop=True)
    return RunCollection(
        questions=_question_frame(
            [row for run in used if run.kind == "sampling" for row in run.rows],
            allow_null_responses,
            responses,
        ),
        confidences=pd.DataFrame(
            [row for run in used if run.kind != "sampling" for row in run.rows], columns=CONFIDENCE_COLUMNS
        ),
        runs=runs_table,
        duplicates=found.duplicates,
        skipped=found.skipped,
        models=models,
        files=[run.file for run in used],
    )


def _run_row(run: _RunRows, used: bool, reason: str) -> dict:
    """The ``RUN_COLUMNS`` row of a run that has a samples file."""
    file = run.file
    return {
        "model_id": file.model_id,
        "model": file.model,
        "task": file.task,
        "kind": run.kind,
        "run_id": file.run_id,
        "run_key": file.run_key,
        "results_path": file.results_path,
        "samples_path": file.path,
        "records": len(run.rows),
        "used": used,
        "reason": reason,
        "labels": file.labels,
    }


def load_table(output_dir: str | Path, table: str = "questions", *, responses: bool = False) -> pd.DataFrame:
    """The ``questions`` (or ``confidences``) table of every distinct run under one folder (``load_runs``
    with ``select="all"``; ``responses`` as there). Raises ``FileNotFoundError`` when that table is empty,
    saying what the folder holds instead (``RunCollection.found``)."""
    collection = load_runs([output_dir], select="all", responses=responses)
    frame = getattr(collection, table)
    if frame.empty:
        what, hint = _EXPECTED[table]
        raise FileNotFoundError(f"no capcal {what} under {output_dir} ({hint}); {collection.found()}")
    return frame


def load_run(output_dir: str | Path, *, responses: bool = False) -> pd.DataFrame:
    """The per-question table of every capcal sampling run under ``output_dir`` (each distinct run once,
    all runs of a (model, task) kept; see ``load_runs`` to use one per (model, task)). ``responses=True``
    adds every response text (a ``responses`` column); by default only ``first_response`` is kept.

    Raises ``RunFormatError`` for malformed logs and ``FileNotFoundError`` when the folder holds no capcal
    sampling samples (saying what it holds instead).
    """
    return load_table(output_dir, "questions", responses=responses)


def summarize(table: pd.DataFrame) -> pd.DataFrame:
    """Per (model, task, run): questions, samples per question, mean expected accuracy with its standard
    error, the share of questions solved sometimes but not always, and the answer-extraction rate."""

    def one(group: pd.DataFrame) -> dict:
        mu = group["expected_accuracy"].to_numpy(dtype=float)
        extracted = [a is not None for answers in group["extracted_answers"] for a in answers]
        return {
            "questions": len(group),
            "k_min": int(group["n"].min()),
            "k_max": int(group["n"].max()),
            "mean_expected_accuracy": float(mu.mean()),
            "stderr": float(mu.std(ddof=1) / np.sqrt(len(mu))) if len(mu) > 1 else float("nan"),
            "share_0_lt_mu_lt_1": float(np.mean((mu > 0) & (mu < 1))),
            "extraction_rate": float(np.mean(extracted)),
        }

    keys = ["model", "task", "run_id"]
    return pd.DataFrame(
        [{**dict(zip(keys, key, strict=True)), **one(group)} for key, group in table.groupby(keys)]
    )


def write_question_table(table: pd.DataFrame, path: str | Path) -> Path:
    """Write the table as JSON lines (``.jsonl``), CSV (``.csv``) or Parquet (``.parquet``), by suffix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        table.to_json(path, orient="records", lines=True, force_ascii=False)
    elif path.suffix == ".csv":
        table.to_csv(path, index=False)
    elif path.suffix == ".parquet":
        table.to_parquet(path, index=False)
    else:
        raise ValueError(f"{path}: unsupported table format {path.suffix!r} (use .jsonl, .csv or .parquet)")
    return path
