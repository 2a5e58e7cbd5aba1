"""Mutants of the kinds a person writes and mutmut seldom does (issue 49), run against the tests.

Operators (each on the AST of one module; the mutant is the module unparsed with one node changed):

- ``sibling_key``: ``obj["a"]`` read where the same ``obj`` is also read at another string key in the same
  function: the key becomes that sibling (a value read from the wrong key of one record);
- ``kwarg_default``: a keyword argument of a call to a function of the same module, or one imported by
  name whose signature can be read, replaced by that parameter's default (a setting not passed through);
- ``unit``: a constant 1000 or 1024 becomes 1 and the other of the two; a module constant whose name ends in a
  unit (``_S``, ``_SECONDS``, ``_MS``, ``_BYTES``, ``_KB``, ``_MB``) is multiplied and divided by 1000;
- ``reverse``: ``sorted(...)`` and ``.sort(...)`` get ``reverse`` flipped; a ``for`` over a literal tuple or
  list of candidates runs it backwards;
- ``drop_state``: an assignment to ``self.<attr>`` outside ``__init__``, or to a ``global`` / ``nonlocal``
  name, becomes ``pass`` (state that should outlive the call is lost);
- ``boundary``: ``<`` <-> ``<=`` and ``>`` <-> ``>=``.

``python tests/mutation_kinds.py list FILE...`` lists the mutants; ``python tests/mutation_kinds.py run
--sample N --seed S FILE=TEST[,TEST...] ...`` (or FILE or FOLDER alone: each module against the test file
named after it, ``tests/<package>/.../test_<module>.py``; modules without one are left out) draws N mutants
uniformly from those files
(``random.Random(S)``), runs each against its tests (``-m "not slow"``, ``-x``) in a copy of the
repository, and prints the verdicts and the score per package (killed / run; a timeout counts as killed).
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib
import inspect
import random
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("capcal_metrics", "capcal_tasks", "capcal_models", "analysis")
UNIT_SUFFIXES = ("_S", "_SECONDS", "_MS", "_BYTES", "_KB", "_MB")
BOUNDARY = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}


@dataclass(frozen=True)
class Mutant:
    """One mutant of ``path`` (relative to the repository): its operator, line and what it changes."""

    path: str
    kind: str
    line: int
    change: str
    source: str

    @property
    def name(self) -> str:
        return f"{self.path}:{self.line}:{self.kind}:{self.change}"


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _enclosing_function(node: ast.AST, parents: dict) -> ast.AST | None:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return None


def _string_key(node: ast.Subscript) -> str | None:
    key = node.slice
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def _defaults_of(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    args = function.args
    positional = args.posonlyargs + args.args
    found = {
        a.arg: d
        for a, d in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
    }
    found.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None})
    return found


def _imported_defaults(tree: ast.Module) -> dict[str, dict[str, ast.expr]]:
    """name -> {parameter: default expression} of functions imported by name whose signature can be read."""
    found: dict[str, dict[str, ast.expr]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        if node.module.split(".")[0] not in PACKAGES:
            continue
        try:
            module = importlib.import_module(node.module)
        except Exception:  # noqa: BLE001 - an unimportable module offers no signatures
            continue
        for alias in node.names:
            target = getattr(module, alias.name, None)
            try:
                signature = inspect.signature(target)
            except (TypeError, ValueError):
                continue
            defaults = {}
            for parameter in signature.parameters.values():
                if parameter.default is inspect.Parameter.empty:
                    continue
                try:
                    defaults[parameter.name] = ast.parse(repr(parameter.default), mode="eval").body
                except SyntaxError:
                    continue
            found[alias.asname or alias.name] = defaults
    return found


def _candidates(tree: ast.Module) -> list[tuple[str, ast.AST, str, object]]:
    """(kind, node, description, replacement payload) of every mutation the operators offer."""
    parents = _parents(tree)
    out: list[tuple[str, ast.AST, str, object]] = []
    keys_by_object: dict[tuple[int, str], set[str]] = {}
    subscripts = [n for n in ast.walk(tree) if isinstance(n, ast.Subscript) and _string_key(n) is not None]
    for node in subscripts:
        scope = id(_enclosing_function(node, parents))
        keys_by_object.setdefault((scope, ast.dump(node.value)), set()).add(_string_key(node))
    for node in subscripts:
        if not isinstance(node.ctx, ast.Load):
            continue
        scope = id(_enclosing_function(node, parents))
        siblings = sorted(keys_by_object[(scope, ast.dump(node.value))] - {_string_key(node)})
        if siblings:
            out.append(("sibling_key", node, f"[{_string_key(node)!r}] -> [{siblings[0]!r}]", siblings[0]))
    local = {
        n.name: _defaults_of(n)
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    known = {**_imported_defaults(tree), **local}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = node.func.id if isinstance(node.func, ast.Name) else None
            defaults = known.get(callee, {}) if callee else {}
            for index, keyword in enumerate(node.keywords):
                default = defaults.get(keyword.arg) if keyword.arg else None
                if default is not None and ast.dump(default) != ast.dump(keyword.value):
                    change = f"{callee}({keyword.arg}={ast.unparse(keyword.value)} -> {ast.unparse(default)})"
                    out.append(("kwarg_default", node, change, (index, default)))
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name in ("sorted", "sort"):
                out.append(("reverse", node, f"{name}(...) reversed", "sort"))
        elif (
            isinstance(node, ast.For)
            and isinstance(node.iter, (ast.Tuple, ast.List))
            and len(node.iter.elts) > 1
        ):
            out.append(("reverse", node, "for over a literal, backwards", "for"))
        elif (
            isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value in (1000, 1024)
        ):
            other = 1000 if node.value == 1024 else 1024
            for value in (1, other):
                out.append(("unit", node, f"{node.value!r} -> {value}", value))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            function = _enclosing_function(node, parents)
            if (
                isinstance(target, ast.Name)
                and target.id.isupper()
                and target.id.endswith(UNIT_SUFFIXES)
                and function is None
                and isinstance(node.value, ast.Constant)
                and type(node.value.value) in (int, float)
            ):
                for factor in (1000, 1 / 1000):
                    out.append(("unit", node.value, f"{target.id} x {factor:g}", node.value.value * factor))
            state = (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
                and function is not None
                and function.name != "__init__"
            )
            declared = (
                function is not None
                and isinstance(target, ast.Name)
                and any(
                    isinstance(n, (ast.Global, ast.Nonlocal)) and target.id in n.names
                    for n in ast.walk(function)
                )
            )
            if state or declared:
                out.append(("drop_state", node, f"{ast.unparse(target)} = ... dropped", None))
        elif isinstance(node, ast.Compare):
            for index, op in enumerate(node.ops):
                if type(op) in BOUNDARY:
                    new = BOUNDARY[type(op)]
                    out.append(("boundary", node, f"{type(op).__name__} -> {new.__name__}", (index, new)))
    return out


def _apply(kind: str, node: ast.AST, payload: object, parents: dict) -> None:
    if kind == "sibling_key":
        node.slice = ast.Constant(payload)
    elif kind == "kwarg_default":
        index, default = payload
        node.keywords[index].value = copy.deepcopy(default)
    elif kind == "unit":
        node.value = payload
    elif kind == "reverse" and payload == "sort":
        flags = [k for k in node.keywords if k.arg == "reverse"]
        if flags:
            flags[0].value = ast.UnaryOp(ast.Not(), flags[0].value)
        else:
            node.keywords.append(ast.keyword("reverse", ast.Constant(True)))
    elif kind == "reverse":
        node.iter.elts = list(reversed(node.iter.elts))
    elif kind == "drop_state":
        parent = parents[node]
        for _field, value in ast.iter_fields(parent):
            if isinstance(value, list) and node in value:
                value[value.index(node)] = ast.Pass()
    elif kind == "boundary":
        index, new = payload
        node.ops[index] = new()


def mutants_of_source(source: str, path: str) -> list[Mutant]:
    """Every mutant the operators make of one module's source."""
    tree = ast.parse(source)
    count = len(_candidates(tree))
    mutants = []
    for index in range(count):
        fresh = ast.parse(source)
        kind, node, change, payload = _candidates(fresh)[index]
        line = getattr(node, "lineno", 0)
        _apply(kind, node, payload, _parents(fresh))
        mutated = ast.unparse(ast.fix_missing_locations(fresh))
        mutants.append(Mutant(path, kind, line, change, mutated))
    return mutants


