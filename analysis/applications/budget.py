"""Inference-budget allocation from a capability confidence.

The allocation application of "On Calibration of LLMs: From Response To Capability" (arXiv 2602.13540),
with the greedy rule of Damani et al. 2024 ("Learning How Hard to Think", arXiv 2410.04707).

A total budget of T = N * B samples is split over N queries, b_i <= n_i each (n_i = samples available).

* Greedy (:func:`greedy_allocation`): repeatedly give one more sample to ``argmax_i p_i (1 - p_i)^{b_i}``, the
  gain in ``1 - (1 - p_i)^{b_i}`` from one more sample, with p clipped to [1e-6, 1 - 1e-6]. Because each
  query's gains decrease strictly in b_i (concave objective), the greedy sequence takes the T largest of all
  gains {p_i (1 - p_i)^b : i, 0 <= b < n_i}: capcal computes that set in closed form by a threshold
  (``np.partition`` over the log-gains, O(N max n)) instead of T heap steps, with ties at the threshold
  broken toward the lower query index, exactly as a heap-based greedy that prefers lower indices. The
  result maximises sum_i 1 - (1 - p_i)^{b_i} over all allocations with sum b_i = T.
* Uniform: b_i = min(B, n_i). Oracle: the greedy allocation with p = mu_hat.

Evaluation on the real samples: with budget b a query is solved if any of b of its n real samples, drawn
without replacement, is correct. The exact expectation is the unbiased ``pass@b = 1 - C(n - c, b) / C(n, b)``
(0 for b = 0), so ``accuracy = mean_i pass@b_i`` (:func:`exact_budget_accuracy`) has no Monte-Carlo noise.
The paper's protocol (mean over seeds of one random draw) is :func:`monte_carlo_budget_accuracy`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from analysis.runs.validation import check_confidences, check_counts, check_grid
from capcal_metrics import pass_at_k
from capcal_metrics.validation import check_integer, check_probabilities, check_whole_numbers

__all__ = [
    "DEFAULT_BUDGETS",
    "MonteCarloAccuracy",
    "budget_allocation_curves",
    "exact_budget_accuracy",
    "greedy_allocation",
    "greedy_allocations",
    "monte_carlo_budget_accuracy",
    "uniform_allocation",
]

DEFAULT_BUDGETS = (1, 2, 4, 8, 16, 32)
P_CLIP = 1e-6
_CHUNK_ELEMENTS = 4_000_000  # rows per Monte-Carlo chunk = this // max n


def _check_caps(caps: ArrayLike, n_questions: int | None = None) -> np.ndarray:
    """Per-question sample caps (or allocations): whole numbers >= 0, one per question."""
    return check_whole_numbers(caps, "caps", ndim=1, length=n_questions)


def _check_allocation(
    allocation: ArrayLike, n_samples: ArrayLike, n_correct: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(b, n, c): an allocation b_i <= n_i with the sample and correct counts it draws from."""
    n, c = check_counts(n_samples, n_correct)
    b = _check_caps(allocation, n.size)
    if np.any(b > n):
        raise ValueError(f"allocation exceeds the available samples at query {int(np.argmax(b > n))}")
    return b, n, c


def greedy_allocation(confidence: ArrayLike, total_budget: int, caps: ArrayLike) -> np.ndarray:
    """Greedy marginal-gain allocation of ``total_budget`` samples: b (N,) int64 with b_i <= caps_i.

    Equal to giving samples one at a time to ``argmax_i p_i (1 - p_i)^{b_i}`` (lowest index on ties), with
    p clipped to [1e-6, 1 - 1e-6]. If the budget exceeds sum(caps), every query gets its cap.
    """
    return greedy_allocations(confidence, [total_budget], caps)[0]


def greedy_allocations(
    confidence: ArrayLike, total_budgets: Sequence[int], caps: ArrayLike
) -> list[np.ndarray]:
    """:func:`greedy_allocation` for several total budgets at once (one gain table, one partition)."""
    p = check_probabilities(confidence, "confidence")
    caps = _check_caps(caps, p.size)
    totals = [check_integer(total, "total_budget", minimum=0) for total in total_budgets]
    available = int(caps.sum())
    kth = sorted({total - 1 for total in totals if 0 < total < available})
    if kth:
        p = np.clip(p, P_CLIP, 1.0 - P_CLIP)
        steps = np.arange(int(caps.max()), dtype=np.float64)
        # cost of the (b+1)-th sample = -log gain = -log p - b log(1 - p), increasing in b; inf beyond the cap
        cost = (-np.log(p))[:, None] + steps[None, :] * (-np.log1p(-p))[:, None]
        cost[steps[None, :] >= caps[:, None]] = np.inf
        ordered = np.partition(cost.ravel(), kth)  # ordered[t - 1] = the t-th smallest cost
    allocations = []
    for total in totals:
        if total >= available:
            allocations.append(caps.copy())
            continue
        if total == 0:
            allocations.append(np.zeros(p.size, dtype=np.int64))
            continue
        threshold = ordered[total - 1]  # the T-th largest gain, as a cost
        allocation = (cost < threshold).sum(axis=1)
        remaining = total - int(allocation.sum())
        if remaining:  # costs equal to the threshold (at most one per query): lowest query indices first
            tied_rows = np.flatnonzero((cost == threshold).any(axis=1))
            allocation[tied_rows[:remaining]] += 1
        allocations.append(allocation.astype(np.int64))
    return allocations


