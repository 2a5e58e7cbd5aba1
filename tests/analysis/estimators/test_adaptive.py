"""Capability metrics after stopping, the replay on a fixed-k matrix and the simulation (fixed seeds)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import capcal_metrics as cm
from analysis.estimators.adaptive import (
    ADAPTIVE_CAPABILITY_METRICS,
    adaptive_capability_metrics,
    adaptive_estimates,
    adaptive_leakage_free_table,
    adaptive_metric_intervals,
    adaptive_pass_at_k,
    first_look_table,
    leakage_free_target,
    metrics_from_estimates,
    stopped_counts,
)
from analysis.estimators.adaptive_replay import replay_stopping
from analysis.estimators.adaptive_simulation import draw_mu, simulate_adaptive_metrics
from analysis.estimators.consistency import consistency_from_table
from analysis.report.calibration_table import calibration_table
from capcal_tasks.adaptive_records import sequential_plan


def _run(seed: int = 0, size: int = 120, k: int = 16):
    rng = np.random.default_rng(seed)
    mu = rng.beta(0.3, 0.3, size)
    correctness = (rng.uniform(size=(size, k)) < mu[:, None]).astype(int)
    confidence = np.clip(mu + rng.normal(0, 0.15, size), 0, 1)
    return confidence, correctness


def test_single_look_equals_the_reports_fixed_k_metrics():
    confidence, correctness = _run()
    k = correctness.shape[1]
    n, s = np.full(len(confidence), k), correctness.sum(axis=1)
    adaptive = adaptive_capability_metrics(confidence, n, s, cm.unanimity_rule([k]))
    mu_hat = s / k
    report = {  # the fixed-k functions of analysis.report.calibration_table
        "capability_ece_debiased": cm.debiased_expected_calibration_error(confidence, mu_hat),
        "corrected_capability_brier": cm.corrected_capability_brier_score(confidence, mu_hat, n),
        "capability_brier_skill": cm.corrected_brier_skill_score(confidence, mu_hat, n),
        "soft_auroc": cm.soft_label_auroc(confidence, mu_hat),
    }
    assert adaptive.keys() == report.keys()
    for name, value in adaptive.items():
        assert value == pytest.approx(report[name], rel=1e-12, abs=1e-15), name
    for j in (1, 5):  # pass@1, the smallest k, is the mean accuracy
        assert adaptive_pass_at_k(cm.unanimity_rule([k]), n, s, j)[0] == pytest.approx(
            float(np.mean(cm.pass_at_k(n, s, j))), rel=1e-12
        )
    assert adaptive_pass_at_k(cm.unanimity_rule([k]), n, s, 1)[0] == pytest.approx(float(np.mean(s / n)))


def test_estimates_after_stopping_differ_from_s_over_n_and_intervals_hold_the_estimate():
    plan = cm.unanimity_rule([4, 8, 16])
    confidence, correctness = _run(1)
    n, s = stopped_counts(np.cumsum(correctness, axis=1)[:, [3, 7, 15]], plan)
    estimates = adaptive_estimates(plan, n, s)
    assert not np.allclose(estimates.mu_hat, s / n)  # s/n is biased after the stop; the estimate is not it
    intervals = adaptive_metric_intervals(confidence, n, s, plan, n_resamples=200, seed=3)
    values = adaptive_capability_metrics(confidence, n, s, plan)
    for name, interval in intervals.items():
        assert interval.estimate == pytest.approx(values[name], rel=1e-12)
        assert interval.low <= interval.estimate <= interval.high, name


def test_stopped_counts_stops_at_the_first_unanimous_look():
    plan = cm.unanimity_rule([2, 4, 8])
    successes = np.array([[0, 0, 3], [1, 3, 5], [2, 4, 4], [1, 2, 8]])
    n, s = stopped_counts(successes, plan)
    assert n.tolist() == [2, 8, 2, 8] and s.tolist() == [0, 5, 2, 8]
    with pytest.raises(ValueError, match="one column per look"):
        stopped_counts(successes[:, :2], plan)
    with pytest.raises(ValueError, match="cumulative"):
        stopped_counts(np.array([[2, 1, 1]]), plan)


def test_pass_at_k_past_the_first_look_is_nan_with_the_reason():
    plan = cm.unanimity_rule([4, 8])
    value, reason = adaptive_pass_at_k(plan, [4, 8], [0, 3], 5)
    assert math.isnan(value)
    assert reason == "pass@5 has no unbiased estimate after stopping: k exceeds the first look l_1 = 4"
    for k in (2, 4):  # up to and including the first look: an estimate (the boundary k = l_1 is one)
        value, reason = adaptive_pass_at_k(plan, [4, 8], [0, 3], k)
        assert reason == "" and 0 < value < 1, k


LF_LOOKS = (8, 16, 32)
LF_LABEL = "adaptive (looks 8, 16, 32, rule unanimity)"


def _adaptive_answer_table(
    mu: np.ndarray, rng: np.random.Generator, looks=LF_LOOKS, rule: dict | None = None
) -> pd.DataFrame:
    """An adaptive run's question table (the columns the loader keeps that the leakage-free consistency
    reads; unanimity unless ``rule``, a ``parse_rule`` dict, says otherwise): answer "0" is correct, wrong
    answers are "1" to "3"; each question truncated at its stop."""
    rule = rule or {"name": "unanimity"}
    plan = sequential_plan(looks, rule)
    k_max = looks[-1]
    correct = rng.uniform(size=(mu.size, k_max)) < mu[:, None]
    answers = np.where(correct, 0, rng.integers(1, 4, size=(mu.size, k_max)))
    n, _ = stopped_counts(np.cumsum(correct, axis=1)[:, np.array(looks) - 1], plan)
    return pd.DataFrame(
        {
            "question_id": [str(i) for i in range(mu.size)],
            "correctness": [list(row[:stop].astype(int)) for row, stop in zip(correct, n, strict=True)],
            "extracted_answers": [[str(a) for a in row[:stop]] for row, stop in zip(answers, n, strict=True)],
            "n": n,
            "s": [int(row[:stop].sum()) for row, stop in zip(correct, n, strict=True)],
            "sampling": LF_LABEL,
            "looks": [list(looks)] * mu.size,
            "rule": [dict(rule) for _ in range(mu.size)],
        }
    )


def test_the_leakage_free_target_takes_every_sample_outside_the_pool():
    """The consistency is that of the first look; only the target changes: for each question the estimate
    given its pool's successes (found independently from the split's own pool mask), and n_lf = n - pool."""
    rng = np.random.default_rng(11)
    table = _adaptive_answer_table(rng.beta(0.4, 0.4, 60), rng)
    assert table["n"].min() == 8 and table["n"].max() == 32  # some stopped early, some drew k_max
    first = consistency_from_table(first_look_table(table), ks=(3, 5), seed=2)
    adjusted = adaptive_leakage_free_table(first, table)
    for column in ("consistency_lf_k3", "consistency_lf_k5", "consistency_k5"):
        np.testing.assert_array_equal(adjusted[column], first[column])
    assert first["n_lf"].eq(3).all() and adjusted["n_lf"].tolist() == (table["n"] - 5).tolist()

    answers = np.array([[int(a) for a in row[:8]] for row in table["extracted_answers"]])
    split = cm.leakage_free_consistency(answers, (answers == 0).astype(int), 5, pool_size=5, seed=2)
    pool_successes = ((answers == 0) & split.pool_mask).sum(axis=1)
    plan = cm.unanimity_rule(LF_LOOKS)
    n, s = table["n"].to_numpy(), table["s"].to_numpy()
    np.testing.assert_allclose(
        adjusted["mu_hat_lf"], cm.unbiased_moment_given_prefix(plan, n, s, 5, pool_successes), atol=1e-15
    )
    np.testing.assert_allclose(
        adjusted["mu_squared_hat_lf"],
        cm.unbiased_moment_given_prefix(plan, n, s, 5, pool_successes, 2),
        atol=1e-15,
    )
    # a question that drew k_max with a mixed pool: the plain share of its 27 samples outside the pool
    mixed = (n == 32) & (pool_successes > 0) & (pool_successes < 5)
    assert mixed.any()
    np.testing.assert_allclose(
        adjusted["mu_hat_lf"][mixed], (s - pool_successes)[mixed] / 27, rtol=0, atol=1e-15
    )
    estimates = leakage_free_target(plan, n, s, 5, pool_successes)
    np.testing.assert_array_equal(estimates.mu_hat, adjusted["mu_hat_lf"])
    # a fixed-k table, and a pool leaving fewer than 2 first-look samples, are returned as they are
    fixed = first_look_table(table)
    assert adaptive_leakage_free_table(first, fixed) is first
    tight = consistency_from_table(first_look_table(table), ks=(7,), seed=2)
    assert adaptive_leakage_free_table(tight, table) is tight


def test_the_leakage_free_table_at_its_boundaries():
    """A pool leaving exactly 2 first-look samples is re-targeted; one question is enough; a rule whose
    record lists its keys in another order is the same plan; two plans in one table are refused."""
    rng = np.random.default_rng(3)
    table = _adaptive_answer_table(rng.beta(0.4, 0.4, 30), rng)
    pool_6 = adaptive_leakage_free_table(consistency_from_table(first_look_table(table), ks=(6,)), table)
    assert pool_6["n_lf"].tolist() == (table["n"] - 6).tolist()
    one = table.iloc[[int(np.argmax(table["n"]))]].reset_index(drop=True)
    single = adaptive_leakage_free_table(consistency_from_table(first_look_table(one), ks=(5,)), one)
    assert single["n_lf"].tolist() == [one["n"][0] - 5] and 0 <= single["mu_hat_lf"][0] <= 1

    width = {"name": "confidence_width", "width": 0.5, "alpha": 0.05}
    table = _adaptive_answer_table(rng.beta(0.4, 0.4, 40), rng, rule=width)
    assert table["n"].min() < 32 and not table["s"].isin([0, 8]).all()  # the width rule stopped on mixed ones
    reordered = table.copy()
    reordered["rule"] = [dict(reversed(list(width.items()))) if i % 2 else dict(width) for i in range(40)]
    first = consistency_from_table(first_look_table(table), ks=(5,), seed=1)
    pd.testing.assert_frame_equal(
        adaptive_leakage_free_table(first, reordered), adaptive_leakage_free_table(first, table)
    )
    mixed = table.copy()
    mixed["rule"] = [{"name": "unanimity"}, *mixed["rule"][1:]]
    with pytest.raises(ValueError, match=r"^questions of several adaptive plans in one table \(2 plans\)$"):
        adaptive_leakage_free_table(first, mixed)


def test_the_leakage_free_corrected_brier_is_unbiased_after_stopping_and_tighter_than_the_first_look():
    """200 adaptive runs of 150 questions (Beta(0.4, 0.4) mu, looks 8, 16, 32, consistency k = 5 from a pool
    of 5): the corrected Brier of consistency_lf_k5 against the target of every sample outside the pool
    (moments given the pool) is unbiased for mean (c - mu)^2 (|mean error| <= 4 SE), and its error's SD is
    below that of the first-look target (3 held-out samples) by at least 20%."""
    rng = np.random.default_rng(5)
    errors_all, errors_first = [], []
    for _ in range(200):
        mu = rng.beta(0.4, 0.4, 150)
        table = _adaptive_answer_table(mu, rng)
        first = consistency_from_table(first_look_table(table), ks=(5,), seed=int(rng.integers(1 << 30)))
        adjusted = adaptive_leakage_free_table(first, table)
        c = first["consistency_lf_k5"].to_numpy()
        truth = float(np.mean((c - mu) ** 2))
        errors_all.append(
            cm.capability_brier_from_moments(c, adjusted["mu_hat_lf"], adjusted["mu_squared_hat_lf"]) - truth
        )
        errors_first.append(cm.corrected_capability_brier_score(c, first["mu_hat_lf"], first["n_lf"]) - truth)
    errors_all, errors_first = np.array(errors_all), np.array(errors_first)
    se = errors_all.std(ddof=1) / np.sqrt(errors_all.size)
    assert abs(errors_all.mean()) <= 4 * se
    assert abs(errors_first.mean()) <= 4 * errors_first.std(ddof=1) / np.sqrt(errors_first.size)
    assert errors_all.std() < 0.8 * errors_first.std()


def test_replay_columns_are_the_mean_and_standard_error_of_the_per_order_estimates():
    """With a rule that never stops before k_max (width 1e-9), each order's estimate is the mean of its first
    k_max samples, the orders drawn as the docstring says (``default_rng(seed).permuted`` row by row):
    ``replay_mean`` is their mean and ``replay_se`` their SD (divisor S - 1) over sqrt(S), worked out here at
    S = 3 orders."""
    matrix = (np.random.default_rng(3).random((6, 12)) < 0.5).astype(int)
    result = replay_stopping(matrix, cm.confidence_width_rule([2, 6], 1e-9), 3, seed=7)
    rng = np.random.default_rng(7)
    per_order = np.array([rng.permuted(matrix, axis=1)[:, :6].mean(axis=1) for _ in range(3)])
    assert per_order.std(axis=0).max() > 0  # the orders differ
    np.testing.assert_allclose(result.questions["replay_mean"], per_order.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(
        result.questions["replay_se"], per_order.std(axis=0, ddof=1) / math.sqrt(3), rtol=1e-12
    )
    np.testing.assert_array_equal(result.questions["mean_samples"], 6)
    # without confidences the metric table is empty but keeps its columns (a reader selects them by name)
    assert result.metrics.empty
    assert list(result.metrics.columns) == ["metric", "fixed", "replay_mean", "replay_se"]


def test_replay_mean_matches_the_full_k_mean():
    """Over random orders the estimate's mean is the full-k mean exactly; 300 orders: within 4 SE. The
    summary fields are the per-question table's means and standard errors."""
    confidence, correctness = _run(2, size=60)
    result = replay_stopping(correctness, cm.unanimity_rule([4, 8, 16]), 300, confidence=confidence, seed=0)
    assert abs(result.mean_difference) <= 4 * result.mean_difference_se
    z = (result.questions["replay_mean"] - result.questions["full_mean"]) / result.questions["replay_se"]
    assert np.nanmax(np.abs(z)) < 5
    assert 0.3 < result.samples_fraction < 1
    brier = result.metrics.set_index("metric").loc["corrected_capability_brier"]
    assert abs(brier.replay_mean - brier.fixed) <= 4 * brier.replay_se + 1e-12
    # the summaries are those of the per-question table (catches one dropped or computed from other values)
    difference = (result.questions["replay_mean"] - result.questions["full_mean"]).to_numpy()
    root_n = math.sqrt(len(difference))
    summaries = {
        "mean_abs_difference": np.abs(difference).mean(),
        "mean_abs_difference_se": np.abs(difference).std(ddof=1) / root_n,
        "mean_difference": difference.mean(),
        "mean_difference_se": difference.std(ddof=1) / root_n,
        "samples_fraction": result.questions["mean_samples"].mean() / 16,
    }
    for name, expected in summaries.items():
        assert isinstance(getattr(result, name), float), name
        assert getattr(result, name) == pytest.approx(expected, rel=1e-12), name
    with pytest.raises(ValueError, match="exceeds the run's k"):
        replay_stopping(correctness, cm.unanimity_rule([8, 32]), 10)