def mutants_of(path: str) -> list[Mutant]:
    return mutants_of_source((REPO / path).read_text(encoding="utf-8"), path)


def _copy_repository(into: Path) -> None:
    for name in (*PACKAGES, "tests"):
        shutil.copytree(REPO / name, into / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "docs", "benchmarks", "Makefile", "requirements"):
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif source.exists():
            shutil.copy2(source, into / name)


def run_mutant(mutant: Mutant, tests: list[str], copy_root: Path, timeout_s: float) -> str:
    """ "killed", "survived" or "timeout": the mutant written into the copy, its tests run there, restored."""
    target = copy_root / mutant.path
    original = target.read_text(encoding="utf-8")
    target.write_text(mutant.source, encoding="utf-8")
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    command += ["-m", "not slow", *tests]
    environment = {**__import__("os").environ, "PYTHONPATH": str(copy_root)}
    environment.setdefault("CAPCAL_SHARED_DATA", str(REPO.parent / "shared" / "data"))
    try:
        result = subprocess.run(
            command, cwd=copy_root, env=environment, capture_output=True, text=True, timeout=timeout_s
        )
        return "survived" if result.returncode == 0 else "killed"
    except subprocess.TimeoutExpired:
        return "timeout"
    finally:
        target.write_text(original, encoding="utf-8")


