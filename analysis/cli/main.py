"""The ``capcal`` command line: the table of commands, the parser built from it, and the dispatch with the
shared error handling.

Each command is a module of this package exporting ``COMMAND`` (``analysis.cli.command.Command``): its flags
and a body that parses them and calls a documented library function. Adding a command is one new module
plus one line in ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys
import threading
from collections.abc import Sequence

from analysis.cli.analyze import COMMAND as ANALYZE
from analysis.cli.arguments import OneLineParser, unrecognized_arguments
from analysis.cli.check import COMMAND as CHECK
from analysis.cli.command import Command
from analysis.cli.demo import COMMAND as DEMO
from analysis.cli.eval_command import COMMAND as EVAL
from analysis.cli.leaderboard import COMMAND as LEADERBOARD
from analysis.cli.models import COMMAND as MODELS
from analysis.cli.report import COMMAND as REPORT
from analysis.cli.rescore import COMMAND as RESCORE
from analysis.cli.selfcal import COMMAND as SELFCAL
from analysis.cli.table import COMMAND as TABLE
from analysis.cli.tasks_dir import COMMAND as TASKS_DIR
from analysis.text_safety import terminal_text

# The commands, in the order ``capcal --help`` lists them.
COMMANDS: tuple[Command, ...] = (
    EVAL,
    TASKS_DIR,
    MODELS,
    ANALYZE,
    CHECK,
    REPORT,
    TABLE,
    LEADERBOARD,
    RESCORE,
    DEMO,
    SELFCAL,
)
COMMANDS_BY_NAME = {command.name: command for command in COMMANDS}


def build_parser(slow_parts: bool = True) -> argparse.ArgumentParser:
    """The ``capcal`` parser, one subparser per entry of ``COMMANDS``; ``slow_parts`` False leaves out the
    flags whose import takes seconds (``Command.add_slow_parts``, e.g. ``capcal selfcal``'s actions from
    analysis.self_calibration): other commands do not wait for them."""
    parser = OneLineParser(
        prog="capcal", description="Capability calibration on lm-eval.", allow_abbrev=False
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        added = command.add_parser(subparsers)
        if slow_parts and command.add_slow_parts is not None:
            command.add_slow_parts(added)
    parser.command_parsers = dict(subparsers.choices)
    return parser


def needs_slow_parts(argv: Sequence[str]) -> bool:
    """Whether parsing ``argv`` needs the commands' slow parts: yes unless its first word names a command
    that has none (``capcal --help`` and unknown commands get the whole parser)."""
    command = COMMANDS_BY_NAME.get(argv[0]) if argv else None
    return command is None or command.add_slow_parts is not None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``capcal`` command; returns its exit status (argument errors: one line, exit status 2). As the
    ``capcal`` program (``argv`` None: the process's own command line), an error status ends the process
    as soon as its line is printed (``exit_promptly``)."""
    status = dispatch(argv)
    if argv is None and status != 0:
        exit_promptly(status)
    return status


def exit_promptly(status: int) -> None:
    """End the process with ``status`` at once: flush stdout and stderr, run the ``atexit`` handlers (child
    processes ended, caches closed, logging flushed), then ``os._exit``, which skips the interpreter's
    teardown of every loaded module (after ``capcal table``'s error line it took 1.8 s on a 2-core CPU, longer
    under load: docs/benchmarks.md#error-exits). Returns without exiting while another non-daemon thread
    runs (the normal exit waits for it)."""
    main_thread = threading.main_thread()
    if any(t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be said
            pass
    atexit._run_exitfuncs()  # the handlers a normal exit runs, in the same (reverse) order
    os._exit(status)


def dispatch(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: the process's command line) and run its command; returns the exit status
    (argument errors: one line, exit status 2)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(slow_parts=needs_slow_parts(argv))
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            command_parser = parser.command_parsers.get(getattr(args, "command", None), parser)
            command_parser.error(unrecognized_arguments(command_parser, unknown))
    except SystemExit as exit:
        return int(exit.code or 0)
    args.argv = argv  # for the command that writes an incomplete run again (capcal eval)
    command = COMMANDS_BY_NAME[args.command]
    if command.runs_models:  # children end with capcal; SIGTERM and Ctrl-C stop cleanly
        from capcal_models.sample_cache import committed_samples
        from capcal_models.stopping import RunStopped, end_descendants_at_exit, stop_message, stop_on_signals

        end_descendants_at_exit()
        try:
            with stop_on_signals():
                return run_command(command, args)
        except RunStopped as stopped:
            stopped.__traceback__ = None  # frees the run (its progress bars print their last line, vLLM's
            gc.collect()  # engine shuts down) before the message, which is then the last line
            message = stop_message(args.command, stopped, argv, committed_samples())
            print(terminal_text(message), file=sys.stderr)
            return stopped.exit_status
    return run_command(command, args)


def run_command(command: Command, args: argparse.Namespace) -> int:
    """Run ``command`` on its parsed ``args``; returns its exit status. Unless the command handles its own
    errors: ``FileNotFoundError``, ``ValueError``, ``KeyError`` and ``RuntimeError`` are one line with exit
    status 2; another ``OSError`` (a failed write, a full disk) is one line with exit status 1, the partial
    files under ``--output``/``--output_dir`` removed (``analysis.checks.output_checks``)."""
    if command.handles_errors:
        return command.run(args)
    from analysis.checks.output_checks import (
        failed_write_message,
        recording_written_files,
        remove_partial_files,
    )

    try:
        with recording_written_files() as written:
            return command.run(args)
    except (FileNotFoundError, ValueError, KeyError, RuntimeError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(terminal_text(f"capcal {args.command}: error: {message}"), file=sys.stderr)
        return 2
    except OSError as error:  # a failed write (a full disk): one line, the partial files removed
        outputs = [getattr(args, name, None) for name in ("output", "output_dir")]
        roots = [
            path for value in outputs if value for path in ([value] if isinstance(value, str) else value)
        ]
        removed = remove_partial_files(written, roots)
        print(terminal_text(failed_write_message(args.command, error, written, removed)), file=sys.stderr)
        return 1
