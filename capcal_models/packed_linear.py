"""Linear layers with MKL-prepacked weights for the decoding steps of capcal-hf (CPU, float32).

A decoding step multiplies a few dozen rows by every weight matrix of the model. MKL's ``sgemm`` repacks the
weight matrix on every call; ``cblas_sgemm_pack`` packs it once for a given row count
(``torch.ops.mkl._mkl_reorder_linear_weight``) and ``torch.ops.mkl._mkl_linear`` multiplies inputs of exactly
that row count with the packed copy. For that row count the products have the same bits as
``torch.nn.functional.linear`` (probed per layer shape before use; see ``packing_is_exact``).

Decoding steps have varying row counts (rows finish, the last prompts have fewer samples), so
``packed_linears`` packs for a few *buckets* of row counts: an input of M rows runs at the smallest bucket
B >= M, with B - M zero rows added and their outputs dropped. Every output row is a product of its own input
row only, and from the batch-invariance floor on (``capcal_models.decoding.batch_invariant_rows``) a row's
bits do not depend on the row count: so a row gets the bits of ``F.linear`` on the unpadded input, and
packing changes the speed of capcal-hf's decoding and none of its samples (measured on this machine in
``benchmarks/decoding_profile.py --no-packing``; docs/benchmarks.md).

Packing a model's weights costs about as much as two or three steps' products, and pays only over many
steps: the largest bucket (the batch at full size, most of a run's steps) is packed at its first use, a
smaller one at its ``PACK_AFTER_USES``-th (a short phase of fewer rows runs the plain products). Copies are
made only while all of them fit in a quarter of the memory available (``MemAvailable``) and in
``MAX_COPIES`` times the weights, and every copy is dropped when the ``packed_linears`` block ends.
"""

from __future__ import annotations

import bisect
import contextlib
import types
from collections import Counter
from collections.abc import Iterator, Sequence

import torch

from capcal_models import linux_proc

__all__ = ["packed_linears", "packing_is_exact", "packing_pays", "row_buckets"]

PACK_AFTER_USES = 8  # uses of a smaller bucket before its weights are packed
MAX_COPIES = 3  # packed copies of the weights at most, whatever the memory available
_EXACT: dict[tuple, bool] = {}


def packing_pays() -> bool:
    """Whether decoding with packed weights is faster on this CPU: on Intel CPUs (MKL is Intel's library).

    Measured with ``benchmarks/decoding_profile.py --questions 6 --k 16`` (capcal-hf's decoding loop, same
    samples either way): on an Intel Xeon packing cut the run from 24.7 to 20.8 s; on an AMD EPYC it made it
    longer, 42.6 -> 48.5 s (the weight products alone 30.8 -> 35.9 s). ``packed_linears`` itself packs on any
    CPU where ``packing_is_exact``; capcal-hf's decoding asks this first.
    """
    return linux_proc.cpu_vendor() == "GenuineIntel"


def _linears(model: torch.nn.Module) -> list[torch.nn.Linear]:
    return [module for module in model.modules() if type(module) is torch.nn.Linear]


def packing_is_exact(shapes: list[tuple[int, int]], rows: int) -> bool:
    """Whether ``_mkl_linear`` with weights packed for ``rows`` rows gives the bits of ``F.linear`` on inputs
    of ``rows`` rows. Probed once per (shapes, rows) on random float32 weights (outputs capped at 2,048
    columns)."""
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
                exact = torch.equal(
                    torch.ops.mkl._mkl_linear(inputs, packed, weight, None, rows),
                    torch.nn.functional.linear(inputs, weight),
                )
            except (RuntimeError, AttributeError):
                exact = False
        _EXACT[key] = exact
    return _EXACT[key]


