"""The report's summary tested by kind (issue 49, point 2): each setting of a section reaches the paired
bootstrap, each field of a record is read from its own key (a skill's estimate, low and high; a paired
difference's low and high; the paired questions of the next, not of the best), each documented boundary on
both sides (an interval that ends at 0, the verdict's 10 questions, a parse-failure rate of 20%, an adaptive
run's k_max of 10, first look of 8 and consistency's 10), and each sentence matched whole. Every expected
value is written out by hand here; the inputs are small tables built directly (fast)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import capcal_metrics as cm
from analysis.report.registry import ComputedEstimators
from analysis.report.sections import SectionInputs
from analysis.report.summary import (
    _base_rate,
    _warnings,
    conclusion,
    no_verdict_reason,
    rank_estimators,
    verdict,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report_inputs import adaptive_table, metric_rows  # noqa: E402  (this folder)

NAN = float("nan")
BRIER = "corrected_capability_brier"
SKILL, AUROC = "capability_brier_skill", "soft_auroc"

# Twelve questions (at or above the verdict's 10), each with its own k (4 to 15 samples) and its own mu_hat,
# so that reading n, mu_hat or a confidence from the wrong column shows in the arrays passed on.
K = [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
CORRECT = [1, 2, 3, 0, 8, 4, 10, 5, 6, 13, 7, 1]  # c_i <= k_i; mu_hat_i = c_i / k_i
P_TRUE = [0.11, 0.12, 0.13, 0.14, 0.15, 0.16, 0.17, 0.18, 0.19, 0.21, 0.22, 0.23]
VERBALIZED = [0.31, 0.32, 0.33, 0.34, 0.35, NAN, 0.37, 0.38, 0.39, 0.41, 0.42, 0.43]  # none on question 6


def _evaluation() -> pd.DataFrame:
    correctness = [[1] * c + [0] * (k - c) for c, k in zip(CORRECT, K, strict=True)]
    return pd.DataFrame(
        {
            "correctness": correctness,
            "n": K,
            "expected_accuracy": [c / k for c, k in zip(CORRECT, K, strict=True)],
            "p_true": P_TRUE,
            "verbalized_confidence": VERBALIZED,
        }
    )


def _inputs(
    evaluation: pd.DataFrame,
    estimators: list[str],
    metrics: pd.DataFrame,
    n_resamples: int = 37,
    seed: int = 11,
    parse_failures: pd.DataFrame | None = None,
) -> SectionInputs:
    """A section's inputs with its metric rows given (its cached properties set by hand)."""
    computed = ComputedEstimators(evaluation, {}, [], {}, {}, parse_failures=parse_failures)
    inputs = SectionInputs(computed, estimators, n_resamples, seed)
    inputs.metrics = metrics
    inputs.leakage_free_metrics = None
    return inputs


