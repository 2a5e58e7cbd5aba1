"""``capcal tasks-dir``: print the folder of capcal's task YAMLs, ``capcal_tasks.tasks_dir``."""

from __future__ import annotations

import argparse

from analysis.cli.command import Command, SubParsers


def add_parser(commands: SubParsers) -> argparse.ArgumentParser:
    """``capcal tasks-dir``'s parser (no flags)."""
    return commands.add_parser(
        "tasks-dir", help="print the folder of capcal's task YAMLs (for --include_path)"
    )


def run(args: argparse.Namespace) -> int:
    """Print ``capcal_tasks.tasks_dir()`` (for lm_eval's ``--include_path``)."""
    from capcal_tasks import tasks_dir

    print(tasks_dir())
    return 0


COMMAND = Command(name="tasks-dir", add_parser=add_parser, run=run)
