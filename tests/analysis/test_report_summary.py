"""The report's summary: the ranking of one (model, evaluation task) by the corrected capability Brier, its
verdict and sentence, its warnings, and the summary sections built from rankings, each called directly on
small hand-built inputs (fast; the whole report built from runs is tests/analysis/test_report.py).

The evaluation tables are built so that every paired difference is known by hand: each confidence lies at a
fixed distance d from every question's mu_hat, so its squared error is d^2 on every question and the paired
difference of two such confidences is the same on every bootstrap resample (the correction terms of the
corrected Brier cancel, both being scored against the same target)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import capcal_metrics as cm
from analysis.report import summary
from analysis.report.metric_ranges import REASONS
from analysis.report.registry import ComputedEstimators
from analysis.report.sections import SectionInputs
from analysis.report.summary import (
    DIFFERENCE,
    Measured,
    Ranking,
    _advantage,
    _base_rate,
    _candidates,
    _forest,
    _target_note,
    _warnings,
    compares_several,
    conclusion,
    forest_intervals,
    measured,
    order_rankings,
    rank_estimators,
    summary_sections,
    verdict,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report_inputs import adaptive_table, metric_rows  # noqa: E402  (this folder)

MU = [0.0, 0.25, 0.75, 1.0, 0.0, 1.0]
CORRECTNESS = [[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1], [0, 0, 0, 0], [1, 1, 1, 1]]
BRIER = "corrected_capability_brier"
SKILL, ECE, AUROC = "capability_brier_skill", "capability_ece_debiased", "soft_auroc"
NAN = float("nan")
NOT_AVAILABLE = (
    "n/a: undefined on these questions (the Brier skill when the spread of the target over the questions is "
    "no larger than its sampling noise; the AUROC when the target does not vary)"
)
NOT_COMPUTED = "not computed: that metric is not computed for this estimator (see its section)"
RANKED_NOTE = (
    'Ranked by corrected capability Brier ↓ with its 95% interval. The column "difference to the best '
    "(paired; above 0: the best is better)\" is the paired bootstrap difference between this estimator's "
    "score and the best's, on the questions both have: above 0, the best is better; an interval that "
    "contains 0, the two are not distinguishable at this N."
)


def _off(by: float) -> list[float]:
    """A confidence at distance ``by`` from each mu_hat of MU (above it, below it at 1): squared error by^2
    on every question."""
    return [m + by if m + by <= 1 else m - by for m in MU]


def _evaluation(n: list[int] | None = None, **confidences: list[float]) -> pd.DataFrame:
    """The evaluation table of MU (k = 4 samples, or ``n``) with the given confidence columns."""
    correctness = CORRECTNESS if n is None else [row[:k] for row, k in zip(CORRECTNESS, n, strict=True)]
    return pd.DataFrame(
        {
            "correctness": correctness,
            "n": [len(row) for row in correctness],
            "expected_accuracy": MU,
            **confidences,
        }
    )


def _inputs(
    evaluation: pd.DataFrame,
    estimators: list[str],
    metrics: pd.DataFrame,
    *,
    leakage_free: pd.DataFrame | None = None,
    leakage_free_metrics: pd.DataFrame | None = None,
    trained_questions: dict[str, int] | None = None,
    parse_failures: pd.DataFrame | None = None,
) -> SectionInputs:
    """A section's inputs with its metric rows given (the section table's numbers the summary reads)."""
    extra = {} if leakage_free is None else {"leakage_free": leakage_free}
    computed = ComputedEstimators(
        evaluation, {}, [], {}, extra, trained_questions or {}, parse_failures=parse_failures
    )
    inputs = SectionInputs(computed, estimators, 20, 0)
    inputs.metrics = metrics  # the cached properties, given
    inputs.leakage_free_metrics = leakage_free_metrics
    return inputs


# ------------------------------------------------------------------ one whole ranking


def _section_inputs() -> SectionInputs:
    """p_true best by its section numbers (0.010); isotonic_p_true the same confidence (paired difference
    0); probe exact (better than p_true on the questions both have: -0.010); verbalized_confidence further
    off (0.04 - 0.01 = 0.030); the leaky paper-form consistency best of all but never ranked, the
    leakage-free one with one question (no paired interval); random (expected) not an estimator."""
    evaluation = _evaluation(
        p_true=_off(0.1),
        isotonic_p_true=_off(0.1),
        probe=MU,
        verbalized_confidence=_off(0.2),
        consistency_k2=MU,
    )
    estimators = ["p_true", "isotonic_p_true", "probe", "verbalized_confidence", "consistency_k2"]
    metrics = metric_rows(
        {
            BRIER: {
                "p_true": (0.010, -0.005, 0.030, 6),
                "isotonic_p_true": (0.020, 0.005, 0.040, 6),
                "probe": (0.030, 0.010, 0.050, 6),
                "verbalized_confidence": (0.050, 0.020, 0.080, 6),
                "consistency_k2": (0.001, 0.0, 0.002, 6),
                "random (expected)": (0.0005, NAN, NAN, 6),
            },
            "capability_brier": {"p_true": (0.5, 0.4, 0.6, 6)},  # not shown in the summary
            SKILL: {
                "p_true": (0.5, 0.2, 0.8, 6),
                "isotonic_p_true": (0.4, -0.1, 0.7, 6),
                "probe": (0.9, 0.7, 1.05, 6),
                "verbalized_confidence": (-1.5, -2.0, -0.1, 6),
            },
            ECE: {
                "p_true": (-0.01, -0.02, 0.01, 6),
                "isotonic_p_true": (0.02, 0.01, 0.03, 6),
                "verbalized_confidence": (0.05, 0.03, 0.07, 6),
            },
            AUROC: {
                "p_true": (0.8, 0.6, 0.9, 6),
                "isotonic_p_true": (NAN, NAN, NAN, 6),
                "probe": (0.9, 0.8, 1.0, 6),
                "verbalized_confidence": (0.7, 0.5, 0.8, 6),
            },
        }
    )
    leakage_free = pd.DataFrame(
        {
            "consistency_lf_k2": [0.5, NAN, NAN, NAN, NAN, NAN],
            "mu_hat_lf": [0.5, 0.0, 1.0, 1.0, 0.0, 1.0],
            "n_lf": [2, 2, 2, 2, 2, 2],
        }
    )
    lf_metrics = metric_rows(
        {
            BRIER: {"consistency_lf_k2": (0.060, NAN, NAN, 1)},
            SKILL: {"consistency_lf_k2": (0.2, NAN, NAN, 1)},
            ECE: {"consistency_lf_k2": (0.1, NAN, NAN, 1)},
            AUROC: {"consistency_lf_k2": (0.5, NAN, NAN, 1)},
        }
    )
    failures = pd.DataFrame(
        {
            "task": ["toy_eval_verbalized", "toy_eval_ptrue", "toy_eval_selfcheck", "toy_eval_empty"],
            "kind": ["verbalized", "ptrue", "selfcheck", "ptrue"],
            "questions": [6, 6, 6, 0],
            "parse_failures": [2, 1, 6, 0],
        }
    )
    return _inputs(
        evaluation,
        estimators,
        metrics,
        leakage_free=leakage_free,
        leakage_free_metrics=lf_metrics,
        trained_questions={"isotonic_p_true": 30, "probe": 50},
        parse_failures=failures,
    )


def test_ranking_holds_the_section_numbers_the_paired_differences_and_every_cell():
    """The whole table: rank order by the section's corrected Brier (the leaky consistency and the random
    row left out), each target, every summary metric marked, "not computed" where a metric has no row, n/a
    where it is undefined, the paired differences known by hand, and the questions."""
    ranking = rank_estimators(_section_inputs(), "toy-model", "toy_eval")
    assert list(ranking.table.columns) == [
        "rank", "estimator", "scored against", "corrected_capability_brier ↓", "capability_brier_skill ↑",
        "capability_ece_debiased ↓", "soft_auroc ↑", DIFFERENCE, "questions",
    ]  # fmt: skip
    assert [tuple(row) for row in ranking.table.itertuples(index=False)] == [
        (1, "p_true", "mu_hat", "0.010 [-0.005, 0.030] ‡", "0.500 [0.200, 0.800]",
         "-0.010 [-0.020, 0.010] ‡", "0.800 [0.600, 0.900]", "best", 6),
        (2, "isotonic_p_true", "mu_hat", "0.020 [0.005, 0.040]", "0.400 [-0.100, 0.700]",
         "0.020 [0.010, 0.030]", "n/a", "0.000 [0.000, 0.000]", 6),
        (3, "probe", "mu_hat", "0.030 [0.010, 0.050]", "0.900 [0.700, 1.050] §", "not computed",
         "0.900 [0.800, 1.000]", "-0.010 [-0.010, -0.010]", 6),
        (4, "verbalized_confidence", "mu_hat", "0.050 [0.020, 0.080]", "-1.500 [-2.000, -0.100] ¶",
         "0.050 [0.030, 0.070]", "0.700 [0.500, 0.800]", "0.030 [0.030, 0.030]", 6),
        (5, "consistency_lf_k2", "mu_hat_lf", "0.060", "0.200", "0.100", "0.500", "n/a", 1),
    ]  # fmt: skip
    assert ranking.footnotes == [
        f"‡ corrected_capability_brier: {REASONS[('‡', 'corrected_capability_brier')]}",
        f"‡ capability_ece_debiased: {REASONS[('‡', 'capability_ece_debiased')]}",
        f"§ capability_brier_skill: {REASONS[('§', 'capability_brier_skill')]}",
        f"¶ capability_brier_skill: {REASONS[('¶', 'capability_brier_skill')]}",
        NOT_AVAILABLE,
        NOT_COMPUTED,
    ]


def test_ranking_keeps_the_ranked_rows_with_their_paired_advantages():
    """``long``: one row per ranked estimator, every column, the advantages of the best over each (the best's
    own NaN, with its questions), the metric ranked by; and the ranking's facts."""
    ranking = rank_estimators(_section_inputs(), "toy-model", "toy_eval")
    assert (ranking.model, ranking.task, ranking.questions, ranking.samples) == (
        "toy-model",
        "toy_eval",
        6,
        "4",
    )
    assert ranking.unranked == ["consistency_k2"]
    long = ranking.long
    assert list(long.columns) == [
        "rank", "estimator", "target", "estimate", "low", "high", "advantage", "advantage_low",
        "advantage_high", "paired_questions", "questions", "metric",
    ]  # fmt: skip
    assert list(long["rank"]) == [1, 2, 3, 4, 5]
    assert list(long["estimator"]) == [
        "p_true", "isotonic_p_true", "probe", "verbalized_confidence", "consistency_lf_k2"
    ]  # fmt: skip
    assert list(long["target"]) == ["mu_hat"] * 4 + ["mu_hat_lf"]
    assert list(long["estimate"]) == [0.010, 0.020, 0.030, 0.050, 0.060]
    np.testing.assert_array_equal(long["low"], [-0.005, 0.005, 0.010, 0.020, NAN])
    np.testing.assert_array_equal(long["high"], [0.030, 0.040, 0.050, 0.080, NAN])
    for column in ("advantage", "advantage_low", "advantage_high"):
        np.testing.assert_allclose(long[column], [NAN, 0.0, -0.01, 0.03, NAN], atol=1e-12, err_msg=column)
    assert list(long["paired_questions"]) == [6, 6, 6, 6, 1]
    assert list(long["questions"]) == [6, 6, 6, 6, 1]
    assert set(long["metric"]) == {BRIER}


