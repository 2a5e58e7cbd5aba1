"""capcal_models.kv_cache: the shared-prefix KV cache and its attention, against plain attention.

- ``shared_prefix_attention`` equals softmax attention over the concatenation of a row's prompt keys and its
  own generated keys (grouped-query heads, rows of different prompts and generated lengths);
- a row's output is bit-for-bit the same alone and within a batch (batch invariance);
- the generated part is written in place, counted per row, kept and re-assembled across batch changes, and
  refuses to grow past its capacity;
- on the real SmolLM2, a decoding step through ``SharedPrefixCache`` gives the logits of a full forward pass.
"""

from __future__ import annotations

import pytest
import torch

from capcal_models.kv_cache import (
    PrefixStack,
    PromptPrefix,
    SharedPrefixCache,
    decoding_attention,
    row_runs,
    shared_prefix_attention,
)

KV_HEADS, GROUP, HEAD_DIM, LAYERS = 2, 3, 8, 2


class _Layer(torch.nn.Module):
    """What ``shared_prefix_attention`` reads from its module: the layer index."""

    def __init__(self, layer_idx: int) -> None:
        super().__init__()
        self.layer_idx = layer_idx


def _prefix(length: int, seed: int) -> PromptPrefix:
    generator = torch.Generator().manual_seed(seed)
    shape = (1, KV_HEADS, length, HEAD_DIM)
    return PromptPrefix(
        [torch.randn(shape, generator=generator) for _ in range(LAYERS)],
        [torch.randn(shape, generator=generator) for _ in range(LAYERS)],
    )


def _cache(prefixes: list[PromptPrefix], prompt_index: list[int], generated: list[int], seed: int):
    """A cache whose rows hold ``generated[b]`` random generated tokens (right-aligned) of prompt
    ``prompt_index[b]``."""
    generator = torch.Generator().manual_seed(seed)
    width = max(generated)
    cache = SharedPrefixCache.assemble(PrefixStack(prefixes), torch.tensor(prompt_index), None, width + 4)
    for layer in cache.layers:
        for row, count in enumerate(generated):
            shape = (KV_HEADS, count, HEAD_DIM)
            layer.key_buffer[row, :, width - count : width] = torch.randn(shape, generator=generator)
            layer.value_buffer[row, :, width - count : width] = torch.randn(shape, generator=generator)
        layer._set_length(width)
    cache._generated_at_start = torch.tensor(generated)
    cache._length_at_start = width
    return cache


