"""An lm-eval TaskManager that always sees capcal's tasks, can set ``repeats`` for the whole run and checks
task names before anything is loaded.

``task_manager_for`` indexes capcal's task folder (and the user's include paths) first and lm-eval's whole
task tree only when a name is not there (``capcal_tasks.task_names`` refuses a name that occurs in no YAML at
all without any index).

lm-eval 0.4.13 cannot set ``repeats`` from its command line; ``task.set_config("repeats", k)`` on a loaded
task works, so ``CapcalTaskManager.load`` applies it to every task that samples k responses per question. A
task declares that in its YAML's ``metadata.capcal_task`` (``REPEATED_SAMPLING_KINDS``): the sampling tasks
(every request cloned k times) and the leaderboard tasks ``capcal_<dataset>_calibration``
(``capcal_tasks.calibration_task.CalibrationTask`` clones only its sampling request k times, from
``config.repeats``, and asks P(True) and the verbalized confidence once).

With ``repeats`` set, every other task named (a stock lm-eval task, or the tasks of a stock group or tag) is
sampled k times per question and scored response by response by its own metric
(``capcal_tasks.sampled_task.SampledTask``, ``stock_task_configs``); a task the static rule refuses
(``capcal_tasks.task_admission``) raises ``RefusedTask``. A name ``<stock>_calibration`` that lm-eval does not
know, where ``<stock>`` is a stock leaf task (``calibration_base``), is the calibration task of ``<stock>``
(``capcal_tasks.sampled_calibration.SampledCalibrationTask``: the sampling, P(True) and the verbalized
confidence in one task, scored as calibration columns).

lm-eval's own task tree is indexed once per process (``capcal_tasks.task_index.lm_eval_task_index``) and
every manager that includes it gets its own dict of those entries with its include paths over them, as
``TaskManager(include_defaults=True)`` builds it (``capcal_tasks.task_index.put_over_lm_eval_tasks``);
``task_configs`` returns copies of their configs.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lm_eval.tasks import TaskManager
from lm_eval.tasks._yaml_loader import load_yaml

from capcal_tasks import tasks_dir
from capcal_tasks.sampling import is_sampling_config
from capcal_tasks.task_index import lm_eval_task_index, put_over_lm_eval_tasks
from capcal_tasks.task_names import (
    GLOB_CHARACTERS,
    UnknownTaskError,
    calibration_stem,
    unknown_task_message,
    unknown_task_names,
)

__all__ = [
    "REPEATED_SAMPLING_KINDS",
    "CapcalTaskManager",
    "UnknownTaskError",
    "is_sampling_task",
    "lm_eval_task_index",
    "samples_k_responses",
    "task_manager_for",
]

#: ``metadata.capcal_task`` of the tasks that sample k (``repeats``) responses per question.
REPEATED_SAMPLING_KINDS = frozenset({"sampling", "leaderboard"})


def is_sampling_task(task) -> bool:
    """Whether a loaded lm-eval task is one of capcal's repeated-sampling tasks."""
    return is_sampling_config({"metadata": task.config.metadata})


def samples_k_responses(task) -> bool:
    """Whether a loaded lm-eval task samples k responses per question, so that ``repeats`` is its k: its
    ``metadata.capcal_task`` is one of ``REPEATED_SAMPLING_KINDS``."""
    return (task.config.metadata or {}).get("capcal_task") in REPEATED_SAMPLING_KINDS


