"""``capcal report OUTPUT_DIR... [--output DIR] [--activations DIR] [--calibration TASK=SPLIT[,SPLIT]]
[--run RUN]``: the HTML report and Markdown summary, ``analysis.report.build_report``."""

from __future__ import annotations

import argparse
import sys

from analysis.cli.command import Command, SubParsers
from analysis.text_safety import terminal_text


def add_parser(commands: SubParsers) -> argparse.ArgumentParser:
    """``capcal report``'s parser."""
    parser = commands.add_parser("report", help="HTML report + Markdown summary of lm-eval output folders")
    parser.add_argument("output_dirs", nargs="+", metavar="OUTPUT_DIR", help="lm-eval output folders")
    parser.add_argument("--output", default="capcal_report", help="report folder (default capcal_report)")
    parser.add_argument("--activations", help="activations folder written by capcal-hf (enables the probe)")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    parser.add_argument(
        "--calibration",
        action="append",
        default=[],
        metavar="TASK=SPLIT[,SPLIT]",
        help="fit TASK's probe and recalibrators on these calibration task(s) instead of the declared ones "
        "(cross-domain: capcal_aime25=capcal_math_train; several: mixed-domain); repeatable",
    )
    parser.add_argument(
        "--run",
        action="append",
        default=[],
        metavar="RUN",
        help="use this run (run id, run key prefix or path of its results or samples file) instead of the "
        "latest of its (model, task); repeatable; the report lists the runs it used and left out",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Refuse an unwritable ``--output`` before reading any run, print ``report_notices`` as warnings, then
    ``build_report`` and print the paths of its files."""
    from analysis.checks.input_checks import writable_folder_problem

    problem = writable_folder_problem(args.output)  # before any run is read or anything computed
    if problem is not None:
        raise ValueError(f"--output {args.output}: {problem}")
    from analysis.report import ReportOptions, build_report
    from analysis.report.input_notices import report_notices
    from capcal_tasks.relations import parse_calibration_overrides

    calibration = parse_calibration_overrides(args.calibration)
    # NothingToScoreError, a ValueError, ends the command with exit status 2
    notices = report_notices(args.output_dirs, args.activations, calibration, args.run or None)
    for notice in notices:
        print(terminal_text(f"capcal report: warning: {notice}"), file=sys.stderr)
    files = build_report(
        args.output_dirs,
        args.output,
        notices=notices,
        activations_dir=args.activations,
        options=ReportOptions(
            n_resamples=args.resamples, seed=args.seed, calibration=calibration, select=args.run or None
        ),
    )
    print(f"report:  {files.html}\nsummary: {files.markdown}")
    return 0


COMMAND = Command(name="report", add_parser=add_parser, run=run)
