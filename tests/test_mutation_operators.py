"""The project's own mutation operators (tests/mutation_operators.py): each writes the mutant a person's bug
would be, on a small snippet, the expected text written out by hand."""

from __future__ import annotations

import ast
import math
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.mutation_operators import (
    Mutant,
    ProjectIndex,
    copy_repository,
    covering_test_files,
    diff,
    draw,
    failed_tests,
    judge,
    loose_name,
    mutants_of_source,
    named,
    ordered_test_files,
    run_tests,
    sampled_names,
    score_table,
    verdict,
    wilson_interval,
)


def _mutants(source: str, operator: str, index_sources: tuple[str, ...] = ()) -> list[str]:
    source = textwrap.dedent(source)
    index = ProjectIndex.build(
        [ast.parse(source), *(ast.parse(textwrap.dedent(text)) for text in index_sources)]
    )
    return [mutant.source for mutant in mutants_of_source(source, "analysis/snippet.py", index, [operator])]


def _same(found: list[str], expected: list[str]) -> None:
    assert sorted(found) == sorted(textwrap.dedent(text) for text in expected)


def test_a_key_is_read_from_a_sibling_key_of_the_same_record_in_the_same_function() -> None:
    source = """\
    def column(record, other):
        value = record["value"]  # keep this comment
        return value, record.get("stderr"), other["name"]
    """
    _same(
        _mutants(source, "sibling_key"),
        [
            """\
            def column(record, other):
                value = record['stderr']  # keep this comment
                return value, record.get("stderr"), other["name"]
            """,
            """\
            def column(record, other):
                value = record["value"]  # keep this comment
                return value, record.get('value'), other["name"]
            """,
        ],
    )


def test_an_attribute_is_read_from_a_sibling_but_a_method_module_or_target_is_not() -> None:
    source = """\
    import math

    def width(self):
        self.cached = math.pi
        return self.high - self.low + self.total()
    """
    _same(
        _mutants(source, "sibling_key"),
        [
            """\
            import math

            def width(self):
                self.cached = math.pi
                return self.low - self.low + self.total()
            """,
            """\
            import math

            def width(self):
                self.cached = math.pi
                return self.high - self.high + self.total()
            """,
        ],
    )


def test_keys_of_another_function_are_no_siblings() -> None:
    source = """\
    def first(record):
        return record["a"]

    def second(record):
        return record["b"]
    """
    assert _mutants(source, "sibling_key") == []


def test_a_keyword_takes_the_project_callees_default_or_is_dropped_for_another_callee() -> None:
    source = """\
    def interval(values, alpha=0.05, *, draws=1000):
        return values

    def table(values):
        return interval(values, alpha=0.1, draws=1000), sorted(values, key=abs)
    """
    _same(
        _mutants(source, "keyword_default"),
        [
            """\
            def interval(values, alpha=0.05, *, draws=1000):
                return values

            def table(values):
                return (interval(values, alpha=0.05, draws=1000)), sorted(values, key=abs)
            """,
            """\
            def interval(values, alpha=0.05, *, draws=1000):
                return values

            def table(values):
                return interval(values, alpha=0.1, draws=1000), (sorted(values))
            """,
        ],
    )


def test_a_keyword_of_a_project_callee_without_a_single_default_is_left() -> None:
    source = """\
    def run(plan, *, level):
        return plan

    def other(plan, level=1):
        return plan

    def call(plan):
        return run(plan, level=2) + other(plan, level=1)
    """
    assert _mutants(source, "keyword_default") == []


