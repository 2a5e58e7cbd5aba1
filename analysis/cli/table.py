"""``capcal table OUTPUT_DIR... [--metric M]... [--format markdown|latex|csv|json] [--output FILE]``: an
estimator x task grid of a metric for a paper, ``analysis.report.paper_table``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis.cli.command import Command, SubParsers


def add_parser(commands: SubParsers) -> argparse.ArgumentParser:
    """``capcal table``'s parser (its report flags as ``capcal report``'s)."""
    parser = commands.add_parser(
        "table", help="estimator x task grid of a metric, for a paper (markdown, latex, csv or json)"
    )
    parser.add_argument("output_dirs", nargs="+", metavar="OUTPUT_DIR", help="lm-eval output folders")
    parser.add_argument(
        "--metric",
        action="append",
        default=[],
        help="a calibration-table metric (e.g. corrected_capability_brier, soft_auroc); repeatable; "
        "default: the headline metrics",
    )
    parser.add_argument(
        "--format",
        default="markdown",
        choices=["markdown", "latex", "csv", "json"],
        help="table format (default markdown)",
    )
    parser.add_argument("--output", help="write the table to this file (default: standard output)")
    parser.add_argument("--activations", help="activations folder written by capcal-hf (enables the probe)")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    parser.add_argument(
        "--calibration", action="append", default=[], metavar="TASK=SPLIT[,SPLIT]", help="as capcal report"
    )
    parser.add_argument("--run", action="append", default=[], metavar="RUN", help="as capcal report")
    return parser


def run(args: argparse.Namespace) -> int:
    """Refuse an unwritable ``--output`` before anything is computed, then ``paper_table`` (which refuses a
    ``--metric`` that is no metric before it reads a run: ``unknown_metric_problem``) and ``format_table``,
    written to ``--output`` or standard output."""
    from analysis.checks.input_checks import writable_file_problem

    problem = writable_file_problem(args.output) if args.output else None  # before anything is computed
    if problem is not None:
        raise ValueError(f"--output {args.output}: {problem}")
    from analysis.report import ReportOptions
    from analysis.report.paper_table import format_table, paper_table
    from capcal_tasks.relations import parse_calibration_overrides

    options = ReportOptions(
        n_resamples=args.resamples,
        seed=args.seed,
        calibration=parse_calibration_overrides(args.calibration),
        select=args.run or None,
    )
    rows = paper_table(
        args.output_dirs, args.metric or None, activations_dir=args.activations, options=options
    )
    text = format_table(rows, args.metric or None, args.format)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"table: {args.output}")
    else:
        sys.stdout.write(text)
    return 0


COMMAND = Command(name="table", add_parser=add_parser, run=run)
