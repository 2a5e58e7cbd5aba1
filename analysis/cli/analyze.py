"""``capcal analyze OUTPUT_DIR [--output FILE] [--responses]``: the per-question table of an lm-eval output
folder, ``analysis.runs``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis.cli.command import Command, SubParsers
from analysis.text_safety import terminal_text


def add_parser(commands: SubParsers) -> argparse.ArgumentParser:
    """``capcal analyze``'s parser."""
    parser = commands.add_parser("analyze", help="per-question table of an lm-eval output folder")
    parser.add_argument("output_dir", help="an lm-eval output folder")
    parser.add_argument(
        "--output", help="table file (.jsonl, .csv, .parquet); default OUTPUT_DIR/capcal_questions.jsonl"
    )
    parser.add_argument(
        "--responses",
        action="store_true",
        help="keep every response text in the table (default: only each question's first response)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """``load_run``, warn with ``k_notices``, ``write_question_table`` and print ``summarize``."""
    import pandas as pd

    from analysis.report.input_notices import k_notices
    from analysis.runs import load_run, summarize, write_question_table

    table = load_run(args.output_dir, responses=args.responses)
    for notice in k_notices(table):
        print(terminal_text(f"capcal analyze: warning: {notice}"), file=sys.stderr)
    output = Path(args.output) if args.output else Path(args.output_dir) / "capcal_questions.jsonl"
    write_question_table(table, output)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(terminal_text(summarize(table).to_string(index=False)))
    print(f"\n{len(table)} questions -> {output}")
    return 0


COMMAND = Command(name="analyze", add_parser=add_parser, run=run)