def test_a_keyword_passed_the_other_callees_own_default_is_not_a_mutant() -> None:
    """Dropping a keyword whose value is the callee's default changes no call: ``json.dumps(allow_nan=True)``,
    ``tqdm(leave=True)`` (a class: its ``__init__``), ``sorted(reverse=False)``, argparse's
    ``add_argument(default=None)`` are left; the same keywords with another value are dropped. A callee that
    cannot be read (a local object's method) keeps its drop."""
    source = """\
    import json
    from tqdm import tqdm

    def write(record, parser, steps, other):
        parser.add_argument("--a", default=None)
        parser.add_argument("--b", default=3)
        other.send(flag=True)
        return (
            json.dumps(record, allow_nan=True),
            json.dumps(record, allow_nan=False),
            tqdm(steps, leave=True),
            tqdm(steps, leave=False),
            sorted(steps, reverse=False),
        )
    """
    found = _mutants(source, "keyword_default")
    dropped = sorted(
        line.strip()
        for mutant in found
        for line, original in zip(mutant.splitlines(), textwrap.dedent(source).splitlines(), strict=True)
        if line != original
    )
    assert dropped == [
        "(json.dumps(record)),",
        "(other.send())",
        "(parser.add_argument('--b'))",
        "(tqdm(steps)),",
    ]


def test_a_dataclass_field_default_is_the_default_of_its_keyword() -> None:
    index_source = """\
    @dataclass
    class Settings:
        batch_size: int = 8
        name: str = field(default="x")
    """
    source = """\
    def make():
        return Settings(batch_size=1, name="y")
    """
    _same(
        _mutants(source, "keyword_default", (index_source,)),
        [
            """\
            def make():
                return (Settings(batch_size=8, name='y'))
            """
        ],
    )


def test_a_unit_factor_is_dropped_swapped_and_a_unit_named_value_scaled() -> None:
    source = """\
    def memory(available_kb, timeout_s):
        return available_kb * 1024, timeout_s
    """
    _same(
        _mutants(source, "unit_factor"),
        [
            """\
            def memory(available_kb, timeout_s):
                return (available_kb), timeout_s
            """,
            """\
            def memory(available_kb, timeout_s):
                return available_kb * 1000, timeout_s
            """,
            """\
            def memory(available_kb, timeout_s):
                return available_kb * 1024, (timeout_s * 1000)
            """,
        ],
    )


def test_a_divisor_of_two_to_the_twenty_is_dropped_and_a_plain_number_is_left() -> None:
    source = """\
    def mib(size):
        return size / 2 ** 20 + 7 * size
    """
    _same(
        _mutants(source, "unit_factor"),
        [
            """\
            def mib(size):
                return (size) + 7 * size
            """
        ],
    )


def test_a_sort_and_a_candidate_list_are_reversed_and_max_becomes_min() -> None:
    source = """\
    ORDER = ["long", "short"]

    def pick(items):
        for marker in ("</think>", "<answer>"):
            items.sort(key=len, reverse=True)
        return max(items, key=len)
    """
    _same(
        _mutants(source, "reverse_order"),
        [
            """\
            ORDER = (['short', 'long'])

            def pick(items):
                for marker in ("</think>", "<answer>"):
                    items.sort(key=len, reverse=True)
                return max(items, key=len)
            """,
            """\
            ORDER = ["long", "short"]

            def pick(items):
                for marker in (('<answer>', '</think>')):
                    items.sort(key=len, reverse=True)
                return max(items, key=len)
            """,
            """\
            ORDER = ["long", "short"]

            def pick(items):
                for marker in ("</think>", "<answer>"):
                    (items.sort(key=len, reverse=not True))
                return max(items, key=len)
            """,
            """\
            ORDER = ["long", "short"]

            def pick(items):
                for marker in ("</think>", "<answer>"):
                    items.sort(key=len, reverse=True)
                return (min(items, key=len))
            """,
        ],
    )


def test_the_order_of_all_is_no_candidate_list() -> None:
    # __all__ orders only `from module import *`: reversing it plants no bug (a candidate list still is one)
    assert _mutants('__all__ = ["a", "b"]\nORDER = ["a", "b"]\n', "reverse_order") == [
        "__all__ = [\"a\", \"b\"]\nORDER = (['b', 'a'])\n"
    ]


def test_sorted_without_reverse_gets_reverse() -> None:
    assert _mutants("x = sorted(y)\n", "reverse_order") == ["x = (sorted(y, reverse=True))\n"]


