"""Every analysis reads adaptive runs (issue 37, deliverable 2): ``capcal check``, the question table, the
calibration table, ``capcal table``'s rows and ``capcal report`` on a real ``capcal eval --adaptive`` run.

- fast (no model): the question table's sampling columns of a fixed-k record are the fixed-k values;
  ``first_look_table`` cuts an adaptive table to the first look; the calibration table of a fixed-k table is
  the same with or without the sampling columns (one path);
- slow (one real run, ``adaptive_run``: SmolLM2, capcal_arithmetic, 6 questions, looks 2 and k_max 4, as
  tests/analysis/evaluation/test_adaptive.py's ``runs``): ``capcal check`` exits 0; a record truncated at its
  first look (the rule does not stop there) is caught naming file:line; the table carries n, s, mu_hat,
  mu_squared_hat and the plan; the capability metrics equal ``analysis.estimators.adaptive``'s on the same
  (confidence, n, s); ``capcal report`` states the sampling and the samples drawn and saved.

The calibration-table test scores a seeded uniform confidence column (a stand-in: a real confidence run
would be a second model run; the metrics' routing, not the estimator, is under test).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import capcal_metrics as cm

REPO = Path(__file__).resolve().parents[3]
TASK, LIMIT, K_MAX, LOOKS, MAX_GEN_TOKS, SEED = "capcal_arithmetic", 6, 4, (2, 4), 8, 7
LABEL = "adaptive (looks 2, 4, rule unanimity)"


def _capcal(*arguments: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "analysis.cli", *arguments]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


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


# --- slow: one real adaptive run ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def adaptive_run(smollm2_path: Path, tmp_path_factory) -> Path:
    """The output folder of ``capcal eval --adaptive`` (test_adaptive.py's invocation, its own cache)."""
    folder = tmp_path_factory.mktemp("adaptive_analysis")
    run = _capcal(
        "eval", "--model", "capcal-hf",
        "--model_args", f"pretrained={smollm2_path},seed={SEED},cache_path={folder / 'cache.sqlite'}",
        "--tasks", TASK, "--limit", str(LIMIT), "--repeats", str(K_MAX), "--adaptive",
        "--looks", ",".join(map(str, LOOKS[:-1])), "--gen_kwargs", f"max_gen_toks={MAX_GEN_TOKS}",
        "--batch_size", "8", "--apply_chat_template", "--log_samples", "--output_path", str(folder / "out"),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return folder / "out"


def _samples_file(output: Path) -> Path:
    (path,) = output.rglob(f"samples_{TASK}_*.jsonl")
    return path


@pytest.mark.slow
def test_capcal_check_accepts_the_adaptive_run(adaptive_run: Path) -> None:
    run = _capcal("check", str(adaptive_run))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 of 1 run(s) complete" in run.stdout and "fewer than k" not in run.stdout
    from analysis.runs.completeness import check_run

    (row,) = check_run(adaptive_run).itertuples()
    assert row.complete and row.questions == LIMIT and row.questions_short_of_k == 0 and row.k == K_MAX


@pytest.mark.slow
def test_a_truncated_adaptive_record_is_caught_naming_file_and_line(
    adaptive_run: Path, tmp_path: Path
) -> None:
    """A question that went on to k_max cut back to its first look, with n and s made to match: the rule does
    not stop there (its first l_1 samples are mixed), so the record is short of its n."""
    copy = tmp_path / "out"
    shutil.copytree(adaptive_run, copy)
    path = _samples_file(copy)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    look = LOOKS[0]
    line, record = next(
        (i + 1, r)
        for i, r in enumerate(records)
        if r["adaptive"]["n"] == K_MAX and 0 < sum(r["correctness"][:look]) < look
    )
    for key in ("resps", "filtered_resps"):
        record[key] = [record[key][0][:look]]
    record["correctness"], record["extracted_answers"] = (
        record["correctness"][:look],
        record["extracted_answers"][:look],
    )
    record["n_samples"] = look
    record["adaptive"].update(n=look, s=sum(record["correctness"]))
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    run = _capcal("check", str(copy))
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    (error,) = [text for text in run.stderr.splitlines() if "error:" in text]
    assert error.startswith(f"capcal check: error: {path}:{line}: the rule does not stop at 1 of {look}"), (
        error
    )


@pytest.mark.slow
def test_the_question_table_carries_the_plan_and_the_unbiased_estimates(adaptive_run: Path) -> None:
    from analysis.estimators.adaptive import adaptive_estimates
    from analysis.runs import load_run
    from capcal_tasks.adaptive_records import sequential_plan

    table = load_run(adaptive_run)
    records = {r["doc_id"]: r for r in map(json.loads, _samples_file(adaptive_run).read_text().splitlines())}
    assert table["sampling"].eq(LABEL).all() and len(table) == LIMIT
    for row in table.itertuples():
        adaptive = records[row.doc_id]["adaptive"]
        assert (row.n, row.s, row.looks, row.rule) == (
            adaptive["n"],
            adaptive["s"],
            list(LOOKS),
            adaptive["rule"],
        )
        assert row.mu_hat == row.expected_accuracy == adaptive["mu_hat"]
        assert row.mu_squared_hat == adaptive["mu_squared_hat"]
    assert set(table["n"]) <= set(LOOKS) and (table["n"] < K_MAX).any()  # some stopped at the first look
    plan = sequential_plan(table["looks"].iloc[0], table["rule"].iloc[0])
    estimates = adaptive_estimates(plan, table["n"], table["s"])
    np.testing.assert_allclose(table["mu_hat"], estimates.mu_hat, atol=1e-12)
    np.testing.assert_allclose(table["mu_squared_hat"], estimates.mu_square_hat, atol=1e-12)


@pytest.mark.slow
def test_the_calibration_table_equals_the_adaptive_estimators(adaptive_run: Path) -> None:
    from analysis.estimators.adaptive import ADAPTIVE_CAPABILITY_METRICS, adaptive_capability_metrics
    from analysis.report.calibration_table import calibration_table
    from analysis.runs import load_run
    from capcal_tasks.adaptive_records import sequential_plan

    table = load_run(adaptive_run)
    table["c"] = np.random.default_rng(0).uniform(size=len(table))  # stand-in confidences (module docstring)
    rows = calibration_table(table, ["c"], n_resamples=50).set_index(["estimator", "metric"])
    plan = sequential_plan(table["looks"].iloc[0], table["rule"].iloc[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)  # the skill is NaN on 6 questions
        expected = adaptive_capability_metrics(table["c"], table["n"], table["s"], plan)
    for metric in ADAPTIVE_CAPABILITY_METRICS:
        got = rows.loc[("c", metric), "estimate"]
        assert (math.isnan(got) and math.isnan(expected[metric])) or math.isclose(
            got, expected[metric], abs_tol=1e-12
        ), metric
    assert rows["sampling"].eq(LABEL).all()
    # the n-corrected Brier (a fixed n) differs where questions stopped early: the routing matters here
    fixed_form = cm.corrected_capability_brier_score(table["c"], table["mu_hat"], table["n"])
    assert not math.isclose(fixed_form, expected["corrected_capability_brier"], abs_tol=1e-9)


@pytest.mark.slow
def test_capcal_table_rows_and_the_report_say_how_the_run_was_sampled(
    adaptive_run: Path, tmp_path: Path
) -> None:
    """Through ``analyze_runs`` (``capcal table``'s path, with consistency at k = 1 so that the 2-sample run
    has an estimator) and ``capcal report`` (Markdown): the rows' sampling, consistency from the first look,
    and the samples drawn and saved of the results file's ``capcal_adaptive``."""
    from analysis.report import ReportOptions
    from analysis.report.paper_table import format_table, paper_table

    rows = paper_table([adaptive_run], options=ReportOptions(n_resamples=50, consistency_ks=(1,)))
    main = rows[rows["estimator"] != "consistency_lf_k1"]
    assert main["sampling"].eq(LABEL).all()
    free = rows[rows["estimator"] == "consistency_lf_k1"]
    assert not free.empty and free["sampling"].eq(f"fixed k (first look {LOOKS[0]} of {LABEL})").all()
    assert f"sampling: {TASK}: {LABEL}" in format_table(rows)

    (results,) = adaptive_run.rglob("results_*.json")
    summary = json.loads(results.read_text())["capcal_adaptive"]["tasks"][TASK]
    drawn, fixed = summary["samples_drawn"], summary["fixed_k_samples"]
    report = _capcal("report", str(adaptive_run), "--output", str(tmp_path / "report"), "--resamples", "50")
    assert report.returncode == 0, report.stderr[-3000:]
    markdown = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert LABEL in markdown  # plain Markdown: parentheses bare
    saved = f"{drawn} of {fixed} (fixed k), {fixed - drawn} saved ({1 - drawn / fixed:.0%})"
    assert f"samples drawn: {saved}" in markdown, markdown[:3000]
    # the few-samples texts speak of the first look and k_max, not of "k = n_min samples per question" (no
    # estimator here, so no ranking and none of its warnings: those are in the fast test above)
    assert "k = 2 samples per question" not in markdown
    assert f"(adaptive, k_max = {K_MAX})" in markdown
    assert "was sampled adaptively with a first look of 2 responses" in report.stderr
