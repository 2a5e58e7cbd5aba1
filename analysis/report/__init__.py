"""The capcal report: ``build`` reads the runs and the task relations and computes the sections (``sections``,
with the estimators registered in ``registry``); ``render`` writes ``report.html`` and ``report.md``."""

from analysis.report.build import ReportOptions, build_report
from analysis.report.registry import ESTIMATORS, Estimator
from analysis.report.render import (
    Figure,
    ReportFiles,
    ReportSection,
    format_interval,
    markdown_text,
    write_report,
)

__all__ = [
    "ESTIMATORS",
    "Estimator",
    "Figure",
    "ReportFiles",
    "ReportOptions",
    "ReportSection",
    "build_report",
    "format_interval",
    "markdown_text",
    "write_report",
]
