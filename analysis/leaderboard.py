r"""Leaderboard export: capcal's calibration columns laid out as the Hugging Face leaderboard template reads.

The template (its ``read_evals.py`` + ``populate.py``) reads one value per *benchmark*, the key of
``results`` in a model's results file, ranks by the mean of all its columns as higher-is-better, and drops a
model's row when one value is missing or NaN; it skips any results folder that holds a file other than
``.json`` (lm-eval's ``--log_samples`` writes ``samples_*.jsonl`` beside the results). lm-eval's own results
file gives many columns per benchmark (``capcal_calibration_open`` holds all of them), lower-is-better ones
among them, so the template alone can show one of them per task and ranks a debiased ECE backwards.

:func:`leaderboard_rows` reads lm-eval results files (any folder layout, with or without samples files) and
:func:`write_leaderboard_results` writes one template-shaped file per model::

    {"config": {"model_name": ..., "model_dtype": ..., "model_sha": ...},
     "results": {"<benchmark>/<column>": {"score": value, "stderr": se, "source_metric": ..., ...}}}

one benchmark key per headline column, every column oriented higher-is-better (a lower-is-better metric m is
exported as 1 - m, which keeps its scale and differences), never NaN. The template's configuration for it is
:func:`template_tasks`: ``Task(benchmark="<benchmark>/<column>", metric="score", col_name=<label>)``.

The columns (:data:`BOARD_COLUMNS`) are capcal's headline columns that every model of a board has: expected
accuracy, and for P(True) and the leakage-free consistency the corrected Brier skill, 1 - the debiased ECE
and the soft AUROC, plus the verbalized parse rate. The verbalized skill, ECE and AUROC are not board columns:
they are undefined (NaN) for a model that never states a parsable confidence, and the template would drop
that model's row; they stay in lm-eval's results. A column that is still undefined for a model (P(True) not
requested, k < 4) is left out of its file with a warning naming the column and the reason: the template then
drops that row, which the warning says.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from analysis.runs.files import RESULTS_NAME, read_results, walk_folders
from capcal_models.model_files import MANIFEST_NAME
from capcal_models.prepare import MODELS

__all__ = [
    "BOARD_COLUMNS",
    "DEFAULT_BENCHMARK",
    "BoardColumn",
    "LeaderboardRow",
    "leaderboard_rows",
    "template_tasks",
    "write_leaderboard_results",
]

FILTER = "all_responses"
DEFAULT_BENCHMARK = "capcal_calibration_open"


@dataclass(frozen=True)
class BoardColumn:
    """One board column: its key under the benchmark, the lm-eval metric it comes from, whether that metric
    is higher-is-better (if not, the board shows 1 - value), and its label."""

    key: str
    metric: str
    higher_is_better: bool
    label: str

    def board_value(self, value: float) -> float:
        """The value as the board shows it: higher is better."""
        return value if self.higher_is_better else 1.0 - value


BOARD_COLUMNS: tuple[BoardColumn, ...] = (
    BoardColumn("accuracy", "expected_accuracy", True, "Expected accuracy"),
    BoardColumn("ptrue_skill", "ptrue_corrected_brier_skill", True, "P(True) skill"),
    BoardColumn("ptrue_calibration", "ptrue_ece_debiased", False, "P(True) 1 - debiased ECE"),
    BoardColumn("ptrue_discrimination", "ptrue_auroc", True, "P(True) soft AUROC"),
    BoardColumn("consistency_skill", "consistency_corrected_brier_skill", True, "Consistency skill"),
    BoardColumn("consistency_calibration", "consistency_ece_debiased", False, "Consistency 1 - debiased ECE"),
    BoardColumn("consistency_discrimination", "consistency_auroc", True, "Consistency soft AUROC"),
    BoardColumn("verbalized_parse_rate", "verbalized_parse_failure_rate", False, "Verbalized parse rate"),
)


@dataclass
class LeaderboardRow:
    """One model's board values (``values``: column key -> value, higher is better), with what they came
    from: the model, its dtype and revision as lm-eval recorded them, the results file and the benchmark's
    version; ``stderrs``: column key -> standard error or None (lm-eval's "N/A"); ``missing``: column key ->
    why the column is undefined for this model (its file leaves it out, the template drops the row)."""

    model_name: str
    model_dtype: str
    model_sha: str
    results_file: Path
    benchmark: str
    version: str
    values: dict[str, float] = field(default_factory=dict)
    stderrs: dict[str, float | None] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)


def _model_name(results: dict) -> str:
    """The model's name: the upstream repository of a model capcal prepared (its manifest, or capcal's list
    of models for a folder named like one of them: the same name on every machine), else lm-eval's
    ``model_name`` (``pretrained=`` of the model arguments), a local folder shortened to its name."""
    name = str(results.get("model_name") or "")
    if not name:
        match = re.search(r"pretrained=([^,]+)", str((results.get("config") or {}).get("model_args") or ""))
        name = match[1] if match else "unknown-model"
    manifest = Path(name) / MANIFEST_NAME
    upstream = ""
    if manifest.is_file():
        try:
            upstream = str(json.loads(manifest.read_text(encoding="utf-8")).get("upstream") or "")
        except (OSError, ValueError):
            upstream = ""
    elif os.path.isabs(name) and Path(name).name in MODELS:
        upstream = MODELS[Path(name).name].upstream
    if upstream:
        return upstream.split(" (")[0]
    if os.path.isabs(name) or name.startswith("."):
        return Path(name).name
    return name


def _number(value: object) -> float | None:
    """A finite number, or None for NaN, "N/A" and anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _reason(results: dict, benchmark: str, metric: str) -> str:
    """Why ``metric`` has no value in ``benchmark``'s row: the reasons the tasks wrote into their configs."""
    tasks = results.get("group_subtasks", {}).get(benchmark) or [benchmark]
    reasons = []
    for task in tasks:
        bookkeeping = (results.get("configs", {}).get(task) or {}).get("capcal_calibration") or {}
        reason = (bookkeeping.get("undefined_columns") or {}).get(metric)
        if reason:
            reasons.append(f"{task}: {reason}")
    return "; ".join(reasons[:2]) or f"{metric} is not in the results of {benchmark}"


