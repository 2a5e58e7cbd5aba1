"""Running lm-eval with capcal's tasks and models: the library behind ``capcal eval``.

``capcal eval`` is a drop-in for ``lm_eval``: the same flags, plus
``--repeats K`` (k sampled responses per question for capcal's sampling tasks) and ``--data_dir DIR`` (read
task data from a local folder, or ``bundled`` for the data shipped with capcal, instead of the hub).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from capcal_tasks.data_sources import DATA_DIR_ENV

__all__ = ["capcal_task_manager", "data_dir_setting", "evaluate", "run_lm_eval"]


@contextlib.contextmanager
def data_dir_setting(data_dir: str | Path | None) -> Iterator[None]:
    """Within the block, tasks read local data from ``data_dir`` (None leaves the current setting)."""
    if data_dir is None:
        yield
        return
    value = str(data_dir) if str(data_dir) == "bundled" else str(Path(data_dir).expanduser().resolve())
    previous = os.environ.get(DATA_DIR_ENV)
    os.environ[DATA_DIR_ENV] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(DATA_DIR_ENV, None)
        else:
            os.environ[DATA_DIR_ENV] = previous


@contextlib.contextmanager
def capcal_task_manager(repeats: int | None) -> Iterator[None]:
    """Within the block, lm-eval's command line builds a ``CapcalTaskManager`` (capcal's tasks on the include
    path, ``repeats`` applied to capcal's sampling tasks) wherever it would build its own TaskManager."""
    import lm_eval.tasks

    from capcal_tasks.task_manager import CapcalTaskManager

    class RunTaskManager(CapcalTaskManager):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("repeats", repeats)
            super().__init__(*args, **kwargs)

    original = lm_eval.tasks.TaskManager
    lm_eval.tasks.TaskManager = RunTaskManager
    try:
        yield
    finally:
        lm_eval.tasks.TaskManager = original


def _capcal_arguments(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="capcal eval", add_help=False)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--data_dir", default=None)
    own, rest = parser.parse_known_args(list(argv))
    if own.repeats is not None and own.repeats < 1:
        parser.error(f"--repeats must be a positive integer, got {own.repeats}")
    return own, rest


def run_lm_eval(argv: Sequence[str]) -> None:
    """Run lm-eval's command line (``lm_eval ...`` flags) with capcal's tasks and models available.

    ``--repeats K`` and ``--data_dir DIR`` are taken out of ``argv`` and applied; the rest goes to lm-eval.
    """
    own, rest = _capcal_arguments(argv)
    if "-h" in rest or "--help" in rest:
        print(
            "capcal eval: lm_eval's flags (below), plus\n"
            "  --repeats K      k sampled responses per question for capcal's sampling tasks\n"
            "  --data_dir DIR   read task data from DIR (laid out like capcal's bundled data) or 'bundled'\n"
        )
    from capcal_models.registry import register_models

    register_models()
    from lm_eval.__main__ import cli_evaluate

    saved_argv = sys.argv
    sys.argv = ["lm_eval", *rest]
    try:
        with data_dir_setting(own.data_dir), capcal_task_manager(own.repeats):
            cli_evaluate()
    finally:
        sys.argv = saved_argv


def evaluate(
    model: str,
    tasks: str | list[str],
    model_args: str | dict | None = None,
    repeats: int | None = None,
    data_dir: str | Path | None = None,
    include_path: str | Path | list[str | Path] | None = None,
    metadata: dict | None = None,
    **simple_evaluate_kwargs,
) -> dict:
    """``lm_eval.simple_evaluate`` with capcal's tasks and models, ``repeats`` and ``data_dir``.

    ``metadata`` reaches every task's config (as ``--metadata`` does), e.g. ``{"samples_file": ...}`` for the
    response-level confidence tasks. Returns lm-eval's results dictionary (with ``samples`` when
    ``log_samples=True``).
    """
    from lm_eval import simple_evaluate

    from capcal_models.registry import register_models
    from capcal_tasks.task_manager import CapcalTaskManager

    register_models()
    with data_dir_setting(data_dir):
        task_manager = CapcalTaskManager(include_path=include_path, repeats=repeats, metadata=metadata)
        return simple_evaluate(
            model=model,
            model_args=model_args,
            tasks=tasks if isinstance(tasks, list) else tasks.split(","),
            task_manager=task_manager,
            **simple_evaluate_kwargs,
        )
