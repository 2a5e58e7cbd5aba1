"""A transformers KV cache in which the rows sampling from one prompt share that prompt's keys and values.

Decoding k samples of a prompt with transformers' ``DynamicCache`` means k copies of the prompt's KV cache:
k times the memory, k times the memory traffic of every attention step, and a concatenation that copies the
whole cache at every step (on this CPU, 64 rows of 800-token prompts spent 65% of a step copying and much of
the rest in attention over the copies). ``SharedPrefixCache`` keeps

- the prompt part once per prompt, at its exact length (``PrefixStack`` of ``PromptPrefix``);
- the generated part per row, preallocated: each layer ``(rows, kv_heads, capacity, head_dim)``, written in
  place one column per step; rows are right-aligned (all rows write column ``length``; a row that joined later
  has fewer valid columns).

Attention runs through transformers' ``AttentionInterface`` under the name ``capcal_shared_prefix``
(``shared_prefix_attention``): per row, scores against its prompt's keys and against its own generated
tokens, one softmax over both. Every product item has the row's own exact lengths (consecutive rows of one
prompt with equally many generated tokens are batched as items of one product: ``row_runs``), so a row's
attention does not change in the last bits with the rest of the batch (products over padded tensors, or with
rows folded into the matrix dimension, round differently with the padded length and the number of rows).
Sliding-window layers (Gemma-3, Mistral) attend to the row's last ``sliding_window`` positions only, as
transformers' sliding-window mask; ``unsupported_attention`` names what a model needs that this attention does
not implement. Use ``decoding_attention`` to switch a model to it for a forward pass.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from transformers import AttentionInterface
from transformers.cache_utils import Cache, DynamicLayer
from transformers.masking_utils import AttentionMaskInterface

__all__ = [
    "ATTENTION_NAME",
    "PrefixStack",
    "PromptPrefix",
    "SharedPrefixCache",
    "RowRun",
    "attention_implementation",
    "batched_attention",
    "decoding_attention",
    "fixed_rows_bmm",
    "row_runs",
    "shared_prefix_attention",
    "unsupported_attention",
]

ATTENTION_NAME = "capcal_shared_prefix"
# Rows of queries per product with a prompt's keys or values (``fixed_rows_bmm``): 16 rows of one prompt.
PRODUCT_ROWS = 16
SUPPORTED_LAYER_TYPES = frozenset({"full_attention", "sliding_attention"})


def unsupported_attention(config) -> str | None:
    """Why ``shared_prefix_attention`` cannot decode a model with this (transformers) config exactly, or None.

    It runs causal full-attention and sliding-window layers (``layer_types``, e.g. Gemma-3's five sliding
    layers per full one). It refuses other layer types (chunked, linear or recurrent layers), attention logit
    soft-capping (Gemma-2), bidirectional attention and key/value sharing across layers (Gemma-3n).
    """
    text_config = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    layer_types = set(getattr(text_config, "layer_types", None) or ["full_attention"])
    reasons = []
    if layer_types - SUPPORTED_LAYER_TYPES:
        reasons.append(f"layer types {sorted(layer_types - SUPPORTED_LAYER_TYPES)}")
    if getattr(text_config, "attn_logit_softcapping", None) is not None:
        reasons.append("attention logit soft-capping")
    if getattr(text_config, "use_bidirectional_attention", False):
        reasons.append("bidirectional attention")
    if getattr(text_config, "num_kv_shared_layers", 0):
        reasons.append("key/value sharing across layers")
    return "; ".join(reasons) or None


@dataclass(eq=False)
class PromptPrefix:
    """The keys and values of one prefilled prompt: one ``(1, kv_heads, prompt_len, head_dim)`` per layer."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]

    @property
    def length(self) -> int:
        return self.keys[0].shape[-2]


class PrefixStack:
    """The prompts of a batch (each kept at its exact length) and their lengths; with ``padded``, also each
    layer's keys and values of all prompts in one ``(prompts, kv_heads, longest, head_dim)`` tensor (zeros
    after a prompt's end), for ``batched_attention``."""

    def __init__(self, prefixes: list[PromptPrefix], padded: bool = False) -> None:
        if not prefixes:
            raise ValueError("PrefixStack: no prompts")
        self.prefixes = list(prefixes)
        reference = prefixes[0].keys[0]
        self.lengths = torch.tensor([prefix.length for prefix in prefixes], device=reference.device)
        self.padded_keys: list[torch.Tensor] = []
        self.padded_values: list[torch.Tensor] = []
        if padded:
            longest = max(prefix.length for prefix in prefixes)
            for layer in range(len(reference_keys := prefixes[0].keys)):
                shape = (
                    len(prefixes),
                    *reference_keys[layer].shape[1:2],
                    longest,
                    reference_keys[layer].shape[3],
                )
                keys = reference_keys[layer].new_zeros(shape)
                values = prefixes[0].values[layer].new_zeros(shape)
                for index, prefix in enumerate(prefixes):
                    keys[index, :, : prefix.length] = prefix.keys[layer][0]
                    values[index, :, : prefix.length] = prefix.values[layer][0]
                self.padded_keys.append(keys)
                self.padded_values.append(values)


