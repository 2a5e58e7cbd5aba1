"""Estimator x task (x model) tables of the headline metrics, the layout of a paper's central tables.

:func:`paper_table` reads lm-eval output folders exactly as ``capcal report`` does (``analyze_runs``) and
returns one row per (model, task, estimator, metric) with the estimate and its 95% interval (percentile
bootstrap; for the debiased ECE the jackknife's, ``interval_method``): the
numbers of the report's per-section tables. :func:`metric_grid` turns those rows into the grid of one metric
(rows: estimators; columns: tasks, or ``model · task`` with several models; cells ``estimate [low, high]``)
and :func:`format_table` writes the grids as Markdown or LaTeX, or the rows as CSV or JSON. ``capcal table``
is this module on the command line.

The paper-form consistency ``consistency_k{k}`` is marked ``(leaky)`` in every grid: its draws overlap the
samples that define its target (``analysis.report.summary``).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.rendering import ReportSection, markdown_table
from analysis.report.analyze import analyze_runs
from analysis.report.calibration_table import HIGHER_IS_BETTER, interval_label
from analysis.report.figures import figures_not_rendered
from analysis.report.metric_ranges import marked_interval, range_footnotes
from analysis.report.registry import LEAKY
from analysis.report.sections import higher_is_better, metric_header

__all__ = [
    "BLANK_NOTE",
    "FORMATS",
    "HEADLINE_METRICS",
    "format_table",
    "grid_section",
    "metric_grid",
    "metric_rows",
    "paper_table",
    "sampling_note",
    "unknown_metric_problem",
]

# The headline metrics, in the order the grids appear; those a run does not compute are skipped.
HEADLINE_METRICS = (
    "corrected_capability_brier",
    "capability_brier_skill",
    "capability_ece_debiased",
    "soft_auroc",
)
FORMATS = ("markdown", "latex", "csv", "json")
BLANK_NOTE = (
    "a blank cell: that estimator was not computed for that model and task (its inputs were not run: e.g. no "
    "probe without activations, no consistency with too few samples per question; the random row only where "
    "its expectation is exact)"
)
ROW_COLUMNS = [
    "model", "task", "estimator", "metric", "estimate", "low", "high", "interval_method", "questions",
    "sampling", "leaky", "higher_is_better",
]  # fmt: skip


def metric_rows(results: Sequence) -> pd.DataFrame:
    """The metric rows of the report's (model, evaluation task) sections (``analyze_runs(...).results``):
    model (display name), task, estimator, metric, estimate, low, high, questions, sampling ("fixed k" or
    "adaptive (looks ..., rule ...)", from the run's records), leaky, higher_is_better;
    the leakage-free consistency's rows are those of its own table (scored against mu_hat_lf)."""
    frames = []
    for result in results:
        inputs = result.inputs
        if inputs is None:
            continue
        parts = [inputs.metrics]
        if inputs.leakage_free_metrics is not None:
            parts.append(inputs.leakage_free_metrics)
        frame = pd.concat(parts, ignore_index=True)
        frames.append(frame.assign(model=result.model, task=result.task))
    if not frames:
        return pd.DataFrame(columns=ROW_COLUMNS)
    rows = pd.concat(frames, ignore_index=True)
    rows["leaky"] = rows["estimator"].map(lambda name: bool(LEAKY.match(str(name))))
    rows["higher_is_better"] = rows["metric"].map(higher_is_better)
    return rows[ROW_COLUMNS]


def unknown_metric_problem(metrics: Sequence[str] | None) -> str | None:
    """The one-line refusal of a metric name that no calibration table has (``HIGHER_IS_BETTER`` lists
    every one), with the closest known name, or None. Checked before any run is read, so a misspelt
    ``--metric`` costs no computation."""
    unknown = [metric for metric in metrics or () if metric not in HIGHER_IS_BETTER]
    if not unknown:
        return None
    close = difflib.get_close_matches(unknown[0], list(HIGHER_IS_BETTER), n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]}?" if close else ""
    what = "not a calibration-table metric" if len(unknown) == 1 else "not calibration-table metrics"
    return f"--metric {', '.join(unknown)}: {what} (known: {', '.join(HIGHER_IS_BETTER)}){hint}"


def paper_table(
    output_dirs: Sequence[str | Path],
    metrics: Sequence[str] | None = None,
    activations_dir: str | Path | None = None,
    options=None,
) -> pd.DataFrame:
    """One row per (model, evaluation task, estimator, metric) of the runs under ``output_dirs``, as
    :func:`metric_rows` (``options``: ``analysis.report.ReportOptions``, as for ``capcal report``; the same
    settings give the same numbers as the report). ``metrics`` keeps only these metrics (default: all); a
    name that is no metric at all (``unknown_metric_problem``) raises ``ValueError`` before any run is read,
    one that these runs did not compute after."""
    problem = unknown_metric_problem(metrics)
    if problem is not None:
        raise ValueError(problem)
    with figures_not_rendered():  # rows only: the report's figures are not drawn
        rows = metric_rows(analyze_runs(output_dirs, activations_dir, options).results)
    if rows.empty:
        folders = ", ".join(str(folder) for folder in output_dirs)
        raise ValueError(f"no evaluation task with a confidence estimator in {folders}: nothing to tabulate")
    if metrics is not None:
        unknown = sorted(set(metrics) - set(rows["metric"]))
        if unknown:
            raise ValueError(
                f"metric(s) {', '.join(unknown)} not computed; known: "
                + ", ".join(sorted(set(rows["metric"])))
            )
        rows = rows[rows["metric"].isin(list(metrics))]
    return rows.reset_index(drop=True)


