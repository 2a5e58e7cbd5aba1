"""The settings of Self-Calibration training (``TrainConfig``: the method's defaults, checked when made) and
the constants they name; the method and its departures are in :mod:`analysis.self_calibration.train`."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BUCKET_WIDTH", "METHOD_SCHEDULE", "SAMPLINGS", "TrainConfig"]

BUCKET_WIDTH = 0.05
METHOD_SCHEDULE = "micro_batch_cosine"
SAMPLINGS = ("bucket_cap", "bucket_uniform", "natural")


@dataclass
class TrainConfig:
    """Every setting of :func:`analysis.self_calibration.train.train_self_calibration` (defaults: the
    method's, ``analysis.self_calibration.train``'s docstring)."""

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
