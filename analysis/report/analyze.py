"""The report's analysis: lm-eval output folders to every (model, evaluation task) section, nothing written
(``analysis.report.build`` writes them; ``paper_table`` tabulates them).

Which task is an evaluation set, which split its fitted estimators are trained on, and which confidence task
scores which sampling task come only from the tasks' declarations (``capcal_tasks.relations``); the user can
override the calibration split(s) per evaluation task (``ReportOptions.calibration``): in-domain (MATH train
for MATH-500), cross-domain (MATH train for AIME, the paper's Probe-MATH) or mixed-domain (splits of several
datasets, concatenated); the domain compares the tasks' declared ``capcal_dataset``. Calibration questions
that are also evaluation questions are dropped and counted.

For every (model, evaluation task) the per-question table is joined with the confidences that score that
task, every registered estimator (``analysis.report.registry``) is computed, and the section shows the metric
tables, figures, what each fitted estimator was trained on, which runs were used or left out, and what each
join could not match. Calibration splits are never reported as evaluation tasks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.estimators.elicited import attach_elicited, parse_failure_counts
from analysis.rendering import ReportSection
from analysis.report.registry import (
    EXAMPLES,
    ROUTING,
    CalibrationData,
    ComputedEstimators,
    EstimatorContext,
    compute_estimators,
)
from analysis.report.sections import (
    SectionInputs,
    capability_section,
    display_name,
    examples_table,
    routing_section,
    section_inputs,
)
from analysis.report.summary import (
    Ranking,
    rank_estimators,
)
from analysis.runs import RunCollection, load_runs
from analysis.runs.activations import read_activation_index
from analysis.runs.completeness import greedy_warnings
from analysis.runs.joins import JoinReport, join_questions, join_report
from analysis.runs.recorded_paths import resolve_recorded_path
from capcal_tasks.relations import TaskRelations, task_relations
from capcal_tasks.sampled_protocol import has_answer_classes, protocol_lines

__all__ = [
    "ReportAnalysis",
    "ReportData",
    "ReportOptions",
    "SectionResult",
    "analyze_runs",
    "calibration_data",
    "load_report_data",
    "short_file",
]


@dataclass(frozen=True)
class ReportOptions:
    """Report settings. ``calibration`` maps an evaluation task to the calibration task(s) its probe and
    recalibrators are fitted on, replacing the declared ones: ``{"capcal_aime25": ["capcal_math_train"]}``
    (cross-domain), ``{"capcal_math500": ["capcal_math_train", "capcal_gsm8k_train"]}`` (mixed-domain)."""

    n_resamples: int = 1000
    seed: int = 0
    consistency_ks: tuple[int, ...] = (5, 10, 20)
    probe_kind: str = "paper"
    max_examples: int = 8
    calibration: Mapping[str, Sequence[str]] = field(default_factory=dict)
    select: Any = None  # which run of a (model, task) to use: ``analysis.runs.load_runs``'s ``select``


@dataclass
class ReportData:
    """What the report reads from the output folders (``analysis.runs.load_runs``)."""

    collection: RunCollection
    configs: dict[str, tuple[dict, str]]  # task -> (config from a results file, that file)
    activations: dict[
        tuple[str, str], Path
    ]  # (model_id, task) -> activations folder named in the run's metadata, found (recorded_paths)
    path_notes: list[str] = field(default_factory=list)  # how a relative recorded path was resolved
    # (model_id, task) -> the activations folder its run recorded, not found (the probe is left out)
    lost_activations: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def questions(self) -> pd.DataFrame:
        return self.collection.questions

    @property
    def confidences(self) -> pd.DataFrame:
        return self.collection.confidences


def short_file(model: str, path: Path) -> str:
    """A run's file as the report shows it: the model's display name and the file name
    (``smollm2/results_2026-01-02T03-04-05.json``), never lm-eval's folder named after the mangled model
    path."""
    return f"{display_name(model)}/{Path(path).name}"


def load_report_data(output_dirs: Sequence[str | Path], select=None) -> ReportData:
    """The runs under ``output_dirs`` (``select`` as in ``load_runs``: by default the latest run of each
    (model, task); the others are listed as left out), with the task configs of the runs used."""
    collection = load_runs(output_dirs, select)
    configs: dict[str, tuple[dict, str]] = {}
    activations: dict[tuple[str, str], Path] = {}
    lost: dict[tuple[str, str], str] = {}
    notes: list[str] = []
    for file in collection.files:
        results = file.results_path
        if file.task_config:
            where = short_file(file.model, results if results is not None else file.path)
            configs[file.task] = (file.task_config, where)
        folder = (file.task_config.get("metadata") or {}).get("activations")
        if isinstance(folder, str) and folder:
            recorded_in = results if results is not None else file.path
            found = resolve_recorded_path(folder, recorded_in, "activations")
            note = found.note
            if found.path is None:
                lost[(file.model_id, file.task)] = folder
                note = f"{note}; the probe is left out: pass the folder with --activations DIR"
            if note is not None and note not in notes:
                notes.append(note)
            if found.path is not None:
                activations[(file.model_id, file.task)] = found.path
    return ReportData(collection, configs, activations, notes, lost)


def _join_row(report: JoinReport) -> dict:
    return {
        "join": report.name,
        "matched": report.matched,
        "left": report.left_count,
        "right": report.right_count,
        "summary": report.summary(),
    }


def _targets(confidences: pd.DataFrame) -> dict[str, str | None]:
    """Confidence task -> the sampling task it declares it scores (None: no declaration)."""
    pairs = confidences[["task", "target_task"]].drop_duplicates("task")
    return {
        task: (target if isinstance(target, str) else None) for task, target in pairs.itertuples(index=False)
    }


def _with_confidences(
    table: pd.DataFrame,
    task: str,
    own: pd.DataFrame | None,
    targets: dict[str, str | None],
    joins: list[dict],
    notes: list[str],
    left_out: list[str] | None = None,
) -> pd.DataFrame:
    """``table`` (questions of ``task``) with the confidences of the tasks that score ``task`` joined; an
    undeclared confidence task is joined on question ids and said so. A kind whose records scored another
    sampling run's responses (``attach_elicited``'s ``on_mismatch="leave_out"``) is left out, one line
    each in ``left_out``."""
    if own is None or own.empty or table.empty:
        return table
    scoring = [t for t, target in targets.items() if target == task]
    undeclared = [t for t, target in targets.items() if target is None]
    chosen = own[own["task"].isin(scoring + undeclared)]
    if chosen.empty:
        return table
    for confidence_task, group in chosen.groupby("task", sort=True):
        note = f"{confidence_task} declares no capcal_target_task: joined on question ids"
        report = join_questions(
            task,
            confidence_task,
            table["question_id"],
            group["question_id"],
            right_rows="records",
            notes=[note] if confidence_task in undeclared else [],
        )
        joins.append(_join_row(report))
    matched = chosen[chosen["question_id"].isin(set(table["question_id"]))]
    if matched.empty:
        return table
    out = attach_elicited(table, matched, on=("model_id", "question_id"), on_mismatch="leave_out")
    for kind, line in out.attrs.get("left_out", {}).items():
        if left_out is not None:
            left_out.append(
                f"{kind} confidences not computed on {task}: {line}; re-run the {kind} task on the samples "
                "file of the sampling run used here (the latest), or pick the matching runs with --run"
            )
    return out


def calibration_data(
    questions: pd.DataFrame,
    evaluation: pd.DataFrame,
    task: str,
    relations: TaskRelations,
    own: pd.DataFrame | None,
    targets: dict[str, str | None],
    joins: list[dict],
    notes: list[str],
    left_out: list[str] | None = None,
) -> CalibrationData | None:
    """The questions of the calibration split(s) chosen for ``task`` (the model's rows in ``questions``), with
    their confidences joined; questions also in ``evaluation`` are dropped (counted); None when no split is
    declared or chosen."""
    chosen = relations.calibration_tasks(task)
    chosen_by = "override" if task in relations.overridden else f"declared in {relations.get(task).source}"
    if not chosen:
        notes.append(f"no calibration split declared for {task}: no probe or recalibration")
        return None
    present = [t for t in chosen if (questions["task"] == t).any()]
    missing = tuple(t for t in chosen if t not in present)
    if missing:
        notes.append(f"calibration split(s) {', '.join(missing)} chosen for {task} have no run of this model")
    parts = []
    for calibration_task in present:
        part = questions[questions["task"] == calibration_task].reset_index(drop=True)
        parts.append(_with_confidences(part, calibration_task, own, targets, joins, notes, left_out))
    if not parts:
        return None
    table = pd.concat(parts, ignore_index=True)
    repeated = table["question_id"].duplicated()
    if repeated.any():
        notes.append(f"{int(repeated.sum())} question(s) in several calibration splits: the first kept")
        table = table[~repeated]
    shared = table["question_id"].isin(set(evaluation["question_id"]))
    table = table[~shared].reset_index(drop=True)
    domain = relations.domain(task, present)
    return CalibrationData(tuple(present), table, int(shared.sum()), missing, domain, chosen_by)


def _activation_joins(folder: Path, frames: Sequence[pd.DataFrame], joins: list[dict]) -> None:
    try:
        entries = read_activation_index(folder).get("entries", {})
    except ValueError as error:
        joins.append({"join": "activations", "summary": str(error)})
        return
    for frame in frames:
        for task, part in frame.groupby("task", sort=False):
            report = join_report(
                f"{task} <-> activations",
                part["question_id"],
                list(entries.get(task, {})),
                left_name=f"{task} questions",
                right_name="activations",
            )
            joins.append(_join_row(report))


def _runs_table(data: ReportData, model_id: str, tasks: Sequence[str]) -> pd.DataFrame:
    runs = data.collection.runs
    rows = runs[(runs["model_id"] == model_id) & runs["task"].isin(list(tasks))]
    files = [
        samples if isinstance(samples, (str, Path)) and str(samples) else results
        for samples, results in zip(rows["samples_path"], rows["results_path"], strict=True)
    ]
    rows = rows.assign(
        file=[short_file(str(m), Path(str(f))) for m, f in zip(rows["model"], files, strict=True)]
    )
    return rows[["task", "kind", "run_id", "used", "reason", "labels", "file"]].reset_index(drop=True)


def _section(
    data: ReportData,
    relations: TaskRelations,
    targets: dict[str, str | None],
    model: str,
    task: str,
    activations_dir: Path | None,
    options: ReportOptions,
) -> SectionResult:
    questions = data.questions[data.questions["model_id"] == model]
    own = data.confidences[data.confidences["model_id"] == model]
    joins: list[dict] = []
    notes: list[str] = []
    evaluation = questions[questions["task"] == task].reset_index(drop=True)
    left_out: list[str] = []
    evaluation = _with_confidences(evaluation, task, own, targets, joins, notes, left_out)
    calibration = calibration_data(
        questions, evaluation, task, relations, own, targets, joins, notes, left_out
    )
    folder = activations_dir or data.activations.get((model, task))
    if folder is not None:
        frames = [evaluation] + ([calibration.table] if calibration is not None else [])
        _activation_joins(folder, frames, joins)
    config = data.configs.get(task, ({}, ""))[0]  # a wrapped lm-eval task's protocol (sampled_protocol)
    context = EstimatorContext(
        model,
        task,
        evaluation,
        calibration,
        folder,
        options.consistency_ks,
        options.probe_kind,
        options.seed,
        answer_classes=has_answer_classes(config),
    )
    computed = compute_estimators(context)
    computed.notes[:0] = notes
    computed.not_computed.extend(left_out)
    if folder is None and calibration is not None and (model, task) in data.lost_activations:
        computed.not_computed.append(
            f"probe not computed: the activations folder its run recorded "
            f"({data.lost_activations[(model, task)]}) was not found (was the run's folder moved?); pass it "
            "with --activations DIR"
        )
    if not own.empty:
        failures = parse_failure_counts(own)
        scoring = [t for t, target in targets.items() if target == task]
        failures = failures[failures["task"].isin(scoring)]
        computed.parse_failures = failures
        if not failures.empty:
            computed.notes.append(
                "parse failures: "
                + "; ".join(
                    f"{row.kind} {int(row.parse_failures)}/{int(row.questions)}"
                    for row in failures.itertuples()
                )
            )
    relation = relations.get(task)
    if not relations.calibration_tasks(task):
        split = "no calibration split declared"
    elif calibration is None or calibration.table.empty:
        split = (
            f"none: no run of {', '.join(relations.calibration_tasks(task))} with questions for this model"
        )
    else:
        split = calibration.label()
    label = str(evaluation["model"].iloc[0])
    identity = data.collection.models.get(model, {})
    facts = {"model": display_name(label), "task": task, "calibration split": split}
    protocol = protocol_lines(config)
    if protocol:  # what capcal changed in a wrapped lm-eval task's protocol, one fact per line
        facts["protocol (lm-eval task sampled by capcal)"] = "; ".join(
            line.removeprefix(f"{task}: ") for line in protocol
        )
    inputs = section_inputs(computed, options.n_resamples, options.seed)
    name = display_name(label)
    section = capability_section(f"{name} · {task}", computed, facts, inputs)
    estimators = computed.in_section(EXAMPLES)
    section.tables.append(
        (
            "Examples (model text shown as text)",
            examples_table(computed.evaluation, estimators, options.max_examples),
        )
    )
    tasks = [task, *(calibration.tasks if calibration is not None else ())]
    tasks += [t for t, target in targets.items() if target in tasks or target is None]
    bookkeeping = ReportSection(
        title=f"Appendix · {name} · {task}: runs, joins and identity",
        facts={
            "model": label,
            "model identity": model
            if identity.get("source") == "checkpoint"
            else f"{model} ({identity.get('reason', '')})",
            "declared relations": relation.source
            if relation.declared
            else "none (no capcal_role in the task's config)",
        },
        tables=[("Runs used and left out", _runs_table(data, model, tasks))],
    )
    if joins:
        bookkeeping.tables.append(
            ("Joins: matched and unmatched question ids", pd.DataFrame(joins).fillna(""))
        )
    ranking = rank_estimators(inputs, name, task) if inputs is not None else None
    return SectionResult(model, name, task, computed, inputs, section, bookkeeping, ranking)


def _withhold_verdict(ranking: Ranking | None, warning: str | None) -> None:
    """A degenerate run's ranking (``warning``: greedy decoding with k > 1,
    ``analysis.runs.completeness.greedy_warnings``) gets the warning instead of a verdict, first among its
    warnings; the table stays, for the record."""
    if ranking is None or warning is None:
        return
    ranking.verdict = f"No verdict: {warning}."
    ranking.warnings.insert(0, f"{warning}.")


@dataclass
class SectionResult:
    """One (model, evaluation task): the estimators computed, the inputs of its parts, its report section,
    its bookkeeping (for the appendix) and its ranking (None without an estimator)."""

    model_id: str
    model: str  # display name
    task: str
    computed: ComputedEstimators
    inputs: SectionInputs | None
    section: ReportSection
    bookkeeping: ReportSection
    ranking: Ranking | None


@dataclass
class ReportAnalysis:
    """Everything the report computes before it is written: the runs read, the task relations, one
    :class:`SectionResult` per (model, evaluation task) and the routing sections."""

    data: ReportData
    relations: TaskRelations
    results: list[SectionResult]
    routing: list[ReportSection]


def analyze_runs(
    output_dirs: Sequence[str | Path],
    activations_dir: str | Path | None = None,
    options: ReportOptions | None = None,
) -> ReportAnalysis:
    """Read the lm-eval output folders and compute every (model, evaluation task) section (its estimators,
    metric tables with intervals, figures and ranking) and the routing sections; nothing is written."""
    options = options or ReportOptions()
    data = load_report_data(output_dirs, options.select)
    relations = task_relations(data.configs, options.calibration)
    targets = _targets(data.confidences)
    activations = Path(activations_dir) if activations_dir else None
    results: list[SectionResult] = []
    evaluations: dict[tuple[str, str], tuple[pd.DataFrame, list[str]]] = {}
    pairs = data.questions[["model_id", "task"]].drop_duplicates()
    greedy = greedy_warnings(data.collection.files, data.questions)
    for model, task in pairs.itertuples(index=False):
        if not relations.is_evaluation(task):
            continue
        result = _section(data, relations, targets, model, task, activations, options)
        _withhold_verdict(result.ranking, greedy.get((model, task)))
        computed = result.computed
        # routing pairs models on the same questions, whatever prompt format a task asks them in
        questions = relations.question_set(task)
        if (model, questions) not in evaluations or task == questions:
            evaluations[(model, questions)] = (computed.evaluation, computed.in_section(ROUTING))
        results.append(result)
    routing = []
    for eval_task in sorted({task for _, task in evaluations}):
        section = routing_section(evaluations, eval_task)
        if section is not None:
            routing.append(section)
    return ReportAnalysis(data, relations, results, routing)
