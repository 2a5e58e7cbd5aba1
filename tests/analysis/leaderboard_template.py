"""The Hugging Face leaderboard template's reading and display logic, re-implemented for the tests from its
behaviour (``src/leaderboard/read_evals.py`` and ``src/populate.py`` of the template Space), independent of
capcal's code: only ``os``, ``json``, ``math``, numpy and pandas.

What it does, step by step, as the template does:

1. Walk the results root; a folder is read only if every file in it ends in ``.json`` (a folder with any
   other file, such as lm-eval's ``samples_*.jsonl``, is skipped whole).
2. Per results file: the model from ``config["model_name"]`` (else ``config["model_args"]``), split once on
   "/" into org and model; the precision from ``config["model_dtype"]`` ("float16", "bfloat16", else
   "Unknown"); the row id ``org_model_precision`` (files of the same id merge their values).
3. Per configured task ``(benchmark, metric, col_name)``: the values ``row[metric]`` of every results entry
   whose key matches the benchmark, by equality (``exact`` style) or containment (``substring`` style); none,
   or one missing -> the task gets no value; else the mean times 100, stored under the *benchmark* (so two
   tasks with the same benchmark share one value, the last written).
4. A row's average is the sum of its values over the number of tasks; every task column is its
   benchmark's value (a missing one drops the row).
5. The board: sorted by the average, descending; rounded to 2 decimals; rows with NaN in any task column
   dropped.

The one stand-in: the template asks the Hub whether each model still exists (``is_model_on_hub``); there is
no Hub here, and the answer changes no value, so it is not asked.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = ["AVERAGE", "TemplateTask", "board"]

AVERAGE = "Average ⬆️"


@dataclass(frozen=True)
class TemplateTask:
    benchmark: str
    metric: str
    col_name: str


@dataclass
class _Row:
    eval_name: str
    model: str
    values: dict = field(default_factory=dict)


def _precision(dtype: str | None) -> str:
    text = str(dtype or "")
    for name in ("bfloat16", "float16"):
        if text in (name, f"torch.{name}"):
            return name
    return "Unknown"


def _read_file(path: str, tasks: list[TemplateTask], style: str) -> _Row:
    with open(path) as handle:
        data = json.load(handle)
    config = data.get("config") or {}
    org_and_model = str(config.get("model_name", config.get("model_args", None))).split("/", 1)
    org, model = (None, org_and_model[0]) if len(org_and_model) == 1 else org_and_model
    precision = _precision(config.get("model_dtype"))
    eval_name = f"{model}_{precision}" if org is None else f"{org}_{model}_{precision}"
    row = _Row(eval_name, "/".join(org_and_model))
    for task in tasks:
        matches = [
            entry.get(task.metric, None)
            for key, entry in data["results"].items()
            if (task.benchmark == key if style == "exact" else task.benchmark in key)
        ]
        if not matches or any(value is None for value in matches):
            continue
        row.values[task.benchmark] = float(np.mean(np.array(matches, dtype=float))) * 100.0
    return row


def _results_files(root: str) -> list[str]:
    paths = []
    for folder, _, files in os.walk(root):
        if not files or any(not name.endswith(".json") for name in files):
            continue
        paths.extend(os.path.join(folder, name) for name in sorted(files))
    return paths


def board(root: str, tasks: list[TemplateTask], style: str = "exact") -> tuple[pd.DataFrame, int]:
    """The displayed board (model, average, one column per task's col_name) and the number of rows read
    before the template's NaN filter."""
    rows: dict[str, _Row] = {}
    for path in _results_files(root):
        row = _read_file(path, tasks, style)
        if row.eval_name in rows:
            rows[row.eval_name].values.update({k: v for k, v in row.values.items() if v is not None})
        else:
            rows[row.eval_name] = row
    records = []
    for row in rows.values():
        try:
            record = {"model": row.model, AVERAGE: sum(row.values.values()) / len(tasks)}
            for task in tasks:
                record[task.col_name] = row.values[task.benchmark]
        except KeyError:  # not every value present: the template leaves the row out
            continue
        records.append(record)
    columns = ["model", AVERAGE, *dict.fromkeys(task.col_name for task in tasks)]
    frame = pd.DataFrame.from_records(records, columns=columns)
    read = len(frame)
    frame = frame.sort_values(by=[AVERAGE], ascending=False).round(decimals=2)
    benchmark_columns = [task.col_name for task in tasks]
    frame = frame[frame[benchmark_columns].notna().all(axis=1)] if len(frame) else frame
    return frame.reset_index(drop=True), read


def is_nan(value: object) -> bool:
    return isinstance(value, float) and math.isnan(value)
