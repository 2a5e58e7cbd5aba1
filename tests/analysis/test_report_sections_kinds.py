"""The report's sections tested by kind (issue 49, point 2): each bootstrap setting of a section reaches the
metrics it computes (resamples and seed, neither the default), each estimator is kept in exactly the parts it
is registered for, each cell of a table is read from its own column (a metric's estimate, low and high; the
questions as the most over the metrics), a band clipped at both ends, the rows and columns kept in the order
given, each documented boundary on both sides (a second model no more accurate, the share of questions tied
at one mu_hat, the first four estimators) and each caption, title and note matched whole. Every expected
value is written out by hand here (or by a loop over the formula); the inputs are small tables built
directly (fast)."""

from __future__ import annotations

from math import comb
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import capcal_metrics as cm
from analysis.report import sections
from analysis.report.calibration_table import INTERVAL_NOTES
from analysis.report.registry import (
    BUDGET,
    CALIBRATION_TABLES,
    PASS_AT_K,
    ROUTING,
    ComputedEstimators,
    Estimator,
)
from analysis.report.sections import (
    SectionInputs,
    _ece_titles,
    budget_part,
    examples_table,
    leakage_free_part,
    pass_at_k_curves,
    pass_at_k_part,
    routing_guide,
    routing_lines,
    routing_section,
    section_inputs,
)

NAN = float("nan")
# Four questions, each with its own k and count of correct samples: mu_hat 0.25, 0.6, 0.5, 1.0.
CORRECTNESS = [[1, 0, 0, 0], [1, 1, 0, 1, 0], [0, 1, 1, 0, 1, 0], [1, 1, 1, 1, 1]]
P_TRUE = [0.2, 0.7, 0.4, 0.9]


def _evaluation(**columns: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "correctness": CORRECTNESS,
            "n": [len(v) for v in CORRECTNESS],
            "expected_accuracy": [sum(v) / len(v) for v in CORRECTNESS],
            "p_true": P_TRUE,
            **columns,
        }
    )


def _entry(name: str, *parts: str) -> Estimator:
    """A registry entry for the parts of the report given (never computed here)."""
    return Estimator(name, lambda context: None, "capability", frozenset(parts))


def _computed(evaluation: pd.DataFrame, **entries: Estimator) -> ComputedEstimators:
    return ComputedEstimators(evaluation, dict(entries), [], {}, {})


def _inputs(evaluation: pd.DataFrame, *names: str, n_resamples: int = 37, seed: int = 11) -> SectionInputs:
    every = (CALIBRATION_TABLES, PASS_AT_K, BUDGET, ROUTING)
    computed = _computed(evaluation, **{name: _entry(name, *every) for name in names})
    return SectionInputs(computed, list(names), n_resamples, seed)


# ------------------------------------------------------------------ the bootstrap settings reach the metrics


class _TableSpy:
    """Stands in for ``calibration_table``: keeps each call and answers the rows it is given."""

    def __init__(self, rows: pd.DataFrame) -> None:
        self.rows, self.calls = rows, []

    def __call__(self, table, estimators, **settings):
        self.calls.append((table, list(estimators), settings))
        return self.rows


def test_section_metrics_are_computed_with_the_sections_resamples_and_seed(monkeypatch):
    spy = _TableSpy(pd.DataFrame({"estimator": ["p_true"], "metric": ["capability_brier"]}))
    monkeypatch.setattr(sections, "calibration_table", spy)
    inputs = _inputs(_evaluation(), "p_true")
    assert inputs.metrics is spy.rows
    ((table, estimators, settings),) = spy.calls
    assert table is inputs.evaluation and estimators == ["p_true"]
    assert settings == {"n_resamples": 37, "seed": 11}


