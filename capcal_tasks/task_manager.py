"""An lm-eval TaskManager that always sees capcal's tasks and can set ``repeats`` for the whole run.

lm-eval 0.4.13 cannot set ``repeats`` from its command line; ``task.set_config("repeats", k)`` on a loaded
task works, so ``CapcalTaskManager.load`` applies it to every capcal sampling task.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lm_eval.tasks import TaskManager

from capcal_tasks import tasks_dir
from capcal_tasks.sampling import is_sampling_config

__all__ = ["CapcalTaskManager", "is_sampling_task"]


def is_sampling_task(task) -> bool:
    """Whether a loaded lm-eval task is one of capcal's repeated-sampling tasks."""
    return is_sampling_config({"metadata": task.config.metadata})


class CapcalTaskManager(TaskManager):
    """lm-eval's TaskManager with capcal's task folder on the include path and an optional ``repeats``."""

    def __init__(
        self,
        include_path: str | Path | Sequence[str | Path] | None = None,
        repeats: int | None = None,
        **kwargs,
    ) -> None:
        if repeats is not None and (isinstance(repeats, bool) or int(repeats) != repeats or repeats < 1):
            raise ValueError(f"repeats must be a positive integer, got {repeats!r}")
        extra = (
            []
            if include_path is None
            else [include_path]
            if isinstance(include_path, (str, Path))
            else list(include_path)
        )
        # capcal first so that a user's own include path can override a capcal task.
        super().__init__(include_path=[str(tasks_dir()), *map(str, extra)], **kwargs)
        self.repeats = None if repeats is None else int(repeats)

    def load(self, task_list):
        loaded = super().load(task_list)
        if self.repeats is not None:
            for task in loaded["tasks"].values():
                if is_sampling_task(task):
                    task.set_config("repeats", self.repeats)
        return loaded
