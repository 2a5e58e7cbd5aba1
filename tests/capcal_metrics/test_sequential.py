"""Group-sequential sampling (capcal_metrics.sequential): path counts and estimators against a brute-force
enumeration of every 0/1 sequence, exact unbiasedness on a grid of mu, the known bias of s/n after stopping,
the single-look reductions to the fixed-k formulas, and the exact coverage of the confidence sequence. Every
expectation is a finite sum over the plan's terminal states (no simulation): tolerances are float rounding.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import capcal_metrics as cm

MU_GRID = np.linspace(0.0, 1.0, 201)
PLAN_LOOKS = [(16, 32, 64, 100), (8, 16, 32, 64)]


def _plans(looks: tuple[int, ...]) -> list[cm.SequentialPlan]:
    """The plan's looks under both rules (the width rule stops early on some states, e.g. (16, 0): 0.27)."""
    return [cm.unanimity_rule(looks), cm.confidence_width_rule(looks, width=0.3)]


PLANS = [plan for looks in PLAN_LOOKS for plan in _plans(looks)]
PLAN_IDS = [f"{plan.rule}-{plan.looks}" for plan in PLANS]


def _random_rule(looks: tuple[int, ...], seed: int) -> cm.SequentialPlan:
    """A plan stopping on random (look, s) cells: the recursion must not rely on unanimity's shape."""
    stop = np.random.default_rng(seed).random((len(looks), looks[-1] + 1)) < 0.4
    stop[-1] = True
    return cm.SequentialPlan(looks, stop, "random")


# --- brute force --------------------------------------------------------------------------------------------

BRUTE_FORCE_PLANS = [
    cm.unanimity_rule((2, 4, 6)),
    cm.unanimity_rule((3, 5, 8)),
    cm.confidence_width_rule((3, 5, 8), width=0.95),
    _random_rule((2, 4, 6), seed=1),
    _random_rule((3, 5, 8), seed=2),
]


def _enumerate(plan: cm.SequentialPlan) -> list[tuple[tuple[int, ...], int, int]]:
    """(the drawn prefix, n, s) at the stop for every one of the 2^k_max sequences, by walking the looks."""
    stopped = []
    for sequence in itertools.product((0, 1), repeat=plan.k_max):
        for i, look in enumerate(plan.looks):
            s = sum(sequence[:look])
            if plan.stop[i, s]:
                stopped.append((sequence[:look], look, s))
                break
    return stopped


@pytest.mark.parametrize("plan", BRUTE_FORCE_PLANS, ids=lambda p: f"{p.rule}-{p.looks}")
def test_path_counts_and_estimators_match_the_enumeration_of_every_sequence(plan):
    stopped = _enumerate(plan)
    # each sequence of k_max draws stands for its 2^(k_max - n) continuations: count distinct drawn prefixes
    prefixes = {(prefix, n, s) for prefix, n, s in stopped}
    counts = Counter((n, s) for _, n, s in prefixes)
    n, s = cm.terminal_states(plan)
    assert sorted(counts) == sorted(zip(n.tolist(), s.tolist(), strict=True))
    table = cm.path_counts(plan)
    for (look, successes), count in counts.items():
        assert table[plan.looks.index(look), successes] == count
    assert sum(1 for value in table.ravel() if value) == len(counts)

    for a, b in [(1, 0), (2, 0), (0, 1), (0, 2), (1, 1), (0, plan.looks[0])]:
        with_prefix = Counter(
            (n_, s_)
            for prefix, n_, s_ in prefixes
            if prefix[:a] == (1,) * a and prefix[a : a + b] == (0,) * b
        )
        expected = np.array([with_prefix[state] / counts[state] for state in zip(n, s, strict=True)])
        np.testing.assert_allclose(cm.unbiased_moment(plan, n, s, a, b), expected, rtol=0, atol=1e-15)

    for mu in (0.0, 0.2, 0.5, 0.93, 1.0):
        brute = Counter()
        for prefix, n_, s_ in prefixes:
            brute[(n_, s_)] += mu ** sum(prefix) * (1 - mu) ** (n_ - sum(prefix))
        expected = np.array([brute[state] for state in zip(n, s, strict=True)])
        probabilities = cm.terminal_probabilities(plan, [mu])[0]
        np.testing.assert_allclose(probabilities, expected, rtol=1e-12, atol=1e-15)
        assert probabilities.sum() == pytest.approx(1.0, abs=1e-12)


# --- exact unbiasedness -------------------------------------------------------------------------------------


@pytest.mark.parametrize("plan", PLANS, ids=PLAN_IDS)
def test_path_count_estimates_are_unbiased_on_a_fine_grid_of_mu(plan):
    n, s = cm.terminal_states(plan)
    assert n.min() < plan.k_max  # the plan does stop early somewhere
    l_1 = plan.looks[0]
    targets = {
        "mu": (cm.unbiased_mean(plan, n, s), MU_GRID),
        "mu^2": (cm.unbiased_mean_square(plan, n, s), MU_GRID**2),
        "mu(1-mu)": (cm.unbiased_moment(plan, n, s, 1, 1), MU_GRID * (1 - MU_GRID)),
        "(1-mu)^3": (cm.unbiased_moment(plan, n, s, 0, 3), (1 - MU_GRID) ** 3),
        "(1-mu)^l_1": (cm.unbiased_moment(plan, n, s, 0, l_1), (1 - MU_GRID) ** l_1),
    }
    for k in (1, 4, l_1):
        targets[f"pass@{k}"] = (cm.unbiased_pass_at_k(plan, n, s, k), 1 - (1 - MU_GRID) ** k)
    for name, (estimates, target) in targets.items():
        mean = cm.operating_characteristics(plan, MU_GRID, estimates).mean
        np.testing.assert_allclose(mean, target, rtol=0, atol=1e-9, err_msg=name)