def test_leakage_free_metrics_take_the_sections_settings_and_keep_the_capability_rows_of_its_columns(
    monkeypatch,
):
    """The leakage-free table's own consistency columns, scored with the section's 37 resamples and seed 11;
    of the rows back, those of a capability metric other than Spearman and of a leakage-free column only
    (not the random row, not a response metric), in the order given."""
    rows = pd.DataFrame(
        [
            ("consistency_lf_k4", "capability_ece"),
            ("consistency_lf_k2", "spearman"),
            ("consistency_lf_k2", "corrected_capability_brier"),
            ("random (expected)", "capability_brier"),
            ("consistency_lf_k2", "response_ece"),
            ("consistency_lf_k4", "soft_auroc"),
        ],
        columns=["estimator", "metric"],
    )
    spy = _TableSpy(rows)
    monkeypatch.setattr(sections, "calibration_table", spy)
    inputs = _inputs(_evaluation(), "p_true")
    inputs.computed.extra["leakage_free"] = pd.DataFrame(
        {
            "consistency_lf_k4": [0.1, 0.2, 0.3, 0.4],
            "mu_hat_lf": [0.0, 0.5, 0.25, 1.0],
            "n_lf": [2, 3, 4, 5],
            "consistency_lf_k2": [0.6, 0.7, 0.8, 0.9],
        }
    )
    kept = inputs.leakage_free_metrics
    ((table, estimators, settings),) = spy.calls
    assert estimators == ["consistency_lf_k4", "consistency_lf_k2"]
    assert settings == {"n_resamples": 37, "seed": 11}
    assert list(table["expected_accuracy"]) == [0.0, 0.5, 0.25, 1.0] and list(table["n"]) == [2, 3, 4, 5]
    assert [tuple(row) for row in kept.itertuples(index=False)] == [
        ("consistency_lf_k4", "capability_ece"),
        ("consistency_lf_k2", "corrected_capability_brier"),
        ("consistency_lf_k4", "soft_auroc"),
    ]


def test_pass_at_k_mse_is_bootstrapped_with_the_sections_settings_on_each_ks_prediction_and_pass_at_k(
    monkeypatch,
):
    """k = 1 and 4 (k <= the smallest n, 4); for each estimator (then the oracle p = mu_hat) one bootstrap
    with the section's settings whose k-th metric is the Brier of 1 - (1 - p)^k against the unbiased pass@k
    1 - C(n - c, k) / C(n, k); each interval shown with 4 digits, estimate, low and high in that order."""
    calls = []

    def spy(specs, **settings):
        calls.append((specs, settings))
        return {
            k: SimpleNamespace(estimate=0.01 * k + 0.001, low=0.01 * k, high=0.01 * k + 0.0025) for k in specs
        }

    monkeypatch.setattr(cm, "bootstrap_cis", spy)
    part = pass_at_k_part(_inputs(_evaluation(), "p_true"))
    ((_, table),) = part.tables
    assert table.to_dict("list") == {
        "estimator": ["p_true", "oracle (p = mu_hat)"],
        "MSE pass@1 ↓": ["0.0110 [0.0100, 0.0125]"] * 2,
        "MSE pass@4 ↓": ["0.0410 [0.0400, 0.0425]"] * 2,
    }
    n = [len(v) for v in CORRECTNESS]
    c = [sum(v) for v in CORRECTNESS]
    mu = [ci / ni for ci, ni in zip(c, n, strict=True)]
    assert len(calls) == 2
    for (specs, settings), confidence in zip(calls, (P_TRUE, mu), strict=True):
        assert settings == {"n_resamples": 37, "seed": 11}
        assert list(specs) == [1, 4]
        for k, (function, (predicted, unbiased)) in specs.items():
            assert function is cm.brier_score
            assert list(predicted) == pytest.approx([1 - (1 - p) ** k for p in confidence])
            by_hand = [1 - comb(ni - ci, k) / comb(ni, k) for ni, ci in zip(n, c, strict=True)]
            assert list(unbiased) == pytest.approx(by_hand)


# ------------------------------------------------------------------ the tables' cells


def test_metric_table_reads_each_cell_from_its_row_and_gives_the_most_questions():
    """Estimators and metrics in the order they come (not sorted); each cell the estimate [low, high] of its
    own row; questions the most over the metrics (9, not the first or least 7, nor the last 8); a missing
    cell blank; the binned ECE marked †."""
    rows = pd.DataFrame(
        [
            ("consistency_lf_k4", "soft_auroc", 0.71, 0.62, 0.83, 7),
            ("consistency_lf_k4", "capability_brier", 0.12, 0.08, 0.16, 9),
            ("consistency_lf_k4", "capability_ece", 0.03, 0.01, 0.05, 8),
            ("consistency_lf_k2", "capability_brier", 0.22, 0.18, 0.26, 5),
            ("consistency_lf_k2", "soft_auroc", 0.64, 0.51, 0.77, 5),
        ],
        columns=["estimator", "metric", "estimate", "low", "high", "questions"],
    )
    inputs = _inputs(_evaluation(), "p_true")
    inputs.leakage_free_metrics = rows
    ((caption, table),) = leakage_free_part(inputs).tables
    assert (
        caption
        == "Leakage-free consistency (drawn from a pool disjoint from the samples defining its target)"
    )
    assert table.to_dict("list") == {
        "estimator": ["consistency_lf_k4", "consistency_lf_k2"],
        "questions": [9, 5],
        "soft_auroc ↑": ["0.710 [0.620, 0.830]", "0.640 [0.510, 0.770]"],
        "capability_brier ↓": ["0.120 [0.080, 0.160]", "0.220 [0.180, 0.260]"],
        "capability_ece ↓ †": ["0.030 [0.010, 0.050]", ""],
    }
    assert list(table.columns) == [
        "estimator", "questions", "soft_auroc ↑", "capability_brier ↓", "capability_ece ↓ †"
    ]  # fmt: skip