class _PairedSpy:
    """Stands in for ``capcal_metrics.bootstrap_differences``: keeps each call and answers one interval of
    distinct estimate, low and high for "other"."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __call__(self, metrics, reference, **settings):
        self.calls.append((metrics, reference, settings))
        return {"other": SimpleNamespace(estimate=0.034, low=0.012, high=0.056)}


def test_ranking_passes_its_resamples_seed_metric_and_each_candidates_own_arrays_to_the_paired_bootstrap(
    monkeypatch,
):
    """The section's 37 resamples and seed 11 (neither the default 1000 nor 0) reach the paired bootstrap;
    the best (p_true) is the reference; each side's arrays are its own confidence, mu_hat and n on the 11
    questions both have (question 6 left out); its interval comes back as advantage, low and high."""
    spy = _PairedSpy()
    monkeypatch.setattr(cm, "bootstrap_differences", spy)
    metrics = metric_rows(
        {BRIER: {"verbalized_confidence": (0.09, 0.05, 0.13, 11), "p_true": (0.02, 0.01, 0.04, 12)}}
    )
    ranking = rank_estimators(_inputs(_evaluation(), ["p_true", "verbalized_confidence"], metrics), "m", "t")
    ((specs, reference, settings),) = spy.calls
    assert reference == "best" and settings == {"n_resamples": 37, "seed": 11}
    shared = [i for i in range(12) if i != 5]
    mu = [CORRECT[i] / K[i] for i in shared]
    expected = {
        "best": [[P_TRUE[i] for i in shared], mu, [float(K[i]) for i in shared]],
        "other": [[VERBALIZED[i] for i in shared], mu, [float(K[i]) for i in shared]],
    }
    assert list(specs) == ["best", "other"]
    for side, arrays in expected.items():
        function, given = specs[side]
        assert function is cm.corrected_capability_brier_score, side
        assert [list(map(float, a)) for a in given] == arrays, side
    second = ranking.long.iloc[1]
    assert (second.estimator, second.advantage, second.advantage_low, second.advantage_high) == (
        "verbalized_confidence",
        0.034,
        0.012,
        0.056,
    )
    assert (second.paired_questions, second.questions) == (11, 11)
    assert ranking.table["difference to the best (paired; above 0: the best is better)"].tolist() == [
        "best",
        "0.034 [0.012, 0.056]",
    ]


def test_ranking_by_the_plain_capability_brier_pairs_the_plain_brier_without_n(monkeypatch):
    """Without corrected Brier rows the plain capability Brier ranks, and its paired difference is the plain
    Brier of (confidence, mu_hat): the metric ranked by reaches the bootstrap."""
    spy = _PairedSpy()
    monkeypatch.setattr(cm, "bootstrap_differences", spy)
    metrics = metric_rows(
        {
            "capability_brier": {
                "p_true": (0.03, 0.02, 0.05, 12),
                "verbalized_confidence": (0.1, 0.06, 0.2, 11),
            }
        }
    )
    rank_estimators(_inputs(_evaluation(), ["p_true", "verbalized_confidence"], metrics), "m", "t")
    ((specs, _, settings),) = spy.calls
    assert settings == {"n_resamples": 37, "seed": 11}
    for side in ("best", "other"):
        function, given = specs[side]
        assert function is cm.brier_score and len(given) == 2, side


def test_ranking_reads_each_skill_as_estimate_low_high_of_the_skill_rows(monkeypatch):
    """p_true best, its Brier skill 0.2 [-0.1, 0.3] (the interval contains 0: tentative, tied with the base
    rate); verbalized_confidence's skill -0.3 [-0.5, 0.05] is not worse than the base rate (its interval
    reaches above 0). Read as (estimate, high, low) the best would be "worse" and the other named worse; read
    from the AUROC rows (0.8 [0.7, 0.9]) the best would "beat" the base rate."""
    spy = _PairedSpy()
    monkeypatch.setattr(cm, "bootstrap_differences", spy)
    metrics = metric_rows(
        {
            BRIER: {"p_true": (0.02, 0.01, 0.04, 12), "verbalized_confidence": (0.09, 0.05, 0.13, 11)},
            SKILL: {"p_true": (0.2, -0.1, 0.3, 12), "verbalized_confidence": (-0.3, -0.5, 0.05, 11)},
            AUROC: {"p_true": (0.8, 0.7, 0.9, 12), "verbalized_confidence": (0.6, 0.55, 0.65, 11)},
        }
    )
    ranking = rank_estimators(_inputs(_evaluation(), ["p_true", "verbalized_confidence"], metrics), "m", "t")
    assert ranking.verdict == (
        "Use p_true, tentatively: best on corrected capability Brier, ahead of verbalized_confidence (paired "
        "95% interval above 0); but it is not distinguishable from the base rate (the mean mu_hat for every "
        "question)."
    )
    assert ranking.sentence == (
        "p_true beats verbalized_confidence on corrected capability Brier by 0.034 [0.012, 0.056] (paired "
        "bootstrap, N = 11): the best is distinguishable from the next."
    )
    assert ranking.table["capability_brier_skill ↑"].tolist() == [
        "0.200 [-0.100, 0.300]",
        "-0.300 [-0.500, 0.050]",
    ]


# ------------------------------------------------------------------ the sentence on the best and the next


def _pairs(*advantages: tuple[str, float, float, float, int]) -> pd.DataFrame:
    """Ranked rows after the best "a" (its own paired questions 40, never the next's)."""
    best = ("a", NAN, NAN, NAN, 40)
    columns = ["estimator", "advantage", "advantage_low", "advantage_high", "paired_questions"]
    return pd.DataFrame([best, *advantages], columns=columns)


def test_conclusion_gives_the_nexts_difference_low_high_and_paired_questions_whole():
    """Distinct difference, low and high, the next's own N (30, not the best's 40), and a third row that
    must not be read (the sentence is on the best and the next only)."""
    third = ("c", -0.5, -0.7, -0.3, 20)
    assert conclusion(_pairs(("b", 0.03, 0.01, 0.06, 30), third), "Brier") == (
        "a beats b on Brier by 0.030 [0.010, 0.060] (paired bootstrap, N = 30): the best is distinguishable "
        "from the next."
    )
    assert conclusion(_pairs(("b", 0.02, -0.01, 0.05, 30), third), "Brier") == (
        "a and b are not distinguishable on Brier at N = 30: the paired difference 0.020 [-0.010, 0.050] "
        "includes 0."
    )
    assert conclusion(_pairs(("b", -0.04, -0.07, -0.02, 30), third), "Brier") == (
        "b is better than a on Brier on the N = 30 questions both have, by 0.040 [0.020, 0.070]; a ranks "
        "first on its own questions only."
    )


def test_conclusion_of_an_interval_that_ends_at_0_is_not_distinguishable():
    """An interval [low, 0] or [0, high] contains 0: the two are not distinguishable (neither "beats" nor
    "better than")."""
    assert conclusion(_pairs(("b", -0.02, -0.04, 0.0, 30)), "Brier") == (
        "a and b are not distinguishable on Brier at N = 30: the paired difference -0.020 [-0.040, 0.000] "
        "includes 0."
    )
    assert conclusion(_pairs(("b", 0.02, 0.0, 0.04, 30)), "Brier") == (
        "a and b are not distinguishable on Brier at N = 30: the paired difference 0.020 [0.000, 0.040] "
        "includes 0."
    )


# ------------------------------------------------------------------ the verdict


def test_verdict_counts_a_paired_interval_that_ends_at_0_as_not_distinguishable():
    """b's interval [0, 0.04] and c's [-0.04, 0]: both tied with the best, neither ahead nor better; d's
    [0.01, 0.05] ahead. The tied ones' N range from their own paired questions (20-30), not d's 50."""
    ranked = _pairs(("b", 0.02, 0.0, 0.04, 30), ("c", -0.02, -0.04, 0.0, 20), ("d", 0.03, 0.01, 0.05, 50))
    skills = {"a": (0.4, 0.1, 0.7)}
    assert verdict(ranked, skills, "Brier") == (
        "Use a: best on Brier, not distinguishable from b and c at N = 20-30, ahead of d (paired 95% "
        "interval above 0); it beats the base rate."
    )


def test_verdict_reads_a_skill_interval_that_ends_at_0_as_tied_with_the_base_rate():
    """The best's skill [0, 0.3] or [-0.3, 0]: tied with the base rate (neither beats it nor is worse); an
    other's skill [-0.3, 0] is not worse either."""
    ranked = _pairs(("b", 0.03, 0.01, 0.05, 30))
    tied = (
        "Use a, tentatively: best on Brier, ahead of b (paired 95% interval above 0); but it is not "
        "distinguishable from the base rate (the mean mu_hat for every question)."
    )
    assert verdict(ranked, {"a": (0.1, 0.0, 0.3), "b": (-0.1, -0.3, 0.0)}, "Brier") == tied
    assert verdict(ranked, {"a": (-0.1, -0.3, 0.0), "b": (-0.1, -0.3, 0.0)}, "Brier") == tied


def test_verdict_judges_a_skill_by_its_interval_not_its_estimate():
    """Where the estimate and the interval disagree, the interval decides: a best of skill -0.05 [-0.2, 0.1]
    is tied with the base rate (not "Use none of them"), an other of 0.05 [-0.3, -0.01] is worse, and an
    other of -0.05 [-0.2, 0.1] is not."""
    ranked = _pairs(("b", 0.03, 0.01, 0.05, 30))
    assert verdict(ranked, {"a": (-0.05, -0.2, 0.1), "b": (0.05, -0.3, -0.01)}, "Brier") == (
        "Use a, tentatively: best on Brier, ahead of b (paired 95% interval above 0); but it is not "
        "distinguishable from the base rate (the mean mu_hat for every question), and b is worse than the "
        "base rate."
    )
    assert verdict(ranked, {"a": (0.5, 0.2, 0.8), "b": (-0.05, -0.2, 0.1)}, "Brier") == (
        "Use a: best on Brier, ahead of b (paired 95% interval above 0); it beats the base rate."
    )


# ------------------------------------------------------------------ too little to conclude


def test_no_verdict_reason_below_10_questions_and_none_at_10():
    varied = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
    assert no_verdict_reason(9, varied) == (
        "N = 9 evaluation questions, below 10: too few to conclude anything (a 95% percentile bootstrap over "
        "so few questions covers far less than 95%)"
    )
    assert no_verdict_reason(10, varied) == ""
    assert no_verdict_reason(10, np.array([])) == ""


def test_no_verdict_reason_of_a_constant_target_prints_it_with_g():
    assert no_verdict_reason(10, np.full(10, 0.125)) == (
        "mu_hat is 0.125 on every question: nothing to tell estimators apart by (no Brier skill, no AUROC)"
    )
    assert no_verdict_reason(200, np.array([1.0, 1.0, 1.0])) == (
        "mu_hat is 1 on every question: nothing to tell estimators apart by (no Brier skill, no AUROC)"
    )


# ------------------------------------------------------------------ the warnings' boundaries


def _hundred() -> pd.DataFrame:
    """100 questions of k = 10 with mu_hat 0.1, 0.2, ..., 1.0 over and over: no warning of their own."""
    correctness = [[1] * (1 + i % 10) + [0] * (9 - i % 10) for i in range(100)]
    return pd.DataFrame(
        {
            "correctness": correctness,
            "n": 10,
            "expected_accuracy": [sum(v) / 10 for v in correctness],
            "p_true": 0.5,
        }
    )


def _ranked(estimator: str = "p_true", questions: int = 100, low: float = 0.1, high: float = 0.2):
    return pd.DataFrame(
        [(estimator, questions, low, high)], columns=["estimator", "questions", "low", "high"]
    )


def _failures(*rows: tuple[str, int, int]) -> pd.DataFrame:
    return pd.DataFrame(
        [(f"toy_{kind}", kind, q, f) for kind, q, f in rows],
        columns=["task", "kind", "questions", "parse_failures"],
    )


def test_parse_failures_on_exactly_20_percent_are_not_warned_of_and_above_are():
    """1 of 5 and 20 of 100 (20%): no warning; 21 of 100 (21%): the warning, whole."""
    failures = _failures(("verbalized", 5, 1), ("ptrue", 100, 20), ("selfcheck", 100, 21))
    inputs = _inputs(_hundred(), ["p_true"], metric_rows({}), parse_failures=failures)
    assert _warnings(inputs, _ranked()) == [
        "selfcheck confidence (toy_selfcheck) failed to parse on 21/100 questions (21%): its estimators rest "
        "on the rest, which may not be a random subset."
    ]


def test_an_estimator_without_a_low_end_of_its_interval_is_warned_of_and_one_without_a_high_end_is_not():
    """The "no interval" warning reads the interval's low end."""
    inputs = _inputs(_hundred(), ["p_true"], metric_rows({}))
    assert _warnings(inputs, _ranked(low=0.1, high=NAN)) == []
    assert _warnings(inputs, _ranked(low=NAN, high=0.2)) == [
        "p_true: no interval for its corrected capability Brier (too few questions)."
    ]


def _adaptive_warnings(looks: list[int]) -> list[str]:
    """The warnings of an adaptive run with p_true and the paper-form consistency, after the N one."""
    names = ["p_true", "consistency_k2"]
    warned = _warnings(_inputs(adaptive_table(looks, *names), names, metric_rows({})), _ranked(questions=4))
    assert warned[0].startswith("No verdict: N = 4 evaluation questions")
    return warned[1:]


def test_adaptive_warnings_at_k_max_10_first_look_8_and_consistency_look_10():
    """k_max 10 (not below 10), first look 8 (not below 8), consistency's first look 10 (not below 10): no
    warning; one below each (k_max 9, first look 7, consistency's look 9): each warning, whole."""
    assert _adaptive_warnings([10, 12]) == []
    assert _adaptive_warnings([8, 10]) == [
        "consistency uses each question's first 8 samples (the first look, drawn before any stopping "
        "decision), below 10: only k < 8 (its leakage-free form is scored against every sample outside its "
        "draw pool)."
    ]
    assert _adaptive_warnings([9, 10]) == [
        "consistency uses each question's first 9 samples (the first look, drawn before any stopping "
        "decision), below 10: only k < 9 (its leakage-free form is scored against every sample outside its "
        "draw pool)."
    ]
    assert _adaptive_warnings([7, 9])[:2] == [
        "adaptive run with k_max = 9 samples, below 10: a question whose samples disagree is estimated from "
        "at most 9 samples.",
        "adaptive run with a first look of 7 samples, below 8: the Brier skill after stopping is not "
        "reliable (in simulation its bias differs from fixed k's by up to 4.1 standard errors, "
        "docs/methods.md); rank by the corrected Brier or the debiased ECE.",
    ]


def test_base_rate_of_the_corrected_brier_is_corrected_from_two_samples_per_question():
    """n = 2 on every question is enough for the correction (n - 1 = 1): the variance of mu_hat, mean
    (mu - 1/2)^2 = 4 x 0.25 / 6 = 1/6, less (1 - 1/6) sum mu (1 - mu) / (n - 1) / 6 = (5/6) (0.5 / 1) / 6 (as
    test_report_summary.py's n = 4 case); the plain Brier's is not corrected."""
    mu = np.array([0.0, 0.5, 0.5, 1.0, 0.0, 1.0])
    assert _base_rate(mu, np.full(6, 2), BRIER) == pytest.approx(1 / 6 - (5 / 6) * (0.5 / 1) / 6)
    assert _base_rate(mu, np.full(6, 2), "capability_brier") == pytest.approx(1 / 6)
