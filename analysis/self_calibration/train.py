r"""Self-Calibration training: LoRA fine-tuning on SSC targets with transformers' ``Trainer``.

Huang et al. 2025 ("Efficient Test-Time Scaling via Self-Calibration", arXiv 2503.00031), on the tuples of
:mod:`analysis.self_calibration.data`. Each tuple's ``context`` is the text the self-check scored (prompt,
response, "Is the answer correct? (Yes/No)", generation prompt); one forward pass gives both losses:

- confidence loss: ``SmoothL1_beta(P("Yes"), SSC)``, P("Yes") = softmax of the last position's logits at the
  token of ``yes_text`` (not renormalised against "No"), beta 0.25;
- language-modelling loss: causal-LM cross-entropy on the response's tokens, for tuples whose SSC exceeds the
  threshold (``lm_loss``), averaged over those tokens in the batch and weighted 0.1 (the paper divides it
  by 10).

Defaults are the paper's: LoRA r 32, alpha 16, dropout 0.05 on ``q_proj`` and ``v_proj``; AdamW, learning
rate 5e-5, cosine schedule; batch 1 with gradient accumulation 64; one epoch. The epoch is drawn balanced
over targets: 21 buckets of width 0.05 (the last holds SSC = 1), each draw picks a non-empty bucket
uniformly, then a tuple in it (seeded). Differences from the paper: the paper draws causal-LM and
confidence examples as separate examples from one budget (70 % / 30 %); here a kept response's LM loss rides
on its confidence example.

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
    "TrainConfig",
    "TrainResult",
    "balanced_indices",
    "encode_tuples",
    "selfcal_loss",
    "train_self_calibration",
]

BUCKET_WIDTH = 0.05


@dataclass
class TrainConfig:
    """Every setting of :func:`train_self_calibration` (defaults: the paper's, module docstring)."""

    lora_r: int = 32
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    target_modules: tuple[str, ...] = ("q_proj", "v_proj")
    learning_rate: float = 5e-5
    lr_scheduler_type: str = "cosine"
    warmup_steps: int = 0
    weight_decay: float = 0.0
    train_batch_size: int = 1
    gradient_accumulation_steps: int = 64
    epochs: float = 1.0
    max_steps: int = -1  # > 0 overrides epochs
    smooth_l1_beta: float = 0.25
    lm_weight: float = 0.1
    balanced: bool = True
    bucket_width: float = BUCKET_WIDTH
    examples_per_epoch: int | None = None  # examples drawn for the epoch (default: the number of tuples)
    max_length: int = 1024
    loss_eval_examples: int = 64  # tuples (seeded draw) on which the loss is measured before and after
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
            "train_batch_size": self.train_batch_size >= 1,
            "gradient_accumulation_steps": self.gradient_accumulation_steps >= 1,
            "epochs": self.epochs > 0,
            "smooth_l1_beta": self.smooth_l1_beta > 0,
            "lm_weight": self.lm_weight >= 0,
            "bucket_width": 0 < self.bucket_width <= 1,
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


def balanced_indices(
    targets: Sequence[float], count: int, seed: int, width: float = BUCKET_WIDTH
) -> list[int]:
    """``count`` tuple indices drawn with replacement, balanced over target buckets of ``width`` (bucket
    ``floor(t / width)``; t = 1 in the last): each draw picks a non-empty bucket uniformly, then a tuple
    of it uniformly (``numpy.random.default_rng(seed)``)."""
    values = np.asarray(targets, dtype=float)
    if values.size == 0:
        raise ValueError("no targets to balance")
    n_buckets = int(math.ceil(1.0 / width - 1e-9)) + 1
    buckets = np.minimum((values / width + 1e-9).astype(int), n_buckets - 1)
    members = [np.flatnonzero(buckets == b) for b in range(n_buckets)]
    members = [m for m in members if m.size]
    rng = np.random.default_rng(seed)
    chosen = rng.integers(0, len(members), size=count)
    return [int(members[b][rng.integers(0, members[b].size)]) for b in chosen]


def encode_tuples(tuples: Sequence[dict], tokenizer: Any, max_length: int) -> list[dict]:
    """Tokenised examples: ``input_ids`` of the context, ``labels`` (-100 except the response's tokens of
    an ``lm_loss`` tuple), ``yes_id`` (``yes_text`` must be one token), ``target`` (SSC). A context longer
    than ``max_length`` tokens or a multi-token ``yes_text`` raises ``SelfCalibrationDataError``."""
    examples = []
    yes_ids: dict[str, int] = {}
    for number, item in enumerate(tuples, start=1):
        yes_text = item["yes_text"].strip()
        if yes_text not in yes_ids:
            ids = tokenizer(yes_text, add_special_tokens=False)["input_ids"]
            if len(ids) != 1:
                raise SelfCalibrationDataError(f"tuple {number}: yes_text {yes_text!r} is {len(ids)} tokens")
            yes_ids[yes_text] = ids[0]
        encoded = tokenizer(item["context"], add_special_tokens=False, return_offsets_mapping=True)
        input_ids = list(encoded["input_ids"])
        if len(input_ids) > max_length:
            raise SelfCalibrationDataError(
                f"tuple {number} (question {item['question_id']}): {len(input_ids)} tokens, more than "
                f"max_length {max_length}"
            )
        labels = [-100] * len(input_ids)
        if item["lm_loss"]:
            start, end = item["response_start"], item["response_end"]
            for position, (low, high) in enumerate(encoded["offset_mapping"]):
                if high > start and low < end:
                    labels[position] = input_ids[position]
        examples.append(
            {
                "input_ids": input_ids,
                "labels": labels,
                "yes_id": yes_ids[yes_text],
                "target": float(item["ssc"]),
            }
        )
    return examples


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
        }

    return collate