def test_simulation_bias_within_monte_carlo_error_of_fixed_k():
    """200 replications of 200 questions, mu ~ Beta(0.2, 0.2), plan (8, 16, 32, 64). Confidences: a documented
    stand-in for a run's column, 100 draws of Beta(5, 5) (P(True)-like, centred, narrow)."""
    pool = np.random.default_rng(9).beta(5, 5, 100)
    table = simulate_adaptive_metrics(
        "beta(0.2,0.2)", pool, cm.unanimity_rule([8, 16, 32, 64]), n_questions=200, n_replications=200, seed=1
    ).set_index("metric")
    brier = table.loc["corrected_capability_brier"]
    assert abs(brier.bias_adaptive) <= 4 * brier.bias_adaptive_se  # exactly unbiased
    for name, row in table.iterrows():
        gap = abs(row.bias_adaptive - row.bias_fixed)
        assert gap <= 4 * math.hypot(row.bias_adaptive_se, row.bias_fixed_se) + 1e-12, name
        assert row.se_ratio <= 1.25, name
        assert row.noise_sd_ratio > 1, name  # fewer samples: more noise around the true-mu metric
    assert 0.5 < table["samples_saved"].iloc[0] < 0.65
    with pytest.raises(ValueError, match="unknown mu distribution"):
        simulate_adaptive_metrics("normal", pool, cm.unanimity_rule([8, 16]))