def test_ranking_says_what_to_use_and_warns_of_every_weakness(monkeypatch):
    """The verdict and the sentence from the paired intervals and the skills; the warnings: N, k with the
    consistency, the fitted estimator below 50 questions (not the one at 50), the confidences that failed
    to parse (above 20%, never, or on no questions; not the one at 17%), the estimator ranked on fewer
    questions and without an interval; the base rate the corrected variance of mu_hat. (The 6 questions
    are below the verdict's threshold, lowered here to read the verdict the ranking would give.)"""
    monkeypatch.setattr(summary, "MIN_VERDICT_QUESTIONS", 1)
    ranking = rank_estimators(_section_inputs(), "toy-model", "toy_eval")
    assert ranking.verdict == (
        "Use p_true: best on corrected capability Brier, not distinguishable from isotonic_p_true at N = 6, "
        "ahead of verbalized_confidence (paired 95% interval above 0); probe is better than it on the "
        "questions both have; its difference to consistency_lf_k2 has no interval; it beats the base rate, "
        "while verbalized_confidence is worse."
    )
    assert ranking.sentence == (
        "p_true and isotonic_p_true are not distinguishable on corrected capability Brier at N = 6: the "
        "paired difference 0.000 [0.000, 0.000] includes 0."
    )
    assert ranking.warnings == [
        "N = 6 evaluation questions, below 100: the intervals are wide and the ranking is tentative.",
        "k = 4 samples per question, below 10: mu_hat moves in steps of 1/4, consistency uses only k < n and "
        "its leakage-free target rests on the few samples left.",
        "isotonic_p_true was fitted on 30 questions, below 50: its parameters are noisy and its rank may not "
        "hold on another draw.",
        "verbalized confidence (toy_eval_verbalized) failed to parse on 2/6 questions (33%): its estimators "
        "rest on the rest, which may not be a random subset.",
        "selfcheck confidence (toy_eval_selfcheck) never parsed (6/6 failures): no estimator from it.",
        "ptrue confidence (toy_eval_empty) never parsed (0/0 failures): no estimator from it.",
        "consistency_lf_k2 is ranked on 1 of 6 questions.",
        "consistency_lf_k2: no interval for its corrected capability Brier (too few questions).",
    ]
    # mean (mu - 1/2)^2 = 0.1875, less (1 - 1/6) mean mu (1 - mu) / 3 = (5/6) (2 * 0.1875 / 3) / 6
    assert ranking.base_rate == pytest.approx(0.1875 - (5 / 6) * (0.375 / 3) / 6)


