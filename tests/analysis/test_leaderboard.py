"""``capcal leaderboard``: the export the Hugging Face leaderboard template reads.

The board test reads the stored results of two real stock ``lm_eval`` runs of ``capcal_calibration_open``
(SmolLM2-135M-Instruct and Qwen2.5-Coder-0.5B-Instruct, 8 questions per task, k = 4, 32 new tokens; the
commands are in docs/leaderboards.md, the files in benchmarks/results/leaderboard_board/) and displays the
export with the template's own logic (``leaderboard_template``, re-implemented independently of capcal).
The live run of the same group is tests/capcal_tasks/test_calibration_leaderboard.py.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
from pathlib import Path

import pytest

from analysis.cli import main
from analysis.leaderboard import BOARD_COLUMNS, leaderboard_rows, template_tasks, write_leaderboard_results

sys.path.insert(0, str(Path(__file__).resolve().parent))
from leaderboard_template import AVERAGE, TemplateTask, board  # noqa: E402  (this folder)

REPO = Path(__file__).resolve().parents[2]
STORED = REPO / "benchmarks" / "results" / "leaderboard_board"
GROUP = "capcal_calibration_open"
FILTER = "all_responses"


def _stored_results() -> dict[str, dict]:
    paths = sorted(STORED.glob("*/results_*.json"))
    return {path.parent.name: json.loads(path.read_text()) for path in paths}


def _expected_board_values(results: dict) -> dict[str, float]:
    """col_name -> the template's value (x 100) of each exported column, from lm-eval's group row."""
    group, directions = results["results"][GROUP], results["higher_is_better"][GROUP]
    values = {}
    for column, (_, _, label) in zip(BOARD_COLUMNS, template_tasks(), strict=True):
        value = group[f"{column.metric},{FILTER}"]
        values[label] = 100 * (value if directions[column.metric] else 1 - value)
    return values


def test_the_template_shows_both_models_with_every_headline_column_in_order(tmp_path, capsys):
    stored = _stored_results()
    assert len(stored) == 2
    assert main(["leaderboard", str(STORED), "--output", str(tmp_path / "board")]) == 0
    out = capsys.readouterr()
    assert "undefined" not in out.err
    entries = re.findall(r'Task\("([^"]+)", "([^"]+)", "([^"]+)"\)', out.out)
    tasks = [TemplateTask(*entry) for entry in entries]
    assert tasks == [TemplateTask(*entry) for entry in template_tasks()] and len(tasks) == 8
    labels = [task.col_name for task in tasks]
    for style in ("exact", "substring"):
        shown, read = board(str(tmp_path / "board"), tasks, style)
        assert read == 2 and len(shown) == 2, style  # no model row lost
        assert list(shown.columns) == ["model", AVERAGE, *labels]
        assert shown[labels].notna().all().all()
        assert list(shown[AVERAGE]) == sorted(shown[AVERAGE], reverse=True)  # the template's default order
        for results in stored.values():  # each column its own metric, oriented higher-is-better
            expected = _expected_board_values(results)
            assert any(
                all(math.isclose(row[label], value, abs_tol=0.006) for label, value in expected.items())
                for _, row in shown.iterrows()
            ), (style, expected)
        for _, row in shown.iterrows():
            assert math.isclose(row[AVERAGE], sum(row[label] for label in labels) / len(labels), abs_tol=0.01)


def test_lower_is_better_columns_are_shown_as_one_minus_the_value():
    (row, *_), results = leaderboard_rows([STORED / "smollm2"]), next(iter(_stored_results().values()))
    for column in BOARD_COLUMNS:
        assert results["higher_is_better"][GROUP][column.metric] is column.higher_is_better, column.metric
    ece = next(column for column in BOARD_COLUMNS if column.metric == "ptrue_ece_debiased")
    assert ece.board_value(0.25) == 0.75
    assert row.model_name and row.version == "3.0"


def test_the_docs_board_is_the_templates_display_of_the_stored_runs(tmp_path):
    write_leaderboard_results(leaderboard_rows([STORED]), tmp_path / "board")
    tasks = [TemplateTask(*entry) for entry in template_tasks()]
    shown, _ = board(str(tmp_path / "board"), tasks)
    text = (REPO / "docs" / "leaderboards.md").read_text(encoding="utf-8")
    table = text[text.index("| model |") :].split("\n\n")[0].splitlines()
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    assert header == ["model", AVERAGE, *[task.col_name for task in tasks]]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table[2:]]
    assert [row[0] for row in rows] == list(shown["model"])
    for row, (_, expected) in zip(rows, shown.iterrows(), strict=True):
        assert [float(cell) for cell in row[1:]] == pytest.approx(list(expected.iloc[1:]), abs=0.006)


def test_bad_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(ValueError, match="no such folder"):
        leaderboard_rows([tmp_path / "absent"])
    with pytest.raises(ValueError, match="has capcal_gpqa_calibration among its results"):
        leaderboard_rows([STORED], "capcal_gpqa_calibration")  # gated: not in the open group's runs
    twice = tmp_path / "twice"
    for copy in ("a", "b"):
        shutil.copytree(STORED / "smollm2", twice / copy)
    with pytest.raises(ValueError, match="both capcal_calibration_open of"):
        write_leaderboard_results(leaderboard_rows([twice]), tmp_path / "out")
    assert main(["leaderboard", str(tmp_path / "absent"), "--output", str(tmp_path / "out")]) == 2


def test_an_undefined_column_is_named_with_its_consequence(tmp_path, capsys):
    (source,) = (STORED / "smollm2").glob("results_*.json")
    results = json.loads(source.read_text())
    results["results"][GROUP][f"ptrue_auroc,{FILTER}"] = float("nan")
    folder = tmp_path / "runs" / "m"
    folder.mkdir(parents=True)
    (folder / source.name).write_text(json.dumps(results))
    assert main(["leaderboard", str(tmp_path / "runs"), "--output", str(tmp_path / "board")]) == 0
    err = capsys.readouterr().err
    assert "ptrue_discrimination is undefined" in err and "drops this model's row" in err
    (written,) = (tmp_path / "board").rglob("*.json")
    payload = json.loads(written.read_text())
    assert f"{GROUP}/ptrue_discrimination" not in payload["results"]
    assert "ptrue_discrimination" in payload["capcal"]["missing_columns"]
