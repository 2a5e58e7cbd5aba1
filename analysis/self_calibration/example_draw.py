"""Which tuples an epoch of Self-Calibration training sees: the method's per-bucket draw of confidence
examples and its share of causal-LM examples from one budget, the held-out validation questions, and the
epoch cut to whole optimisation steps (``plan_epoch``). Pure numpy, seeded; the formulas with the method's
lines are in each docstring and in :mod:`analysis.self_calibration.train`'s."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from analysis.self_calibration.data import SelfCalibrationDataError
from analysis.self_calibration.train_config import BUCKET_WIDTH, METHOD_SCHEDULE, TrainConfig

__all__ = [
    "EpochPlan",
    "balanced_indices",
    "bucket_slots",
    "draw_examples",
    "plan_epoch",
    "split_validation",
    "target_buckets",
]


def bucket_slots(width: float = BUCKET_WIDTH) -> int:
    """The method's number of target slots, ``len(numpy.arange(0, 1 + width, width))`` (21 at 0.05;
    ``model_training/train.py`` line 188)."""
    return len(np.arange(0, 1.0 + width, width))


def target_buckets(targets: Sequence[float], width: float = BUCKET_WIDTH) -> np.ndarray:
    """The method's bucket of each target: ``min(t // width, slots - 1)`` with Python's floating-point
    floor division (``model_training/train.py`` line 218), so ``1.0 // 0.05`` = 19: SSC = 1 shares the
    bucket [0.95, 1)."""
    slots = bucket_slots(width)
    return np.array([int(min(float(t) // width, slots - 1)) for t in targets], dtype=int)


def balanced_indices(
    targets: Sequence[float], count: int, seed: int, width: float = BUCKET_WIDTH
) -> list[int]:
    """``count`` tuple indices drawn *with* replacement, balanced over target buckets (``target_buckets``):
    each draw picks a non-empty bucket uniformly, then a tuple of it uniformly
    (``numpy.random.default_rng(seed)``). Not the method's draw (``draw_examples`` is); kept as an option."""
    values = np.asarray(targets, dtype=float)
    if values.size == 0:
        raise ValueError("no targets to balance")
    buckets = target_buckets(values, width)
    members = [np.flatnonzero(buckets == b) for b in range(bucket_slots(width))]
    members = [m for m in members if m.size]
    rng = np.random.default_rng(seed)
    chosen = rng.integers(0, len(members), size=count)
    return [int(members[b][rng.integers(0, members[b].size)]) for b in chosen]


