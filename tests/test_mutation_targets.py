"""The cheap mutation run's target list (tests/mutation_targets.py): the changed mutated modules, named as
mutmut names their mutants."""

from __future__ import annotations

import subprocess
import sys

from tests.mutation_targets import REPO, mutant_globs, mutated_patterns

PATTERNS = ["capcal_metrics/*", "capcal_tasks/answers/*", "capcal_tasks/records.py", "analysis/runs/*"]


def test_only_the_mutated_modules_are_named_once_each_in_mutmuts_spelling():
    paths = [
        "capcal_metrics/ece.py",
        "capcal_metrics/__init__.py",
        "capcal_tasks/answers/numeric.py",
        "capcal_tasks/records.py",
        "capcal_tasks/sampling.py",  # not mutated
        "analysis/runs/joins.py",
        "analysis/runs/joins.py",
        "analysis/report/build.py",  # not in these patterns
        "docs/methods.md",
        "tests/capcal_metrics/test_ece.py",
    ]
    assert mutant_globs(paths, PATTERNS) == [
        "analysis.runs.joins.x*",
        "capcal_metrics.ece.x*",
        "capcal_metrics.x*",  # the package's own functions, not its submodules'
        "capcal_tasks.answers.numeric.x*",
        "capcal_tasks.records.x*",
    ]
    assert mutant_globs(["capcal_tasks/sampling.py", "README.md"], PATTERNS) == []


def test_the_patterns_are_pyprojects_and_each_selects_a_file():
    patterns = mutated_patterns()
    assert "capcal_metrics/*" in patterns
    files = [str(p.relative_to(REPO)) for p in REPO.glob("*/**/*.py")]
    assert all(mutant_globs(files, [pattern]) for pattern in patterns), patterns


def test_the_script_prints_the_targets_of_a_change_and_refuses_a_bad_base(tmp_path):
    script = REPO / "tests" / "mutation_targets.py"
    head = subprocess.run(
        [sys.executable, str(script), "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    )
    changed = subprocess.run(["git", "diff", "--name-only", "HEAD"], cwd=REPO, capture_output=True, text=True)
    untracked = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard"], cwd=REPO, capture_output=True, text=True
    )
    expected = mutant_globs((changed.stdout + untracked.stdout).split(), mutated_patterns())
    assert head.stdout.split() == expected
    bad = subprocess.run(
        [sys.executable, str(script), "no-such-revision"], cwd=REPO, capture_output=True, text=True
    )
    assert bad.returncode == 2 and bad.stderr.startswith("git diff no-such-revision: ")
    assert subprocess.run([sys.executable, str(script)], capture_output=True, text=True).returncode == 2
