"""Reading the report's Markdown back in tests: its sections, its tables, and the check that every cell of
the "Across models and tasks" grids is the cell of its (model, task) section. Loaded by path through the
``report_markdown`` fixture (tests/conftest.py): the test folders are not packages."""

from __future__ import annotations

import re

import pandas as pd


def section_of(markdown: str, heading: str) -> str:
    """The text of the Markdown section that starts with ``heading`` (up to the next heading of its level)."""
    level = heading.split(" ", 1)[0]
    start = markdown.index(heading + "\n")
    rest = markdown[start + len(heading) + 1 :]
    ends = [m.start() for m in re.finditer(rf"(?m)^{level} ", rest)]
    return rest[: ends[0]] if ends else rest


def tables(text: str) -> dict[str, list[dict[str, str]]]:
    """Every Markdown table in ``text`` under its ``###``/``####`` caption: rows as header -> cell."""
    tables, caption, lines = {}, None, text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("#"):
            caption = line.lstrip("#").strip()
        elif line.startswith("| ") and index + 1 < len(lines) and lines[index + 1].startswith("|---"):
            header = [c.strip() for c in line.strip("|").split(" | ")]
            rows = []
            for row in lines[index + 2 :]:
                if not row.startswith("| "):
                    break
                rows.append(
                    dict(zip(header, [c.strip() for c in row.strip().strip("|").split(" | ")], strict=True))
                )
            tables[caption] = rows
    return tables


def assert_grid_matches_sections(markdown: str, rows: pd.DataFrame) -> int:
    """Every cell of every headline grid (``metric_grid`` of ``rows``) equals the cell of the same estimator
    and metric in its (model, task) section of the report (capability or leakage-free table); returns the
    number of cells checked."""
    from analysis.report import markdown_text
    from analysis.report.paper_table import HEADLINE_METRICS, metric_grid
    from analysis.report.sections import metric_header

    several = rows["model"].nunique() > 1
    checked = 0
    for metric in [m for m in HEADLINE_METRICS if m in set(rows["metric"])]:
        grid = metric_grid(rows, metric)
        header = markdown_text(metric_header(metric))
        for column in grid.columns[1:]:
            model, task = column.split(" · ") if several else (rows["model"].iloc[0], column)
            section_tables = tables(
                section_of(markdown, f"## {markdown_text(model)} · {markdown_text(task)}")
            )
            cells = {}
            for caption, table in section_tables.items():
                if caption.startswith(("Capability calibration", "Leakage-free")):
                    for row in table:
                        for key, value in row.items():
                            if key.split(" †")[0] == header:
                                cells[row["estimator"]] = value
            for estimator, cell in zip(grid["estimator"], grid[column], strict=True):
                name = markdown_text(estimator.removesuffix(" (leaky)"))
                if cell == "":
                    assert cells.get(name, "") == "", (metric, column, estimator)
                    continue
                assert markdown_text(cell) == cells[name], (metric, column, estimator)
                checked += 1
    return checked


def ranking_rows(markdown: str, model: str, task: str) -> list[dict[str, str]]:
    """The rows of the summary's "Estimators ranked" table of (``model``, ``task``)."""
    summary = section_of(markdown, f"### Summary · {model} · {task}")
    (rows,) = [rows for caption, rows in tables(summary).items() if caption.startswith("Estimators ranked")]
    return rows


def footnotes(text: str) -> dict[str, list[str]]:
    """The footnotes under every table in ``text``, by the table's ``###``/``####`` caption: the italic lines
    between the table and the next heading, unescaped (``_‡ a\\_b: ..._`` -> ``‡ a_b: ...``)."""
    notes: dict[str, list[str]] = {}
    caption, after_table = None, False
    for line in text.splitlines():
        if line.startswith("#"):
            caption, after_table = line.lstrip("#").strip(), False
        elif line.startswith("| "):
            after_table = True
        elif after_table and line.startswith("_") and line.endswith("_") and caption is not None:
            notes.setdefault(caption, []).append(re.sub(r"\\(.)", r"\1", line[1:-1]))
    return notes