def test_ece_titles_give_each_estimators_ece_of_the_metric_asked_whole():
    rows = pd.DataFrame(
        [
            ("p_true", "capability_ece", 0.083, 0.041, 0.125),
            ("p_true", "response_ece", 0.367, 0.2, 0.5),
            ("probe", "capability_ece", 0.05, NAN, NAN),
            ("probe", "capability_ece_debiased", 0.011, 0.002, 0.023),
        ],
        columns=["estimator", "metric", "estimate", "low", "high"],
    )
    assert "capability_ece" in INTERVAL_NOTES and "capability_ece_debiased" not in INTERVAL_NOTES
    assert _ece_titles(rows, "capability_ece") == {
        "p_true": "ECE 0.083 [0.041, 0.125] †",
        "probe": "ECE 0.050 †",
    }
    assert _ece_titles(rows, "response_ece") == {"p_true": "ECE 0.367 [0.200, 0.500] †"}
    assert _ece_titles(rows, "capability_ece_debiased") == {"probe": "ECE 0.011 [0.002, 0.023]"}


def test_examples_table_shows_the_first_count_questions_and_the_first_four_estimators_each_from_its_column():
    evaluation = _evaluation(
        e1=[0.11, 0.12, 0.13, 0.14],
        e2=[0.21, 0.22, 0.23, 0.24],
        e3=[0.31, 0.32, 0.33, 0.34],
        e4=[0.41, 0.42, 0.43, 0.44],
        e5=[0.51, 0.52, 0.53, 0.54],
    ).assign(
        question_id=["q1", "q2", "q3", "q4"],
        question=["Q1", "Q2", "Q3", "Q4"],
        first_response=["R1", "R2", "R3", "R4"],
    )
    table = examples_table(evaluation, ["e3", "e1", "e5", "e2", "e4"], 3)
    assert table.to_dict("list") == {
        "question_id": ["q1", "q2", "q3"],
        "question": ["Q1", "Q2", "Q3"],
        "first response": ["R1", "R2", "R3"],
        "mu_hat": ["0.250", "0.600", "0.500"],
        "e3": ["0.310", "0.320", "0.330"],
        "e1": ["0.110", "0.120", "0.130"],
        "e5": ["0.510", "0.520", "0.530"],
        "e2": ["0.210", "0.220", "0.230"],
    }


# ------------------------------------------------------------------ the parts each estimator is in


def test_each_estimator_is_in_the_parts_it_is_registered_for(drawn):
    """p_true everywhere; verbalized_confidence in the tables and pass@k, not the budget; probe in the tables
    only; selfcheck_mean for routing only: not in the section at all. The inputs keep the settings given."""
    evaluation = _evaluation(
        verbalized_confidence=[0.3, 0.5, 0.5, 0.8], probe=[0.1, 0.6, 0.6, 0.95], selfcheck_mean=[0.5] * 4
    )
    computed = _computed(
        evaluation,
        p_true=_entry("p_true", CALIBRATION_TABLES, PASS_AT_K, BUDGET, ROUTING),
        verbalized_confidence=_entry("verbalized_confidence", CALIBRATION_TABLES, PASS_AT_K),
        probe=_entry("probe", CALIBRATION_TABLES),
        selfcheck_mean=_entry("selfcheck_mean", ROUTING),
    )
    inputs = section_inputs(computed, 37, 11)
    assert inputs is not None
    assert (inputs.estimators, inputs.n_resamples, inputs.seed) == (
        ["p_true", "verbalized_confidence", "probe"],
        37,
        11,
    )
    assert list(inputs.complete) == ["p_true", "verbalized_confidence"]
    assert len(budget_part(inputs).figures) == 1
    assert {line.get_label() for line in drawn[0].axes[0].get_lines()} == {
        "p_true",
        "uniform (the same budget for every question)",
        "oracle (allocates by mu_hat itself)",
    }


