"""The documented claims about the debiased ECE and the skill and AUROC intervals, on four shapes of mu.

Issue 48 checked the claims of docs/methods.md and capcal_metrics/debiased_ece.py on four shapes of the true
capability mu: Beta(0.25, 0.25), Beta(0.5, 0.5), Beta(0.5, 3) and the 40/40/20 point-mass mixture (40% of
questions at mu = 0, 40% at 1, U(0, 1) for the rest), N = 50/200/1000 questions, k = 4/16 samples, a
calibrated, an over- and an underconfident forecast and the oracle c = mu. The docs quote figures from
``benchmarks/ece_bias_simulation.py --summary`` on the stored runs in benchmarks/results/
(``ece_bias_simulation_claims*.json``; commands in docs/methods.md). Two checks:

- the docs state those stored figures (each range and each named exception is the stored one, to the digits
  shown), so a claim cannot drift from its measurement;
- a fresh, smaller simulation (new seeds, 100 data sets per cell, N = 50 where the claims are weakest) agrees
  with the stored cell within its Monte-Carlo error: coverage within 4 combined binomial SE, biases within 4
  combined SE. The simulation code is the benchmark's own (loaded from its file), so the test checks the
  stored figures against the code as it is now.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

import capcal_metrics as cm

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"


def _load_benchmark():
    spec = importlib.util.spec_from_file_location(
        "ece_bias_simulation", REPO / "benchmarks" / "ece_bias_simulation.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCHMARK = _load_benchmark()
ECE_ROWS = [
    row
    for name in ("claims", "claims_mixture_40_40_20")
    for row in json.loads((RESULTS / f"ece_bias_simulation_{name}.json").read_text())["ece"]
]
INTERVAL_ROWS = [
    row
    for name in ("", "_n1000")
    for shapes in ("", "_mixture_40_40_20")
    for row in json.loads((RESULTS / f"ece_bias_simulation_claims_intervals{name}{shapes}.json").read_text())[
        "intervals"
    ]
]
METHODS_TEXT = " ".join((REPO / "docs" / "methods.md").read_text().split())  # line breaks as spaces
REPETITIONS = 100
DEBIASED_DOC = importlib.import_module("capcal_metrics.debiased_ece").__doc__
# cells the docs name, with the text that quotes them ({} is the stored figure)
MIXTURE = "mixture_40_40_20"
NAMED_CELLS: list[tuple[tuple[str, str, int, int], str, str]] = [
    (
        (MIXTURE, "overconfident", 4, 50),
        "corrected_skill_jackknife_coverage",
        "{:.3f} (overconfident, k = 4)",
    ),
    (
        (MIXTURE, "overconfident", 16, 50),
        "corrected_skill_jackknife_coverage",
        "{:.3f} (overconfident, k = 16)",
    ),
    ((MIXTURE, "calibrated", 16, 50), "corrected_skill_jackknife_coverage", "{:.3f} (calibrated, k = 16)"),
    ((MIXTURE, "overconfident", 4, 50), "soft_auroc_jackknife_coverage", "({:.3f}, overconfident, k = 4)"),
    ((MIXTURE, "underconfident", 4, 50), "debiased_jackknife_coverage", "covers {:.3f} (k = 4)"),
    ((MIXTURE, "underconfident", 16, 50), "debiased_jackknife_coverage", "and {:.3f} (k = 16)"),
    ((MIXTURE, "underconfident", 4, 50), "debiased_bias_to_binned", "keeps {:.3f} (k = 4); at N = 200"),
    (("beta05_3", "overconfident", 4, 200), "debiased_bias_to_binned", "one keeps {:.3f} (k = 4)"),
    (("beta05", "overconfident", 4, 1000), "debiased_bias_to_binned", "up to {:.3f} (Beta(0.5, 0.5)"),
]


def stored(rows: list[dict], shape: str, case: str, k: int, n_questions: int) -> dict:
    (row,) = [r for r in rows if (r["shape"], r["case"], r["k"], r["N"]) == (shape, case, k, n_questions)]
    return row


def coverage_tolerance(p: float, repetitions: int, stored_repetitions: int) -> float:
    """4 combined binomial SE of two independent coverage estimates, plus half a data set."""
    p = min(max(p, 0.02), 0.98)
    return 4 * math.sqrt(p * (1 - p) * (1 / repetitions + 1 / stored_repetitions)) + 0.5 / repetitions


def test_the_stored_runs_cover_the_claims_grid():
    cells = {(r["shape"], r["case"], r["k"], r["N"]) for r in ECE_ROWS}
    grid = {
        (shape, case, k, n)
        for shape in BENCHMARK.CLAIM_SHAPES
        for case in BENCHMARK.ALL_CASES
        for k in (4, 16)
        for n in (50, 200, 1000)
    }
    assert grid <= cells
    assert grid <= {(r["shape"], r["case"], r["k"], r["N"]) for r in INTERVAL_ROWS}


def _range(figures: dict, n_questions: int, digits: int = 2) -> str:
    low, high = figures[n_questions]["low"], figures[n_questions]["high"]
    return f"{low:+.{digits}f} to {high:+.{digits}f}" if digits > 2 else f"{low:.2f} to {high:.2f}"


def claims_table_rows() -> list[str]:
    """The rows of docs/methods.md's table "The four shapes of issue 48", from the stored runs."""
    columns = [
        (ECE_ROWS, "debiased_jackknife_coverage", BENCHMARK.MISCALIBRATED, 2),
        (ECE_ROWS, "debiased_jackknife_coverage", ("calibrated", "oracle"), 2),
        (ECE_ROWS, "debiased_bias_to_binned", BENCHMARK.MISCALIBRATED, 2),
        (ECE_ROWS, "debiased_bias_to_binned", ("calibrated", "oracle"), 2),
        (ECE_ROWS, "debiased_bias", BENCHMARK.MISCALIBRATED, 4),
        (INTERVAL_ROWS, "corrected_skill_jackknife_coverage", BENCHMARK.ALL_CASES, 2),
        (INTERVAL_ROWS, "soft_auroc_jackknife_coverage", BENCHMARK.ALL_CASES, 2),
    ]
    figures = [
        (BENCHMARK.claim_figures(rows, value, cases), digits) for rows, value, cases, digits in columns
    ]
    return [
        f"| {n} | " + " | ".join(_range(figure, n, digits) for figure, digits in figures) + " |"
        for n in (50, 200, 1000)
    ]


