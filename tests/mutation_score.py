"""The mutation score per package and module, equivalent mutants left out (tests/README.md, "Mutation
testing").

    mutmut run --max-children 2 && python tests/mutation_score.py          # or: make mutation

reads ``mutmut results --all true`` (run from the repository root, after ``mutmut run``),
``tests/mutation_equivalents.txt``: one surviving mutant per line, ``NAME  reason``, for the mutants that
change no behaviour a caller can see (each line says why), and ``tests/mutation_killed_outside.txt``: one
line ``NAME  TEST_ID  why``, for mutants of code that runs only in a worker subprocess (mutmut's coverage
pass cannot see it, so it reports "no tests") and that the named test kills with the mutant switched on.
Score = killed / (mutants run - equivalent), where killed counts mutmut's "killed" and "timeout", and a "no
tests" mutant listed as killed outside; the run excludes "not checked" and "skipped". Both lists are checked
against the run: a listed mutant that no longer exists or was killed is reported, so they cannot go stale
silently; ``--verify-outside`` re-runs each listed test in ``mutants/`` with its mutant on and without,
and names any listed mutant the test does not kill.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EQUIVALENTS = REPO / "tests" / "mutation_equivalents.txt"
KILLED_OUTSIDE = REPO / "tests" / "mutation_killed_outside.txt"
KILLED = ("killed", "timeout")
NOT_RUN = ("not checked", "skipped", "check was interrupted by user")


def read_statuses(lines: Iterable[str]) -> dict[str, str]:
    """``{mutant name: status}`` from ``mutmut results --all true``'s lines (``    NAME: status``)."""
    statuses = {}
    for line in lines:
        name, sep, status = line.strip().partition(": ")
        if sep and "__mutmut_" in name:
            statuses[name] = status.strip()
    return statuses


def read_equivalents(path: Path = EQUIVALENTS) -> dict[str, str]:
    """``{mutant name: reason}``; blank lines and ``#`` comments skipped; a line without a reason is an error
    naming the file and line."""
    equivalents = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, _, reason = line.strip().partition(" ")
        if not reason.strip():
            raise ValueError(f"{path}:{number}: {name} has no reason (write NAME, then why it is equivalent)")
        equivalents[name] = reason.strip()
    return equivalents


def read_killed_outside(path: Path = KILLED_OUTSIDE) -> dict[str, str]:
    """``{mutant name: pytest node id}`` from ``NAME  TEST_ID  why`` lines; blank lines and ``#`` comments
    skipped; a line without a test id or a reason is an error naming the file and line."""
    killed = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split(maxsplit=2)
        if len(fields) < 3 or "::" not in fields[1]:
            raise ValueError(
                f"{path}:{number}: write NAME, the pytest node id of the test that kills it, then why mutmut "
                "cannot see that test"
            )
        killed[fields[0]] = fields[1]
    return killed


def module_of(mutant: str) -> str:
    """The module of a mutant name: ``capcal_metrics.ece.x_ece__mutmut_3`` -> ``capcal_metrics.ece``."""
    return mutant.split(".x", 1)[0]


def scores(
    statuses: dict[str, str], equivalents: dict[str, str], killed_outside: dict[str, str] | None = None
) -> dict[str, Counter]:
    """Counts per module and per package (top-level name): run, killed, equivalent, survived. A "no tests"
    mutant in ``killed_outside`` counts as killed."""
    outside = killed_outside or {}
    table: dict[str, Counter] = defaultdict(Counter)
    for name, status in statuses.items():
        if status in NOT_RUN:
            continue
        module = module_of(name)
        for key in {module, module.split(".")[0]}:
            counts = table[key]
            counts["run"] += 1
            if status in KILLED or (status == "no tests" and name in outside):
                counts["killed"] += 1
            elif name in equivalents:
                counts["equivalent"] += 1
            else:
                counts["survived"] += 1
    return dict(table)


def stale_equivalents(statuses: dict[str, str], equivalents: dict[str, str]) -> list[str]:
    """Listed equivalents of the modules this run covers that are not among its survivors (renamed, removed,
    or now killed)."""
    covered = {module_of(name) for name in statuses}
    return sorted(
        name
        for name in equivalents
        if module_of(name) in covered and statuses.get(name) not in ("survived", "no tests", "suspicious")
    )


def stale_killed_outside(statuses: dict[str, str], killed_outside: dict[str, str]) -> list[str]:
    """Listed mutants killed outside mutmut's sight, of the modules this run covers, that mutmut no longer
    reports as "no tests" (renamed, removed, or now seen by a test)."""
    covered = {module_of(name) for name in statuses}
    return sorted(
        name for name in killed_outside if module_of(name) in covered and statuses.get(name) != "no tests"
    )


def verify_killed_outside(killed_outside: dict[str, str], mutants: Path = REPO / "mutants") -> list[str]:
    """The listed mutants whose test does not fail with the mutant switched on (``MUTANT_UNDER_TEST``, in the
    tree ``mutmut run`` generated), or fails without it: empty when every listed kill holds."""
    wrong = []
    for name, test in sorted(killed_outside.items()):
        runs = {}
        for mutant in (name, ""):
            environment = {**os.environ, "MUTANT_UNDER_TEST": mutant}
            command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:xdist"]
            finished = subprocess.run([*command, test], cwd=mutants, env=environment, capture_output=True)
            runs[mutant] = finished.returncode
        if runs[name] == 0 or runs[""] != 0:
            wrong.append(f"{name} ({test}: exit {runs[name]} with the mutant, {runs['']} without)")
    return wrong


def markdown(table: dict[str, Counter]) -> str:
    """The table for tests/README.md: packages in bold, their modules below."""
    lines = [
        "| module | mutants run | killed | equivalent | survived | score |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for key in sorted(table, key=lambda k: (k.split(".")[0], "." in k, k)):
        c = table[key]
        live = c["run"] - c["equivalent"]
        score = f"{100 * c['killed'] / live:.1f}%" if live else "-"
        label = f"**{key}**" if "." not in key else f"`{key}`"
        lines.append(
            f"| {label} | {c['run']} | {c['killed']} | {c['equivalent']} | {c['survived']} | {score} |"
        )
    return "\n".join(lines)


def main() -> int:
    results = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        capture_output=True,
        text=True,
        check=True,
    )
    statuses = read_statuses(results.stdout.splitlines())
    equivalents, outside = read_equivalents(), read_killed_outside()
    print(markdown(scores(statuses, equivalents, outside)))
    stale = stale_equivalents(statuses, equivalents)
    if stale:
        print(f"\n{len(stale)} listed equivalent(s) are not survivors of this run: {', '.join(stale)}")
    stale = stale_killed_outside(statuses, outside)
    if stale:
        print(f"\n{len(stale)} listed kill(s) outside mutmut are not 'no tests' here: {', '.join(stale)}")
    if "--verify-outside" in sys.argv[1:]:
        wrong = verify_killed_outside(outside)
        if wrong:
            print("\n".join(["", f"{len(wrong)} listed kill(s) outside mutmut do not hold:", *wrong]))
        return 1 if wrong else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
