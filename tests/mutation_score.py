"""The mutation score per package and module, equivalent mutants left out (tests/README.md, "Mutation
testing").

    mutmut run --max-children 2 && python tests/mutation_score.py          # or: make mutation
    python tests/mutation_score.py --draw 500 --seed 1 > sample.txt        # a sample, when hours are too long
    mutmut run --max-children 2 $(cat sample.txt) && python tests/mutation_score.py --sample sample.txt

reads ``mutmut results --all true`` (run from the repository root, after ``mutmut run``),
``tests/mutation_equivalents.txt``: one surviving mutant per line, ``NAME  reason``, for the mutants that
change no behaviour a caller can see (each line says why), and ``tests/mutation_killed_outside.txt``: one
line ``NAME  TEST_ID  why``, for mutants of code that runs only in a worker subprocess (mutmut's coverage
pass cannot see it, so it reports "no tests") and that the named test kills with the mutant switched on.
Score = killed / (mutants run - equivalent), where killed counts mutmut's "killed", a "timeout" not listed as
equivalent (one whose tests pass when re-run quietly is listed), and a "no tests" mutant listed as killed
outside (:func:`outcome`); the run excludes "not checked" and "skipped". Both lists are checked
against the run: a listed mutant that no longer exists or was killed is reported, so they cannot go stale
silently; ``--verify-outside`` re-runs each listed test in ``mutants/`` with its mutant on and without,
and names any listed mutant the test does not kill. ``--sample`` estimates each package's score from a
uniform sample's verdicts, with an interval (:func:`sampled_scores`).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
EQUIVALENTS = REPO / "tests" / "mutation_equivalents.txt"
KILLED_OUTSIDE = REPO / "tests" / "mutation_killed_outside.txt"
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


def outcome(name: str, status: str, equivalents: dict[str, str], killed_outside: dict[str, str]) -> str:
    """A run mutant's outcome: "killed" (mutmut's "killed"; a "timeout" not listed as equivalent; a "no tests"
    mutant listed as killed outside), "equivalent" (a listed survivor, or a listed timeout: re-run quietly,
    its tests passed, so the timeout was a slow pass) or "survived"."""
    if status == "killed" or (status == "no tests" and name in killed_outside):
        return "killed"
    if name in equivalents:
        return "equivalent"
    return "killed" if status == "timeout" else "survived"


def scores(
    statuses: dict[str, str], equivalents: dict[str, str], killed_outside: dict[str, str] | None = None
) -> dict[str, Counter]:
    """Counts per module and per package (top-level name): run, killed, equivalent, survived, each mutant
    by :func:`outcome`."""
    outside = killed_outside or {}
    table: dict[str, Counter] = defaultdict(Counter)
    for name, status in statuses.items():
        if status in NOT_RUN:
            continue
        module = module_of(name)
        for key in {module, module.split(".")[0]}:
            counts = table[key]
            counts["run"] += 1
            counts[outcome(name, status, equivalents, outside)] += 1
    return dict(table)


def stale_equivalents(statuses: dict[str, str], equivalents: dict[str, str]) -> list[str]:
    """Listed equivalents of the modules this run covers that are not among its survivors or timeouts
    (renamed, removed, or now killed)."""
    covered = {module_of(name) for name in statuses}
    return sorted(
        name
        for name in equivalents
        if module_of(name) in covered
        and statuses.get(name) not in ("survived", "no tests", "suspicious", "timeout")
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


def stratum_of(mutant: str) -> str:
    """A mutant's second-level package or module (its stratum in a sample):
    ``analysis.report.figures.x_f__mutmut_1`` -> ``analysis.report``."""
    return ".".join(module_of(mutant).split(".")[:2])


def draw_sample(names: Iterable[str], per_package: int, seed: int, exclude: Iterable[str] = ()) -> list[str]:
    """``per_package`` mutants drawn uniformly without replacement from each package (``random.Random(seed)``,
    all of a smaller package), leaving out ``exclude`` (an earlier sample), shuffled together: run them in
    batches in this order, and every finished batch is itself a uniform sample."""
    rng = random.Random(seed)
    left_out = set(exclude)
    by_package: dict[str, list[str]] = defaultdict(list)
    for name in sorted(set(names) - left_out):
        by_package[name.split(".")[0]].append(name)
    drawn = [
        name
        for package in sorted(by_package)
        for name in rng.sample(by_package[package], min(per_package, len(by_package[package])))
    ]
    rng.shuffle(drawn)
    return drawn


def _stratified_score(weights: dict[str, int], outcomes: dict[str, np.ndarray]) -> float:
    """sum_h N_h k_h / c_h over sum_h N_h (c_h - e_h) / c_h (outcomes 1 killed, 0 survived, -1 equivalent)."""
    killed = sum(weights[h] * np.mean(outcomes[h] == 1) for h in weights)
    live = sum(weights[h] * np.mean(outcomes[h] != -1) for h in weights)
    return float(killed / live) if live else float("nan")


def sampled_scores(
    statuses: dict[str, str],
    sample: Iterable[str],
    equivalents: dict[str, str],
    killed_outside: dict[str, str] | None = None,
    draws: int = 2000,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """The score per package estimated from the checked mutants of a uniform ``sample``, post-stratified by
    sub-package (:func:`stratum_of`), with a stratified-bootstrap 95% interval.

    ``statuses`` holds every generated mutant (``mutmut results --all true``): N_h, the mutants of stratum h,
    are counted there. With c_h checked sampled mutants of h, k_h of them killed and e_h equivalent,
    ``score = sum_h N_h k_h / c_h / sum_h N_h (c_h - e_h) / c_h`` over the strata with a checked mutant; the
    share of the package's mutants in strata without one is returned as ``unmeasured``. The interval
    resamples each stratum's outcomes ``draws`` times (numpy ``default_rng(seed)``), percentiles 2.5 / 97.5.
    A checked mutant is one with a verdict (not "not checked", "skipped", interrupted)."""
    outside = killed_outside or {}
    population = Counter(stratum_of(name) for name in statuses)
    outcomes: dict[str, list[int]] = defaultdict(list)  # 1 killed, 0 survived, -1 equivalent
    for name in sample:
        status = statuses.get(name, "not checked")
        if status in NOT_RUN:
            continue
        code = {"killed": 1, "survived": 0, "equivalent": -1}[outcome(name, status, equivalents, outside)]
        outcomes[stratum_of(name)].append(code)
    rng = np.random.default_rng(seed)
    table: dict[str, dict[str, float]] = {}
    for package in sorted({stratum.split(".")[0] for stratum in population}):
        strata = [h for h in population if h.split(".")[0] == package]
        measured = [h for h in strata if outcomes[h]]
        if not measured:
            continue
        values = {h: np.asarray(outcomes[h]) for h in measured}
        weights = {h: population[h] for h in measured}
        boot = [
            _stratified_score(weights, {h: rng.choice(v, size=v.size) for h, v in values.items()})
            for _ in range(draws)
        ]
        low, high = np.nanpercentile(boot, [2.5, 97.5])
        table[package] = {
            "mutants": sum(population[h] for h in strata),
            "checked": sum(v.size for v in values.values()),
            "killed": sum(int(np.sum(v == 1)) for v in values.values()),
            "equivalent": sum(int(np.sum(v == -1)) for v in values.values()),
            "score": _stratified_score(weights, values),
            "low": float(low),
            "high": float(high),
            "unmeasured": sum(population[h] for h in strata if h not in measured)
            / sum(population[h] for h in strata),
        }
    return table


def sampled_timeouts(
    statuses: dict[str, str], sample: Iterable[str], equivalents: dict[str, str]
) -> list[str]:
    """The sampled mutants whose verdict is "timeout" and that are not listed as equivalent, in sample order:
    mutmut counts them killed, but on a loaded machine a timeout can be a slow pass, so each is re-run quietly
    before a score is quoted (listed equivalent when its tests pass with it on)."""
    return [name for name in sample if statuses.get(name) == "timeout" and name not in equivalents]


def sampled_markdown(table: dict[str, dict[str, float]]) -> str:
    """The sampled-score table for tests/README.md (unmeasured: the share of a package's mutants in
    sub-packages with no checked mutant, outside the estimate)."""
    lines = [
        "| package | mutants | checked | killed | equivalent | score (95% interval) | unmeasured |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for package, row in table.items():
        counts = " | ".join(str(row[key]) for key in ("mutants", "checked", "killed", "equivalent"))
        lines.append(
            f"| **{package}** | {counts} | "
            f"{100 * row['score']:.1f}% ({100 * row['low']:.1f}-{100 * row['high']:.1f}) | "
            f"{100 * row['unmeasured']:.1f}% |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verify-outside", action="store_true", help="re-check the kills outside mutmut")
    parser.add_argument(
        "--draw", type=int, metavar="N", help="print N mutant names per package, drawn at random"
    )
    parser.add_argument("--seed", type=int, default=0, help="the seed of --draw")
    parser.add_argument(
        "--exclude", type=Path, help="with --draw: a file of names (an earlier sample) to leave out"
    )
    parser.add_argument(
        "--sample", type=Path, help="estimate the score per package from this sample's verdicts"
    )
    arguments = parser.parse_args()
    results = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        capture_output=True,
        text=True,
        check=True,
    )
    statuses = read_statuses(results.stdout.splitlines())
    equivalents, outside = read_equivalents(), read_killed_outside()
    if arguments.draw:
        excluded = arguments.exclude.read_text(encoding="utf-8").split() if arguments.exclude else []
        print("\n".join(draw_sample(statuses, arguments.draw, arguments.seed, excluded)))
        return 0
    if arguments.sample:
        sample = arguments.sample.read_text(encoding="utf-8").split()
        print(sampled_markdown(sampled_scores(statuses, sample, equivalents, outside)))
        timed_out = sampled_timeouts(statuses, sample, equivalents)
        if timed_out:
            print(
                f"\n{len(timed_out)} sampled mutant(s) timed out, counted as killed: on a loaded machine a "
                "timeout can be a slow pass, so re-run each quietly in mutants/ with MUTANT_UNDER_TEST=NAME: "
                + ", ".join(timed_out)
            )
        return 0
    print(markdown(scores(statuses, equivalents, outside)))
    stale = stale_equivalents(statuses, equivalents)
    if stale:
        print(f"\n{len(stale)} listed equivalent(s) are not survivors of this run: {', '.join(stale)}")
    stale = stale_killed_outside(statuses, outside)
    if stale:
        print(f"\n{len(stale)} listed kill(s) outside mutmut are not 'no tests' here: {', '.join(stale)}")
    if arguments.verify_outside:
        wrong = verify_killed_outside(outside)
        if wrong:
            print("\n".join(["", f"{len(wrong)} listed kill(s) outside mutmut do not hold:", *wrong]))
        return 1 if wrong else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
