"""The capcal report: ``analyze`` reads the runs and the task relations and computes the sections
(``sections``, with the estimators registered in ``registry``); ``build`` writes the report; ``summary``
ranks the estimators of each (model, task) by the primary metric with paired intervals and warnings;
``paper_table`` makes the estimator x task grids (and ``capcal table``); ``self_calibration`` adds the
Self-Calibration before/after comparison; ``analysis.rendering`` writes ``report.html`` and ``report.md``
(its names are re-exported here)."""

from analysis.rendering import (
    Figure,
    ReportFiles,
    ReportSection,
    format_interval,
    markdown_table,
    markdown_text,
    write_report,
)
from analysis.report.analyze import ReportOptions, analyze_runs
from analysis.report.build import build_report
from analysis.report.registry import ESTIMATORS, Estimator

__all__ = [
    "ESTIMATORS",
    "Estimator",
    "Figure",
    "ReportFiles",
    "ReportOptions",
    "ReportSection",
    "analyze_runs",
    "build_report",
    "format_interval",
    "markdown_table",
    "markdown_text",
    "write_report",
]
