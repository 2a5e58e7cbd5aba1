"""The README and the guides under docs/: short README, working links, real commands, no outside citations."""

from __future__ import annotations

import argparse
import ast
import os
import re
from pathlib import Path

import pytest

from analysis.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
MARKDOWN = [README, *DOCS]
SKIPPED_DIRS = {".git", ".pytest_cache", ".ruff_cache", "__pycache__", "capcal_demo", "capcal.egg-info"}
# The specification that lived outside the repository (its name built from parts so that this file does not
# cite it): docs and docstrings state the methods themselves (docs/methods.md).
SPEC_NAME = "METH" + "ODS"
OUTSIDE_SPEC = SPEC_NAME + ".md"

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
COMMAND = re.compile(r"(?:^|[\s/(])capcal[ \t]+([a-z][a-z-]*)(?:[ \t]+([a-z][a-z-]*))?", re.MULTILINE)


def _id(path: Path) -> str:
    return str(path.relative_to(REPO))


def _heading_anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lowercase, punctuation dropped, spaces to hyphens."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", text, re.MULTILINE):
        plain = re.sub(r"[`*_]", "", heading).strip().lower()
        anchors.add(re.sub(r"[^\w\- ]", "", plain).replace(" ", "-"))
    return anchors


def _code(path: Path) -> str:
    """Every fenced block and inline code span of a Markdown file, one per line."""
    text = path.read_text(encoding="utf-8")
    blocks = FENCE.findall(text)
    spans = CODE_SPAN.findall(FENCE.sub("", text))
    return "\n".join(blocks + spans)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps sub-commands in a _SubParsersAction
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_readme_is_short_and_has_the_two_quick_start_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 260
    assert re.search(r"^make demo\b", text, re.MULTILINE)
    assert re.search(r"^make test\b", text, re.MULTILINE)


def test_the_guides_exist():
    names = {path.name for path in DOCS}
    for guide in (
        "tasks-and-data.md",
        "model-wrappers.md",
        "analysis-and-report.md",
        "long-runs.md",
        "protocol-differences.md",
        "methods.md",
        "benchmarks.md",
    ):
        assert guide in names
        assert f"docs/{guide}" in README.read_text(encoding="utf-8"), f"README does not link {guide}"


@pytest.mark.parametrize("path", MARKDOWN, ids=_id)
def test_relative_links_resolve_inside_the_repository(path: Path):
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    problems = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.is_relative_to(REPO):
            problems.append(f"{target}: outside the repository")
        elif not linked.exists():
            problems.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _heading_anchors(linked):
            problems.append(f"{target}: no heading #{anchor} in {_id(linked)}")
    assert not problems, f"{_id(path)}: " + "; ".join(problems)


def _repo_files(suffixes: tuple[str, ...]) -> list[Path]:
    """The repository's files with these suffixes (no virtual environments, caches or outputs)."""
    found = []
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.startswith(".venv")]
        found += [Path(root, name) for name in files if name.endswith(suffixes)]
    return found