class CapcalTaskManager(TaskManager):
    """lm-eval's TaskManager with capcal's task folder on the include path and an optional ``repeats`` (k for
    every loaded task that samples k responses per question, ``samples_k_responses``)."""

    def __init__(
        self,
        include_path: str | Path | Sequence[str | Path] | None = None,
        repeats: int | None = None,
        include_defaults: bool = True,
        **kwargs,
    ) -> None:
        """``include_defaults`` (as TaskManager's) False indexes capcal's folder and ``include_path`` only
        (``task_manager_for`` decides when that suffices); True adds lm-eval's own tasks under them, from
        the process's one index of lm-eval's tree (``lm_eval_task_index``)."""
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
        super().__init__(include_path=[str(tasks_dir()), *map(str, extra)], include_defaults=False, **kwargs)
        if include_defaults:
            put_over_lm_eval_tasks(self)
        self.repeats = None if repeats is None else int(repeats)
        # called with the loaded tasks ({name: Task}) once ``repeats`` is applied, before any request is
        # made (``analysis.evaluation.evaluate`` states and bounds the number of samples there)
        self.on_load: Callable[[dict[str, Any]], None] | None = None

    def load(self, task_list):
        if self.repeats is not None:
            task_list = self._sampled_stock_tasks(task_list)
        loaded = super().load(task_list)
        if self.repeats is not None:
            for task in loaded["tasks"].values():
                if samples_k_responses(task):
                    task.set_config("repeats", self.repeats)
        if self.on_load is not None:
            self.on_load(dict(loaded["tasks"]))
        return loaded

    def calibration_base(self, name: str) -> str | None:
        """The stock task that ``name`` = ``<stock>_calibration`` names the calibration task of
        (``capcal_tasks.sampled_calibration``): ``<stock>`` when lm-eval knows no task ``name`` and
        ``<stock>`` is a leaf task that is not capcal's own; else None."""
        stem = calibration_stem(name)
        if stem is None or name in self.task_index:
            return None
        entry = self.task_index.get(stem)
        if entry is None or entry.kind.name not in ("TASK", "PY_TASK") or entry.cfg is None:
            return None
        return None if (entry.cfg.get("metadata") or {}).get("capcal_task") else stem

    def stock_task_configs(self, names: Sequence[str | dict]) -> dict[str, dict[str, Any]]:
        """The leaf tasks among ``names`` that are not capcal's own (no ``metadata.capcal_task``): those
        ``repeats`` wraps (``capcal_tasks.sampled_task``; a ``<stock>_calibration`` name,
        ``calibration_base``: ``capcal_tasks.sampled_calibration``), with their YAML configs, by task
        name."""
        return {
            name: config
            for name, config in self.task_configs(names).items()
            if not (config.get("metadata") or {}).get("capcal_task")
        }

    def _sampled_stock_tasks(self, task_list):
        """``task_list`` with every stock task (alone or in a stock group or tag) replaced by its
        ``SampledTask`` (k = ``repeats``, rows from the local data folder when one is set), followed by its
        confidence tasks (P(True), verbalized) that the metadata's ``capcal_confidences`` lists
        (``capcal_tasks.sampled_confidence.requested_confidences``); a ``<stock>_calibration`` name
        (``calibration_base``) replaced by its ``SampledCalibrationTask``, which asks its confidences
        itself; capcal's own tasks stay names."""
        from capcal_tasks.data_sources import local_data_dir
        from capcal_tasks.sampled_calibration import SampledCalibrationTask
        from capcal_tasks.sampled_confidence import confidence_tasks, requested_confidences
        from capcal_tasks.sampled_task import SampledTask, build_base_task

        items = task_list if isinstance(task_list, list) else [task_list]
        replaced: list = []
        local = local_data_dir() is not None
        confidences = requested_confidences(self.metadata)
        for item in items:
            stock = self.stock_task_configs([item]) if isinstance(item, str) else {}
            if not stock:
                replaced.append(item)
                continue
            replaced += [name for name in self.task_configs([item]) if name not in stock]
            for name in stock:
                wrapped = self.calibration_base(name)
                if wrapped is not None:
                    base = build_base_task(wrapped, self, self.metadata, local_rows=local)
                    replaced.append(
                        SampledCalibrationTask(base=base, k=self.repeats, metadata=self.metadata, name=name)
                    )
                    continue
                base = build_base_task(name, self, self.metadata, local_rows=local)
                replaced.append(SampledTask(base=base, k=self.repeats, metadata=self.metadata))
                replaced += confidence_tasks(base, name, confidences)  # on the same questions
        return replaced

    def resolve_task_names(self, names: Sequence[str]) -> list[str | dict]:
        """``names`` as lm-eval's command line resolves them, without loading any task: a registered
        task, group or tag stays a name, and so does ``<stock>_calibration`` (``calibration_base``), a
        pattern (``capcal_gsm8k*``) becomes the names it matches, a
        ``.yaml`` file becomes its config. Raises ``UnknownTaskError`` naming the first name that is none of
        these, with the closest registered names."""
        resolved: list[str | dict] = []
        for name in names:
            if name.endswith(".yaml"):
                path = Path(name).expanduser()
                if not path.is_file():
                    raise UnknownTaskError(f"task file {name} not found")
                matches: list[str | dict] = [load_yaml(path.resolve(), resolve_func=True)]
            elif name in self.task_index or self.calibration_base(name) is not None:
                matches = [name]
            elif GLOB_CHARACTERS & set(name):
                matches = list(self.match_tasks([name]))
            else:
                matches = []
            if not matches:
                raise UnknownTaskError(unknown_task_message(name, self.all_tasks))
            resolved.extend(match for match in matches if match not in resolved)
        return resolved

    def task_configs(self, names: Sequence[str | dict]) -> dict[str, dict[str, Any]]:
        """The raw YAML config (``!function`` entries unresolved) of every task that ``names`` (resolved task
        names, groups, tags or config dicts) stands for, by task name: a copy of the index's (whose entries
        other managers share), so that a caller may change it."""
        configs: dict[str, dict[str, Any]] = {}

        def visit(item: str | dict) -> None:
            if isinstance(item, dict):
                if isinstance(item.get("task"), str) and "group" not in item:
                    configs[item["task"]] = item
                for child in item.get("task", []) if isinstance(item.get("task"), list) else []:
                    visit(child)
                return
            entry = self.task_index.get(item)
            wrapped = None if entry is not None else self.calibration_base(item)
            if wrapped is not None and item not in configs:  # the stock task's config, under its name
                configs[item] = {**copy.deepcopy(self.task_index[wrapped].cfg), "task": item}
                return
            if entry is None or item in configs:
                return
            if entry.kind.name == "TAG":
                for child in sorted(entry.tags):
                    visit(child)
            elif entry.kind.name == "GROUP":
                children = (entry.cfg or {}).get("task", [])
                for child in children if isinstance(children, list) else [children]:
                    visit(child)
            elif entry.cfg is not None:
                configs[item] = copy.deepcopy(entry.cfg)

        for name in names:
            visit(name)
        return configs

    def custom_dataset_of(self, name: str) -> Callable | None:
        """The ``custom_dataset`` function of a registered task (imported), or None when it has none."""
        entry = self.task_index.get(name)
        if entry is None or entry.yaml_path is None or "custom_dataset" not in (entry.cfg or {}):
            return None
        loader = load_yaml(entry.yaml_path, resolve_func=True).get("custom_dataset")
        return loader if callable(loader) else None


