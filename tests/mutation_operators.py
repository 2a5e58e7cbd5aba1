"""The project's own mutation operators: the bugs a person writes, which mutmut's operators seldom do
(tests/README.md, "Mutation testing", issue 49 point 3).

Six operators, each on the AST of one file; a mutant replaces one node's source span (or one statement by
``pass``) and leaves every other byte of the file as it was:

- ``sibling_key``: a string key of a subscript or ``.get`` read for a sibling key of the same object in the
  same function (``record["stderr"]`` -> ``record["value"]``), an attribute read for a sibling attribute
  (``self.low`` -> ``self.high``);
- ``keyword_default``: a keyword argument replaced by the callee's default where the callee is a function,
  method or dataclass of the project (looked up by name, one definition with that default), else dropped
  (not where the value passed is that callee's own default: the call would be the same);
- ``unit_factor``: a unit factor dropped (``size * 1024`` -> ``size``), a unit literal swapped
  (1000 <-> 1024, 1e6 <-> 2**20), a unit-named value scaled (``timeout_s`` -> ``timeout_s * 1000``);
- ``reverse_order``: ``sorted``/``.sort`` reversed, ``max`` <-> ``min`` with a ``key``, a literal candidate
  list (the iterable of a loop, or a list of constants assigned to a name) reversed;
- ``drop_state``: an assignment to state that outlives the call dropped (``self.x = ...`` outside
  ``__init__``, a ``global``/``nonlocal`` name, a module-level dict/set/list changed in a function,
  ``os.environ[...] = ...``);
- ``boundary``: ``<`` <-> ``<=`` and ``>`` <-> ``>=`` in a comparison.

Run from the repository root (a temporary copy of the repository is mutated, never these files)::

    python tests/mutation_operators.py --count                      # the mutants per package and operator
    python tests/mutation_operators.py --sample 80 --seed 0 --log /tmp/mutops.jsonl --survivors survivors.txt

Each sampled mutant is written into the copy, and the fast tests (``-m "not slow"``, ``-x``) of the test
files that import its module run against it (those named after the module first): survived (every covering
test passes), killed (a test fails, and passes when re-run alone without the mutant), timeout (counted as
killed, named apart) or error (the failing test fails without the mutant too). No clean run of all the
covering files is needed unless a mutant times out (:func:`judge`). The score per package is killed /
(killed + survived) with a Wilson 95% interval (:func:`wilson_interval`). ``--exclude`` leaves out the
mutants of earlier samples (their names, or their logs), matched without their line numbers.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import difflib
import importlib
import inspect
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("analysis", "capcal_tasks", "capcal_models")
OPERATORS = ("sibling_key", "keyword_default", "unit_factor", "reverse_order", "drop_state", "boundary")
# the deselection of pyproject's mutmut settings: coverage simulations that take seconds each
SLOW_SIMULATIONS = (
    "not interval_of_pooled_kappa_covers and not jackknife_interval_covers and not mixture_jackknife_coverage"
)


@dataclass(frozen=True)
class Mutant:
    """One mutant: ``path`` relative to the repository, the ``operator``, where (``line``, ``col``, 1-based
    line), a one-line ``description`` and the whole mutated file text ``source``."""

    path: str
    operator: str
    line: int
    col: int
    description: str
    source: str

    @property
    def module(self) -> str:
        """``analysis/report/figures.py`` -> ``analysis.report.figures``; a package's ``__init__`` -> the
        package."""
        parts = list(Path(self.path).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)

    @property
    def package(self) -> str:
        return Path(self.path).parts[0]

    @property
    def name(self) -> str:
        """A stable name: ``module:line:col:operator:description``."""
        return f"{self.module}:{self.line}:{self.col}:{self.operator}:{self.description}"


# --- spans -------------------------------------------------------------------------------------------------


class _Source:
    """A file's text with byte offsets per line (ast's ``col_offset`` counts UTF-8 bytes)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.data = text.encode("utf-8")
        self.line_starts = [0]
        for line in self.data.splitlines(keepends=True):
            self.line_starts.append(self.line_starts[-1] + len(line))

    def replace(self, node: ast.AST, new: str) -> str:
        """The file with ``node``'s span replaced by ``new``."""
        start = self.line_starts[node.lineno - 1] + node.col_offset
        end = self.line_starts[node.end_lineno - 1] + node.end_col_offset
        return (self.data[:start] + new.encode("utf-8") + self.data[end:]).decode("utf-8")


def _expression(node: ast.expr) -> str:
    """``node``'s text in parentheses: valid wherever the node stood, whatever its precedence."""
    return f"({ast.unparse(node)})"


def _copy(node: ast.AST) -> ast.AST:
    return ast.parse(ast.unparse(node), mode="eval").body if isinstance(node, ast.expr) else node