@pytest.mark.parametrize("options", [{"n_resamples": 300, "seed": 7}, {}], ids=["seed 7", "defaults"])
def test_single_look_intervals_equal_the_calibration_tables(options: dict[str, int]) -> None:
    """Same seed and resamples: a fixed-k run's intervals are the report's, metric by metric; with no
    options too (catches a default seed, resample count or level other than the report's)."""
    confidence, correctness = _run(5, size=80, k=8)
    k = correctness.shape[1]
    s = correctness.sum(axis=1)
    table = pd.DataFrame(
        {"expected_accuracy": s / k, "n": k, "correctness": list(correctness), "conf": confidence}
    )
    report = calibration_table(table, ["conf"], **options)
    report = report.loc[report["estimator"] == "conf"].set_index("metric")
    ours = adaptive_metric_intervals(confidence, np.full(80, k), s, cm.unanimity_rule([k]), **options)
    for name, interval in ours.items():
        row = report.loc[name]
        np.testing.assert_allclose(
            [interval.estimate, interval.low, interval.high],
            [row.estimate, row.low, row.high],
            rtol=1e-9,
            err_msg=name,
        )


def test_messages_name_the_argument_and_the_defaults_are_the_documented_ones():
    """Mutation triage (tests/README.md): each refusal's message in full, the Beta(0.5, 3) and point-mass
    draws, the replay's default of 200 orders and the simulation's ``replications`` column."""
    plan = cm.unanimity_rule([4, 8])
    with pytest.raises(ValueError, match=r"^k must be a whole number >= 1, got 0$"):
        adaptive_pass_at_k(plan, [4], [0], 0)
    estimates = adaptive_estimates(plan, [4, 8, 8], [0, 3, 5])
    with pytest.raises(ValueError, match=r"^confidence must have one entry per question \(3\), got 2$"):
        metrics_from_estimates([0.5, 0.5], estimates)
    with pytest.raises(ValueError, match=r"^confidence_pool must lie in \[0, 1\]"):
        simulate_adaptive_metrics("beta(0.2,0.2)", [1.5], plan, n_questions=20, n_replications=2)
    with pytest.raises(ValueError, match=r"^n_questions must be an integer >= 2, got 1$"):
        simulate_adaptive_metrics("beta(0.2,0.2)", [0.5], plan, n_questions=1, n_replications=2)
    skewed = draw_mu("beta(0.5,3)", 20_000, np.random.default_rng(0))
    assert abs(skewed.mean() - 1 / 7) < 0.005 and abs(np.median(skewed) - 0.0815) < 0.01
    masses = draw_mu("point-masses", 20_000, np.random.default_rng(0))  # 30% at 0, 30% at 1, 40% U(0, 1)
    inside = masses[(masses > 0) & (masses < 1)]
    assert abs(np.mean(masses == 0.0) - 0.3) < 0.015 and abs(np.mean(masses == 1.0) - 0.3) < 0.015
    assert inside.size + np.sum(masses == 0.0) + np.sum(masses == 1.0) == masses.size
    assert abs(inside.mean() - 0.5) < 0.01 and abs(np.median(inside) - 0.5) < 0.015
    table = simulate_adaptive_metrics("beta(0.2,0.2)", [0.2, 0.8], plan, n_questions=30, n_replications=5)
    assert table["replications"].eq(5).all()
    correctness = (np.random.default_rng(1).uniform(size=(20, 8)) < 0.5).astype(int)
    default = replay_stopping(correctness, plan, seed=3)
    pd.testing.assert_frame_equal(
        default.questions, replay_stopping(correctness, plan, 200, seed=3).questions
    )


