"""``selfcal_loss`` on a batch of the collator, against the loss written out here with numpy: P("Yes") is the
softmax at each confidence row's last real token, the confidence loss the mean SmoothL1 (``beta``) against its
SSC target, the LM loss the mean cross-entropy of each labelled token predicted from the token before it,
``confidence + lm_weight * lm``. The model is a lookup table (logits of a token = its row), so every number
is known."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from analysis.self_calibration.encoding import collator
from analysis.self_calibration.loss import selfcal_loss

VOCAB = 6
TABLE = np.random.default_rng(5).normal(0.0, 1.5, size=(VOCAB, VOCAB))
PAD = 5


class LookupModel(torch.nn.Module):
    """Logits at a position: ``TABLE[token]`` (the next token depends only on the current one)."""

    def forward(self, input_ids, attention_mask):  # noqa: ANN001
        from types import SimpleNamespace

        assert attention_mask.shape == input_ids.shape
        return SimpleNamespace(logits=torch.tensor(TABLE, dtype=torch.float32)[input_ids])


def _softmax(row: np.ndarray) -> np.ndarray:
    e = np.exp(row - row.max())
    return e / e.sum()


def _smooth_l1(x: float, y: float, beta: float) -> float:
    d = abs(x - y)
    return 0.5 * d * d / beta if d < beta else d - 0.5 * beta


BATCH = [
    {"input_ids": [0, 1, 2], "labels": [-100] * 3, "yes_id": 3, "target": 0.9, "confidence": True},
    {"input_ids": [4, 2], "labels": [-100] * 2, "yes_id": 1, "target": 0.2, "confidence": True},
    {
        "input_ids": [2, 0, 3, 1],
        "labels": [-100, 0, 3, -100],
        "yes_id": 3,
        "target": -1.0,
        "confidence": False,
    },
]


def _expected(beta: float, lm_weight: float) -> tuple[float, float, float, float]:
    p_yes = [_softmax(TABLE[row["input_ids"][-1]])[row["yes_id"]] for row in BATCH[:2]]
    confidence = float(
        np.mean([_smooth_l1(p, row["target"], beta) for p, row in zip(p_yes, BATCH, strict=False)])
    )
    # the LM row's labelled tokens 0 (at 1) and 3 (at 2), each predicted from the token before it
    ids = BATCH[2]["input_ids"]
    lm = -np.mean([np.log(_softmax(TABLE[ids[k - 1]])[ids[k]]) for k in (1, 2)])
    return confidence + lm_weight * lm, confidence, float(lm), float(np.mean(p_yes))


@pytest.mark.parametrize(("beta", "lm_weight"), [(1.0, 1.0), (0.05, 0.3), (0.5, 0.0)])
def test_the_loss_and_its_parts_are_the_formula(beta: float, lm_weight: float) -> None:
    inputs = collator(PAD)(BATCH)
    loss, parts = selfcal_loss(LookupModel(), inputs, beta, lm_weight)
    total, confidence, lm, p_yes = _expected(beta, lm_weight)
    assert float(loss) == pytest.approx(total, rel=1e-5)
    assert parts["confidence_loss"] == pytest.approx(confidence, rel=1e-5)
    assert parts["lm_loss"] == pytest.approx(lm if lm_weight > 0 else 0.0, rel=1e-5)
    assert parts["p_yes"] == pytest.approx(p_yes, rel=1e-5)


def test_a_batch_without_confidence_rows_has_no_p_yes_and_only_the_lm_loss() -> None:
    inputs = collator(PAD)(BATCH[2:])
    loss, parts = selfcal_loss(LookupModel(), inputs, 1.0, 2.0)
    _, _, lm, _ = _expected(1.0, 2.0)
    assert "p_yes" not in parts and parts["confidence_loss"] == 0.0
    assert float(loss) == pytest.approx(2.0 * lm, rel=1e-5)


def test_the_mean_loss_of_examples_averages_each_part_over_its_own_rows() -> None:
    """``mean_loss`` (the before/after figures): the confidence loss and P("Yes") averaged over every
    example's confidence row, the LM loss over the examples that have a causal-LM part (their own ids and
    labels), ``loss = confidence + lm_weight * lm`` with the config's weight; batches of 1 give the same
    means; the model is left in the mode it was in."""
    from analysis.self_calibration.loss import mean_loss
    from analysis.self_calibration.train_config import TrainConfig

    lm_part = {key: BATCH[2][key] for key in ("input_ids", "labels")}
    examples = [
        {key: BATCH[0][key] for key in ("input_ids", "labels", "yes_id", "target")} | {"lm": lm_part},
        {key: BATCH[1][key] for key in ("input_ids", "labels", "yes_id", "target")} | {"lm": None},
    ]
    config = TrainConfig(smooth_l1_beta=0.05, lm_weight=0.3)
    _, confidence, lm, p_yes = _expected(0.05, 0.3)
    model = LookupModel().train()
    for batch_size in (8, 1):
        out = mean_loss(model, examples, PAD, config, batch_size=batch_size)
        assert out["confidence_loss"] == pytest.approx(confidence, rel=1e-5)
        assert out["p_yes"] == pytest.approx(p_yes, rel=1e-5)
        assert out["lm_loss"] == pytest.approx(lm, rel=1e-5)
        assert out["loss"] == pytest.approx(confidence + 0.3 * lm, rel=1e-5)
        assert out["examples"] == 2 and model.training
    assert mean_loss(model, [], PAD, config) is None
