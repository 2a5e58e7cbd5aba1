"""An lm-eval TaskManager that always sees capcal's tasks, can set ``repeats`` for the whole run and checks
task names before anything is loaded.

lm-eval's TaskManager parses every YAML of lm-eval's task tree (about 14,000 files; 30-70 s on a loaded
machine) before it can say whether a name exists. ``task_manager_for`` indexes capcal's task folder (and the
user's include paths) first and reads lm-eval's tree only when a name is not there: as bytes, to learn whether
the name occurs in any of its YAML files at all (a task, group or tag name is always written in one), and
indexes it only when it does. An unknown name is refused in about a second.

lm-eval 0.4.13 cannot set ``repeats`` from its command line; ``task.set_config("repeats", k)`` on a loaded
task works, so ``CapcalTaskManager.load`` applies it to every task that samples k responses per question. A
task declares that in its YAML's ``metadata.capcal_task`` (``REPEATED_SAMPLING_KINDS``): the sampling tasks
(every request cloned k times) and the leaderboard tasks ``capcal_<dataset>_calibration``
(``capcal_tasks.calibration_task.CalibrationTask`` clones only its sampling request k times, from
``config.repeats``, and asks P(True) and the verbalized confidence once).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import lm_eval.tasks
from lm_eval.tasks import TaskManager
from lm_eval.tasks._yaml_loader import load_yaml

from capcal_tasks import tasks_dir
from capcal_tasks.sampling import is_sampling_config

__all__ = [
    "REPEATED_SAMPLING_KINDS",
    "CapcalTaskManager",
    "UnknownTaskError",
    "is_sampling_task",
    "lm_eval_names_mentioned",
    "samples_k_responses",
    "task_manager_for",
]

#: ``metadata.capcal_task`` of the tasks that sample k (``repeats``) responses per question.
REPEATED_SAMPLING_KINDS = frozenset({"sampling", "leaderboard"})

_GLOB_CHARACTERS = set("*?[")
#: lm-eval's own task folder (indexed only when a requested name may be one of its tasks).
LM_EVAL_TASKS_DIR = Path(lm_eval.tasks.__file__).resolve().parent
# ``task: name`` / ``group: name`` lines of lm-eval's YAMLs: the names offered as "did you mean".
_DECLARED_NAME = re.compile(rb"(?m)^(?:task|group):[ \t]*['\"]?([\w.\-]+)")


class UnknownTaskError(ValueError):
    """A task name that is not a registered task, group or tag, a pattern matching one, or a YAML file."""


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
        **kwargs,
    ) -> None:
        """``include_defaults`` (a TaskManager keyword, default True) False indexes capcal's folder and
        ``include_path`` only (``task_manager_for`` decides when that suffices)."""
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
                if samples_k_responses(task):
                    task.set_config("repeats", self.repeats)
        return loaded

    def resolve_task_names(self, names: Sequence[str]) -> list[str | dict]:
        """``names`` as lm-eval's command line resolves them, without loading any task: a registered
        task, group or tag stays a name, a pattern (``capcal_gsm8k*``) becomes the names it matches, a
        ``.yaml`` file becomes its config. Raises ``UnknownTaskError`` naming the first name that is none of
        these, with the closest registered names."""
        resolved: list[str | dict] = []
        for name in names:
            if name.endswith(".yaml"):
                path = Path(name).expanduser()
                if not path.is_file():
                    raise UnknownTaskError(f"task file {name} not found")
                matches: list[str | dict] = [load_yaml(path.resolve(), resolve_func=True)]
            elif name in self.task_index:
                matches = [name]
            elif _GLOB_CHARACTERS & set(name):
                matches = list(self.match_tasks([name]))
            else:
                matches = []
            if not matches:
                raise UnknownTaskError(unknown_task_message(name, self.all_tasks))
            resolved.extend(match for match in matches if match not in resolved)
        return resolved

    def task_configs(self, names: Sequence[str | dict]) -> dict[str, dict[str, Any]]:
        """The raw YAML config (``!function`` entries unresolved) of every task that ``names`` (resolved task
        names, groups, tags or config dicts) stands for, by task name."""
        configs: dict[str, dict[str, Any]] = {}

        def visit(item: str | dict) -> None:
            if isinstance(item, dict):
                if isinstance(item.get("task"), str) and "group" not in item:
                    configs[item["task"]] = item
                for child in item.get("task", []) if isinstance(item.get("task"), list) else []:
                    visit(child)
                return
            entry = self.task_index.get(item)
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
                configs[item] = entry.cfg

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


def unknown_task_message(name: str, known: Iterable[str]) -> str:
    """``unknown task NAME``, with up to three of the ``known`` names closest to it."""
    close = difflib.get_close_matches(name, sorted(set(known)), n=3, cutoff=0.6)
    return f"unknown task {name}" + (f"; did you mean {_alternatives(close)}?" if close else "")


def lm_eval_names_mentioned(names: Iterable[str]) -> tuple[set[str], set[str]]:
    """Which of ``names`` occur anywhere in the text of lm-eval's task YAMLs, and the names those YAMLs
    declare on ``task:`` / ``group:`` lines (for suggestions).

    Every task, group or tag name lm-eval knows is written in one of its YAML files, so a name that occurs in
    none of them is not lm-eval's; one that occurs may still be none (it may be part of a longer name). The
    files are read as bytes, nothing is parsed: about 0.7 s for lm-eval 0.4.13's 14,000 files here."""
    wanted = {name: name.encode("utf-8") for name in names}
    found: set[str] = set()
    declared: set[str] = set()
    for path in LM_EVAL_TASKS_DIR.rglob("*.yaml"):
        if "__pycache__" in path.parts:
            continue
        try:
            text = path.read_bytes()
        except OSError:
            continue
        found.update(name for name, encoded in wanted.items() if encoded in text)
        declared.update(match.decode("utf-8", "replace") for match in _DECLARED_NAME.findall(text))
    return found, declared


def task_manager_for(
    names: Sequence[str],
    include_path: str | Path | Sequence[str | Path] | None = None,
    repeats: int | None = None,
    **kwargs,
) -> tuple[CapcalTaskManager, list[str | dict]]:
    """A ``CapcalTaskManager`` that knows every task in ``names``, and the names resolved by it
    (``CapcalTaskManager.resolve_task_names``).

    capcal's tasks and ``include_path`` are indexed first (well under a second). lm-eval's own task tree is
    indexed as well only when some name is a pattern (``*``, ``?``, ``[``: it may match lm-eval's tasks
    too) or is not found there and occurs in lm-eval's YAML text (``lm_eval_names_mentioned``); a name that
    is neither raises ``UnknownTaskError`` without that index, with the closest names of both. A ``.yaml``
    path resolves in either manager. ``kwargs`` go to the manager (``metadata``)."""
    small = CapcalTaskManager(include_path=include_path, repeats=repeats, include_defaults=False, **kwargs)
    missing = [
        name
        for name in names
        if not name.endswith(".yaml") and (name not in small.task_index or _GLOB_CHARACTERS & set(name))
    ]
    if not missing:
        return small, small.resolve_task_names(names)
    plain = [name for name in missing if not _GLOB_CHARACTERS & set(name)]
    mentioned, declared = lm_eval_names_mentioned(plain)
    for name in plain:
        if name not in mentioned:
            raise UnknownTaskError(unknown_task_message(name, [*small.all_tasks, *declared]))
    full = CapcalTaskManager(include_path=include_path, repeats=repeats, **kwargs)
    return full, full.resolve_task_names(names)


def _alternatives(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