def _natural(indices: np.ndarray, count: int, rng: np.random.Generator) -> list[int]:
    """``count`` of ``indices`` as they are: seeded shuffles, repeated as needed."""
    if not indices.size or count <= 0:
        return []
    rounds = -(-count // indices.size)
    return [int(i) for _ in range(rounds) for i in rng.permutation(indices)][:count]


def draw_examples(
    targets: Sequence[float],
    lm_flags: Sequence[bool],
    config: TrainConfig,
    budget: int | None = None,
) -> dict[str, list[int]]:
    """The tuples of one epoch: ``{"confidence": [...], "lm": [...]}`` (tuple indices).

    Default (``balanced``, not ``with_replacement``), the method's draw (``model_training/train.py`` lines
    213-233): per bucket ``min(size, cap)`` tuples without replacement, ``cap = floor(B (1 - r) / slots)``,
    and ``min(lm tuples, floor(B r))`` causal-LM examples without replacement; B = ``budget`` (default
    ``config.examples_per_epoch``), r = ``causal_lm_ratio``. Without a budget, ``cap = ceil(n / slots)``
    for n tuples and every LM tuple is drawn (the method's budget is a fraction of hundreds of thousands of
    tuples; on a few hundred its formula gives a cap of 0 or 1). ``with_replacement``: ``B (1 - r)`` draws
    of ``balanced_indices``; not ``balanced``: ``B (1 - r)`` tuples as the data are (B default
    ``ceil(n / (1 - r))``). Seeded by ``config.seed``."""
    values = np.asarray(targets, dtype=float)
    flags = np.asarray(lm_flags, dtype=bool)
    if values.size == 0 or values.size != flags.size:
        raise ValueError(f"{values.size} targets and {flags.size} LM flags: need equal, non-zero counts")
    ratio = config.causal_lm_ratio
    budget = budget or config.examples_per_epoch
    slots = bucket_slots(config.bucket_width)
    cap = int(budget * (1.0 - ratio) // slots) if budget else math.ceil(values.size / slots)
    budget = budget or math.ceil(values.size / (1.0 - ratio))
    confidence_count = int(budget * (1.0 - ratio))
    rng = np.random.default_rng(config.seed)
    if not config.balanced:
        confidence = _natural(np.arange(values.size), confidence_count, rng)
    elif config.with_replacement:
        confidence = balanced_indices(values, confidence_count, config.seed, config.bucket_width)
    else:
        buckets = target_buckets(values, config.bucket_width)
        confidence = []
        for bucket in range(slots):
            members = np.flatnonzero(buckets == bucket)
            if members.size and cap > 0:
                confidence += [
                    int(i) for i in rng.choice(members, size=min(members.size, cap), replace=False)
                ]
    lm_members = np.flatnonzero(flags)
    lm_count = min(lm_members.size, int(budget * ratio))
    lm = [int(i) for i in rng.choice(lm_members, size=lm_count, replace=False)] if lm_count else []
    return {"confidence": confidence, "lm": lm}


def split_validation(tuples: Sequence[dict], fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """(training, validation) tuple indices: ``round(fraction * questions)`` questions (at least one when
    ``fraction`` > 0 and there are two or more) held out whole, chosen by a seeded permutation."""
    questions = sorted({t["question_id"] for t in tuples})
    held = int(round(fraction * len(questions)))
    if fraction > 0 and len(questions) > 1:
        held = min(max(held, 1), len(questions) - 1)
    chosen = set(np.random.default_rng(seed).permutation(questions)[:held].tolist()) if held else set()
    training = [i for i, t in enumerate(tuples) if t["question_id"] not in chosen]
    validation = [i for i, t in enumerate(tuples) if t["question_id"] in chosen]
    return training, validation


def _epoch_examples(examples: list[dict], drawn: dict[str, list[int]], seed: int) -> list[dict]:
    """The drawn confidence and causal-LM examples in one seeded shuffle."""
    rows = [{**examples[i], "lm": None, "confidence": True} for i in drawn["confidence"]]
    for i in drawn["lm"]:
        lm = examples[i]["lm"]
        rows.append({"input_ids": lm["input_ids"], "labels": lm["labels"], "yes_id": examples[i]["yes_id"],
                     "target": -1.0, "lm": None, "confidence": False})  # fmt: skip
    order = np.random.default_rng(seed).permutation(len(rows))
    return [rows[i] for i in order]


@dataclass(frozen=True)
class EpochPlan:
    """One epoch's examples and the schedule's length: ``drawn`` (kind -> indices into the tuples, from
    ``draw_examples``), ``epoch`` (the shuffled examples, cut to whole optimisation steps unless
    ``max_steps`` is set), ``dropped`` (how many the cut left out) and ``schedule_micro_batches`` (the
    method's cosine length in micro-batches; None with another ``lr_scheduler_type``)."""

    drawn: dict[str, list[int]]
    epoch: list[dict]
    dropped: int
    schedule_micro_batches: int | None


def plan_epoch(examples: Sequence[dict], training: Sequence[int], config: TrainConfig) -> EpochPlan:
    """Draw the epoch's examples from the ``training`` tuples (``draw_examples``) and count its schedule.

    Raises ``SelfCalibrationDataError`` when fewer examples are drawn than one optimisation step takes."""
    drawn_local = draw_examples(
        [examples[i]["target"] for i in training], [examples[i]["lm"] is not None for i in training], config
    )
    drawn = {kind: [training[i] for i in indices] for kind, indices in drawn_local.items()}
    epoch = _epoch_examples(examples, drawn, config.seed)
    window = config.train_batch_size * config.gradient_accumulation_steps
    micro_batches = math.ceil(len(epoch) / config.train_batch_size)  # the method's len(dataloader)
    kept = len(epoch) - len(epoch) % window if config.max_steps <= 0 else len(epoch)
    if kept == 0:
        raise SelfCalibrationDataError(
            f"{len(epoch)} examples drawn, fewer than one optimisation step ({config.train_batch_size} x "
            f"{config.gradient_accumulation_steps}); raise examples_per_epoch or lower the batch"
        )
    total_micro = None
    if config.lr_scheduler_type == METHOD_SCHEDULE:
        steps = config.max_steps if config.max_steps > 0 else None
        total_micro = (
            steps * config.gradient_accumulation_steps if steps else math.ceil(config.epochs * micro_batches)
        )
    return EpochPlan(drawn, epoch[:kept], len(epoch) - kept, total_micro)
