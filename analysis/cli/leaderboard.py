"""``capcal leaderboard OUTPUT_DIR... --output DIR [--benchmark NAME]``: calibration columns as results files
the Hugging Face leaderboard template reads, ``analysis.leaderboard``."""

from __future__ import annotations

import argparse
import sys

from analysis.cli.command import Command, SubParsers
from analysis.text_safety import terminal_text


def add_parser(commands: SubParsers) -> argparse.ArgumentParser:
    """``capcal leaderboard``'s parser."""
    parser = commands.add_parser(
        "leaderboard",
        help="export calibration columns as results files the Hugging Face leaderboard template reads",
    )
    parser.add_argument("output_dirs", nargs="+", metavar="OUTPUT_DIR", help="lm-eval output folders")
    parser.add_argument("--output", required=True, help="folder for the template's results files")
    parser.add_argument(
        "--benchmark",
        default="capcal_calibration_open",
        help="the calibration task or group to export (default capcal_calibration_open)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """``leaderboard_rows`` written by ``write_leaderboard_results`` (a warning per undefined column), then
    the template's ``Task`` lines (``template_tasks``)."""
    from analysis.leaderboard import leaderboard_rows, template_tasks, write_leaderboard_results

    rows = leaderboard_rows(args.output_dirs, args.benchmark)
    for path, row in zip(write_leaderboard_results(rows, args.output), rows, strict=True):
        print(f"leaderboard: {row.model_name}: {path} ({len(row.values)} columns, version {row.version})")
        for column, reason in row.missing.items():
            print(
                terminal_text(
                    f"capcal leaderboard: warning: {row.model_name}: {column} is undefined ({reason}); "
                    "the template drops this model's row unless the column is left off the board"
                ),
                file=sys.stderr,
            )
    print("template Tasks (src/about.py):")
    for benchmark, metric, label in template_tasks(args.benchmark):
        print(f'    Task("{benchmark}", "{metric}", "{label}")')
    return 0


COMMAND = Command(name="leaderboard", add_parser=add_parser, run=run)
