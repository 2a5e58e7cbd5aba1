"""The Hugging Face leaderboard template's reading and display, re-implemented for the tests from its
behaviour, independent of capcal's code (only ``os``, ``json``, numpy and pandas).

It mirrors these files of the template Space ``demo-leaderboard-backend`` (the public copy at commit 1ffc326
that issue 48 ran): ``src/leaderboard/read_evals.py`` (``EvalResult.init_from_json_file``, ``to_dict``,
``get_raw_eval_results``), ``src/populate.py`` (``get_leaderboard_df``), ``src/display/utils.py``
(``Precision.from_str``, the displayed columns ``COLS``/``BENCHMARK_COLS``), ``src/display/formatting.py``
(``has_no_nan_values``) and ``src/about.py`` (``Tasks``, an ``Enum`` of
``Task(benchmark, metric, col_name)``).
It fails where they fail, with their exceptions, and nothing is caught that they do not catch:

1. Walk the results root; a folder is read only if it has files and every one ends in ``.json`` (lm-eval's
   ``samples_*.jsonl`` beside the results makes it skip the folder whole). Its files sorted by the date part
   of their name.
2. Per file: ``config = data.get("config")``; the precision from ``config.get("model_dtype")``: "float16" and
   "bfloat16" (with or without "torch."), anything else (float32 too) "?". The model is
   ``config.get("model_name", config.get("model_args", None)).split("/", 1)``: a results file of lm-eval
   0.4.13 (no ``model_name``, a dict ``model_args``) raises ``AttributeError`` and the whole board fails. The
   row id is ``org_model_precision``.
3. Per ``Task``: the ``metric`` of every ``results`` entry whose key equals the benchmark (``substring``:
   whose key contains it, the variant some forks use); none, or one ``None``, leaves the task out; else
   ``np.mean * 100``, stored under the *benchmark*, so two Tasks of one benchmark share one value. A NaN is
   not missing: it stays.
4. Files of one row id merge (values that are not None win). A row's average is the sum of its values over
   the number of Tasks (NaN if one is NaN); each Task column is its benchmark's value; a missing benchmark
   raises ``KeyError`` and the row is left out.
5. ``pd.DataFrame.from_records`` of the rows, sorted by ``"Average ⬆️"``: with no row the frame has no
   columns and the sort raises ``KeyError: 'Average ⬆️'``. Then the displayed columns (with duplicates where
   two Tasks share a ``col_name``), rounded to 2 decimals, and rows with NaN in any Task column dropped.

Tasks are an ``Enum``: identical ``Task`` tuples are one member (an alias), so they count once.

The stand-ins: the template asks the Hub whether each model exists (``is_model_on_hub``) and reads request
files for type and license; there is no Hub here and neither changes a value or a row, so neither is asked
(the request file's absence is what the template handles by keeping defaults). The model column holds the
model's name where the template renders it as a link to the Hub.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = ["AVERAGE", "MODEL", "PRECISION", "REVISION", "TemplateTask", "board", "displayed_columns"]

AVERAGE = "Average ⬆️"
MODEL = "Model"
PRECISION = "Precision"
REVISION = "Model sha"


@dataclass(frozen=True)
class TemplateTask:
    benchmark: str
    metric: str
    col_name: str


@dataclass
class _EvalResult:
    eval_name: str
    full_model: str
    precision: str
    revision: str
    results: dict = field(default_factory=dict)


def _precision(dtype: object) -> str:
    """``Precision.from_str(...).value.name``."""
    if dtype in ("torch.float16", "float16"):
        return "float16"
    if dtype in ("torch.bfloat16", "bfloat16"):
        return "bfloat16"
    return "?"


def _init_from_json_file(path: str, tasks: list[TemplateTask], style: str) -> _EvalResult:
    with open(path) as handle:
        data = json.load(handle)
    config = data.get("config")
    precision = _precision(config.get("model_dtype"))
    org_and_model = config.get("model_name", config.get("model_args", None))
    org_and_model = org_and_model.split("/", 1)  # a dict or None raises AttributeError, as the template's
    if len(org_and_model) == 1:
        eval_name = f"{org_and_model[0]}_{precision}"
    else:
        eval_name = f"{org_and_model[0]}_{org_and_model[1]}_{precision}"
    results = {}
    for task in tasks:
        accs = np.array(
            [
                value.get(task.metric, None)
                for key, value in data["results"].items()
                if (task.benchmark == key if style == "exact" else task.benchmark in key)
            ]
        )
        if accs.size == 0 or any(acc is None for acc in accs):
            continue
        results[task.benchmark] = np.mean(accs) * 100.0
    return _EvalResult(eval_name, "/".join(org_and_model), precision, config.get("model_sha", ""), results)


def _to_dict(result: _EvalResult, tasks: list[TemplateTask]) -> dict:
    average = sum(v for v in result.results.values() if v is not None) / len(tasks)
    record = {
        "eval_name": result.eval_name,
        PRECISION: result.precision,
        MODEL: result.full_model,
        REVISION: result.revision,
        AVERAGE: average,
    }
    for task in tasks:
        record[task.col_name] = result.results[task.benchmark]  # KeyError: the row is incomplete
    return record


def _result_files(root: str) -> list[str]:
    paths = []
    for folder, _, files in os.walk(root):
        if len(files) == 0 or any(not name.endswith(".json") for name in files):
            continue
        files.sort(key=lambda name: name.removesuffix(".json").removeprefix("results_")[:-7])
        paths.extend(os.path.join(folder, name) for name in files)
    return paths


def _enum_members(tasks: list[TemplateTask]) -> list[TemplateTask]:
    """``list(Tasks)``: an Enum keeps one member per distinct value."""
    return list(dict.fromkeys(tasks))


def displayed_columns(tasks: list[TemplateTask]) -> list[str]:
    """The columns this replica keeps of the template's ``COLS``: the model, the average, one per Task
    (duplicates kept, as the template's list has them), the precision and the revision."""
    return [MODEL, AVERAGE, *(task.col_name for task in _enum_members(tasks)), PRECISION, REVISION]


def board(root: str, tasks: list[TemplateTask], style: str = "exact") -> tuple[pd.DataFrame, int]:
    """``get_leaderboard_df``: the displayed board, and the number of rows before its NaN filter. Raises
    what the template raises (``KeyError: 'Average ⬆️'`` for a board without a complete row,
    ``AttributeError`` for a results file without a string model name)."""
    tasks = _enum_members(tasks)
    merged: dict[str, _EvalResult] = {}
    for path in _result_files(root):
        result = _init_from_json_file(path, tasks, style)
        if result.eval_name in merged:
            merged[result.eval_name].results.update(
                {k: v for k, v in result.results.items() if v is not None}
            )
        else:
            merged[result.eval_name] = result
    complete = []
    for result in merged.values():
        try:
            _to_dict(result, tasks)
            complete.append(result)
        except KeyError:  # not every value present: the template leaves the row out
            continue
    frame = pd.DataFrame.from_records([_to_dict(result, tasks) for result in complete])
    frame = frame.sort_values(by=[AVERAGE], ascending=False)
    frame = frame[displayed_columns(tasks)].round(decimals=2)
    read = len(frame)
    benchmark_columns = [task.col_name for task in tasks]
    frame = frame[frame[benchmark_columns].notna().all(axis=1)]
    return frame.reset_index(drop=True), read
