"""``capcal report``: writes the report of lm-eval output folders (``report.html`` and ``report.md``).

``analysis.report.analyze`` reads the runs and computes the (model, evaluation task) sections; this module
adds the summary, the estimator x task grids (``paper_table``), routing, the Self-Calibration comparison
(``self_calibration``), judge agreement and the appendix, and writes them (``analysis.rendering``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.evaluation.rescore import rescore_notes
from analysis.judge.agreement import rescore_agreement
from analysis.rendering import ReportFiles, ReportSection, write_report
from analysis.report.analyze import (
    ReportData,
    ReportOptions,
    analyze_runs,
)
from analysis.report.paper_table import grid_section, metric_rows
from analysis.report.sections import (
    display_name,
    judge_agreement_section,
)
from analysis.report.self_calibration import self_calibration_sections
from analysis.report.summary import (
    compares_several,
    measured,
    summary_sections,
)
from analysis.runs.versions import run_versions, version_mix_warnings
from capcal_tasks.relations import EVALUATION, TaskRelations

__all__ = [
    "ReportOptions",
    "agreement_sections",
    "build_report",
    "overview_section",
]


def _relative(path: str | Path, roots: Sequence[str | Path]) -> str:
    """``path`` relative to the output folder given that holds it (``root/...``), else as it is."""
    path = Path(path)
    for root in roots:
        try:
            return str(Path(Path(root).name) / path.resolve().relative_to(Path(root).resolve()))
        except ValueError:
            continue
    return str(path)


def overview_section(
    data: ReportData,
    relations: TaskRelations,
    versions: pd.DataFrame,
    roots: Sequence[str | Path] = (),
) -> ReportSection:
    """Every run found (used or left out, and why), files read once (paths relative to the folder given in
    ``roots`` that holds them), and the relations of the tasks run (the report's appendix). ``versions``: the
    runs' ``analysis.runs.versions.run_versions`` table, read once by the caller."""
    runs = data.collection.runs
    rows = []
    for task in sorted(set(runs["task"])):
        relation = relations.get(task) if task in relations else None
        if relation is None:
            rows.append(
                {
                    "task": task,
                    "role": "undeclared",
                    "calibration split(s)": "",
                    "scores": "",
                    "declared in": "",
                }
            )
            continue
        if relation.has(EVALUATION):
            calibration = ", ".join(relation.calibration_tasks) or "no calibration split declared"
        else:
            calibration = ""
        rows.append(
            {
                "task": task,
                "role": ", ".join(sorted(relation.roles)) + ("" if relation.declared else " (undeclared)"),
                "calibration split(s)": calibration,
                "scores": relation.target_task or "",
                "declared in": relation.source,
            }
        )
    section = ReportSection(
        title="Appendix: runs and task relations",
        facts={
            "runs found": len(runs),
            "runs used": int(runs["used"].sum()) if len(runs) else 0,
            "files read once (same content)": len(data.collection.duplicates),
            "entries skipped": len(data.collection.skipped),
        },
        tables=[("Task relations", pd.DataFrame(rows))],
    )
    if len(runs):
        table = runs[["model", "task", "kind", "run_id", "used", "reason", "labels"]].assign(
            model=[display_name(str(m)) for m in runs["model"]]
        )
        section.tables.append(("Runs: used and left out", table))
    section.notes += [
        f"read once: {_relative(path, roots)} (same content as {_relative(same, roots)})"
        for path, same in data.collection.duplicates
    ]
    section.notes += [
        f"skipped: {_relative(path, roots)}: {reason}" for path, reason in data.collection.skipped
    ]
    section.tables.append(("Versions: task, lm-eval, capcal", versions))
    section.notes += rescore_notes(data.collection.files)
    section.notes += [
        f"model {label} is known only by its label (no checkpoint fingerprint)"
        for label in data.collection.unresolved_models()
    ]
    return section


def agreement_sections(data: ReportData) -> list[ReportSection]:
    """Judge vs rule agreement (``analysis.judge.agreement``) for every task of each rescored run used."""
    return [
        judge_agreement_section(rescore_agreement(file.path, file.rescore, file.task), file.model)
        for file in data.collection.files
        if isinstance(getattr(file, "rescore", None), dict)
    ]


def build_report(
    output_dirs: Sequence[str | Path],
    report_dir: str | Path,
    activations_dir: str | Path | None = None,
    options: ReportOptions | None = None,
    title: str = "capcal report",
    *,
    notices: Sequence[str] = (),
) -> ReportFiles:
    """Write the report for the lm-eval output folders ``output_dirs`` into ``report_dir``.

    The report opens with the summary (per model and task the verdict: which confidence to use and how sure;
    what was measured; then per model and task, those that compare several estimators first, a forest plot
    of the estimators ranked by the primary metric, the ranking with paired intervals, a sentence whether
    the best is distinguishable from the next, and warnings where the conclusion is weak), then the
    estimator x task grids of the headline metrics, the per-(model, task) sections, routing, the
    Self-Calibration before/after comparison when its runs are among ``output_dirs``, judge agreement, and
    ends with the appendix (runs, relations, joins, identity).

    ``activations_dir`` overrides the activations folder named in the sampling runs' metadata (capcal-hf's
    ``activations=DIR``). ``notices`` are warnings about the inputs found by the caller (e.g. a missing
    activations folder); they are shown, escaped, in the summary's warnings.
    """
    options = options or ReportOptions()
    analysis = analyze_runs(output_dirs, activations_dir, options)
    # the (model, task) sections that compare several estimators first, in the summary's order
    results = sorted(analysis.results, key=lambda result: not compares_several(result.ranking))
    rankings = [r.ranking for r in results if r.ranking is not None]
    what = [measured(r.model, r.task, r.computed.evaluation, r.inputs is not None) for r in results]
    versions = run_versions(analysis.data.collection.files)  # read once: the warnings and the appendix
    mixed = version_mix_warnings(versions)
    notices = [*notices, *(line for line in mixed if line not in notices)]
    sections = summary_sections(rankings, notices, options.n_resamples, what)
    grid = grid_section(metric_rows(results))
    if grid is not None:
        sections.append(grid)
    sections += [r.section for r in results]
    sections += analysis.routing
    sections += self_calibration_sections(output_dirs, options.n_resamples, options.seed)
    sections += agreement_sections(analysis.data)
    sections.append(overview_section(analysis.data, analysis.relations, versions, output_dirs))
    sections += [r.bookkeeping for r in results]
    return write_report(sections, report_dir, title=title)