def _excluded_nodes(tree: ast.Module, source: str) -> set[int]:
    """ids of nodes no operator touches: annotations, f-string parts (their positions are unreliable before
    Python 3.12), and functions marked ``# pragma: no mutate block``."""
    excluded: set[int] = set()
    lines = source.splitlines()

    def drop(node: ast.AST | None) -> None:
        if node is not None:
            excluded.update(id(sub) for sub in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, ast.arg | ast.AnnAssign):
            drop(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            drop(node.returns)
            if "pragma: no mutate block" in lines[node.lineno - 1]:
                drop(node)
        elif isinstance(node, ast.JoinedStr):
            drop(node)
    for node in ast.walk(tree):
        lineno = getattr(node, "lineno", None)
        if lineno is not None and re.search(r"pragma: no mutate(?! block)", lines[lineno - 1]):
            excluded.add(id(node))
    return excluded


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def _own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's body, not those of functions or classes nested in it."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))


Edit = tuple[ast.AST, str, str]  # the node whose span is replaced, its new text, a description
Operator = Callable[[ast.Module, "ProjectIndex"], Iterator[Edit]]


# --- the operators -----------------------------------------------------------------------------------------


def _string_key(node: ast.AST) -> tuple[str, ast.Constant] | None:
    """(object text, key constant) of ``obj["key"]`` or ``obj.get("key", ...)``; else None."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ):
        return ast.unparse(node.value), node.slice
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return ast.unparse(node.func.value), node.args[0]
    return None


def sibling_key(tree: ast.Module, index: ProjectIndex) -> Iterator[Edit]:
    """Within each function: a string key of an object read for the next other key (in order of first use)
    used on the same object (by the object's text); an attribute read (not called, not assigned) for the
    next other attribute read on the same object."""
    for function in _functions(tree):
        nodes = sorted(
            (node for node in _own_nodes(function) if hasattr(node, "lineno")),
            key=lambda node: (node.lineno, node.col_offset),
        )
        keys: dict[str, list[str]] = defaultdict(list)
        key_sites: list[tuple[str, ast.Constant]] = []
        attributes: dict[str, list[str]] = defaultdict(list)
        attribute_sites: list[ast.Attribute] = []
        called = {id(node.func) for node in nodes if isinstance(node, ast.Call)}
        modules = _imported_names(tree)
        for node in nodes:
            found = _string_key(node)
            if found is not None:
                owner, key = found
                if key.value not in keys[owner]:
                    keys[owner].append(key.value)
                key_sites.append((owner, key))
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Load)
                and isinstance(node.value, ast.Name)
                and node.value.id not in modules
                and id(node) not in called
            ):
                owner = node.value.id
                if node.attr not in attributes[owner]:
                    attributes[owner].append(node.attr)
                attribute_sites.append(node)
        for owner, key in key_sites:
            siblings = keys[owner]
            if len(siblings) > 1:
                other = siblings[(siblings.index(key.value) + 1) % len(siblings)]
                yield key, repr(other), f"{owner}[{key.value!r}] -> {owner}[{other!r}]"
        for node in attribute_sites:
            owner = node.value.id
            siblings = attributes[owner]
            if len(siblings) > 1:
                other = siblings[(siblings.index(node.attr) + 1) % len(siblings)]
                yield node, f"{owner}.{other}", f"{owner}.{node.attr} -> {owner}.{other}"


def _imported_names(tree: ast.Module) -> set[str]:
    """The names a file binds by ``import`` (modules, mostly: ``np.inf`` has no sibling in a person's
    sense)."""
    return {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }


@dataclass
class ProjectIndex:
    """The defaults of the project's functions by name: ``defaults[name][keyword]`` holds the set of default
    texts of that keyword among the project's definitions named ``name`` (a function, a method, a class's
    ``__init__`` or a dataclass field, under the class's name); ``names`` every such name."""

    defaults: dict[str, dict[str, set[str]]]
    names: set[str]

    @classmethod
    def build(cls, trees: Iterable[ast.Module]) -> ProjectIndex:
        defaults: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        names: set[str] = set()

        def add(name: str, arguments: ast.arguments) -> None:
            names.add(name)
            positional = arguments.posonlyargs + arguments.args
            for argument, default in zip(
                positional[len(positional) - len(arguments.defaults) :], arguments.defaults, strict=True
            ):
                defaults[name][argument.arg].add(ast.unparse(default))
            for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
                if default is not None:
                    defaults[name][argument.arg].add(ast.unparse(default))
                else:
                    defaults[name].setdefault(argument.arg, set())
            for argument in positional[: len(positional) - len(arguments.defaults)]:
                defaults[name].setdefault(argument.arg, set())

        for tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    add(node.name, node.args)
                elif isinstance(node, ast.ClassDef):
                    names.add(node.name)
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                            add(node.name, item.args)
                        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                            if item.value is not None and not (
                                isinstance(item.value, ast.Call)
                                and ast.unparse(item.value.func).endswith("field")
                            ):
                                defaults[node.name][item.target.id].add(ast.unparse(item.value))
                            else:
                                defaults[node.name].setdefault(item.target.id, set())
        return cls(defaults, names)

    def default(self, callee: str, keyword: str) -> str | None:
        """The one default text of ``keyword`` for the project's ``callee``; "" when the callee is not the
        project's (drop the keyword); None when the project's callee has no single default for it."""
        if callee not in self.names:
            return ""
        texts = self.defaults.get(callee, {}).get(keyword)
        if texts is None:  # a **kwargs pass-through or a name the project defines differently
            return None
        return next(iter(texts)) if len(texts) == 1 else None


def _callee_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


# argparse's ``add_argument`` takes ``**kwargs``: its documented defaults
ADD_ARGUMENT_DEFAULTS = {
    "action": "'store'",
    "choices": "None",
    "const": "None",
    "default": "None",
    "help": "None",
    "metavar": "None",
    "nargs": "None",
    "required": "False",
    "type": "None",
}


def _import_bindings(tree: ast.Module) -> dict[str, tuple[str, str | None]]:
    """Name -> (module, attribute or None) for the file's absolute imports (``import numpy as np``:
    ``np`` -> ("numpy", None); ``from json import dumps``: ``dumps`` -> ("json", "dumps"))."""
    bindings: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                bindings[name] = (alias.name if alias.asname else alias.name.split(".")[0], None)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                bindings[alias.asname or alias.name] = (node.module, alias.name)
    return bindings


def _resolve(function: ast.expr, bindings: dict[str, tuple[str, str | None]]) -> object | None:
    """The object a call's ``func`` names through the file's imports or the builtins (``np.zeros``,
    ``dumps``, ``sorted``); None for anything else (a method of a local object) or what does not import."""
    attributes = []
    while isinstance(function, ast.Attribute):
        attributes.append(function.attr)
        function = function.value
    if not isinstance(function, ast.Name):
        return None
    try:
        if function.id in bindings:
            module, attribute = bindings[function.id]
            found = importlib.import_module(module)
            if attribute is not None:
                found = getattr(found, attribute)
        elif hasattr(builtins, function.id):
            found = getattr(builtins, function.id)
        else:
            return None
        for attribute in reversed(attributes):
            found = getattr(found, attribute)
    except Exception:  # noqa: BLE001  (an optional dependency, a name made at run time)
        return None
    return found


def _external_default(
    call: ast.Call, keyword: str, bindings: dict[str, tuple[str, str | None]]
) -> str | None:
    """The default text of ``keyword`` of a callee outside the project, where it can be read: argparse's
    ``add_argument`` (documented), else the signature of the callee (a class: its ``__init__`` too)."""
    if isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument":
        return ADD_ARGUMENT_DEFAULTS.get(keyword)
    callee = _resolve(call.func, bindings)
    if callee is None:
        return None
    for target in (callee, callee.__init__) if inspect.isclass(callee) else (callee,):
        try:
            parameter = inspect.signature(target).parameters.get(keyword)
        except (TypeError, ValueError):
            continue
        if parameter is not None and parameter.default is not inspect.Parameter.empty:
            return repr(parameter.default)
    return None


def keyword_default(tree: ast.Module, index: ProjectIndex) -> Iterator[Edit]:
    """Each keyword argument of a call: replaced by the callee's default where the callee is the project's
    (skipped where it has no single default or is passed its default already), else dropped (skipped where
    the other callee's default is the value passed: dropping it changes nothing)."""
    bindings = _import_bindings(tree)
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        callee = _callee_name(call)
        if callee is None or callee == "field":  # a dataclass field's declaration, not a call a person tunes
            continue
        for position, keyword in enumerate(call.keywords):
            if keyword.arg is None:
                continue
            default = index.default(callee, keyword.arg)
            if default is None or default == ast.unparse(keyword.value):
                continue
            if default == "" and isinstance(keyword.value, ast.Constant):
                passed = _external_default(call, keyword.arg, bindings)
                if passed is not None and passed == repr(keyword.value.value):
                    continue
            mutated = _copy(call)
            if default == "":
                del mutated.keywords[position]
                description = f"{callee}(... {keyword.arg}= dropped)"
            else:
                mutated.keywords[position].value = ast.parse(default, mode="eval").body
                description = f"{callee}({keyword.arg}={default})"
            yield call, _expression(mutated), description


# a float literal (1e3, 1e6) hashes as its int, so these also hold 1e3 and 1e6
UNIT_SWAPS = {1000: 1024, 1024: 1000, 1_000_000: 1_048_576, 1_048_576: 1_000_000}
UNIT_FACTORS = {1000, 1024, 1_000_000, 1_048_576, 1_000_000_000, 1_073_741_824}
_BYTES = re.compile(r"(?i)(^|_)(k|m|g|t)i?b($|_)|bytes?($|_)|(kib|mib|gib|kb|mb|gb)$")
_TIME = re.compile(r"(?i)(^|_)(ms|ns|us|s|sec|secs|seconds|millis|milliseconds)$|(^|_)seconds(_|$)")


def _unit_literal(node: ast.AST) -> bool:
    """1000, 1024, 1e6, ... or ``2 ** 20`` / ``1 << 30`` / ``1024 * 1024``."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value in UNIT_FACTORS
    if (
        isinstance(node, ast.BinOp)
        and isinstance(node.left, ast.Constant)
        and isinstance(node.right, ast.Constant)
    ):
        if isinstance(node.op, ast.Pow) and node.left.value in (2, 10, 1024, 1000):
            return True
        if isinstance(node.op, ast.LShift) and node.left.value == 1:
            return True
        if isinstance(node.op, ast.Mult):
            return _unit_literal(node.left) and _unit_literal(node.right)
    return False


def _unit_name(node: ast.AST) -> str | None:
    """'bytes' or 'time' for a name that says its unit (``total_bytes``, ``MIB``, ``timeout_s``)."""
    text = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    if text is None:
        return None
    if _BYTES.search(text):
        return "bytes"
    if _TIME.search(text):
        return "time"
    return None


def unit_factor(tree: ast.Module, index: ProjectIndex) -> Iterator[Edit]:
    """A unit factor of a product or quotient dropped; a unit literal swapped 1000 <-> 1024 (1e6 <-> 2**20);
    a value whose name says its unit (read, not called, not an operand of such a product) scaled by 1024
    (bytes) or 1000 (time)."""
    factors: set[int] = set()
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div | ast.FloorDiv):
            for factor, other in ((node.right, node.left), (node.left, node.right)):
                if isinstance(node.op, ast.Div | ast.FloorDiv) and factor is node.left:
                    continue
                if _unit_literal(factor) or _unit_name(factor):
                    factors.update((id(factor), id(other)))
                    yield node, _expression(other), f"{ast.unparse(node)} -> {ast.unparse(other)}"
                    break
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value in UNIT_SWAPS:
            yield node, repr(UNIT_SWAPS[node.value]), f"{node.value!r} -> {UNIT_SWAPS[node.value]!r}"
        elif (
            isinstance(node, ast.Name | ast.Attribute)
            and isinstance(node.ctx, ast.Load)
            and id(node) not in called
            and id(node) not in factors
            and (kind := _unit_name(node)) is not None
        ):
            scale = 1024 if kind == "bytes" else 1000
            yield (
                node,
                f"({ast.unparse(node)} * {scale})",
                f"{ast.unparse(node)} -> {ast.unparse(node)} * {scale}",
            )


def _constant_list(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.List | ast.Tuple)
        and len(node.elts) >= 2
        and all(isinstance(element, ast.Constant) for element in node.elts)
        and len({repr(element.value) for element in node.elts}) > 1
    )


def _assigns_all(node: ast.Assign | ast.AnnAssign) -> bool:
    """Whether ``node`` assigns a module's ``__all__``: its order only orders ``from module import *``."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return any(isinstance(target, ast.Name) and target.id == "__all__" for target in targets)


def reverse_order(tree: ast.Module, index: ProjectIndex) -> Iterator[Edit]:
    """``sorted``/``.sort`` with ``reverse`` flipped (or added); ``max`` <-> ``min`` with a ``key``; a literal
    list or tuple of two or more elements reversed where it is the iterable of a loop or comprehension, or a
    list of distinct constants assigned to a name (a candidate list; not ``__all__``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = _callee_name(node)
            if callee in ("sorted", "sort") and (callee == "sorted" or isinstance(node.func, ast.Attribute)):
                mutated = _copy(node)
                reverse = [keyword for keyword in mutated.keywords if keyword.arg == "reverse"]
                if reverse:
                    reverse[0].value = ast.UnaryOp(ast.Not(), reverse[0].value)
                else:
                    mutated.keywords.append(ast.keyword("reverse", ast.Constant(True)))
                yield node, _expression(mutated), f"{callee}(...) reversed"
            elif (
                callee in ("max", "min")
                and isinstance(node.func, ast.Name)
                and any(keyword.arg == "key" for keyword in node.keywords)
            ):
                mutated = _copy(node)
                mutated.func = ast.Name("min" if callee == "max" else "max", ast.Load())
                yield node, _expression(mutated), f"{callee} -> {mutated.func.id}"
        iterables = []
        if isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            iterables.append(node.iter)
        elif (
            isinstance(node, ast.Assign | ast.AnnAssign)
            and node.value is not None
            and _constant_list(node.value)
            and not _assigns_all(node)
        ):
            iterables.append(node.value)
        for iterable in iterables:
            if isinstance(iterable, ast.List | ast.Tuple) and len(iterable.elts) >= 2:
                if any(isinstance(element, ast.Starred) for element in iterable.elts):
                    continue
                mutated = _copy(iterable)
                mutated.elts.reverse()
                if ast.dump(mutated) != ast.dump(iterable):
                    yield iterable, _expression(mutated), f"{ast.unparse(iterable)[:40]} reversed"


_MUTATORS = {
    "add",
    "append",
    "extend",
    "update",
    "setdefault",
    "pop",
    "popitem",
    "clear",
    "discard",
    "remove",
}


def _module_state(tree: ast.Module) -> set[str]:
    """Module-level names bound to a dict, set or list (a literal, a comprehension or a constructor call)."""
    names: set[str] = set()
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        value = getattr(node, "value", None)
        mutable = isinstance(
            value, ast.Dict | ast.Set | ast.List | ast.DictComp | ast.SetComp | ast.ListComp
        ) or (
            isinstance(value, ast.Call)
            and _callee_name(value)
            in ("dict", "set", "list", "defaultdict", "OrderedDict", "Counter", "WeakValueDictionary")
        )
        if mutable:
            names.update(target.id for target in targets if isinstance(target, ast.Name))
    return names


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def drop_state(tree: ast.Module, index: ProjectIndex) -> Iterator[Edit]:
    """A statement that changes state outliving the call replaced by ``pass``: an assignment (plain,
    augmented, annotated) to an attribute of ``self``/``cls`` outside ``__init__``/``__post_init__``/
    ``__new__``, to a name the function declares ``global`` or ``nonlocal``, to an item of a module-level
    dict/set/list or of ``os.environ``; a mutating method call (``add``, ``update``, ``pop``, ...) on a
    module-level dict/set/list."""
    state = _module_state(tree)
    for function in _functions(tree):
        if function.name in ("__init__", "__post_init__", "__new__"):
            continue
        own = list(_own_nodes(function))
        declared = {
            name for node in own if isinstance(node, ast.Global | ast.Nonlocal) for name in node.names
        }
        parameters = {argument.arg for argument in ast.walk(function.args) if isinstance(argument, ast.arg)}
        local = {
            node.id for node in own if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
        } - declared
        shared = (state - local - parameters) | declared
        for node in own:
            if (
                isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign)
                and getattr(node, "value", None) is not None
            ):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    root = _root_name(target)
                    outlives = (
                        (isinstance(target, ast.Attribute) and root in ("self", "cls"))
                        or (isinstance(target, ast.Name) and target.id in declared)
                        or (isinstance(target, ast.Subscript) and root in shared)
                        or (isinstance(target, ast.Subscript) and ast.unparse(target.value) == "os.environ")
                    )
                    if outlives:
                        yield node, "pass", f"{ast.unparse(node).splitlines()[0][:60]} dropped"
                        break
            elif (
                isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute)
                and node.value.func.attr in _MUTATORS
                and _root_name(node.value.func.value) in shared
            ):
                yield node, "pass", f"{ast.unparse(node).splitlines()[0][:60]} dropped"


_BOUNDARY_SWAPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_SYMBOLS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def boundary(tree: ast.Module, index: ProjectIndex) -> Iterator[Edit]:
    """Each ``<``, ``<=``, ``>``, ``>=`` of a comparison turned into its boundary twin (one operator of a
    chain at a time)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for position, op in enumerate(node.ops):
                if type(op) in _BOUNDARY_SWAPS:
                    mutated = _copy(node)
                    mutated.ops[position] = _BOUNDARY_SWAPS[type(op)]()
                    new = _SYMBOLS[type(mutated.ops[position])]
                    yield node, _expression(mutated), f"{_SYMBOLS[type(op)]} -> {new} ({position})"


OPERATOR_FUNCTIONS: dict[str, Operator] = {
    "sibling_key": sibling_key,
    "keyword_default": keyword_default,
    "unit_factor": unit_factor,
    "reverse_order": reverse_order,
    "drop_state": drop_state,
    "boundary": boundary,
}


# --- enumeration -------------------------------------------------------------------------------------------


def mutants_of_source(
    source: str, path: str, index: ProjectIndex | None = None, operators: Iterable[str] = OPERATORS
) -> list[Mutant]:
    """Every mutant of one file's text (``path`` only names it): each operator's edits, left out those that
    touch an excluded node (:func:`_excluded_nodes`), change nothing (same AST) or do not compile."""
    tree = ast.parse(source)
    index = index if index is not None else ProjectIndex.build([tree])
    excluded = _excluded_nodes(tree, source)
    text = _Source(source)
    original = ast.dump(tree)
    mutants: list[Mutant] = []
    seen: set[str] = set()
    for operator in operators:
        for node, new, description in OPERATOR_FUNCTIONS[operator](tree, index):
            if id(node) in excluded:
                continue
            mutated = text.replace(node, new)
            try:
                changed = ast.dump(ast.parse(mutated)) != original
                compile(mutated, path, "exec")
            except SyntaxError:
                continue
            if changed and mutated not in seen:
                seen.add(mutated)
                mutants.append(Mutant(path, operator, node.lineno, node.col_offset, description, mutated))
    return mutants


def source_files(repo: Path = REPO, packages: Iterable[str] = PACKAGES) -> list[Path]:
    """The Python files of the packages, sorted (relative to ``repo``)."""
    return sorted(path.relative_to(repo) for package in packages for path in (repo / package).rglob("*.py"))


def all_mutants(repo: Path = REPO, packages: Iterable[str] = PACKAGES) -> list[Mutant]:
    """Every mutant of every file of the packages, the callee defaults looked up across all of them."""
    files = source_files(repo, packages)
    texts = {path: (repo / path).read_text(encoding="utf-8") for path in files}
    index = ProjectIndex.build(ast.parse(text) for text in texts.values())
    return [mutant for path in files for mutant in mutants_of_source(texts[path], str(path), index)]


def diff(mutant: Mutant, repo: Path = REPO) -> str:
    """The mutant as a unified diff against the file in ``repo``."""
    original = (repo / mutant.path).read_text(encoding="utf-8")
    lines = difflib.unified_diff(
        original.splitlines(keepends=True),
        mutant.source.splitlines(keepends=True),
        mutant.path,
        mutant.path,
        n=1,
    )
    return "".join(lines)


def draw(mutants: list[Mutant], size: int, seed: int) -> list[Mutant]:
    """A uniform sample without replacement (``random.Random(seed)`` over the mutants sorted by name)."""
    ordered = sorted(mutants, key=lambda mutant: mutant.name)
    return random.Random(seed).sample(ordered, min(size, len(ordered)))


def named(mutants: list[Mutant], names: Iterable[str]) -> list[Mutant]:
    """The mutants named in ``names``, in name order: a triage's re-run of a sample's survivors (``--only``).
    A name matches its mutant exactly, or else by ``loose_name`` when exactly one mutant has that loose name
    (lines added above it since it was drawn; the same change on several lines, such as a dropped
    ``flush=``, is matched exactly only)."""
    exact = {mutant.name for mutant in mutants}
    loose: dict[tuple[str, ...], list[str]] = {}
    for mutant in mutants:
        loose.setdefault(loose_name(mutant.name), []).append(mutant.name)
    chosen = set()
    for name in names:
        candidates = [name] if name in exact else loose.get(loose_name(name), [])
        if len(candidates) == 1:
            chosen.add(candidates[0])
    return [mutant for mutant in sorted(mutants, key=lambda m: m.name) if mutant.name in chosen]


def loose_name(name: str) -> tuple[str, ...]:
    """A mutant's name without its line (module, column, operator, description): the same mutant after
    lines were added above it."""
    module, _line, column, operator, description = name.split(":", 4)
    return module, column, operator, description


def sampled_names(path: Path) -> list[str]:
    """The mutant names in ``path``: one per line, or a ``--log`` (JSON lines with ``name``); a survivors
    file's diff lines and lines starting with ``#`` are skipped."""
    names = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("{"):
            names.append(json.loads(line)["name"])
        elif line.count(":") >= 4 and not line.startswith((" ", "+", "-", "@", "#")):
            names.append(line)
    return names


# --- which tests -------------------------------------------------------------------------------------------


def covering_test_files(module: str, repo: Path = REPO) -> list[str]:
    """The test files (``tests/**/test_*.py``) that import ``module``: by its dotted name, as ``from PARENT
    import LEAF``, or as ``from PACKAGE import NAME`` of a name the module defines at top level, or that
    declare it on a line ``# exercises: MODULE[, MODULE...]`` (a module reached only through another one);
    with them, those that import its parent package when that is not a top-level package
    (``analysis.runs.records`` is read through ``analysis.runs``' ``load_runs``); where none does, those
    that import a package further up; relative to ``repo``, sorted."""
    tests = sorted((repo / "tests").rglob("test_*.py"))
    texts = {path: path.read_text(encoding="utf-8") for path in tests}
    candidate = module
    while candidate.count(".") >= 1:
        parent, leaf = candidate.rsplit(".", 1)
        patterns = [
            rf"(import|from)\s+{re.escape(candidate)}(\s|\.|,|$)",
            rf"from\s+{re.escape(parent)}\s+import\s+(\([^)]*\b{leaf}\b|[^\n]*\b{leaf}\b)",
        ]
        if candidate == module:
            patterns.append(rf"^# exercises:[^\n]*\b{re.escape(module)}\b")
            path = repo / (module.replace(".", "/") + ".py")
            if path.exists():
                names = _top_level_names(path.read_text(encoding="utf-8"))
                if names:
                    alternatives = "|".join(sorted(re.escape(name) for name in names))
                    patterns.append(
                        rf"from\s+{re.escape(parent)}\s+import\s+(\([^)]*\b({alternatives})\b|[^\n]*\b({alternatives})\b)"
                    )
        found = {
            str(path.relative_to(repo))
            for path, text in texts.items()
            if any(re.search(pattern, text, re.MULTILINE) for pattern in patterns)
        }
        if candidate == module and "." in parent:
            found |= set(covering_test_files(parent, repo))
        if found:
            return sorted(found)
        candidate = parent
    return []


def _top_level_names(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
    return {name for name in names if not name.startswith("_")}


# --- running -----------------------------------------------------------------------------------------------


def wilson_interval(successes: int, trials: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson's score interval for a binomial proportion (Wilson 1927):
    ``(p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)``, p = successes / trials; (nan, nan) at
    no trials."""
    if trials == 0:
        return math.nan, math.nan
    p = successes / trials
    centre = p + z * z / (2 * trials)
    spread = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    denominator = 1 + z * z / trials
    return (centre - spread) / denominator, (centre + spread) / denominator


def verdict(returncode: int | None) -> str:
    """pytest's exit status as a verdict: 0 survived; 1 (a test failed) and 2 (collection or import failed,
    interrupted) killed; 5 no tests; None (the timeout) timeout; else error."""
    if returncode is None:
        return "timeout"
    return {0: "survived", 1: "killed", 2: "killed", 5: "no tests"}.get(returncode, "error")


def copy_repository(repo: Path = REPO) -> Path:
    """A copy of the repository's tracked and untracked, not ignored files, under a new temporary folder,
    committed to a git repository of its own."""
    target = Path(tempfile.mkdtemp(prefix="capcal-mutops-")) / "repo"
    listed = (
        subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=repo,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = repo / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    # a git work tree of its own: lm-eval's git call (and the tests that check it) look for one
    git = ["git", "-c", "user.name=mutation", "-c", "user.email=mutation@localhost"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "--no-verify", "-m", "the copy"]):
        subprocess.run(git + command, cwd=target, capture_output=True, check=True)
    return target


def run_tests(
    copy: Path, tests: list[str], timeout: float, report: Path | None = None, collect_only: bool = False
) -> tuple[int | None, float]:
    """The fast tests ``tests`` (files or test ids) run in ``copy`` (exit status, or None past ``timeout``
    seconds; seconds); pytest's output written to ``report`` if given (its ``FAILED``/``ERROR`` lines name
    the tests that failed: :func:`failed_tests`)."""
    environment = dict(os.environ, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
    environment.setdefault("CAPCAL_SHARED_DATA", str(REPO.parent / "shared" / "data"))
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-x",
        "-q",
        "-rfE",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-m",
        "not slow",
        "-k",
        SLOW_SIMULATIONS,
        *(["--collect-only"] if collect_only else []),
        *tests,
    ]
    start = time.monotonic()
    output = report.open("wb") if report is not None else subprocess.DEVNULL
    try:
        process = subprocess.Popen(
            command,
            cwd=copy,
            env=environment,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        if report is not None:
            output.close()
    try:
        returncode: int | None = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        returncode = None
    except BaseException:  # the driver stopped (Ctrl-C, SIGTERM): its tests end with it
        os.killpg(process.pid, signal.SIGKILL)
        raise
    return returncode, time.monotonic() - start


def failed_tests(report: str) -> list[str]:
    """The test ids of pytest's short summary (``-rfE``): ``FAILED id - reason`` and ``ERROR id - reason``
    lines (an ``ERROR`` of a file that failed to import names the file)."""
    found = []
    for line in report.splitlines():
        match = re.match(r"(FAILED|ERROR) (tests/.+?)(?: - .*)?$", line)
        if match:
            found.append(match.group(2))
    return found


def ordered_test_files(module: str, tests: list[str]) -> tuple[list[str], list[str]]:
    """The covering files in two stages: first those named after the module (``test_LEAF*.py``, where a
    kill is likeliest and ``-x`` stops soonest), then the rest; one stage is empty where either would be."""
    leaf = module.rsplit(".", 1)[-1]
    own = [test for test in tests if Path(test).stem.startswith(f"test_{leaf}")]
    rest = [test for test in tests if test not in own]
    return (own, rest) if own and rest else (tests, [])


def judge(
    copy: Path,
    path: str,
    source: str,
    tests: list[str],
    reference: float | None,
    factor: float = 2.0,
    cap: float = 1800.0,
    module: str | None = None,
    slack: float = 30.0,
    retried: bool = False,
    clean_cap: float = 1800.0,
) -> dict:
    """A mutant's verdict: ``source`` written over ``path`` in ``copy`` (restored afterwards) and its covering
    ``tests`` run in two stages (:func:`ordered_test_files`, by ``module``'s name), each with ``-x``.

    - survived: every covering test passed with the mutant (no clean run needed);
    - killed: a test failed with the mutant and passes without it (that test, re-run alone on the clean copy;
      a file that failed to import is collected again);
    - error: the failing test fails without the mutant too (the verdict is not the mutant's);
    - timeout: past ``factor`` times the ``reference`` seconds (a clean or surviving run of these files)
      plus ``slack``, or past ``cap`` without a reference, and the clean files ran within that limit (else
      the mutant is run once more with the limit the clean run gives); every clean run may take
      ``clean_cap`` seconds, so the verdict of a mutant that never ends does not depend on the load;
    - no tests: every covering test is slow.
    Returns the record's verdict, seconds (of the mutant's runs), the failing test of a kill, and why."""
    target = copy / path
    original = target.read_text(encoding="utf-8")
    stages = [stage for stage in ordered_test_files(module or path, tests) if stage]
    limit = factor * reference + slack if reference is not None else cap
    statuses: list[int | None] = []
    seconds = 0.0
    with tempfile.TemporaryDirectory(prefix="capcal-mutops-report-") as folder:
        report = Path(folder) / "report.txt"
        target.write_text(source, encoding="utf-8")
        try:
            for stage in stages:
                status, took = run_tests(copy, stage, max(limit - seconds, 1.0), report)
                seconds += took
                statuses.append(status)
                if status != 0 and status != 5:
                    break
        finally:
            target.write_text(original, encoding="utf-8")
        status = statuses[-1]
        if status is None:
            clean, clean_seconds = run_tests(copy, tests, clean_cap)
            if clean != 0:
                return {
                    "verdict": "error",
                    "seconds": round(seconds, 1),
                    "why": f"the clean run exited {clean}",
                }
            if not retried and factor * clean_seconds + slack > limit + 1:  # too tight a limit: once more
                return judge(
                    copy, path, source, tests, clean_seconds, factor, cap, module, slack, True, clean_cap
                )
            return {
                "verdict": "timeout",
                "seconds": round(seconds, 1),
                "clean_seconds": round(clean_seconds, 1),
            }
        if all(code == 5 for code in statuses):
            return {"verdict": "no tests", "seconds": 0.0, "why": "no fast test in the covering files"}
        if status in (0, 5):
            return {"verdict": "survived", "seconds": round(seconds, 1)}
        if status not in (1, 2):
            return {"verdict": "error", "seconds": round(seconds, 1), "why": f"pytest exited {status}"}
        failed = failed_tests(report.read_text(encoding="utf-8", errors="replace"))
        files = [test for test in failed if "::" not in test]
        checks = [test for test in failed if "::" in test]
        clean_runs = []
        if checks:
            clean_runs.append(run_tests(copy, checks, clean_cap)[0])
        if files or not failed:  # an import error, or no id found: the clean files collected (or all run)
            clean_runs.append(
                run_tests(copy, files or stages[len(statuses) - 1], clean_cap, collect_only=bool(files))[0]
            )
        if any(code != 0 for code in clean_runs):
            return {
                "verdict": "error",
                "seconds": round(seconds, 1),
                "why": f"{failed or 'the covering tests'} fail without the mutant too",
            }
        return {"verdict": "killed", "seconds": round(seconds, 1), "by": failed[:3]}


def score_table(results: Iterable[dict]) -> dict[str, dict[str, float]]:
    """Per package: killed (timeouts included), timeouts, survived, no tests, score = killed / (killed +
    survived) and its Wilson 95% interval."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for result in results:
        counts[result["package"]][result["verdict"]] += 1
        counts["all"][result["verdict"]] += 1
    table = {}
    for package, count in sorted(counts.items(), key=lambda item: (item[0] == "all", item[0])):
        killed = count["killed"] + count["timeout"]
        trials = killed + count["survived"]
        low, high = wilson_interval(killed, trials)
        table[package] = {
            "killed": killed,
            "timeout": count["timeout"],
            "survived": count["survived"],
            "no tests": count["no tests"],
            "error": count["error"],
            "score": killed / trials if trials else math.nan,
            "low": low,
            "high": high,
        }
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--count", action="store_true", help="only count the mutants per package and operator"
    )
    parser.add_argument("--sample", type=int, default=80, help="how many mutants to draw (uniformly)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log", type=Path, help="one JSON line per mutant run (appended; a re-run resumes)")
    parser.add_argument(
        "--survivors", type=Path, help="where to write the survivors, each with its diff line"
    )
    parser.add_argument(
        "--timeout-factor", type=float, default=2.0, help="timeout: this times the clean run, + 30 s"
    )
    parser.add_argument(
        "--exclude",
        type=Path,
        action="append",
        default=[],
        help="a file of mutants drawn before (names, or a --log), left out of the draw (repeatable)",
    )
    parser.add_argument(
        "--until",
        help="launch no mutant after this clock time (HH:MM, today): the run stops with a uniform prefix",
    )
    parser.add_argument("--show", nargs="+", help="print these mutants (by name) as diffs, and stop")
    parser.add_argument(
        "--only",
        type=Path,
        help="run the mutants named in this file (names, or a --log) instead of a draw: a re-run of a "
        "sample's survivors after tests were written from them (no longer a fresh measure)",
    )
    arguments = parser.parse_args(argv)

    mutants = all_mutants()
    if arguments.show:
        for mutant in mutants:
            if mutant.name in arguments.show:
                print(mutant.name, diff(mutant), sep="\n")
        return 0
    per = Counter((mutant.package, mutant.operator) for mutant in mutants)
    print("| package | " + " | ".join(OPERATORS) + " | all |")
    print("|---|" + "---:|" * (len(OPERATORS) + 1))
    for package in PACKAGES:
        cells = " | ".join(str(per[package, operator]) for operator in OPERATORS)
        print(f"| {package} | {cells} | {sum(per[package, operator] for operator in OPERATORS)} |")
    if arguments.count:
        return 0

    excluded = {loose_name(name) for path in arguments.exclude for name in sampled_names(path)}
    sample = (
        named(mutants, sampled_names(arguments.only))
        if arguments.only
        else draw(
            [mutant for mutant in mutants if loose_name(mutant.name) not in excluded],
            arguments.sample,
            arguments.seed,
        )
    )
    done: dict[str, dict] = {}
    if arguments.log and arguments.log.exists():
        for line in arguments.log.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            done[record["name"]] = record
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a stopped run removes its copy
    copy = copy_repository()
    reference: dict[tuple[str, ...], float] = {}  # seconds of a surviving run of these files
    results = []
    try:
        for number, mutant in enumerate(sample, 1):
            if mutant.name in done:
                results.append(done[mutant.name])
                continue
            if arguments.until and time.strftime("%H:%M") >= arguments.until:
                print(f"stopped at {arguments.until}: {number - 1} of {len(sample)} run", flush=True)
                break
            tests = covering_test_files(mutant.module)
            record = {
                "name": mutant.name,
                "package": mutant.package,
                "operator": mutant.operator,
                "tests": tests,
            }
            if not tests:
                record.update(verdict="no tests", seconds=0.0)
            else:
                key = tuple(tests)
                record.update(
                    judge(
                        copy,
                        mutant.path,
                        mutant.source,
                        tests,
                        reference.get(key),
                        arguments.timeout_factor,
                        module=mutant.module,
                    )
                )
                if record["verdict"] == "survived":
                    reference[key] = max(reference.get(key, 0.0), record["seconds"])
                elif "clean_seconds" in record:
                    reference[key] = record["clean_seconds"]
            results.append(record)
            print(f"[{number}/{len(sample)}] {record['verdict']:9} {mutant.name}", flush=True)
            if arguments.log:
                with arguments.log.open("a", encoding="utf-8") as log:
                    log.write(json.dumps(record) + "\n")
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)

    print("\n| package | killed | of which timeout | survived | no tests | error | score (Wilson 95%) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for package, row in score_table(results).items():
        print(
            f"| {package} | {row['killed']} | {row['timeout']} | {row['survived']} | {row['no tests']} | "
            f"{row['error']} | {100 * row['score']:.1f}% ({100 * row['low']:.1f}-{100 * row['high']:.1f}) |"
        )
    survivors = {result["name"] for result in results if result["verdict"] in ("survived", "no tests")}
    if arguments.survivors:
        arguments.survivors.write_text(
            "".join(f"{mutant.name}\n{diff(mutant)}\n" for mutant in sample if mutant.name in survivors),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