def test_budget_of_an_adaptive_run_goes_up_to_its_first_look_not_its_samples(drawn):
    """Every question drew 8 samples after a first look of 2: budgets 1 and 2 only (pass@b is unbiased for
    b <= l_1 alone), not 4 and 8."""
    correctness = [[1, 0, 1, 1, 0, 0, 1, 0], [0, 0, 1, 0, 0, 0, 0, 0], [1, 1, 0, 1, 1, 1, 1, 1]]
    evaluation = pd.DataFrame(
        {
            "correctness": correctness,
            "n": 8,
            "expected_accuracy": [sum(v) / 8 for v in correctness],
            "mu_squared_hat": [0.2, 0.01, 0.7],
            "sampling": "adaptive (looks 2, 8, rule unanimity)",
            "looks": [[2, 8]] * 3,
            "p_true": [0.5, 0.1, 0.8],
        }
    )
    budget_part(_inputs(evaluation, "p_true"))
    lines = drawn[0].axes[0].get_lines()
    assert [list(line.get_xdata()) for line in lines] == [[1, 2]] * 3


# ------------------------------------------------------------------ pass@k curves


def test_pass_at_k_bands_are_clipped_to_0_and_1_and_the_actual_line_is_the_mean_unbiased_pass_at_k():
    """Confidences near 0 give a band reaching below 0, near 1 above 1: each band clipped at its own end,
    the band and the prediction computed here by the formula S_k +- 1.96 sqrt(sum s (1 - s)) / N."""
    n, c = np.array([3, 3]), np.array([1, 3])
    complete = {"low": np.array([0.01, 0.02]), "high": np.array([0.99, 0.98])}
    low, high, actual = pass_at_k_curves(complete, n, c)
    for curve, p in zip((low, high), complete.values(), strict=True):
        assert list(curve.x) == [1, 2, 3]
        for i, k in enumerate((1, 2, 3)):
            s = [1 - (1 - pi) ** k for pi in p]
            mean = sum(s) / 2
            half = 1.96 * sum(si * (1 - si) for si in s) ** 0.5 / 2
            assert curve.y[i] == pytest.approx(mean), (curve.label, k)
            assert curve.band_low[i] == pytest.approx(max(0.0, mean - half)), (curve.label, k)
            assert curve.band_high[i] == pytest.approx(min(1.0, mean + half)), (curve.label, k)
    assert low.band_low[0] == 0.0 and high.band_high[0] == 1.0  # clipped, not only bounded
    assert low.band_high[0] < 1.0 and high.band_low[0] > 0.0
    unbiased = [sum(1 - comb(3 - ci, k) / comb(3, k) for ci in (1, 3)) / 2 for k in (1, 2, 3)]
    assert unbiased == pytest.approx([2 / 3, 5 / 6, 1.0])  # not the prediction from p = c / n: 7/9 at k = 2
    assert (actual.label, list(actual.x)) == ("actual (unbiased pass@k)", [1, 2, 3])
    assert list(actual.y) == pytest.approx(unbiased)


# ------------------------------------------------------------------ routing


def _routing(strong_mu: list[float]) -> dict:
    cheap = pd.DataFrame(
        {
            "model": "/ckpt/small",
            "question_id": ["q0", "q1", "q2", "q3"],
            "expected_accuracy": [0.25, 0.5, 0.0, 1.0],
            "n": 4,
            "p_true": [0.2, 0.6, 0.1, 0.9],
        }
    )
    strong = pd.DataFrame(
        {
            "model": "/ckpt/big",
            "question_id": ["q0", "q1", "q2", "q3"],
            "expected_accuracy": strong_mu,
            "n": 4,
        }
    )
    return {("small-id", "t"): (cheap, ["p_true"]), ("big-id", "t"): (strong, [])}


def test_routing_to_a_model_exactly_as_accurate_routes_nothing_and_to_a_better_one_routes():
    """Both means 0.4375 (the strong one's from other questions): no stronger model, said with both means;
    the strong one 1/16 better: routed."""
    section = routing_section(_routing([0.5, 0.25, 1.0, 0.0]), "t")
    assert section is not None and section.title == "Routing · t: no stronger model"
    assert section.facts == {"questions": 4, "accuracy of small": "0.438", "accuracy of big": "0.438"}
    assert section.notes[0] == (
        "Not routed: big is not more accurate than small on these questions (0.438 <= 0.438), so routing "
        "questions from small to it could only lose accuracy."
    )
    better = routing_section(_routing([0.75, 0.25, 1.0, 0.0]), "t")
    assert better is not None and better.title == "Routing · t: small -> big"