def test_state_that_outlives_the_call_is_dropped_and_local_state_is_not() -> None:
    source = """\
    import os

    SEEN = {}
    COUNT = 0

    class Guard:
        def __init__(self):
            self.interrupted = False

        def handle(self, signum):
            self.interrupted = True
            SEEN[signum] = 1
            os.environ["CAPCAL_STOP"] = "1"
            local = {}
            local["x"] = 1

    def bump():
        global COUNT
        COUNT += 1
        SEEN.clear()
    """
    found = _mutants(source, "drop_state")
    dropped = sorted(
        line.strip()
        for mutant in found
        for line in set(textwrap.dedent(source).splitlines()) - set(mutant.splitlines())
    )
    assert dropped == sorted(
        [
            "self.interrupted = True",
            "SEEN[signum] = 1",
            'os.environ["CAPCAL_STOP"] = "1"',
            "COUNT += 1",
            "SEEN.clear()",
        ]
    )
    assert all(mutant.count("\n") == textwrap.dedent(source).count("\n") for mutant in found)
    assert textwrap.dedent(source).replace("    SEEN.clear()", "    pass") in found


def test_a_parameter_shadowing_module_state_is_not_state() -> None:
    source = """\
    CACHE = {}

    def fill(CACHE):
        CACHE["a"] = 1
    """
    assert _mutants(source, "drop_state") == []


def test_a_boundary_turns_strict_and_back_one_operator_of_a_chain_at_a_time() -> None:
    source = """\
    def inside(k, n):
        return 0 < k <= n and n == 3
    """
    _same(
        _mutants(source, "boundary"),
        [
            """\
            def inside(k, n):
                return (0 <= k <= n) and n == 3
            """,
            """\
            def inside(k, n):
                return (0 < k < n) and n == 3
            """,
        ],
    )


def test_annotations_f_strings_and_no_mutate_lines_are_left() -> None:
    source = """\
    def f(record: dict["a", "b"], n) -> str:
        if n < 1:  # pragma: no mutate
            return f"{record['a']} {n > 2}"
        return record["a"] + record["b"]
    """
    found = [mutant for operator in ("sibling_key", "boundary") for mutant in _mutants(source, operator)]
    _same(
        found,
        [
            source.replace('record["a"] +', "record['b'] +"),
            source.replace('+ record["b"]', "+ record['a']"),
        ],
    )


def test_a_mutant_names_its_module_package_and_place() -> None:
    mutant = Mutant("analysis/report/__init__.py", "boundary", 3, 4, "< -> <= (0)", "")
    assert (mutant.module, mutant.package) == ("analysis.report", "analysis")
    assert mutant.name == "analysis.report:3:4:boundary:< -> <= (0)"


def test_the_draw_is_uniform_and_fixed_by_the_seed() -> None:
    mutants = [Mutant(f"analysis/m{i:03d}.py", "boundary", 1, 0, "", "") for i in range(200)]
    first, again = draw(mutants, 50, seed=7), draw(list(reversed(mutants)), 50, seed=7)
    assert first == again and len(set(first)) == 50
    # each of 200 mutants drawn with probability 1/4 in a sample of 50: over 400 seeds, counts near 100
    counts = [0] * 200
    for seed in range(400):
        for mutant in draw(mutants, 50, seed):
            counts[int(mutant.path[10:13])] += 1
    assert 55 < min(counts) and max(counts) < 145  # binomial(400, 1/4): sd 8.7, so 5 sd either side