def default_test(path: str) -> str | None:
    """The test file named after a module (``pkg/sub/mod.py`` -> ``tests/pkg/sub/test_mod.py``), if any."""
    module = Path(path)
    test = Path("tests") / module.parent / f"test_{module.stem}.py"
    return test.as_posix() if (REPO / test).is_file() else None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list")
    listing.add_argument("files", nargs="+")
    running = sub.add_parser("run")
    running.add_argument(
        "targets",
        nargs="+",
        help="FILE=TEST[,TEST...], or FILE or FOLDER (each module's tests/.../test_<module>.py)",
    )
    running.add_argument("--sample", type=int, default=20)
    running.add_argument("--seed", type=int, default=0)
    running.add_argument("--timeout", type=float, default=600.0)
    arguments = parser.parse_args(argv)
    if arguments.command == "list":
        for path in arguments.files:
            for mutant in mutants_of(path):
                print(mutant.name)
        return 0
    tests_of = {}
    for target in arguments.targets:
        path, _, tests = target.partition("=")
        if tests:
            tests_of[path] = tests.split(",")
            continue
        for module in sorted((REPO / path).rglob("*.py")) if (REPO / path).is_dir() else [REPO / path]:
            test = default_test(module.relative_to(REPO).as_posix())
            if test is not None:
                tests_of[module.relative_to(REPO).as_posix()] = [test]
    population = [mutant for path in tests_of for mutant in mutants_of(path)]
    drawn = random.Random(arguments.seed).sample(population, min(arguments.sample, len(population)))
    verdicts: Counter[tuple[str, str]] = Counter()
    with tempfile.TemporaryDirectory(prefix="mutation-kinds-") as folder:
        _copy_repository(Path(folder))
        for mutant in drawn:
            verdict = run_mutant(mutant, tests_of[mutant.path], Path(folder), arguments.timeout)
            verdicts[(mutant.path.split("/")[0], verdict)] += 1
            print(f"{verdict:8s} {mutant.name}", flush=True)
    print(f"population {len(population)} mutants, {len(drawn)} drawn (seed {arguments.seed})")
    for package in sorted({package for package, _ in verdicts}):
        run = sum(count for (p, _), count in verdicts.items() if p == package)
        killed = verdicts[(package, "killed")] + verdicts[(package, "timeout")]
        print(f"{package}: {killed} of {run} killed ({100 * killed / run:.1f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