def test_ranking_falls_back_to_the_plain_capability_brier(monkeypatch):
    """Without corrected Brier rows the plain capability Brier ranks (its paired difference the plain Brier's:
    0.04 - 0.01), named so in the sentence and the verdict; no other summary metric computed: no column;
    k from 3 to 4 without consistency; the base rate the plain variance of mu_hat. (The verdict's threshold
    lowered below the 6 questions, as above; no skill computed: the verdict is tentative.)"""
    monkeypatch.setattr(summary, "MIN_VERDICT_QUESTIONS", 1)
    evaluation = _evaluation([4, 4, 4, 4, 4, 3], p_true=_off(0.1), verbalized_confidence=_off(0.2))
    metrics = metric_rows(
        {"capability_brier": {"verbalized_confidence": (0.3, 0.2, 0.4, 6), "p_true": (0.1, 0.05, 0.2, 6)}}
    )
    ranking = rank_estimators(_inputs(evaluation, ["p_true", "verbalized_confidence"], metrics), "m", "t")
    assert ranking.table.to_dict("list") == {
        "rank": [1, 2],
        "estimator": ["p_true", "verbalized_confidence"],
        "scored against": ["mu_hat", "mu_hat"],
        "capability_brier ↓": ["0.100 [0.050, 0.200]", "0.300 [0.200, 0.400]"],
        DIFFERENCE: ["best", "0.030 [0.030, 0.030]"],
        "questions": [6, 6],
    }
    assert ranking.sentence == (
        "p_true beats verbalized_confidence on capability Brier by 0.030 [0.030, 0.030] (paired bootstrap, "
        "N = 6): the best is distinguishable from the next."
    )
    assert ranking.verdict == (
        "Use p_true, tentatively: best on capability Brier, ahead of verbalized_confidence (paired 95% "
        "interval above 0); whether it beats the base rate is unknown (its Brier skill is not available)."
    )
    assert ranking.samples == "3-4" and ranking.footnotes == [] and ranking.unranked == []
    assert set(ranking.long["metric"]) == {"capability_brier"}
    assert ranking.warnings == [
        "N = 6 evaluation questions, below 100: the intervals are wide and the ranking is tentative.",
        "k = 3 samples per question, below 10: mu_hat moves in steps of 1/3, too few for any consistency k.",
    ]
    assert ranking.base_rate == pytest.approx(0.1875)


def test_leakage_free_consistency_without_a_score_is_not_ranked_and_says_why():
    """Its corrected Brier undefined (one held-out sample): left out of the ranking, with the warning that
    names the held-out samples; nothing ranked: the sentence and verdict say so, and the table is empty."""
    evaluation = _evaluation(consistency_k2=MU)
    leakage_free = pd.DataFrame(
        {"consistency_lf_k2": MU, "mu_hat_lf": MU, "n_lf": [1.0, 1.0, 3.0, 1.0, np.nan, 2.0]}
    )
    metrics = metric_rows({BRIER: {"consistency_k2": (0.01, 0.0, 0.02, 6)}})
    lf_metrics = metric_rows({BRIER: {"consistency_lf_k2": (NAN, NAN, NAN, 6)}})
    inputs = _inputs(
        evaluation, ["consistency_k2"], metrics, leakage_free=leakage_free, leakage_free_metrics=lf_metrics
    )
    ranking = rank_estimators(inputs, "m", "t")
    assert ranking.table.empty and ranking.long.empty
    assert ranking.sentence == "No estimator could be ranked."
    assert ranking.verdict == "No estimator could be ranked."
    assert ranking.unranked == ["consistency_k2"]
    assert ranking.warnings[-1] == (
        "consistency_lf_k2 is not ranked: its target mu_hat_lf rests on 1 held-out sample(s) per question "
        "(the corrected Brier needs 2); sample more responses per question."
    )
    assert len(ranking.warnings) == 3  # N, k, and this one


# ------------------------------------------------------------------ the warnings of a section


def _ranked(*rows: tuple[str, int, float]) -> pd.DataFrame:
    """Ranked rows (estimator, questions, low)."""
    return pd.DataFrame(rows, columns=["estimator", "questions", "low"])