def _lines() -> list:
    methods = ["p_true", "random", "oracle_cheap", "oracle_gain"]
    curves = pd.DataFrame(
        [{"method": m, "fraction": f, "accuracy": 0.5 + f / 4} for m in methods for f in (0.0, 1.0)]
    )
    return routing_lines(curves)


GUIDE = (
    "An estimator helps when its line lies above the grey dotted line with squares (random routing). Two "
    "oracles: the black dashed line with triangles is oracle_cheap, routing by small's own mu_hat (the best "
    "any confidence of small can do); the dark grey dash-dot line with down-pointing triangles is "
    "oracle_gain, routing by the gain mu_strong - mu_cheap (the best any router can do, knowing both models)."
)


def test_routing_guide_names_the_ties_from_30_percent_of_the_questions_at_the_most_common_mu_hat():
    """3 of 10 questions (30%) at mu_hat 0.5, the others each at its own: the tie is named with its value;
    2 of 7 (29%): not."""
    thirty = np.array([0.1, 0.5, 0.2, 0.5, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    assert routing_guide(_lines(), thirty, "small") == (
        f"{GUIDE} 3 of the 10 questions have mu_hat = 0.5 for small: routing by mu_hat picks among them at "
        "random, so oracle_cheap runs close to random routing over that range."
    )
    below = np.array([0.1, 0.5, 0.2, 0.5, 0.3, 0.4, 0.6])
    assert routing_guide(_lines(), below, "small") == GUIDE


# ------------------------------------------------------------------ the section


def test_capability_section_keeps_the_computed_notes_first_and_leaves_them_as_they_were():
    """The computed estimators' notes open the section's, its own note after them; building the section
    twice gives the same notes (the computed notes are copied, not added to)."""
    computed = _computed(_evaluation())
    computed.notes.append("consistency: no k in [5] is below n")
    for _ in range(2):
        section = sections.capability_section("toy", computed, {"model": "m"}, None)
        assert section.notes == [
            "consistency: no k in [5] is below n",
            "no confidence estimator is available for this run",
        ]
    assert computed.notes == ["consistency: no k in [5] is below n"]


def _self_checked(checks: list) -> SectionInputs:
    """Three questions of three samples each with their answers and the self-checks given."""
    correctness = [[1, 1, 0], [0, 0, 1], [1, 0, 1]]
    evaluation = pd.DataFrame(
        {
            "correctness": correctness,
            "n": 3,
            "expected_accuracy": [sum(v) / 3 for v in correctness],
            "p_true": [0.5, 0.3, 0.7],
            "extracted_answers": [["4", "4", "5"], ["1", "2", "3"], ["7", "8", "7"]],
            "selfcheck_p_yes_normalized": checks,
        }
    )
    return _inputs(evaluation, "p_true")


def test_self_calibration_part_needs_exactly_one_self_check_per_response():
    """Three self-checks for three responses on every question: the figure; a question with four (one more
    than its responses) or two: none."""
    one_each = [[0.9, 0.8, 0.1], [0.2, 0.3, 0.9], [0.7, 0.4, 0.6]]
    assert len(sections.self_calibration_part(_self_checked(one_each)).figures) == 1
    for odd in ([0.2, 0.3, 0.9, 0.5], [0.2, 0.3]):
        checks = [one_each[0], odd, one_each[2]]
        assert sections.self_calibration_part(_self_checked(checks)) == sections.SectionPart(), len(odd)


def test_section_inputs_read_each_array_from_its_own_column_as_floats_with_nan_where_none() -> None:
    """mu_hat, n, c and each estimator's confidences come from their own columns; a confidence column that
    holds None (an object column: a question the estimator has no value for) gives NaN there, as the
    property says, so the metrics' NaN handling sees it."""
    evaluation = _evaluation(sparse=pd.Series([0.3, None, 0.8, None], dtype=object))
    inputs = _inputs(evaluation, "p_true", "sparse")
    np.testing.assert_array_equal(inputs.mu, [0.25, 0.6, 0.5, 1.0])
    n, c = inputs.counts
    assert n.tolist() == [4, 5, 6, 5] and c.tolist() == [1, 3, 3, 5]
    assert inputs.confidences["p_true"].tolist() == P_TRUE
    sparse = inputs.confidences["sparse"]
    assert sparse.dtype == np.float64
    np.testing.assert_array_equal(sparse, [0.3, NAN, 0.8, NAN])