def test_unbiased_at_k_max_1000_where_counts_overflow_float64():
    """C(1000, 500) ~ 2.7e299 and path counts reach 2^1000 ~ 1e301: exact ints keep the ratios exact."""
    plan = cm.unanimity_rule((16, 64, 256, 1000))
    n, s = cm.terminal_states(plan)
    assert max(cm.path_counts(plan).ravel()) > 2**990
    mu = np.linspace(0.0, 1.0, 41)
    for estimates, target in [
        (cm.unbiased_mean(plan, n, s), mu),
        (cm.unbiased_mean_square(plan, n, s), mu**2),
        (cm.unbiased_pass_at_k(plan, n, s, 16), 1 - (1 - mu) ** 16),
    ]:
        np.testing.assert_allclose(cm.operating_characteristics(plan, mu, estimates).mean, target, atol=1e-9)


def test_sample_proportion_bias_is_the_closed_form_for_the_16_then_100_plan():
    """E[s/n] - mu = (1 - 16/100) [mu^16 (1 - mu) - mu (1 - mu)^16] for "stop at 16 if unanimous, else 100":
    E[s/n] = mu^16 + E[s_100 / 100; not unanimous at 16] with E[s_100; all 16 correct] = mu^16 (16 + 84 mu)
    and E[s_100; none correct] = (1 - mu)^16 84 mu. The constant is exactly 0.84; the bias is -0.018731 at
    mu = 0.0588 (s/n too low: a rare success is diluted by the 84 extra draws) and +0.018731 at 0.9412."""
    plan = cm.unanimity_rule((16, 100))
    n, s = cm.terminal_states(plan)
    mu = np.linspace(0.0, 1.0, 10001)
    bias = cm.operating_characteristics(plan, mu, cm.sample_proportion(plan, n, s)).mean - mu
    np.testing.assert_allclose(bias, 0.84 * (mu**16 * (1 - mu) - mu * (1 - mu) ** 16), rtol=0, atol=1e-12)
    assert np.max(bias) == pytest.approx(0.018731, abs=1e-6)
    assert mu[np.argmax(bias)] == pytest.approx(0.9412, abs=1e-4)
    assert np.min(bias) == pytest.approx(-np.max(bias), abs=1e-12)
    unbiased = cm.operating_characteristics(plan, mu, cm.unbiased_mean(plan, n, s)).mean - mu
    assert np.max(np.abs(unbiased)) < 1e-12


# --- one look is fixed k ------------------------------------------------------------------------------------