def test_warnings_of_a_target_that_does_not_vary():
    """The same mu_hat on every question (printed with %g); 100 questions and k = 10: no other warning."""
    evaluation = pd.DataFrame(
        {"correctness": [[1] * 5 + [0] * 5] * 100, "n": 10, "expected_accuracy": 0.5, "p_true": 0.5}
    )
    inputs = _inputs(evaluation, ["p_true"], metric_rows({}))
    assert _warnings(inputs, _ranked(("p_true", 100, 0.1))) == [
        "mu_hat is 0.5 on every question: no estimator can be told apart by discrimination (soft AUROC and "
        "the Brier skill are undefined); the ranking reflects calibration alone: no verdict."
    ]


def test_warnings_of_a_target_that_barely_varies():
    """1 of 20 questions with 0 < mu_hat < 1 (5%, below 10%); 2 of 20 (10%) is enough."""
    barely = [[1] * 10] * 10 + [[0] * 10] * 9 + [[1] + [0] * 9]
    evaluation = pd.DataFrame(
        {"correctness": barely, "n": 10, "expected_accuracy": [sum(v) / 10 for v in barely], "p_true": 0.5}
    )
    inputs = _inputs(evaluation, ["p_true"], metric_rows({}))
    assert _warnings(inputs, _ranked(("p_true", 20, 0.1)))[1:] == [
        "only 5% of the questions have 0 < mu_hat < 1: the capability target barely varies, so capability "
        "and response calibration nearly coincide."
    ]
    enough = barely[:-2] + [[1] + [0] * 9] * 2
    evaluation = evaluation.assign(correctness=enough, expected_accuracy=[sum(v) / 10 for v in enough])
    assert len(_warnings(_inputs(evaluation, ["p_true"], metric_rows({})), _ranked())) == 1  # N only


def test_warnings_of_an_adaptive_run_name_k_max_and_the_first_look():
    """k_max below 10, a first look below 8 (the Brier skill, issue 48.3) and, with the paper-form
    consistency, the first look below 10; not the fixed-k warning (the smallest n, 2, is a question that
    stopped early)."""
    evaluation = adaptive_table([2, 4], "p_true", "consistency_k2")
    inputs = _inputs(evaluation, ["p_true", "consistency_k2"], metric_rows({}))
    assert _warnings(inputs, _ranked(("p_true", 4, 0.1)))[1:] == [
        "adaptive run with k_max = 4 samples, below 10: a question whose samples disagree is estimated from "
        "at most 4 samples.",
        "adaptive run with a first look of 2 samples, below 8: the Brier skill after stopping is not "
        "reliable (in simulation its bias differs from fixed k's by up to 4.1 standard errors, "
        "docs/methods.md); rank by the corrected Brier or the debiased ECE.",
        "consistency uses each question's first 2 samples (the first look, drawn before any stopping "
        "decision), below 10: only k < 2 (its leakage-free form is scored against every sample outside its "
        "draw pool).",
    ]
    without = _inputs(adaptive_table([2, 4], "p_true"), ["p_true"], metric_rows({}))
    assert _warnings(without, _ranked(("p_true", 4, 0.1)))[1:] == [
        "adaptive run with k_max = 4 samples, below 10: a question whose samples disagree is estimated from "
        "at most 4 samples.",
        "adaptive run with a first look of 2 samples, below 8: the Brier skill after stopping is not "
        "reliable (in simulation its bias differs from fixed k's by up to 4.1 standard errors, "
        "docs/methods.md); rank by the corrected Brier or the debiased ECE.",
    ]
    enough = _inputs(adaptive_table([10, 20], "p_true", "consistency_k2"), ["p_true"], metric_rows({}))
    assert _warnings(enough, _ranked(("p_true", 4, 0.1))) == [
        "No verdict: N = 4 evaluation questions, below 10: too few to conclude anything (a 95% percentile "
        "bootstrap over so few questions covers far less than 95%); the ranking is for reference only."
    ]


def test_measured_names_the_samples_per_question():
    """k as one number, a range, empty without questions; an adaptive run adds its k_max."""
    assert measured("m", "t", _evaluation(), True) == Measured("m", "t", 6, "4", True)
    varied = _evaluation([4, 4, 4, 4, 4, 3])
    assert measured("m", "t", varied, False) == Measured("m", "t", 6, "3-4", False)
    assert measured("m", "t", _evaluation().iloc[:0], True) == Measured("m", "t", 0, "", True)
    assert measured("m", "t", adaptive_table([2, 4]), True).samples == "2-4 (adaptive, k_max = 4)"
    assert measured("m", "t", varied.astype({"n": float}), True).samples == "3-4"  # counts, even as floats


def test_base_rate_is_the_variance_of_mu_hat_corrected_for_the_corrected_brier_and_nan_when_not_positive():
    """The corrected Brier's reference subtracts mu_hat's sampling noise (n >= 2 everywhere), the plain
    Brier's (or where a question has one sample) does not; one question, or a spread within the noise: NaN."""
    mu, n = np.array(MU), np.full(6, 4)
    assert _base_rate(mu, n, BRIER) == pytest.approx(0.1875 - (5 / 6) * (0.375 / 3) / 6)
    assert _base_rate(mu, n, "capability_brier") == pytest.approx(0.1875)
    assert _base_rate(mu, np.array([4, 4, 4, 4, 4, 1]), BRIER) == pytest.approx(0.1875)
    assert np.isnan(_base_rate(np.array([0.5]), np.array([4]), BRIER))
    assert np.isnan(_base_rate(np.array([0.5, 0.5, 0.25]), np.full(3, 4), BRIER))
    assert np.isnan(_base_rate(np.array([0.5, 0.5]), np.full(2, 4), "capability_brier"))


# ------------------------------------------------------------------ candidates and paired differences


LEAKAGE_FREE = pd.DataFrame(
    {
        "consistency_lf_k2": [1.0, 0.0, 0.5, np.nan],
        "mu_hat_lf": [1.0, 0.0, 0.5, 0.25],
        "n_lf": [2, 2, 2, 4],
        "mu_squared_hat_lf": [1.0, 0.0, 0.0, 0.1],
    }
)


