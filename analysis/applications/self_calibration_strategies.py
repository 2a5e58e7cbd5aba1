"""Self-Calibration's test-time strategies on real per-response confidences.

The strategies of "Efficient Test-Time Scaling via Self-Calibration" (Huang et al. 2025, arXiv 2503.00031),
evaluated on a model's real sampled responses: early stopping, confidence-weighted and adaptive
self-consistency, each reported as accuracy against the average number of samples used.

Per question: responses y_1..y_n in sampling order, their answer classes a(y_i) (``AnswerClasses``), 0/1
correctness z_i and per-response confidences c_i (e.g. the ``selfcheck`` task's ``p_yes`` or
``p_yes_normalized``). Using at most ``max_samples`` = M responses:

* Self-consistency (baseline, per N = 1..M): answer = argmax_a #{i <= N : a(y_i) = a}; cost N.
* Confidence-weighted self-consistency (per N): answer = argmax_a W_N[a],
  ``W_N[a] = sum_{i <= N} c_i 1(a(y_i) = a)``.
* Early-stopping best-of-N (per tau): stop at the first i with c_i >= tau and answer y_i; if none of the M
  does, fall back to y_M (``fallback="last"``) or to the weighted vote over all M (``"weighted_vote"``);
  cost = samples drawn.
* Adaptive self-consistency with confidence (per tau): after each sample i >= 2, stop when
  ``max_a W_i[a] / sum_a W_i[a] >= tau``; answer argmax W_i; at M stop anyway. With c = 1 this is plain
  adaptive self-consistency (also reported, as a baseline).
* Soft self-consistency score (:func:`soft_self_consistency`):
  ``SSC(a) = sum_{i: a(y_i) = a} c_i / sum_i c_i`` of the weighted-vote answer: a per-question confidence.

Conventions (as ``capcal_tasks.sampling.majority_vote_accuracy``): unparseable responses do not vote (no
weight in W, not in sum W); a vote without any parseable response is wrong; when several answers tie for the
largest vote, the accuracy is the mean correctness of the tied answers (the expectation under a uniformly
random tie-break), so results do not depend on an arbitrary tie order. An answer's correctness is the mean z
of its responses (all equal when the class comes from the judged answer). Accuracy and average samples used
are means over questions; ``permutations`` > 0 also averages over that many random orders of each question's
responses (seeded), on top of the sampling order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from analysis.estimators.consistency import AnswerClasses
from analysis.runs.validation import as_response_matrix
from capcal_metrics.validation import check_integer

__all__ = [
    "DEFAULT_TAUS",
    "StrategyInputs",
    "adaptive_self_consistency",
    "early_stopping",
    "prepare_strategy_inputs",
    "self_calibration_curves",
    "soft_self_consistency",
    "vote_accuracy_by_n",
]

DEFAULT_TAUS = tuple(float(t) for t in np.round(np.linspace(0.0, 1.0, 21), 10))
_TIE_TOLERANCE = 1e-12


@dataclass(frozen=True)
class StrategyInputs:
    """Validated inputs restricted to the first M responses: class ids, parseable mask, correctness,
    confidences (all (N, M)), and each class's correctness (N, width)."""

    ids: np.ndarray  # (N, M) int, in [0, width)
    votes: np.ndarray  # (N, M) bool: parseable (votes)
    correctness: np.ndarray  # (N, M) float 0/1
    confidence: np.ndarray  # (N, M) float in [0, 1]
    class_correct: np.ndarray  # (N, width) mean correctness of each class (0 where absent)
    width: int

    @property
    def max_samples(self) -> int:
        return int(self.ids.shape[1])