def test_no_doc_or_docstring_cites_the_outside_specification():
    citing = []
    for path in _repo_files((".py", ".md")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if OUTSIDE_SPEC in text or re.search(rf"\b{SPEC_NAME}\b", text):
            citing.append(_id(path))
    assert not citing, f"these files cite {OUTSIDE_SPEC}, which is not in the repository: {citing}"


def test_the_command_reference_is_the_parsers():
    """docs/cli.md is written from the parser (``analysis.cli.reference``): a flag added, renamed or given
    another default or help shows here until the page is written again."""
    from analysis.cli.reference import cli_reference

    page = REPO / "docs" / "cli.md"
    assert page.read_text(encoding="utf-8") == cli_reference(build_parser()), (
        "docs/cli.md is stale: python -m analysis.cli.reference > docs/cli.md"
    )
    assert "docs/cli.md" in README.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", MARKDOWN, ids=_id)
def test_every_capcal_command_in_the_docs_exists(path: Path):
    commands = _subcommands(build_parser())
    assert {"eval", "report", "check", "demo", "models", "tasks-dir"} <= set(commands)
    unknown = []
    for command, action in COMMAND.findall(_code(path)):
        if command not in commands:
            unknown.append(f"capcal {command}")
        elif action and _subcommands(commands[command]) and action not in _subcommands(commands[command]):
            unknown.append(f"capcal {command} {action}")
    assert not unknown, (
        f"{_id(path)} mentions commands that analysis.cli does not have: {sorted(set(unknown))}"
    )


PACKAGES = ("capcal_tasks", "capcal_models", "capcal_metrics", "analysis")
REPO_PATH = re.compile(
    r"(?<![\w./-])((?:capcal_tasks|capcal_models|capcal_metrics|analysis|tests|benchmarks|requirements|docs)"
    r"/[\w./-]*)"
)
DOTTED = re.compile(r"(?<![\w./-])((?:" + "|".join(PACKAGES) + r")(?:\.[A-Za-z_]\w*)+)")
BARE_MODULE = re.compile(r"(?<![\w./-])(\w+\.py)\b")
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _module_file(dotted: str) -> Path | None:
    base = REPO.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _top_level_names(module: Path) -> set[str]:
    """Names a module defines or imports at top level (what ``from module import name`` can take)."""
    names: set[str] = set()
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    if module.name == "__init__.py":  # sub-modules of a package
        names.update(
            p.stem for p in module.parent.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()
        )
    return names


def _unresolved(dotted: str) -> str | None:
    """None if ``dotted`` names a capcal module, or a top-level name of one; else why not."""
    parts = dotted.split(".")
    for length in range(len(parts), 0, -1):
        module = _module_file(".".join(parts[:length]))
        if module is None:
            continue
        if length == len(parts) or parts[length] in _top_level_names(module):
            return None
        return f"{dotted}: {'.'.join(parts[:length])} has no {parts[length]}"
    return f"{dotted}: no such module"


@pytest.mark.parametrize("path", MARKDOWN, ids=_id)
def test_repository_paths_in_the_docs_exist(path: Path):
    missing = []
    for candidate in REPO_PATH.findall(_code(path)):
        candidate = candidate.rstrip(".")
        if re.search(r"[*<>{}]|NNNN|TIME|MODEL", candidate):  # patterns and placeholders
            continue
        if not (REPO / candidate).exists():
            missing.append(candidate)
    python_files = {p.name for p in _repo_files((".py",))}
    missing += [name for name in BARE_MODULE.findall(_code(path)) if name not in python_files]
    assert not missing, f"{_id(path)} names files that do not exist: {sorted(set(missing))}"


@pytest.mark.parametrize("path", MARKDOWN, ids=_id)
def test_python_names_in_the_docs_exist(path: Path):
    text = path.read_text(encoding="utf-8")
    problems = [problem for name in set(DOTTED.findall(_code(path))) if (problem := _unresolved(name))]
    for block in PYTHON_BLOCK.findall(text):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
                module = _module_file(node.module)
                if module is None:
                    problems.append(f"{node.module}: no such module")
                    continue
                defined = _top_level_names(module)
                problems += [f"{node.module}: no {a.name}" for a in node.names if a.name not in defined]
    assert not problems, f"{_id(path)}: " + "; ".join(sorted(set(problems)))


def test_the_verbalizing_leaderboard_example_shows_its_results_file():
    """docs/leaderboards.md's table for Qwen2.5-Coder-1.5B is the stored run's results, every column, to the
    4 decimals lm-eval prints (a re-run that changes the numbers must change the doc with them)."""
    import json

    text = (REPO / "docs" / "leaderboards.md").read_text(encoding="utf-8")
    example = text[text.index("#### A model that verbalizes") :]
    stored = REPO / "benchmarks" / "results" / "leaderboard_example-qwen2.5-coder-1.5b" / "results.json"
    results = json.loads(stored.read_text(encoding="utf-8"))["results"]["capcal_arithmetic_calibration"]
    rows = re.findall(r"^\|[^|]*\|[^|]*\|all_responses\|\s*0\|(\w+)\s*\|\S*\s*\|\s*(\S+)\|±\s*\|\s*(\S+)\|$",
                      example, re.MULTILINE)  # fmt: skip
    metrics = {
        key.split(",")[0] for key in results if key.endswith(",all_responses") and "_stderr" not in key
    }
    assert {name for name, _, _ in rows} == metrics and len(rows) == 23
    for name, value, stderr in rows:
        assert float(value) == pytest.approx(results[f"{name},all_responses"], abs=5e-5), name
        assert float(stderr) == pytest.approx(results[f"{name}_stderr,all_responses"], abs=5e-5), name