def test_leakage_free_candidates_of_an_adaptive_run_carry_its_held_out_moments():
    """The leakage-free consistency is scored against mu_hat_lf from n_lf samples, with the held-out mu^2
    estimates of an adaptive run (moment form)."""
    inputs = _inputs(adaptive_table([2, 4], "p_true"), ["p_true"], metric_rows({}), leakage_free=LEAKAGE_FREE)
    candidates, leaky = _candidates(inputs)
    assert leaky == []
    assert [(c.name, c.target) for c in candidates] == [
        ("p_true", "mu_hat"),
        ("consistency_lf_k2", "mu_hat_lf"),
    ]
    lf = candidates[1]
    np.testing.assert_array_equal(lf.confidence, [1.0, 0.0, 0.5, np.nan])
    assert list(lf.mu_hat) == [1.0, 0.0, 0.5, 0.25] and list(lf.n) == [2.0, 2.0, 2.0, 4.0]
    assert lf.mu_square_hat is not None and list(lf.mu_square_hat) == [1.0, 0.0, 0.0, 0.1]


def test_advantage_of_an_adaptive_run_is_the_moment_form_paired_on_shared_questions():
    """Each one's corrected Brier from its own unbiased moments (p_true against mu_hat, the leakage-free
    consistency against mu_hat_lf), paired on the questions both have (the NaN left out), with the seed
    given: the bootstrap's own differences; the plain Brier when another metric ranks; fewer than 2 shared
    questions: no interval, the count kept."""
    evaluation = adaptive_table([2, 4], "p_true")
    evaluation["p_true"] = [0.8, 0.3, 0.2, 0.6]
    inputs = _inputs(evaluation, ["p_true"], metric_rows({}), leakage_free=LEAKAGE_FREE)
    best, other = _candidates(inputs)[0]
    arrays = {
        "a": (np.array([0.8, 0.3, 0.2]), np.array([1.0, 0.0, 0.5]), np.array([1.0, 0.0, 0.2])),
        "b": (np.array([1.0, 0.0, 0.5]), np.array([1.0, 0.0, 0.5]), np.array([1.0, 0.0, 0.0])),
    }
    moments = cm.bootstrap_differences(
        {key: (cm.capability_brier_from_moments, value) for key, value in arrays.items()},
        "a",
        n_resamples=50,
        seed=3,
    )["b"]
    assert _advantage(best, other, BRIER, 50, 3) == (moments.estimate, moments.low, moments.high, 3)
    plain = cm.bootstrap_differences(
        {key: (cm.brier_score, value[:2]) for key, value in arrays.items()}, "a", n_resamples=50, seed=3
    )["b"]
    assert _advantage(best, other, "capability_brier", 50, 3) == (plain.estimate, plain.low, plain.high, 3)
    assert plain.estimate != pytest.approx(moments.estimate) and plain.low != pytest.approx(moments.low)
    lonely = type(other)("x", "mu_hat", np.array([np.nan, np.nan, np.nan, 0.5]), other.mu_hat, other.n)
    advantage = _advantage(best, lonely, BRIER, 50, 3)
    assert all(np.isnan(value) for value in advantage[:3]) and advantage[3] == 1


def test_advantage_of_a_fixed_k_run_is_the_corrected_brier_of_each_target():
    """Without moments: each one's corrected Brier with its own n (n = 4 for p_true, n_lf = 2 for the
    leakage-free consistency), so the correction terms do not cancel."""
    leakage_free = pd.DataFrame({"consistency_lf_k2": MU, "mu_hat_lf": _off(0.1), "n_lf": [2] * 6})
    inputs = _inputs(_evaluation(p_true=_off(0.2)), ["p_true"], metric_rows({}), leakage_free=leakage_free)
    best, other = _candidates(inputs)[0]
    arrays = {
        "a": (np.array(_off(0.2)), np.array(MU), np.full(6, 4.0)),
        "b": (np.array(MU), np.array(_off(0.1)), np.full(6, 2.0)),
    }
    expected = cm.bootstrap_differences(
        {key: (cm.corrected_capability_brier_score, value) for key, value in arrays.items()},
        "a",
        n_resamples=40,
        seed=5,
    )["b"]
    assert _advantage(best, other, BRIER, 40, 5) == (expected.estimate, expected.low, expected.high, 6)


# ------------------------------------------------------------------ the sentences


def _pairs(*advantages: tuple[str, float, float, float, int]) -> pd.DataFrame:
    """Ranked rows (estimator, advantage, low, high, paired questions) after the best, "a"."""
    best = ("a", NAN, NAN, NAN, 40)
    columns = ["estimator", "advantage", "advantage_low", "advantage_high", "paired_questions"]
    return pd.DataFrame([best, *advantages], columns=columns)


def test_conclusion_of_no_one_and_of_no_interval_and_of_a_better_next():
    assert conclusion(_pairs().iloc[:0], "Brier") == "No estimator could be ranked."
    assert conclusion(_pairs(), "Brier") == "a is the only estimator ranked: nothing to compare it with."
    assert conclusion(_pairs(("b", NAN, NAN, NAN, 1)), "Brier") == (
        "a ranks first; its difference to b has no interval at N = 1."
    )
    assert conclusion(_pairs(("b", -0.05, -0.08, -0.02, 30)), "Brier") == (
        "b is better than a on Brier on the N = 30 questions both have, by 0.050 [0.020, 0.080]; a ranks "
        "first on its own questions only."
    )


def test_verdict_names_every_group_with_its_verb_and_the_range_of_paired_sizes():
    """Ties at different N (a range), three estimators ahead (a list), two better on shared questions ("are"),
    two without an interval; the best tied with the base rate and none worse."""
    ranked = _pairs(
        ("b", 0.01, -0.01, 0.03, 30),
        ("c", 0.02, -0.02, 0.05, 40),
        ("d", 0.1, 0.05, 0.2, 40),
        ("e", 0.1, 0.05, 0.2, 40),
        ("f", 0.1, 0.05, 0.2, 40),
        ("g", -0.1, -0.2, -0.05, 40),
        ("h", -0.1, -0.2, -0.05, 40),
        ("i", NAN, NAN, NAN, 1),
        ("j", NAN, NAN, NAN, 0),
    )
    skills = {"a": (0.1, -0.1, 0.3), "b": (0.5, 0.1, 0.9)}
    assert verdict(ranked, skills, "Brier") == (
        "Use a, tentatively: best on Brier, not distinguishable from b and c at N = 30-40, ahead of d, e and "
        "f (paired 95% intervals above 0); g and h are better than it on the questions both have; its "
        "difference to i and j has no interval; but it is not distinguishable from the base rate (the mean "
        "mu_hat for every question)."
    )


