"""capcal's lm-eval tasks: one folder per benchmark (task YAMLs + their helpers) and the answer checkers.

Pass ``tasks_dir()`` to lm-eval as ``--include_path`` (``capcal tasks-dir`` prints it).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["TASKS_DIR", "tasks_dir"]

TASKS_DIR = Path(__file__).resolve().parent


def tasks_dir() -> Path:
    """The folder holding capcal's task YAMLs, for lm-eval's ``--include_path``."""
    return TASKS_DIR
