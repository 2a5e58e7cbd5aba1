r"""Self-Calibration training: LoRA fine-tuning on SSC targets with transformers' ``Trainer``.

This module wires the parts together (the trainer with the method's loss and schedule, checkpoints and
resumption, adapter and merged outputs); the parts live beside it: the settings in
:mod:`analysis.self_calibration.train_config`, which tuples an epoch sees in
:mod:`analysis.self_calibration.example_draw`, tokenised examples and batches in
:mod:`analysis.self_calibration.encoding`, the loss in :mod:`analysis.self_calibration.loss`.

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

from analysis.self_calibration.data import read_training_data
from analysis.self_calibration.encoding import collator, encode_tuples, padding_id
from analysis.self_calibration.example_draw import plan_epoch, split_validation
from analysis.self_calibration.loss import mean_loss, selfcal_loss
from analysis.self_calibration.train_config import METHOD_SCHEDULE, TrainConfig

__all__ = [
    "METHOD_SCHEDULE",
    "TrainConfig",
    "TrainResult",
    "lora_config",
    "method_lr_factor",
    "train_self_calibration",
    "training_arguments",
]


@dataclass(frozen=True)
class TrainResult:
    """Where the outputs are, and the run's figures (``summary`` is ``training.json``)."""

    output_dir: Path
    adapter_dir: Path
    merged_dir: Path
    summary: dict[str, Any] = field(default_factory=dict)


def method_lr_factor(step: int, micro_batches: int) -> float:
    """The method's learning-rate factor at optimisation step ``step``: ``(1 + cos(pi step / T)) / 2`` with
    T = ``micro_batches`` (``CosineAnnealingLR(T_max=epochs * len(dataloader))``, stepped once per
    optimisation step: ``model_training/train.py`` lines 383 and 530)."""
    return 0.5 * (1.0 + math.cos(math.pi * min(step, micro_batches) / max(micro_batches, 1)))


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


def lora_config(config: TrainConfig) -> Any:
    """peft's ``LoraConfig`` of ``config``: a causal-LM adapter of rank ``lora_r``, scale ``lora_alpha``
    (peft multiplies the update by ``lora_alpha / lora_r``), dropout ``lora_dropout``, on the modules named
    in ``target_modules`` (the method's: r 32, alpha 16, dropout 0.05, ``q_proj`` and ``v_proj``)."""
    from peft import LoraConfig

    return LoraConfig(
        task_type="CAUSAL_LM",
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.target_modules),
    )


def training_arguments(config: TrainConfig, checkpoints: Path, method_schedule: bool) -> Any:
    """transformers' ``TrainingArguments`` of ``config``, checkpoints under ``checkpoints``; with
    ``method_schedule`` the method's cosine is the trainer's own (counted in micro-batches), so ``Trainer``'s
    scheduler stays constant, else ``config.lr_scheduler_type`` is ``Trainer``'s schedule."""
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
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed
    from transformers.trainer_utils import get_last_checkpoint

    config = config or TrainConfig()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    tuples = read_training_data(data)
    set_seed(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(base_model))
    pad_id = padding_id(tokenizer)
    examples = encode_tuples(tuples, tokenizer, config.max_length)
    training, validation = split_validation(tuples, config.validation_fraction, config.seed)
    plan = plan_epoch(examples, training, config)
    drawn, epoch = plan.drawn, plan.epoch
    model = AutoModelForCausalLM.from_pretrained(str(base_model), dtype=torch.float32)
    base_dtype = getattr(model.config, "dtype", None) or torch.float32
    model = get_peft_model(model, lora_config(config))
    probe = np.random.default_rng(config.seed).permutation(training)[: config.loss_eval_examples]
    probe_examples = [examples[i] for i in sorted(probe)]
    validation_examples = [examples[i] for i in validation]
    before = mean_loss(model, probe_examples, pad_id, config) if evaluate_loss else None
    validation_before = mean_loss(model, validation_examples, pad_id, config) if evaluate_loss else None
    checkpoints = output_dir / "checkpoints"
    arguments = training_arguments(
        config, checkpoints, method_schedule=plan.schedule_micro_batches is not None
    )
    trainer = _trainer_class()(
        model=model,
        args=arguments,
        train_dataset=_dataset(epoch),
        data_collator=collator(pad_id),
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
