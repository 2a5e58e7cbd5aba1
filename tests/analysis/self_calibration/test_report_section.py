"""The Self-Calibration before/after comparison as a section of ``capcal report`` (analysis.report.
self_calibration), on the real SmolLM2 runs of ``selfcal_runs``: a loop folder whose "after" side is the same
runs as its "before" side must show differences of exactly 0."""

from __future__ import annotations

import json
import re
import shutil

import pytest


def _loop_folder(root, runs) -> object:
    """A ``capcal selfcal run`` layout (loop.json, before/ and after/ eval_sample + eval_selfcheck) whose two
    sides are copies of the same real sampling and self-check runs."""
    for side in ("before", "after"):
        shutil.copytree(runs["train_sample"], root / side / "eval_sample")
        shutil.copytree(runs["train_selfcheck"], root / side / "eval_selfcheck")
    (root / "loop.json").write_text(json.dumps({"settings": {"confidence": "p_yes"}}))
    return root


@pytest.mark.slow
def test_report_shows_the_comparison_of_a_loop_folder(selfcal_runs, tmp_path):
    from analysis.report import ReportOptions, build_report
    from analysis.report.self_calibration import self_calibration_sections
    from analysis.self_calibration.results import find_loops, read_comparisons

    loop = _loop_folder(tmp_path / "outer" / "loop", selfcal_runs)
    assert find_loops([tmp_path / "outer", tmp_path / "outer" / "loop"]) == [loop.resolve()]  # each once
    (summary,) = read_comparisons([tmp_path / "outer"], n_resamples=50)
    assert summary.problem is None and summary.comparison.settings["confidence"] == "p_yes"
    (section,) = self_calibration_sections([tmp_path / "outer"], n_resamples=50)
    metrics = section.tables[0][1]  # before, after and after - before of every metric
    differences = [str(v) for v in metrics["after - before"] if str(v) != "n/a"]
    assert differences and all(re.fullmatch(r"-?0\.000( \[-?0\.000, -?0\.000\])?", v) for v in differences)

    files = build_report([tmp_path / "outer"], tmp_path / "report", options=ReportOptions(n_resamples=50))
    text = files.markdown.read_text()
    assert "## Self-Calibration training: before vs after (loop)" in text
    assert text.index("## Summary") < text.index("Self-Calibration training") < text.index("## Appendix")


def test_a_loop_folder_that_cannot_be_compared_says_why(tmp_path):
    from analysis.report.self_calibration import self_calibration_sections

    loop = tmp_path / "loop"
    for side in ("before", "after"):
        (loop / side / "eval_sample").mkdir(parents=True)
    (loop / "loop.json").write_text("{}")
    (section,) = self_calibration_sections([tmp_path])
    assert section.warnings and section.warnings[0].startswith("not compared: ")
    assert not section.sentences  # no "how to read" over a comparison that was not made

    from analysis.self_calibration.results import read_comparisons

    (summary,) = read_comparisons([tmp_path, loop])  # the same loop reached twice is read once
    assert summary.comparison is None and summary.folder == loop.resolve()
    assert summary.problem == section.warnings[0]
