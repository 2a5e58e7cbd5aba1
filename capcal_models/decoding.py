"""Sampling k continuations per prompt from a transformers causal LM: one prefill per prompt, per-row seeds.

``sample_continuations`` runs its own decoding loop instead of ``model.generate``:

- each unique prompt is prefilled once (batch of one, no padding); the rows that sample from it share its
  keys and values (``SharedPrefixCache``: stored once, not copied per row; each row's own tokens in
  preallocated buffers, no per-step concatenation) and decode in one batch with the rows of other prompts;
- a row's randomness comes only from its own seed: the uniform number of its t-th generated token is
  ``capcal_models.seeding.sample_uniforms(seed, t)`` (a counter-based stream, computed for every row of the
  batch in one set of device operators) and the token is picked by inverse-CDF sampling from the filtered
  distribution, so a sample does not depend on what else is in the batch. With ``attention="exact"`` (the
  CPU's default) the logits do not either, to the last bit: attention products in ``kv_cache`` whose shapes
  do not depend on the other rows, and every step runs at least ``batch_invariant_rows(model)`` rows, the
  fewest from which the machine's matrix products give every row the same bits; on Intel CPUs the layers
  multiply with MKL-packed weights, which give the same bits: ``packed_linear``. With
  ``attention="batched"`` (a GPU's default: ``kv_cache.batched_attention``; on the CPU without MKL-packed
  weights, as a GPU runs) a step dispatches the same operators whatever the batch holds, and a row's logits
  may differ in the last bits with the batch;
- a decode step is device work only: the next input tokens, the sampled tokens, each row's token buffer,
  length and finished flag stay on the device; the host reads them once every ``SYNC_STEPS`` steps (or
  when a row reaches ``max_new_tokens``, which the host knows in advance), in one copy;
- a row stops at an EOS token, at ``max_new_tokens`` or when a stop sequence appears in its last tokens
  (checked at each host read for every token since the last one, so the row ends at the same token as if
  checked after each step); finished rows leave the batch and queued rows take their place (at a host
  read, when at least an eighth of the rows have finished); ``on_samples_done`` receives the samples that
  finished since the last host read (capcal-hf commits them to its on-disk cache there, one transaction per
  read);
- a job without samples but with an ``on_prefill`` hook is only prefilled (capcal-hf: the activations of a
  question whose samples are all cached).

Sampling follows transformers' ``generate``: logits in float32, then temperature, top-k, top-p and min-p in
that order, each with the same semantics as transformers' logits warpers.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache

from capcal_models.kv_cache import PrefixStack, PromptPrefix, SharedPrefixCache, decoding_attention
from capcal_models.packed_linear import packed_linears, packing_pays, row_buckets
from capcal_models.seeding import sample_uniforms

__all__ = [
    "ATTENTION_MODES",
    "SYNC_STEPS",
    "TRANSFORMERS_SAMPLING_DEFAULTS",
    "PromptJob",
    "SamplingParams",
    "StopSequences",
    "filter_logits",
    "inverse_cdf",
    "resolve_sampling_params",
    "batch_invariant_rows",
    "sample_continuations",
    "sample_tokens",
]

# transformers' generate fills unset sampling parameters from the model's generation_config, then from
# these global defaults (GenerationConfig._get_default_generation_params); note top_k = 50.
TRANSFORMERS_SAMPLING_DEFAULTS = {"temperature": 1.0, "top_k": 50, "top_p": 1.0, "min_p": None}

# How a decode step computes attention (``sample_continuations``).
ATTENTION_MODES = ("exact", "batched")

# Decode steps between two host reads of a batch's state (finished rows, stop sequences).
SYNC_STEPS = 8

# Entries per block of ``inverse_cdf``'s two-level search.
CDF_BLOCK = 256

# Row counts probed by ``batch_invariant_rows``: every count up to 64, then a few larger ones.
_PROBED_ROWS = (*range(1, 65), 96, 128)
_ROW_FLOORS: dict[tuple, int] = {}

# Generation settings capcal-hf does not implement, with the value at which each does nothing.
_NEUTRAL_SETTINGS = {
    "num_beams": 1,
    "num_return_sequences": 1,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "min_length": 0,
    "min_new_tokens": 0,
    "top_h": None,
    "bad_words_ids": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "sequence_bias": None,
    "forced_bos_token_id": None,
    "forced_eos_token_id": None,
    "exponential_decay_length_penalty": None,
    "guidance_scale": None,
    "watermarking_config": None,
}
_HARMLESS_SETTINGS = {"use_cache", "pad_token_id", "renormalize_logits"}  # no effect on sampling


@dataclass(frozen=True)
class SamplingParams:
    """How the next token is chosen. ``do_sample=False`` is greedy decoding."""

    do_sample: bool
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float = 1.0
    min_p: float | None = None


def _is_neutral(value: object, neutral: object) -> bool:
    return value is None or value == neutral or (neutral is None and value in ([], {}, ()))


def resolve_sampling_params(gen_kwargs: dict, generation_config: object | None) -> SamplingParams:
    """The effective sampling parameters, resolved as transformers' ``generate`` resolves them.

    ``gen_kwargs`` is lm-eval's request setting after ``normalize_gen_kwargs`` (``until``/``max_gen_toks``/
    ``seed`` removed). Unset parameters come from the model's ``generation_config`` and then from
    ``TRANSFORMERS_SAMPLING_DEFAULTS`` (so, as with stock lm-eval ``hf``, top-k 50 applies unless a task sets
    ``top_k``). Settings this sampler does not implement raise ``ValueError`` unless they are neutral.
    """
    for key, value in gen_kwargs.items():
        if key in ("do_sample", "temperature", "top_k", "top_p", "min_p") or key in _HARMLESS_SETTINGS:
            continue
        if key not in _NEUTRAL_SETTINGS:
            raise ValueError(f"capcal-hf: unsupported generation setting {key}={value!r}")
        if not _is_neutral(value, _NEUTRAL_SETTINGS[key]):
            raise ValueError(
                f"capcal-hf: generation setting {key}={value!r} is not supported (use the hf model)"
            )
    for key, neutral in _NEUTRAL_SETTINGS.items():
        value = getattr(generation_config, key, None)
        if key not in gen_kwargs and not _is_neutral(value, neutral):
            raise ValueError(
                f"capcal-hf: the model's generation_config sets {key}={value!r}, which capcal-hf does not "
                f"implement; override it in gen_kwargs ({key}={neutral!r}) or use the hf model"
            )

    def setting(name: str):
        if gen_kwargs.get(name) is not None:
            return gen_kwargs[name]
        configured = getattr(generation_config, name, None)
        return configured if configured is not None else TRANSFORMERS_SAMPLING_DEFAULTS[name]

    temperature = float(setting("temperature"))
    do_sample = bool(gen_kwargs.get("do_sample", getattr(generation_config, "do_sample", False) or False))
    if do_sample and temperature <= 0.0:
        raise ValueError(f"capcal-hf: do_sample=True needs a positive temperature, got {temperature}")
    if not do_sample:
        return SamplingParams(do_sample=False)
    top_k = setting("top_k")
    min_p = setting("min_p")
    return SamplingParams(
        do_sample=True,
        temperature=temperature,
        top_k=int(top_k) if top_k else None,
        top_p=float(setting("top_p")),
        min_p=float(min_p) if min_p is not None else None,
    )


def filter_logits(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Float32 scores after temperature, top-k, top-p and min-p (removed tokens at -inf), as transformers."""
    scores = logits.float()
    if params.temperature != 1.0:
        scores = scores / params.temperature
    if params.top_k:
        k = min(params.top_k, scores.shape[-1])
        kth_best = torch.topk(scores, k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth_best, -math.inf)
    if params.top_p < 1.0:
        ascending, order = torch.sort(scores, dim=-1)
        remove_sorted = ascending.softmax(dim=-1).cumsum(dim=-1) <= 1.0 - params.top_p
        remove_sorted[..., -1] = False
        scores = scores.masked_fill(remove_sorted.scatter(-1, order, remove_sorted), -math.inf)
    if params.min_p is not None:
        probs = scores.softmax(dim=-1)
        remove = probs < params.min_p * probs.amax(dim=-1, keepdim=True)
        remove.scatter_(-1, probs.argmax(dim=-1, keepdim=True), False)
        scores = scores.masked_fill(remove, -math.inf)
    return scores


