"""Linear layers with MKL-prepacked weights for decoding steps of a fixed number of rows (CPU, float32).

A decoding step multiplies a few dozen rows by every weight matrix of the model. MKL's ``sgemm`` repacks the
weight matrix on every call; ``cblas_sgemm_pack`` packs it once (``torch.ops.mkl._mkl_reorder_linear_weight``)
and ``torch.ops.mkl._mkl_linear`` multiplies with the packed copy. For the packed row count the products have
the same bits as ``torch.nn.functional.linear`` (probed per layer shape before use; see ``packing_is_exact``),
so packing changes the speed of capcal-hf's decoding and none of its samples (on the machine of 2026-11-23,
64 rows of SmolLM2: 15.2 s -> 13.0 s for a whole run, ``benchmarks/decoding_profile.py --no-packing``).

The packed copies take about as much memory as the weights, so they are made only when they fit in a quarter
of the memory available (``MemAvailable``), and dropped when the ``packed_linears`` block ends.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from pathlib import Path

import torch

__all__ = ["packed_linears", "packing_is_exact"]

_EXACT: dict[tuple, bool] = {}


def _available_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _linears(model: torch.nn.Module) -> list[torch.nn.Linear]:
    return [module for module in model.modules() if type(module) is torch.nn.Linear]


def packing_is_exact(shapes: list[tuple[int, int]], rows: int) -> bool:
    """Whether ``_mkl_linear`` with weights packed for ``rows`` rows gives the bits of ``F.linear``.

    Probed once per (shapes, rows) on random float32 weights (outputs capped at 2,048 columns), at ``rows``
    rows and, because a packed weight may be called with fewer, at every row count down to one.
    """
    key = (tuple(sorted(set(shapes))), rows)
    if key not in _EXACT:
        exact = torch.backends.mkl.is_available()
        generator = torch.Generator().manual_seed(0)
        for in_features, out_features in key[0]:
            if not exact:
                break
            weight = torch.randn(min(out_features, 2048), in_features, generator=generator)
            inputs = torch.randn(rows, in_features, generator=generator)
            try:
                packed = torch.ops.mkl._mkl_reorder_linear_weight(weight, rows)
                exact = all(
                    torch.equal(
                        torch.ops.mkl._mkl_linear(inputs[:count], packed, weight, None, rows),
                        torch.nn.functional.linear(inputs[:count], weight),
                    )
                    for count in range(rows, 0, -1)
                )
            except (RuntimeError, AttributeError):
                exact = False
        _EXACT[key] = exact
    return _EXACT[key]


def _packed_forward(module: torch.nn.Linear, inputs: torch.Tensor) -> torch.Tensor:
    if inputs.numel() // module.in_features == module.capcal_packed_rows:
        return torch.ops.mkl._mkl_linear(
            inputs, module.capcal_packed_weight, module.weight, module.bias, module.capcal_packed_rows
        )
    return torch.nn.functional.linear(inputs, module.weight, module.bias)


@contextlib.contextmanager
def packed_linears(model: torch.nn.Module, rows: int) -> Iterator[bool]:
    """Within the block, the model's ``nn.Linear`` layers multiply inputs of exactly ``rows`` rows with
    MKL-packed copies of their weights; other inputs as before. Yields whether it packed.

    It packs only on CPU, in float32, without autograd, when ``packing_is_exact`` and when the copies fit in
    a quarter of the available memory; otherwise the block runs the layers unchanged.
    """
    linears = _linears(model)
    weight_bytes = sum(module.weight.numel() * module.weight.element_size() for module in linears)
    available = _available_bytes()
    usable = (
        bool(linears)
        and rows > 0
        and all(m.weight.device.type == "cpu" and m.weight.dtype == torch.float32 for m in linears)
        and not torch.is_grad_enabled()
        and available is not None
        and weight_bytes <= available // 4
        and packing_is_exact([(m.in_features, m.out_features) for m in linears], rows)
    )
    if not usable:
        yield False
        return
    try:
        for module in linears:
            module.capcal_packed_weight = torch.ops.mkl._mkl_reorder_linear_weight(module.weight, rows)
            module.capcal_packed_rows = rows
            module.forward = types.MethodType(_packed_forward, module)
        yield True
    finally:
        for module in linears:
            for name in ("forward", "capcal_packed_weight", "capcal_packed_rows"):
                module.__dict__.pop(name, None)