def uniform_allocation(per_query_budget: int, caps: ArrayLike) -> np.ndarray:
    """b_i = min(B, caps_i)."""
    budget = check_integer(per_query_budget, "per_query_budget", minimum=0)
    return np.minimum(_check_caps(caps), budget)


def exact_budget_accuracy(allocation: ArrayLike, n_samples: ArrayLike, n_correct: ArrayLike) -> float:
    """Expected accuracy when query i gets b_i of its n_i real samples (c_i correct) drawn without
    replacement: ``mean_i pass@b_i = mean_i [1 - C(n_i - c_i, b_i) / C(n_i, b_i)]`` (0 where b_i = 0)."""
    b, n, c = _check_allocation(allocation, n_samples, n_correct)
    solved = np.zeros(n.size)
    for budget in np.unique(b[b > 0]):
        rows = b == budget
        solved[rows] = pass_at_k(n[rows], c[rows], int(budget))
    return float(solved.mean())


@dataclass(frozen=True)
class MonteCarloAccuracy:
    """The paper's protocol: accuracy of one random draw per seed, their mean and standard error."""

    mean: float
    standard_error: float
    per_seed: np.ndarray


def monte_carlo_budget_accuracy(
    allocation: ArrayLike, n_samples: ArrayLike, n_correct: ArrayLike, *, seeds: int = 10
) -> MonteCarloAccuracy:
    """Per seed s = 0..seeds-1 (``default_rng(s)``): for each query draw b_i of its n_i samples without
    replacement and count it solved if any drawn sample is correct; accuracy = fraction solved.

    Vectorised draw: i.i.d. uniform keys per sample; the b_i smallest keys form a uniform b_i-subset, which
    contains a correct sample iff fewer than b_i incorrect samples have a key below the smallest correct key.
    Only (n_i, c_i) matter for the draw, so the real sample order is not needed.
    """
    b, n, c = _check_allocation(allocation, n_samples, n_correct)
    seeds = check_integer(seeds, "seeds")
    width = int(n.max())
    columns = np.arange(width)
    chunk = max(1, _CHUNK_ELEMENTS // width)
    per_seed = np.empty(seeds)
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        solved = 0
        for start in range(0, n.size, chunk):
            rows = slice(start, start + chunk)
            keys = rng.random((n[rows].size, width))
            correct = columns[None, :] < c[rows, None]  # samples 0..c-1 are the correct ones
            wrong = (columns[None, :] >= c[rows, None]) & (columns[None, :] < n[rows, None])
            first_correct = np.where(correct, keys, np.inf).min(axis=1)
            wrong_before = (wrong & (keys < first_correct[:, None])).sum(axis=1)
            solved += int(np.sum((c[rows] > 0) & (wrong_before < b[rows])))
        per_seed[seed] = solved / n.size
    standard_error = float(per_seed.std(ddof=1) / np.sqrt(seeds)) if seeds > 1 else float("nan")
    return MonteCarloAccuracy(float(per_seed.mean()), standard_error, per_seed)


def budget_allocation_curves(
    confidences: Mapping[str, ArrayLike],
    n_samples: ArrayLike,
    n_correct: ArrayLike,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    *,
    monte_carlo_seeds: int = 0,
) -> pd.DataFrame:
    """Accuracy at each average budget B for the greedy allocation of every estimator, ``uniform`` and
    ``oracle`` (greedy with p = mu_hat = c/n).

    Columns: method, budget (B per query on average), samples_used (sum b_i / N; below B only where caps
    bind), accuracy (exact mean pass@b_i) and, with ``monte_carlo_seeds`` > 0, mc_accuracy / mc_se (the
    paper's protocol over that many seeds).
    """
    n, c = check_counts(n_samples, n_correct)
    budgets = check_grid(budgets, "budgets")
    probabilities = {**check_confidences(confidences, n.size), "oracle": c / n}
    rows = []
    greedy = {
        name: greedy_allocations(p, [b * n.size for b in budgets], n) for name, p in probabilities.items()
    }
    for position, budget in enumerate(budgets):
        allocations = {"uniform": uniform_allocation(budget, n)}
        for name in probabilities:
            allocations[name] = greedy[name][position]
        for method, allocation in allocations.items():
            row = {
                "method": method,
                "budget": budget,
                "samples_used": float(allocation.sum() / n.size),
                "accuracy": exact_budget_accuracy(allocation, n, c),
                "mc_accuracy": np.nan,
                "mc_se": np.nan,
            }
            if monte_carlo_seeds:
                mc = monte_carlo_budget_accuracy(allocation, n, c, seeds=monte_carlo_seeds)
                row.update(mc_accuracy=mc.mean, mc_se=mc.standard_error)
            rows.append(row)
    return pd.DataFrame(rows)
