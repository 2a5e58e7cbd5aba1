"""The HTML report: self-contained, every figure loads in headless Chromium, model text stays text."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.calibration_table import calibration_table
from analysis.figures import Curve, curves_figure, reliability_figure, target_scatter_figure
from analysis.report import Figure, ReportSection, format_interval, write_report

HOSTILE = "<script>window.__capcal_pwned = 1</script><img src=x onerror='window.__capcal_pwned=1'>"


def _table(n_questions: int = 60, k: int = 8, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    mu = rng.beta(0.7, 0.7, n_questions)
    correctness = [list(rng.binomial(1, m, k)) for m in mu]
    return pd.DataFrame(
        {
            "question_id": [f"toy/{i}" for i in range(n_questions)],
            "question": [f"What is {i} + {i}? {HOSTILE}" for i in range(n_questions)],
            "correctness": correctness,
            "n": k,
            "expected_accuracy": [float(np.mean(z)) for z in correctness],
            "good": np.clip(mu + rng.normal(0, 0.1, n_questions), 0, 1),
            "noise": rng.uniform(0, 1, n_questions),
        }
    )


def test_calibration_table_ranks_a_good_estimator_above_noise():
    table = _table()
    metrics = calibration_table(table, ["good", "noise"], n_resamples=200)
    value = metrics.set_index(["estimator", "metric"])["estimate"]
    assert value["good", "soft_auroc"] > value["noise", "soft_auroc"] + 0.15
    assert value["good", "capability_brier"] < value["noise", "capability_brier"]
    row = metrics.set_index(["estimator", "metric"]).loc[("good", "capability_ece")]
    assert row["low"] <= row["estimate"] <= row["high"]
    assert value["random (expected)", "soft_auroc"] == 0.5


def test_calibration_table_counts_missing_confidences():
    table = _table()
    table.loc[:9, "good"] = np.nan
    metrics = calibration_table(table, ["good"], n_resamples=50)
    assert set(metrics.loc[metrics.estimator == "good", "questions_missing"]) == {10}
    assert set(metrics.loc[metrics.estimator == "good", "questions"]) == {50}


def test_format_interval():
    assert format_interval(0.1234, 0.1, 0.15) == "0.123 [0.100, 0.150]"
    assert format_interval(0.5, float("nan"), float("nan")) == "0.500"
    assert format_interval(float("nan"), 0, 1) == "n/a"


@pytest.mark.slow
def test_report_renders_in_chromium_with_every_figure_and_escaped_text(tmp_path, browser):
    table = _table()
    mu = table["expected_accuracy"].to_numpy()
    z = np.array([c[0] for c in table["correctness"]], dtype=float)
    confidences = {"good": table["good"].to_numpy(), "noise": table["noise"].to_numpy()}
    band = Curve("a", [1, 2, 4], [0.1, 0.2, 0.3], [0, 0.1, 0.2], [0.2, 0.3, 0.4])
    figures = [
        Figure("capability reliability", reliability_figure(confidences, mu, "mu_hat")),
        Figure("response reliability", reliability_figure(confidences, z, "z")),
        Figure("targets", target_scatter_figure(confidences, mu, z)),
        Figure("curve", curves_figure([band], "t", "x", "y", log_x=True)),
    ]
    section = ReportSection(
        title=f"toy model {HOSTILE}",
        facts={"questions": len(table)},
        tables=[("examples", table[["question_id", "question"]].head(3))],
        figures=figures,
    )
    files = write_report([section], tmp_path / "report", title="capcal test report")
    page = files.html.read_text()
    assert "<script" not in page and "&lt;script&gt;" in page
    assert "http://" not in page and "https://" not in page, "the report must not need the network"
    assert len(files.figures) == 4 and all(path.stat().st_size > 1000 for path in files.figures)
    assert "figures/" in files.markdown.read_text()

    loaded, total, pwned, dom = browser.check_page(files.html, tmp_path / "profile")
    assert total == 4 and loaded == 4
    assert not pwned
    assert "window.__capcal_pwned = 1" in dom  # shown as text
    shot = browser.screenshot(files.html, tmp_path / "report.png", tmp_path / "profile2")
    assert shot.stat().st_size > 10_000