def prepare_strategy_inputs(
    answers: AnswerClasses,
    correctness: ArrayLike | Sequence[Sequence[int]],
    confidences: ArrayLike | Sequence[Sequence[float]],
    max_samples: int | None = None,
) -> StrategyInputs:
    """Check and align the inputs; keep the first ``max_samples`` (default: min n) responses per question."""
    if not isinstance(answers, AnswerClasses):
        raise ValueError("answers must be an AnswerClasses (analysis.estimators.encode_answer_classes)")
    z, _ = as_response_matrix(correctness, "correctness", n=answers.n, dtype=np.float64)
    c, _ = as_response_matrix(confidences, "confidences", n=answers.n, dtype=np.float64, fill=np.nan)
    if z.shape != answers.ids.shape or c.shape != answers.ids.shape:
        raise ValueError(
            f"correctness {z.shape} and confidences {c.shape} must match answers {answers.ids.shape}"
        )
    m = int(answers.n.min()) if max_samples is None else check_integer(max_samples, "max_samples")
    if m > answers.n.min():
        raise ValueError(f"max_samples={m} exceeds the smallest number of responses ({int(answers.n.min())})")
    z, c, ids, votes = z[:, :m], c[:, :m], answers.ids[:, :m].astype(np.int64), ~answers.unparseable[:, :m]
    if np.any((z != 0) & (z != 1)):
        raise ValueError("correctness must be 0/1")
    if not np.isfinite(c).all():
        row = int(np.argmax(~np.isfinite(c).all(axis=1)))
        raise ValueError(
            f"confidences must be finite for the first {m} responses (question {row}); "
            "drop or impute parse failures first"
        )
    if np.any((c < 0) | (c > 1)):
        raise ValueError("confidences must lie in [0, 1]")
    width = int(answers.ids.shape[1])
    rows = np.repeat(np.arange(ids.shape[0]), m)
    totals = np.zeros((ids.shape[0], width))
    counts = np.zeros((ids.shape[0], width))
    np.add.at(totals, (rows, ids.ravel()), z.ravel())
    np.add.at(counts, (rows, ids.ravel()), 1.0)
    class_correct = np.divide(totals, counts, out=np.zeros_like(totals), where=counts > 0)
    return StrategyInputs(ids, votes, z, c, class_correct, width)


def _permuted(inputs: StrategyInputs, rng: np.random.Generator) -> StrategyInputs:
    order = np.argsort(rng.random(inputs.ids.shape), axis=1)
    take = lambda a: np.take_along_axis(a, order, axis=1)  # noqa: E731
    return StrategyInputs(
        take(inputs.ids), take(inputs.votes), take(inputs.correctness), take(inputs.confidence),
        inputs.class_correct, inputs.width,
    )  # fmt: skip