def test_intervals_silence_the_undefined_resamples():
    """Resamples of only never-solved questions leave soft AUROC undefined: the bootstrap's warnings are
    silenced (by category) and the intervals still come back."""
    plan = cm.unanimity_rule([4, 8])
    intervals = adaptive_metric_intervals(
        [0.2, 0.5, 0.9, 0.4], [4, 4, 8, 8], [0, 0, 3, 6], plan, n_resamples=200, seed=0
    )
    assert set(intervals) == set(ADAPTIVE_CAPABILITY_METRICS) and math.isfinite(
        intervals["soft_auroc"].estimate
    )


def test_replay_accepts_a_single_question():
    """One question is a valid (questions, k) matrix (a `<= 1` bound would refuse it): one row, the full-k
    mean, and NaN standard errors over questions; an empty matrix is refused."""
    plan = cm.unanimity_rule([4, 8])
    result = replay_stopping([[1, 0, 1, 1, 0, 1, 0, 0]], plan, 50, seed=0)
    assert len(result.questions) == 1 and result.questions["full_mean"].tolist() == [0.5]
    assert math.isnan(result.mean_difference_se) and math.isnan(result.mean_abs_difference_se)
    with pytest.raises(
        ValueError, match=r"^correctness must be a \(questions, k\) matrix, got shape \(0, 8\)$"
    ):
        replay_stopping(np.zeros((0, 8), dtype=int), plan, 50)


