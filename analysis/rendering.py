"""Rendering report sections: a self-contained ``report.html`` and a ``report.md`` summary.

Shared by ``capcal report`` (``analysis.report``) and ``capcal selfcal compare``
(``analysis.self_calibration.compare``), so neither imports the other for it.

The HTML needs no network to open: figures are inline PNGs (``data:`` URIs), styles are inline, there is
no script. Every piece of text that comes from data (model names, questions, model responses) is HTML-escaped,
so a ``<script>`` in a response is shown as text. The Markdown summary holds the same tables and links the
figures, which are also written as PNG files; its text goes through :func:`markdown_text`, so no raw HTML,
link, image, autolink or heading from the data survives into it either.
"""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

__all__ = [
    "Figure",
    "ReportFiles",
    "ReportSection",
    "format_interval",
    "markdown_table",
    "markdown_text",
    "write_report",
]

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .8em 0; font-size: .85em; }
th, td { border: 1px solid #ddd; padding: .25em .5em; text-align: right; vertical-align: top;
  white-space: nowrap; }
th { white-space: normal; min-width: 4em; }
th:first-child, td:first-child { text-align: left; }
td.text { text-align: left; min-width: 7em; max-width: 40em; white-space: pre-wrap; word-break: break-word; }
.scroll { overflow-x: auto; }
figure { display: inline-block; margin: .5em; vertical-align: top; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: .8em; color: #555; max-width: 60em; }
.note { color: #555; font-size: .85em; }
.sentence { font-size: 1.05em; margin: .4em 0; }
ul.warnings { background: #fff4e5; border-left: 4px solid #e69500; padding: .5em .5em .5em 2em; }
.guide { color: #444; font-size: .85em; margin: .2em 0 .6em; }
h3.figure { font-size: 1em; margin-bottom: .2em; }
.footnote { color: #555; font-size: .8em; margin: .1em 0 .3em; max-width: 80em; }
"""


@dataclass(frozen=True)
class Figure:
    """A figure: its heading (``caption``), the PNG, and a one-line reading guide (what to look for)."""

    caption: str
    png: bytes
    guide: str = ""


@dataclass
class ReportSection:
    """One block of the report: a title, plain-sentence conclusions, key facts, warnings, notes, tables and
    figures, rendered in that order (the figures right after the sentences with ``figures_first``); each
    table or figure is followed by its ``footnotes`` (keyed by its caption); ``level`` 3 makes it a
    subsection of the section before it."""

    title: str
    facts: dict[str, object] = field(default_factory=dict)
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sentences: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    level: int = 2
    footnotes: dict[str, list[str]] = field(default_factory=dict)  # table or figure caption -> lines under it
    figures_first: bool = False  # figures right after the sentences (the summary's forest plots)


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    markdown: Path
    figures: list[Path]


def format_interval(estimate: float, low: float, high: float, digits: int = 3) -> str:
    """``0.123 [0.100, 0.150]``; just the estimate when there is no interval; ``n/a`` for NaN."""
    if estimate is None or (isinstance(estimate, float) and math.isnan(estimate)):
        return "n/a"
    text = f"{estimate:.{digits}f}"
    if low is not None and high is not None and not (math.isnan(low) or math.isnan(high)):
        text += f" [{low:.{digits}f}, {high:.{digits}f}]"
    return text


# What can open Markdown markup inside a line (CommonMark and GitHub's extensions), each backslash-escaped
# only where it can: a backslash before punctuation or at the end; a backquote (code), ``*`` and ``~``
# (emphasis, strikethrough), ``|`` (a table cell), ``#`` (a heading's closing sequence), ``$`` (math in
# Jupyter and on GitHub); an underscore at a word's edge (emphasis); ``<`` before a letter, ``/``, ``!`` or
# ``?`` (raw HTML, autolinks); an ``&`` that would start an entity; a ``]`` before ``(``, ``[`` or ``:`` (an
# inline or reference link or image, a link definition); the ``:`` of ``scheme:/`` and the ``@`` of an
# address (GitHub's autolinks). Brackets and parentheses are otherwise left alone: backslash-parenthesis and
# backslash-bracket are math delimiters to Jupyter and pandoc, and ``0.1 [0.0, 0.2]`` or ``(leaky)`` opens
# nothing.
_MARKDOWN_SPECIAL = re.compile(
    r"(\\(?=[!-/:-@\[-`{-~]|$)|[`*~|#$]|<(?=[A-Za-z/!?])|&(?=#?\w+;)|\](?=[(\[:])|:(?=/)"
    r"|@(?=[\w-]+\.[\w-])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_WWW = re.compile(r"(?i)\bwww\.")
_SCHEME = re.compile(r"(?i)\b(mailto|xmpp):")
# a block that a line's first characters open: a list item (``- ``, ``+ ``, ``1. ``, ``1) ``), a block quote
_BLOCK_START = re.compile(r"^(?:([-+])(?= |$)|(>)|(\d{1,9})([.)])(?= |$))")


def markdown_text(text: object) -> str:
    """``text`` as literal Markdown inside a line, escaped only where Markdown would read markup, so that the
    raw text stays readable (no HTML entities, no backslash before a parenthesis or bracket): control and
    bidirectional characters removed, whitespace collapsed, the characters of :data:`_MARKDOWN_SPECIAL`
    backslash-escaped where they could open markup (raw HTML, links, images, emphasis, code, tables, math,
    autolinks), the ``:`` of ``mailto:`` and the ``.`` of ``www.`` too; ``javascript:`` or ``data:`` stay
    inert text without link syntax. An underscore between two letters or digits stays as it is (it cannot
    open emphasis there)."""
    text = " ".join(_CONTROL.sub("", str(text)).split())
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    text = _SCHEME.sub(r"\1\\:", text)
    return _WWW.sub(lambda match: match.group(0)[:3] + "\\.", text)


def markdown_line(text: object) -> str:
    """``text`` as a Markdown paragraph of its own: :func:`markdown_text`, and a list marker or block quote
    at its start escaped (a backslash before the ``-``, ``+``, ``>`` or the ``.`` of ``1.``)."""
    return _BLOCK_START.sub(
        lambda m: "\\" + m.group(0) if m.group(3) is None else f"{m.group(3)}\\{m.group(4)}",
        markdown_text(text),
    )


def _link_text(text: str) -> str:
    """Markdown text as the text of a link or image: a bracket escaped unless the brackets are balanced
    (an unmatched one would end the link's text early)."""
    depth = 0
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth < 0:
            break
    if depth == 0:
        return text
    return re.sub(r"(?<!\\)([\[\]])", r"\\\1", text)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def _looks_numeric(text: str) -> bool:
    """A number, an interval or ``n/a``, with the range marks of ``analysis.report.metric_ranges``."""
    return bool(re.fullmatch(r"[\d.eE+\-\[\], %/n‡§¶]*|n/a", text))


_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


def _breakable(text: str) -> str:
    """``text`` HTML-escaped, with a line-break opportunity (``<wbr>``) after each underscore: for headers and
    name cells (``consistency_lf_k5``), so that long metric and estimator names wrap at their parts instead
    of widening the table past the page (the escaping comes first, so no markup can form)."""
    return html.escape(text).replace("_", "_<wbr>")


def _html_table(frame: pd.DataFrame) -> str:
    head = "".join(f"<th>{_breakable(str(c))}</th>" for c in frame.columns)
    body = []
    for row in frame.itertuples(index=False):
        cells = []
        for value in row:
            text = _cell(value)
            text = _breakable(text) if _NAME.fullmatch(text) else html.escape(text)
            css = ' class="text"' if isinstance(value, str) and not _looks_numeric(value) else ""
            cells.append(f"<td{css}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f"<div class='scroll'>{table}</div>"


def markdown_table(frame: pd.DataFrame) -> str:
    """``frame`` as a Markdown table, every header and cell through :func:`markdown_text`."""

    def clean(value: object) -> str:
        return markdown_text(_cell(value))

    lines = ["| " + " | ".join(clean(c) for c in frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(clean(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "section"


def _write_footnotes(lines: Sequence[str], html_parts: list[str], markdown: list[str]) -> None:
    """The footnotes under a table or figure: small print in the HTML, italic lines in the Markdown."""
    for line in lines:
        html_parts.append(f"<p class='footnote'>{html.escape(line)}</p>")
        markdown += [f"_{markdown_text(line)}_", ""]


def _write_figures(
    section: ReportSection,
    html_parts: list[str],
    markdown: list[str],
    written: list[Path],
    figure_dir: Path,
    anchor: str,
) -> None:
    """Each figure of ``section``: its PNG file, an inline image under its heading and reading guide in the
    HTML, a link in the Markdown; then its footnotes."""
    sub = "#" * (section.level + 1)
    for index, figure in enumerate(section.figures, start=1):
        path = figure_dir / f"{anchor}-{index}.png"
        path.write_bytes(figure.png)
        written.append(path)
        data = base64.b64encode(figure.png).decode("ascii")
        alt = html.escape(figure.caption, quote=True)
        html_parts.append(
            f"<h{section.level + 1} class='figure'>{html.escape(figure.caption)}</h{section.level + 1}>"
            + (f"<p class='guide'>{html.escape(figure.guide)}</p>" if figure.guide else "")
            + f"<figure><img alt='{alt}' src='data:image/png;base64,{data}'></figure>"
        )
        markdown += [f"{sub} {markdown_text(figure.caption)}", ""]
        if figure.guide:
            markdown += [f"_{markdown_text(figure.guide)}_", ""]
        markdown += [f"![{_link_text(markdown_text(figure.caption))}](figures/{path.name})", ""]
        _write_footnotes(section.footnotes.get(figure.caption, []), html_parts, markdown)


def write_report(
    sections: Sequence[ReportSection], output_dir: str | Path, title: str = "capcal report"
) -> ReportFiles:
    """Write ``report.html``, ``report.md`` and ``figures/*.png`` into ``output_dir``."""
    output_dir = Path(output_dir)
    figure_dir = output_dir / "figures"
    figure_dir.mkdir(parents=True, exist_ok=True)
    html_parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    markdown = [f"# {markdown_text(title)}", ""]
    written: list[Path] = []
    for number, section in enumerate(sections, start=1):
        anchor = f"s{number}-{_slug(section.title)}"
        level = section.level
        html_parts.append(f"<h{level} id='{anchor}'>{html.escape(section.title)}</h{level}>")
        markdown += [f"{'#' * level} {markdown_text(section.title)}", ""]
        for sentence in section.sentences:
            html_parts.append(f"<p class='sentence'>{html.escape(sentence)}</p>")
            markdown += [markdown_line(sentence), ""]
        figures = (html_parts, markdown, written, figure_dir, anchor)
        if section.figures_first:
            _write_figures(section, *figures)
        if section.facts:
            facts = pd.DataFrame(
                {"": list(section.facts), "value": [_cell(v) for v in section.facts.values()]}
            )
            html_parts.append(_html_table(facts))
            markdown += [
                f"- {markdown_text(key)}: {markdown_text(_cell(value))}"
                for key, value in section.facts.items()
            ] + [""]
        if section.warnings:
            items = "".join(f"<li>{html.escape(w)}</li>" for w in section.warnings)
            html_parts.append(f"<ul class='warnings'>{items}</ul>")
            markdown += [f"- warning: {markdown_text(w)}" for w in section.warnings] + [""]
        for note in section.notes:
            html_parts.append(f"<p class='note'>{html.escape(note)}</p>")
            markdown += [f"_{markdown_text(note)}_", ""]
        sub = "#" * (level + 1)
        for caption, frame in section.tables:
            html_parts.append(f"<h{level + 1}>{html.escape(caption)}</h{level + 1}>{_html_table(frame)}")
            markdown += [f"{sub} {markdown_text(caption)}", "", markdown_table(frame), ""]
            _write_footnotes(section.footnotes.get(caption, []), html_parts, markdown)
        if not section.figures_first:
            _write_figures(section, *figures)
    html_parts.append("</body></html>")
    html_path = output_dir / "report.html"
    html_path.write_text("\n".join(html_parts), encoding="utf-8")
    markdown_path = output_dir / "report.md"
    markdown_path.write_text("\n".join(markdown) + "\n", encoding="utf-8")
    return ReportFiles(html_path, markdown_path, written)