def _vote_state(weights: np.ndarray, class_correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: expected correctness of the argmax class (ties averaged; 0 without votes) and
    max W / sum W (NaN where sum W = 0)."""
    top = weights.max(axis=1)
    total = weights.sum(axis=1)
    tied = (weights >= top[:, None] - _TIE_TOLERANCE * np.maximum(top[:, None], 1.0)) & (weights > 0)
    n_tied = tied.sum(axis=1)
    accuracy = np.divide((tied * class_correct).sum(axis=1), n_tied, out=np.zeros(len(top)), where=n_tied > 0)
    ratio = np.divide(top, total, out=np.full(len(top), np.nan), where=total > 0)
    return accuracy, ratio


def _trajectory(inputs: StrategyInputs, weighted: bool) -> tuple[np.ndarray, np.ndarray]:
    """(N, M) expected vote accuracy and max W / sum W after each of the first M responses."""
    n_questions, m = inputs.ids.shape
    weights = np.zeros((n_questions, inputs.width))
    rows = np.arange(n_questions)
    accuracy = np.empty((n_questions, m))
    ratio = np.empty((n_questions, m))
    for i in range(m):
        vote = inputs.confidence[:, i] if weighted else np.ones(n_questions)
        weights[rows, inputs.ids[:, i]] += np.where(inputs.votes[:, i], vote, 0.0)
        accuracy[:, i], ratio[:, i] = _vote_state(weights, inputs.class_correct)
    return accuracy, ratio


def vote_accuracy_by_n(inputs: StrategyInputs, *, weighted: bool) -> np.ndarray:
    """Accuracy of (confidence-weighted if ``weighted``) self-consistency over the first N responses, for
    N = 1..M: an array of M means over questions."""
    return _trajectory(inputs, weighted)[0].mean(axis=0)


def adaptive_self_consistency(
    inputs: StrategyInputs, tau: float, *, weighted: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Adaptive self-consistency for one threshold: per question the expected correctness of the answer
    and the samples used (stop at the first i >= 2 with max W / sum W >= tau, else M)."""
    accuracy, ratio = _trajectory(inputs, weighted)
    return _adaptive_stop(accuracy, ratio, tau)


def _adaptive_stop(accuracy: np.ndarray, ratio: np.ndarray, tau: float) -> tuple[np.ndarray, np.ndarray]:
    n_questions, m = accuracy.shape
    stop = np.zeros((n_questions, m), dtype=bool)
    if m >= 2:
        with np.errstate(invalid="ignore"):
            stop[:, 1:] = ratio[:, 1:] >= tau  # NaN (no votes yet) never stops
    stop[:, -1] = True
    first = np.argmax(stop, axis=1)
    return accuracy[np.arange(n_questions), first], first + 1.0


def early_stopping(
    inputs: StrategyInputs,
    tau: float,
    *,
    fallback: Literal["last", "weighted_vote"] = "last",
    _weighted_vote: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Early-stopping best-of-N for one threshold: per question the correctness of the answer and the
    samples used (the first i with c_i >= tau, else M with the ``fallback`` answer)."""
    if fallback not in ("last", "weighted_vote"):
        raise ValueError(f"fallback must be 'last' or 'weighted_vote', got {fallback!r}")
    n_questions, m = inputs.ids.shape
    confident = inputs.confidence >= tau
    found = confident.any(axis=1)
    first = np.argmax(confident, axis=1)
    rows = np.arange(n_questions)
    if fallback == "last":
        fallback_correct = inputs.correctness[:, -1]
    else:
        votes = _trajectory(inputs, weighted=True)[0] if _weighted_vote is None else _weighted_vote
        fallback_correct = votes[:, -1]
    correct = np.where(found, inputs.correctness[rows, first], fallback_correct)
    used = np.where(found, first + 1.0, float(m))
    return correct, used


def soft_self_consistency(inputs: StrategyInputs) -> np.ndarray:
    """Per question, ``SSC = max_a sum_{i: a(y_i) = a} c_i / sum_i c_i`` over the M responses (parseable
    ones; NaN where no parseable response has c > 0): the soft self-consistency of the weighted vote."""
    return _trajectory(inputs, weighted=True)[1][:, -1]


def self_calibration_curves(
    answers: AnswerClasses,
    correctness: ArrayLike | Sequence[Sequence[int]],
    confidences: ArrayLike | Sequence[Sequence[float]],
    *,
    max_samples: int | None = None,
    taus: Sequence[float] = DEFAULT_TAUS,
    fallback: Literal["last", "weighted_vote"] = "last",
    permutations: int = 0,
    seed: int = 0,
) -> pd.DataFrame:
    """Accuracy against average samples used for every strategy of the module docstring.

    Rows: ``self_consistency`` and ``weighted_self_consistency`` for N = 1..M (``tau`` NaN), and
    ``early_stopping``, ``adaptive_weighted_self_consistency`` and ``adaptive_self_consistency`` for each tau
    (``max_samples`` = M). Columns: strategy, max_samples, tau, accuracy, avg_samples.
    """
    base = prepare_strategy_inputs(answers, correctness, confidences, max_samples)
    taus = [float(t) for t in taus]
    if not taus or any(not np.isfinite(t) for t in taus):
        raise ValueError("taus must be a non-empty sequence of finite thresholds")
    permutations = 0 if permutations == 0 else check_integer(permutations, "permutations")
    rng = np.random.default_rng(seed)
    orders = [base] + [_permuted(base, rng) for _ in range(permutations)]
    m = base.max_samples
    sums: dict[tuple[str, int, float | None], np.ndarray] = {}

    def add(key: tuple[str, int, float | None], accuracy: float, used: float) -> None:
        sums[key] = sums.get(key, np.zeros(2)) + np.array([accuracy, used])

    for inputs in orders:
        vote_plain, ratio_plain = _trajectory(inputs, weighted=False)
        vote_weighted, ratio_weighted = _trajectory(inputs, weighted=True)
        for count in range(1, m + 1):
            add(("self_consistency", count, None), vote_plain[:, count - 1].mean(), count)
            add(("weighted_self_consistency", count, None), vote_weighted[:, count - 1].mean(), count)
        for tau in taus:
            correct, used = early_stopping(inputs, tau, fallback=fallback, _weighted_vote=vote_weighted)
            add(("early_stopping", m, tau), correct.mean(), used.mean())
            for name, accuracy, ratio in (
                ("adaptive_weighted_self_consistency", vote_weighted, ratio_weighted),
                ("adaptive_self_consistency", vote_plain, ratio_plain),
            ):
                correct, used = _adaptive_stop(accuracy, ratio, tau)
                add((name, m, tau), correct.mean(), used.mean())
    rows = [
        {
            "strategy": strategy,
            "max_samples": count,
            "tau": np.nan if tau is None else tau,
            "accuracy": totals[0] / len(orders),
            "avg_samples": totals[1] / len(orders),
        }
        for (strategy, count, tau), totals in sums.items()
    ]
    return pd.DataFrame(rows)