def task_manager_for(
    names: Sequence[str],
    include_path: str | Path | Sequence[str | Path] | None = None,
    repeats: int | None = None,
    *,
    screened: bool = False,
    **kwargs,
) -> tuple[CapcalTaskManager, list[str | dict]]:
    """A ``CapcalTaskManager`` that knows every task in ``names``, and the names resolved by it
    (``CapcalTaskManager.resolve_task_names``).

    capcal's tasks and ``include_path`` are indexed first (well under a second). lm-eval's own task tree is
    indexed as well only when some name is a pattern (``*``, ``?``, ``[``: it may match lm-eval's tasks
    too), or is not found there and occurs in some YAML text (``capcal_tasks.task_names``; ``screened``:
    the caller has checked that already); a name that occurs in none raises ``UnknownTaskError`` without
    that index, with the closest declared names. ``kwargs`` go to the manager (``metadata``)."""
    small = CapcalTaskManager(include_path=include_path, repeats=repeats, include_defaults=False, **kwargs)
    missing = [
        name
        for name in names
        if not name.endswith(".yaml") and (name not in small.task_index or GLOB_CHARACTERS & set(name))
    ]
    if not missing:
        return small, small.resolve_task_names(names)
    if not screened:
        unknown, declared = unknown_task_names(missing, include_path)
        if unknown:
            raise UnknownTaskError(unknown_task_message(unknown[0], [*small.all_tasks, *declared]))
    full = CapcalTaskManager(include_path=include_path, repeats=repeats, **kwargs)
    return full, full.resolve_task_names(names)