@pytest.mark.parametrize("k_fixed", [1, 2, 20, 1000])
def test_a_single_look_gives_the_fixed_k_estimators(k_fixed):
    plan = cm.unanimity_rule((k_fixed,))
    n, s = cm.terminal_states(plan)
    np.testing.assert_array_equal(s, np.arange(k_fixed + 1))
    np.testing.assert_allclose(cm.unbiased_mean(plan, n, s), s / n, rtol=1e-15, atol=0)
    np.testing.assert_array_equal(cm.sample_proportion(plan, n, s), s / n)
    if k_fixed >= 2:
        expected = s * (s - 1) / (n * (n - 1))
        np.testing.assert_allclose(cm.unbiased_mean_square(plan, n, s), expected, rtol=1e-15, atol=0)
    for k in sorted({1, 2, k_fixed // 2, k_fixed} - {0}):
        if k <= k_fixed:
            np.testing.assert_allclose(
                cm.unbiased_pass_at_k(plan, n, s, k), cm.pass_at_k(n, s, k), rtol=1e-12, atol=1e-15
            )


# --- confidence sequence ------------------------------------------------------------------------------------


@pytest.mark.parametrize("plan", [*PLANS, cm.unanimity_rule((16, 100))], ids=[*PLAN_IDS, "unanimity-16-100"])
def test_confidence_sequence_covers_mu_after_stopping_and_holds_the_estimates(plan):
    coverage = cm.confidence_sequence_coverage(plan, MU_GRID, alpha=0.05)
    assert np.all(coverage >= 0.95), MU_GRID[coverage < 0.95]
    n, s = cm.terminal_states(plan)
    bounds = cm.confidence_sequence(n, s)
    for estimate in (cm.unbiased_mean(plan, n, s), s / n):
        assert np.all((bounds.lower <= estimate) & (estimate <= bounds.upper))


def test_confidence_sequence_holds_at_every_n_simultaneously():
    """P(exists n <= 300: mu outside the interval at n) <= alpha, exactly: forward recursion over (n, s) of
    the probability of never having left the interval (Ville's inequality for the mixture martingale)."""
    n_max = 300
    outside = []
    for n in range(1, n_max + 1):
        bounds = cm.confidence_sequence(np.full(n + 1, n), np.arange(n + 1))
        outside.append((bounds.lower, bounds.upper))
    for mu in (0.01, 0.1, 0.3, 0.5, 0.8, 0.97):
        alive = np.array([1.0])  # P(s successes after n draws, mu inside at every n' <= n)
        for n in range(1, n_max + 1):
            alive = np.concatenate([alive * (1 - mu), [0.0]]) + np.concatenate([[0.0], alive * mu])
            lower, upper = outside[n - 1]
            alive = np.where((lower <= mu) & (mu <= upper), alive, 0.0)
        assert 1.0 - alive.sum() <= 0.05, mu


@pytest.mark.parametrize(("n", "s"), [(16, 0), (16, 5), (32, 32), (64, 20), (100, 50), (100, 97)])
def test_confidence_sequence_is_wider_than_clopper_pearson_at_a_fixed_n(n, s):
    """Anytime validity costs width: the interval at one n contains the exact fixed-n (Clopper-Pearson)."""
    bounds = cm.confidence_sequence([n], [s], alpha=0.05)
    exact = stats.binomtest(s, n).proportion_ci(confidence_level=0.95, method="exact")
    assert bounds.lower[0] <= exact.low and exact.high <= bounds.upper[0]
    assert bounds.upper[0] - bounds.lower[0] > exact.high - exact.low + 0.01


def test_confidence_sequence_ends_solve_the_boundary_equation_to_the_tolerance():
    """At each end the mixture ratio B(s + a0, n - s + a0) / B(a0, a0) / (mu^s (1 - mu)^(n - s)) = 1/alpha."""
    n, s, a0 = np.array([16, 100, 64]), np.array([3, 50, 63]), 0.5
    bounds = cm.confidence_sequence(n, s, alpha=0.1, prior=a0, tolerance=1e-12)

    def log_ratio(mu):
        log_beta = [
            math.lgamma(x + a0) + math.lgamma(y + a0) - math.lgamma(x + y + 2 * a0)
            for x, y in zip(s, n - s, strict=True)
        ]
        return (
            np.array(log_beta)
            - 2 * math.lgamma(a0)
            + math.lgamma(2 * a0)
            - s * np.log(mu)
            - (n - s) * np.log1p(-mu)
        )

    for end in bounds:
        np.testing.assert_allclose(log_ratio(end), math.log(10.0), atol=1e-8)
        assert np.all(log_ratio(end) >= math.log(10.0))  # rounded outward: the ends lie just outside the set
    assert np.all(log_ratio(bounds.lower + 1e-9) < math.log(10.0))
    assert np.all(log_ratio(bounds.upper - 1e-9) < math.log(10.0))


def test_unanimous_intervals_at_16():
    """Jeffreys' mixing prior (the default) gives the tighter interval where adaptive runs stop: 0 of 16."""
    jeffreys = cm.confidence_sequence([16, 16], [0, 16])
    uniform = cm.confidence_sequence([16], [0], prior=1.0)
    assert jeffreys.lower[0] == 0.0 and jeffreys.upper[1] == 1.0
    assert jeffreys.upper[0] == pytest.approx(0.26665, abs=1e-5)
    assert jeffreys.lower[1] == pytest.approx(1 - jeffreys.upper[0], abs=1e-12)
    assert uniform.upper[0] == pytest.approx(0.30532, abs=1e-5)


def test_confidence_width_rule_stops_exactly_where_the_interval_is_narrow():
    plan = cm.confidence_width_rule((16, 32, 64, 100), width=0.3)
    for i, look in enumerate(plan.looks[:-1]):
        bounds = cm.confidence_sequence(np.full(look + 1, look), np.arange(look + 1))
        np.testing.assert_array_equal(plan.stop[i, : look + 1], bounds.upper - bounds.lower < 0.3)
    assert plan.stop[0, 0] and not plan.stop[0, 8] and plan.stop[-1].all()


# --- variance and the Brier score under stopping ------------------------------------------------------------


@pytest.mark.parametrize("looks", PLAN_LOOKS, ids=str)
def test_variance_after_stopping_respects_the_sequential_cramer_rao_bound(looks):
    """Var(unbiased mean) >= mu (1 - mu) / E[n] (Wolfowitz 1947's sequential Cramer-Rao bound). Under the
    unanimity rule the standard deviation over that at fixed k_max, for the lead's table:
    (16, 32, 64, 100) at mu = 0.02, 0.05, 0.1, 0.3, 0.5: SD ratio 2.33, 2.09, 1.73, 1.05, 1.00;
    (8, 16, 32, 64): 2.74, 2.59, 2.36, 1.54, 1.18 (symmetric in mu <-> 1 - mu). A question rarely solved
    mostly stops at l_1 with the estimate 0, and the rare non-unanimous start carries the whole mean."""
    plan = cm.unanimity_rule(looks)
    n, s = cm.terminal_states(plan)
    mu = MU_GRID[1:-1]
    oc = cm.operating_characteristics(plan, mu, cm.unbiased_mean(plan, n, s))
    assert np.all(np.isfinite(oc.variance))
    assert np.all(oc.variance >= mu * (1 - mu) / oc.expected_samples - 1e-12)
    assert np.all(oc.expected_samples <= plan.k_max) and np.all(oc.expected_samples >= looks[0])
    ratio = np.sqrt(oc.variance / (mu * (1 - mu) / plan.k_max))
    expected = {
        (16, 32, 64, 100): [2.33, 2.09, 1.73, 1.05, 1.00],
        (8, 16, 32, 64): [2.74, 2.59, 2.36, 1.54, 1.18],
    }
    at = [np.argmin(np.abs(mu - m)) for m in (0.02, 0.05, 0.1, 0.3, 0.5)]
    np.testing.assert_allclose(ratio[at], expected[looks], atol=0.006)


def test_brier_from_moments_with_fixed_k_estimates_is_the_corrected_capability_brier():
    rng = np.random.default_rng(3)
    n = rng.integers(2, 40, 300)
    s = rng.binomial(n, rng.beta(0.5, 0.5, 300))
    confidence = rng.random(300)
    from_moments = cm.capability_brier_from_moments(confidence, s / n, s * (s - 1) / (n * (n - 1)))
    assert from_moments == pytest.approx(cm.corrected_capability_brier_score(confidence, s / n, n), abs=1e-14)


@pytest.mark.parametrize("confidence", [0.0, 0.07, 0.5, 0.9])
def test_brier_from_moments_is_unbiased_after_stopping_and_plain_brier_is_not(confidence):
    """E[c^2 - 2 c mu_hat + mu2_hat] = (c - mu)^2 exactly under the unanimity plan; (c - s/n)^2 misses by its
    noise and stopping bias."""
    plan = cm.unanimity_rule((16, 32, 64, 100))
    n, s = cm.terminal_states(plan)
    mu_hat, mu_square_hat = cm.unbiased_mean(plan, n, s), cm.unbiased_mean_square(plan, n, s)
    per_state = np.array(
        [
            cm.capability_brier_from_moments([confidence], [m], [q])
            for m, q in zip(mu_hat, mu_square_hat, strict=True)
        ]
    )
    mu = np.linspace(0.0, 1.0, 101)
    probabilities = cm.terminal_probabilities(plan, mu)
    np.testing.assert_allclose(probabilities @ per_state, (confidence - mu) ** 2, atol=1e-9)
    plain = probabilities @ (confidence - s / n) ** 2 - (confidence - mu) ** 2
    assert np.max(np.abs(plain)) > 1e-3


# --- errors -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: cm.unanimity_rule((16, 16, 32)), "looks must be strictly increasing"),
        (lambda: cm.unanimity_rule((32, 16)), "looks must be strictly increasing"),
        (lambda: cm.unanimity_rule((0, 16)), "looks must be >= 1"),
        (lambda: cm.unanimity_rule(()), "looks is empty"),
        (lambda: cm.unanimity_rule((2.5, 4)), "looks must contain whole numbers"),
        (lambda: cm.confidence_width_rule((4, 8), width=0.0), "width must be in"),
        (lambda: cm.SequentialPlan((2, 4), np.zeros((2, 5), bool), "x"), "stop must stop at the last look"),
        (lambda: cm.SequentialPlan((2, 4), np.ones((2, 4), bool), "x"), r"stop must have shape .* \(2, 5\)"),
        (
            lambda: cm.unbiased_pass_at_k(cm.unanimity_rule((4, 8)), [8], [3], 5),
            "k=5 exceeds the first look l_1=4",
        ),
        (
            lambda: cm.unbiased_moment(cm.unanimity_rule((4, 8)), [8], [3], 3, 2),
            "exceeds the first look l_1 = 4",
        ),
        (lambda: cm.path_counts(cm.unanimity_rule((4, 8)), 2, 3), "exceeds the first look l_1 = 4"),
        (lambda: cm.unbiased_mean_square(cm.unanimity_rule((1, 8)), [8], [3]), "l_1 >= 2, the plan's is 1"),
        (lambda: cm.unbiased_mean(cm.unanimity_rule((4, 8)), [8], [9]), "n_correct must be <= n_samples"),
        (
            lambda: cm.unbiased_mean(cm.unanimity_rule((4, 8)), [6], [3]),
            r"one of the plan's looks \(4, 8\); found 6",
        ),
        (
            lambda: cm.unbiased_mean(cm.unanimity_rule((4, 8)), [4, 4], [0, 2]),
            r"\(4, 2\) is not a terminal state",
        ),
        (lambda: cm.unbiased_mean(cm.unanimity_rule((4, 8)), [8], [0]), r"\(8, 0\) is not a terminal state"),
        (lambda: cm.unbiased_mean((4, 8), [8], [3]), "plan must be a SequentialPlan"),
        (lambda: cm.confidence_sequence([10], [3], prior=0.0), "prior must be a finite number > 0"),
        (lambda: cm.confidence_sequence([10], [3], alpha=1.0), "alpha must be in"),
        (
            lambda: cm.operating_characteristics(cm.unanimity_rule((2, 4)), [0.5], [0.5, 0.5]),
            "estimates must have",
        ),
    ],
)
def test_bad_input_is_one_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (([0], [0]), r"^n_samples must be >= 1; found 0$"),
        (([5], [-1]), r"^n_correct must be >= 0; found -1$"),
        (([5, 6, 7], [1, 2]), r"^n_samples and n_correct must have the same shape, got \(3,\) and \(2,\)$"),
        (([5, 6], [6, 2]), r"^n_correct must be <= n_samples for every question$"),
        (([5], [2], 0.05, 0.5, 1.0), r"^tolerance must be in \(0, 1\), got 1\.0$"),
        (([5], [2], 0.05, "half"), r"^prior must be a number > 0, got 'half'$"),
    ],
)
def test_confidence_sequence_messages_name_the_argument(arguments, message):
    with pytest.raises(ValueError, match=message):
        cm.confidence_sequence(*arguments)