def test_named_mutants_are_found_after_lines_moved_and_only_those(tmp_path) -> None:
    """``--only``'s selection: a survivors file's names (its diff lines skipped) pick those mutants, also when
    lines were added above one since (its line number differs), and no other mutant of the same place; the
    same change on two lines (a dropped ``flush=``) is picked by its exact name only."""
    flush = "keyword_default:print(... flush= dropped)"
    mutants = [
        Mutant("analysis/a.py", "boundary", 10, 4, "< -> <= (0)", ""),
        Mutant("analysis/a.py", "boundary", 10, 4, "< -> <= (1)", ""),  # the same place, another mutant
        Mutant("analysis/b.py", "sibling_key", 3, 8, "x['a'] -> x['b']", ""),
        Mutant("capcal_models/c.py", "drop_state", 7, 0, "self.x = 1 dropped", ""),
        Mutant("analysis/d.py", "keyword_default", 20, 4, "print(... flush= dropped)", ""),
        Mutant("analysis/d.py", "keyword_default", 21, 4, "print(... flush= dropped)", ""),
    ]
    survivors = tmp_path / "survivors.txt"
    survivors.write_text(
        "# analysis.x:1:2:boundary:a comment, not a name\n"
        "analysis.a:12:4:boundary:< -> <= (0)\n--- analysis/a.py\n+++ analysis/a.py\n-    if a < b:\n\n"
        "capcal_models.c:7:0:drop_state:self.x = 1 dropped\n"
        f"analysis.d:21:4:{flush}\nanalysis.d:30:4:{flush}\n",  # line 30: no exact match, two loose ones
        encoding="utf-8",
    )
    assert sampled_names(survivors) == [
        "analysis.a:12:4:boundary:< -> <= (0)",
        "capcal_models.c:7:0:drop_state:self.x = 1 dropped",
        f"analysis.d:21:4:{flush}",
        f"analysis.d:30:4:{flush}",
    ]  # no comment line, no diff line
    found = named(list(reversed(mutants)), sampled_names(survivors))
    assert found == [mutants[0], mutants[5], mutants[3]]  # in name order


def test_the_wilson_interval_matches_the_formula_worked_by_hand() -> None:
    # 8 of 10, z = 1.96: centre (0.8 + 0.19208) / 1.38416, half-width 1.96 sqrt(0.016 + 0.0096040) / 1.38416
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.49016, abs=2e-5)
    assert high == pytest.approx(0.94332, abs=2e-5)
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0)
    assert all(math.isnan(value) for value in wilson_interval(0, 0))


def test_verdicts_and_the_score_count_a_timeout_as_killed() -> None:
    assert [verdict(code) for code in (0, 1, 2, 5, None, 3)] == [
        "survived",
        "killed",
        "killed",
        "no tests",
        "timeout",
        "error",
    ]
    results = [
        {"package": "analysis", "verdict": v} for v in ("killed", "killed", "timeout", "survived", "no tests")
    ]
    row = score_table(results)["analysis"]
    assert (row["killed"], row["timeout"], row["survived"], row["no tests"]) == (3, 1, 1, 1)
    assert row["score"] == pytest.approx(3 / 4)


def test_the_covering_tests_of_a_module_are_the_test_files_that_import_it() -> None:
    # test_records.py names it on an ``# exercises:`` line (its record type is read there by name)
    assert covering_test_files("capcal_models.batch_size") == [
        "tests/capcal_models/test_batch_size.py",
        "tests/test_records.py",
    ]
    assert "tests/test_mutation_operators.py" not in covering_test_files("analysis.leaderboard")
    # capcal-hf's attention (kv_cache) is reached only through the decode step's tests: declared there
    assert "tests/capcal_models/test_decode_step.py" in covering_test_files("capcal_models.kv_cache")


def test_a_module_is_covered_by_the_tests_of_its_package_too_but_not_of_the_top_level_one(
    tmp_path: Path,
) -> None:
    (tmp_path / "tests").mkdir()
    files = {
        "test_direct.py": "from pkg.sub.mod import f\n",
        "test_package.py": "from pkg.sub import load\n",  # load reads pkg.sub.mod's records
        "test_top.py": "import pkg\n",
        "test_sibling.py": "from pkg.other import g\n",
    }
    for name, text in files.items():
        (tmp_path / "tests" / name).write_text(text)
    assert covering_test_files("pkg.sub.mod", tmp_path) == ["tests/test_direct.py", "tests/test_package.py"]
    # a module of a top-level package: its own importers only
    assert covering_test_files("pkg.other", tmp_path) == ["tests/test_sibling.py"]