class _GeneratedLayer(DynamicLayer):
    """One layer's generated-token keys and values in preallocated buffers; ``update`` writes in place.

    The generated columns start at column ``offset`` of the buffers (``batched_attention``'s caches keep each
    row's padded prompt in the columns before, and attend over the whole buffers, masked: ``keys``/``values``
    are then the buffers themselves, no view per step); otherwise ``keys``/``values`` are the buffers up to
    the last generated column."""

    def __init__(
        self, key_buffer: torch.Tensor, value_buffer: torch.Tensor, length: int, offset: int = 0
    ) -> None:
        super().__init__()
        self.key_buffer, self.value_buffer = key_buffer, value_buffer
        self.dtype, self.device = key_buffer.dtype, key_buffer.device
        self.is_initialized = True
        self.offset = offset
        self._set_length(length)

    def _set_length(self, length: int) -> None:
        self.length = length
        if self.offset:
            self.keys, self.values = self.key_buffer, self.value_buffer
        else:
            self.keys = self.key_buffer[:, :, :length]
            self.values = self.value_buffer[:, :, :length]

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        start = self.offset + self.length
        end = start + key_states.shape[-2]
        if end > self.key_buffer.shape[-2]:
            raise RuntimeError(f"SharedPrefixCache: capacity {self.key_buffer.shape[-2]} exceeded")
        self.key_buffer[:, :, start:end] = key_states
        self.value_buffer[:, :, start:end] = value_states
        self._set_length(end - self.offset)
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length


