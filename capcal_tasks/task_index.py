"""lm-eval's own task index, parsed once per process, and a TaskManager's index put over it.

lm-eval's task tree (about 14,000 YAMLs: some 12 s of CPU time to parse) is indexed once per process
(``lm_eval_task_index``, a cache keyed by the folder: the installed package's files, which do not change
while a process runs). ``put_over_lm_eval_tasks`` gives a ``TaskManager`` built with
``include_defaults=False`` what ``TaskManager(include_defaults=True)`` would have: its own dict of those
entries with its include paths over them. The entries are shared: lm-eval reads them only (it deep-copies a
config, or reads its YAML again, before building a task; it adds names to a manager's own dict only).

Users: ``capcal_tasks.task_manager.CapcalTaskManager`` (``capcal eval``) and
``capcal_tasks.sampled_task.base_task_from_metadata`` (each wrapped task under stock ``lm_eval``'s
``class:`` route), which otherwise would parse the tree once per task.
"""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

from lm_eval.tasks import TaskManager
from lm_eval.tasks._index import Entry, Kind, TaskIndex

from capcal_tasks.task_names import lm_eval_tasks_dir

__all__ = ["lm_eval_task_index", "put_over_lm_eval_tasks"]


@functools.cache
def lm_eval_task_index(folder: Path) -> Mapping[str, Entry]:
    """The index of the task YAMLs under ``folder`` (lm-eval's own task tree, ``lm_eval_tasks_dir()``) as
    ``TaskManager`` builds it (``TaskIndex.build``), built once per process and folder. Read it only: its
    entries are shared by every manager of the process (module docstring)."""
    return TaskIndex.build([folder])


def put_over_lm_eval_tasks(manager: TaskManager) -> None:
    """``manager``'s index (its include paths) put over lm-eval's own task index: what
    ``TaskManager(include_defaults=True)`` builds (lm-eval 0.4.13's ``__init__``: the default folder first,
    each later path's entries over it, with its warning; then the name lists by kind), without parsing
    lm-eval's tree again."""
    index = dict(lm_eval_task_index(lm_eval_tasks_dir()))
    for name, entry in manager._index.items():
        if name in index:
            logging.getLogger(TaskIndex.__module__).warning(
                "Task '%s' from %s overrides existing task from %s",
                name,
                entry.yaml_path,
                index[name].yaml_path,
            )
        index[name] = entry
    buckets: dict[Kind, list[str]] = defaultdict(list)
    for name, entry in index.items():
        buckets[entry.kind].append(name)
    manager._index = index
    manager._all_tasks = sorted(index)
    manager._all_subtasks = sorted([*buckets[Kind.TASK], *buckets[Kind.PY_TASK]])
    manager._all_groups = sorted(buckets[Kind.GROUP])
    manager._all_tags = sorted(buckets[Kind.TAG])
