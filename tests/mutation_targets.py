"""The mutmut names of the mutated modules that a change touches: the cheap mutation run for a change.

    mutmut run --max-children 2 $(python tests/mutation_targets.py main)    # or: make mutation-changed

prints one glob per changed module (``capcal_metrics.ece.x*``: mutmut names a module's mutants
``module.x_function__mutmut_N`` or ``module.xǁClassǁmethod__mutmut_N``, so ``package.x*`` does not reach into
the package's submodules) among the files ``[tool.mutmut] only_mutate`` selects in ``pyproject.toml``, from
``git diff --name-only BASE`` plus untracked files; nothing when no mutated module changed
(tests/README.md, "Mutation testing").
"""

from __future__ import annotations

import fnmatch
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]


def mutated_patterns(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """The ``only_mutate`` globs of ``[tool.mutmut]``."""
    return list(tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["mutmut"]["only_mutate"])


def mutant_globs(paths: Iterable[str], patterns: Iterable[str]) -> list[str]:
    """mutmut's name glob (``package.module.x*``) of each path that ``patterns`` select, sorted, once each."""
    patterns = list(patterns)
    globs = set()
    for path in paths:
        if path.endswith(".py") and any(fnmatch.fnmatch(path, pattern) for pattern in patterns):
            module = path[: -len(".py")].replace("/", ".")
            globs.add(module.removesuffix(".__init__") + ".x*")
    return sorted(globs)


def changed_paths(base: str, repo: Path = REPO) -> list[str]:
    """Files changed since ``base`` (committed or not) and untracked files, relative to ``repo``."""

    def git(*args: str) -> list[str]:
        out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout
        return [line for line in out.splitlines() if line]

    return git("diff", "--name-only", base, "--") + git("ls-files", "--others", "--exclude-standard")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/mutation_targets.py BASE   (a git revision, e.g. main)", file=sys.stderr)
        return 2
    try:
        paths = changed_paths(argv[0])
    except subprocess.CalledProcessError as error:
        print(f"git diff {argv[0]}: {error.stderr.strip()}", file=sys.stderr)
        return 2
    print(" ".join(mutant_globs(paths, mutated_patterns())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
