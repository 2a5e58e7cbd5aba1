"""Declared relations between capcal's tasks: the one place the analysis learns which task is which.

Every task declares in its YAML ``metadata`` (lm-eval copies it into each results file's ``configs``):

- ``capcal_role``: ``evaluation`` (a test set, reported), ``calibration`` (a split that probes and
  recalibrators are fitted on; never reported as an evaluation set) or ``confidence`` (elicits confidences on
  another task's questions); a task that is both an evaluation set and the calibration split of another
  lists both roles, ``[evaluation, calibration]``;
- an evaluation task: ``capcal_calibration_tasks``, the calibration split(s) its probes and recalibrators are
  fitted on (``[]``: none declared);
- a confidence task: ``capcal_target_task``, the sampling task whose questions (or responses) it scores;
- ``capcal_dataset``: the dataset the questions come from; a calibration split of the evaluation task's
  dataset is in-domain, of another dataset cross-domain (MATH train for AIME);
- an evaluation task that asks another evaluation task's questions in another prompt format (for a base
  model): ``capcal_questions_of``, that task; models run on either are compared on the same questions
  (routing).

:func:`task_relations` reads the declarations of the tasks in a run's results files first and falls back to
capcal's own YAMLs (read without importing any task code), then validates the whole set: an unknown task
name, a calibration split that is not declared as one, an evaluation task fitted on itself, or a confidence
task aimed at a task that is not a sampling task raises :class:`RelationError` naming where it was declared.
Nothing is inferred from task names.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from capcal_tasks.sampling import is_sampling_config

__all__ = [
    "CALIBRATION",
    "CONFIDENCE",
    "EVALUATION",
    "ROLES",
    "RelationError",
    "TaskRelation",
    "TaskRelations",
    "capcal_task_declarations",
    "parse_calibration_overrides",
    "parse_declaration",
    "read_task_yaml",
    "task_relations",
]

EVALUATION, CALIBRATION, CONFIDENCE = "evaluation", "calibration", "confidence"
ROLES = (EVALUATION, CALIBRATION, CONFIDENCE)
TASKS_DIR = Path(__file__).resolve().parent


class RelationError(ValueError):
    """A missing, malformed or contradictory task declaration; the message names where it was declared."""


@dataclass(frozen=True)
class TaskRelation:
    """One task's declaration: roles, calibration splits (evaluation tasks), target (confidence tasks)."""

    task: str
    roles: frozenset[str]
    calibration_tasks: tuple[str, ...] = ()
    target_task: str | None = None
    source: str = ""  # where it was declared (a YAML file, a results file), for error messages
    declared: bool = True  # False: the task's metadata declares nothing (treated as an evaluation task)
    kind: str | None = None  # metadata.capcal_task: sampling, verbalized, ptrue, verbalized_rc, ptrue_rc, ...
    dataset: str | None = None  # metadata.capcal_dataset: the dataset its questions come from (the domain)
    questions_of: str | None = None  # metadata.capcal_questions_of: the task whose questions it asks

    def has(self, role: str) -> bool:
        return role in self.roles


def parse_declaration(task: str, metadata: Mapping | None, source: str) -> TaskRelation | None:
    """The relation declared by one task's ``metadata``, or None when it has no ``capcal_role``.

    Raises ``RelationError`` naming ``source`` for a malformed declaration (unknown role, a list that is not
    a list of task names, a calibration list on a task that is not an evaluation task, a confidence task
    without a target, ...).
    """
    metadata = metadata or {}
    if not isinstance(metadata, Mapping):
        raise RelationError(f"{source}: task {task}: metadata must be a mapping")
    if "capcal_role" not in metadata:
        return None
    where = f"{source}: task {task}"
    raw_roles = metadata["capcal_role"]
    roles = [raw_roles] if isinstance(raw_roles, str) else raw_roles
    if not isinstance(roles, list) or not roles or not all(isinstance(r, str) for r in roles):
        raise RelationError(f"{where}: capcal_role must be one of {', '.join(ROLES)} or a list of them")
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise RelationError(f"{where}: unknown capcal_role {unknown[0]!r} (expected {', '.join(ROLES)})")
    if CONFIDENCE in roles and len(roles) > 1:
        raise RelationError(f"{where}: a confidence task cannot also be a sampling task ({raw_roles})")

    calibration = metadata.get("capcal_calibration_tasks")
    if calibration is not None and EVALUATION not in roles:
        raise RelationError(
            f"{where}: capcal_calibration_tasks is declared, but the task is not an evaluation task"
        )
    if EVALUATION in roles and calibration is None:
        raise RelationError(
            f"{where}: an evaluation task declares capcal_calibration_tasks (a list; [] for none)"
        )
    calibration = [] if calibration is None else calibration
    if not isinstance(calibration, list) or not all(isinstance(t, str) and t for t in calibration):
        raise RelationError(f"{where}: capcal_calibration_tasks must be a list of task names")
    if len(set(calibration)) != len(calibration):
        raise RelationError(f"{where}: capcal_calibration_tasks names a task twice")

    target = metadata.get("capcal_target_task")
    if target is not None and CONFIDENCE not in roles:
        raise RelationError(f"{where}: capcal_target_task is declared, but the task is not a confidence task")
    if CONFIDENCE in roles and not (isinstance(target, str) and target):
        raise RelationError(f"{where}: a confidence task declares capcal_target_task (the task it scores)")
    questions_of = metadata.get("capcal_questions_of")
    if questions_of is not None and (
        EVALUATION not in roles or not (isinstance(questions_of, str) and questions_of)
    ):
        raise RelationError(f"{where}: capcal_questions_of must name a task, on an evaluation task")
    kind, dataset = metadata.get("capcal_task"), metadata.get("capcal_dataset")
    return TaskRelation(
        task,
        frozenset(roles),
        tuple(calibration),
        target,
        source,
        kind=kind if isinstance(kind, str) else None,
        dataset=dataset if isinstance(dataset, str) else None,
        questions_of=questions_of,
    )