def test_confidence_sequence_of_no_questions_is_empty():
    bounds = cm.confidence_sequence(np.zeros(0, dtype=int), np.zeros(0, dtype=int))
    assert bounds.lower.shape == (0,) and bounds.upper.shape == (0,)


def _bisection_ends(n: int, s: int, alpha: float, prior: float, tolerance: float) -> tuple[float, float]:
    """The documented construction for one question, by scalar loops: ceil(log2(1/tolerance)) halvings of
    [0, s/n] and [s/n, 1], keeping the end outside the set {mu : -log L(mu) < log(1/alpha) - log B(s + a0,
    n - s + a0) + log B(a0, a0)}; 0 when s = 0 and 1 when s = n."""

    def log_beta(a: float, b: float) -> float:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)

    threshold = math.log(1 / alpha) - log_beta(s + prior, n - s + prior) + log_beta(prior, prior)

    def inside(mu: float) -> bool:
        log_likelihood = (s * math.log(mu) if s else 0.0) + ((n - s) * math.log(1 - mu) if n - s else 0.0)
        return -log_likelihood < threshold

    lower_out, lower_in, upper_in, upper_out = 0.0, s / n, s / n, 1.0
    for _ in range(math.ceil(math.log2(1 / tolerance))):
        middle = (lower_out + lower_in) / 2
        lower_in, lower_out = (middle, lower_out) if inside(middle) else (lower_in, middle)
        middle = (upper_in + upper_out) / 2
        upper_in, upper_out = (middle, upper_out) if inside(middle) else (upper_in, middle)
    return (0.0 if s == 0 else lower_out), (1.0 if s == n else upper_out)


