"""Before/after comparison, tested by kind (issue 49): every metric, its interval's low and high, and the
difference against a percentile bootstrap written here (the same resampled rows: numpy's integers stream),
each option reaching the comparison (confidence column, seed, n_resamples, taus, tolerance), every count
and setting from its own side, the report section's facts and tables whole. Hand-built runs, small arrays.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from analysis.applications.self_calibration_strategies import self_calibration_curves
from analysis.estimators.consistency import encode_answer_classes
from analysis.runs import SamplesFile
from analysis.runs.joins import join_report
from analysis.self_calibration import compare as compare_module
from analysis.self_calibration.compare import (
    Comparison,
    compare_checked_runs,
    compare_runs,
    comparison_section,
    read_comparison,
    write_comparison,
)
from analysis.self_calibration.data import CheckedRun, CheckedSides, SelfCalibrationDataError
from capcal_metrics import UndefinedMetricWarning


def _run(label: str, rows: dict[str, dict], model_ids: list[str] | None = None) -> CheckedRun:
    """A checked run of the questions ``rows`` (id -> its fields) in the given order; the sampling and the
    self-check files have their own paths, the model its own label."""
    ids = list(rows)
    table = pd.DataFrame(
        {
            "question_id": ids,
            "correctness": [rows[q]["z"] for q in ids],
            "extracted_answers": [rows[q]["answers"] for q in ids],
            "expected_accuracy": [rows[q]["mu"] for q in ids],
            "n": [len(rows[q]["z"]) for q in ids],
            "selfcheck_p_yes": [rows[q]["p_yes"] for q in ids],
            "selfcheck_p_yes_normalized": [rows[q]["p_norm"] for q in ids],
            "model_id": model_ids or [f"sha-{label}"] * len(ids),
        }
    )
    sampling = SamplesFile(
        Path(f"/runs/{label}/sampling/samples.jsonl"), "capcal_arithmetic", "s", f"{label}-lm", {}
    )
    selfcheck = SamplesFile(
        Path(f"/runs/{label}/check/samples.jsonl"), "capcal_arithmetic", "c", f"{label}-chk", {}
    )
    return CheckedRun(table, sampling, selfcheck, join_report("selfcheck", ids, ids))


def _rows(seed: int, ids: list[str], n: int) -> dict[str, dict]:
    """Per question: n 0/1 correctness values, answers (7 correct, 8 or 9 wrong), an expected accuracy that
    is NOT the mean of the correctness (so reading one for the other shows), and two different confidence
    columns (p_yes, and p_yes_normalized far from it)."""
    rng = np.random.default_rng(seed)
    out = {}
    for q in ids:
        z = [int(v) for v in rng.uniform(size=n) < rng.uniform(0.2, 0.8)]
        out[q] = {
            "z": z,
            "answers": [("7" if ok else str(8 + j % 2)) for j, ok in enumerate(z)],
            "mu": float(np.round(rng.uniform(0.05, 0.95), 3)),
            "p_yes": [float(v) for v in rng.uniform(0.0, 0.5, n)],
            "p_norm": [float(v) for v in rng.uniform(0.3, 1.0, n)],
        }
    return out


def _ece(c: np.ndarray, t: np.ndarray) -> float:
    """10 equal-width bins, the last one closed: (1/N) sum_b |sum_{i in b} (t_i - c_i)|."""
    bins = np.minimum((c * 10).astype(int), 9)
    return sum(abs(float(np.sum(t[bins == b] - c[bins == b]))) for b in range(10)) / len(c)


def _soft_auroc(c: np.ndarray, mu: np.ndarray) -> float:
    """sum_ij mu_i (1 - mu_j) [1(c_i > c_j) + 0.5 1(c_i = c_j)] / sum_ij mu_i (1 - mu_j), by a double loop."""
    num = den = 0.0
    for i in range(len(c)):
        for j in range(len(c)):
            w = mu[i] * (1.0 - mu[j])
            num += w * ((c[i] > c[j]) + 0.5 * (c[i] == c[j]))
            den += w
    return num / den


def _metrics(c: np.ndarray, z: np.ndarray, mu: np.ndarray) -> list[float]:
    """The eight metrics of a side, in the table's order, written here (AUROC by scikit-learn)."""
    cf, zf, mean_c = c.ravel(), z.ravel(), c.mean(axis=1)
    auc = roc_auc_score(zf, cf) if 0 < zf.sum() < zf.size else math.nan
    return [
        _ece(cf, zf),
        float(np.mean((cf - zf) ** 2)),
        auc,
        _ece(mean_c, mu),
        float(np.mean((mean_c - mu) ** 2)),
        _soft_auroc(mean_c, mu),
        float(c.mean()),
        float(mu.mean()),
    ]