def _replayed_draws(
    distribution: str, pool: list[float], plan, n_questions: int, n_replications: int, seed: int
):
    """The simulation's documented draws replayed, per replication: mu, the rank-matched confidences, the
    cumulative successes at looks 2 and 4, and the plan's stopped (n, s)."""
    rng = np.random.default_rng(seed)
    for _ in range(n_replications):
        mu = draw_mu(distribution, n_questions, rng)
        confidence = np.empty(n_questions)
        confidence[np.argsort(mu, kind="stable")] = np.sort(rng.choice(pool, n_questions))
        successes = np.cumsum(rng.binomial([[2, 2]], mu[:, None]), axis=1)
        yield mu, confidence, successes, *stopped_counts(successes, plan)


def test_simulation_averages_only_replications_where_both_runs_define_the_metric():
    """Two questions per replication leave skill and soft AUROC undefined in many replications, not always on
    both sides (the adaptive run's estimates can be all 0 while the fixed run's later samples are not): each
    metric's bias and replication count are over the replications where both errors are defined, as a direct
    replay of the documented draws (mu, rank-matched confidences, binomial increments) computes them."""
    plan, n_questions, n_replications, pool = cm.unanimity_rule([2, 4]), 2, 40, [0.2, 0.8]
    table = simulate_adaptive_metrics(
        "beta(0.5,3)", pool, plan, n_questions=n_questions, n_replications=n_replications, seed=0
    ).set_index("metric")
    errors: dict[str, list[tuple[float, float]]] = {name: [] for name in ADAPTIVE_CAPABILITY_METRICS}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        draws = _replayed_draws("beta(0.5,3)", pool, plan, n_questions, n_replications, seed=0)
        for mu, confidence, successes, n, s in draws:
            adaptive = metrics_from_estimates(confidence, adaptive_estimates(plan, n, s))
            fixed = {
                "capability_brier_skill": cm.corrected_brier_skill_score(confidence, successes[:, -1] / 4, 4),
                "soft_auroc": cm.soft_label_auroc(confidence, successes[:, -1] / 4),
            }
            truth = {
                "capability_brier_skill": cm.brier_skill_score(confidence, mu),
                "soft_auroc": cm.soft_label_auroc(confidence, mu),
            }
            for name in fixed:
                errors[name].append((adaptive[name] - truth[name], fixed[name] - truth[name]))
    for name in ("capability_brier_skill", "soft_auroc"):
        pairs = np.array(errors[name])
        one_sided = np.isnan(pairs[:, 0]) != np.isnan(pairs[:, 1])
        assert one_sided.any(), name  # the case at stake occurs
        both = pairs[~np.isnan(pairs).any(axis=1)]
        assert table.loc[name, "replications"] == len(both), name
        np.testing.assert_allclose(
            [table.loc[name, "bias_adaptive"], table.loc[name, "bias_fixed"]], both.mean(axis=0), rtol=1e-12
        )


