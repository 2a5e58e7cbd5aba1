"""The mutation score of tests/README.md (tests/mutation_score.py): equivalents left out, stale ones named."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from tests.mutation_score import (
    REPO,
    draw_sample,
    markdown,
    read_equivalents,
    read_killed_outside,
    read_statuses,
    sampled_markdown,
    sampled_scores,
    sampled_timeouts,
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


def test_a_timeout_counts_as_killed_unless_listed_as_equivalent_and_then_is_not_stale():
    """A timeout re-run quietly whose tests pass is listed as equivalent: both scores count it so, and the
    stale check keeps it; an unlisted timeout stays a kill."""
    statuses = read_statuses(RESULTS)
    listed = {"capcal_metrics.ece.x_ece__mutmut_4": "a slow pass"}
    assert scores(statuses, listed)["capcal_metrics.ece"] == {
        "run": 4,
        "killed": 1,
        "equivalent": 1,
        "survived": 2,
    }
    assert scores(statuses, {})["capcal_metrics.ece"] == {"run": 4, "killed": 2, "survived": 2}
    assert stale_equivalents(statuses, listed) == []
    sample = ["capcal_metrics.ece.x_ece__mutmut_1", "capcal_metrics.ece.x_ece__mutmut_4"]
    row = sampled_scores(statuses, sample, listed, draws=10)["capcal_metrics"]
    assert (row["killed"], row["equivalent"], row["score"]) == (1, 1, 1.0)
    row = sampled_scores(statuses, sample, {}, draws=10)["capcal_metrics"]
    assert (row["killed"], row["equivalent"], row["score"]) == (2, 0, 1.0)


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


def test_draw_sample_takes_n_per_package_uniformly_leaving_out_an_earlier_sample():
    names = [f"analysis.report.f.x_f__mutmut_{i}" for i in range(50)]
    names += [f"capcal_tasks.records.x_g__mutmut_{i}" for i in range(8)]
    earlier = names[:10]
    drawn = draw_sample(names, 20, seed=3, exclude=earlier)
    assert drawn == draw_sample(list(reversed(names)), 20, seed=3, exclude=earlier)  # a function of the set
    assert len(drawn) == len(set(drawn)) == 28 and not set(drawn) & set(earlier)
    assert sum(name.startswith("capcal_tasks") for name in drawn) == 8  # all of a smaller package
    assert drawn[:8] != sorted(drawn[:8])  # the packages shuffled together, not run one after the other
    # uniform: over many seeds each eligible name of a package is drawn about 20 / 40 of the time
    counts = Counter(name for seed in range(400) for name in draw_sample(names, 20, seed, earlier))
    shares = np.array([counts[name] / 400 for name in names[10:50]])
    assert np.all(np.abs(shares - 0.5) < 4 * np.sqrt(0.25 / 400))  # 4 binomial SE


def test_sampled_scores_weight_each_stratum_by_its_mutants():
    """Two strata of 100 and 300 mutants: (100 k_a/c_a + 300 k_b/c_b) / (100 live_a + 300 live_b)."""
    statuses = {f"analysis.report.f.x_f__mutmut_{i}": "not checked" for i in range(100)}
    statuses |= {f"analysis.runs.g.x_g__mutmut_{i}": "not checked" for i in range(300)}
    checked = {
        "analysis.report.f.x_f__mutmut_0": "killed",
        "analysis.report.f.x_f__mutmut_1": "timeout",
        "analysis.report.f.x_f__mutmut_2": "survived",
        "analysis.report.f.x_f__mutmut_3": "survived",  # equivalent
        "analysis.runs.g.x_g__mutmut_0": "no tests",  # killed outside mutmut's sight
        "analysis.runs.g.x_g__mutmut_1": "survived",
    }
    statuses |= checked
    sample = [*checked, "analysis.runs.g.x_g__mutmut_2"]  # one sampled mutant not checked yet
    table = sampled_scores(
        statuses,
        sample,
        {"analysis.report.f.x_f__mutmut_3": "a dtype"},
        {"analysis.runs.g.x_g__mutmut_0": "tests/t.py::t"},
        draws=200,
    )
    row = table["analysis"]
    assert row["score"] == pytest.approx((100 * 2 / 4 + 300 * 1 / 2) / (100 * 3 / 4 + 300 * 2 / 2))
    assert (row["mutants"], row["checked"], row["killed"], row["equivalent"]) == (400, 6, 3, 1)
    assert row["low"] <= row["score"] <= row["high"] and row["unmeasured"] == 0.0
    statuses["analysis.judge.h.x_h__mutmut_0"] = "not checked"  # a stratum with nothing checked
    assert sampled_scores(statuses, sample, {}, draws=10)["analysis"]["unmeasured"] == pytest.approx(1 / 401)
    assert "| **analysis** | 401 | 6 | 2 | 0 |" in sampled_markdown(
        sampled_scores(statuses, sample, {}, draws=10)
    )


def test_sampled_timeouts_are_named_for_a_quiet_rerun_unless_listed_equivalent():
    """Timeouts count as kills in the score, so they are named in sample order; one listed as equivalent
    (re-run, its tests pass) and one outside the sample are not."""
    statuses = {
        "analysis.a.x_f__mutmut_1": "timeout",
        "analysis.a.x_f__mutmut_2": "killed",
        "analysis.a.x_f__mutmut_3": "timeout",
        "analysis.a.x_f__mutmut_4": "timeout",
        "analysis.a.x_f__mutmut_5": "timeout",
    }
    sample = [
        "analysis.a.x_f__mutmut_4",
        "analysis.a.x_f__mutmut_2",
        "analysis.a.x_f__mutmut_1",
        "analysis.a.x_f__mutmut_3",
    ]
    equivalents = {"analysis.a.x_f__mutmut_3": "a slow pass"}
    assert sampled_timeouts(statuses, sample, equivalents) == [
        "analysis.a.x_f__mutmut_4",
        "analysis.a.x_f__mutmut_1",
    ]


def test_sampled_interval_covers_the_population_score():
    """A population of 3 strata with kill rates 0.95, 0.7, 0.5 (true score known): the 95% interval from a
    uniform sample of 120 covers it in at least 88% of 150 samples (seeded; binomial SE 1.8%)."""
    rates = {"analysis.report": (3000, 0.7), "analysis.runs": (1500, 0.95), "analysis.judge": (500, 0.5)}
    rng = np.random.default_rng(5)
    statuses = {}
    for stratum, (size, rate) in rates.items():
        kills = rng.random(size) < rate
        statuses |= {
            f"{stratum}.m.x_f__mutmut_{i}": "killed" if k else "survived" for i, k in enumerate(kills)
        }
    truth = sum(s == "killed" for s in statuses.values()) / len(statuses)
    names = sorted(statuses)
    covered = 0
    for seed in range(150):
        sample = random.Random(seed).sample(names, 120)
        row = sampled_scores(statuses, sample, {}, draws=300, seed=seed)["analysis"]
        covered += row["low"] <= truth <= row["high"]
    assert covered >= 0.88 * 150
