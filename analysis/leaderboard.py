r"""Leaderboard export: capcal's calibration columns laid out as the Hugging Face leaderboard template reads.

The template (its ``read_evals.py`` + ``populate.py``) reads one value per *benchmark*, the key of
``results`` in a model's results file (a second ``Task`` on the same key shows the same value), ranks by the
sum of a row's values over the number of its ``Tasks`` as higher-is-better, and leaves a row out when one of
its values is missing or NaN; with no complete row left it raises ``KeyError: 'Average ⬆️'``. It reads every
folder of JSON files under its results root and fails whole on a file whose ``config`` has no string
``model_name`` (lm-eval's own results file: ``model_args`` is a dict); it skips a folder holding any other
file (lm-eval's ``--log_samples`` writes ``samples_*.jsonl``).

:func:`leaderboard_rows` reads lm-eval results files (any layout, with or without samples files);
:func:`leaderboard_board` puts the rows of one benchmark on one board; :func:`write_leaderboard_results`
writes one template-shaped file per model::

    {"config": {"model_name": ..., "model_dtype": ..., "model_sha": ...},
     "results": {"<benchmark>/<column>": {"score": value, "source_metric": ..., "shown_as": ...},
                 "<benchmark>/stderr/<column>": {"score": standard error}},
     "capcal": {"benchmark": ..., "columns": {column: {"tasks": [...], "stderr": ..., ...}}, ...}}

and the template's configuration is :func:`template_tasks`. What the board guarantees, so that the template
can neither crash on it nor average unlike things:

- **Bounded columns.** Every column is within [0, 1] up to a finite-sample correction (x 100 on the board):
  expected accuracy, 1 - corrected Brier (>= 0, at most 1.25), 1 - debiased ECE, soft AUROC, verbalized parse
  rate, each oriented higher-is-better (a lower-is-better metric m as 1 - m). The Brier skill is not a
  column: it is unbounded below, and the mean of per-task skills is decided by the task whose spread of mu is
  nearest 0 (S_hat in the denominator), which the template's average would turn into the ranking.
- **One task set per column.** A column's value is the unweighted mean of the per-task values over the tasks
  where *every* model of the board has it (standard error sqrt(sum se_t^2) / T, N/A if one is), so two
  models' numbers in a column are over the same tasks; a task dropped from a column, and a column no task
  keeps for every model (left off the board), are named with the reason the task recorded.
- **Every row complete.** Every model has every column of the board, so the template drops no row and always
  has one to rank.
- **A results root the template can read.** :func:`results_root_notes` refuses, in one line, a results root
  holding a file that crashes the template (lm-eval's own results file) or an earlier export of the benchmark
  over other columns or tasks.
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
    "TEMPLATE_PRECISIONS",
    "BoardColumn",
    "LeaderboardBoard",
    "LeaderboardRow",
    "leaderboard_board",
    "leaderboard_rows",
    "results_root_notes",
    "template_tasks",
    "write_leaderboard_results",
]

FILTER = "all_responses"
DEFAULT_BENCHMARK = "capcal_calibration_open"
# the dtypes the template's Precision.from_str knows (src/display/utils.py); any other shows as "?"
TEMPLATE_PRECISIONS = ("float16", "bfloat16", "torch.float16", "torch.bfloat16")


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
    BoardColumn("ptrue_brier", "ptrue_corrected_brier", False, "P(True) 1 - Brier"),
    BoardColumn("ptrue_calibration", "ptrue_ece_debiased", False, "P(True) 1 - debiased ECE"),
    BoardColumn("ptrue_discrimination", "ptrue_auroc", True, "P(True) soft AUROC"),
    BoardColumn("consistency_brier", "consistency_corrected_brier", False, "Consistency 1 - Brier"),
    BoardColumn("consistency_calibration", "consistency_ece_debiased", False, "Consistency 1 - debiased ECE"),
    BoardColumn("consistency_discrimination", "consistency_auroc", True, "Consistency soft AUROC"),
    BoardColumn("verbalized_parse_rate", "verbalized_parse_failure_rate", False, "Verbalized parse rate"),
)


@dataclass
class LeaderboardRow:
    """One model's per-task values of one benchmark, with what they came from: the model's name, dtype and
    revision (for weights capcal de-quantized from a GGUF, the GGUF's sha256, and ``model_source`` says so),
    the results file and the benchmark's version. ``tasks``: the benchmark's tasks (the task itself for a
    task); ``values``: column key -> task -> (board value, standard error or None for "N/A");
    ``absent``: column key -> task -> why the task has no value for it (the reason the task recorded)."""

    model_name: str
    model_dtype: str
    model_sha: str
    model_source: str
    results_file: Path
    benchmark: str
    version: str
    tasks: tuple[str, ...]
    values: dict[str, dict[str, tuple[float, float | None]]] = field(default_factory=dict)
    absent: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class LeaderboardBoard:
    """The rows of one benchmark on one board: ``columns`` the columns every model has on the same tasks
    (``tasks``: column key -> those tasks), ``left_off`` column key -> why it is not on the board, ``dropped``
    column key -> task -> why a task some models have is not in the column."""

    benchmark: str
    rows: list[LeaderboardRow]
    columns: list[BoardColumn]
    tasks: dict[str, tuple[str, ...]]
    left_off: dict[str, str]
    dropped: dict[str, dict[str, str]]

    def cell(self, row: LeaderboardRow, key: str) -> tuple[float, float | None]:
        """A model's board value of a column and its standard error: the unweighted mean over the column's
        tasks, sqrt(sum se_t^2) / T (None if one task's is N/A)."""
        pairs = [row.values[key][task] for task in self.tasks[key]]
        value = sum(value for value, _ in pairs) / len(pairs)
        errors = [stderr for _, stderr in pairs]
        if any(stderr is None for stderr in errors):
            return value, None
        return value, math.sqrt(sum(stderr * stderr for stderr in errors)) / len(pairs)

    def notes(self) -> list[str]:
        """One line per column left off the board and per task dropped from a column, with the reason."""
        labels = {column.key: column.label for column in BOARD_COLUMNS}
        lines = [
            f"{labels[key]} ({key}) is left off the board: {reason}" for key, reason in self.left_off.items()
        ]
        for key, tasks in self.dropped.items():
            for task, reason in tasks.items():
                lines.append(f"{labels[key]} ({key}) is averaged without {task}: {reason}")
        for row in self.rows:
            if row.model_dtype not in TEMPLATE_PRECISIONS:
                lines.append(
                    f'{row.model_name}: model_dtype {row.model_dtype or "(none)"} shows as Precision "?": '
                    "the template's Precision (src/display/utils.py) knows float16 and bfloat16 only"
                )
        return lines


def _pretrained(results: dict) -> str:
    """The model lm-eval ran: ``pretrained`` of the model arguments (a dict in lm-eval 0.4.13, a string
    before), else ``model_name``."""
    model_args = (results.get("config") or {}).get("model_args")
    if isinstance(model_args, dict) and model_args.get("pretrained"):
        return str(model_args["pretrained"])
    match = re.search(r"pretrained=([^,]+)", str(model_args or ""))
    if match:
        return match[1]
    return str(results.get("model_name") or "unknown-model")


def _model_identity(results: dict) -> tuple[str, str, str]:
    """(name, revision, source). A model capcal prepared (its manifest, or capcal's list of models for a
    folder named like one of them: the same on every machine) is named by its upstream repository, but its
    weights are not that repository's: the revision is the GGUF's sha256 and the source says where they came
    from. Any other model: lm-eval's name (a local folder shortened to its name) and ``model_sha`` (else the
    requested ``model_revision`` of a Hub name)."""
    name = _pretrained(results)
    config = results.get("config") or {}
    manifest_file = Path(name) / MANIFEST_NAME
    manifest: dict = {}
    if manifest_file.is_file():
        try:
            manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            manifest = {}
    elif os.path.isabs(name) and Path(name).name in MODELS:
        spec = MODELS[Path(name).name]
        manifest = {
            "upstream": spec.upstream,
            "gguf_sha256": spec.gguf_sha256,
            "description": spec.description,
        }
    if manifest.get("upstream"):
        digest = str(manifest.get("gguf_sha256") or "")
        source = f"{manifest.get('description') or name}; de-quantized from a GGUF (sha256 {digest})"
        return str(manifest["upstream"]).split(" (")[0], f"gguf-sha256:{digest}", source
    local = os.path.isabs(name) or name.startswith(".")
    revision = str(config.get("model_sha") or ("" if local else config.get("model_revision") or ""))
    return (Path(name).name if local else name), revision, ""


def _number(value: object) -> float | None:
    """A finite number, or None for NaN, "N/A" and anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _reason(results: dict, task: str, metric: str) -> str:
    """Why ``metric`` has no value in ``task``'s row: the reason the task recorded (``left_out_columns``:
    nothing to measure; ``undefined_columns``: the run cannot give it)."""
    bookkeeping = (results.get("configs", {}).get(task) or {}).get("capcal_calibration") or {}
    for section in ("left_out_columns", "undefined_columns"):
        reason = (bookkeeping.get(section) or {}).get(metric)
        if reason:
            return str(reason)
    return f"{metric} is not in the results of {task}"


def _row(path: Path, results: dict, benchmark: str) -> LeaderboardRow:
    config = results.get("config") or {}
    name, revision, source = _model_identity(results)
    tasks = tuple(results.get("group_subtasks", {}).get(benchmark) or [benchmark])
    row = LeaderboardRow(
        model_name=name,
        model_dtype=str(config.get("model_dtype") or ""),
        model_sha=revision,
        model_source=source,
        results_file=path,
        benchmark=benchmark,
        version=str((results.get("versions") or {}).get(benchmark, "")),
        tasks=tasks,
    )
    for column in BOARD_COLUMNS:
        row.values[column.key], row.absent[column.key] = {}, {}
        for task in tasks:
            entry = results["results"].get(task) or {}
            value = _number(entry.get(f"{column.metric},{FILTER}"))
            if value is None:
                row.absent[column.key][task] = _reason(results, task, column.metric)
                continue
            stderr = _number(entry.get(f"{column.metric}_stderr,{FILTER}"))
            row.values[column.key][task] = (column.board_value(value), stderr)
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


def _template_precision(dtype: str) -> str:
    """The precision the template shows (``Precision.from_str``), part of its row id."""
    return dtype.removeprefix("torch.") if dtype in TEMPLATE_PRECISIONS else "?"


def _left_off_reason(rows: Sequence[LeaderboardRow], key: str) -> str:
    """Why no task keeps a column for every row: a model that has it on no task, with its first task's
    reason; else the tasks each model has it on."""
    benchmark = rows[0].benchmark
    for row in rows:
        if not row.values[key]:
            task, reason = next(iter(row.absent[key].items()))
            return f"{row.model_name} has it on no task of {benchmark} ({task}: {reason})"
    having = "; ".join(f"{row.model_name} on {', '.join(row.values[key])}" for row in rows)
    return f"no task of {benchmark} has it for every model ({having})"


def leaderboard_board(rows: Sequence[LeaderboardRow]) -> LeaderboardBoard:
    """The rows on one board. Each column keeps the tasks where every row has a value; a column with none
    is left off. Raises ValueError, one line, for rows of different benchmarks or versions, or two rows the
    template would merge into one (the same model name and shown precision)."""
    rows = list(rows)
    if not rows:
        raise ValueError("no rows to put on a board")
    first = rows[0]
    seen: dict[tuple[str, str], Path] = {}
    for row in rows:
        if row.benchmark != first.benchmark or row.version != first.version:
            raise ValueError(
                f"{row.results_file} has {row.benchmark} version {row.version}, {first.results_file} "
                f"{first.benchmark} version {first.version}: one board holds one benchmark at one version"
            )
        key = (row.model_name, _template_precision(row.model_dtype))
        if key in seen:
            raise ValueError(
                f"{row.results_file} and {seen[key]} are both {row.benchmark} of {row.model_name}: the "
                "template would show one of them; export them separately"
            )
        seen[key] = row.results_file
    columns, tasks, left_off, dropped = [], {}, {}, {}
    for column in BOARD_COLUMNS:
        common = tuple(task for task in first.tasks if all(task in row.values[column.key] for row in rows))
        lacking = {}
        for task in first.tasks:
            if task in common or not any(task in row.values[column.key] for row in rows):
                continue
            row = next(row for row in rows if task in row.absent[column.key])
            lacking[task] = f"{row.model_name} has no value there ({row.absent[column.key][task]})"
        if not common:
            left_off[column.key] = _left_off_reason(rows, column.key)
            continue
        columns.append(column)
        tasks[column.key] = common
        if lacking:
            dropped[column.key] = lacking
    return LeaderboardBoard(first.benchmark, rows, columns, tasks, left_off, dropped)


def _label(column: BoardColumn, benchmark: str) -> str:
    """The column's name on the board: with the benchmark's name unless it is the default group, so that two
    benchmarks exported to one board have distinct columns."""
    if benchmark == DEFAULT_BENCHMARK:
        return f"{column.label} ⬆️"
    return f"{column.label} ({benchmark}) ⬆️"


def template_tasks(board: LeaderboardBoard) -> list[tuple[str, str, str]]:
    """The template's ``Tasks`` entries for the board's columns, as (benchmark, metric, col_name): put
    ``Task(*entry)`` for each in the leaderboard's ``src/about.py``. The standard errors
    (``<benchmark>/stderr/<column>``) are not among them: the template would average them into the rank."""
    return [
        (f"{board.benchmark}/{column.key}", "score", _label(column, board.benchmark))
        for column in board.columns
    ]


def _board_file(row: LeaderboardRow) -> str:
    """A row's file under the results root: ``<model>/results_<benchmark>.json``."""
    return f"{re.sub(r'[^A-Za-z0-9._-]+', '_', row.model_name)}/results_{row.benchmark}.json"


def _template_model(config: object) -> object:
    """What the template splits as the model's name:
    ``config.get("model_name", config.get("model_args", None))``."""
    if not isinstance(config, dict):
        return None
    return config.get("model_name", config.get("model_args", None))


def results_root_notes(board: LeaderboardBoard, output_dir: str | Path) -> list[str]:
    """Check the results root the board is written to as the template will read it. Raises ValueError, one
    line, for a file that would crash the template (not JSON, or no string model name in its ``config``:
    lm-eval's own results file) or an earlier export of the benchmark over other columns or tasks (the
    template would drop rows or average unlike values). Returns a note per folder the template skips."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    ours = {root / _board_file(row) for row in board.rows}
    expected = {column.key: list(board.tasks[column.key]) for column in board.columns}
    notes = []
    for folder, _, files in os.walk(root):
        if not files:
            continue
        others = sorted(name for name in files if not name.endswith(".json"))
        if others:
            notes.append(f"{folder}: the template skips this folder (it holds {others[0]}, not JSON)")
            continue
        for name in sorted(files):
            path = Path(folder) / name
            if path in ours:
                continue
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as error:
                raise ValueError(
                    f"{path}: the template cannot read it ({error}); move it out of {root}"
                ) from None
            model = _template_model(data.get("config") if isinstance(data, dict) else None)
            if not isinstance(model, str) or not isinstance(data.get("results"), dict):
                what = "its model_args is a dict" if isinstance(model, dict) else "it has no model name"
                raise ValueError(
                    f"{path}: the template fails on this file ({what}: config.model_name is missing; "
                    f"lm-eval's own results file?) and shows no board; move it out of {root} and export it "
                    "with capcal leaderboard"
                )
            record = data.get("capcal") if isinstance(data.get("capcal"), dict) else {}
            prefix = f"{board.benchmark}/"
            if (
                any(key.startswith(prefix) for key in data["results"])
                and record.get("columns_tasks") != expected
            ):
                raise ValueError(
                    f"{path}: an earlier export of {board.benchmark} over other columns or tasks; export "
                    "every model of the board in one call (capcal leaderboard RUN_DIR... --output "
                    f"{root}) or remove it"
                )
    return notes


def write_leaderboard_results(board: LeaderboardBoard, output_dir: str | Path) -> list[Path]:
    """One template-shaped results file per row, ``<output_dir>/<model>/results_<benchmark>.json`` (only
    JSON files in each folder, so the template reads them), after :func:`results_root_notes` checked the
    folder. Every row has every column of the board."""
    output_dir = Path(output_dir)
    results_root_notes(board, output_dir)
    written = []
    for row in board.rows:
        results: dict[str, dict] = {}
        columns: dict[str, dict] = {}
        for column in board.columns:
            value, stderr = board.cell(row, column.key)
            results[f"{board.benchmark}/{column.key}"] = {
                "score": value,
                "source_metric": column.metric,
                "shown_as": "value" if column.higher_is_better else "1 - value",
            }
            if stderr is not None:
                results[f"{board.benchmark}/stderr/{column.key}"] = {"score": stderr}
            columns[column.key] = {
                "tasks": list(board.tasks[column.key]),
                "stderr": stderr,
                "left_out_tasks": {
                    task: reason
                    for task, reason in {
                        **board.dropped.get(column.key, {}),
                        **row.absent[column.key],
                    }.items()
                    if task not in board.tasks[column.key]
                },
            }
        payload = {
            "config": {
                "model_name": row.model_name,
                "model_dtype": row.model_dtype,
                "model_sha": row.model_sha,
            },
            "results": results,
            "capcal": {
                "benchmark": board.benchmark,
                "version": row.version,
                "source_results_file": str(row.results_file),
                "model_source": row.model_source,
                "columns": columns,
                "columns_tasks": {key: list(tasks) for key, tasks in board.tasks.items()},
                "missing_columns": dict(board.left_off),
            },
        }
        path = output_dir / _board_file(row)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=2, allow_nan=False) + "\n", encoding="utf-8")
        written.append(path)
    return written
