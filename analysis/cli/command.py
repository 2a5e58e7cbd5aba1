"""What a ``capcal`` command is: the record each command module exports as ``COMMAND``.

A command module (``analysis/cli/<command>.py``) holds the command's flags (``add_parser``) and its body
(``run``: parse the flags, call a documented library function, print what it returns). ``analysis.cli.main``
lists the modules' records in ``COMMANDS``; adding a command is one new module plus one line there.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# What ``ArgumentParser.add_subparsers`` returns: a command module adds its parser to it.
SubParsers = Any


@dataclass(frozen=True)
class Command:
    """One ``capcal`` command.

    ``add_parser(commands)`` adds the command's parser to ``commands`` (the result of ``add_subparsers``) and
    returns whatever ``add_slow_parts`` extends; ``run(args)`` runs the parsed command and returns its exit
    status. ``runs_models``: SIGTERM and Ctrl-C stop it cleanly (``capcal_models.stopping``).
    ``handles_errors``: ``run`` reports its own errors (otherwise ``analysis.cli.main.run_command`` turns a
    ``ValueError``-like error into one line with exit status 2 and a failed write into exit status 1).
    ``add_slow_parts``: flags whose import takes seconds, built only when this command (or the help of all
    commands) is parsed."""

    name: str
    add_parser: Callable[[SubParsers], Any]
    run: Callable[[argparse.Namespace], int]
    runs_models: bool = False
    handles_errors: bool = False
    add_slow_parts: Callable[[Any], None] | None = None
