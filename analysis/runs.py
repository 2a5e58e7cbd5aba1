"""Reading lm-eval output folders into capcal's per-question table.

lm-eval writes ``<output>/<model>/results_<time>.json`` and, with ``--log_samples``,
``samples_<task>_<time>.jsonl`` beside it. capcal's sampling tasks log their per-question record as metric
fields of each samples line (see ``capcal_tasks.sampling``). ``load_run`` joins them into one row per
(model, task, run, question):

    model, task, run_id, doc_id, question_id, question, target, responses, extracted_answers, correctness,
    n, expected_accuracy, majority_vote_accuracy, pass_at_1, pass_at_2, ...

Anything malformed (invalid JSON or Unicode, a truncated line, missing keys, a correctness vector that
disagrees with its responses or with the logged expected accuracy, a question id twice in one run, an empty
samples file of a sampling task) raises ``RunFormatError`` naming the file and line.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from capcal_tasks.sampling import is_sampling_config

__all__ = [
    "RunFormatError",
    "SamplesFile",
    "find_samples_files",
    "iter_sample_records",
    "load_run",
    "summarize",
    "write_question_table",
]

_DATE_ID = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"
_SAMPLES_NAME = re.compile(rf"^samples_(?P<task>.+)_(?P<date>{_DATE_ID})\.jsonl$")
_RESULTS_NAME = re.compile(rf"^results_(?P<date>{_DATE_ID})\.json$")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
REQUIRED_SAMPLE_KEYS = ("doc_id", "doc", "resps", "correctness", "extracted_answers", "expected_accuracy")
QUESTION_COLUMNS = [
    "model",
    "task",
    "run_id",
    "doc_id",
    "question_id",
    "question",
    "target",
    "responses",
    "extracted_answers",
    "correctness",
    "n",
    "expected_accuracy",
]


class RunFormatError(ValueError):
    """A malformed or partial lm-eval log; the message names the file (and line)."""


@dataclass(frozen=True)
class SamplesFile:
    """One lm-eval samples file with what its results file says about it."""

    path: Path
    task: str
    run_id: str
    model: str
    task_config: dict  # the task's config from the results file ({} when there is no results file)
    has_results: bool = True  # False: no results file beside it (lm-eval writes both at the end of a run)
    logged_questions: int | None = None  # the results file's "n-samples" (effective) count for the task


def _read_results(path: Path) -> dict:
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise RunFormatError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None
    except UnicodeDecodeError:
        raise RunFormatError(f"{path}: not valid UTF-8") from None
    if not isinstance(results, dict) or "results" not in results:
        raise RunFormatError(f"{path}: not an lm-eval results file (no 'results' key)")
    for key in ("configs", "config"):
        if not isinstance(results.get(key) or {}, dict):
            raise RunFormatError(f"{path}: '{key}' must be a JSON object, got {type(results[key]).__name__}")
    configs = results.get("configs") or {}
    for task, config in configs.items():
        if not isinstance(config, dict) or not isinstance(config.get("metadata") or {}, dict):
            raise RunFormatError(f"{path}: the config of task {task} (and its metadata) must be JSON objects")
    return results


def _model_name(results: dict | None, folder: Path) -> str:
    """The results file's ``model_name`` (for hf: the checkpoint path), else the output sub-folder's name."""
    if results:
        name = results.get("model_name") or (results.get("config") or {}).get("model_args")
        if isinstance(name, dict):
            name = name.get("pretrained") or name.get("model")
        if name:
            return str(name)
    return folder.name


def find_samples_files(output_dir: str | Path) -> list[SamplesFile]:
    """Every lm-eval samples file under ``output_dir``, paired with its results file.

    Raises ``RunFormatError`` for an unreadable results file, or a capcal sampling task in a results file
    whose samples file is missing (the run was made without ``--log_samples``).
    """
    output_dir = Path(output_dir)
    results_by_key: dict[tuple[Path, str], dict] = {}
    for path in sorted(output_dir.rglob("results_*.json")):
        match = _RESULTS_NAME.match(path.name)
        if match:
            results_by_key[(path.parent, match["date"])] = _read_results(path)

    files = []
    for path in sorted(output_dir.rglob("samples_*.jsonl")):
        match = _SAMPLES_NAME.match(path.name)
        if not match:
            continue
        results = results_by_key.get((path.parent, match["date"]))
        config = ((results or {}).get("configs") or {}).get(match["task"]) or {}
        model = _model_name(results, path.parent)
        counts = ((results or {}).get("n-samples") or {}).get(match["task"])
        effective = counts.get("effective") if isinstance(counts, dict) else None
        logged = effective if isinstance(effective, int) and not isinstance(effective, bool) else None
        files.append(
            SamplesFile(path, match["task"], match["date"], model, config, results is not None, logged)
        )

    for (folder, date), results in results_by_key.items():
        for task, config in (results.get("configs") or {}).items():
            if is_sampling_config(config):
                expected = folder / f"samples_{task}_{date}.jsonl"
                if not expected.is_file():
                    raise RunFormatError(
                        f"{folder / f'results_{date}.json'}: task {task} has no samples file "
                        f"{expected.name}; run lm-eval with --log_samples"
                    )
    return files


def _question_text(doc: dict, record: dict) -> str:
    for key in ("question", "problem", "Question"):
        if isinstance(doc.get(key), str):
            return doc[key]
    arguments = record.get("arguments") or {}
    first = arguments.get("gen_args_0") if isinstance(arguments, dict) else None
    return str(first.get("arg_0", "")) if isinstance(first, dict) else ""


def iter_sample_records(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, record) of every non-empty line of a samples file; ``RunFormatError`` naming the file and
    line for invalid UTF-8, malformed or truncated JSON, a line that is not a JSON object, or a string with a
    lone surrogate escape (not valid Unicode; pandas and every writer would fail on it later)."""
    with path.open("rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            where = f"{path}:{line_number}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise RunFormatError(f"{where}: not valid UTF-8 (byte {error.start} of the line)") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise RunFormatError(
                    f"{where}: malformed or truncated JSON ({error.msg}); "
                    "the run may have been interrupted while writing"
                ) from None
            if not isinstance(record, dict):
                raise RunFormatError(f"{where}: expected a JSON object, got {type(record).__name__}")
            if _SURROGATE_ESCAPE.search(line):
                try:
                    json.dumps(record, ensure_ascii=False).encode("utf-8")
                except UnicodeEncodeError:
                    raise RunFormatError(
                        f"{where}: a string holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape); "
                        "not valid Unicode"
                    ) from None
            yield line_number, record


def _question_row(file: SamplesFile, line_number: int, record: dict) -> dict | None:
    where = f"{file.path}:{line_number}"
    if "correctness" not in record:
        return None  # not a capcal sampling line
    missing = [key for key in REQUIRED_SAMPLE_KEYS if key not in record]
    if missing:
        raise RunFormatError(f"{where}: missing key(s) {', '.join(missing)}")

    resps = record["resps"]
    if not (isinstance(resps, list) and len(resps) == 1 and isinstance(resps[0], list)):
        raise RunFormatError(f"{where}: 'resps' must hold one list of k responses")
    responses = [str(response) for response in resps[0]]
    correctness = record["correctness"]
    if not isinstance(correctness, list) or any(
        z not in (0, 1) or isinstance(z, (float, bool)) for z in correctness
    ):
        raise RunFormatError(f"{where}: 'correctness' must be a list of 0/1 integers")
    extracted = record["extracted_answers"]
    if not isinstance(extracted, list):
        raise RunFormatError(f"{where}: 'extracted_answers' must be a list")
    n = len(correctness)
    if n == 0 or n != len(responses) or n != len(extracted):
        raise RunFormatError(
            f"{where}: {len(responses)} responses, {n} correctness values and {len(extracted)} extracted "
            "answers; they must be equal and non-zero"
        )
    expected_accuracy = record["expected_accuracy"]
    if isinstance(record["doc_id"], bool) or not isinstance(record["doc_id"], int):
        raise RunFormatError(f"{where}: 'doc_id' must be an integer, got {record['doc_id']!r}")
    if (
        isinstance(expected_accuracy, bool)
        or not isinstance(expected_accuracy, (int, float))
        or not math.isclose(expected_accuracy, sum(correctness) / n, abs_tol=1e-9)
    ):
        raise RunFormatError(
            f"{where}: expected_accuracy {expected_accuracy!r} is not the mean of its correctness vector "
            f"({sum(correctness)}/{n})"
        )
    doc = record["doc"] if isinstance(record["doc"], dict) else {}
    question_id = doc.get("question_id") or f"{file.task}/doc-{record.get('doc_hash', record['doc_id'])}"
    row = {
        "model": file.model,
        "task": file.task,
        "run_id": file.run_id,
        "doc_id": int(record["doc_id"]),
        "question_id": str(question_id),
        "question": _question_text(doc, record),
        "target": str(record.get("target", "")),
        "responses": responses,
        "extracted_answers": extracted,
        "correctness": [int(z) for z in correctness],
        "n": n,
        "expected_accuracy": float(expected_accuracy),
    }
    for key, value in record.items():
        if key == "majority_vote_accuracy" or key.startswith("pass_at_"):
            row[key] = value
    return row


def _read_samples(file: SamplesFile) -> list[dict]:
    """The file's question rows; ``RunFormatError`` for a question id that occurs twice (naming both lines),
    or for a samples file without records of a task that the results file declares a capcal sampling task."""
    rows = []
    first_line: dict[str, int] = {}
    for line_number, record in iter_sample_records(file.path):
        row = _question_row(file, line_number, record)
        if row is None:
            continue
        question_id = row["question_id"]
        if question_id in first_line:
            raise RunFormatError(
                f"{file.path}:{line_number}: question {question_id} appears twice "
                f"(first on line {first_line[question_id]})"
            )
        first_line[question_id] = line_number
        rows.append(row)
    if not rows and is_sampling_config(file.task_config):
        raise RunFormatError(
            f"{file.path}: no capcal sampling records in the samples file of a sampling task "
            "(empty; the run may have been interrupted)"
        )
    return rows


def load_run(output_dir: str | Path) -> pd.DataFrame:
    """The per-question table of every capcal sampling task logged under ``output_dir``.

    One row per (model, task, run_id, question); columns as in the module docstring. Raises
    ``RunFormatError`` for malformed logs and ``FileNotFoundError`` when the folder holds no capcal samples.
    """
    root = Path(output_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder")
    rows = []
    for file in find_samples_files(root):
        rows.extend(_read_samples(file))
    if not rows:
        raise FileNotFoundError(
            f"no capcal sampling samples under {root} (expected samples_capcal_*.jsonl from --log_samples)"
        )
    table = pd.DataFrame(rows)
    pass_columns = sorted((c for c in table.columns if c.startswith("pass_at_")), key=lambda c: int(c[8:]))
    other = [c for c in table.columns if c not in QUESTION_COLUMNS and c not in pass_columns]
    return table[QUESTION_COLUMNS + other + pass_columns].reset_index(drop=True)


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
