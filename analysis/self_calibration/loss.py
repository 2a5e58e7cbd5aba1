"""The loss of Self-Calibration training: ``confidence + lm_weight * lm`` on a micro-batch (``selfcal_loss``:
SmoothL1 between P("Yes") and the SSC target, cross-entropy on the response's tokens), and its mean over
examples without gradient (``mean_loss``, the before/after figures)."""

from __future__ import annotations

from typing import Any

from analysis.self_calibration.encoding import collator
from analysis.self_calibration.train_config import TrainConfig

__all__ = ["mean_loss", "selfcal_loss"]


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


def mean_loss(
    model: Any, examples: list[dict], pad_id: int, config: TrainConfig, batch_size: int = 8
) -> dict | None:
    """The loss and its parts averaged over ``examples`` (confidence examples and, for tuples with one,
    their causal-LM example; no gradient; dropout off): before/after figures. None without examples."""
    import torch

    if not examples:
        return None
    collate = collator(pad_id)
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