def _candidate_scores(
    logits: torch.Tensor, params: SamplingParams
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Filtered scores, and the token ids they belong to (None: the whole vocabulary in order).

    With top-k and top-p on the CPU, only the k best tokens can survive the filters, so they are filtered
    alone (in token-id order, so that a sample does not depend on how near-equal scores happen to be ordered;
    sorting k tokens instead of the vocabulary); the result equals ``filter_logits`` restricted to them. When
    scores tie at the k-th place (transformers then keeps more than k tokens) the whole vocabulary is filtered
    instead; that check reads one value on the host. Elsewhere (no top-p, or a GPU) the top-k mask is applied
    to the whole vocabulary, without a host read.
    """
    vocabulary = logits.shape[-1]
    if not params.top_k or params.top_k >= vocabulary:
        return filter_logits(logits, params), None
    scores = logits.float()
    if params.temperature != 1.0:
        scores = scores / params.temperature
    best, token_ids = torch.topk(scores, params.top_k, dim=-1)
    # the tie check reads a value on the host: only where it pays (the CPU, sorting the vocabulary for top-p)
    if logits.device.type != "cpu" or params.top_p >= 1.0:
        return _top_k_only(scores, best[:, -1:], params), None
    if bool(((scores >= best[:, -1:]).sum(dim=-1) > params.top_k).any()):
        return filter_logits(logits, params), None
    token_ids, order = token_ids.sort(dim=-1)
    rest = SamplingParams(do_sample=True, top_p=params.top_p, min_p=params.min_p)
    return filter_logits(best.gather(-1, order), rest), token_ids


def _top_k_only(scores: torch.Tensor, kth_best: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """``filter_logits`` of temperature-scaled ``scores`` whose k-th best values are ``kth_best``: the
    top-k mask (ties at the k-th place kept, as transformers), then top-p and min-p over the vocabulary."""
    rest = SamplingParams(do_sample=True, top_p=params.top_p, min_p=params.min_p)
    return filter_logits(scores.masked_fill(scores < kth_best, -math.inf), rest)


def sample_tokens(logits: torch.Tensor, params: SamplingParams, uniforms: torch.Tensor) -> torch.Tensor:
    """One token per row: argmax when greedy, else inverse-CDF sampling with the row's uniform in [0, 1).

    Inverse-CDF sampling picks the first token (in token-id order) whose cumulative probability exceeds
    u * total: token i with probability p_i, as ``torch.multinomial`` would, but from the row's own random
    number.
    """
    if not params.do_sample:
        return logits.argmax(dim=-1)
    scores, token_ids = _candidate_scores(logits, params)
    picked = inverse_cdf(scores.softmax(dim=-1), uniforms)
    return picked if token_ids is None else token_ids.gather(-1, picked[:, None]).squeeze(-1)


def inverse_cdf(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Per row, the first index i with ``p_0 + ... + p_i > u * (p_0 + ... + p_n)``.

    In two levels, so that a large vocabulary costs one pass over ``probs``: the sums of blocks of
    ``CDF_BLOCK`` entries (summed in the dtype of ``probs``, accumulated in float64) locate the block, a
    float64 cumulative sum inside that block locates the entry. (``torch.multinomial`` accumulates the whole
    vocabulary in float32.) A zero-probability entry is never returned (where rounding puts the target past a
    block's own total, the block's last positive entry is). Each row is computed on its own values only.
    """
    rows, size = probs.shape
    blocks = -(-size // CDF_BLOCK)
    if size != blocks * CDF_BLOCK:
        probs = torch.nn.functional.pad(probs, (0, blocks * CDF_BLOCK - size))
    by_block = probs.view(rows, blocks, CDF_BLOCK)
    block_cdf = by_block.sum(dim=-1).to(torch.float64).cumsum(dim=-1)
    totals = block_cdf[:, -1:]
    if uniforms.dtype != torch.float64 or uniforms.device != block_cdf.device:
        uniforms = uniforms.to(block_cdf.device, torch.float64)
    targets = uniforms[:, None] * totals
    last_block = (block_cdf < totals).sum(dim=-1, keepdim=True)  # the last block with probability mass
    block = torch.searchsorted(block_cdf, targets, right=True).minimum(last_block)
    start = torch.where(block > 0, block_cdf.gather(-1, (block - 1).clamp(min=0)), 0.0)
    in_block = by_block.gather(1, block[:, :, None].expand(-1, -1, CDF_BLOCK)).squeeze(1)
    within_cdf = in_block.to(torch.float64).cumsum(dim=-1) + start
    last_positive = CDF_BLOCK - 1 - (in_block > 0).flip(-1).to(torch.uint8).argmax(dim=-1, keepdim=True)
    within = torch.searchsorted(within_cdf, targets, right=True).minimum(last_positive)
    return (block * CDF_BLOCK + within).squeeze(-1)


class StopSequences:
    """Detects stop strings in the last tokens of rows (the final text is still cut at the first stop)."""

    def __init__(self, tokenizer, stops: Sequence[str]) -> None:
        self.tokenizer = tokenizer
        self.stops = [stop for stop in stops if stop]
        # A stop string spans at most as many tokens as it has bytes (or its own token count), plus 2 for
        # merges with neighbouring text.
        self.window = 2 + max(
            (
                max(len(stop.encode("utf-8")), len(tokenizer.encode(stop, add_special_tokens=False)))
                for stop in stops
            ),
            default=0,
        )

    def found(self, token_lists: Sequence[Sequence[int]]) -> list[bool]:
        """Per row, whether its last tokens hold a stop string."""
        if not self.stops or not token_lists:
            return [False] * len(token_lists)
        tails = self.tokenizer.batch_decode([list(tokens[-self.window :]) for tokens in token_lists])
        return [any(stop in tail for stop in self.stops) for tail in tails]

    def first_stops(self, token_lists: Sequence[Sequence[int]], checked: Sequence[int]) -> list[int | None]:
        """Per row, the fewest of its tokens, more than ``checked``, whose last tokens hold a stop string
        (``found`` after each of those tokens in turn, in one ``batch_decode``); None when there is none."""
        ends = [
            (row, end)
            for row, tokens in enumerate(token_lists)
            for end in range(checked[row] + 1, len(tokens) + 1)
        ]
        first: list[int | None] = [None] * len(token_lists)
        if not self.stops or not ends:
            return first
        tails = self.tokenizer.batch_decode(
            [list(token_lists[row][max(0, end - self.window) : end]) for row, end in ends]
        )
        for (row, end), tail in zip(ends, tails, strict=True):
            if first[row] is None and any(stop in tail for stop in self.stops):
                first[row] = end
        return first


@dataclass
class PromptJob:
    """One unique prompt and the samples to draw from it (one seed per sample).

    ``on_prefill`` (optional) receives the prefill's hidden states (a tuple of ``(1, prompt_len, hidden)``
    tensors, embeddings first). After ``sample_continuations``, ``outputs[i]`` holds sample i's generated
    token ids (ending with the EOS token when it stopped there). A job without seeds is only prefilled.
    """

    token_ids: list[int]
    seeds: list[int]
    on_prefill: Callable[[tuple[torch.Tensor, ...]], None] | None = None
    outputs: list[list[int] | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.token_ids:
            raise ValueError("PromptJob: empty prompt")
        self.outputs = [None] * len(self.seeds)


@dataclass(eq=False)
class _Prefill:
    """A prefilled prompt: its KV (shared by its rows), its next-token logits, its samples not yet started."""

    job: PromptJob
    prefix: PromptPrefix
    first_logits: torch.Tensor
    next_sample: int = 0


def batch_invariant_rows(model) -> int:
    """The fewest rows per decoding step from which a row's output does not depend on the row count.

    BLAS libraries pick their matrix-product kernel by the number of rows M, and different kernels round
    differently: on one CPU measured here MKL gives rows of M = 1, 2, 3, 4-15 and >= 16 different last bits
    (earlier machines split at M = 4). So the same row's logits, and with full-vocabulary sampling about one
    token in a thousand, would change with the batch. The floor is probed once per (device, dtype, layer
    shapes): for each distinct ``nn.Linear`` shape of the model (outputs capped at 2,048 columns), the rows of
    a random input are multiplied at every row count in ``_PROBED_ROWS``; the floor is the smallest M from
    which all larger counts give bit-identical rows. Padding rows fill every step up to it.
    """
    parameter = next(model.parameters())
    shapes = sorted(
        {
            (m.in_features, min(m.out_features, 2048))
            for m in model.modules()
            if isinstance(m, torch.nn.Linear)
        }
    )
    key = (parameter.device.type, parameter.dtype, tuple(shapes))
    if key not in _ROW_FLOORS:
        floor = 1
        generator = torch.Generator().manual_seed(0)
        for in_features, out_features in shapes:
            weight = torch.randn(out_features, in_features, generator=generator).to(parameter)
            inputs = torch.randn(max(_PROBED_ROWS), in_features, generator=generator).to(parameter)
            reference = torch.nn.functional.linear(inputs, weight)
            agrees = [
                bool(torch.equal(torch.nn.functional.linear(inputs[:rows], weight), reference[:rows]))
                for rows in _PROBED_ROWS
            ]
            first_of_last_run = len(agrees)
            while first_of_last_run > 0 and agrees[first_of_last_run - 1]:
                first_of_last_run -= 1
            floor = max(floor, _PROBED_ROWS[first_of_last_run])
        _ROW_FLOORS[key] = floor
    return _ROW_FLOORS[key]


@dataclass(eq=False)
class _Row:
    """A row of the batch, as the host knows it: its sample and its tokens as of the last host read."""

    prefill: _Prefill
    sample: int
    tokens: list[int] = field(default_factory=list)
    done: bool = False
    padding: bool = False  # a stand-in that only fills the batch to its row floor; its output is ignored
    length: int = 0  # its tokens when the batch was assembled (a new row: 1, its first token)
    read: int = 0  # columns of the batch's ``step_tokens`` read so far
    checked: int = 0  # tokens checked for stop sequences


@dataclass(eq=False)
class _Batch:
    """The rows decoding together: host bookkeeping (``rows``, ``steps``) and the device state of the steps.

    Step j (from 0, since the batch was assembled) feeds ``step_tokens[:, j]`` at ``positions[:, j]`` and
    writes its tokens to ``step_tokens[:, j + 1]``, drawn with ``uniforms[:, j]``; column 0 holds each row's
    last token when the batch was assembled (a new row: its first token, drawn from the prefill's logits).
    ``tables[b, t]``: the uniform of token t of row b's sample (``seeding.sample_uniforms``)."""

    rows: list[_Row]
    cache: SharedPrefixCache
    step_tokens: torch.Tensor
    positions: torch.Tensor
    uniforms: torch.Tensor
    tables: torch.Tensor
    steps: int = 0


class _Sampler:
    """The decoding loop of ``sample_continuations``: prefill a prompt, start its samples as rows, step every
    row one token, drop the finished rows and refill the batch from the queue (continuous batching).

    A decode step is device work only, the same operators whatever the batch holds (``_Batch``): no per-row
    work, no host read. The host reads the batch's new tokens once every ``SYNC_STEPS`` steps (or when a row
    reaches the token limit, which the host knows in advance), in one copy; then it finds the rows that ended
    (EOS, token limit, stop sequences: each row ends at the same token as if checked after every step), hands
    the finished samples to ``on_samples_done`` and refills the batch. Rows that ended keep being stepped
    until then; their tokens are not read.

    One class because its methods share one batch's state (the rows, the prompt stack, the shared prefix
    cache) through every step; the concepts under it are already modules of their own (``kv_cache``: the
    cache; ``packed_linear``: the row-count buckets; the sampling rule: ``sample_tokens``; the random
    stream: ``seeding``; stop sequences: ``StopSequences``)."""

    def __init__(
        self,
        model,
        params: SamplingParams,
        max_new_tokens: int,
        stop: StopSequences | None,
        eos_token_ids: set[int],
        max_rows: int,
        on_samples_done: Callable[[list[tuple[PromptJob, int]]], None] | None,
        exact: bool = True,
    ) -> None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be positive, got {max_new_tokens}")
        self.model, self.params, self.max_new_tokens = model, params, max_new_tokens
        self.stop = stop if stop is not None and stop.stops else None
        self.eos_token_ids = set(eos_token_ids)
        self.max_rows = max(1, int(max_rows))
        self.on_samples_done = on_samples_done
        self.device = next(model.parameters()).device
        self.exact = exact
        # exact: two rows at least (shared_prefix_attention computes a lone row together with a neighbour,
        # row_runs), and the machine's batch-invariant row floor
        self.min_rows = max(2, batch_invariant_rows(model)) if exact else 1

    def _prefill(self, job: PromptJob) -> _Prefill:
        input_ids = torch.tensor([job.token_ids], device=self.device)
        output = self.model(
            input_ids=input_ids,
            past_key_values=DynamicCache(),
            use_cache=True,
            logits_to_keep=1,
            output_hidden_states=job.on_prefill is not None,
        )
        if job.on_prefill is not None:
            job.on_prefill(output.hidden_states)
        layers = output.past_key_values.layers
        prefix = PromptPrefix([layer.keys for layer in layers], [layer.values for layer in layers])
        return _Prefill(job, prefix, first_logits=output.logits[:, -1].float())

    def _next_tokens(self, logits: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
        """Each row's next token from its logits and its uniform."""
        if not self.params.do_sample:
            return logits.argmax(dim=-1)
        return sample_tokens(logits, self.params, uniforms)

    def _start_samples(self, prefill: _Prefill, free: int) -> tuple[list[_Row], torch.Tensor, torch.Tensor]:
        """Up to ``free`` new rows of a prefilled prompt, their uniforms (``_Batch.tables``) and their first
        tokens (drawn from the prefill's logits, on the device)."""
        first = prefill.next_sample
        prefill.next_sample = min(len(prefill.job.seeds), first + free)
        rows = [_Row(prefill, sample, length=1) for sample in range(first, prefill.next_sample)]
        seeds = torch.tensor(
            prefill.job.seeds[first : prefill.next_sample], dtype=torch.long, device=self.device
        )
        steps = torch.arange(self.max_new_tokens + 1, device=self.device)
        tables = sample_uniforms(seeds[:, None], steps[None, :])
        tokens = self._next_tokens(prefill.first_logits.expand(len(rows), -1), tables[:, 0])
        return rows, tables, tokens

    def run(self, jobs: Sequence[PromptJob]) -> None:
        samples = sum(len(job.seeds) for job in jobs)
        rows = max(self.min_rows, min(self.max_rows, samples))
        if not packing_pays() or self.device.type != "cpu" or not self.exact:
            self._run(jobs)
            return
        with packed_linears(self.model, row_buckets(rows, self.min_rows), self.min_rows):
            self._run(jobs)

    def _run(self, jobs: Sequence[PromptJob]) -> None:
        self.queue = deque(job for job in jobs if job.seeds or job.on_prefill is not None)
        self.waiting: _Prefill | None = None  # prefilled, with samples not started yet
        batch: _Batch | None = None
        while True:
            batch = self._refill(batch)
            if batch is None:
                return
            open_lengths = [row.length + batch.steps for row in batch.rows if not row.done]
            steps = min(SYNC_STEPS, self.max_new_tokens - max(open_lengths)) if open_lengths else 0
            for _ in range(steps):
                self._step(batch)
            self._read_back(batch)

    def _refill(self, batch: _Batch | None) -> _Batch | None:
        """The batch for the next steps: the same one while fewer than an eighth of its rows have finished,
        else its open rows followed by new rows from the queue (None when nothing is left to decode)."""
        if batch is not None:
            real = [row for row in batch.rows if not row.padding]
            finished = sum(row.done for row in real)
            if finished < max(1, math.ceil(len(real) / 8)):
                return batch
        kept_indices = [] if batch is None else [i for i, row in enumerate(batch.rows) if not row.done]
        rows = [batch.rows[i] for i in kept_indices] if batch is not None else []
        width = self.max_new_tokens + 1
        kept_rows = torch.tensor(kept_indices, dtype=torch.long, device=self.device)
        tables = [] if batch is None else [batch.tables[kept_rows]]
        last_tokens = [torch.tensor([row.tokens[-1] for row in rows], dtype=torch.long, device=self.device)]
        while len(rows) < self.max_rows and (self.queue or self.waiting is not None):
            if self.waiting is None:
                self.waiting = self._prefill(self.queue.popleft())
            started, started_tables, first_tokens = self._start_samples(
                self.waiting, self.max_rows - len(rows)
            )
            rows += started
            tables.append(started_tables)
            last_tokens.append(first_tokens)
            if self.waiting.next_sample == len(self.waiting.job.seeds):
                self.waiting = None
        if not rows:
            return None
        padding = self.min_rows - len(rows)
        if padding > 0:
            rows += [_Row(rows[0].prefill, -1, done=True, padding=True, length=1) for _ in range(padding)]
            tables.append(torch.zeros(padding, width, dtype=torch.float64, device=self.device))
            last_tokens.append(torch.zeros(padding, dtype=torch.long, device=self.device))
        for row in rows:
            row.length, row.read = max(1, len(row.tokens)), 0 if not row.tokens else 1
        step_tokens = torch.zeros(len(rows), self.max_new_tokens, dtype=torch.long, device=self.device)
        step_tokens[:, 0] = torch.cat(last_tokens)
        tables = torch.cat(tables)
        lengths = torch.tensor([row.length for row in rows], dtype=torch.long, device=self.device)
        columns = lengths[:, None] + torch.arange(self.max_new_tokens, device=self.device)[None, :]
        uniforms = tables.gather(1, columns.clamp(max=width - 1))
        previous = None if batch is None else batch.cache
        kept = None
        if previous is not None and kept_indices:
            kept = previous.kept_rows(kept_rows)
        cache = self._assemble(previous, rows, kept)
        positions = cache.position_ids() + torch.arange(self.max_new_tokens, device=self.device)[None, :]
        return _Batch(rows, cache, step_tokens, positions, uniforms, tables)

    def _assemble(self, previous: SharedPrefixCache | None, rows: list[_Row], kept) -> SharedPrefixCache:
        """The cache for the new set of rows; the prompt stack is rebuilt only when its prompts change."""
        prefills = list(dict.fromkeys(row.prefill for row in rows))
        stack = previous.prefix if previous is not None else None
        if stack is None or [p.prefix for p in prefills] != stack.prefixes:
            stack = PrefixStack([p.prefix for p in prefills], padded=not self.exact)
        position = {id(prefix): index for index, prefix in enumerate(stack.prefixes)}
        prompt_rows = [position[id(row.prefill.prefix)] for row in rows]
        prompt_index = torch.tensor(prompt_rows, device=self.device)
        # a kept row has fed all its tokens but the last one to the cache; a new row none
        generated = [row.length - 1 for row in rows]
        extra_columns = max(self.max_new_tokens - row.length for row in rows)
        return SharedPrefixCache.assemble(stack, prompt_index, kept, extra_columns, (prompt_rows, generated))

    def _step(self, batch: _Batch) -> None:
        """One token for every row, on the device (rows that ended run too; their tokens are not read)."""
        cache, step = batch.cache, batch.steps
        cache.attention_calls = 0
        with decoding_attention(self.model):
            output = self.model(
                input_ids=batch.step_tokens[:, step : step + 1],
                position_ids=batch.positions[:, step : step + 1],
                past_key_values=cache,
                use_cache=True,
                capcal_cache=cache,
            )
        if cache.attention_calls != len(cache.layers):
            raise RuntimeError(
                f"{type(self.model).__name__} did not compute attention through transformers' "
                f"AttentionInterface ({cache.attention_calls} of {len(cache.layers)} layers); capcal-hf "
                "cannot decode it"
            )
        uniforms = batch.uniforms.select(1, step) if self.params.do_sample else None
        batch.step_tokens.select(1, step + 1).copy_(self._next_tokens(output.logits[:, -1], uniforms))
        batch.steps += 1

    def _read_back(self, batch: _Batch) -> None:
        """The host read of the batch's new tokens (one copy): rows that ended, finished samples."""
        columns = batch.step_tokens.narrow(1, 0, batch.steps + 1).tolist()
        finished: list[tuple[PromptJob, int]] = []
        active = [index for index, row in enumerate(batch.rows) if not row.done]
        for index in active:
            row = batch.rows[index]
            for token in columns[index][row.read :]:
                row.tokens.append(token)
                if token in self.eos_token_ids or len(row.tokens) >= self.max_new_tokens:
                    row.done = True
                    break
            row.read = batch.steps + 1
        if self.stop is not None:
            rows = [batch.rows[index] for index in active]
            stops = self.stop.first_stops([row.tokens for row in rows], [row.checked for row in rows])
            for row, stop in zip(rows, stops, strict=True):
                if stop is not None:
                    del row.tokens[stop:]
                    row.done = True
                row.checked = len(row.tokens)
        for index in active:
            row = batch.rows[index]
            if row.done:
                row.prefill.job.outputs[row.sample] = row.tokens
                finished.append((row.prefill.job, row.sample))
        if finished and self.on_samples_done is not None:
            self.on_samples_done(finished)


@torch.inference_mode()
def sample_continuations(
    model,
    jobs: Sequence[PromptJob],
    params: SamplingParams,
    max_new_tokens: int,
    stop: StopSequences | None,
    eos_token_ids: set[int],
    max_rows: int,
    on_samples_done: Callable[[list[tuple[PromptJob, int]]], None] | None = None,
    attention: str = "exact",
) -> None:
    """Draw every job's samples (see the module docstring); fills ``job.outputs``.

    ``max_rows``: the most samples decoded at once (the batch size). Jobs are prefilled in the given order.
    ``on_samples_done([(job, i), ...])`` runs at each host read of the batch with the samples finished since
    the last one (``job.outputs[i]`` set). ``attention``: ``"exact"`` (``shared_prefix_attention``: a row's
    logits do not depend on the batch, to the last bit) or ``"batched"`` (``batched_attention``: a step's
    operators do not depend on the batch; a GPU's choice).
    """
    if attention not in ATTENTION_MODES:
        raise ValueError(f"attention={attention!r}: use one of {', '.join(ATTENTION_MODES)}")
    sampler = _Sampler(
        model, params, max_new_tokens, stop, eos_token_ids, max_rows, on_samples_done, attention == "exact"
    )
    sampler.run(jobs)