class SharedPrefixCache(Cache):
    """Decoding cache of a batch of rows: a shared ``PrefixStack`` plus each row's generated tokens.

    ``prompt_index[b]``: which prompt of the stack row b continues. ``generated[b]``: how many of its
    generated tokens are cached (right-aligned in the generated buffers).
    """

    def __init__(
        self,
        prefix: PrefixStack,
        prompt_index: torch.Tensor,
        generated_keys: list[torch.Tensor],
        generated_values: list[torch.Tensor],
        generated: torch.Tensor,
        length: int,
        runs: list[RowRun] | None = None,
    ) -> None:
        pairs = zip(generated_keys, generated_values, strict=True)
        # a padded stack: each row's prompt is in its buffers' first columns (``batched_attention``)
        self.prompt_columns = prefix.padded_keys[0].shape[-2] if prefix.padded_keys else 0
        layers = [_GeneratedLayer(keys, values, length, self.prompt_columns) for keys, values in pairs]
        super().__init__(layers=layers)
        self.prefix = prefix
        self.prompt_index = prompt_index
        self._generated_at_start = generated.clone()
        self._length_at_start = length
        self.attention_calls = 0
        # the runs of rows as assembled (``row_runs``, generated counts as of ``length``): every row gains one
        # token per step, so the runs stay the same until the batch is assembled again. None: read from the
        # device at each step's first layer.
        self._runs_at_start = runs
        self.row_runs: list[RowRun] = []  # this step's runs of rows (``row_runs``)
        # ``batched_attention``'s masks of this step, by sliding window (None: full attention)
        self.step_masks: dict[int | None, torch.Tensor] = {}
        # ``batched_attention``'s columns over the whole capacity: attended to, positions, position offset
        self.full_mask: torch.Tensor | None = None
        self.positions: torch.Tensor | None = None
        self.current_position: torch.Tensor | None = None
        self.column_index: torch.Tensor | None = None

    @property
    def rows(self) -> int:
        return len(self.prompt_index)

    @property
    def length(self) -> int:
        return self.layers[0].length

    @property
    def generated(self) -> torch.Tensor:
        """Cached generated tokens per row."""
        return self._generated_at_start + (self.length - self._length_at_start)

    def position_ids(self) -> torch.Tensor:
        """``(rows, 1)`` positions of the next token of each row."""
        return (self.prefix.lengths[self.prompt_index] + self.generated)[:, None]

    def kept_rows(self, rows: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
        """The generated keys/values (trimmed to their longest) and counts of the given rows (indices)."""
        generated = self.generated[rows]
        first = self.length - int(generated.max())
        columns = slice(self.prompt_columns + first, self.prompt_columns + self.length)
        keys = [layer.key_buffer[:, :, columns].index_select(0, rows) for layer in self.layers]
        values = [layer.value_buffer[:, :, columns].index_select(0, rows) for layer in self.layers]
        return keys, values, generated

    @classmethod
    def assemble(
        cls,
        prefix: PrefixStack,
        prompt_index: torch.Tensor,
        kept: tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor] | None,
        extra_columns: int,
        host_rows: tuple[list[int], list[int]] | None = None,
    ) -> SharedPrefixCache:
        """A cache whose first rows are ``kept`` (from ``kept_rows``) and whose other rows start with no
        generated tokens; room for ``extra_columns`` more tokens per row. ``host_rows``: the rows' prompt
        indices and generated counts as host lists (the same values as ``prompt_index`` and ``kept``'s
        counts), from which the runs of rows are computed once instead of read from the device every step.
        With a padded ``prefix`` (``batched_attention``), each row's buffers begin with its prompt's keys and
        values, padded to the longest prompt: copied once here, a step attends over one tensor per layer."""
        rows = len(prompt_index)
        kept_rows = 0 if kept is None else len(kept[2])
        width = 0 if kept is None else kept[0][0].shape[-2]
        generated = torch.zeros(rows, dtype=torch.long, device=prompt_index.device)
        prompt = prefix.padded_keys[0].shape[-2] if prefix.padded_keys else 0
        keys, values = [], []
        for layer, sample in enumerate(prefix.prefixes[0].keys):
            shape = (rows, sample.shape[1], prompt + width + extra_columns, sample.shape[3])
            key_buffer = torch.zeros(shape, dtype=sample.dtype, device=sample.device)
            value_buffer = torch.zeros(shape, dtype=sample.dtype, device=sample.device)
            if prompt:
                key_buffer[:, :, :prompt] = prefix.padded_keys[layer].index_select(0, prompt_index)
                value_buffer[:, :, :prompt] = prefix.padded_values[layer].index_select(0, prompt_index)
            if kept is not None:
                key_buffer[:kept_rows, :, prompt : prompt + width] = kept[0][layer]
                value_buffer[:kept_rows, :, prompt : prompt + width] = kept[1][layer]
            keys.append(key_buffer)
            values.append(value_buffer)
        if kept is not None:
            generated[:kept_rows] = kept[2]
        runs = None if host_rows is None else row_runs(*host_rows)
        return cls(prefix, prompt_index, keys, values, generated, width, runs)


@dataclass(frozen=True)
class RowRun:
    """Consecutive rows ``start .. start + rows - 1`` that continue one prompt and have generated equally many
    tokens, so their attention has one shape. It is computed over ``compute_rows`` rows from
    ``compute_start`` (a one-row run borrows a neighbour whose result is dropped; see ``row_runs``)."""

    prompt: int
    generated: int
    start: int
    rows: int
    compute_start: int
    compute_rows: int


def row_runs(prompt_index: list[int], generated: list[int]) -> list[RowRun]:
    """The maximal runs of consecutive rows with equal (prompt, generated count).

    Each run is computed as one batch whose items all have the shapes a single row would have, so a row's
    result does not depend on the other rows in the run (the row's own shapes pick the kernel). One
    exception, found by probing torch's CPU ``bmm``: a batch of a single row may take another kernel than a
    batch of two or more. So a run of one row is computed together with a neighbouring row (any row: its
    result is dropped), and every batch has at least two rows when the batch has.
    """
    runs: list[RowRun] = []
    total = len(prompt_index)
    start = 0
    for row in range(1, total + 1):
        if row < total and (prompt_index[row], generated[row]) == (prompt_index[start], generated[start]):
            continue
        rows = row - start
        compute_start = start if rows > 1 or row < total else max(0, start - 1)
        compute_rows = max(rows, min(2, total))
        runs.append(RowRun(prompt_index[start], generated[start], start, rows, compute_start, compute_rows))
        start = row
    return runs