def test_verdict_without_the_best_skill_names_those_worse_than_the_base_rate():
    """The best's skill unknown (NaN, or not computed): tentatively, saying so, and one estimator worse than
    the base rate ("is"), or two ("are"); none ranked: said."""
    ranked = _pairs(("b", 0.1, 0.05, 0.2, 40), ("c", 0.1, 0.05, 0.2, 40))
    worse = (-0.5, -0.9, -0.1)
    one = verdict(ranked, {"a": (NAN, NAN, NAN), "b": worse}, "Brier")
    unknown = "whether it beats the base rate is unknown (its Brier skill is not available)"
    assert one == (
        f"Use a, tentatively: best on Brier, ahead of b and c (paired 95% intervals above 0); {unknown}, and "
        "b is worse than the base rate."
    )
    two = verdict(ranked, {"b": worse, "c": worse}, "Brier")
    assert two.endswith(f"; {unknown}, and b and c are worse than the base rate.")
    assert verdict(ranked, {}, "Brier") == (
        f"Use a, tentatively: best on Brier, ahead of b and c (paired 95% intervals above 0); {unknown}."
    )
    assert verdict(ranked.iloc[:0], {}, "Brier") == "No estimator could be ranked."
    assert verdict(ranked, {"a": (-0.2, -0.3, -0.1), "c": worse}, "Brier") == (
        "Use none of them: a is best on Brier but worse than the base rate, ahead of b and c (paired 95% "
        "intervals above 0); c is worse than the base rate."
    )


def test_verdict_of_a_single_estimator_whose_skill_has_no_interval():
    """A skill estimate without an interval is not told from the base rate (tentative); alone: said."""
    assert verdict(_pairs(), {"a": (0.3, NAN, NAN)}, "Brier") == (
        "Use a, tentatively: best on Brier, the only estimator ranked (nothing to compare it with); but it "
        "is not distinguishable from the base rate (the mean mu_hat for every question)."
    )


def test_verdict_of_a_best_that_beats_the_base_rate_with_two_worse():
    ranked = _pairs(("b", 0.1, 0.05, 0.2, 40), ("c", 0.1, 0.05, 0.2, 40))
    skills = {"a": (0.5, 0.2, 0.8), "b": (-0.5, -0.9, -0.1), "c": (-0.2, -0.4, -0.01)}
    assert verdict(ranked, skills, "Brier").endswith("; it beats the base rate, while b and c are worse.")
    tied_best = {"a": (0.0, -0.1, 0.1), "b": (-0.5, -0.9, -0.1)}
    assert verdict(ranked, tied_best, "Brier").endswith(
        "; but it is not distinguishable from the base rate (the mean mu_hat for every question), and b is "
        "worse than the base rate."
    )


# ------------------------------------------------------------------ rankings, the forest plot and sections


def _ranking(targets: list[str], model: str = "toy-model", task: str = "toy_eval", **fields) -> Ranking:
    """A ranking of estimators e1, e2, ... scored against ``targets``, estimates 0.1, 0.2, ... with
    intervals of +-0.05."""
    count = len(targets)
    long = pd.DataFrame(
        {
            "rank": range(1, count + 1),
            "estimator": [f"e{i}" for i in range(1, count + 1)],
            "target": targets,
            "estimate": [0.1 * i for i in range(1, count + 1)],
            "low": [0.1 * i - 0.05 for i in range(1, count + 1)],
            "high": [0.1 * i + 0.05 for i in range(1, count + 1)],
            "questions": 40,
            "metric": BRIER,
        }
    )
    table = pd.DataFrame({"rank": long["rank"], "estimator": long["estimator"]})
    defaults = {"verdict": f"Use e1 ({model}).", "base_rate": 0.25, "warnings": [f"{model} warned"]}
    return Ranking(model, task, 40, "8", table, f"sentence of {model}", long=long, **{**defaults, **fields})


def test_forest_rows_name_the_hollow_ones_and_highlight_the_best():
    rows = forest_intervals(_ranking(["mu_hat", "mu_hat_lf"]))
    assert [(r.label, r.estimate, r.low, r.high, r.highlight, r.hollow) for r in rows] == [
        ("e1", 0.1, pytest.approx(0.05), pytest.approx(0.15), True, False),
        ("e2 (vs mu_hat_lf)", 0.2, pytest.approx(0.15), pytest.approx(0.25), False, True),
    ]
    empty = Ranking("m", "t", 0, "", pd.DataFrame(), "")
    assert forest_intervals(empty) == [] and _forest(empty) is None and _target_note(empty) == ""
    assert not compares_several(empty) and not compares_several(None)
    assert not compares_several(_ranking(["mu_hat"])) and compares_several(_ranking(["mu_hat", "mu_hat"]))


GUIDE = (
    "line: its 95% bootstrap interval; the best on top, in red; left is better. Grey dotted: the base rate "
    "(the mean mu_hat for every question), itself an estimate: the Brier skill's interval in the table says "
    "whether an estimator beats it. Compare estimators by the table's paired differences, not by "
    "overlapping intervals."
)
BASE_RATE = "base rate: the mean mu_hat for every question (skill 0)"


def test_forest_plot_draws_the_ranking_the_base_rate_and_the_floor_of_the_corrected_brier(drawn):
    """Rows in rank order (the best marked, the leakage-free one named), the base rate at its value, and an
    interval below 0 draws the floor: all said in the guide."""
    ranking = _ranking(["mu_hat", "mu_hat_lf"], base_rate=0.17)
    ranking.long.loc[1, "low"] = -0.02
    figure = _forest(ranking)
    assert figure.caption == "Corrected capability Brier of each estimator (toy-model · toy_eval)"
    assert figure.guide == (
        f"Dot: corrected capability Brier; {GUIDE} Hollow dots: scored against mu_hat_lf. Black line: 0, the "
        "lowest value a Brier can take; an interval below it is noise (‡)."
    )
    assert figure.png.startswith(b"\x89PNG")
    (axis,) = drawn[0].axes
    assert [tick.get_text() for tick in axis.get_yticklabels()] == ["e1 (best)", "e2 (vs mu_hat_lf)"]
    assert axis.get_xlabel() == "corrected capability Brier (lower is better)"
    labelled = {line.get_label(): list(line.get_xdata()) for line in axis.get_lines()[-2:]}
    assert labelled == {BASE_RATE: [0.17, 0.17], "0: the lowest possible population value": [0.0, 0.0]}