@pytest.mark.parametrize("tolerance", [2.0**-5, 0.03, 1e-12])
def test_confidence_sequence_is_the_documented_bisection(tolerance):
    # a coarse tolerance shows the number of halvings: one more or one fewer moves the ends
    n = np.array([1, 4, 16, 16, 33, 100, 100, 40])
    s = np.array([0, 2, 0, 16, 7, 50, 99, 1])
    bounds = cm.confidence_sequence(n, s, alpha=0.1, prior=0.7, tolerance=tolerance)
    expected = [_bisection_ends(int(a), int(b), 0.1, 0.7, tolerance) for a, b in zip(n, s, strict=True)]
    np.testing.assert_allclose(bounds.lower, [low for low, _ in expected], rtol=0, atol=1e-15)
    np.testing.assert_allclose(bounds.upper, [high for _, high in expected], rtol=0, atol=1e-15)


def test_confidence_width_rule_width_one_and_a_width_met_exactly():
    """width is in (0, 1]: width 1 stops wherever the interval is narrower than the whole unit interval; an
    interval exactly as wide as ``width`` is not narrower, so it does not stop. The rule is named for the
    records."""
    everywhere = cm.confidence_width_rule((4, 8), width=1.0)
    bounds = cm.confidence_sequence(np.full(5, 4), np.arange(5))
    np.testing.assert_array_equal(everywhere.stop[0, :5], bounds.upper - bounds.lower < 1.0)
    assert everywhere.rule == "confidence width < 1 (alpha 0.05)"
    exact = float(bounds.upper[2] - bounds.lower[2])
    plan = cm.confidence_width_rule((4, 8), width=exact, alpha=0.05)
    assert not plan.stop[0, 2]
    assert plan.stop[0, 2] == (bounds.upper[2] - bounds.lower[2] < exact)
    assert (
        cm.confidence_width_rule((16, 32), width=0.3, alpha=0.1).rule == "confidence width < 0.3 (alpha 0.1)"
    )


@pytest.mark.parametrize("looks", [(2, 4), (4, 8, 16)], ids=str)
def test_confidence_sequence_coverage_is_the_sum_over_terminal_states(looks):
    plan = cm.unanimity_rule(looks)
    mu = np.array([0.0, 0.02, 0.1, 0.35, 0.5, 0.9, 0.99, 1.0])
    n, s = cm.terminal_states(plan)
    bounds = cm.confidence_sequence(n, s, alpha=0.2)
    probabilities = cm.terminal_probabilities(plan, mu)
    expected = [
        sum(probabilities[i, j] for j in range(len(n)) if bounds.lower[j] <= mu[i] <= bounds.upper[j])
        for i in range(len(mu))
    ]
    coverage = cm.confidence_sequence_coverage(plan, mu, alpha=0.2)
    assert coverage.shape == mu.shape
    np.testing.assert_allclose(coverage, expected, rtol=0, atol=1e-12)
    assert min(expected) < 0.999  # some mu is missed with positive probability: the test can see a miss


