"""The tokenised examples of Self-Calibration training (``encode_tuples``: a confidence example per tuple and
its causal-LM example) and their batches (``collator``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from analysis.self_calibration.data import SelfCalibrationDataError

__all__ = ["collator", "encode_tuples", "padding_id"]


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


def padding_id(tokenizer: Any) -> int:
    """The id the collator pads with: the tokenizer's pad token, else its end-of-sequence token (padding is
    on the right, masked out and labelled -100, so any id works; a tokenizer with neither is refused)."""
    for name in ("pad_token_id", "eos_token_id"):
        value = getattr(tokenizer, name, None)
        if value is not None:
            return int(value)
    raise SelfCalibrationDataError("the tokenizer has neither a padding nor an end-of-sequence token")


def collator(pad_id: int) -> Callable[[list[dict]], dict]:
    """The batches of encoded examples (``encode_tuples``): right padding with ``pad_id``, an attention mask,
    labels padded with -100, each row's ``last_index`` (where P("Yes") is read), ``yes_id``, ``target`` and
    ``confidence`` (False for a causal-LM example)."""
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