def test_the_docs_quote_the_stored_figures():
    """Every range of docs/methods.md's table for the four shapes is the stored one (``claim_figures``), and
    each exception the text names is the stored cell's figure."""
    for row in claims_table_rows():
        assert row in METHODS_TEXT, row
    debiased_ece_doc = " ".join(DEBIASED_DOC.split())
    for (shape, case, k, n_questions), text in (
        ((MIXTURE, "underconfident", 4, 50), "underconfident forecast keeps {:.3f} at N = 50"),
        (("beta05_3", "overconfident", 4, 200), "overconfident one {:.3f} at N = 200"),
        (("beta05", "overconfident", 4, 1000), "Beta(0.5, 0.5)'s {:.3f} at N = 1000"),
    ):
        figure = stored(ECE_ROWS, shape, case, k, n_questions)["debiased_bias_to_binned"]
        assert text.format(figure) in debiased_ece_doc, text.format(figure)
    for (shape, case, k, n_questions), value, text in NAMED_CELLS:
        rows = INTERVAL_ROWS if value.startswith(("corrected", "soft")) else ECE_ROWS
        figure = stored(rows, shape, case, k, n_questions)[value]
        assert text.format(figure) in METHODS_TEXT, (shape, case, k, n_questions, value, text.format(figure))


@pytest.mark.parametrize("shape", ["beta025", "beta05", "beta05_3", "mixture_40_40_20"])
def test_debiased_ece_bias_and_coverage_reproduce_at_50_questions(shape):
    """Fresh data sets (seed + 7) in every (case, k) cell at N = 50: the debiased and binned ECE's biases and
    the debiased ECE's jackknife coverage agree with the stored cell within their Monte-Carlo error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        for case_index, case in enumerate(BENCHMARK.ALL_CASES):
            for k in (4, 16):
                seed = BENCHMARK.SHAPES.index(shape) * 100_000 + case_index * 1000 + k * 7 + 50 + 7
                fresh = BENCHMARK.ece_cell(case, k, 50, REPETITIONS, 0, seed, shape, comparisons=False)
                old = stored(ECE_ROWS, shape, case, k, 50)
                where = f"{shape} {case} k={k}"
                for name in ("binned", "debiased"):
                    tolerance = 4 * math.hypot(fresh[f"{name}_bias_se"], old[f"{name}_bias_se"])
                    assert abs(fresh[f"{name}_bias"] - old[f"{name}_bias"]) <= tolerance, (where, name)
                coverage = old["debiased_jackknife_coverage"]
                tolerance = coverage_tolerance(coverage, REPETITIONS, old["repetitions"])
                assert abs(fresh["debiased_jackknife_coverage"] - coverage) <= tolerance, where


@pytest.mark.parametrize("shape", ["beta025", "beta05", "beta05_3", "mixture_40_40_20"])
def test_skill_and_auroc_coverage_reproduce_at_50_questions(shape):
    """As above for the jackknife intervals of the corrected Brier skill and the soft AUROC (N = 50)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        for case_index, case in enumerate(BENCHMARK.ALL_CASES):
            for k in (4, 16):
                seed = BENCHMARK.SHAPES.index(shape) * 100_000 + case_index * 1000 + k * 7 + 50 + 8
                fresh = BENCHMARK.interval_cell(case, k, 50, REPETITIONS, seed, shape)
                old = stored(INTERVAL_ROWS, shape, case, k, 50)
                for name in ("corrected_skill", "soft_auroc"):
                    coverage = old[f"{name}_jackknife_coverage"]
                    repetitions = round(REPETITIONS * fresh[f"{name}_defined"])
                    tolerance = coverage_tolerance(coverage, repetitions, 1000)
                    got = fresh[f"{name}_jackknife_coverage"]
                    assert abs(got - coverage) <= tolerance, (shape, case, k, name, got, coverage)


def test_the_oracle_population_values():
    """The oracle's population AUROC by the quantile grid against a large sample (4 SE of the sample's
    AUROC, whose SE at 20,000 questions is below 0.002), and its skill and ECE (exactly 1 and 0)."""
    rng = np.random.default_rng(11)
    for shape in BENCHMARK.CLAIM_SHAPES:
        mu = BENCHMARK.draw_mu(rng, shape, 20_000)
        skill, auroc = BENCHMARK.population_skill_and_auroc("oracle", shape)
        assert skill == 1.0 and BENCHMARK.population_ece("oracle", shape) == 0.0
        assert auroc == pytest.approx(cm.soft_label_auroc(mu, mu), abs=0.008), shape
