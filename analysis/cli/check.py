"""``capcal check OUTPUT_DIR...``: is every run complete? ``analysis.runs.completeness.check_run`` (exit
status 1 if not)."""

from __future__ import annotations

import argparse

from analysis.cli.command import Command, SubParsers
from analysis.text_safety import terminal_text


def add_parser(commands: SubParsers) -> argparse.ArgumentParser:
    """``capcal check``'s parser."""
    parser = commands.add_parser(
        "check", help="is every run in lm-eval output folders complete? (exit status 1 if not)"
    )
    parser.add_argument("output_dirs", nargs="+", metavar="OUTPUT_DIR", help="lm-eval output folders")
    return parser


def run(args: argparse.Namespace) -> int:
    """Print ``check_run``'s table and its notes (joins, labels, duplicates, greedy runs, incomplete runs);
    exit status 1 when a run is incomplete. A run decoded greedily with k > 1 (``attrs["greedy"]``) is
    complete (it ran as asked) and gets a ``warning:`` line: the report gives it no verdict."""
    import pandas as pd

    from analysis.runs.completeness import check_run
    from capcal_tasks.checkers import TASK_LABELS

    checks = check_run(args.output_dirs)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 80):
        print(terminal_text(checks.drop(columns="problems").to_string(index=False)))
    for report in checks.attrs.get("joins", []):  # what each confidence run could not match
        print(terminal_text(f"join {report.summary()}"))
    for model, task, run_id, labels in checks.attrs.get("labels", []):
        if labels != TASK_LABELS:  # say which labels a re-scored run holds
            print(terminal_text(f"labels: {model} {task} {run_id}: {labels}"))
    for model, _, run_id, lines in checks.attrs.get("protocols", []):  # a wrapped lm-eval task's protocol
        for line in lines:
            print(terminal_text(f"protocol: {model} {run_id}: {line}"))
    for path, same_as in checks.attrs.get("duplicates", []):
        print(terminal_text(f"read once: {path} (the same run as {same_as})"))
    for note in checks.attrs.get("notes", []):  # ran as asked, but left something out of the report
        print(terminal_text(f"note: {note}"))
    for warning in checks.attrs.get("greedy", []):  # complete, but degenerate: no verdict in the report
        print(terminal_text(f"warning: {warning}"))
    incomplete = checks[~checks["complete"]]
    for row in incomplete.itertuples():
        print(terminal_text(f"incomplete: {row.model} {row.task} {row.run_id}: {row.problems}"))
    print(f"\n{len(checks) - len(incomplete)} of {len(checks)} run(s) complete")
    return 1 if len(incomplete) else 0


COMMAND = Command(name="check", add_parser=add_parser, run=run)