def _reference(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Softmax attention of one query row ``(heads, head_dim)`` over ``(kv_heads, n, head_dim)``."""
    expanded_keys = keys.repeat_interleave(GROUP, dim=0)
    expanded_values = values.repeat_interleave(GROUP, dim=0)
    scores = (query[:, None, :] @ expanded_keys.transpose(-1, -2))[:, 0] * HEAD_DIM**-0.5
    return (scores.softmax(dim=-1)[:, None, :] @ expanded_values)[:, 0]


def _attend(cache: SharedPrefixCache, query: torch.Tensor, layer: int) -> torch.Tensor:
    cache.attention_calls = 0
    keys, values = cache.layers[layer].keys, cache.layers[layer].values
    output, _ = shared_prefix_attention(_Layer(layer), query, keys, values, None, capcal_cache=cache)
    return output


def test_attention_equals_softmax_over_prompt_and_own_tokens():
    prefixes = [_prefix(5, 0), _prefix(9, 1)]
    prompt_index, generated = [0, 1, 0, 1], [3, 1, 0, 2]
    cache = _cache(prefixes, prompt_index, generated, seed=2)
    query = torch.randn(
        len(generated), KV_HEADS * GROUP, 1, HEAD_DIM, generator=torch.Generator().manual_seed(3)
    )
    for layer in range(LAYERS):
        output = _attend(cache, query, layer)
        assert output.shape == (len(generated), 1, KV_HEADS * GROUP, HEAD_DIM)
        width = cache.length
        for row, (prompt, count) in enumerate(zip(prompt_index, generated, strict=True)):
            own = slice(width - count, width)
            keys = torch.cat([prefixes[prompt].keys[layer][0], cache.layers[layer].keys[row, :, own]], dim=1)
            values = torch.cat(
                [prefixes[prompt].values[layer][0], cache.layers[layer].values[row, :, own]], dim=1
            )
            expected = _reference(query[row, :, 0], keys, values)
            torch.testing.assert_close(output[row, 0], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("window", [1, 3, 6, 10, 100])
def test_sliding_window_attends_to_the_last_positions_of_prompt_and_own_tokens(window):
    """Key position > query position - window (transformers' sliding-window mask) over the concatenation."""
    prefixes = [_prefix(5, 0), _prefix(9, 1)]
    prompt_index, generated = [0, 1, 0, 1], [3, 1, 1, 2]  # the query is each row's last generated token
    cache = _cache(prefixes, prompt_index, generated, seed=2)
    query = torch.randn(4, KV_HEADS * GROUP, 1, HEAD_DIM, generator=torch.Generator().manual_seed(3))
    cache.attention_calls = 0
    keys, values = cache.layers[1].keys, cache.layers[1].values
    output, _ = shared_prefix_attention(
        _Layer(1), query, keys, values, None, capcal_cache=cache, sliding_window=window
    )
    width = cache.length
    for row, (prompt, count) in enumerate(zip(prompt_index, generated, strict=True)):
        own = slice(width - count, width)
        all_keys = torch.cat([prefixes[prompt].keys[1][0], cache.layers[1].keys[row, :, own]], dim=1)
        all_values = torch.cat([prefixes[prompt].values[1][0], cache.layers[1].values[row, :, own]], dim=1)
        query_position = all_keys.shape[1] - 1
        visible = [p for p in range(all_keys.shape[1]) if p > query_position - window]
        expected = _reference(query[row, :, 0], all_keys[:, visible], all_values[:, visible])
        torch.testing.assert_close(output[row, 0], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("setting", [{"softcap": 50.0}, {"s_aux": torch.zeros(6)}, {"dropout": 0.1}])
def test_attention_refuses_settings_it_does_not_implement(setting):
    cache = _cache([_prefix(3, 0)], [0], [1], seed=1)
    query = torch.zeros(1, KV_HEADS * GROUP, 1, HEAD_DIM)
    with pytest.raises(RuntimeError, match="does not implement"):
        shared_prefix_attention(
            _Layer(0),
            query,
            cache.layers[0].keys,
            cache.layers[0].values,
            None,
            capcal_cache=cache,
            **setting,
        )


def test_a_row_attends_the_same_alone_and_in_a_batch():
    prefixes = [_prefix(7, 4), _prefix(12, 5)]
    batch = _cache(prefixes, [1, 0, 1], [4, 2, 1], seed=6)
    query = torch.randn(3, KV_HEADS * GROUP, 1, HEAD_DIM, generator=torch.Generator().manual_seed(7))
    together = _attend(batch, query, 0)
    alone = SharedPrefixCache.assemble(
        PrefixStack([prefixes[1]]), torch.tensor([0]), batch.kept_rows(torch.tensor([0])), 3
    )
    assert torch.equal(_attend(alone, query[:1], 0)[0], together[0])


def test_generated_tokens_are_written_in_place_counted_and_kept():
    prefixes = [_prefix(4, 8), _prefix(6, 9)]
    cache = SharedPrefixCache.assemble(PrefixStack(prefixes), torch.tensor([0, 1]), None, 3)
    assert cache.rows == 2 and cache.length == 0 and cache.generated.tolist() == [0, 0]
    assert cache.position_ids().tolist() == [[4], [6]]
    step = torch.ones(2, KV_HEADS, 1, HEAD_DIM)
    for number in range(1, 3):
        for layer in cache.layers:
            layer.update(step * number, -step * number)
    assert cache.length == 2 and cache.generated.tolist() == [2, 2]
    assert cache.position_ids().tolist() == [[6], [8]]
    assert torch.equal(cache.layers[0].keys[:, :, 1], step[:, :, 0] * 2)

    # Row 1 goes on, a new row of prompt 0 joins: the kept row's tokens and count carry over, right-aligned.
    kept = cache.kept_rows(torch.tensor([1]))
    rebuilt = SharedPrefixCache.assemble(PrefixStack(prefixes), torch.tensor([1, 0]), kept, 2)
    assert rebuilt.generated.tolist() == [2, 0] and rebuilt.length == 2
    assert torch.equal(rebuilt.layers[0].keys[0], cache.layers[0].keys[1])
    assert rebuilt.position_ids().tolist() == [[8], [4]]
    for layer in rebuilt.layers:
        layer.update(step, step)
        layer.update(step, step)
    with pytest.raises(RuntimeError, match="capacity"):
        rebuilt.layers[0].update(step, step)


def test_empty_prefix_stack_is_refused():
    with pytest.raises(ValueError, match="no prompts"):
        PrefixStack([])


# ------------------------------------------------------------------------------------------ real model


def test_a_shared_prefix_step_gives_the_full_forward_logits(smollm2_path):
    """Two prompts prefilled once each, three rows (two share the first prompt) with one generated token:
    the next-token logits through ``SharedPrefixCache`` equal a full forward pass over prompt + token."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

    tokenizer = AutoTokenizer.from_pretrained(smollm2_path)
    model = AutoModelForCausalLM.from_pretrained(smollm2_path, dtype=torch.float32).eval()
    prompts = [tokenizer.encode("The capital of France is"), tokenizer.encode("Question: 2 + 2 = ? Answer:")]
    rows = [
        (0, tokenizer.encode(" Paris")[0]),
        (1, tokenizer.encode(" 4")[0]),
        (0, tokenizer.encode(" a")[0]),
    ]
    with torch.inference_mode():
        prefixes = []
        for ids in prompts:
            output = model(input_ids=torch.tensor([ids]), past_key_values=DynamicCache(), use_cache=True)
            layers = output.past_key_values.layers
            prefixes.append(
                PromptPrefix([layer.keys for layer in layers], [layer.values for layer in layers])
            )
        cache = SharedPrefixCache.assemble(
            PrefixStack(prefixes), torch.tensor([prompt for prompt, _ in rows]), None, 2
        )
        with decoding_attention(model):
            step = model(
                input_ids=torch.tensor([[token] for _, token in rows]),
                position_ids=cache.position_ids(),
                past_key_values=cache,
                use_cache=True,
                capcal_cache=cache,
            ).logits[:, -1]
        assert cache.attention_calls == len(cache.layers) and cache.generated.tolist() == [1, 1, 1]
        for row, (prompt, token) in enumerate(rows):
            full = model(input_ids=torch.tensor([prompts[prompt] + [token]])).logits[0, -1]
            torch.testing.assert_close(step[row], full, rtol=1e-4, atol=1e-4)


def test_row_runs_group_consecutive_rows_and_give_single_rows_a_neighbour():
    runs = row_runs([0, 0, 1, 1, 1, 0, 2], [3, 3, 2, 2, 5, 3, 0])
    assert [(r.prompt, r.generated, r.start, r.rows) for r in runs] == [
        (0, 3, 0, 2),
        (1, 2, 2, 2),
        (1, 5, 4, 1),
        (0, 3, 5, 1),
        (2, 0, 6, 1),
    ]
    assert [(r.compute_start, r.compute_rows) for r in runs] == [(0, 2), (2, 2), (4, 2), (5, 2), (5, 2)]
    assert [(r.compute_start, r.compute_rows) for r in row_runs([4], [1])] == [(0, 1)]


def _random_cache(shapes, dtype, prompt_lengths, rows, seed):
    """A one-layer cache of the given (prompt, generated) rows, every tensor drawn from ``seed`` per row so
    that a row's data does not depend on the others: (cache, query)."""
    kv_heads, group, head_dim = shapes
    prefixes = []
    for prompt, length in enumerate(prompt_lengths):
        generator = torch.Generator().manual_seed(seed * 1000 + prompt)
        shape = (1, kv_heads, length, head_dim)
        keys, values = (torch.randn(shape, generator=generator).to(dtype) for _ in range(2))
        prefixes.append(PromptPrefix([keys], [values]))
    width = max(generated for _, generated, _ in rows)
    cache = SharedPrefixCache.assemble(
        PrefixStack(prefixes), torch.tensor([prompt for prompt, _, _ in rows]), None, width + 1
    )
    queries = []
    layer = cache.layers[0]
    for index, (_, generated, row_seed) in enumerate(rows):
        generator = torch.Generator().manual_seed(row_seed)
        shape = (kv_heads, generated, head_dim)
        layer.key_buffer[index, :, width - generated : width] = torch.randn(shape, generator=generator)
        layer.value_buffer[index, :, width - generated : width] = torch.randn(shape, generator=generator)
        queries.append(torch.randn(kv_heads * group, 1, head_dim, generator=generator))
    layer._set_length(width)
    cache._generated_at_start = torch.tensor([generated for _, generated, _ in rows])
    cache._length_at_start = width
    return cache, torch.stack(queries).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("shapes", [(3, 3, 64), (1, 4, 256)], ids=["smollm2", "gemma3"])
def test_a_row_attends_the_same_in_runs_of_any_size_and_position(dtype, shapes):
    """The row (prompt 0, ``generated`` tokens, seed 99) among 1-21 rows like it, first, last or between
    other rows: its output is bit-for-bit the same. Covers the tiny sizes at which torch's CPU ``bmm`` picks
    another kernel for a batch of one."""
    target_seed = 99
    for prompt_length in (1, 2, 3, 5, 8, 31, 110):
        for generated in (0, 1, 2, 3, 7, 20):
            outputs = []
            for same, before, after in (
                (1, 0, 1),
                (1, 1, 0),
                (1, 2, 2),
                (2, 0, 1),
                (3, 1, 0),
                (5, 2, 3),
                (16, 0, 0),
                (21, 1, 2),
            ):
                rows = [(1, 4, 10 + i) for i in range(before)] + [
                    (0, generated, target_seed + i) for i in range(same)
                ]
                rows += [(1, 6, 50 + i) for i in range(after)]
                cache, query = _random_cache(shapes, dtype, [prompt_length, 9], rows, seed=1)
                outputs.append(_attend(cache, query, 0)[before])
            for output in outputs[1:]:
                assert torch.equal(output, outputs[0]), (prompt_length, generated)