def test_operating_characteristics_return_the_grid_and_pass_at_k_states_its_limit():
    plan = cm.unanimity_rule((2, 4))
    mu = [0.0, 0.25, 1.0]
    states = cm.terminal_states(plan)
    result = cm.operating_characteristics(plan, mu, cm.unbiased_mean(plan, *states))
    np.testing.assert_array_equal(result.mu, mu)
    np.testing.assert_allclose(result.mean, mu, rtol=0, atol=1e-12)  # unbiased
    message = r"^k=3 exceeds the first look l_1=2: pass@k is unbiased after stopping only for k <= l_1$"
    with pytest.raises(ValueError, match=message):
        cm.unbiased_pass_at_k(plan, [4], [1], 3)


def test_a_plan_stores_its_looks_as_ints_and_a_read_only_boolean_table():
    stop = [[0, 1, 0, 1, 0], [1, 1, 1, 1, 1]]  # 0/1 ints, not bools
    plan = cm.SequentialPlan(np.array([2, 4]), stop, "custom")
    assert plan.looks == (2, 4) and all(type(look) is int for look in plan.looks)
    assert plan.stop.dtype == np.bool_
    np.testing.assert_array_equal(plan.stop, np.array(stop, dtype=bool))
    assert not plan.stop.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        plan.stop[0, 0] = True
    assert cm.unanimity_rule((1, 2)).rule == "unanimity"  # consecutive looks are strictly increasing
    assert cm.unanimity_rule((1, 2)).looks == (1, 2)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: cm.SequentialPlan((2, 4, 8), np.ones((3, 5), bool), "x"),
            r"^stop must have shape \(number of looks, k_max \+ 1\) = \(3, 9\), got \(3, 5\)$",
        ),
        (
            lambda: cm.SequentialPlan((2, 4), np.zeros((2, 5), bool), "x"),
            r"^stop must stop at the last look for every number of successes \(its last row\)$",
        ),
        (
            lambda: cm.path_counts(cm.unanimity_rule((4, 8)), 3, 2),
            r"^first_successes \+ first_failures = 5 exceeds the first look l_1 = 4: only the draws made "
            r"before any stopping decision have unbiased estimates$",
        ),
        (
            lambda: cm.unbiased_moment(cm.unanimity_rule((4, 8)), [8], [3], 2, 3),
            r"^successes \+ failures = 5 exceeds the first look l_1 = 4: no unbiased estimate of mu\^a "
            r"\(1 - mu\)\^b exists past the draws made before any stopping decision$",
        ),
    ],
)
def test_plan_and_moment_messages_in_full(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_path_counts_are_exact_python_ints_beyond_float_range():
    # C(1100, 550) ~ 1e329 exceeds float64 and int64: the counts stay exact Python ints
    counts = cm.path_counts(cm.unanimity_rule((4, 1100)))
    assert counts.dtype == object and counts.shape == (2, 1101)
    assert all(type(value) is int for value in counts.ravel())
    assert counts[0, 0] == 1 and counts[0, 4] == 1 and counts[0, 2] == 0
    # reach (4, s') for s' = 1..3, then 1096 more draws: sum_s' C(4, s') C(1096, 550 - s')
    assert counts[1, 550] == sum(math.comb(4, t) * math.comb(1096, 550 - t) for t in (1, 2, 3))


def test_a_mu_whose_ratio_is_exactly_one_over_alpha_is_outside_the_set():
    """The set is ``ratio < 1/alpha``, strict. For n = 3, s = 0, prior 1 the log ratio at mu = 1/2 is
    3 log 2 - log 4 = log 2; an alpha among the floats next to 1/2 makes the computed threshold equal the
    computed -log L(1/2) exactly (searched here, in the library's order of operations). The first upper
    midpoint is 1/2, judged outside, so the upper end is exactly 1/2; with ``<=`` it would lie above."""
    n, log_l = np.array([3]), 3 * math.log(0.5)
    log_beta_prior = math.lgamma(1.0) + math.lgamma(4.0) - math.lgamma(5.0)  # log B(1, 4) = -log 4
    alpha = 0.5
    for _ in range(3000):
        if math.log(1.0 / alpha) - log_beta_prior + 0.0 == -log_l:
            break
        alpha = math.nextafter(alpha, 0.0 if math.log(1.0 / alpha) - log_beta_prior < -log_l else 1.0)
    else:
        pytest.skip("no float alpha gives an exact tie on this platform")
    assert cm.confidence_sequence(n, [0], alpha=alpha, prior=1.0).upper[0] == 0.5


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (([0], [0]), r"^n_samples must be >= 1; found 0$"),
        (([8], [-1]), r"^n_correct must be >= 0; found -1$"),
        (([8, 8, 4], [1, 2]), r"^n_samples and n_correct must have the same shape, got \(3,\) and \(2,\)$"),
        (([8], [9]), r"^n_correct must be <= n_samples for every question$"),
        (([9], [3]), r"^n_samples must be one of the plan's looks \(4, 8\); found 9$"),
    ],
)
def test_terminal_state_messages_name_the_argument(arguments, message):
    with pytest.raises(ValueError, match=message):
        cm.unbiased_mean(cm.unanimity_rule((4, 8)), *arguments)


