"""Paths a run records (``activations=DIR``, ``samples_file``), made independent of the working folder.

A run made as ``capcal eval ... --model_args activations=acts/ --output_path out/`` used to record ``acts/``,
relative to the folder it was started from; a report made from another folder then read another (or no)
``acts/``. Two sides:

- at record time, ``absolute_recorded_paths`` turns the path-valued arguments (``RECORDED_PATH_KEYS``) into
  absolute paths before lm-eval records them in the results file (``config.model_args``, each task's
  ``metadata``);
- when reading an earlier run that recorded a relative path, ``resolve_recorded_path`` looks for it relative
  to the folders that hold the run's results file, nearest first (``out/MODEL/``, ``out/``, the folder
  ``out/`` is in, ...; the run was started from one of them), then relative to the current folder, and says
  which folder it used, or that none holds it;
- an absolute recorded path that no longer exists (the run's folder was moved: ``mv we we_moved``, ``out/``
  and ``acts/`` together) is looked for the same way by its tail: the recorded path less its first parts
  (``/old/we/acts`` -> ``we/acts``, then ``acts``), longest tail first, next to each folder that holds the
  results file, nearest first. What is read that way is checked by its reader (the activations' model
  fingerprint and question ids), and the note says where it was found.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["RECORDED_PATH_KEYS", "ResolvedPath", "absolute_recorded_paths", "resolve_recorded_path"]

# model arguments and task metadata whose value is a local path that later commands read again
RECORDED_PATH_KEYS = ("activations", "samples_file")


def absolute_recorded_paths(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` with each string value of ``RECORDED_PATH_KEYS`` made absolute (``~`` expanded,
    resolved against the current folder); the other values unchanged."""
    return {
        key: str(Path(value).expanduser().resolve())
        if key in RECORDED_PATH_KEYS and isinstance(value, str) and value
        else value
        for key, value in arguments.items()
    }


@dataclass(frozen=True)
class ResolvedPath:
    """A recorded path and where it was found: ``path`` (absolute) or None when no candidate exists;
    ``note`` says which folder a relative path was resolved against, or where it was looked for."""

    recorded: str
    path: Path | None
    note: str | None


def resolve_recorded_path(recorded: str, recorded_in: str | Path, what: str = "path") -> ResolvedPath:
    """Find ``recorded`` (a path written into the file ``recorded_in``): an absolute path as it is, else
    (moved) its tails against each folder holding ``recorded_in`` (see the module); a relative one against
    each folder holding ``recorded_in``, nearest first, then the current folder.
    ``note`` is None for an absolute path that exists, else one line naming the folder used (or, when none
    holds it, the folders tried, so ``path`` is None)."""
    given = Path(recorded).expanduser()
    source = Path(recorded_in).expanduser().resolve()
    if given.is_absolute():
        if given.exists():
            return ResolvedPath(recorded, given, None)
        tails = [Path(*given.parts[start:]) for start in range(1, len(given.parts))]
        for folder in source.parents[:-1]:  # not the file system's root: a bare name there is no evidence
            for tail in tails:
                candidate = folder / tail
                if candidate.exists():
                    note = (
                        f"{what} {recorded} recorded in {source.name}: no such file or folder (was the run's "
                        f"folder moved?); read from {candidate}, its tail {tail} next to the run's folder "
                        f"{folder}"
                    )
                    return ResolvedPath(recorded, candidate, note)
        shortest = tails[-1] if tails else recorded
        note = (
            f"{what} {recorded} recorded in {recorded_in}: no such file or folder, nor any tail of it "
            f"(down to {shortest}) next to the run's folders ({source.parent} and above)"
        )
        return ResolvedPath(recorded, None, note)
    for folder in source.parents:
        candidate = folder / given
        if candidate.exists():
            note = (
                f"{what} {recorded} (relative) recorded in {source.name}: read from {candidate}, relative "
                f"to the run's folder {folder}"
            )
            return ResolvedPath(recorded, candidate, note)
    here = Path.cwd() / given
    if here.exists():
        note = (
            f"{what} {recorded} (relative) recorded in {source}: not found next to the run; read from "
            f"{here}, relative to the current folder"
        )
        return ResolvedPath(recorded, here.resolve(), note)
    note = (
        f"{what} {recorded} (relative) recorded in {source}: not found relative to the run's folders "
        f"({source.parent} and above) or the current folder"
    )
    return ResolvedPath(recorded, None, note)
