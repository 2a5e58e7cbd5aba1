"""``analysis.rendering.write_report``, fast: where each part of a section lands in report.md and report.html,
checked against a section built by hand whose every caption, guide and footnote is distinct (so a part read
from another part's key, or placed under another figure, shows)."""

from __future__ import annotations

import pandas as pd

from analysis.rendering import Figure, ReportSection, write_report

PNG = b"\x89PNG\r\n\x1a\n not a real image: write_report only copies and embeds the bytes"


def _section() -> ReportSection:
    return ReportSection(
        title="toy section",
        figures=[
            Figure("first figure", PNG, guide="look at the first diagonal"),
            Figure("second figure", PNG + b"2", guide="look at the second band"),
        ],
        tables=[("the table", pd.DataFrame({"a": [1], "b": [2]}))],
        footnotes={
            "first figure": ["a note under the first figure"],
            "second figure": ["a note under the second figure", "and its second line"],
            "the table": ["a note under the table"],
        },
    )


def test_each_figure_has_its_heading_guide_image_and_own_footnotes_in_that_order(tmp_path) -> None:
    files = write_report([_section()], tmp_path / "report", title="t")
    lines = [line for line in files.markdown.read_text(encoding="utf-8").splitlines() if line]
    first = lines.index("### first figure")
    assert lines[first : first + 4] == [
        "### first figure",
        "_look at the first diagonal_",
        f"![first figure](figures/{files.figures[0].name})",
        "_a note under the first figure_",
    ]
    second = lines.index("### second figure")
    assert lines[second : second + 5] == [
        "### second figure",
        "_look at the second band_",
        f"![second figure](figures/{files.figures[1].name})",
        "_a note under the second figure_",
        "_and its second line_",
    ]
    assert [path.read_bytes() for path in files.figures] == [PNG, PNG + b"2"]
    table = lines.index("### the table")
    assert lines[table + 1 : table + 5] == ["| a | b |", "|---|---|", "| 1 | 2 |", "_a note under the table_"]
    page = files.html.read_text(encoding="utf-8")
    for caption, notes in _section().footnotes.items():
        heading = page.index(f">{caption}</h")
        following = page.index("<h", heading + 1) if "<h" in page[heading + 1 :] else len(page)
        for note in notes:
            assert heading < page.index(f"<p class='footnote'>{note}</p>") < following, (caption, note)


def test_sentences_facts_warnings_and_notes_land_in_order_each_from_its_own_field(tmp_path) -> None:
    """The documented order, each part from its own field (all distinct here), in both files."""
    section = ReportSection(
        title="parts",
        sentences=["the sentence"],
        facts={"the fact": 3},
        warnings=["the warning <b>"],
        notes=["the note"],
    )
    files = write_report([section], tmp_path / "report", title="t")
    lines = [line for line in files.markdown.read_text(encoding="utf-8").splitlines() if line]
    start = lines.index("## parts")
    expected = ["the sentence", "- the fact: 3", "- warning: the warning \\<b>", "_the note_"]
    assert lines[start + 1 :] == expected
    page = files.html.read_text(encoding="utf-8")
    parts = [
        "<p class='sentence'>the sentence</p>",
        "<ul class='warnings'><li>the warning &lt;b&gt;</li></ul>",
        "<p class='note'>the note</p>",
    ]
    positions = [page.index(part) for part in parts]
    assert positions == sorted(positions) and page.index(">the fact<") < positions[1]


def test_report_files_are_utf8_under_an_ascii_locale(tmp_path) -> None:
    """A C/POSIX locale without UTF-8 mode (default text encoding ASCII, some clusters' batch shells): model
    text with non-ASCII letters still lands in report.html and report.md, written as UTF-8 (a file written in
    the locale's encoding would fail, or differ, there)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "report"
    title, heading = "Résumé", "Größe — café"
    sentence, question = "Is the naïve answer “42”? ✓", "Über 2 + 2?"
    code = (  # the text as ASCII escapes: the command line itself is read in the locale's encoding
        "import locale, sys\n"
        "import pandas as pd\n"
        "from analysis.rendering import ReportSection, write_report\n"
        "assert locale.getpreferredencoding(False) != 'UTF-8' and not sys.flags.utf8_mode\n"
        f"section = ReportSection({ascii(heading)}, sentences=[{ascii(sentence)}],\n"
        f"                        tables=[('examples', pd.DataFrame({{'question': [{ascii(question)}]}}))])\n"
        f"write_report([section], {ascii(str(out))}, title={ascii(title)})\n"
    )
    env = {**os.environ, "LANG": "C", "LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parents[2]), env.get("PYTHONPATH")]))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    page = (out / "report.html").read_bytes().decode("utf-8")
    assert f"<title>{title}</title>" in page and f">{heading}</h2>" in page
    assert sentence in page and question in page
    markdown = (out / "report.md").read_bytes().decode("utf-8")
    assert f"## {heading}" in markdown and question in markdown