def row_buckets(rows: int, min_rows: int) -> list[int]:
    """The row counts to pack for steps of at most ``rows`` rows: ``rows``, 3/4 and 1/2 of it, then 3/4 and
    1/2 of that and so on (rounded up), none below ``min_rows``; ascending. Less than a third of a padded
    product's rows are padding (33 rows run at 48)."""
    buckets, size = set(), rows
    while size >= min_rows:
        buckets.update(b for b in (size, -(-3 * size // 4)) if b >= min_rows)
        if size == 1:
            break
        size = -(-size // 2)
    return sorted(buckets)


class _Packing:
    """The buckets of one ``packed_linears`` block: which are exact, and the memory left for copies."""

    def __init__(self, buckets: list[int], min_rows: int, shapes: list[tuple[int, int]], budget: int) -> None:
        self.buckets, self.min_rows, self.shapes, self.budget = buckets, min_rows, shapes, budget
        self.usable: dict[int, bool] = {}

    def bucket(self, rows: int) -> int | None:
        """The bucket that runs an input of ``rows`` rows, or None (plain ``F.linear``)."""
        if rows < self.min_rows or rows > self.buckets[-1]:
            return None
        bucket = self.buckets[bisect.bisect_left(self.buckets, rows)]
        if bucket not in self.usable:
            self.usable[bucket] = packing_is_exact(self.shapes, bucket)
        return bucket if self.usable[bucket] else None

    def uses_before_packing(self, bucket: int) -> int:
        return 1 if bucket == self.buckets[-1] else PACK_AFTER_USES

    def reserve(self, module: torch.nn.Linear) -> bool:
        """Whether a packed copy of ``module``'s weight fits in the memory left (and if so, counts it)."""
        size = module.weight.numel() * module.weight.element_size()
        if size > self.budget:
            return False
        self.budget -= size
        return True


def _packed_forward(module: torch.nn.Linear, inputs: torch.Tensor) -> torch.Tensor:
    packing: _Packing = module.capcal_packing
    rows = inputs.numel() // module.in_features
    bucket = packing.bucket(rows)
    packed = module.capcal_packed.get(bucket)
    if bucket is not None and packed is None:
        module.capcal_bucket_calls[bucket] += 1
        uses = module.capcal_bucket_calls[bucket]
        if uses >= packing.uses_before_packing(bucket) and packing.reserve(module):
            packed = torch.ops.mkl._mkl_reorder_linear_weight(module.weight, bucket)
            module.capcal_packed[bucket] = packed
    if packed is None:
        return torch.nn.functional.linear(inputs, module.weight, module.bias)
    flat = inputs.reshape(rows, module.in_features)
    if rows < bucket:
        flat = torch.cat([flat, flat.new_zeros(bucket - rows, module.in_features)])
    output = torch.ops.mkl._mkl_linear(flat, packed, module.weight, module.bias, bucket)
    return output[:rows].reshape(*inputs.shape[:-1], module.out_features)


@contextlib.contextmanager
def packed_linears(model: torch.nn.Module, rows: int | Sequence[int], min_rows: int) -> Iterator[bool]:
    """Within the block, the model's ``nn.Linear`` layers multiply inputs of M rows, ``min_rows`` <= M <=
    the largest of ``rows``, with MKL-packed copies of their weights for the smallest of ``rows`` >= M (zero
    rows added); other inputs as before. ``min_rows`` must be at least the model's batch-invariance floor.
    Yields whether packing is possible.

    It packs only on CPU, in float32, without autograd, for buckets where ``packing_is_exact``, and while the
    copies fit in a quarter of the available memory and in ``MAX_COPIES`` times the weights; otherwise the
    layers run unchanged.
    """
    linears = _linears(model)
    buckets = sorted({rows} if isinstance(rows, int) else set(rows))
    buckets = [bucket for bucket in buckets if bucket >= max(1, min_rows)]
    available = linux_proc.available_memory_bytes()
    usable = (
        bool(linears)
        and bool(buckets)
        and torch.backends.mkl.is_available()
        and all(m.weight.device.type == "cpu" and m.weight.dtype == torch.float32 for m in linears)
        and not torch.is_grad_enabled()
        and available is not None
    )
    if not usable:
        yield False
        return
    shapes = [(m.in_features, m.out_features) for m in linears]
    weight_bytes = sum(m.weight.numel() * m.weight.element_size() for m in linears)
    packing = _Packing(buckets, max(1, min_rows), shapes, min(available // 4, MAX_COPIES * weight_bytes))
    try:
        for module in linears:
            module.capcal_packing = packing
            module.capcal_packed = {}
            module.capcal_bucket_calls = Counter()
            module.forward = types.MethodType(_packed_forward, module)
        yield True
    finally:
        for module in linears:
            for name in ("forward", "capcal_packing", "capcal_packed", "capcal_bucket_calls"):
                module.__dict__.pop(name, None)