def test_forest_plot_of_the_plain_brier_draws_no_floor(drawn):
    """The plain capability Brier cannot fall below 0: no floor, though an interval reaches below it; no
    hollow dot: no word on them; a base rate of NaN: no reference line."""
    ranking = _ranking(["mu_hat", "mu_hat"], base_rate=NAN)
    ranking.long["metric"] = "capability_brier"
    ranking.long.loc[1, "low"] = -0.02
    figure = _forest(ranking)
    assert figure.caption == "Capability Brier of each estimator (toy-model · toy_eval)"
    assert figure.guide == f"Dot: capability Brier; {GUIDE}"
    (axis,) = drawn[0].axes
    assert axis.get_xlabel() == "capability Brier (lower is better)"
    assert [line.get_label() for line in axis.get_lines()] == [f"_child{i}" for i in range(4)]


def test_target_note_of_leakage_free_targets_alone_and_among_others():
    assert _target_note(_ranking(["mu_hat_lf"])) == (
        "e1 is scored against mu_hat_lf, the expected accuracy from the samples outside its draw pool: an "
        "unbiased estimate of the same expected accuracy mu as mu_hat, from fewer samples, so its corrected "
        "Brier estimates the same quantity with a wider interval."
    )
    assert _target_note(_ranking(["mu_hat_lf", "mu_hat", "mu_hat_lf"])) == (
        "e1 and e3 are scored against mu_hat_lf, the expected accuracy from the samples outside their draw "
        "pools: an unbiased estimate of the same expected accuracy mu as mu_hat, from fewer samples, so its "
        "corrected Brier estimates the same quantity with a wider interval. The others are scored against "
        "mu_hat from all k samples; the corrected Brier removes each target's sampling noise, so all are "
        "ranked together."
    )


def test_order_puts_the_rankings_that_compare_several_first_keeping_the_given_order():
    one_a, several_b = _ranking(["mu_hat"], model="a"), _ranking(["mu_hat", "mu_hat"], model="b")
    one_c, several_d = _ranking(["mu_hat"], model="c"), _ranking(["mu_hat"] * 3, model="d")
    ordered = order_rankings([one_a, several_b, one_c, several_d])
    assert [r.model for r in ordered] == ["b", "d", "a", "c"]


def test_summary_sections_state_every_part_of_the_head_and_of_each_ranking():
    """The head: facts of what was measured (one task without an estimator), the notices as warnings, the
    verdicts (the ranking that compares several first, then the one without an estimator), one forest plot
    (the single-estimator ranking has none), figures first. Then one subsection per ranking in that order:
    its sentence, warnings, notes (the leaky note only where one was left out), table and footnotes."""
    single = _ranking(["mu_hat_lf"], model="a-model", unranked=["consistency_k2", "consistency_k4"])
    several = _ranking(["mu_hat", "mu_hat"], footnotes=["‡ a footnote"])
    what = [
        Measured("a-model", "toy_eval", 40, "8", True),
        Measured("toy-model", "toy_eval", 40, "8", True),
        Measured("toy-model", "other_eval", 12, "4-5", False),
    ]
    head, first, second = summary_sections([single, several], ["a notice"], n_resamples=30, what=what)
    assert (head.title, head.level, head.figures_first) == ("Summary", 2, True)
    assert head.facts == {
        "models": "a-model, toy-model",
        "evaluation tasks": "other_eval, toy_eval",
        "questions (N) and samples per question (k)": "a-model · toy_eval: N = 40, k = 8; toy-model · "
        "toy_eval: N = 40, k = 8; toy-model · other_eval: N = 12, k = 4-5 (no confidence estimator: not "
        "ranked)",
        "primary metric": "corrected capability Brier (lower is better): a proper score, unbiased for the "
        "Brier against the true expected accuracy, whose bootstrap intervals cover it",
        "intervals": "95% percentile bootstrap over questions (30 resamples); differences paired",
    }
    assert head.warnings == ["a notice"]
    assert head.sentences == [
        "toy-model · toy_eval: Use e1 (toy-model).",
        "a-model · toy_eval: Use e1 (a-model).",
        "toy-model · other_eval: no confidence estimator could be computed, so there is nothing to rank.",
    ]
    assert [figure.caption for figure in head.figures] == [
        "Corrected capability Brier of each estimator (toy-model · toy_eval)"
    ]
    assert head.figures[0].guide.startswith("Dot: corrected capability Brier; line: its 95% bootstrap")
    assert (head.notes, head.tables, head.footnotes) == ([], [], {})

    caption = "Estimators ranked by corrected capability Brier (N = 40, k = 8)"
    assert (first.title, first.level) == ("Summary · toy-model · toy_eval", 3)
    assert (first.sentences, first.warnings) == (["sentence of toy-model"], ["toy-model warned"])
    assert first.notes == [
        RANKED_NOTE,
        "Every ranked estimator is scored against mu_hat, the expected accuracy from all k samples.",
    ]
    assert [c for c, _ in first.tables] == [caption] and first.tables[0][1] is several.table
    assert first.footnotes == {caption: ["‡ a footnote"]}
    assert (first.facts, first.figures, first.figures_first) == ({}, [], False)

    assert (second.title, second.level) == ("Summary · a-model · toy_eval", 3)
    assert (second.sentences, second.warnings) == (["sentence of a-model"], ["a-model warned"])
    assert second.notes == [
        RANKED_NOTE,
        _target_note(single),
        "Not ranked (leaky): consistency_k2 and consistency_k4, the paper-form consistency, whose draws "
        "overlap the samples that define mu_hat; its leakage-free form consistency_lf_k is ranked instead "
        "(when its held-out target has 2 samples or more).",
    ]
    assert second.footnotes == {caption: []}