def test_estimates_keep_the_shape_of_the_states_and_mu_zero_or_one_warns_nothing():
    import warnings

    plan = cm.unanimity_rule((4, 8))
    n, s = np.array([[4, 8], [8, 4]]), np.array([[0, 3], [5, 4]])
    mean = cm.unbiased_mean(plan, n, s)
    assert mean.shape == (2, 2)
    one_by_one = [
        [cm.unbiased_mean(plan, [a], [b])[0] for a, b in zip(*row, strict=True)]
        for row in zip(n, s, strict=True)
    ]
    np.testing.assert_array_equal(mean, one_by_one)
    assert cm.unbiased_mean(plan, 8, 3).shape == ()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 0 log 0 is 0, without a numpy RuntimeWarning
        probabilities = cm.terminal_probabilities(plan, [0.0, 1.0])
    states = cm.terminal_states(plan)
    np.testing.assert_array_equal(probabilities[0], (states[1] == 0).astype(float))
    np.testing.assert_array_equal(probabilities[1], (states[1] == states[0]).astype(float))


# --- estimates given a prefix (the leakage-free target after stopping) -----------------------------------


@pytest.mark.parametrize("plan", BRUTE_FORCE_PLANS, ids=lambda p: f"{p.rule}-{p.looks}")
def test_moment_given_a_prefix_is_the_enumerated_conditional_probability(plan):
    """P(the a draws after the prefix are 1, the next b 0 | the first p draws, n, s), counted over every
    sequence, for every prefix pattern: it depends on the pattern only through its successes s_p."""
    prefixes = {(prefix, n, s) for prefix, n, s in _enumerate(plan)}
    l_1 = plan.looks[0]
    checked = 0
    for p in range(l_1):
        for a, b in [(1, 0), (2, 0), (0, 1), (1, 1)]:
            if p + a + b > l_1:
                continue
            for pattern in itertools.product((0, 1), repeat=p):
                starting = [(drawn, n, s) for drawn, n, s in prefixes if drawn[:p] == pattern]
                given = Counter((n, s) for _, n, s in starting)
                hits = Counter(
                    (n, s) for drawn, n, s in starting if drawn[p : p + a + b] == (1,) * a + (0,) * b
                )
                states = sorted(given)
                n = np.array([state[0] for state in states])
                s = np.array([state[1] for state in states])
                got = cm.unbiased_moment_given_prefix(plan, n, s, p, sum(pattern), a, b)
                expected = [hits[state] / given[state] for state in states]
                np.testing.assert_allclose(got, expected, rtol=0, atol=1e-15)
                checked += len(states)
    assert checked > 20


@pytest.mark.parametrize("plan", PLANS, ids=PLAN_IDS)
def test_moments_given_a_prefix_are_unbiased_given_it_on_a_fine_grid_of_mu(plan):
    """E[estimate | prefix] = mu and mu^2 exactly: the sum over the terminal states reachable from the prefix,
    P(n, s | prefix; mu) = N_{s_p, p - s_p}(n, s) mu^(s - s_p) (1 - mu)^(n - s - p + s_p)."""
    n, s = cm.terminal_states(plan)
    index = np.searchsorted(plan.looks, n)
    m = MU_GRID[:, None]
    for p in (0, plan.looks[0] // 2, plan.looks[0] - 2):
        for s_p in sorted({0, p // 3, p}):
            counts = cm.path_counts(plan, s_p, p - s_p)[index, s]
            reachable = np.array([count != 0 for count in counts])
            nr, sr = n[reachable], s[reachable]
            log_counts = np.array([math.log(count) for count in counts[reachable]])
            with np.errstate(divide="ignore", invalid="ignore"):
                weights = np.exp(
                    log_counts
                    + np.where(sr - s_p == 0, 0.0, (sr - s_p) * np.log(m))
                    + np.where(nr - sr - p + s_p == 0, 0.0, (nr - sr - p + s_p) * np.log(1 - m))
                )
            np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-12)
            for (a, b), target in [
                ((1, 0), MU_GRID),
                ((2, 0), MU_GRID**2),
                ((1, 1), MU_GRID * (1 - MU_GRID)),
            ]:
                estimate = cm.unbiased_moment_given_prefix(plan, nr, sr, p, s_p, a, b)
                np.testing.assert_allclose(
                    weights @ estimate, target, rtol=0, atol=1e-9, err_msg=f"{p} {s_p}"
                )


def test_an_empty_prefix_gives_the_unconditional_moments_and_a_single_look_the_rest_of_the_samples():
    plan = cm.unanimity_rule((8, 16, 32, 64))
    n, s = cm.terminal_states(plan)
    for a, b in [(1, 0), (2, 0), (0, 3)]:
        np.testing.assert_array_equal(
            cm.unbiased_moment_given_prefix(plan, n, s, 0, 0, a, b), cm.unbiased_moment(plan, n, s, a, b)
        )
    # at a single look the target is the plain share of the samples outside the prefix
    single = cm.unanimity_rule((20,))
    s20 = np.arange(4, 17)
    got = cm.unbiased_moment_given_prefix(single, np.full(s20.size, 20), s20, 5, 3)
    np.testing.assert_allclose(got, (s20 - 3) / 15, rtol=0, atol=1e-15)
    got = cm.unbiased_moment_given_prefix(single, np.full(s20.size, 20), s20, 5, 3, 2)
    np.testing.assert_allclose(got, (s20 - 3) * (s20 - 4) / (15 * 14), rtol=0, atol=1e-15)
    # unanimity: a mixed prefix never stops early, so the estimate is the share of the 64 - p other samples
    got = cm.unbiased_moment_given_prefix(plan, [64, 64], [10, 40], 5, [2, 4])
    np.testing.assert_allclose(got, [8 / 59, 36 / 59], rtol=0, atol=1e-15)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ([8], [0], 7, 0, 2, 0),
            r"^prefix_size \+ successes \+ failures = 9 exceeds the first look l_1 = 8: only the draws made "
            r"before any stopping decision have unbiased estimates$",
        ),
        (([8], [0], 6, 0, 1, 2), r"^prefix_size \+ successes \+ failures = 9 exceeds the first look l_1 = 8"),
        (
            ([8], [0], 3, 1, 1, 0),
            r"^prefix_successes must lie in \[0, prefix_size = 3\] and within each question's successes and "
            r"failures \(n_correct and n_samples - n_correct\)$",
        ),
        (([64], [5], 3, 4, 1, 0), r"^prefix_successes must lie in \[0, prefix_size = 3\]"),
        (([64], [62], 6, 3, 1, 0), r"^prefix_successes must lie in"),
        (
            ([64, 64], [5, 6], 3, [1, 1, 1], 1, 0),
            r"^prefix_successes must have the shape of n_correct \(2,\), got \(3,\)$",
        ),
        (([64, 64], [5, 6], 3, [1, 0.5], 1, 0), r"^prefix_successes must contain whole numbers$"),
        (([8], [0], -1, 0, 1, 0), r"^prefix_size must be a non-negative integer"),
        (([8], [0], 1, 0, 1, -1), r"^failures must be a non-negative integer"),
    ],
)
def test_moment_given_a_prefix_messages(arguments, message):
    plan = cm.unanimity_rule((8, 16, 32, 64))
    n, s, p, s_p, a, b = arguments
    with pytest.raises(ValueError, match=message):
        cm.unbiased_moment_given_prefix(plan, n, s, p, s_p, a, b)


