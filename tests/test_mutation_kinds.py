"""tests/mutation_kinds.py: each operator makes the mutant its kind names, on small sources, and none else."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from mutation_kinds import mutants_of_source  # noqa: E402

SOURCE = """
TIMEOUT_S = 2.0


def read(record, level=0.95, *, scale=1):
    return record["se"] * scale + record["value"] + level


def caller(record):
    return read(record, level=0.9)


def memory(kilobytes):
    return kilobytes * 1024


def order(items):
    for name in ("aa", "bb"):
        items.append(name)
    return sorted(items, key=len)


class Counter:
    def __init__(self):
        self.count = 0

    def hit(self):
        self.count = self.count + 1
        return self.count < 3
"""


def _by_kind(source: str = SOURCE) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for mutant in mutants_of_source(source, "toy.py"):
        ast.parse(mutant.source)  # every mutant is valid Python
        found.setdefault(mutant.kind, []).append(mutant.change)
    return found


def _mutant(kind: str, change: str) -> str:
    (mutant,) = [m for m in mutants_of_source(SOURCE, "toy.py") if m.kind == kind and m.change == change]
    return mutant.source


def test_each_operator_makes_its_mutants():
    found = _by_kind()
    assert sorted(found["sibling_key"]) == ["['se'] -> ['value']", "['value'] -> ['se']"]
    assert found["kwarg_default"] == ["read(level=0.9 -> 0.95)"]
    assert sorted(found["unit"]) == ["1024 -> 1", "1024 -> 1000", "TIMEOUT_S x 0.001", "TIMEOUT_S x 1000"]
    assert sorted(found["reverse"]) == ["for over a literal, backwards", "sorted(...) reversed"]
    assert found["drop_state"] == ["self.count = ... dropped"]  # not the one in __init__
    assert found["boundary"] == ["Lt -> LtE"]


def test_the_mutants_change_what_they_say():
    namespace: dict = {}
    exec(compile(_mutant("sibling_key", "['se'] -> ['value']"), "toy", "exec"), namespace)
    assert namespace["read"]({"se": 0.1, "value": 5.0}, level=0) == 10.0  # the value read twice
    namespace = {}
    exec(compile(_mutant("kwarg_default", "read(level=0.9 -> 0.95)"), "toy", "exec"), namespace)
    assert namespace["caller"]({"se": 0.0, "value": 0.0}) == 0.95
    namespace = {}
    exec(compile(_mutant("unit", "1024 -> 1000"), "toy", "exec"), namespace)
    assert namespace["memory"](2) == 2000
    namespace = {}
    exec(compile(_mutant("reverse", "for over a literal, backwards"), "toy", "exec"), namespace)
    assert namespace["order"]([]) == ["bb", "aa"]  # equal lengths sort stably: the loop's order shows
    namespace = {}
    exec(compile(_mutant("reverse", "sorted(...) reversed"), "toy", "exec"), namespace)
    assert namespace["order"](["a"]) == ["aa", "bb", "a"]
    namespace = {}
    exec(compile(_mutant("drop_state", "self.count = ... dropped"), "toy", "exec"), namespace)
    counter = namespace["Counter"]()
    assert [counter.hit() for _ in range(4)] == [True] * 4  # never counts
    namespace = {}
    exec(compile(_mutant("boundary", "Lt -> LtE"), "toy", "exec"), namespace)
    counter = namespace["Counter"]()
    assert [counter.hit() for _ in range(4)] == [True, True, True, False]


def test_no_mutant_where_no_operator_applies():
    assert _by_kind("def f(x):\n    return x + 1\n") == {}


def test_a_module_is_run_against_the_test_file_named_after_it():
    from mutation_kinds import default_test

    assert default_test("capcal_models/batch_size.py") == "tests/capcal_models/test_batch_size.py"
    assert (
        default_test("analysis/estimators/consistency.py") == "tests/analysis/estimators/test_consistency.py"
    )
    assert default_test("capcal_models/__init__.py") is None
