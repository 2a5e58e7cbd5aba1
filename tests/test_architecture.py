"""The import graph of the project's packages, read from the code (``ast``): no circles, one direction.

Every ``import`` and ``from ... import`` of a project module counts, at module level or inside a function
(an import deferred into a function must not hide a circle). ``from a.b import c`` is an arrow to ``a.b.c``
when that is a module, else to ``a.b`` (its ``__init__``). Run as a script to print the graph of
``analysis/``'s sub-packages that docs/architecture.md shows:
``python tests/test_architecture.py``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("analysis", "capcal_metrics", "capcal_models", "capcal_tasks")
# What capcal_metrics may import besides itself and the standard library: it is pure numpy (and scipy).
METRICS_DEPENDENCIES = {"numpy", "scipy"}


def module_files() -> dict[str, Path]:
    """Every project module's dotted name -> its file (a package is its ``__init__.py``)."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    """The absolute name a (possibly relative) ``from`` import names."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imported_names(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """(absolute dotted name, line) of every import in a file, wherever it stands; ``from a import b`` gives
    ``a.b`` (``project_target`` takes ``a`` when ``a.b`` is no module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, node, path.name == "__init__.py")
            for alias in node.names:
                yield f"{source}.{alias.name}", node.lineno


def project_target(name: str, modules: dict[str, Path]) -> str | None:
    """The project module an imported name loads: the longest prefix of it that is a module (None outside)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def import_graph(modules: dict[str, Path] | None = None) -> dict[str, dict[str, int]]:
    """Module -> {imported project module: first line that imports it} (no self-arrows)."""
    modules = modules if modules is not None else module_files()
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        arrows: dict[str, int] = {}
        for name, line in imported_names(module, path):
            target = project_target(name, modules)
            if target is not None and target != module:
                arrows.setdefault(target, line)
        graph[module] = arrows
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The circles of a graph: its strongly connected components of more than one node (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def describe_circles(graph: dict[str, dict[str, int]], modules: dict[str, Path]) -> list[str]:
    """One line per arrow inside a circle: ``file:line: a -> b``."""
    lines = []
    for component in strongly_connected(graph):
        members = set(component)
        for module in component:
            for target, line in sorted(graph[module].items()):
                if target in members:
                    lines.append(f"{modules[module].relative_to(REPO)}:{line}: {module} -> {target}")
    return lines


def subpackage(module: str) -> str:
    """``analysis.report.build`` -> ``analysis.report``; a top-level module of a package stays whole."""
    return ".".join(module.split(".")[:2])


def subpackage_graph(graph: dict[str, dict[str, int]], prefix: str = "analysis") -> dict[str, set[str]]:
    """Sub-package -> the sub-packages of ``prefix`` it imports (arrows inside one sub-package left out)."""
    arrows: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if module != prefix and module.startswith(prefix + "."):
            source = subpackage(module)
            arrows.setdefault(source, set())
            for target in targets:
                if target.startswith(prefix + ".") and subpackage(target) != source:
                    arrows[source].add(subpackage(target))
    return arrows


@pytest.fixture(scope="module")
def modules() -> dict[str, Path]:
    return module_files()


@pytest.fixture(scope="module")
def graph(modules) -> dict[str, dict[str, int]]:
    return import_graph(modules)


def test_the_graph_is_read_from_the_code(graph):
    # the reader itself: arrows that stand in the code today, relative and inside a function included
    assert "analysis.report.build" in graph["analysis.report.paper_table"] or (
        "analysis.report.analyze" in graph["analysis.report.paper_table"]
    )
    assert "capcal_metrics.kernel_registry" in graph["capcal_metrics.jackknife"]  # a relative import
    assert "analysis.runs" in graph["analysis.self_calibration.loop"]  # imported inside a function


def test_strongly_connected_finds_a_planted_circle():
    planted = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {}, "e": {"e": 1}}
    assert strongly_connected(planted) == [["a", "b", "c"]]


def test_no_import_circles(graph, modules):
    circles = describe_circles(graph, modules)
    assert not circles, "import circles among project modules:\n" + "\n".join(circles)


def test_no_circles_among_the_subpackages_of_analysis(graph):
    # one direction between analysis/'s sub-packages too (docs/architecture.md draws this graph)
    arrows = {source: dict.fromkeys(targets, 0) for source, targets in subpackage_graph(graph).items()}
    assert strongly_connected(arrows) == []


def test_self_calibration_imports_nothing_of_the_report(graph):
    found = [
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.startswith("analysis.self_calibration")
        for target in targets
        if target == "analysis.report" or target.startswith("analysis.report.")
    ]
    assert not found, found


def test_lower_packages_do_not_import_analysis(graph):
    found = [
        f"{module} -> {target}"
        for module, targets in graph.items()
        if not module.startswith("analysis")
        for target in targets
        if target.split(".")[0] == "analysis"
    ]
    assert not found, found


def test_capcal_metrics_imports_only_numpy_scipy_and_the_standard_library(modules):
    found = []
    for module, path in modules.items():
        if module.split(".")[0] != "capcal_metrics":
            continue
        for name, line in imported_names(module, path):
            top = name.split(".")[0]
            allowed = top in sys.stdlib_module_names or top in METRICS_DEPENDENCIES or top == "capcal_metrics"
            if not allowed and top != "__future__":
                found.append(f"{path.relative_to(REPO)}:{line}: {name}")
    assert not found, found


def test_no_private_name_imported_from_another_package(modules):
    found = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _absolute(module, node, path.name == "__init__.py")
                if source not in modules:
                    continue
                package = source if modules[source].name == "__init__.py" else source.rpartition(".")[0]
                if package == own:
                    continue
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{path.relative_to(REPO)}:{node.lineno}: {source}.{alias.name}")
    assert not found, found


if __name__ == "__main__":
    files = module_files()
    arrows = import_graph(files)
    print("circles among project modules:", describe_circles(arrows, files) or "none")
    print("\nanalysis/ sub-packages and what they import:")
    for source, targets in sorted(subpackage_graph(arrows).items()):
        print(f"  {source:<32} -> {', '.join(sorted(targets)) or '-'}")