class _FunctionTagsAsTextSafeLoader(yaml.SafeLoader):
    """A YAML loader that reads lm-eval's ``!function`` tags as plain strings (no import)."""


_FunctionTagsAsTextSafeLoader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def read_task_yaml(path: Path, seen: frozenset[Path] = frozenset()) -> dict:
    """A task YAML with its ``include`` chain merged as lm-eval merges it (the including file's keys win)."""
    path = path.resolve()
    if path in seen:
        raise RelationError(f"{path}: include cycle")
    try:
        config = yaml.load(path.read_text(encoding="utf-8"), Loader=_FunctionTagsAsTextSafeLoader)  # noqa: S506
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise RelationError(f"{path}{line}: not valid YAML") from None
    if not isinstance(config, dict):
        raise RelationError(f"{path}: expected a YAML mapping")
    includes = config.pop("include", None)
    if includes is None:
        return config
    merged: dict = {}
    for include in [includes] if isinstance(includes, str) else includes:
        merged.update(read_task_yaml(path.parent / include, seen | {path}))
    merged.update(config)
    return merged


@functools.cache
def _capcal_declarations(tasks_dir: Path) -> dict[str, TaskRelation]:
    relations = {}
    for path in sorted(tasks_dir.glob("*/*.yaml")) + sorted(tasks_dir.glob("*.yaml")):
        config = read_task_yaml(path)
        task = config.get("task")
        if "group" in config or not isinstance(task, str):
            continue
        source = str(path.relative_to(tasks_dir.parent))
        relation = parse_declaration(task, config.get("metadata"), source)
        if relation is None:
            raise RelationError(f"{source}: task {task} declares no metadata.capcal_role")
        relations[task] = relation
    return relations


def capcal_task_declarations() -> dict[str, TaskRelation]:
    """The declarations of every task YAML shipped with capcal (read once per process)."""
    return dict(_capcal_declarations(TASKS_DIR))


