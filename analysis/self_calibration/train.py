r"""Self-Calibration training: LoRA fine-tuning on SSC targets with transformers' ``Trainer``.

Huang et al. 2025 ("Efficient Test-Time Scaling via Self-Calibration", arXiv 2503.00031; code
``Chengsong-Huang/Self-Calibration``, ``model_training/train.py``), on the tuples of
:mod:`analysis.self_calibration.data`. Two kinds of example, drawn from one budget B
(``examples_per_epoch``) as the method draws them:

- **confidence examples** (share ``1 - causal_lm_ratio``): the text the self-check scored (prompt,
  response, "Is the answer correct? (Yes/No)", generation prompt); loss ``SmoothL1_beta(P("Yes"), SSC)``,
  P("Yes") = softmax of the last position's logits at the token of ``yes_text`` (not renormalised against
  "No"), beta 0.25. Drawn per target bucket: bucket ``min(floor(SSC / w), S - 1)`` with the method's
  S = len(arange(0, 1 + w, w)) = 21 slots of width w = 0.05 (floating-point floor division, so SSC = 1.0
  falls in the bucket [0.95, 1)), each bucket contributing ``min(size, cap)`` tuples *without* replacement,
  ``cap = floor(B (1 - causal_lm_ratio) / S)``;
- **causal-LM examples** (share ``causal_lm_ratio``, 0.7): the sampling prompt, the response and the
  end-of-sequence token, for tuples whose SSC exceeds the data's threshold (``lm_loss``);
  ``min(available, floor(B causal_lm_ratio))`` drawn without replacement; cross-entropy on the response's
  tokens and the end-of-sequence token only, averaged over those tokens and weighted ``lm_weight`` 0.1 (the
  method divides it by 10).

The loss of a micro-batch is ``confidence + lm_weight * lm`` (each the mean over its examples of the
batch); the loss passed to backward is that divided by the number of micro-batches in the accumulation
window (``Trainer`` with ``loss_is_scaled_for_ga = False``), so a step's gradient is the mean over its
window, and the logged ``loss`` is the mean per micro-batch (per example at batch 1). No gradient clipping
unless ``max_grad_norm`` > 0. The learning rate follows the method's schedule (``lr_scheduler_type``
``micro_batch_cosine``): ``lr * (1 + cos(pi s / T)) / 2`` at optimisation step s with T the number of
*micro-batches* (the method's ``CosineAnnealingLR(T_max=epochs * len(dataloader))`` stepped once per
optimisation step), so with 64 accumulation steps the rate stays within 0.1 % of its start; any
``transformers`` schedule name gives that schedule instead. AdamW with weight decay 0.01 (``torch``'s
default, which the method uses). An epoch ends at the last full accumulation window (the method never
applies a partial one). ``validation_fraction`` of the questions (0.1, the method's 90/10 split) are held
out; the loss on them is measured before and after training.

Defaults are the method's: LoRA r 32, alpha 16, dropout 0.05 on ``q_proj`` and ``v_proj``; AdamW,
learning rate 5e-5; batch 1 with gradient accumulation 64; one epoch. Departures, each deliberate, are
listed in docs/self-calibration.md beside the method's file and line.

``Trainer`` gives the progress bar, checkpoints every ``save_steps`` optimisation steps (LoRA weights,
optimiser, scheduler, RNG states) and resumption from the last checkpoint in ``output_dir/checkpoints``
after a kill. Output: ``adapter/`` (peft), ``merged/`` (the adapter merged into the base model:
safetensors, tokenizer, chat template; loads with ``pretrained=`` in ``hf``, ``capcal-hf`` and
``capcal-vllm``) and ``training.json`` (settings, data, steps, seconds per step, loss history).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.self_calibration.data import SelfCalibrationDataError, read_training_data

__all__ = [
    "METHOD_SCHEDULE",
    "EpochPlan",
    "TrainConfig",
    "TrainResult",
    "balanced_indices",
    "bucket_slots",
    "draw_examples",
    "encode_tuples",
    "method_lr_factor",
    "plan_epoch",
    "selfcal_loss",
    "split_validation",
    "target_buckets",
    "train_self_calibration",
]

BUCKET_WIDTH = 0.05
METHOD_SCHEDULE = "micro_batch_cosine"
SAMPLINGS = ("bucket_cap", "bucket_uniform", "natural")


@dataclass
class TrainConfig:
    """Every setting of :func:`train_self_calibration` (defaults: the method's, module docstring)."""

    lora_r: int = 32
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    target_modules: tuple[str, ...] = ("q_proj", "v_proj")
    learning_rate: float = 5e-5
    lr_scheduler_type: str = METHOD_SCHEDULE  # or a transformers schedule name ("cosine", "linear", ...)
    warmup_steps: int = 0
    weight_decay: float = 0.01  # torch.optim.AdamW's default, as the method runs it
    max_grad_norm: float = 0.0  # 0: no clipping (the method clips nothing)
    train_batch_size: int = 1
    gradient_accumulation_steps: int = 64
    epochs: float = 1.0
    max_steps: int = -1  # > 0 overrides epochs
    smooth_l1_beta: float = 0.25
    lm_weight: float = 0.1
    causal_lm_ratio: float = 0.7  # share of the budget for causal-LM examples
    balanced: bool = True  # draw confidence examples per target bucket (false: as the data are)
    with_replacement: bool = False  # balanced draws: each draw a uniform non-empty bucket (not the method)
    bucket_width: float = BUCKET_WIDTH
    examples_per_epoch: int | None = (
        None  # budget B; default: tuples / (1 - causal_lm_ratio), so cap ~ n / 21
    )
    validation_fraction: float = 0.1  # questions held out for the validation loss (the method: 10 %)
    max_length: int = 1024
    loss_eval_examples: int = 64  # training tuples (seeded draw) on which the loss is measured before/after
    save_steps: int = 50
    save_total_limit: int = 2
    logging_steps: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        checks = {
            "lora_r": self.lora_r >= 1,
            "lora_alpha": self.lora_alpha > 0,
            "lora_dropout": 0.0 <= self.lora_dropout < 1.0,
            "learning_rate": self.learning_rate > 0,
            "weight_decay": self.weight_decay >= 0,
            "max_grad_norm": self.max_grad_norm >= 0,
            "train_batch_size": self.train_batch_size >= 1,
            "gradient_accumulation_steps": self.gradient_accumulation_steps >= 1,
            "epochs": self.epochs > 0,
            "smooth_l1_beta": self.smooth_l1_beta > 0,
            "lm_weight": self.lm_weight >= 0,
            "causal_lm_ratio": 0.0 <= self.causal_lm_ratio < 1.0,
            "bucket_width": 0 < self.bucket_width <= 1,
            "examples_per_epoch": self.examples_per_epoch is None or self.examples_per_epoch >= 1,
            "validation_fraction": 0.0 <= self.validation_fraction < 1.0,
            "save_steps": self.save_steps >= 1,
            "max_length": self.max_length >= 8,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(
                f"invalid training setting(s): {', '.join(f'{b}={getattr(self, b)!r}' for b in bad)}"
            )
        if not self.target_modules:
            raise ValueError("target_modules must name at least one module")
        self.target_modules = tuple(self.target_modules)


@dataclass(frozen=True)
class TrainResult:
    """Where the outputs are, and the run's figures (``summary`` is ``training.json``)."""

    output_dir: Path
    adapter_dir: Path
    merged_dir: Path
    summary: dict[str, Any] = field(default_factory=dict)


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


def method_lr_factor(step: int, micro_batches: int) -> float:
    """The method's learning-rate factor at optimisation step ``step``: ``(1 + cos(pi step / T)) / 2`` with
    T = ``micro_batches`` (``CosineAnnealingLR(T_max=epochs * len(dataloader))``, stepped once per
    optimisation step: ``model_training/train.py`` lines 383 and 530)."""
    return 0.5 * (1.0 + math.cos(math.pi * min(step, micro_batches) / max(micro_batches, 1)))


def encode_tuples(tuples: Sequence[dict], tokenizer: Any, max_length: int) -> list[dict]:
    """Tokenised confidence examples, one per tuple: ``input_ids`` of the context, ``labels`` (all -100),
    ``yes_id`` (``yes_text`` must be one token), ``target`` (SSC), ``lm`` (a causal-LM example of the tuple,
    ``{"input_ids", "labels"}``: the context up to the response's end plus the end-of-sequence token, labels
    on the response's tokens and that token; None for a tuple without ``lm_loss``). A context longer than
    ``max_length`` tokens or a multi-token ``yes_text`` raises ``SelfCalibrationDataError``."""
    examples = []
    yes_ids: dict[str, int] = {}
    eos = tokenizer.eos_token or ""
    for number, item in enumerate(tuples, start=1):
        yes_text = item["yes_text"].strip()
        if yes_text not in yes_ids:
            ids = tokenizer(yes_text, add_special_tokens=False)["input_ids"]
            if len(ids) != 1:
                raise SelfCalibrationDataError(f"tuple {number}: yes_text {yes_text!r} is {len(ids)} tokens")
            yes_ids[yes_text] = ids[0]
        input_ids = list(tokenizer(item["context"], add_special_tokens=False)["input_ids"])
        if len(input_ids) > max_length:
            raise SelfCalibrationDataError(
                f"tuple {number} (question {item['question_id']}): {len(input_ids)} tokens, more than "
                f"max_length {max_length}"
            )
        lm = None
        if item["lm_loss"]:
            start, end = item["response_start"], item["response_end"]
            text = item["context"][:end] + eos
            encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
            ids = list(encoded["input_ids"])
            labels = [
                ids[k] if high > start and low < len(text) else -100
                for k, (low, high) in enumerate(encoded["offset_mapping"])
            ]
            lm = {"input_ids": ids[:max_length], "labels": labels[:max_length]}
        examples.append(
            {
                "input_ids": input_ids,
                "labels": [-100] * len(input_ids),
                "yes_id": yes_ids[yes_text],
                "target": float(item["ssc"]),
                "lm": lm,
            }
        )
    return examples


def _epoch_examples(examples: list[dict], drawn: dict[str, list[int]], seed: int) -> list[dict]:
    """The drawn confidence and causal-LM examples in one seeded shuffle."""
    rows = [{**examples[i], "lm": None, "confidence": True} for i in drawn["confidence"]]
    for i in drawn["lm"]:
        lm = examples[i]["lm"]
        rows.append({"input_ids": lm["input_ids"], "labels": lm["labels"], "yes_id": examples[i]["yes_id"],
                     "target": -1.0, "lm": None, "confidence": False})  # fmt: skip
    order = np.random.default_rng(seed).permutation(len(rows))
    return [rows[i] for i in order]


def _collate(pad_id: int):
    import torch

    def collate(batch: list[dict]) -> dict:
        width = max(len(b["input_ids"]) for b in batch)
        pad = lambda values, fill: values + [fill] * (width - len(values))  # noqa: E731
        return {
            "input_ids": torch.tensor([pad(b["input_ids"], pad_id) for b in batch]),
            "attention_mask": torch.tensor([pad([1] * len(b["input_ids"]), 0) for b in batch]),
            "labels": torch.tensor([pad(b["labels"], -100) for b in batch]),
            "last_index": torch.tensor([len(b["input_ids"]) - 1 for b in batch]),
            "yes_id": torch.tensor([b["yes_id"] for b in batch]),
            "target": torch.tensor([b["target"] for b in batch], dtype=torch.float32),
            "confidence": torch.tensor([b.get("confidence", True) for b in batch], dtype=torch.bool),
        }

    return collate


def selfcal_loss(model: Any, inputs: dict, beta: float, lm_weight: float) -> tuple[Any, dict[str, float]]:
    """The training loss of one micro-batch, ``confidence + lm_weight * lm`` (module docstring), and its
    parts (``confidence_loss``: mean SmoothL1 over the batch's confidence examples; ``lm_loss``: mean
    cross-entropy over the labelled tokens; mean ``p_yes``). ``inputs``: a batch of the collator (right
    padding)."""
    import torch
    import torch.nn.functional as F

    outputs = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
    logits = outputs.logits
    zero = torch.zeros((), device=logits.device)
    rows = inputs["confidence"].nonzero().flatten()
    if rows.numel():
        last = logits[rows, inputs["last_index"][rows]].float()
        p_yes = torch.softmax(last, dim=-1)[torch.arange(rows.numel()), inputs["yes_id"][rows]]
        confidence = F.smooth_l1_loss(p_yes, inputs["target"][rows].to(p_yes.dtype), beta=beta)
    else:
        p_yes, confidence = None, zero
    labels = inputs["labels"][:, 1:]
    tokens = (labels != -100).sum()
    if tokens > 0 and lm_weight > 0:
        lm = F.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100,
            reduction="sum",
        ) / tokens  # fmt: skip
    else:
        lm = zero
    loss = confidence + lm_weight * lm
    parts = {"confidence_loss": float(confidence.detach()), "lm_loss": float(lm.detach())}
    if p_yes is not None:
        parts["p_yes"] = float(p_yes.detach().mean())
    return loss, parts


def _trainer_class():
    from transformers import Trainer

    class SelfCalibrationTrainer(Trainer):
        """``Trainer`` with Self-Calibration's loss (``selfcal_loss``), divided by the accumulation window
        (``loss_is_scaled_for_ga = False``); logs its parts beside ``loss``; the method's schedule."""

        loss_is_scaled_for_ga = False  # compute_loss returns the micro-batch mean: Trainer divides by GA

        def __init__(
            self, *args: Any, beta: float, lm_weight: float, micro_batches: int | None, **kwargs: Any
        ):
            super().__init__(*args, **kwargs)
            self.beta, self.lm_weight, self.micro_batches = beta, lm_weight, micro_batches
            self._parts: dict[str, list[float]] = {}

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # noqa: ANN001
            loss, parts = selfcal_loss(model, inputs, self.beta, self.lm_weight)
            for key, value in parts.items():
                self._parts.setdefault(key, []).append(value)
            return (loss, None) if return_outputs else loss

        def create_scheduler(self, num_training_steps: int, optimizer: Any = None) -> Any:
            if self.micro_batches is None:
                return super().create_scheduler(num_training_steps, optimizer)
            from torch.optim.lr_scheduler import LambdaLR

            if self.lr_scheduler is None:
                total, warmup = self.micro_batches, self.args.warmup_steps

                def factor(step: int) -> float:
                    ramp = step / warmup if warmup and step < warmup else 1.0
                    return ramp * method_lr_factor(step, total)

                self.lr_scheduler = LambdaLR(self.optimizer if optimizer is None else optimizer, factor)
                self._created_lr_scheduler = True
            return self.lr_scheduler

        def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
            if "loss" in logs and self._parts:
                logs.update({key: float(np.mean(values)) for key, values in self._parts.items()})
                self._parts = {}
            super().log(logs, *args, **kwargs)

    return SelfCalibrationTrainer


def _dataset(examples: list[dict]):
    from torch.utils.data import Dataset

    class Examples(Dataset):
        def __len__(self) -> int:
            return len(examples)

        def __getitem__(self, index: int) -> dict:
            return examples[index]

    return Examples()


def mean_loss(
    model: Any, examples: list[dict], pad_id: int, config: TrainConfig, batch_size: int = 8
) -> dict | None:
    """The loss and its parts averaged over ``examples`` (confidence examples and, for tuples with one,
    their causal-LM example; no gradient; dropout off): before/after figures. None without examples."""
    import torch

    if not examples:
        return None
    collate = _collate(pad_id)
    was_training = model.training
    model.eval()
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    lm_rows = [{"input_ids": e["lm"]["input_ids"], "labels": e["lm"]["labels"], "yes_id": e["yes_id"],
                "target": -1.0, "confidence": False} for e in examples if e["lm"]]  # fmt: skip
    confidence_rows = [{**e, "confidence": True} for e in examples]
    with torch.no_grad():
        for rows, key in ((confidence_rows, "confidence_loss"), (lm_rows, "lm_loss")):
            for start in range(0, len(rows), batch_size):
                batch = rows[start : start + batch_size]
                _, parts = selfcal_loss(
                    model, collate(batch), config.smooth_l1_beta, max(config.lm_weight, 1.0)
                )
                for name in (key, "p_yes") if key == "confidence_loss" else (key,):
                    sums[name] = sums.get(name, 0.0) + parts[name] * len(batch)
                    counts[name] = counts.get(name, 0) + len(batch)
    model.train(was_training)
    out = {name: sums[name] / counts[name] for name in sums}
    out.setdefault("lm_loss", 0.0)
    out["loss"] = out["confidence_loss"] + config.lm_weight * out["lm_loss"]
    out["examples"] = len(examples)
    return out


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


def _training_arguments(config: TrainConfig, checkpoints: Path, method_schedule: bool) -> Any:
    """transformers' ``TrainingArguments`` of ``config``; the method's cosine is the trainer's own (counted
    in micro-batches), so ``Trainer``'s scheduler stays constant then."""
    import torch
    from transformers import TrainingArguments

    return TrainingArguments(
        output_dir=str(checkpoints),
        per_device_train_batch_size=config.train_batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        learning_rate=config.learning_rate,
        lr_scheduler_type="constant" if method_schedule else config.lr_scheduler_type,
        warmup_steps=config.warmup_steps,
        weight_decay=config.weight_decay,
        max_grad_norm=config.max_grad_norm,
        num_train_epochs=config.epochs,
        max_steps=config.max_steps,
        logging_steps=config.logging_steps,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=config.save_total_limit,
        seed=config.seed,
        data_seed=config.seed,
        optim="adamw_torch",
        report_to=[],
        remove_unused_columns=False,
        use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0,
    )


def train_self_calibration(
    data: str | Path,
    base_model: str | Path,
    output_dir: str | Path,
    config: TrainConfig | None = None,
    *,
    resume: bool = True,
    callbacks: Sequence[Any] = (),
    evaluate_loss: bool = True,
) -> TrainResult:
    """Train a LoRA adapter on the tuples in ``data`` (a ``train.jsonl`` or its folder) starting from the
    checkpoint ``base_model``; write ``adapter/``, ``merged/`` and ``training.json`` under ``output_dir``.

    With ``resume`` (default) a run restarts from the last checkpoint in ``output_dir/checkpoints`` (same
    data and settings; ``Trainer`` skips the batches already seen). ``evaluate_loss``: also record the mean
    loss before and after training on the held-out validation questions (``validation_fraction``) and on
    ``loss_eval_examples`` training tuples (a seeded draw). ``callbacks`` go to ``Trainer``.
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed
    from transformers.trainer_utils import get_last_checkpoint

    config = config or TrainConfig()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    tuples = read_training_data(data)
    set_seed(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(base_model))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    examples = encode_tuples(tuples, tokenizer, config.max_length)
    training, validation = split_validation(tuples, config.validation_fraction, config.seed)
    plan = plan_epoch(examples, training, config)
    drawn, epoch = plan.drawn, plan.epoch
    model = AutoModelForCausalLM.from_pretrained(str(base_model), dtype=torch.float32)
    base_dtype = getattr(model.config, "dtype", None) or torch.float32
    lora = LoraConfig(
        task_type="CAUSAL_LM",
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.target_modules),
    )
    model = get_peft_model(model, lora)
    probe = np.random.default_rng(config.seed).permutation(training)[: config.loss_eval_examples]
    probe_examples = [examples[i] for i in sorted(probe)]
    validation_examples = [examples[i] for i in validation]
    before = mean_loss(model, probe_examples, pad_id, config) if evaluate_loss else None
    validation_before = mean_loss(model, validation_examples, pad_id, config) if evaluate_loss else None
    checkpoints = output_dir / "checkpoints"
    arguments = _training_arguments(
        config, checkpoints, method_schedule=plan.schedule_micro_batches is not None
    )
    trainer = _trainer_class()(
        model=model,
        args=arguments,
        train_dataset=_dataset(epoch),
        data_collator=_collate(pad_id),
        callbacks=list(callbacks),
        beta=config.smooth_l1_beta,
        lm_weight=config.lm_weight,
        micro_batches=plan.schedule_micro_batches,
    )
    last = get_last_checkpoint(str(checkpoints)) if resume and checkpoints.is_dir() else None
    started = time.monotonic()
    output = trainer.train(resume_from_checkpoint=last)
    seconds = time.monotonic() - started
    steps_this_run = trainer.state.global_step - (_checkpoint_step(last) if last else 0)
    after = mean_loss(model, probe_examples, pad_id, config) if evaluate_loss else None
    validation_after = mean_loss(model, validation_examples, pad_id, config) if evaluate_loss else None
    adapter_dir, merged_dir = output_dir / "adapter", output_dir / "merged"
    model.save_pretrained(str(adapter_dir))
    tokenizer.save_pretrained(str(adapter_dir))
    merged = model.merge_and_unload()
    merged.to(base_dtype if isinstance(base_dtype, torch.dtype) else torch.float32)
    merged.save_pretrained(str(merged_dir), safe_serialization=True)
    tokenizer.save_pretrained(str(merged_dir))
    confidence_targets = [examples[i]["target"] for i in drawn["confidence"]]
    summary = {
        "method": "Self-Calibration training (Huang et al. 2025, arXiv 2503.00031)",
        "base_model": str(base_model),
        "data": str(Path(data)),
        "tuples": len(examples),
        "lm_tuples": sum(1 for t in tuples if t["lm_loss"]),
        "training_tuples": len(training),
        "validation_tuples": len(validation),
        "validation_questions": len({tuples[i]["question_id"] for i in validation}),
        "confidence_examples": len(drawn["confidence"]),
        "confidence_examples_distinct": len(set(drawn["confidence"])),
        "confidence_examples_mean_target": float(np.mean(confidence_targets)) if confidence_targets else None,
        "lm_examples": len(drawn["lm"]),
        "examples_per_epoch": len(epoch),
        "examples_dropped_at_epoch_end": plan.dropped,
        "schedule_micro_batches": plan.schedule_micro_batches,
        "config": asdict(config),
        "resumed_from": last,
        "global_step": trainer.state.global_step,
        "steps_this_run": steps_this_run,
        "train_seconds_this_run": round(seconds, 2),
        "seconds_per_step": round(seconds / steps_this_run, 3) if steps_this_run else None,
        "train_loss": float(output.training_loss),
        "loss_before": before,
        "loss_after": after,
        "validation_loss_before": validation_before,
        "validation_loss_after": validation_after,
        "log_history": trainer.state.log_history,
    }
    (output_dir / "training.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (merged_dir / "selfcal_training.json").write_text(
        json.dumps({k: v for k, v in summary.items() if k != "log_history"}, indent=2, default=str) + "\n"
    )
    return TrainResult(output_dir, adapter_dir, merged_dir, summary)


def _checkpoint_step(path: str) -> int:
    try:
        return int(Path(path).name.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return 0
