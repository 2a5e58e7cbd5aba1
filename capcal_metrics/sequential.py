"""Group-sequential sampling of one question, and estimates that stay unbiased after a data-dependent stop.

A plan looks at fixed sample counts ``looks = (l_1 < ... < l_m)`` (``l_m = k_max``) and stops at look i when
``stop[i, s]`` holds for the s successes among the ``n = l_i`` samples drawn; at ``l_m`` it always stops. The
stopping rule depends on (n, s) only, so (n, s) at the stop is a sufficient statistic for the per-response
accuracy mu, and every estimate below is a function of it.

* Path counts: ``N(n, s)`` = number of 0/1 sequences that reach the terminal state (n, s) without stopping
  earlier; ``P(n, s; mu) = N(n, s) mu^s (1 - mu)^(n - s)``. ``N_{a,b}(n, s)`` counts those whose first a draws
  are 1 and next b are 0.
* Rao-Blackwell (Girshick, Mosteller & Savage 1946, Ann. Math. Statist. 17:13-23; DeGroot 1959, Ann. Math.
  Statist. 30:80-101): ``N_{a,b}(n, s) / N(n, s) = P(first a draws 1, next b 0 | n, s)`` is unbiased for
  ``mu^a (1 - mu)^b`` whenever ``a + b <= l_1`` (those draws are made whatever the data).
* Anytime-valid confidence sequence (Howard, Ramdas, McAuliffe & Sekhon 2021, Ann. Statist. 49:1055-1080; the
  conjugate beta-binomial mixture martingale of Robbins 1970): valid at every n simultaneously, hence after
  any stop.

Counts are exact Python integers (``math.comb``; C(1000, 500) ~ 2.7e299 and the path counts of k_max > 1023
would overflow float64), and every ratio ``N_{a,b} / N`` is one correctly rounded integer division; only the
terminal probabilities (which multiply a count by ``mu^s (1 - mu)^(n - s)``) go through logarithms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from .validation import (
    check_fraction,
    check_integer,
    check_probabilities,
    check_sample_counts,
    check_whole_numbers,
)

__all__ = [
    "ConfidenceSequence",
    "OperatingCharacteristics",
    "SequentialPlan",
    "confidence_sequence",
    "confidence_sequence_coverage",
    "confidence_width_rule",
    "operating_characteristics",
    "path_counts",
    "sample_proportion",
    "terminal_probabilities",
    "terminal_states",
    "unanimity_rule",
    "unbiased_mean",
    "unbiased_mean_square",
    "unbiased_moment",
    "unbiased_moment_given_prefix",
    "unbiased_pass_at_k",
]

DEFAULT_ALPHA = 0.05
# Jeffreys' Beta(1/2, 1/2) mixing prior puts more mass near 0 and 1 than the uniform one, so the sequence is
# tighter for always/never-solved questions, the ones an adaptive run stops on (at n = 16, s = 0 its upper
# end is 0.267 against 0.305 for Beta(1, 1)). Any prior gives a valid sequence.
DEFAULT_PRIOR = 0.5


@dataclass(frozen=True, eq=False)
class SequentialPlan:
    """Looks ``l_1 < ... < l_m`` and the stopping table ``stop[i, s]`` (look i, s successes; s <= l_i).

    ``stop`` has shape ``(m, l_m + 1)``; its last row must be all True (the plan stops at k_max); entries with
    s > l_i are ignored. ``rule`` names the rule for records. Build one with :func:`unanimity_rule` or
    :func:`confidence_width_rule`.
    """

    looks: tuple[int, ...]
    stop: np.ndarray
    rule: str

    def __post_init__(self) -> None:
        looks = _check_looks(self.looks)
        stop = np.array(self.stop, dtype=bool)
        if stop.shape != (len(looks), looks[-1] + 1):
            raise ValueError(
                f"stop must have shape (number of looks, k_max + 1) = {(len(looks), looks[-1] + 1)}, "
                f"got {stop.shape}"
            )
        if not stop[-1].all():
            raise ValueError("stop must stop at the last look for every number of successes (its last row)")
        stop.flags.writeable = False
        object.__setattr__(self, "looks", looks)
        object.__setattr__(self, "stop", stop)

    @property
    def k_max(self) -> int:
        """The last look: the most samples a question can draw."""
        return self.looks[-1]


class ConfidenceSequence(NamedTuple):
    """Per-question bounds of an anytime-valid confidence sequence for mu."""

    lower: np.ndarray
    upper: np.ndarray


class OperatingCharacteristics(NamedTuple):
    """Exact moments of an estimate over the terminal states of a plan, one entry per mu of the grid."""

    mu: np.ndarray
    mean: np.ndarray  # E[estimate]
    variance: np.ndarray  # Var[estimate]
    expected_samples: np.ndarray  # E[n], samples drawn


# --- plans --------------------------------------------------------------------------------------------------


def _check_looks(looks: ArrayLike) -> tuple[int, ...]:
    """Strictly increasing whole numbers >= 1, as a tuple of int."""
    array = check_whole_numbers(looks, "looks", minimum=1, ndim=1)
    if np.any(np.diff(array) <= 0):
        raise ValueError(f"looks must be strictly increasing, got {tuple(int(x) for x in array)}")
    return tuple(int(x) for x in array)


def _check_plan(plan: object) -> SequentialPlan:
    """``plan`` itself, when it is a :class:`SequentialPlan`."""
    if not isinstance(plan, SequentialPlan):
        raise ValueError(
            f"plan must be a SequentialPlan (from unanimity_rule or confidence_width_rule), got {plan!r}"
        )
    return plan


def unanimity_rule(looks: ArrayLike) -> SequentialPlan:
    """Stop at a look when all samples so far agree (s == 0 or s == n); always stop at the last look.

    The default rule: on real tasks almost all the savings come from questions the model always or never
    solves (33 of 40 unanimous at k = 8 for Qwen2.5-Coder-0.5B on the demo's arithmetic), and the rule needs
    no tuning. A non-unanimous question draws k_max samples.
    """
    looks = _check_looks(looks)
    s = np.arange(looks[-1] + 1)
    stop = np.array([(s == 0) | (s == look) for look in looks])
    stop[-1] = True
    return SequentialPlan(looks, stop, "unanimity")


def confidence_width_rule(
    looks: ArrayLike, width: float, alpha: float = DEFAULT_ALPHA, prior: float = DEFAULT_PRIOR
) -> SequentialPlan:
    """Stop at a look when the anytime-valid :func:`confidence_sequence` is narrower than ``width``.

    For users who want every question's interval below a set width; the interval stays valid at the stop
    because it is valid at every n simultaneously.
    """
    looks = _check_looks(looks)
    width = check_fraction(width, "width", include_one=True)
    stop = np.zeros((len(looks), looks[-1] + 1), dtype=bool)
    for i, look in enumerate(looks):
        s = np.arange(look + 1)
        bounds = confidence_sequence(np.full(look + 1, look), s, alpha=alpha, prior=prior)
        stop[i, : look + 1] = bounds.upper - bounds.lower < width
    stop[-1] = True
    return SequentialPlan(looks, stop, f"confidence width < {width:g} (alpha {alpha:g})")


# --- path counts --------------------------------------------------------------------------------------------


def path_counts(plan: SequentialPlan, first_successes: int = 0, first_failures: int = 0) -> np.ndarray:
    """Exact terminal path counts ``N_{a,b}(l_i, s)`` as Python ints, shape ``(m, k_max + 1)`` (dtype object).

    Sequences reaching look i with s successes, never stopped before, whose first ``a = first_successes``
    draws are 1 and next ``b = first_failures`` are 0:

        R(l_1, s) = C(l_1 - a - b, s - a)
        R(l_{i+1}, s) = sum_{s' continuing at l_i} R(l_i, s') C(l_{i+1} - l_i, s - s')

    and ``N_{a,b}(l_i, s) = R(l_i, s)`` where the plan stops, 0 elsewhere. Needs ``a + b <= l_1``.
    """
    plan = _check_plan(plan)
    a = check_integer(first_successes, "first_successes", minimum=0)
    b = check_integer(first_failures, "first_failures", minimum=0)
    looks = plan.looks
    if a + b > looks[0]:
        raise ValueError(
            f"first_successes + first_failures = {a + b} exceeds the first look l_1 = {looks[0]}: only the "
            "draws made before any stopping decision have unbiased estimates"
        )
    counts = np.zeros((len(looks), plan.k_max + 1), dtype=object)
    counts[:] = 0
    reach = np.array(
        [math.comb(looks[0] - a - b, s - a) if s >= a else 0 for s in range(looks[0] + 1)], object
    )
    for i, look in enumerate(looks):
        stops = plan.stop[i, : look + 1]
        counts[i, : look + 1] = np.where(stops, reach, 0)
        if i + 1 < len(looks):
            step = looks[i + 1] - look
            binomials = np.array([math.comb(step, j) for j in range(step + 1)], dtype=object)
            following = np.zeros(looks[i + 1] + 1, dtype=object)
            following[:] = 0
            for s in np.flatnonzero(~stops):
                if reach[s]:
                    following[s : s + step + 1] += reach[s] * binomials
            reach = following
    return counts


def terminal_states(plan: SequentialPlan) -> tuple[np.ndarray, np.ndarray]:
    """The reachable terminal states (n, s) of a plan, by look then s: arrays ``n_samples``, ``n_correct``."""
    look_index, n_correct = np.nonzero(path_counts(plan) != 0)
    return np.asarray(plan.looks)[look_index], n_correct


def _log_counts(counts: np.ndarray) -> np.ndarray:
    """log of positive Python ints (any size), -inf for 0."""
    return np.array([math.log(c) if c else -math.inf for c in counts.ravel()]).reshape(counts.shape)


def _xlogy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x log y with 0 log 0 = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == 0, 0.0, x * np.log(y))


def terminal_probabilities(plan: SequentialPlan, mu: ArrayLike) -> np.ndarray:
    """``P(n, s; mu) = N(n, s) mu^s (1 - mu)^(n - s)`` over :func:`terminal_states`, shape (len(mu), states).

    Each row sums to 1 (the plan stops by k_max). Computed as ``exp(log N + s log mu + (n - s) log(1 - mu))``.
    """
    mu = check_probabilities(mu, "mu")
    n, s = terminal_states(plan)
    log_n = _log_counts(path_counts(plan)[np.searchsorted(plan.looks, n), s])
    m = mu[:, None]
    return np.exp(log_n + _xlogy(s, m) + _xlogy(n - s, 1.0 - m))


# --- estimators ---------------------------------------------------------------------------------------------


def _check_terminal(
    plan: SequentialPlan, n_samples: ArrayLike, n_correct: ArrayLike
) -> tuple[np.ndarray, ...]:
    """(look index, n, s) of each question; every (n, s) must be a reachable terminal state of the plan."""
    plan = _check_plan(plan)
    n, s = check_sample_counts(n_samples, n_correct)
    looks = np.asarray(plan.looks)
    index = np.searchsorted(looks, n)
    not_a_look = (index >= len(looks)) | (looks[np.minimum(index, len(looks) - 1)] != n)
    if np.any(not_a_look):
        found = int(n[not_a_look].ravel()[0])
        raise ValueError(f"n_samples must be one of the plan's looks {plan.looks}; found {found}")
    counts = path_counts(plan)
    not_terminal = counts[index, s] == 0
    if np.any(not_terminal):
        where = np.flatnonzero(not_terminal.ravel())[0]
        raise ValueError(
            f"(n_samples, n_correct) = ({int(n.ravel()[where])}, {int(s.ravel()[where])}) is not a terminal "
            f"state of the plan ({plan.rule}, looks {plan.looks}): the plan stops earlier or goes on there"
        )
    return index, n, s


def unbiased_moment(
    plan: SequentialPlan, n_samples: ArrayLike, n_correct: ArrayLike, successes: int, failures: int = 0
) -> np.ndarray:
    """Unbiased estimate of ``mu^a (1 - mu)^b`` after stopping: ``N_{a,b}(n, s) / N(n, s)`` (Rao-Blackwell).

    ``N_{a,b} / N = P(first a draws 1, next b 0 | n, s)``; the indicator is unbiased for ``mu^a (1 - mu)^b``
    when those draws are always made (``a + b <= l_1``), and conditioning on the sufficient (n, s) keeps it
    unbiased (Girshick, Mosteller & Savage 1946; DeGroot 1959). One exact integer ratio per question.
    """
    plan = _check_plan(plan)
    a = check_integer(successes, "successes", minimum=0)
    b = check_integer(failures, "failures", minimum=0)
    if a + b > plan.looks[0]:
        raise ValueError(
            f"successes + failures = {a + b} exceeds the first look l_1 = {plan.looks[0]}: no unbiased "
            "estimate of mu^a (1 - mu)^b exists past the draws made before any stopping decision"
        )
    index, _, s = _check_terminal(plan, n_samples, n_correct)
    numerator = path_counts(plan, a, b)[index, s]
    denominator = path_counts(plan)[index, s]
    ratios = [int(p) / int(q) for p, q in zip(np.ravel(numerator), np.ravel(denominator), strict=True)]
    return np.array(ratios, dtype=float).reshape(s.shape)


def unbiased_mean(plan: SequentialPlan, n_samples: ArrayLike, n_correct: ArrayLike) -> np.ndarray:
    """Unbiased mu_hat after stopping: ``E[X_1 | n, s] = N_{1,0}(n, s) / N(n, s)``; s/n at a single look."""
    return unbiased_moment(plan, n_samples, n_correct, 1)


def unbiased_mean_square(plan: SequentialPlan, n_samples: ArrayLike, n_correct: ArrayLike) -> np.ndarray:
    """Unbiased mu^2 after stopping: ``N_{2,0}(n, s) / N(n, s)`` (l_1 >= 2); s(s-1)/(n(n-1)) at one look."""
    plan = _check_plan(plan)
    if plan.looks[0] < 2:
        raise ValueError(f"an unbiased mu^2 needs a first look l_1 >= 2, the plan's is {plan.looks[0]}")
    return unbiased_moment(plan, n_samples, n_correct, 2)


def unbiased_moment_given_prefix(
    plan: SequentialPlan,
    n_samples: ArrayLike,
    n_correct: ArrayLike,
    prefix_size: int,
    prefix_successes: ArrayLike,
    successes: int = 1,
    failures: int = 0,
) -> np.ndarray:
    """Estimate of ``mu^a (1 - mu)^b`` (default a = 1, b = 0: mu) unbiased given a prefix of p draws with s_p
    successes:

        N_{s_p + a, p - s_p + b}(n, s) / N_{s_p, p - s_p}(n, s)
          = P(the a draws after the prefix are 1 and the next b are 0 | prefix, n, s),

    for ``p + a + b <= l_1``. Given the prefix, the later draws are i.i.d. and the stop depends on (n, s)
    only, so those draws' indicator is unbiased for ``mu^a (1 - mu)^b`` given the prefix, and so is its
    Rao-Blackwell average over the paths through (n, s) that start with the prefix (the same argument as
    :func:`unbiased_moment`, conditionally): ``E[estimate | prefix] = mu^a (1 - mu)^b``. Any p of the first
    l_1 draws may stand as the prefix: they are always drawn and the rule sees only their count. The use:
    the target of a confidence computed from the prefix alone (the leakage-free consistency after stopping)
    that keeps every later sample, where the draws left after the prefix among the first l_1 would be few.
    """
    plan = _check_plan(plan)
    p = check_integer(prefix_size, "prefix_size", minimum=0)
    a = check_integer(successes, "successes", minimum=0)
    b = check_integer(failures, "failures", minimum=0)
    if p + a + b > plan.looks[0]:
        raise ValueError(
            f"prefix_size + successes + failures = {p + a + b} exceeds the first look l_1 = {plan.looks[0]}: "
            "only the draws made before any stopping decision have unbiased estimates"
        )
    index, n, s = _check_terminal(plan, n_samples, n_correct)
    s_p = check_whole_numbers(prefix_successes, "prefix_successes")
    try:
        s_p = np.broadcast_to(s_p, s.shape)
    except ValueError:
        raise ValueError(
            f"prefix_successes must have the shape of n_correct {s.shape}, got {np.shape(s_p)}"
        ) from None
    if np.any(s_p > p) or np.any(s_p > s) or np.any(p - s_p > n - s):
        raise ValueError(
            f"prefix_successes must lie in [0, prefix_size = {p}] and within each question's successes and "
            "failures (n_correct and n_samples - n_correct)"
        )
    out = np.empty(s.shape)
    for value in np.unique(s_p):
        chosen = s_p == value
        numerator = path_counts(plan, int(value) + a, p - int(value) + b)[index[chosen], s[chosen]]
        denominator = path_counts(plan, int(value), p - int(value))[index[chosen], s[chosen]]
        if any(q == 0 for q in denominator):
            raise ValueError(
                f"a prefix of {p} draws with {int(value)} successes cannot end in a stop at some of its "
                f"questions' (n_samples, n_correct) under the plan ({plan.rule}, looks {plan.looks})"
            )
        out[chosen] = [int(x) / int(y) for x, y in zip(numerator, denominator, strict=True)]
    return out


def unbiased_pass_at_k(
    plan: SequentialPlan, n_samples: ArrayLike, n_correct: ArrayLike, k: int
) -> np.ndarray:
    """Unbiased pass@k after stopping: ``1 - N_{0,k}(n, s) / N(n, s)`` for k <= l_1.

    Unbiased for ``1 - (1 - mu)^k``; at a single look it is Chen et al.'s ``1 - C(n - s, k) / C(n, k)``
    (:func:`capcal_metrics.pass_at_k`). Past the first look no unbiased estimate exists.
    """
    plan = _check_plan(plan)
    k = check_integer(k, "k")
    if k > plan.looks[0]:
        raise ValueError(
            f"k={k} exceeds the first look l_1={plan.looks[0]}: pass@k is unbiased after stopping only for "
            "k <= l_1"
        )
    return 1.0 - unbiased_moment(plan, n_samples, n_correct, 0, k)


def sample_proportion(plan: SequentialPlan, n_samples: ArrayLike, n_correct: ArrayLike) -> np.ndarray:
    """The plain s/n at the stop, for comparison: biased after a data-dependent stop (see docs/methods.md)."""
    _, n, s = _check_terminal(plan, n_samples, n_correct)
    return s / n


# --- confidence sequence ------------------------------------------------------------------------------------


def _check_prior(prior: float) -> float:
    """A finite number > 0: the Beta(prior, prior) mixing distribution's parameter."""
    try:
        value = float(prior)
    except (TypeError, ValueError):
        raise ValueError(f"prior must be a number > 0, got {prior!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"prior must be a finite number > 0, got {prior!r}")
    return value


def _log_beta(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log B(a, b) = lgamma(a) + lgamma(b) - lgamma(a + b), elementwise."""
    lgamma = np.vectorize(math.lgamma, otypes=[float])
    return lgamma(a) + lgamma(b) - lgamma(a + b)


def confidence_sequence(
    n_samples: ArrayLike,
    n_correct: ArrayLike,
    alpha: float = DEFAULT_ALPHA,
    prior: float = DEFAULT_PRIOR,
    tolerance: float = 1e-12,
) -> ConfidenceSequence:
    """Anytime-valid (1 - alpha) interval for mu from s successes in n draws, per question.

    ``{mu : B(s + a0, n - s + a0) / B(a0, a0) / (mu^s (1 - mu)^(n - s)) < 1/alpha}`` with ``a0 = prior``:
    the mixture of the likelihood ratios over a Beta(a0, a0) prior is a nonnegative martingale under mu, so
    by Ville's inequality ``P(exists n: mu outside) <= alpha`` (Robbins 1970; Howard et al. 2021, Ann.
    Statist. 49:1055-1080). The set is an interval around s/n (the log ratio is convex in mu, below 0 at
    s/n); each end is found by bisection to ``tolerance`` and rounded outward (never narrower than the set).
    """
    n, s = check_sample_counts(n_samples, n_correct)
    alpha = check_fraction(alpha, "alpha", include_one=False)
    prior = _check_prior(prior)
    tolerance = check_fraction(tolerance, "tolerance", include_one=False)
    threshold = (
        math.log(1.0 / alpha)
        - _log_beta(s + prior, n - s + prior)
        + _log_beta(np.array(prior), np.array(prior))
    )

    def inside(mu: np.ndarray) -> np.ndarray:
        return -(_xlogy(s, mu) + _xlogy(n - s, 1.0 - mu)) < threshold

    centre = s / n
    n_steps = math.ceil(math.log2(1.0 / tolerance))
    lower_out, lower_in = np.zeros(n.shape), centre.astype(float)
    upper_in, upper_out = centre.astype(float), np.ones(n.shape)
    for _ in range(n_steps):
        middle = (lower_out + lower_in) / 2
        middle_inside = inside(middle)
        lower_in = np.where(middle_inside, middle, lower_in)
        lower_out = np.where(middle_inside, lower_out, middle)
        middle = (upper_in + upper_out) / 2
        middle_inside = inside(middle)
        upper_in = np.where(middle_inside, middle, upper_in)
        upper_out = np.where(middle_inside, upper_out, middle)
    # mu = 0 is inside when s = 0 (the ratio is B(a0, n + a0) / B(a0, a0) < 1), and mu = 1 when s = n
    lower = np.where(s == 0, 0.0, lower_out)
    upper = np.where(s == n, 1.0, upper_out)
    return ConfidenceSequence(lower, upper)


# --- exact operating characteristics ------------------------------------------------------------------------


def operating_characteristics(
    plan: SequentialPlan, mu: ArrayLike, estimates: ArrayLike
) -> OperatingCharacteristics:
    """Exact ``E[estimate]``, ``Var[estimate]`` and ``E[n]`` at each mu, as sums over the terminal states.

    ``estimates`` holds an estimate in [0, 1] per terminal state, in the order of :func:`terminal_states`
    (e.g. ``unbiased_mean(plan, *terminal_states(plan))``). ``E[f] = sum_(n,s) P(n, s; mu) f(n, s)``; no
    simulation.
    """
    mu = check_probabilities(mu, "mu")
    n, _ = terminal_states(plan)
    estimates = check_probabilities(estimates, "estimates", length=n.size)
    probabilities = terminal_probabilities(plan, mu)
    mean = probabilities @ estimates
    variance = np.maximum(probabilities @ estimates**2 - mean**2, 0.0)
    return OperatingCharacteristics(mu, mean, variance, probabilities @ n)


def confidence_sequence_coverage(
    plan: SequentialPlan, mu: ArrayLike, alpha: float = DEFAULT_ALPHA, prior: float = DEFAULT_PRIOR
) -> np.ndarray:
    """Exact ``P(lower(n, s) <= mu <= upper(n, s))`` at the stop, per mu (sum over the terminal states)."""
    mu = check_probabilities(mu, "mu")
    n, s = terminal_states(plan)
    bounds = confidence_sequence(n, s, alpha=alpha, prior=prior)
    covered = (bounds.lower[None, :] <= mu[:, None]) & (mu[:, None] <= bounds.upper[None, :])
    return np.sum(terminal_probabilities(plan, mu) * covered, axis=1)
