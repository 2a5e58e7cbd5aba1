"""Budget allocation: the closed-form greedy against a heap greedy and the exhaustive optimum, the exact
accuracy against math.comb and against the paper's Monte-Carlo protocol."""

from __future__ import annotations

import heapq
import itertools
import math

import numpy as np
import pytest

from analysis.applications import (
    budget_allocation_curves,
    exact_budget_accuracy,
    greedy_allocation,
    monte_carlo_budget_accuracy,
    uniform_allocation,
)


def _heap_greedy(p: np.ndarray, total: int, caps: np.ndarray) -> np.ndarray:
    """The literal greedy: one sample at a time to argmax p (1 - p)^b, lowest index on ties."""
    p = np.clip(p, 1e-6, 1 - 1e-6)
    b = np.zeros(p.size, dtype=int)
    heap = [(-p[i], i) for i in range(p.size) if caps[i] > 0]
    heapq.heapify(heap)
    for _ in range(min(total, int(caps.sum()))):
        _, i = heapq.heappop(heap)
        b[i] += 1
        if b[i] < caps[i]:
            heapq.heappush(heap, (-(p[i] * (1 - p[i]) ** b[i]), i))
    return b


def _objective(p: np.ndarray, b: np.ndarray) -> float:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return float(np.sum(1 - (1 - p) ** b))


@pytest.mark.parametrize("seed", range(5))
def test_closed_form_equals_heap_greedy(seed):
    rng = np.random.default_rng(seed)
    n_questions = 300
    caps = rng.integers(1, 20, n_questions)
    continuous = rng.beta(0.5, 0.5, n_questions)
    discrete = rng.integers(0, 6, n_questions) / 5  # many exact ties, and p = 0 / 1 (clipped)
    for p in (continuous, discrete):
        for average in (1, 3, 8):
            total = average * n_questions
            np.testing.assert_array_equal(greedy_allocation(p, total, caps), _heap_greedy(p, total, caps))


def test_greedy_is_optimal_on_tiny_instances_by_exhaustive_search():
    rng = np.random.default_rng(10)
    for _ in range(60):
        n_questions = int(rng.integers(2, 5))
        caps = rng.integers(1, 4, n_questions)
        p = rng.uniform(0, 1, n_questions)
        for total in range(1, int(caps.sum()) + 1):
            best = max(
                _objective(p, np.array(b))
                for b in itertools.product(*(range(c + 1) for c in caps))
                if sum(b) == total
            )
            ours = greedy_allocation(p, total, caps)
            assert ours.sum() == total and np.all(ours <= caps)
            assert _objective(p, ours) == pytest.approx(best, rel=1e-12, abs=1e-12)


def test_allocation_satisfies_the_concave_exchange_condition():
    """Optimality for concave gains: the smallest gain taken is >= the largest gain left out."""
    rng = np.random.default_rng(11)
    p = np.clip(rng.beta(0.7, 0.7, 2000), 1e-6, 1 - 1e-6)
    caps = rng.integers(1, 40, p.size)
    b = greedy_allocation(p, 10 * p.size, caps)
    taken = p * (1 - p) ** (b - 1.0)
    left = p * (1 - p) ** b.astype(float)
    assert taken[b > 0].min() >= left[b < caps].max() * (1 - 1e-12)


def test_budget_edges():
    p, caps = np.array([0.2, 0.9]), np.array([3, 2])
    np.testing.assert_array_equal(greedy_allocation(p, 100, caps), caps)  # budget above all caps
    np.testing.assert_array_equal(greedy_allocation(p, 0, caps), [0, 0])
    np.testing.assert_array_equal(uniform_allocation(4, caps), [3, 2])
    np.testing.assert_array_equal(uniform_allocation(0, caps), [0, 0])  # B = 0: the boundary, allowed
    with pytest.raises(ValueError, match="per_query_budget"):
        uniform_allocation(-1, caps)
    for total in (0, 1, 4, 100):  # sample counts are int64 (the docstring's promise), at every budget branch
        assert greedy_allocation(p, total, caps).dtype == np.int64, total
    np.testing.assert_array_equal(
        greedy_allocation([0.5, 0.5, 0.5], 2, [1, 1, 1]), [1, 1, 0]
    )  # ties: low index
    with pytest.raises(ValueError, match="one entry per question"):
        greedy_allocation(p, 2, [1, 2, 3])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        greedy_allocation([1.2, 0.1], 2, caps)


def test_exact_accuracy_matches_math_comb():
    rng = np.random.default_rng(12)
    n = rng.integers(1, 30, 400)
    c = rng.integers(0, n + 1)
    b = rng.integers(0, n + 1)
    expected = np.mean(
        [
            0.0 if bi == 0 else 1 - math.comb(ni - ci, bi) / math.comb(ni, bi)
            for ni, ci, bi in zip(n, c, b, strict=True)
        ]
    )
    assert exact_budget_accuracy(b, n, c) == pytest.approx(expected, rel=1e-12, abs=1e-14)
    with pytest.raises(ValueError, match="exceeds the available samples"):
        exact_budget_accuracy(n + 1, n, c)