def test_a_prefix_that_cannot_reach_the_stop_is_refused():
    stop = np.zeros((2, 5), dtype=bool)
    stop[0, 1] = True  # at 2 draws, stop on exactly one success
    stop[1] = True
    plan = cm.SequentialPlan((2, 4), stop, "one success at 2")
    # (4, 1) is reached only through (0, 0) at 2 draws: no path through it starts with a success
    with pytest.raises(ValueError, match=r"^a prefix of 1 draws with 1 successes cannot end in a stop"):
        cm.unbiased_moment_given_prefix(plan, [4], [1], 1, 1)


def test_confidence_sequence_lowest_coverage_and_the_table():
    """docs/methods.md's figures of the confidence sequence, recomputed: its lowest coverage over every mu
    (20,001 points, then 2,001 within 1e-4 of the lowest; the 201-point grid missed it: 0.98808 there) is
    0.98795 for looks (8, 16, 32, 64) under the unanimity rule, so the docs say "at least 0.9879", not
    0.988; the E[n] and CS-coverage rows of the docs' table are these exact sums, to the digits shown (E[n]
    26.85 at mu = 0.05 is 26.8, not 26.9)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "methods.md").read_text()
    assert "covers mu with probability at least 0.9879 at every mu" in text
    lowest = {}
    for looks in PLAN_LOOKS:
        plan = cm.unanimity_rule(looks)
        grid = np.linspace(0.0, 1.0, 20_001)
        coverage = cm.confidence_sequence_coverage(plan, grid)
        centre = grid[np.argmin(coverage)]
        fine = np.linspace(max(centre - 1e-4, 0.0), min(centre + 1e-4, 1.0), 2_001)
        lowest[looks] = min(coverage.min(), cm.confidence_sequence_coverage(plan, fine).min())
    assert 0.9879 <= lowest[(8, 16, 32, 64)] < 0.9880
    assert round(lowest[(8, 16, 32, 64)], 5) == 0.98795
    assert cm.confidence_sequence_coverage(cm.unanimity_rule((8, 16, 32, 64)), MU_GRID).min() > 0.988
    assert 0.9919 <= lowest[(16, 32, 64, 100)] < 0.9921
    mu = np.array([0.0, 0.02, 0.05, 0.1, 0.3, 0.5])
    rows = {}
    for line in text.splitlines():
        for looks in PLAN_LOOKS:
            if line.startswith(f"| {looks} | E[n] |"):
                rows[looks] = [float(value) for value in line.split("|")[3:9]]
    assert set(rows) == set(PLAN_LOOKS)
    for looks, shown in rows.items():
        plan = cm.unanimity_rule(looks)
        n, _ = cm.terminal_states(plan)
        for centre in (mu, 1.0 - mu):  # the columns are mu / 1 - mu
            expected = cm.terminal_probabilities(plan, centre) @ n
            np.testing.assert_array_less(np.abs(np.array(shown) - expected), 0.05 + 1e-9)
    coverage_rows = [line for line in text.splitlines() if line.startswith("| | CS coverage |")]
    assert len(coverage_rows) == 2
    for looks, line in zip(PLAN_LOOKS, coverage_rows, strict=True):
        shown = np.array([float(value) for value in line.split("|")[3:9]])
        expected = cm.confidence_sequence_coverage(cm.unanimity_rule(looks), mu)
        decimals = np.array([len(value.strip().split(".")[1]) for value in line.split("|")[3:9]])
        np.testing.assert_array_less(np.abs(shown - expected), 0.5 * 10.0**-decimals + 1e-9)