def _row(path: Path, results: dict, benchmark: str) -> LeaderboardRow:
    config = results.get("config") or {}
    row = LeaderboardRow(
        model_name=_model_name(results),
        model_dtype=str(config.get("model_dtype") or ""),
        model_sha=str(config.get("model_sha") or config.get("model_revision") or ""),
        results_file=path,
        benchmark=benchmark,
        version=str((results.get("versions") or {}).get(benchmark, "")),
    )
    values = results["results"][benchmark]
    for column in BOARD_COLUMNS:
        value = _number(values.get(f"{column.metric},{FILTER}"))
        if value is None:
            row.missing[column.key] = _reason(results, benchmark, column.metric)
            continue
        row.values[column.key] = column.board_value(value)
        row.stderrs[column.key] = _number(values.get(f"{column.metric}_stderr,{FILTER}"))
    return row


def leaderboard_rows(
    output_dirs: Sequence[str | Path], benchmark: str = DEFAULT_BENCHMARK
) -> list[LeaderboardRow]:
    """One row per lm-eval results file under ``output_dirs`` (recursively; samples files beside them are
    ignored) that has ``benchmark`` (a calibration task or group) among its results. Raises ValueError, one
    line, when a folder is missing or no results file has the benchmark."""
    roots = [Path(directory) for directory in output_dirs]
    for root in roots:
        if not root.is_dir():
            raise ValueError(f"{root}: no such folder")
    skipped: list[tuple[Path, str]] = []
    rows = []
    for folder, entries in walk_folders(roots, skipped, []):
        for entry in entries:
            if not RESULTS_NAME.match(entry.name) or not entry.is_file():
                continue
            path = folder / entry.name
            results, _ = read_results(path)
            if benchmark in results["results"]:
                rows.append(_row(path, results, benchmark))
    if not rows:
        raise ValueError(
            f"no lm-eval results file under {', '.join(map(str, roots))} has {benchmark} among its results"
        )
    return rows


def template_tasks(benchmark: str = DEFAULT_BENCHMARK) -> list[tuple[str, str, str]]:
    """The template's ``Tasks`` entries for the exported files, as (benchmark, metric, col_name): put
    ``Task(*entry)`` for each in the leaderboard's ``src/about.py``."""
    return [(f"{benchmark}/{column.key}", "score", f"{column.label} ⬆️") for column in BOARD_COLUMNS]


def write_leaderboard_results(rows: Sequence[LeaderboardRow], output_dir: str | Path) -> list[Path]:
    """One template-shaped results file per row, ``<output_dir>/<model>/results_<benchmark>.json`` (only
    JSON files in each folder, so the template reads them). Two rows of the same model and benchmark raise
    ValueError: the template would merge them into one row."""
    output_dir = Path(output_dir)
    seen: dict[tuple[str, str, str], Path] = {}
    for row in rows:
        key = (row.model_name, row.model_dtype, row.benchmark)
        if key in seen:
            raise ValueError(
                f"{row.results_file} and {seen[key]} are both {row.benchmark} of {row.model_name}: the "
                "template would show one of them; export them separately"
            )
        seen[key] = row.results_file
    written = []
    for row in rows:
        payload = {
            "config": {
                "model_name": row.model_name,
                "model_dtype": row.model_dtype,
                "model_sha": row.model_sha,
            },
            "results": {
                f"{row.benchmark}/{column.key}": {
                    "score": row.values[column.key],
                    "stderr": row.stderrs[column.key],
                    "source_metric": column.metric,
                    "shown_as": "value" if column.higher_is_better else "1 - value",
                }
                for column in BOARD_COLUMNS
                if column.key in row.values
            },
            "capcal": {
                "source_results_file": str(row.results_file),
                "version": row.version,
                "missing_columns": row.missing,
            },
        }
        folder = output_dir / re.sub(r"[^A-Za-z0-9._-]+", "_", row.model_name)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"results_{row.benchmark}.json"
        path.write_text(json.dumps(payload, indent=2, allow_nan=False) + "\n", encoding="utf-8")
        written.append(path)
    return written