def metric_grid(rows: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The grid of ``metric``: one row per estimator (paper-form consistency marked ``(leaky)``), one column
    per task (``model · task`` when there are several models), cells ``estimate [low, high]`` (3 decimals,
    with the range marks of ``analysis.report.metric_ranges``; empty where the estimator was not computed:
    :data:`BLANK_NOTE`)."""
    chosen = rows[rows["metric"] == metric]
    several = chosen["model"].nunique() > 1
    column = [f"{m} · {t}" if several else t for m, t in zip(chosen["model"], chosen["task"], strict=True)]
    names = [
        f"{e} (leaky)" if leaky else e for e, leaky in zip(chosen["estimator"], chosen["leaky"], strict=True)
    ]
    cells = [
        marked_interval(metric, e, lo, hi)
        for e, lo, hi in zip(chosen["estimate"], chosen["low"], chosen["high"], strict=True)
    ]
    long = pd.DataFrame({"estimator": names, "column": column, "cell": cells})
    grid = long.pivot(index="estimator", columns="column", values="cell")
    grid = grid.reindex(index=list(dict.fromkeys(names)), columns=list(dict.fromkeys(column))).fillna("")
    grid.columns.name = None
    return grid.reset_index()


def sampling_note(rows: pd.DataFrame) -> str:
    """One line saying how each column's questions were sampled: "sampling: task: fixed k; ..." (the rows'
    ``sampling``: "fixed k" or "adaptive (looks ..., rule ...)", whose metrics are the estimates after
    stopping)."""
    several = rows["model"].nunique() > 1
    labels: dict[str, dict[str, None]] = {}
    for m, t, label in zip(rows["model"], rows["task"], rows["sampling"], strict=True):
        labels.setdefault(f"{m} · {t}" if several else t, {})[str(label)] = None
    return "sampling: " + "; ".join(f"{column}: {' / '.join(found)}" for column, found in labels.items())


def _metrics_present(rows: pd.DataFrame, metrics: Sequence[str] | None) -> list[str]:
    present = set(rows["metric"])
    return [m for m in (metrics or HEADLINE_METRICS) if m in present]


def grid_section(rows: pd.DataFrame, metrics: Sequence[str] | None = None) -> ReportSection | None:
    """The report's "Across models and tasks" section: one grid per headline metric (None when no section
    has a metric)."""
    chosen = _metrics_present(rows, metrics)
    if not chosen:
        return None
    captions = [
        f"{metric_header(m)}: estimators x tasks, each cell with its {interval_label(m)}" for m in chosen
    ]
    grids = [metric_grid(rows, m) for m in chosen]
    footnotes = {}
    for caption, metric, grid in zip(captions, chosen, grids, strict=True):
        lines = [
            *range_footnotes(rows[rows["metric"] == metric]),
            sampling_note(rows[rows["metric"] == metric]),
        ]
        if (grid.iloc[:, 1:] == "").to_numpy().any():
            lines.append(BLANK_NOTE)
        footnotes[caption] = lines
    return ReportSection(
        title="Across models and tasks",
        notes=[
            "Each cell: estimate [95% interval], the same numbers as the per-task sections: a percentile "
            "bootstrap interval over questions, except the debiased ECE's (estimate +- 1.96 jackknife SE; "
            "its bootstrap interval does not cover); "
            "↓ lower is better, ↑ higher. Export: capcal table OUTPUT_DIR... --metric METRIC --format "
            "csv|latex|markdown|json."
        ],
        tables=list(zip(captions, grids, strict=True)),
        footnotes=footnotes,
    )


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
    "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "↑": r"$\uparrow$",
    "↓": r"$\downarrow$", "·": r"$\cdot$", "‡": r"\ddag{}", "§": r"\S{}", "¶": r"\P{}",
}  # fmt: skip


def _latex(text: object) -> str:
    return "".join(_LATEX_SPECIAL.get(char, char) for char in str(text))


def _latex_grid(grid: pd.DataFrame, caption: str, notes: Sequence[str] = ()) -> str:
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{_latex(caption)}}}",
        r"\begin{tabular}{l" + "c" * (len(grid.columns) - 1) + "}",
        r"\toprule",
        " & ".join(_latex(c) for c in grid.columns) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(_latex(v) for v in row) + r" \\" for row in grid.itertuples(index=False)]
    lines += [r"\bottomrule", r"\end{tabular}"]
    lines += [rf"\par\footnotesize {_latex(note)}" for note in notes]
    lines += [r"\end{table}"]
    return "\n".join(lines)


def format_table(rows: pd.DataFrame, metrics: Sequence[str] | None = None, fmt: str = "markdown") -> str:
    """``rows`` (:func:`paper_table`) as text: ``markdown`` and ``latex`` write one grid per metric
    (:func:`metric_grid`; LaTeX with booktabs rules, text escaped), ``csv`` and ``json`` the rows of the
    chosen metrics themselves (numbers, one row per model, task, estimator and metric). ``metrics``:
    default the headline metrics present."""
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    chosen = _metrics_present(rows, metrics)
    if fmt == "csv":
        return rows[rows["metric"].isin(chosen)].to_csv(index=False)
    if fmt == "json":
        records = json.loads(rows[rows["metric"].isin(chosen)].to_json(orient="records"))
        return json.dumps(records, indent=2) + "\n"
    blocks = []
    for metric in chosen:
        caption = f"{metric_header(metric)} (estimate [{interval_label(metric)}])"
        grid = metric_grid(rows, metric)
        notes = [
            *range_footnotes(rows[rows["metric"] == metric]),
            sampling_note(rows[rows["metric"] == metric]),
        ]
        if fmt == "latex":
            blocks.append(_latex_grid(grid, caption, notes))
        else:
            blocks.append("\n\n".join([caption, markdown_table(grid), *notes]))
    return "\n\n".join(blocks) + "\n"