METRICS = [
    "response ECE",
    "response Brier",
    "response AUROC",
    "capability ECE",
    "capability Brier",
    "capability soft AUROC",
    "mean self-check confidence",
    "mean expected accuracy",
]


def _arrays(rows: dict[str, dict], ids: list[str], column: str, m: int):
    c = np.array([rows[q][column][:m] for q in ids])
    z = np.array([rows[q]["z"][:m] for q in ids], dtype=float)
    return c, z, np.array([rows[q]["mu"] for q in ids])


def _percentiles(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.nanpercentile(values, 2.5, axis=0), np.nanpercentile(values, 97.5, axis=0)


COMMON = [f"arithmetic/q{i}" for i in range(10)]


def _two_sides():
    """before: 10 common questions + one of its own, 5 responses each; after: the 10 in reverse order (the
    comparison aligns them by id), 4 responses each, so 4 are compared (the first 4 of before's)."""
    before_rows = _rows(1, [*COMMON, "arithmetic/only_before"], 5)
    after_rows = _rows(2, COMMON[::-1], 4)
    return before_rows, after_rows, _run("before", before_rows), _run("after", after_rows)


def test_every_metric_and_interval_equals_a_paired_bootstrap_written_here():
    """confidence='p_yes_normalized', n_resamples=7, seed=5: every column (before, after, difference, each
    with low and high) of every metric equals the percentile interval over resamples drawn as
    default_rng(5).integers(0, 10, (7, 10)), the same rows for both sides (paired)."""
    before_rows, after_rows, before, after = _two_sides()
    result = compare_checked_runs(before, after, confidence="p_yes_normalized", n_resamples=7, seed=5)
    b = _arrays(before_rows, COMMON, "p_norm", 4)
    a = _arrays(after_rows, COMMON, "p_norm", 4)
    draws = np.random.default_rng(5).integers(0, 10, size=(7, 10))
    vb = np.array([_metrics(*(x[r] for x in b)) for r in draws])
    va = np.array([_metrics(*(x[r] for x in a)) for r in draws])
    expected = {"before": (_metrics(*b), *_percentiles(vb)), "after": (_metrics(*a), *_percentiles(va))}
    expected["difference"] = (
        np.subtract(expected["after"][0], expected["before"][0]),
        *_percentiles(va - vb),
    )
    frame = result.metrics
    assert list(frame.columns) == [
        "metric", "before", "before_low", "before_high", "after", "after_low", "after_high",
        "difference", "difference_low", "difference_high",
    ]  # fmt: skip
    assert list(frame["metric"]) == METRICS
    for side, (estimate, low, high) in expected.items():
        np.testing.assert_allclose(frame[side], estimate, rtol=1e-9, atol=1e-12, err_msg=side)
        np.testing.assert_allclose(frame[f"{side}_low"], low, rtol=1e-9, atol=1e-12, err_msg=side)
        np.testing.assert_allclose(frame[f"{side}_high"], high, rtol=1e-9, atol=1e-12, err_msg=side)
    assert (frame["before_low"] < frame["before_high"]).all()  # low and high are not the same number here


def test_the_p_yes_column_is_the_default_confidence():
    before_rows, after_rows, before, after = _two_sides()
    result = compare_checked_runs(before, after, n_resamples=2, seed=1)
    row = result.metrics.set_index("metric").loc["mean self-check confidence"]
    assert row["before"] == pytest.approx(np.mean([before_rows[q]["p_yes"][:4] for q in COMMON]))
    assert row["after"] == pytest.approx(np.mean([after_rows[q]["p_yes"][:4] for q in COMMON]))
    assert result.settings["confidence"] == "p_yes"


def test_curves_are_each_sides_strategies_with_a_bootstrap_over_the_same_rows():
    """taus=(0.3, 0.8), n_resamples=6, seed=4: each side's curve rows, estimates and intervals equal
    self_calibration_curves on that side's first 4 responses, on the full data and on the rows
    default_rng(4).integers(0, 10, (6, 10))."""
    before_rows, after_rows, before, after = _two_sides()
    result = compare_checked_runs(
        before, after, confidence="p_yes_normalized", n_resamples=6, seed=4, taus=(0.3, 0.8)
    )
    draws = np.random.default_rng(4).integers(0, 10, size=(6, 10))
    for side, rows in (("before", before_rows), ("after", after_rows)):
        c, z, _ = _arrays(rows, COMMON, "p_norm", 4)
        answers = [rows[q]["answers"][:4] for q in COMMON]

        def curves(r, c=c, z=z, answers=answers):
            return self_calibration_curves(
                encode_answer_classes([answers[i] for i in r]), z[r], c[r], taus=(0.3, 0.8)
            )

        full = curves(np.arange(10))
        resampled = np.array([curves(r)["accuracy"].to_numpy() for r in draws])
        got = result.curves[result.curves["side"] == side].reset_index(drop=True)
        assert list(got.columns) == [
            "side", "strategy", "max_samples", "tau",
            "accuracy", "accuracy_low", "accuracy_high", "avg_samples",
        ]  # fmt: skip
        pd.testing.assert_frame_equal(
            got[["strategy", "max_samples", "tau"]], full[["strategy", "max_samples", "tau"]]
        )
        assert set(got["tau"].dropna()) == {0.3, 0.8}
        np.testing.assert_allclose(got["accuracy"], full["accuracy"], rtol=1e-12)
        np.testing.assert_allclose(got["avg_samples"], full["avg_samples"], rtol=1e-12)
        low, high = _percentiles(resampled)
        np.testing.assert_allclose(got["accuracy_low"], low, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got["accuracy_high"], high, rtol=1e-12, atol=1e-12)
    assert not np.allclose(
        result.curves.loc[result.curves.side == "before", "accuracy"].to_numpy(),
        result.curves.loc[result.curves.side == "after", "accuracy"].to_numpy(),
    )


def test_counts_and_settings_each_from_their_own_side():
    """before: 6 questions (q5 not self-checked), 6 responses; after: 7 (q3 with a NaN, q4 with a None
    entry), 5 responses: compared = {q0, q1, q2}, one-run-only = {q3, q4, q6, q7}; every count distinct."""
    before_rows = _rows(3, [f"arithmetic/q{i}" for i in range(6)], 6)
    after_rows = _rows(4, [f"arithmetic/q{i}" for i in (0, 1, 2, 3, 4, 6, 7)], 5)
    before_rows["arithmetic/q5"]["p_yes"] = None
    after_rows["arithmetic/q3"]["p_yes"] = [0.5, 0.5, math.nan, 0.5, 0.5]
    after_rows["arithmetic/q4"]["p_yes"] = [0.5, None, 0.5, 0.5, 0.5]
    after_ids = ["sha-b", "sha-a", "sha-b", "sha-a", "sha-b", "sha-a", "sha-a"]
    training = {"method": "sft", "config": {"lr": 1e-5}}
    result = compare_checked_runs(
        _run("before", before_rows), _run("after", after_rows, after_ids),
        tolerance=0.07, n_resamples=3, seed=9, training=training,
    )  # fmt: skip
    assert result.counts == {
        "questions_compared": 3,
        "responses_per_question": 5,
        "questions_before": 6,
        "questions_after": 7,
        "questions_missing_selfcheck_before": 1,
        "questions_missing_selfcheck_after": 2,
        "questions_in_one_run_only": 4,
    }
    assert result.settings == {
        "confidence": "p_yes",
        "tolerance": 0.07,
        "n_resamples": 3,
        "seed": 9,
        "before": {
            "sampling": "/runs/before/sampling/samples.jsonl",
            "selfcheck": "/runs/before/check/samples.jsonl",
            "model": "before-lm",
            "model_identity": "sha-before",
        },
        "after": {
            "sampling": "/runs/after/sampling/samples.jsonl",
            "selfcheck": "/runs/after/check/samples.jsonl",
            "model": "after-lm",
            "model_identity": ["sha-a", "sha-b"],
        },
        "training": training,
    }


def test_refusals_with_whole_messages():
    rows = _rows(5, [f"arithmetic/q{i}" for i in range(5)], 3)
    before, after = _run("before", rows), _run("after", rows)
    with pytest.raises(SelfCalibrationDataError) as error:
        compare_checked_runs(before, after, confidence="p_no", n_resamples=2)
    assert str(error.value) == "confidence must be p_yes or p_yes_normalized"
    trained = ["arithmetic/q4", "arithmetic/q1", "arithmetic/q3", "arithmetic/q0", "elsewhere/q9"]
    with pytest.raises(SelfCalibrationDataError) as error:
        compare_checked_runs(before, after, training_question_ids=trained, n_resamples=2)
    assert str(error.value) == (
        "4 compared question(s) were training questions, e.g. arithmetic/q0, arithmetic/q1, arithmetic/q3"
    )
    # a training question that is not compared is no reason to refuse
    compare_checked_runs(before, after, training_question_ids=["elsewhere/q9"], n_resamples=2)
    other = _run("other", _rows(6, ["other/q1"], 3))
    with pytest.raises(SelfCalibrationDataError) as error:
        compare_checked_runs(before, other, n_resamples=2)
    assert str(error.value) == (
        "no question is fully self-checked in both runs "
        "(/runs/before/sampling/samples.jsonl, /runs/other/sampling/samples.jsonl)"
    )


def _metrics_frame(accuracy_difference: float) -> pd.DataFrame:
    """Eight metric rows whose nine numbers all differ (row k: k + 0.1 .. k + 0.9 / 1000 steps); the mean
    expected accuracy's difference is ``accuracy_difference`` and the row before it has difference +0.5."""
    rows = []
    for k, name in enumerate(METRICS):
        base = 0.1 * k
        rows.append(
            {"metric": name,
             "before": base + 0.0111, "before_low": base + 0.0022, "before_high": base + 0.0333,
             "after": base + 0.0444, "after_low": base + 0.0355, "after_high": base + 0.0666,
             "difference": base + 0.0777, "difference_low": base + 0.0688, "difference_high": base + 0.0999}
        )  # fmt: skip
    rows[-2]["difference"] = 0.5
    rows[-1]["difference"] = accuracy_difference
    return pd.DataFrame(rows)


def _curves_frame() -> pd.DataFrame:
    """Both sides' curves with M = 5 (so M/2 = 2) and taus 0.5, 0.6, 0.7, 0.9; every number distinct."""
    rows = []
    for side in ("before", "after"):
        for strategy in ("self_consistency", "weighted_self_consistency"):
            rows += [
                {"side": side, "strategy": strategy, "max_samples": n, "tau": math.nan} for n in range(1, 6)
            ]
        for strategy in ("early_stopping", "adaptive_weighted_self_consistency", "adaptive_self_consistency"):
            rows += [
                {"side": side, "strategy": strategy, "max_samples": 5, "tau": t} for t in (0.5, 0.6, 0.7, 0.9)
            ]
    frame = pd.DataFrame(rows)
    i = np.arange(len(frame))
    frame["accuracy"] = 0.3 + 0.0101 * i
    frame["accuracy_low"] = 0.2 + 0.0052 * i
    frame["accuracy_high"] = 0.5 + 0.0073 * i
    frame["avg_samples"] = 1.0 + 0.0314 * i
    return frame


def _comparison(accuracy_difference: float = -0.25, tolerance: float = 0.2, training=None) -> Comparison:
    settings = {
        "confidence": "p_yes_normalized",
        "tolerance": tolerance,
        "n_resamples": 11,
        "seed": 2,
        "before": {"sampling": "/b/s", "selfcheck": "/b/c", "model": "base-lm", "model_identity": "sha-base"},
        "after": {
            "sampling": "/a/s",
            "selfcheck": "/a/c",
            "model": "tuned-lm",
            "model_identity": "sha-tuned",
        },
        "training": training,
    }
    counts = {"questions_compared": 3, "responses_per_question": 5, "questions_before": 6}
    return Comparison(_metrics_frame(accuracy_difference), _curves_frame(), counts, settings)


def test_accuracy_within_tolerance_is_read_from_the_accuracy_row_and_includes_the_boundary():
    """difference -0.25 (exact in binary): within a tolerance of 0.25, not within 0.2499; the row before it
    (difference +0.5) is not the one read."""
    assert _comparison(-0.25, 0.25).accuracy_within_tolerance is True
    assert _comparison(-0.25, 0.2499).accuracy_within_tolerance is False
    assert _comparison(-0.25, 0.3).accuracy_within_tolerance is True


@pytest.fixture
def no_figure(monkeypatch):
    """The curves figure (matplotlib, slow) replaced by fixed bytes: these tests are about the text."""
    monkeypatch.setattr(compare_module, "_curves_figure", lambda curves: b"\x89PNG figure")


def test_report_section_facts_and_metric_table_whole(no_figure):
    section = comparison_section(_comparison(-0.25, 0.2))
    assert list(section.facts.items()) == [
        ("questions_compared", 3),
        ("responses_per_question", 5),
        ("questions_before", 6),
        ("confidence", "p_yes_normalized"),
        ("before model", "base-lm"),
        ("before model identity", "sha-base"),
        ("after model", "tuned-lm"),
        ("after model identity", "sha-tuned"),
        ("accuracy change", "-0.250 (NOT within the tolerance 0.200)"),
    ]
    assert comparison_section(_comparison(-0.125, 0.2)).facts["accuracy change"] == (
        "-0.125 (within the tolerance 0.200)"
    )
    caption, table = section.tables[0]
    assert (
        caption == "Calibration of the self-check confidence and accuracy (95 % paired bootstrap intervals)"
    )
    assert list(table.columns) == ["metric", "before", "after", "after - before"]
    assert table.iloc[1].to_dict() == {  # row k = 1: base 0.1
        "metric": "response Brier",
        "before": "0.111 [0.102, 0.133]",
        "after": "0.144 [0.136, 0.167]",
        "after - before": "0.178 [0.169, 0.200]",
    }
    assert list(table["metric"]) == METRICS
    assert table.iloc[-1]["after - before"] == "-0.250 [0.769, 0.800]"
    assert section.title == "Self-Calibration training: before vs after"
    assert section.notes == [
        "Response calibration: each response's self-check P(Yes) against its 0/1 correctness; capability "
        "calibration: the mean P(Yes) over a question's responses against its expected accuracy."
    ]
    assert [f.png for f in section.figures] == [b"\x89PNG figure"]


def _cell(frame: pd.DataFrame, side: str, strategy: str, **where) -> tuple[str, str]:
    """The expected (accuracy with interval, samples) text of one curve point, by f-string here."""
    mask = (frame["side"] == side) & (frame["strategy"] == strategy)
    for key, value in where.items():
        mask &= frame[key] == value
    (r,) = frame[mask].itertuples()
    return f"{r.accuracy:.3f} [{r.accuracy_low:.3f}, {r.accuracy_high:.3f}]", f"{r.avg_samples:.2f}"


def test_report_section_operating_points_whole(no_figure):
    """N = 1, M/2 = 2, M = 5 for the votes and tau 0.5, 0.7, 0.9 (not 0.6) for the thresholds, with each
    side's accuracy, interval and samples from that side's own row; plain adaptive self-consistency is not
    shown."""
    curves = _curves_frame()
    _, table = comparison_section(_comparison()).tables[1]
    expected = []
    labels = {
        "early_stopping": "early-stopping best-of-N",
        "weighted_self_consistency": "confidence-weighted self-consistency",
        "adaptive_weighted_self_consistency": "adaptive self-consistency with confidence",
        "self_consistency": "self-consistency (baseline)",
    }
    for strategy, label in labels.items():
        if strategy.endswith("self_consistency") and not strategy.startswith("adaptive"):
            points = [
                ("N = 1", {"max_samples": 1}),
                ("N = 2", {"max_samples": 2}),
                ("N = 5", {"max_samples": 5}),
            ]
        else:
            points = [(f"tau = {t}", {"tau": t}) for t in (0.5, 0.7, 0.9)]
        for point, where in points:
            before = _cell(curves, "before", strategy, **where)
            after = _cell(curves, "after", strategy, **where)
            expected.append([label, point, *before, *after])
    assert list(table.columns) == [
        "strategy", "point", "before accuracy", "before samples", "after accuracy", "after samples"
    ]  # fmt: skip
    assert table.to_numpy().tolist() == expected


def test_operating_points_keep_before_columns_first_when_the_curves_list_after_first(no_figure):
    """The operating-points table has its fixed column order (before, then after) even when the curves (a
    ``curves.csv`` read back, say) list the "after" rows first; catches columns taken from the rows' order."""
    curves = _curves_frame()
    comparison = _comparison()
    comparison.curves = pd.concat(
        [curves[curves["side"] == "after"], curves[curves["side"] == "before"]], ignore_index=True
    )
    _, table = comparison_section(comparison).tables[1]
    assert list(table.columns) == [
        "strategy", "point", "before accuracy", "before samples", "after accuracy", "after samples"
    ]  # fmt: skip
    # early stopping at tau 0.5: row 10 of _curves_frame before, row 22 + 10 = 32 after
    # before: 0.3 + 0.0101 * 10, [0.2 + 0.0052 * 10, 0.5 + 0.0073 * 10], 1 + 0.0314 * 10 samples
    # after: 0.3 + 0.0101 * 32 = 0.6232, [0.3664, 0.7336], 1 + 0.0314 * 32 = 2.0048 samples
    assert table.iloc[0].tolist() == [
        "early-stopping best-of-N", "tau = 0.5",
        "0.401 [0.252, 0.573]", "1.31",
        "0.623 [0.366, 0.734]", "2.00",
    ]  # fmt: skip


def test_report_section_training_table_lists_settings_then_config(no_figure):
    training = {"method": "sft", "config": {"learning_rate": 1e-5, "layers": [3, 4]}, "data_sha256": "abc"}
    caption, table = comparison_section(_comparison(training=training)).tables[2]
    assert caption == "Training of the after model"
    assert table.to_numpy().tolist() == [
        ["method", "sft"],
        ["data_sha256", "abc"],
        ["learning_rate", "1e-05"],
        ["layers", "3 4"],
    ]
    caption, table = comparison_section(_comparison(training=None)).tables[2]
    assert caption == "Training settings" and table.to_numpy().tolist() == [["training", "not recorded"]]


def test_write_then_read_keeps_every_part_under_its_own_name(no_figure, tmp_path):
    comparison = _comparison(-0.25, 0.2)
    files = write_comparison(comparison, tmp_path / "out")
    assert files == {
        "json": tmp_path / "out" / "comparison.json",
        "curves": tmp_path / "out" / "curves.csv",
        "html": tmp_path / "out" / "report.html",
        "markdown": tmp_path / "out" / "report.md",
    }
    assert comparison.files == files
    written = json.loads(files["json"].read_text())
    assert written["accuracy_within_tolerance"] is False
    assert written["counts"] == comparison.counts and written["settings"] == comparison.settings
    back = read_comparison(tmp_path / "out")
    pd.testing.assert_frame_equal(back.metrics, comparison.metrics)
    pd.testing.assert_frame_equal(back.curves, comparison.curves)
    assert back.counts == comparison.counts and back.settings == comparison.settings
    assert back.files == files
    assert back.accuracy_within_tolerance is False


def test_compare_runs_passes_each_folder_and_every_option_through(no_figure, tmp_path, monkeypatch):
    """The four folders reach read_checked_sides as (before sampling, before self-check), (after sampling,
    after self-check) and the training data; the options reach the comparison; the sides' training
    questions are refused; the outputs are written."""
    rows = _rows(7, [f"arithmetic/q{i}" for i in range(6)], 4)
    calls = []

    def read_sides(before, after, training_data=None):
        calls.append((before, after, training_data))
        return CheckedSides(_run("before", rows), _run("after", rows), ["arithmetic/q9"])

    monkeypatch.setattr(compare_module, "read_checked_sides", read_sides)
    options = {"confidence": "p_yes_normalized", "tolerance": 0.03, "n_resamples": 4, "seed": 8}
    result = compare_runs("bs", "bc", "as", "ac", tmp_path / "out", training_data="t.jsonl", **options)
    assert calls == [(("bs", "bc"), ("as", "ac"), "t.jsonl")]
    assert {k: result.settings[k] for k in options} == options
    assert (tmp_path / "out" / "comparison.json").is_file() and result.files["json"].is_file()
    mean = result.metrics.set_index("metric").loc["mean self-check confidence", "before"]
    assert mean == pytest.approx(np.mean([rows[q]["p_norm"] for q in rows]))

    def leaking(before, after, training_data=None):
        return CheckedSides(_run("before", rows), _run("after", rows), ["arithmetic/q2"])

    monkeypatch.setattr(compare_module, "read_checked_sides", leaking)
    with pytest.raises(SelfCalibrationDataError, match="^1 compared question"):
        compare_runs("bs", "bc", "as", "ac", tmp_path / "out2", n_resamples=2)


class _Axis:
    """Records what is drawn on it."""

    def __init__(self) -> None:
        self.lines: list[tuple[list, list, dict]] = []
        self.bands: list[tuple[list, list, list, dict]] = []
        self.title = ""

    def plot(self, x, y, **kwargs) -> None:
        self.lines.append((list(x), list(y), kwargs))

    def fill_between(self, x, low, high, **kwargs) -> None:
        self.bands.append((list(x), list(low), list(high), kwargs))

    def set_title(self, title, **kwargs) -> None:
        self.title = title

    def set_xlabel(self, label) -> None:
        pass

    def set_ylabel(self, label) -> None:
        pass

    def legend(self, **kwargs) -> None:
        pass


def test_curves_figure_draws_each_sides_curve_sorted_by_samples_with_its_band(monkeypatch):
    """Three panels (the strategies other than plain self-consistency, in order), each with per side: the
    curve sorted by average samples, the band from accuracy_low to accuracy_high, and that side's plain
    self-consistency dotted; drawn on recording axes (nothing rendered)."""
    import matplotlib.pyplot as plt

    axes = [_Axis() for _ in range(3)]

    class _Figure:
        def tight_layout(self) -> None:
            pass

        def savefig(self, buffer, **kwargs) -> None:
            buffer.write(b"png")

    monkeypatch.setattr(plt, "subplots", lambda *a, **k: (_Figure(), np.array([axes], dtype=object)))
    monkeypatch.setattr(plt, "close", lambda figure: None)
    curves = _curves_frame()
    curves = curves.iloc[::-1].reset_index(drop=True)  # the figure must sort by avg_samples itself
    assert compare_module._curves_figure(curves) == b"png"
    names = ["early_stopping", "weighted_self_consistency", "adaptive_weighted_self_consistency"]
    assert [axis.title for axis in axes] == [
        "early-stopping best-of-N",
        "confidence-weighted self-consistency",
        "adaptive self-consistency with confidence",
    ]
    for axis, strategy in zip(axes, names, strict=True):
        for k, (side, colour) in enumerate((("before", "tab:gray"), ("after", "tab:blue"))):
            part = [r for r in _curves_frame().itertuples() if r.side == side and r.strategy == strategy]
            part.sort(key=lambda r: r.avg_samples)
            x, y, style = axis.lines[2 * k]
            assert x == [r.avg_samples for r in part] and y == [r.accuracy for r in part]
            assert (style["color"], style["label"]) == (colour, side)
            bx, low, high, band = axis.bands[k]
            assert bx == x and band["color"] == colour
            assert low == [r.accuracy_low for r in part] and high == [r.accuracy_high for r in part]
            base = [r for r in curves.itertuples() if r.side == side and r.strategy == "self_consistency"]
            bx, by, dotted = axis.lines[2 * k + 1]
            assert bx == [r.avg_samples for r in base] and by == [r.accuracy for r in base]
            assert (dotted["linestyle"], dotted["color"], dotted["label"]) == (
                ":",
                colour,
                f"{side}: self-consistency",
            )


def test_responses_compared_are_the_fewest_any_question_has_and_undefined_resamples_stay_quiet():
    """before's questions have 6, 4 and 6 responses, after's 7 each: 4 responses per question are compared
    (the fewest of any question on either side, the first 4 of each). With 3 questions some resamples have
    one class only (AUROC undefined): they are left out without a warning reaching the caller."""
    before_rows = _rows(8, ["arithmetic/q0", "arithmetic/q1", "arithmetic/q2"], 6)
    for key in ("z", "answers", "p_yes", "p_norm"):
        before_rows["arithmetic/q1"][key] = before_rows["arithmetic/q1"][key][:4]
    after_rows = _rows(9, list(before_rows), 7)
    after_rows["arithmetic/q0"]["z"] = [1] * 7  # q0 always right, q2 always wrong on the after side
    after_rows["arithmetic/q2"]["z"] = [0] * 7
    with warnings.catch_warnings():
        warnings.simplefilter("error", UndefinedMetricWarning)
        result = compare_checked_runs(_run("b", before_rows), _run("a", after_rows), n_resamples=20, seed=1)
    assert result.counts["responses_per_question"] == 4
    row = result.metrics.set_index("metric").loc["mean self-check confidence"]
    assert row["before"] == pytest.approx(np.mean([before_rows[q]["p_yes"][:4] for q in before_rows]))
    assert row["after"] == pytest.approx(np.mean([after_rows[q]["p_yes"][:4] for q in after_rows]))