def test_a_test_file_declares_the_modules_it_exercises_through_others(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("# exercises: pkg.inner, pkg.other\nimport pkg.outer\n")
    (tmp_path / "tests" / "test_b.py").write_text("x = 1  # exercises: pkg.inner\n")  # not a line of its own
    (tmp_path / "tests" / "test_c.py").write_text("# exercises: pkg.inner_part\n")  # another module
    assert covering_test_files("pkg.inner", tmp_path) == ["tests/test_a.py"]


FIRST_LOOK = "def first_look(k, n):\n    return k < n\n"


def _first_look_repository(root: Path) -> str:
    """A git repository at ``root`` with ``pkg/look.py`` (``first_look``, one boundary) and an empty
    ``tests/``; returns the module's text."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "pkg").mkdir()
    (root / "tests").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "look.py").write_text(FIRST_LOOK)
    return FIRST_LOOK


def test_a_mutant_is_run_in_a_copy_killed_by_a_failing_test_and_survives_a_blind_one(tmp_path: Path) -> None:
    """The driver's own loop on a two-file repository: the copy holds the untracked files, a boundary mutant
    fails the test that pins the boundary, passes one that does not, and the real file is never touched."""
    module = _first_look_repository(tmp_path)
    (tmp_path / "tests" / "test_pinned.py").write_text(
        "from pkg.look import first_look\n\ndef test_pinned():\n    assert not first_look(3, 3)\n"
    )
    (tmp_path / "tests" / "test_blind.py").write_text(
        "from pkg.look import first_look\n\ndef test_blind():\n    assert first_look(1, 3)\n"
    )
    assert covering_test_files("pkg.look", tmp_path) == ["tests/test_blind.py", "tests/test_pinned.py"]
    (mutant,) = mutants_of_source(module, "pkg/look.py", operators=["boundary"])
    copy = copy_repository(tmp_path)
    try:
        assert (copy / "pkg" / "look.py").read_text() == module
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=copy, capture_output=True, text=True)
        assert head.returncode == 0  # a work tree of its own, committed (lm-eval's git call finds it)
        (copy / "pkg" / "look.py").write_text(mutant.source)
        assert verdict(run_tests(copy, ["tests/test_pinned.py"], timeout=120)[0]) == "killed"
        assert verdict(run_tests(copy, ["tests/test_blind.py"], timeout=120)[0]) == "survived"
        assert verdict(run_tests(copy, ["tests/test_blind.py"], timeout=0.01)[0]) == "timeout"
    finally:
        shutil.rmtree(copy.parent)
    assert (tmp_path / "pkg" / "look.py").read_text() == module


def test_a_mutant_is_shown_as_the_diff_of_its_one_line(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("a = 1\nb = x < y\nc = 3\n")
    (mutant,) = mutants_of_source("a = 1\nb = x < y\nc = 3\n", "pkg/m.py", operators=["boundary"])
    assert diff(mutant, tmp_path) == (
        "--- pkg/m.py\n+++ pkg/m.py\n@@ -1,3 +1,3 @@\n a = 1\n-b = x < y\n+b = (x <= y)\n c = 3\n"
    )


def test_an_earlier_samples_mutants_are_left_out_of_the_draw_after_lines_moved(tmp_path: Path) -> None:
    log = tmp_path / "seed0.jsonl"
    log.write_text('{"name": "analysis.m:12:4:boundary:< -> <= (0)", "verdict": "killed"}\n')
    survivors = tmp_path / "survivors.txt"
    survivors.write_text(
        "capcal_models.hf:3:0:sibling_key:self.a -> self.b\n--- capcal_models/hf.py\n+++ x\n@@ -1 +1 @@\n"
    )
    names = sampled_names(log) + sampled_names(survivors)
    assert names == [
        "analysis.m:12:4:boundary:< -> <= (0)",
        "capcal_models.hf:3:0:sibling_key:self.a -> self.b",
    ]
    # the same mutant two lines lower is the same mutant; another column or description is another one
    excluded = {loose_name(name) for name in names}
    assert loose_name("analysis.m:14:4:boundary:< -> <= (0)") in excluded
    assert loose_name("analysis.m:12:8:boundary:< -> <= (0)") not in excluded
    assert loose_name("analysis.m:12:4:boundary:<= -> < (0)") not in excluded


def test_the_failing_tests_are_read_from_pytests_short_summary() -> None:
    report = (
        "..F\n=========================== short test summary info ============================\n"
        "FAILED tests/a/test_x.py::test_one[1 of 2] - AssertionError: assert 1 == 2\n"
        "ERROR tests/a/test_y.py - ImportError: cannot import name 'z'\n"
        "FAILED tests/a/test_x.py::test_two\n"
        "!!!!!!!!!!!!!!!!!!!!!!!!!! stopping after 1 failures !!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
    )
    assert failed_tests(report) == [
        "tests/a/test_x.py::test_one[1 of 2]",
        "tests/a/test_y.py",
        "tests/a/test_x.py::test_two",
    ]


def test_the_test_files_named_after_the_module_run_first() -> None:
    files = [
        "tests/analysis/test_cli.py",
        "tests/analysis/test_leaderboard.py",
        "tests/test_leaderboard_x.py",
    ]
    assert ordered_test_files("analysis.leaderboard", files) == (
        ["tests/analysis/test_leaderboard.py", "tests/test_leaderboard_x.py"],
        ["tests/analysis/test_cli.py"],
    )
    assert ordered_test_files("analysis.report", files) == (files, [])
    assert ordered_test_files("analysis.cli", ["tests/analysis/test_cli.py"]) == (
        ["tests/analysis/test_cli.py"],
        [],
    )


def test_a_verdict_is_the_mutants_own_a_kill_checked_without_it_a_survivor_against_every_file(
    tmp_path: Path,
) -> None:
    """:func:`judge` on a small repository: a kill names the test that fails with the mutant and passes
    without it; a test that fails without the mutant too gives an error, not a kill; a survivor passed every
    covering file; a file that no longer imports is a kill; a mutant that loops is a timeout; a file whose
    tests are all slow gives no tests. The real file is restored after each."""
    module = _first_look_repository(tmp_path)
    header = "import pytest\nfrom pkg.look import first_look\n\n"
    tests = {
        "test_look.py": "def test_pinned():\n    assert not first_look(3, 3)\n",
        "test_blind.py": "def test_blind():\n    assert first_look(1, 3)\n",
        "test_broken.py": "def test_ok():\n    assert first_look(1, 3)\n\ndef test_broken():\n    assert 0\n",
        "test_slow.py": "@pytest.mark.slow\ndef test_slow():\n    assert not first_look(3, 3)\n",
    }
    for name, text in tests.items():
        (tmp_path / "tests" / name).write_text(header + text)
    (boundary,) = mutants_of_source(module, "pkg/look.py", operators=["boundary"])
    copy = copy_repository(tmp_path)

    def verdict_of(source: str, files: list[str], **options: float) -> dict:
        record = judge(copy, "pkg/look.py", source, files, None, module="pkg.look", **options)
        assert (copy / "pkg" / "look.py").read_text() == module
        return record

    try:
        killed = verdict_of(boundary.source, ["tests/test_blind.py", "tests/test_look.py"])
        assert (killed["verdict"], killed["by"]) == ("killed", ["tests/test_look.py::test_pinned"])
        assert verdict_of(boundary.source, ["tests/test_blind.py"])["verdict"] == "survived"
        error = verdict_of(boundary.source, ["tests/test_broken.py"])
        assert error["verdict"] == "error" and "tests/test_broken.py::test_broken" in error["why"]
        broken_import = verdict_of("raise ImportError('planted')\n", ["tests/test_look.py"])
        assert (broken_import["verdict"], broken_import["by"]) == ("killed", ["tests/test_look.py"])
        assert verdict_of(boundary.source, ["tests/test_slow.py"])["verdict"] == "no tests"
        loop = "def first_look(k, n):\n    while True:\n        pass\n"
        assert verdict_of(loop, ["tests/test_look.py"], cap=4.0, slack=0.0)["verdict"] == "timeout"
    finally:
        shutil.rmtree(copy.parent)
    assert (tmp_path / "pkg" / "look.py").read_text() == module
