"""capcal's tables of the runs under the output folders: ``load_runs`` (discovery, reading, selection) and the
per-question table (``load_run``, ``load_table``, ``summarize``, ``write_question_table``).

The columns of the tables are told in :mod:`analysis.runs`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.runs.discovery import LEADERBOARD_REASON, discover_runs
from analysis.runs.identity import SamplesFile
from analysis.runs.records import RunRows, read_run
from analysis.runs.selection import choose_runs

__all__ = [
    "CONFIDENCE_COLUMNS",
    "QUESTION_COLUMNS",
    "RUN_COLUMNS",
    "RunCollection",
    "load_run",
    "load_runs",
    "load_table",
    "summarize",
    "write_question_table",
]


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


@dataclass
class RunCollection:
    """What ``load_runs`` found: tables of the used runs and an account of every run it saw.

    ``questions``: per-question table of the used sampling runs (module docstring). ``confidences``: one row
    per confidence record of the used confidence runs (``CONFIDENCE_COLUMNS``; ``target_task`` is the
    sampling task it scores, from the task's declaration, None when undeclared). ``runs``: one row per
    distinct run (``RUN_COLUMNS``), ``used`` and the ``reason``. ``duplicates``: (path, same-as path) of
    run files and folders read once. ``skipped``: (path, reason) of entries not read. ``models``:
    model_id -> identity (``fingerprint``, ``label``, ``source``, ``reason``). ``files``: the used runs.
    ``leaderboard_files``: the leaderboard runs' (not used: their columns are in the results file; a wrapped
    one, ``capcal_tasks.sampled_calibration``, still has a protocol to state).
    """

    questions: pd.DataFrame
    confidences: pd.DataFrame
    runs: pd.DataFrame
    duplicates: list[tuple[Path, Path]] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    models: dict[str, dict] = field(default_factory=dict)
    files: list[SamplesFile] = field(default_factory=list)  # the used runs' files
    leaderboard_files: list[SamplesFile] = field(default_factory=list)

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
    found, models = discover_runs(roots)
    runs = [read_run(file, allow_null_responses, responses) for file in found.files]
    decided, matched = choose_runs([run for run in runs if run.kind not in UNUSABLE_KINDS], select)
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
        leaderboard_files=[run.file for run in runs if run.kind == "leaderboard"],
    )


def _run_row(run: RunRows, used: bool, reason: str) -> dict:
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
