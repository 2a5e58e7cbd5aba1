"""The command line's layout: one module per command, every one of them in ``analysis.cli.main.COMMANDS``
(the parser is built from that table alone), the library never importing the command line, and commands
without slow flags parsed without importing ``analysis.self_calibration``."""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import analysis.cli
from analysis.cli.command import Command
from analysis.cli.main import COMMANDS, build_parser, needs_slow_parts
from analysis.cli.reference import command_parsers

REPO = Path(__file__).resolve().parents[2]


def test_every_command_module_is_in_the_table_and_the_parser_has_exactly_the_table():
    modules = [
        importlib.import_module(f"analysis.cli.{info.name}")
        for info in pkgutil.iter_modules(analysis.cli.__path__)
        if info.name != "__main__"  # running it would run capcal
    ]
    declared = {module.COMMAND for module in modules if isinstance(getattr(module, "COMMAND", None), Command)}
    assert declared == set(COMMANDS) and len(COMMANDS) == 11
    names = [command.name for command in COMMANDS]
    assert len(set(names)) == len(names)
    assert list(build_parser().command_parsers) == names
    assert list(build_parser(slow_parts=False).command_parsers) == names


def test_slow_parts_are_built_only_for_the_commands_that_have_them():
    assert [name for name in ("eval", "table", "check", "models") if needs_slow_parts([name, "x"])] == []
    assert needs_slow_parts(["selfcal", "train"]) and needs_slow_parts([]) and needs_slow_parts(["--help"])
    assert needs_slow_parts(["no-such-command"])
    train = ["selfcal", "train", "d", "--model", "m", "--output", "o"]
    with pytest.raises(SystemExit):  # selfcal's actions are left out
        build_parser(slow_parts=False).parse_args(train)
    args = build_parser().parse_args([*train, "--lora_r", "4"])
    assert (args.command, args.selfcal_command, args.lora_r) == ("selfcal", "train", 4)


def _imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at any level (inside functions too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_the_library_never_imports_the_command_line():
    cli = REPO / "analysis" / "cli"
    importing = [
        str(path.relative_to(REPO))
        for package in ("analysis", "capcal_metrics", "capcal_models", "capcal_tasks")
        for path in (REPO / package).rglob("*.py")
        if cli not in path.parents
        and any(
            name == "analysis.cli" or name.startswith("analysis.cli.") for name in _imported_modules(path)
        )
    ]
    assert importing == []


def test_a_command_without_slow_flags_does_not_import_self_calibration():
    runner = (
        "import sys\nfrom analysis.cli import main\nstatus = main(sys.argv[1:])\n"
        "loaded = any(name.startswith('analysis.self_calibration') for name in sys.modules)\n"
        "print('self_calibration imported:', loaded)\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for arguments, imported in ((["check", "--help"], False), (["selfcal", "train", "--help"], True)):
        done = subprocess.run(
            [sys.executable, "-c", runner, *arguments], cwd=REPO, env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"self_calibration imported: {imported}" in done.stdout


def test_every_argument_of_every_command_says_what_it_is_in_its_help() -> None:
    """Each flag and positional of each ``capcal`` command has a help text, and ``capcal CMD --help`` shows
    it with the flag (a flag added without ``help=`` is a flag nobody can find)."""
    seen = 0
    for path, _, parser in command_parsers(build_parser()):
        shown = "".join(parser.format_help().split())  # argparse wraps lines, also at hyphens
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            seen += 1
            name = " ".join(path) + " " + (action.option_strings[0] if action.option_strings else action.dest)
            assert action.help and action.help.strip(), f"capcal {name} has no help"
            expanded = parser._get_formatter()._expand_help(action)  # %(default)s, %% as argparse shows them
            assert "".join(expanded.split()) in shown, f"capcal {name}: its help is not in --help"
    assert seen > 150  # every command was walked (183 arguments on 2026-11-29)
