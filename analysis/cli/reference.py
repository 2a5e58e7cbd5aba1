"""The ``capcal`` command reference (docs/cli.md), written from the parser itself so that it cannot fall
behind the code: every command and sub-command, its one-line purpose, and each argument with its default and
its help text, as ``capcal COMMAND --help`` shows them.

``python -m analysis.cli.reference > docs/cli.md`` writes it again; tests/test_docs.py checks that the file
is the parser's.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

__all__ = ["cli_reference", "command_parsers"]

HEADER = """# The `capcal` commands

Every command, sub-command and argument, written from the parser
(`python -m analysis.cli.reference > docs/cli.md`; a test checks that this page is the parser's). `capcal
COMMAND --help` shows the same. What the commands do, with examples: the [README](../README.md) and the
pages it links.
"""


def command_parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = (), help_line: str | None = None
) -> Iterator[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    """``(command path, its help line, its parser)`` of ``parser`` and every sub-command below it, depth
    first, in the order ``--help`` lists them (the top-level parser: path ``()``, its description)."""
    yield path, parser.description or "" if help_line is None else help_line, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield from command_parsers(sub, (*path, name), helps.get(name, ""))


def _expanded_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help text as ``--help`` prints it (argparse's own expansion of ``%(default)s``, ``%%``, ...), on
    one line."""
    return " ".join(parser._get_formatter()._expand_help(action).split())


def _argument(action: argparse.Action) -> str:
    if not action.option_strings:
        name = action.metavar or action.dest.upper()
        return f"{name} ..." if action.nargs in ("+", "*") else name
    value = ""
    if action.nargs != 0:
        metavar = action.metavar or (
            "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper()
        )
        value = f" [{metavar}]" if action.nargs == "?" else f" {metavar}"
        if action.nargs in ("+", "*"):
            value += " ..."
    return ", ".join(action.option_strings) + value


def _default(action: argparse.Action) -> str:
    default = action.default
    if action.nargs == 0 or default in (None, argparse.SUPPRESS) or default == []:
        return ""
    return f"`{default}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def cli_reference(parser: argparse.ArgumentParser) -> str:
    """The Markdown reference of ``parser`` (``analysis.cli.main.build_parser()``): one section per command
    that takes arguments, a table of ``argument | default | what it is``, required arguments marked."""
    lines = [HEADER]
    for path, help_line, command in command_parsers(parser):
        if not path:
            continue
        arguments = [
            action
            for action in command._actions
            if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        ]
        lines.append(f"{'#' * min(len(path) + 1, 4)} `capcal {' '.join(path)}`\n")
        if help_line:
            lines.append(_cell(" ".join(help_line.split())) + "\n")
        if not arguments:
            continue
        lines.append("| argument | default | what it is |\n|---|---|---|")
        for action in arguments:
            required = " (required)" if action.required and action.option_strings else ""
            lines.append(
                f"| `{_cell(_argument(action))}`{required} | {_cell(_default(action))} | "
                f"{_cell(_expanded_help(command, action))} |"
            )
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    from analysis.cli.main import build_parser

    print(cli_reference(build_parser()), end="")
