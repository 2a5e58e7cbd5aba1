"""The mutation score of tests/README.md (tests/mutation_score.py): equivalents left out, stale ones named."""

from __future__ import annotations

import pytest

from tests.mutation_score import (
    REPO,
    markdown,
    read_equivalents,
    read_killed_outside,
    read_statuses,
    scores,
    stale_equivalents,
    stale_killed_outside,
    verify_killed_outside,
)

RESULTS = """
    capcal_metrics.ece.x_ece__mutmut_1: killed
    capcal_metrics.ece.x_ece__mutmut_2: survived
    capcal_metrics.ece.x_ece__mutmut_3: survived
    capcal_metrics.ece.x_ece__mutmut_4: timeout
    capcal_metrics.ece.x_ece__mutmut_5: not checked
    capcal_metrics.x_top__mutmut_1: no tests
    analysis.runs.joins.xǁJoinReportǁsummary__mutmut_1: killed
    analysis.runs.joins.xǁJoinReportǁsummary__mutmut_2: survived
""".splitlines()


def test_scores_leave_out_equivalents_and_unrun_mutants():
    statuses = read_statuses(RESULTS)
    assert len(statuses) == 8 and statuses["capcal_metrics.x_top__mutmut_1"] == "no tests"
    table = scores(statuses, {"capcal_metrics.ece.x_ece__mutmut_2": "a dtype on float input"})
    assert table["capcal_metrics.ece"] == {"run": 4, "killed": 2, "equivalent": 1, "survived": 1}
    assert table["capcal_metrics"] == {"run": 5, "killed": 2, "equivalent": 1, "survived": 2}
    assert table["analysis"] == {"run": 2, "killed": 1, "survived": 1}
    text = markdown(table)
    assert "| **capcal_metrics** | 5 | 2 | 1 | 2 | 50.0% |" in text  # 2 killed of 5 - 1 equivalent
    assert "| `capcal_metrics.ece` | 4 | 2 | 1 | 1 | 66.7% |" in text
    assert text.index("**analysis**") < text.index("`analysis.runs.joins`") < text.index("**capcal_metrics**")


def test_a_listed_equivalent_that_was_killed_or_vanished_is_stale_within_the_modules_run():
    statuses = read_statuses(RESULTS)
    equivalents = {
        "capcal_metrics.ece.x_ece__mutmut_1": "killed now",
        "capcal_metrics.ece.x_ece__mutmut_3": "still survives",
        "capcal_metrics.ece.x_ece__mutmut_9": "no longer generated",
        "capcal_metrics.skill.x_skill__mutmut_1": "a module this run did not cover",
    }
    assert stale_equivalents(statuses, equivalents) == [
        "capcal_metrics.ece.x_ece__mutmut_1",
        "capcal_metrics.ece.x_ece__mutmut_9",
    ]


def test_the_equivalents_file_needs_a_reason_per_line(tmp_path):
    path = tmp_path / "equivalents.txt"
    path.write_text("# comment\n\ncapcal_metrics.ece.x_ece__mutmut_2  errstate only silences\n")
    assert read_equivalents(path) == {"capcal_metrics.ece.x_ece__mutmut_2": "errstate only silences"}
    path.write_text("capcal_metrics.ece.x_ece__mutmut_2  fine\ncapcal_metrics.ece.x_ece__mutmut_3\n")
    with pytest.raises(ValueError, match=rf"^{path}:2: capcal_metrics.ece.x_ece__mutmut_3 has no reason"):
        read_equivalents(path)


def test_the_committed_equivalents_file_reads():
    for name, reason in read_equivalents().items():
        assert "__mutmut_" in name and reason, name


def test_a_no_tests_mutant_listed_as_killed_outside_counts_as_killed_and_goes_stale_once_seen(tmp_path):
    statuses = read_statuses(RESULTS)
    outside = {"capcal_metrics.x_top__mutmut_1": "tests/test_x.py::test_worker"}
    assert scores(statuses, {}, outside)["capcal_metrics"] == {"run": 5, "killed": 3, "survived": 2}
    assert scores(statuses, {})["capcal_metrics"] == {"run": 5, "killed": 2, "survived": 3}
    # only a "no tests" mutant counts: a survivor listed here stays a survivor, and is named stale
    surviving = {"capcal_metrics.ece.x_ece__mutmut_2": "tests/test_x.py::test_worker"}
    assert scores(statuses, {}, surviving)["capcal_metrics"]["killed"] == 2
    assert stale_killed_outside(statuses, {**outside, **surviving}) == ["capcal_metrics.ece.x_ece__mutmut_2"]
    path = tmp_path / "outside.txt"
    path.write_text(
        "# comment\n\ncapcal_metrics.x_top__mutmut_1  tests/test_x.py::test_worker  a subprocess\n"
    )
    assert read_killed_outside(path) == outside
    path.write_text(
        "capcal_metrics.x_top__mutmut_1  tests/test_x.py::test_worker  why\nname  test_x.py  why\n"
    )
    with pytest.raises(ValueError, match=rf"^{path}:2: write NAME, the pytest node id"):
        read_killed_outside(path)


def test_verify_killed_outside_names_a_listed_kill_that_does_not_hold(tmp_path):
    """A test failing only with its mutant switched on holds; one passing, or one failing anyway, does not."""
    (tmp_path / "test_w.py").write_text(
        "import os\n\n"
        "def test_kills():\n    assert os.environ['MUTANT_UNDER_TEST'] != 'm.x_f__mutmut_1'\n\n"
        "def test_always_fails():\n    assert False\n"
    )
    listed = {
        "m.x_f__mutmut_1": "test_w.py::test_kills",
        "m.x_f__mutmut_2": "test_w.py::test_kills",
        "m.x_f__mutmut_3": "test_w.py::test_always_fails",
    }
    assert verify_killed_outside(listed, tmp_path) == [
        "m.x_f__mutmut_2 (test_w.py::test_kills: exit 0 with the mutant, 0 without)",
        "m.x_f__mutmut_3 (test_w.py::test_always_fails: exit 1 with the mutant, 1 without)",
    ]


def test_the_committed_killed_outside_file_reads():
    for name, test in read_killed_outside().items():
        assert "__mutmut_" in name and (REPO / test.split("::")[0]).is_file(), name
