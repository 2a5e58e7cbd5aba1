"""Every analysis reads adaptive runs (issue 37, deliverable 2): one path for fixed-k and adaptive records.

Fast (no model): the question table's sampling columns of a fixed-k record are the fixed-k values;
``first_look_table`` cuts an adaptive table to the first look; the few-samples notices speak of the first look
and k_max; the calibration table of a fixed-k table is the same with or without the sampling columns.

The same analyses on a real ``capcal eval --adaptive`` run (``capcal check``, a truncated record caught
naming file:line, the question and calibration tables, ``capcal table``'s rows and ``capcal report``) are in
tests/analysis/evaluation/test_adaptive.py, on the adaptive run its other tests read: a second run of the
same invocation here cost a model run per session (59 s loaded, 2026-11-27), and with ``--dist loadfile`` a
fixture shared by two files may run on both workers.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

TASK, LOOKS = "capcal_arithmetic", (2, 4)
LABEL = "adaptive (looks 2, 4, rule unanimity)"


# --- fast: one path for both kinds of run -----------------------------------------------------------------


def test_a_fixed_k_record_gets_the_fixed_k_sampling_columns() -> None:
    from analysis.runs.records import sampling_fields

    fields = sampling_fields([1, 0, 1, 1], None)
    assert fields == {
        "sampling": "fixed k",
        "s": 3,
        "mu_hat": 0.75,
        "mu_squared_hat": 3 * 2 / (4 * 3),
        "looks": [4],
        "rule": None,
    }
    assert math.isnan(sampling_fields([1], None)["mu_squared_hat"])


def test_an_adaptive_record_gets_its_own_estimates_looks_and_rule() -> None:
    """An adaptive record's columns are the record's path-count estimates (not s/n), its looks and its rule
    under the same keys as at fixed k (the plan is rebuilt from ``looks`` and ``rule``)."""
    from analysis.runs.records import sampling_fields

    rule = {"name": "width", "width": 0.2, "alpha": 0.05}
    adaptive = {"mu_hat": 0.625, "mu_squared_hat": 0.375, "looks": (2, 4), "rule": rule}
    fields = sampling_fields([0, 1, 1, 1], adaptive)
    assert fields == {
        "sampling": "adaptive (looks 2, 4, rule width 0.2 alpha 0.05)",
        "s": 3,
        "mu_hat": 0.625,
        "mu_squared_hat": 0.375,
        "looks": [2, 4],
        "rule": rule,
    }
    assert fields["rule"] is not rule  # a copy: the table's rule is not the record's object


def _adaptive_table() -> pd.DataFrame:
    """Three questions of an adaptive plan (looks 2, 4; unanimity) with the fields the loader keeps."""
    from analysis.runs.records import sampling_fields
    from capcal_tasks.adaptive_records import adaptive_fields

    rule = {"name": "unanimity"}
    vectors = [[1, 1], [0, 1, 1, 1], [1, 0, 0, 0]]
    rows = []
    for index, vector in enumerate(vectors):
        adaptive = adaptive_fields(list(LOOKS), rule, vector)["adaptive"]
        rows.append(
            {
                "question_id": str(index),
                "correctness": vector,
                "extracted_answers": [str(v) for v in vector],
                "n": len(vector),
                "expected_accuracy": adaptive["mu_hat"],
                **sampling_fields(vector, adaptive),
            }
        )
    return pd.DataFrame(rows)


def test_first_look_table_keeps_the_samples_drawn_before_any_stop() -> None:
    from analysis.estimators.adaptive import first_look, first_look_table

    table = _adaptive_table()
    assert first_look(table) == 2 and table["sampling"].eq(LABEL).all()
    cut = first_look_table(table)
    assert list(cut["correctness"]) == [[1, 1], [0, 1], [1, 0]] and cut["n"].eq(2).all()
    assert list(cut["expected_accuracy"]) == [1.0, 0.5, 0.5] and list(cut["mu_squared_hat"]) == [
        1.0,
        0.0,
        0.0,
    ]
    assert (
        first_look(cut) is None and cut["sampling"].str.startswith("fixed k (first look 2 of adaptive").all()
    )
    fixed = table.drop(columns=["sampling"])
    assert first_look_table(fixed) is fixed  # a fixed-k table as it is


def test_few_samples_notices_speak_of_the_first_look_and_k_max_not_of_n() -> None:
    """An adaptive run's n varies by design: the notices and warnings name l_1 (consistency's samples) and
    k_max, never "k = n_min samples per question" (mu_hat after stopping is not on a 1/n grid)."""
    from analysis.estimators.adaptive import last_look
    from analysis.report.input_notices import k_notices
    from analysis.report.summary import _adaptive_warnings, measured

    table = _adaptive_table().assign(model="m", task=TASK)
    assert last_look(table) == LOOKS[-1] and last_look(table.drop(columns=["sampling"])) is None
    mixed = table.copy()
    mixed.at[0, "looks"] = [2, 8]
    with pytest.raises(ValueError, match=r"several adaptive plans in one table \(k_max \[4, 8\]\)"):
        last_look(mixed)
    (notice,) = k_notices(table)
    assert notice == (
        f"{TASK} (m) was sampled adaptively with a first look of 2 responses: the consistency estimator uses "
        "each question's first-look responses (drawn before any stopping decision), needs 6 or more, and is "
        "missing"
    )
    assert k_notices(table.drop(columns=["sampling"])) == [  # the same table read as fixed k: n_min = 2
        f"{TASK} (m) has k = 2 responses per question: the consistency estimator needs k >= 6 and is missing"
    ]
    assert measured("m", TASK, table, True).samples == "2-4 (adaptive, k_max = 4)"
    assert measured("m", TASK, table.drop(columns=["sampling"]), True).samples == "2-4"
    assert _adaptive_warnings(8, 64, True) == [
        "consistency uses each question's first 8 samples (the first look, drawn before any stopping "
        "decision), below 10: only k < 8 (its leakage-free form is scored against every sample outside "
        "its draw pool)."
    ]
    assert _adaptive_warnings(8, 64, False) == [] and _adaptive_warnings(10, 64, True) == []
    skill = (
        "adaptive run with a first look of {} samples, below 8: the Brier skill after stopping is not "
        "reliable (in simulation its bias differs from fixed k's by up to 4.1 standard errors, "
        "docs/methods.md); rank by the corrected Brier or the debiased ECE."
    )
    assert _adaptive_warnings(2, 9, False) == [
        "adaptive run with k_max = 9 samples, below 10: a question whose samples disagree is estimated from "
        "at most 9 samples.",
        skill.format(2),
    ]
    # issue 48.3: a first look below 8 (plans (2, 4), (4, 8, 16)) is warned about, 8 and above not
    assert _adaptive_warnings(7, 10, False) == [skill.format(7)] and _adaptive_warnings(8, 10, False) == []


def test_notices_of_a_folder_with_a_fixed_k_and_an_adaptive_run_of_one_task() -> None:
    """Issue 47.14: ``capcal analyze`` on a folder holding a fixed-k and an adaptive run of one task refused
    ("questions of several adaptive plans in one table (first looks [2, 16])": ``k_notices`` read both runs
    as one plan) while report, table and check, which take one run per task, read it. Each run is its own
    plan."""
    from analysis.report.input_notices import k_notices
    from analysis.runs.records import sampling_fields

    adaptive = _adaptive_table().assign(model="m", task=TASK, run_id="2026-01-02")
    rng = np.random.default_rng(0)
    vectors = [list(rng.integers(0, 2, size=16)) for _ in range(3)]
    fixed = pd.DataFrame(
        [{"question_id": str(i), "correctness": v, "n": 16, "expected_accuracy": sum(v) / 16,
          "model": "m", "task": TASK, "run_id": "2026-01-01", **sampling_fields(v, None)}
         for i, v in enumerate(vectors)]
    )  # fmt: skip
    both = pd.concat([fixed, adaptive], ignore_index=True)
    notice = (
        f"{TASK} (m) was sampled adaptively with a first look of 2 responses: the consistency estimator "
        "uses each question's first-look responses (drawn before any stopping decision), needs 6 or more, "
        "and is missing"
    )
    assert k_notices(both) == k_notices(adaptive) == [notice]
    two_fixed = pd.concat([fixed.assign(n=4), fixed.assign(run_id="2026-01-03", n=4)], ignore_index=True)
    assert k_notices(two_fixed) == [  # said once, not once per run
        f"{TASK} (m) has k = 4 responses per question: the consistency estimator needs k >= 6 and is missing"
    ]


def test_the_sampling_label_names_the_looks_and_the_rule_with_its_parameters() -> None:
    """The ``sampling`` column's text: "fixed k" without an ``adaptive`` object; else the looks and the rule,
    a confidence-width rule with its width W and alpha (as ``capcal eval --adaptive_rule`` records them)."""
    from analysis.runs.records import sampling_label
    from capcal_tasks.adaptive_records import parse_rule

    assert sampling_label(None) == "fixed k"
    assert sampling_label({"looks": [16, 32, 64], "rule": parse_rule("unanimity")}) == (
        "adaptive (looks 16, 32, 64, rule unanimity)"
    )
    assert sampling_label({"looks": [8, 16], "rule": parse_rule("width:0.2")}) == (
        "adaptive (looks 8, 16, rule confidence_width 0.2 alpha 0.05)"
    )
    assert sampling_label({"looks": [4], "rule": parse_rule("width:0.25:0.1")}) == (
        "adaptive (looks 4, rule confidence_width 0.25 alpha 0.1)"
    )


def test_a_fixed_k_calibration_table_is_the_same_with_the_sampling_columns() -> None:
    from analysis.report.calibration_table import calibration_table
    from analysis.runs.records import sampling_fields

    rng = np.random.default_rng(3)
    vectors = [list(rng.integers(0, 2, size=6)) for _ in range(40)]
    table = pd.DataFrame(
        [
            {"correctness": v, "n": 6, "expected_accuracy": sum(v) / 6, "c": c, **sampling_fields(v, None)}
            for v, c in zip(vectors, rng.uniform(size=40), strict=True)
        ]
    )
    with_columns = calibration_table(table, ["c"], n_resamples=50)
    without = calibration_table(table[["correctness", "n", "expected_accuracy", "c"]], ["c"], n_resamples=50)
    assert with_columns["sampling"].eq("fixed k").all() and without["sampling"].eq("fixed k").all()
    pd.testing.assert_frame_equal(with_columns, without)
