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
    parser.add_argument("--output", required=True, help="the template's results root (folder) to write to")
    parser.add_argument(
        "--benchmark",
        default="capcal_calibration_open",
        help="the calibration task or group to export (default capcal_calibration_open)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """``leaderboard_rows`` on one ``leaderboard_board``, checked (``results_root_notes``) and written by
    ``write_leaderboard_results``; a note per column left off or task dropped, then the template's ``Task``
    lines (``template_tasks``)."""
    from analysis.leaderboard import (
        leaderboard_board,
        leaderboard_rows,
        results_root_notes,
        template_tasks,
        write_leaderboard_results,
    )

    board = leaderboard_board(leaderboard_rows(args.output_dirs, args.benchmark))
    notes = [*board.notes(), *results_root_notes(board, args.output)]
    for path, row in zip(write_leaderboard_results(board, args.output), board.rows, strict=True):
        print(f"leaderboard: {row.model_name}: {path} ({len(board.columns)} columns, version {row.version})")
    for note in notes:
        print(terminal_text(f"capcal leaderboard: note: {note}"), file=sys.stderr)
    print(f"template Tasks (src/about.py), {len(board.columns)} of the board's columns:")
    for benchmark, metric, label in template_tasks(board):
        print(f'    Task("{benchmark}", "{metric}", "{label}")')
    return 0


COMMAND = Command(name="leaderboard", add_parser=add_parser, run=run)