def selfcal_loss(model: Any, inputs: dict, beta: float, lm_weight: float) -> tuple[Any, dict[str, float]]:
    """The training loss of one batch (module docstring) and its parts (``confidence``, ``lm``, mean
    ``p_yes``). ``inputs``: a batch of the collator (right padding)."""
    import torch
    import torch.nn.functional as F

    outputs = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
    logits = outputs.logits
    rows = torch.arange(logits.shape[0], device=logits.device)
    last = logits[rows, inputs["last_index"]].float()
    p_yes = torch.softmax(last, dim=-1)[rows, inputs["yes_id"]]
    confidence = F.smooth_l1_loss(p_yes, inputs["target"].to(p_yes.dtype), beta=beta)
    labels = inputs["labels"][:, 1:]
    tokens = (labels != -100).sum()
    if tokens > 0 and lm_weight > 0:
        lm = F.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100,
            reduction="sum",
        ) / tokens  # fmt: skip
    else:
        lm = torch.zeros((), device=logits.device)
    loss = confidence + lm_weight * lm
    parts = {"confidence_loss": float(confidence.detach()), "lm_loss": float(lm.detach()),
             "p_yes": float(p_yes.detach().mean())}  # fmt: skip
    return loss, parts


def _trainer_class():
    from transformers import Trainer

    class SelfCalibrationTrainer(Trainer):
        """``Trainer`` with Self-Calibration's loss (``selfcal_loss``); logs its parts beside ``loss``."""

        def __init__(self, *args: Any, beta: float, lm_weight: float, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.beta, self.lm_weight = beta, lm_weight
            self._parts: dict[str, list[float]] = {}

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # noqa: ANN001
            loss, parts = selfcal_loss(model, inputs, self.beta, self.lm_weight)
            for key, value in parts.items():
                self._parts.setdefault(key, []).append(value)
            return (loss, None) if return_outputs else loss

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
) -> dict:
    """The loss and its parts averaged over ``examples`` (no gradient; dropout off): before/after figures."""
    import torch

    collate = _collate(pad_id)
    was_training = model.training
    model.eval()
    totals: dict[str, float] = {}
    with torch.no_grad():
        for start in range(0, len(examples), batch_size):
            batch = examples[start : start + batch_size]
            loss, parts = selfcal_loss(model, collate(batch), config.smooth_l1_beta, config.lm_weight)
            for key, value in {"loss": float(loss), **parts}.items():
                totals[key] = totals.get(key, 0.0) + value * len(batch)
    model.train(was_training)
    return {key: value / len(examples) for key, value in totals.items()}


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
    loss before and after training on ``loss_eval_examples`` tuples (a seeded draw, not balanced).
    ``callbacks`` go to ``Trainer``.
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainingArguments, set_seed
    from transformers.trainer_utils import get_last_checkpoint

    config = config or TrainConfig()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    tuples = read_training_data(data)
    set_seed(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(base_model))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    examples = encode_tuples(tuples, tokenizer, config.max_length)
    count = config.examples_per_epoch or len(examples)
    if config.balanced:
        order = balanced_indices([e["target"] for e in examples], count, config.seed, config.bucket_width)
    else:  # the natural distribution: a seeded shuffle, repeated as needed for ``count`` examples
        rng = np.random.default_rng(config.seed)
        order = [int(i) for _ in range(-(-count // len(examples))) for i in rng.permutation(len(examples))][
            :count
        ]
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
    probe = np.random.default_rng(config.seed).permutation(len(examples))[: config.loss_eval_examples]
    probe_examples = [examples[i] for i in sorted(probe)]
    before = mean_loss(model, probe_examples, pad_id, config) if evaluate_loss else None
    checkpoints = output_dir / "checkpoints"
    arguments = TrainingArguments(
        output_dir=str(checkpoints),
        per_device_train_batch_size=config.train_batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        learning_rate=config.learning_rate,
        lr_scheduler_type=config.lr_scheduler_type,
        warmup_steps=config.warmup_steps,
        weight_decay=config.weight_decay,
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
    trainer = _trainer_class()(
        model=model,
        args=arguments,
        train_dataset=_dataset([examples[i] for i in order]),
        data_collator=_collate(pad_id),
        callbacks=list(callbacks),
        beta=config.smooth_l1_beta,
        lm_weight=config.lm_weight,
    )
    last = get_last_checkpoint(str(checkpoints)) if resume and checkpoints.is_dir() else None
    started = time.monotonic()
    output = trainer.train(resume_from_checkpoint=last)
    seconds = time.monotonic() - started
    steps_this_run = trainer.state.global_step - (_checkpoint_step(last) if last else 0)
    after = mean_loss(model, probe_examples, pad_id, config) if evaluate_loss else None
    adapter_dir, merged_dir = output_dir / "adapter", output_dir / "merged"
    model.save_pretrained(str(adapter_dir))
    tokenizer.save_pretrained(str(adapter_dir))
    merged = model.merge_and_unload()
    merged.to(base_dtype if isinstance(base_dtype, torch.dtype) else torch.float32)
    merged.save_pretrained(str(merged_dir), safe_serialization=True)
    tokenizer.save_pretrained(str(merged_dir))
    summary = {
        "method": "Self-Calibration training (Huang et al. 2025, arXiv 2503.00031)",
        "base_model": str(base_model),
        "data": str(Path(data)),
        "tuples": len(examples),
        "lm_tuples": sum(1 for t in tuples if t["lm_loss"]),
        "examples_per_epoch": len(order),
        "config": asdict(config),
        "resumed_from": last,
        "global_step": trainer.state.global_step,
        "steps_this_run": steps_this_run,
        "train_seconds_this_run": round(seconds, 2),
        "seconds_per_step": round(seconds / steps_this_run, 3) if steps_this_run else None,
        "train_loss": float(output.training_loss),
        "loss_before": before,
        "loss_after": after,
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