@dataclass(frozen=True)
class TaskRelations:
    """The validated relations of a set of tasks (see the module docstring)."""

    relations: Mapping[str, TaskRelation]
    overridden: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __contains__(self, task: object) -> bool:
        return task in self.relations

    def get(self, task: str) -> TaskRelation:
        if task not in self.relations:
            raise RelationError(
                f"task {task}: no declaration (not in the runs' results files nor capcal's tasks)"
            )
        return self.relations[task]

    def is_evaluation(self, task: str) -> bool:
        return self.get(task).has(EVALUATION)

    def is_calibration(self, task: str) -> bool:
        return self.get(task).has(CALIBRATION)

    def calibration_tasks(self, task: str) -> tuple[str, ...]:
        """The calibration split(s) an evaluation task's probes and recalibrators are fitted on."""
        return self.get(task).calibration_tasks

    def target_task(self, task: str) -> str:
        """The sampling task a confidence task scores."""
        relation = self.get(task)
        if relation.target_task is None:
            raise RelationError(f"task {task} is not a confidence task ({relation.source})")
        return relation.target_task

    def confidence_tasks(self, target: str, kinds: Iterable[str] | None = None) -> list[str]:
        """The known confidence tasks that score ``target`` (of the given ``metadata.capcal_task`` kinds)."""
        wanted = None if kinds is None else set(kinds)
        return sorted(
            t
            for t, r in self.relations.items()
            if r.target_task == target and (wanted is None or r.kind in wanted)
        )

    def domain(self, task: str, calibration_tasks: Sequence[str]) -> str:
        """``in-domain`` when every calibration task declares the evaluation task's dataset, ``mixed-domain``
        for several datasets, ``cross-domain`` for one other dataset; ``unknown domain`` when a dataset is
        not declared."""
        datasets = {self.get(name).dataset for name in calibration_tasks}
        own = self.get(task).dataset
        if own is None or None in datasets:
            return "unknown domain"
        if datasets == {own}:
            return "in-domain"
        return "mixed-domain" if len(datasets) > 1 else "cross-domain"

    def question_set(self, task: str) -> str:
        """The task whose questions ``task`` asks: its ``capcal_questions_of``, else itself."""
        return self.get(task).questions_of or task

    def prompt_variants(self, task: str) -> list[str]:
        """The known evaluation tasks that ask ``task``'s questions in another prompt format."""
        return sorted(t for t, r in self.relations.items() if r.questions_of == task)

    def evaluation_tasks(self, tasks: Iterable[str]) -> list[str]:
        """The evaluation tasks among ``tasks``, in their order (calibration splits are left out)."""
        return [task for task in tasks if self.is_evaluation(task)]

    def with_calibration(self, overrides: Mapping[str, Sequence[str]]) -> TaskRelations:
        """These relations with the calibration splits of some evaluation tasks replaced (a user's choice:
        in-domain, cross-domain or several splits for a mixed-domain fit); validated like declarations."""
        relations = dict(self.relations)
        for task, calibration in overrides.items():
            names = [calibration] if isinstance(calibration, str) else list(calibration)
            if task not in relations:
                raise RelationError(f"calibration override: unknown task {task}")
            relations[task] = replace(relations[task], calibration_tasks=tuple(names), source="override")
        result = TaskRelations(relations, {t: tuple(relations[t].calibration_tasks) for t in overrides})
        result.validate()
        return result

    def validate(self) -> None:
        """Raise ``RelationError`` for a reference to an unknown task, a calibration split that is not
        declared a calibration task (or is the evaluation task itself), or a confidence task whose target is
        not a sampling (evaluation or calibration) task."""
        for task, relation in self.relations.items():
            where = f"{relation.source}: task {task}"
            for name in relation.calibration_tasks:
                if name not in self.relations:
                    raise RelationError(f"{where}: calibration task {name} is not a known task")
                if name == task:
                    raise RelationError(f"{where}: an evaluation task cannot be its own calibration split")
                if not self.relations[name].has(CALIBRATION):
                    other = self.relations[name]
                    raise RelationError(
                        f"{where}: {name} is not a calibration task "
                        f"(declared {', '.join(sorted(other.roles))} in {other.source})"
                    )
            if relation.target_task is not None:
                target = self.relations.get(relation.target_task)
                if target is None:
                    raise RelationError(f"{where}: target task {relation.target_task} is not a known task")
                if target.has(CONFIDENCE):
                    raise RelationError(f"{where}: target task {relation.target_task} is a confidence task")
            if relation.questions_of is not None:
                other = self.relations.get(relation.questions_of)
                if other is None or not other.has(EVALUATION) or other.questions_of is not None:
                    raise RelationError(
                        f"{where}: capcal_questions_of {relation.questions_of} is not a known evaluation "
                        "task that asks its own questions"
                    )


def task_relations(
    configs: Mapping[str, tuple[Mapping, str]] | None = None,
    calibration: Mapping[str, Sequence[str]] | None = None,
    *,
    include_capcal: bool = True,
) -> TaskRelations:
    """The validated relations of capcal's tasks and of the tasks in ``configs``.

    ``configs`` maps a task name to (its config as dumped in a results file, that file's path); its metadata
    declaration wins over capcal's YAML of the same name. A sampling task in ``configs`` that declares
    nothing and has no capcal YAML is kept as an undeclared evaluation task with no calibration split
    (``declared=False``), so the report can say so. ``calibration`` overrides the calibration splits of
    evaluation tasks (:meth:`TaskRelations.with_calibration`).
    """
    relations = capcal_task_declarations() if include_capcal else {}
    for task, (config, source) in (configs or {}).items():
        metadata = config.get("metadata") if isinstance(config, Mapping) else None
        relation = parse_declaration(task, metadata, str(source))
        if relation is not None:
            relations[task] = relation
        elif task not in relations and is_sampling_config(dict(config)):
            relations[task] = TaskRelation(task, frozenset({EVALUATION}), source=str(source), declared=False)
    result = TaskRelations(relations)
    result.validate()
    return result.with_calibration(calibration) if calibration else result


def parse_calibration_overrides(values: Sequence[str]) -> dict[str, list[str]]:
    """``TASK=CALIBRATION_TASK[,CALIBRATION_TASK...]`` items (``capcal report --calibration``) as the mapping
    ``ReportOptions.calibration`` takes; ``ValueError`` naming the item for one without ``=`` or names, or a
    task given twice."""
    overrides: dict[str, list[str]] = {}
    for value in values:
        task, equals, names = value.partition("=")
        calibration = [name.strip() for name in names.split(",") if name.strip()]
        if not equals or not task.strip() or not calibration:
            raise ValueError(f"--calibration {value!r}: expected TASK=CALIBRATION_TASK[,CALIBRATION_TASK...]")
        if task.strip() in overrides:
            raise ValueError(f"--calibration: task {task.strip()} given twice")
        overrides[task.strip()] = calibration
    return overrides
