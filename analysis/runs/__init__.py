"""Reading lm-eval output folders into capcal's tables (``analysis.runs.tables``; split by concept next)."""

from __future__ import annotations

from analysis.runs.tables import (
    CONFIDENCE_COLUMNS,
    LEADERBOARD_REASON,
    QUESTION_COLUMNS,
    RUN_COLUMNS,
    RunCollection,
    RunFormatError,
    SamplesFile,
    find_samples_files,
    iter_sample_records,
    load_run,
    load_runs,
    load_table,
    summarize,
    write_question_table,
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