def test_simulation_se_ratio_divides_the_adaptive_values_spread_by_the_fixed_ones():
    """``se_ratio`` is the sd over replications of the adaptive run's metric values over the sd of the
    fixed-k run's, as a direct replay of the documented draws computes them (catches the fixed-k values read
    for both sides, which would make every ratio exactly 1)."""
    plan, n_questions, n_replications, pool = cm.unanimity_rule([2, 4]), 6, 20, [0.2, 0.8]
    table = simulate_adaptive_metrics(
        "beta(0.2,0.2)", pool, plan, n_questions=n_questions, n_replications=n_replications, seed=3
    ).set_index("metric")
    adaptive_values, fixed_values = [], []
    for _, confidence, successes, n, s in _replayed_draws(
        "beta(0.2,0.2)", pool, plan, n_questions, n_replications, seed=3
    ):
        with warnings.catch_warnings():  # skill is undefined in some replications; Brier is not
            warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
            adaptive = metrics_from_estimates(confidence, adaptive_estimates(plan, n, s))
        adaptive_values.append(adaptive["corrected_capability_brier"])
        fixed_values.append(cm.corrected_capability_brier_score(confidence, successes[:, -1] / 4, 4))
    expected = np.std(adaptive_values, ddof=1) / np.std(fixed_values, ddof=1)
    assert adaptive_values != fixed_values and abs(expected - 1.0) > 1e-3  # the two runs differ here
    assert table.loc["corrected_capability_brier", "replications"] == n_replications
    assert table.loc["corrected_capability_brier", "se_ratio"] == pytest.approx(expected, rel=1e-12)
