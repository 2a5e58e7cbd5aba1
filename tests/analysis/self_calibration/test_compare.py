"""Before/after comparison: metrics with paired bootstrap intervals, held-out checks, the report section."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.runs import SamplesFile
from analysis.runs.joins import join_report
from analysis.self_calibration.compare import compare_checked_runs, write_comparison
from analysis.self_calibration.data import CheckedRun, SelfCalibrationDataError


def _run(confidences: np.ndarray, correctness: np.ndarray, answers: list[list], label: str) -> CheckedRun:
    """A checked run from arrays (a stand-in for two real runs: the metrics here need known values)."""
    n = correctness.shape[1]
    ids = [f"arithmetic/q{i}" for i in range(len(correctness))]
    table = pd.DataFrame(
        {
            "question_id": ids,
            "correctness": [list(map(int, row)) for row in correctness],
            "extracted_answers": answers,
            "expected_accuracy": correctness.mean(axis=1),
            "n": n,
            "selfcheck_p_yes": [list(map(float, row)) for row in confidences],
            "selfcheck_p_yes_normalized": [list(map(float, row)) for row in confidences],
        }
    )
    file = SamplesFile(Path(f"/runs/{label}/samples.jsonl"), "capcal_arithmetic", "t", label, {})
    return CheckedRun(table, file, file, join_report("selfcheck", ids, ids))


def _arrays(seed: int = 0, questions: int = 30, n: int = 6):
    rng = np.random.default_rng(seed)
    mu = rng.uniform(0, 1, questions)
    z = (rng.uniform(size=(questions, n)) < mu[:, None]).astype(float)
    answers = [[str(7 if ok else 8 + j % 2) for j, ok in enumerate(row)] for row in z]
    return z, answers


def test_identical_runs_differ_by_zero_and_oracle_confidence_is_perfect(tmp_path):
    z, answers = _arrays()
    noisy = np.clip(0.5 + np.random.default_rng(1).normal(0, 0.2, z.shape), 0, 1)
    before = _run(noisy, z, answers, "before")
    same = compare_checked_runs(before, _run(noisy, z, answers, "again"), n_resamples=40)
    assert np.allclose(same.metrics["difference"], 0) and np.allclose(same.metrics["difference_low"], 0)
    oracle = compare_checked_runs(before, _run(z.copy(), z, answers, "after"), n_resamples=40)
    metrics = oracle.metrics.set_index("metric")
    assert metrics.loc["response ECE", "after"] == 0 and metrics.loc["response Brier", "after"] == 0
    assert metrics.loc["response AUROC", "after"] == 1
    assert metrics.loc["response Brier", "difference_high"] < 0  # the interval excludes 0
    for low, estimate, high in metrics[["before_low", "before", "before_high"]].to_numpy():
        assert low <= estimate + 1e-12 and estimate <= high + 1e-12
    assert oracle.accuracy_within_tolerance
    curves = oracle.curves
    assert {"early_stopping", "weighted_self_consistency", "adaptive_weighted_self_consistency"} <= set(
        curves["strategy"]
    )
    early = curves[(curves.strategy == "early_stopping") & (curves.side == "after") & (curves.tau == 0.5)]
    assert early["accuracy"].iloc[0] == pytest.approx(
        (z.sum(axis=1) > 0).mean()
    )  # c = z: stop at a correct one
    files = write_comparison(oracle, tmp_path)
    written = json.loads(files["json"].read_text())  # each part from its own frame or record
    assert [row["metric"] for row in written["metrics"]] == list(oracle.metrics["metric"])
    np.testing.assert_allclose([row["after"] for row in written["metrics"]], oracle.metrics["after"])
    assert written["counts"] == oracle.counts and written["settings"]["n_resamples"] == 40
    pd.testing.assert_frame_equal(pd.read_csv(files["curves"]), oracle.curves, check_dtype=False)
    text = files["markdown"].read_text()
    assert "before" in text and "after - before" in text and files["html"].is_file()
    assert files["html"].suffix == ".html" and text.splitlines()[0] == "# Self-Calibration training"
    # the operating-point table shows the accuracy itself with its interval (not a bound in its place)
    accuracy, low, high = (
        (z.sum(axis=1) > 0).mean(),
        early["accuracy_low"].iloc[0],
        early["accuracy_high"].iloc[0],
    )
    assert round(low, 3) < round(accuracy, 3)  # the bound and the value differ where the table shows them
    assert f"| {accuracy:.3f} [{low:.3f}, {high:.3f}] |" in text  # plain Markdown: brackets bare


def test_refuses_training_questions_and_counts_missing_selfchecks():
    z, answers = _arrays()
    c = np.full(z.shape, 0.5)
    before, after = _run(c, z, answers, "before"), _run(c, z, answers, "after")
    with pytest.raises(SelfCalibrationDataError, match="were training questions"):
        compare_checked_runs(before, after, training_question_ids=["arithmetic/q3"], n_resamples=10)
    after.table.at[2, "selfcheck_p_yes"] = None
    after.table.at[4, "selfcheck_p_yes"] = [0.5] * 5 + [None]
    result = compare_checked_runs(before, after, n_resamples=10)
    assert (
        result.counts["questions_compared"] == 28 and result.counts["questions_missing_selfcheck_after"] == 2
    )
