"""capcal_models.packed_linear: MKL-packed weights give the plain layers' bits, and only inside the block.

- inside ``packed_linears``, a model's output for inputs of the packed row count (and of other row counts) is
  bit-for-bit its output without packing, and the layers run the packed product (counted);
- after the block, the layers are plain again (no packed copy kept);
- with autograd on, or a dtype MKL cannot pack, nothing is packed.
"""

from __future__ import annotations

import pytest
import torch

from capcal_models.packed_linear import packed_linears, packing_is_exact

pytestmark = pytest.mark.skipif(not torch.backends.mkl.is_available(), reason="needs torch with MKL")


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(96, 256),
        torch.nn.SiLU(),
        torch.nn.Linear(256, 96, bias=False),
        torch.nn.Linear(96, 5000),
    ).eval()


def test_packed_layers_give_the_plain_bits_for_every_row_count(monkeypatch):
    if not packing_is_exact([(96, 256), (256, 96), (96, 5000)], 24):
        pytest.skip("MKL's packed product does not give F.linear's bits here: capcal-hf does not pack")
    model = _model()
    inputs = torch.randn(24, 1, 96, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        plain = [model(inputs[:rows]) for rows in (24, 7, 1)]
        calls = []
        packed_product = torch.ops.mkl._mkl_linear
        monkeypatch.setattr(
            torch.ops.mkl,
            "_mkl_linear",
            lambda *args: calls.append(1) or packed_product(*args),
            raising=False,
        )
        with packed_linears(model, 24) as packed:
            assert packed
            inside = [model(inputs[:rows]) for rows in (24, 7, 1)]
        assert len(calls) == 3  # the three layers, at 24 rows only
        after = model(inputs[:24])
    for expected, got in zip(plain, inside, strict=True):
        assert torch.equal(expected, got)
    assert torch.equal(after, plain[0])
    assert all("capcal_packed_weight" not in m.__dict__ and "forward" not in m.__dict__ for m in model)


def test_nothing_is_packed_with_autograd_or_in_bfloat16():
    model = _model()
    with packed_linears(model, 8) as packed:
        assert not packed
    with torch.inference_mode(), packed_linears(model.to(torch.bfloat16), 8) as packed:
        assert not packed