def test_exact_accuracy_is_the_monte_carlo_mean_within_its_error():
    """The paper's protocol over 400 seeds: its mean must be within 4 standard errors of the exact value,
    and the standard error must be of the size the binomial noise predicts (within a factor 1.5)."""
    rng = np.random.default_rng(13)
    n = rng.integers(5, 40, 300)
    c = rng.binomial(n, rng.beta(0.5, 0.8, n.size))
    b = greedy_allocation(c / n, 4 * n.size, n)
    exact = exact_budget_accuracy(b, n, c)
    mc = monte_carlo_budget_accuracy(b, n, c, seeds=400)
    assert abs(mc.mean - exact) < 4 * mc.standard_error
    solved = np.array(
        [
            0.0 if bi == 0 else 1 - math.comb(ni - ci, bi) / math.comb(ni, bi)
            for ni, ci, bi in zip(n, c, b, strict=True)
        ]
    )
    predicted_se = math.sqrt(np.sum(solved * (1 - solved))) / n.size / math.sqrt(400)
    assert predicted_se / 1.5 < mc.standard_error < predicted_se * 1.5
    # the literal protocol (rng.choice without replacement) agrees with the vectorised one in distribution
    literal = []
    for seed in range(100):
        draw = np.random.default_rng(10_000 + seed)
        hits = 0
        for ni, ci, bi in zip(n, c, b, strict=True):
            samples = np.array([1] * ci + [0] * (ni - ci))
            hits += bool(bi) and samples[draw.choice(ni, size=bi, replace=False)].any()
        literal.append(hits / n.size)
    literal_se = np.std(literal, ddof=1) / math.sqrt(len(literal))
    assert abs(np.mean(literal) - exact) < 4 * literal_se


def test_curves_cover_methods_and_budgets():
    rng = np.random.default_rng(14)
    n = np.full(500, 64)
    mu = rng.beta(0.4, 0.6, n.size)
    c = rng.binomial(n, mu)
    noisy = np.clip(mu + rng.normal(0, 0.2, mu.size), 0, 1)
    curves = budget_allocation_curves({"noisy": noisy}, n, c, monte_carlo_seeds=3)
    assert set(curves["method"]) == {"uniform", "noisy", "oracle"}
    assert sorted(set(curves["budget"])) == [1, 2, 4, 8, 16, 32]
    np.testing.assert_allclose(curves["samples_used"], curves["budget"])  # caps (64) never bind
    uniform = curves[curves["method"] == "uniform"].set_index("budget")["accuracy"]
    # uniform at B is exactly the mean unbiased pass@B
    from capcal_metrics import pass_at_k

    for budget, value in uniform.items():
        assert value == pytest.approx(float(np.mean(pass_at_k(n, c, budget))), rel=1e-12)
    assert curves["mc_se"].notna().all()


def test_one_sample_per_query():
    """n = 1: each query can get at most its one sample; accuracy = sum of c over the allocated queries / N,
    and the greedy picks the most confident queries first."""
    c = np.array([1, 0, 1, 1, 0])
    n = np.ones(5, dtype=int)
    b = greedy_allocation([0.9, 0.1, 0.8, 0.3, 0.5], 3, n)
    np.testing.assert_array_equal(b, [1, 0, 1, 0, 1])
    assert exact_budget_accuracy(b, n, c) == pytest.approx(2 / 5)
    np.testing.assert_array_equal(monte_carlo_budget_accuracy(b, n, c, seeds=3).per_seed, [0.4, 0.4, 0.4])


@pytest.mark.parametrize("seeds", [2, 3, 5])
def test_the_monte_carlo_standard_error_is_the_sample_deviation_over_root_seeds(seeds):
    """SE = s / sqrt(S) with the sample standard deviation s (divisor S - 1) of the per-seed accuracies,
    written out here; a few seeds, where the divisor shows (S = 2: a factor sqrt(2)); one seed: no SE."""
    n = np.array([6, 9, 4, 7])
    c = np.array([1, 3, 0, 2])
    mc = monte_carlo_budget_accuracy(np.array([2, 1, 3, 1]), n, c, seeds=seeds)
    values = [float(v) for v in mc.per_seed]
    assert len(values) == seeds and mc.mean == pytest.approx(sum(values) / seeds)
    mean = sum(values) / seeds
    deviation = math.sqrt(sum((v - mean) ** 2 for v in values) / (seeds - 1))
    assert mc.standard_error == pytest.approx(deviation / math.sqrt(seeds))
    assert math.isnan(monte_carlo_budget_accuracy(np.array([2, 1, 3, 1]), n, c, seeds=1).standard_error)