def fixed_rows_bmm(left: torch.Tensor, right: torch.Tensor, rows: int) -> torch.Tensor:
    """``torch.bmm(left, right)`` computed in products of exactly ``rows`` rows of ``left`` (the last one
    padded with zero rows), so that a row's result does not depend on how many rows are multiplied with it.

    CPU matrix-product kernels are chosen by the matrix sizes, and different kernels round differently; with
    the row count fixed, a row of a prompt's queries gets the same bits whichever rows share its product.
    """
    total = left.shape[1]
    chunks = -(-total // rows)
    if chunks * rows != total:
        left = torch.nn.functional.pad(left, (0, 0, 0, chunks * rows - total))
    products = [torch.bmm(left.narrow(1, chunk * rows, rows), right) for chunk in range(chunks)]
    return (products[0] if chunks == 1 else torch.cat(products, dim=1)).narrow(1, 0, total)


def shared_prefix_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    capcal_cache: SharedPrefixCache | None = None,
    sliding_window: int | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Attention of one new token per row over its prompt (shared) and its own generated tokens.

    ``query``: ``(rows, heads, 1, head_dim)``; ``key``/``value``: the rows' generated part
    ``(rows, kv_heads, length, head_dim)`` as ``SharedPrefixCache`` returns it. Returns
    ``(rows, 1, heads, head_dim)`` like transformers' attention functions.

    A row attends to exactly its prompt's keys and its own valid generated keys. Rows are computed in runs
    (``row_runs``: consecutive rows of one prompt with equally many generated tokens). Per run and kv head,
    the products with the prompt's keys and values take ``PRODUCT_ROWS`` rows of queries at a time
    (``fixed_rows_bmm``: padded to exactly that many, so the kernel and its rounding never depend on the
    run's size); the products with the rows' own keys and values are batches of one row's shapes (a lone
    row is computed beside a neighbour). So a row's result, to the last bit, does not depend on the other
    rows of the batch, their prompt lengths or the width of the generated buffers (tested in runs of 1-21
    rows at any position, float32 and bfloat16, SmolLM2's and Gemma-3's head shapes).

    A sliding-window layer (``sliding_window`` = w, as transformers passes it for Gemma-2/3, Mistral and
    others) attends, as transformers' sliding-window mask (key position > query position - w), to the
    row's last w positions only: the tail of its prompt and its generated tokens. Settings this function
    does not implement (attention logit soft-capping, attention sinks, dropout) raise ``RuntimeError``.
    """
    if capcal_cache is None or query.shape[2] != 1:
        raise RuntimeError("capcal_shared_prefix attention needs a SharedPrefixCache and one token per row")
    unsupported = [name for name in ("softcap", "s_aux", "sinks") if kwargs.get(name) is not None] + (
        ["dropout"] if kwargs.get("dropout") else []
    )
    if unsupported:
        raise RuntimeError(f"capcal_shared_prefix attention does not implement {', '.join(unsupported)}")
    cache = capcal_cache
    cache.attention_calls += 1
    if cache.prefix.padded_keys:
        return batched_attention(module, query, key, value, scaling, cache, sliding_window)
    rows, heads, _, head_dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    scaling = head_dim**-0.5 if scaling is None else scaling
    query = (query * scaling).view(rows, kv_heads, group, head_dim)
    prefixes, layer = cache.prefix.prefixes, module.layer_idx
    length = key.shape[-2]
    if cache.attention_calls == 1:  # the first layer: the batch's runs of rows, for every layer
        if cache._runs_at_start is None:
            cache.row_runs = row_runs(cache.prompt_index.tolist(), cache.generated.tolist())
        else:
            cache.row_runs = [
                dataclasses.replace(run, generated=run.generated + length - cache._length_at_start)
                for run in cache._runs_at_start
            ]
    output = torch.empty_like(query)
    for run in cache.row_runs:
        prefix = prefixes[run.prompt]
        prompt_keys, prompt_values = prefix.keys[layer][0], prefix.values[layer][0]
        first = length - run.generated  # the rows' first generated column
        if sliding_window is not None:  # keep the rows' last sliding_window positions
            dropped = max(0, prompt_keys.shape[-2] + run.generated - sliding_window)
            prompt_keys, prompt_values = prompt_keys[:, dropped:], prompt_values[:, dropped:]
            first += max(0, dropped - prefix.length)
        n, prompt_length, own = run.compute_rows, prompt_keys.shape[-2], length - first
        run_query = query.narrow(0, run.compute_start, n)  # (n, kv_heads, group, head_dim)
        own_keys = key.narrow(0, run.compute_start, n).narrow(2, first, own)
        own_values = value.narrow(0, run.compute_start, n).narrow(2, first, own)
        by_head = run_query.transpose(0, 1).reshape(kv_heads, n * group, head_dim)
        prompt_scores = fixed_rows_bmm(by_head, prompt_keys.mT, PRODUCT_ROWS * group)
        prompt_scores = prompt_scores.view(kv_heads, n, group, prompt_length).transpose(0, 1)
        scores = torch.cat([prompt_scores, run_query @ own_keys.mT], dim=-1)
        weights = scores.float().softmax(dim=-1).to(value.dtype)
        prompt_weights = weights.narrow(-1, 0, prompt_length).transpose(0, 1)
        prompt_part = fixed_rows_bmm(
            prompt_weights.reshape(kv_heads, n * group, prompt_length), prompt_values, PRODUCT_ROWS * group
        )
        prompt_part = prompt_part.view(kv_heads, n, group, head_dim).transpose(0, 1)
        result = prompt_part + weights.narrow(-1, prompt_length, own) @ own_values
        output.narrow(0, run.start, run.rows).copy_(result.narrow(0, run.start - run.compute_start, run.rows))
    output = output.reshape(rows, heads, 1, head_dim).transpose(1, 2).contiguous()
    return output, None


def batched_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    scaling: float | None,
    cache: SharedPrefixCache,
    sliding_window: int | None,
) -> tuple[torch.Tensor, None]:
    """``shared_prefix_attention`` for the whole batch in one product (a cache whose ``PrefixStack`` is
    ``padded``): each row's buffers hold its prompt's keys and values (padded to the longest prompt) before
    its generated ones (``SharedPrefixCache.assemble``), and one ``scaled_dot_product_attention`` call with a
    mask attends to exactly the row's prompt positions (``< prompt length``), its own generated columns (the
    last ``generated`` ones) and, on a sliding-window layer, only the positions after
    ``query position - sliding_window``. The products run over the buffers' whole capacity (columns not yet
    written are masked): the mask over the whole capacity is built once per batch, a step adds which
    columns are written, and no per-step view of the buffers is needed.

    The same set of keys and weights as ``shared_prefix_attention``, in a number of operators that does not
    depend on the rows or prompts of the batch. The costs: each row holds a copy of its prompt's keys and
    values (as stock transformers' cache does), and the products run over the batch's longest prompt and
    generated width, so a row's result can differ in the last bits with the batch it is in (a sample is then
    batch-invariant only in distribution: docs/model-wrappers.md). Returns ``(rows, 1, heads, head_dim)``.
    """
    stack = cache.prefix
    heads = query.shape[1]
    longest = cache.prompt_columns
    length = cache.layers[module.layer_idx].length  # generated columns, this step's included
    if cache.full_mask is None:  # once per batch: which columns each row attends to, at full capacity
        capacity = key.shape[-2] - longest
        prompt_lengths = stack.lengths[cache.prompt_index][:, None]
        start = (cache._length_at_start - cache._generated_at_start)[:, None]  # the row's first column
        prompt_positions = torch.arange(longest, device=query.device).expand(len(start), -1)
        columns = torch.arange(capacity, device=query.device).expand(len(start), -1)
        cache.full_mask = torch.cat([prompt_positions < prompt_lengths, columns >= start], dim=-1)[
            :, None, None
        ]
        cache.positions = torch.cat([prompt_positions, prompt_lengths + columns - start], dim=-1)[
            :, None, None
        ]
        cache.current_position = (prompt_lengths - start - 1)[:, None, None]  # + this step's length
        cache.column_index = torch.arange(key.shape[-2], device=query.device)
    if cache.attention_calls == 1:  # a new step: new masks
        cache.step_masks.clear()
    mask = cache.step_masks.get(sliding_window)
    if mask is None:  # the columns written so far, the row's own, and inside the window
        mask = cache.full_mask & (cache.column_index < longest + length)
        if sliding_window is not None:
            mask &= cache.positions > cache.current_position + (length - sliding_window)
        cache.step_masks[sliding_window] = mask
    output = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, scale=scaling, enable_gqa=key.shape[1] != heads
    )
    return output.transpose(1, 2), None


def _no_mask(*args, **kwargs) -> None:
    return None  # shared_prefix_attention builds its own masks from the cache


AttentionInterface.register(ATTENTION_NAME, shared_prefix_attention)
AttentionMaskInterface.register(ATTENTION_NAME, _no_mask)


@contextlib.contextmanager
def attention_implementation(model: torch.nn.Module, name: str) -> Iterator[None]:
    """Within the block, ``model`` computes attention with the implementation registered as ``name`` in
    transformers' ``AttentionInterface``; the previous one is restored on exit."""
    config = model.config
    previous = config._attn_implementation
    config._attn_implementation = name
    try:
        yield
    finally:
        config._attn_implementation = previous


def decoding_attention(model: torch.nn.Module) -> contextlib.AbstractContextManager[None]:
    """Within the block, ``model`` computes attention with ``shared_prefix_attention``."""
    return attention_implementation(model, ATTENTION_NAME)