def test_summary_of_nothing_measured_says_so():
    (head,) = summary_sections([])
    assert head.sentences == ["No evaluation task with a confidence estimator was found."]
    assert head.facts["models"] == "none" and head.facts["evaluation tasks"] == "none"
    assert head.facts["questions (N) and samples per question (k)"] == "no evaluation run"
    assert (head.figures, head.warnings) == ([], [])


def test_summary_of_a_ranking_without_its_long_rows_draws_nothing_and_notes_only_the_ranking():
    bare = Ranking("m", "t", 3, "2", pd.DataFrame({"rank": [1]}), "only", verdict="Use x.")
    head, detail = summary_sections([bare])
    assert head.sentences == ["m · t: Use x."] and head.figures == []
    assert head.facts["questions (N) and samples per question (k)"] == "m · t: N = 3, k = 2"
    assert (
        head.facts["intervals"]
        == "95% percentile bootstrap over questions (1000 resamples); differences paired"
    )
    assert detail.notes == [RANKED_NOTE]
    assert detail.tables[0][0] == "Estimators ranked by corrected capability Brier (N = 3, k = 2)"


# ------------------------------------------------------------------ too little to conclude


def _constant(questions: int, estimators: int = 1) -> SectionInputs:
    """``questions`` questions of mu_hat 0.5 (k = 10), confidences at 0.5 + 0.1 i (each its own Brier)."""
    names = ["p_true", "verbalized_confidence", "probe"][:estimators]
    evaluation = pd.DataFrame(
        {
            "correctness": [[1] * 5 + [0] * 5] * questions,
            "n": 10,
            "expected_accuracy": 0.5,
            **{name: 0.5 + 0.1 * i for i, name in enumerate(names)},
        }
    )
    corrected = {name: ((0.1 * i) ** 2 - 0.25 / 9, -0.1, 0.1, questions) for i, name in enumerate(names)}
    return _inputs(evaluation, names, metric_rows({BRIER: corrected}))


@pytest.mark.parametrize("questions", [3, 5, 6])
def test_too_few_questions_give_a_warning_not_a_verdict(questions):
    """Below 10 questions a 95% percentile bootstrap covers far less than 95% (summary's docstring): no
    "Use X" and no "beats", a warning instead; the ranking itself is still there."""
    evaluation = _evaluation(p_true=_off(0.1), verbalized_confidence=_off(0.2)).iloc[:questions]
    metrics = metric_rows(
        {
            BRIER: {
                "p_true": (0.01, 0.0, 0.02, questions),
                "verbalized_confidence": (0.04, 0.03, 0.05, questions),
            }
        }
    )
    ranking = rank_estimators(_inputs(evaluation, ["p_true", "verbalized_confidence"], metrics), "m", "t")
    reason = (
        f"N = {questions} evaluation questions, below 10: too few to conclude anything (a 95% percentile "
        "bootstrap over so few questions covers far less than 95%)"
    )
    assert ranking.verdict == f"No verdict: {reason}; the ranking is for reference only."
    assert ranking.sentence == f"No conclusion: {reason}."
    assert ranking.warnings[0] == f"No verdict: {reason}; the ranking is for reference only."
    assert not any("below 100" in warning for warning in ranking.warnings)
    assert list(ranking.table["estimator"]) == ["p_true", "verbalized_confidence"]


def test_ten_questions_get_a_verdict():
    """At the threshold (10 questions) the verdict is given, with the below-100 warning."""
    ranking = rank_estimators(_constant(10, 2), "m", "t")
    varied = _inputs(
        pd.concat([_evaluation(p_true=_off(0.1))] * 2, ignore_index=True).iloc[:10],
        ["p_true"],
        metric_rows({BRIER: {"p_true": (0.01, 0.0, 0.02, 10)}}),
    )
    assert rank_estimators(varied, "m", "t").verdict.startswith("Use p_true, tentatively: best on")
    assert ranking.verdict.startswith("No verdict: mu_hat is 0.5 on every question")


@pytest.mark.parametrize("estimators", [1, 2])
def test_a_constant_target_gives_a_warning_not_a_verdict(estimators):
    """mu_hat the same on every question (here 6 and 100 questions): nothing to discriminate, no Brier
    skill; one estimator alone said "Use p_true" with no "tentatively" before."""
    for questions in (6, 100):
        ranking = rank_estimators(_constant(questions, estimators), "m", "t")
        assert not ranking.verdict.startswith("Use"), ranking.verdict
        assert ranking.verdict.startswith("No verdict: "), ranking.verdict
    assert ranking.verdict == (
        "No verdict: mu_hat is 0.5 on every question: nothing to tell estimators apart by (no Brier skill, "
        "no AUROC); the ranking is for reference only."
    )
    assert ranking.warnings[0].endswith("the ranking reflects calibration alone: no verdict.")


def test_an_estimator_lost_for_want_of_its_input_is_named_in_the_warnings_and_after_the_verdict(monkeypatch):
    """A run folder moved after the run: the probe's activations are not found. Before, the verdict ranked
    the others as if there were no probe ("Use probe" flipped to "Use p_true" with nothing said); now the
    loss is a warning and follows the verdict."""
    monkeypatch.setattr(summary, "MIN_VERDICT_QUESTIONS", 1)
    evaluation = _evaluation(p_true=_off(0.1), verbalized_confidence=_off(0.2))
    metrics = metric_rows(
        {BRIER: {"p_true": (0.01, 0.0, 0.02, 6), "verbalized_confidence": (0.04, 0.03, 0.05, 6)}}
    )
    inputs = _inputs(evaluation, ["p_true", "verbalized_confidence"], metrics)
    lost = "probe not computed: the activations folder its run recorded (/old/we/acts) was not found"
    inputs.computed.not_computed.append(lost)
    ranking = rank_estimators(inputs, "m", "t")
    assert lost in ranking.warnings
    assert ranking.verdict.startswith("Use p_true, tentatively: best on corrected capability Brier")
    assert ranking.verdict.endswith(f". Left out: {lost}.")
    inputs.computed.not_computed.clear()
    assert "Left out" not in rank_estimators(inputs, "m", "t").verdict
