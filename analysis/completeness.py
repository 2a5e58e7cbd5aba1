"""Is a run complete? Per (model, task, run): every question logged, every question with its k samples.

lm-eval writes the results and samples files only when a run finishes, so a run that was killed leaves no
files (its finished samples are in capcal's sample cache; re-running the same command resumes it). A run
that finished can still be short of what was asked for: questions missing from the samples file (a
truncated or hand-edited file), questions with fewer than the task's k responses, or empty responses (what
``capcal-api`` returns for requests that still failed at the end with ``allow_failures=True``, or a model
that generated nothing). ``check_run`` counts each of these; ``capcal check OUTPUT_DIR`` prints them and
exits with status 1 when a run is incomplete.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.runs import find_samples_files, load_run
from capcal_tasks.sampling import is_sampling_config

__all__ = ["check_run"]

CHECK_COLUMNS = [
    "model",
    "task",
    "run_id",
    "questions",
    "questions_expected",
    "k",
    "questions_short_of_k",
    "empty_responses",
    "complete",
    "problems",
]


def check_run(output_dir: str | Path) -> pd.DataFrame:
    """One row per (model, task, run) of capcal's sampling tasks under ``output_dir``, with columns

    ``questions`` (logged), ``questions_expected`` (lm-eval's "n-samples" count in the results file),
    ``k`` (the task's ``repeats``), ``questions_short_of_k`` (questions with fewer than k responses),
    ``empty_responses`` (responses that are empty after stripping whitespace), ``complete`` (no problem
    found) and ``problems`` (a readable list, empty when complete). Malformed logs raise
    ``analysis.runs.RunFormatError`` (file and line), as in ``load_run``.
    """
    table = load_run(output_dir)
    files = {(f.model, f.task, f.run_id): f for f in find_samples_files(output_dir)}
    rows = []
    for (model, task, run_id), group in table.groupby(["model", "task", "run_id"], sort=True):
        file = files[(model, task, run_id)]
        repeats = file.task_config.get("repeats")
        k = (
            int(repeats)
            if isinstance(repeats, int) and not isinstance(repeats, bool)
            else int(group["n"].max())
        )
        short = int((group["n"] < k).sum())
        empty = int(sum(not response.strip() for responses in group["responses"] for response in responses))
        problems = []
        if not file.has_results:
            problems.append(f"no results file beside {file.path.name}")
        elif not is_sampling_config(file.task_config):
            problems.append("the results file does not describe this task as a capcal sampling task")
        if file.logged_questions is not None and len(group) != file.logged_questions:
            problems.append(f"{len(group)} questions logged, the results file counts {file.logged_questions}")
        if short:
            problems.append(f"{short} question(s) with fewer than k = {k} responses")
        if empty:
            problems.append(f"{empty} empty response(s)")
        rows.append(
            {
                "model": model,
                "task": task,
                "run_id": run_id,
                "questions": len(group),
                "questions_expected": file.logged_questions,
                "k": k,
                "questions_short_of_k": short,
                "empty_responses": empty,
                "complete": not problems,
                "problems": "; ".join(problems),
            }
        )
    return pd.DataFrame(rows, columns=CHECK_COLUMNS)
