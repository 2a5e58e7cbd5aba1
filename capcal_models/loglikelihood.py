"""Log-likelihoods on capcal-hf: one forward pass per context, a document's shared prompt prefilled once.

P(True) asks for the log-likelihoods of " Yes" and " No" after one context; Self-Calibration's self-check
(Huang et al. 2025) asks for them after k contexts per question that all start with the question's prompt and
differ from the response on. ``score_loglikelihoods`` serves lm-eval ``loglikelihood`` requests with the
results of lm-eval's ``HFLM`` (sum of the continuation tokens' log-probabilities, and whether every one is the
argmax):

- requests are tokenised exactly as lm-eval tokenises them (``encode_requests``), then grouped by their
  *scored sequence* ``context + continuation[:-1]``: every continuation whose last token is predicted at the
  end of that sequence (" Yes" and " No"; "\\nYes" and "\\nNo" after a chat template, whose first token "\\n"
  is part of both) is read from one forward pass; multi-token continuations are exact too (the logits of
  every continuation position are kept);
- the *document prefix*: the longest common token prefix of a document's scored sequences (its k self-check
  contexts: the question's prompt) is prefilled once; every sequence of the document then runs only its own
  suffix, attending to the prefix's keys and values;
- segments (prefixes, suffixes, or whole sequences) are packed into one row per forward pass (at most
  ``max_segments`` per pass, the batch size); attention runs per segment over exactly its prefix and its own
  tokens (``packed_attention``), so no padding is computed and only the scored positions reach the
  vocabulary projection;
- batch-invariant: a segment's attention has shapes that depend only on the segment, and every pass has at
  least ``batch_invariant_rows(model)`` tokens and scored positions (padding added), from which the machine's
  matrix products give each row the same bits whatever the row count (``capcal_models.decoding``; packed
  passes have more rows than it probes: tests/capcal_models/test_hf_loglikelihood.py checks them). A result
  therefore depends only on its own tokens and its document's prefix (the common prefix of that document's
  requests), not on the batch size, ``--limit``, the order or the other documents of the run.

Requests longer than the model's context (lm-eval truncates them from the left) go to lm-eval's own path
(``fallback``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface

from capcal_models.decoding import batch_invariant_rows
from capcal_models.kv_cache import attention_implementation

__all__ = [
    "ATTENTION_NAME",
    "EncodedRequest",
    "PackedSegments",
    "encode_requests",
    "packed_attention",
    "score_loglikelihoods",
]

ATTENTION_NAME = "capcal_packed_segments"
MIN_SHARED_PREFIX = 8  # a document prefix shorter than this is not prefilled on its own


@dataclass(frozen=True)
class EncodedRequest:
    """One loglikelihood request as lm-eval tokenises it; ``document``: the key of its lm-eval document."""

    request: tuple[str, str]
    context: list[int]
    continuation: list[int]
    document: object


def encode_requests(
    requests: Sequence,
    encode_pair: Callable[[str, str], tuple[list[int], list[int]]],
    encode: Callable[..., list[int]],
    prefix_token_id: int,
) -> list[EncodedRequest]:
    """Tokenise ``(context, continuation)`` requests as lm-eval's ``TemplateLM.loglikelihood`` does, with the
    model's ``encode_pair`` and ``tok_encode``: an empty context becomes ``prefix_token_id``; otherwise
    ``encode_pair`` moves the context's trailing spaces to the continuation and splits the joint encoding."""
    encoded = []
    for index, instance in enumerate(requests):
        context, continuation = instance.args
        if context == "":
            continuation_ids = encode(continuation, add_special_tokens=False)
            if prefix_token_id != continuation_ids[0]:
                context_ids = [prefix_token_id]
            else:
                context_ids, continuation_ids = continuation_ids[:1], continuation_ids[1:]
        else:
            context_ids, continuation_ids = encode_pair(context, continuation)
        task, doc_id = getattr(instance, "task_name", None), getattr(instance, "doc_id", None)
        document = ("request", index) if task is None or doc_id is None else (task, doc_id)
        encoded.append(EncodedRequest((context, continuation), context_ids, continuation_ids, document))
    return encoded


@dataclass(eq=False)
class _Prefix:
    """A document prefix: its tokens, and after its prefill one ``(1, kv_heads, length, head_dim)`` key and
    value tensor per layer."""

    tokens: tuple[int, ...]
    keys: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)


@dataclass(eq=False)
class _Sequence:
    """A scored sequence (``context + continuation[:-1]``), the prefix it continues and its requests."""

    tokens: tuple[int, ...]
    prefix: _Prefix | None
    requests: list[int] = field(default_factory=list)
    first_scored: int = 0  # the first position whose logits a request needs

    @property
    def start(self) -> int:
        return 0 if self.prefix is None else len(self.prefix.tokens)


@dataclass
class _Segment:
    """Tokens ``[start, end)`` of a sequence in a packed pass; ``prefix``: the keys it attends to first."""

    offset: int  # where its tokens are in the packed row
    length: int
    prefix: _Prefix | None
    stores: _Prefix | None = None  # this segment is a prefix: keep its keys and values


class PackedSegments:
    """What ``packed_attention`` needs to know about a pass: its segments, in packed order."""

    def __init__(self, segments: list[_Segment]) -> None:
        self.segments = segments
        self.attention_calls = 0
        self.masks: dict[int | None, list[torch.Tensor]] = {}  # by sliding window, one mask per segment

    def segment_masks(self, device: torch.device, sliding_window: int | None) -> list[torch.Tensor]:
        """Each segment's causal mask over its prefix and its own tokens (True: attended); with a sliding
        window W, a token attends to the W positions up to and including its own, as transformers' mask."""
        if sliding_window not in self.masks:
            masks = []
            for segment in self.segments:
                past = 0 if segment.prefix is None else len(segment.prefix.tokens)
                rows = torch.arange(segment.length, device=device)[:, None] + past
                columns = torch.arange(past + segment.length, device=device)[None, :]
                mask = columns <= rows
                if sliding_window is not None:
                    mask &= columns > rows - sliding_window
                masks.append(mask)
            self.masks[sliding_window] = masks
        return self.masks[sliding_window]


def packed_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    capcal_segments: PackedSegments | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Causal attention (full or sliding-window) of each packed segment over its prefix's keys and its own,
    computed per segment.

    ``query``/``key``/``value``: ``(1, heads or kv_heads, tokens, head_dim)`` of the packed row. Returns
    ``(1, tokens, heads, head_dim)`` like transformers' attention functions. Every product has the segment's
    own shapes, so its result does not depend on the other segments of the pass.
    """
    if capcal_segments is None or query.shape[0] != 1:
        raise RuntimeError("capcal_packed_segments attention needs PackedSegments and one packed row")
    if kwargs.get("softcap") or kwargs.get("s_aux") is not None:
        raise RuntimeError("capcal-hf log-likelihoods support causal full and sliding-window attention only")
    capcal_segments.attention_calls += 1
    masks = capcal_segments.segment_masks(query.device, kwargs.get("sliding_window"))
    layer = module.layer_idx
    heads, kv_heads = query.shape[1], key.shape[1]
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    outputs = []
    for segment, mask in zip(capcal_segments.segments, masks, strict=True):
        own = slice(segment.offset, segment.offset + segment.length)
        segment_keys, segment_values = key[:, :, own], value[:, :, own]
        if segment.stores is not None:
            segment.stores.keys.append(segment_keys.clone())
            segment.stores.values.append(segment_values.clone())
        if segment.prefix is not None:
            segment_keys = torch.cat([segment.prefix.keys[layer], segment_keys], dim=-2)
            segment_values = torch.cat([segment.prefix.values[layer], segment_values], dim=-2)
        outputs.append(
            torch.nn.functional.scaled_dot_product_attention(
                query[:, :, own],
                segment_keys,
                segment_values,
                attn_mask=mask,
                scale=scaling,
                enable_gqa=heads != kv_heads,
            )
        )
    output = torch.cat(outputs, dim=-2)
    return output.transpose(1, 2).contiguous(), None


def _no_mask(*args, **kwargs) -> None:
    return None  # packed_attention builds each segment's mask itself


AttentionInterface.register(ATTENTION_NAME, packed_attention)
AttentionMaskInterface.register(ATTENTION_NAME, _no_mask)


def _common_prefix_length(sequences: list[tuple[int, ...]]) -> int:
    first, last = min(sequences), max(sequences)  # the common prefix of all is that of the extremes
    length = 0
    for a, b in zip(first, last, strict=False):
        if a != b:
            break
        length += 1
    return length


def _plan(encoded: list[EncodedRequest], indices: list[int]) -> list[list[_Sequence]]:
    """The scored sequences of the requests ``indices``, by document (in first-seen order), each sequence
    pointing to its document's prefix (None when the document has one sequence or a short common prefix)."""
    documents: dict[object, dict[tuple[int, ...], list[int]]] = {}
    for index in indices:
        request = encoded[index]
        tokens = tuple(request.context + request.continuation[:-1])
        documents.setdefault(request.document, {}).setdefault(tokens, []).append(index)
    prefixes: dict[tuple[int, ...], _Prefix] = {}
    planned = []
    for by_tokens in documents.values():
        first_scored = {
            tokens: min(len(encoded[index].context) for index in members) - 1
            for tokens, members in by_tokens.items()
        }
        length = 0
        if len(by_tokens) > 1:  # the prefix must end before the first scored position of every sequence
            length = min(_common_prefix_length(list(by_tokens)), *first_scored.values())
        prefix = None
        if length >= MIN_SHARED_PREFIX:
            key = next(iter(by_tokens))[:length]
            prefix = prefixes.setdefault(key, _Prefix(key))
        planned.append(
            [
                _Sequence(tokens, prefix, members, first_scored[tokens])
                for tokens, members in by_tokens.items()
            ]
        )
    return planned


class _Scorer:
    def __init__(self, lm, max_segments: int, answer: Callable[[int, tuple[float, bool]], None]) -> None:
        self.lm, self.model = lm, lm.model
        self.max_segments = max(1, int(max_segments))
        self.answer = answer
        self.device = next(self.model.parameters()).device
        self.min_rows = batch_invariant_rows(self.model)

    def _forward(self, segments: list[_Segment], tokens: list[int], positions: list[int], keep: list[int]):
        """One packed pass; returns the float log-softmax of the ``keep`` positions (None when none)."""
        padding = max(0, self.min_rows - len(tokens))  # a segment of its own, attending to itself only
        if padding:
            segments = [*segments, _Segment(len(tokens), padding, None)]
            tokens = tokens + [tokens[-1]] * padding
            positions = positions + list(range(padding))
        kept = keep + [keep[-1] if keep else 0] * max(0, self.min_rows - len(keep))
        packed = PackedSegments(segments)
        autocast = torch.autocast(
            device_type=self.device.type,
            dtype=self.lm.mixed_precision_dtype,
            enabled=self.lm.mixed_precision_dtype is not None,
        )
        with attention_implementation(self.model, ATTENTION_NAME), autocast:
            output = self.model(
                input_ids=torch.tensor([tokens], device=self.device),
                position_ids=torch.tensor([positions], device=self.device),
                use_cache=False,
                logits_to_keep=torch.tensor(kept, device=self.device),
                capcal_segments=packed,
            )
        config = self.model.config
        layers = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
        layers = layers.num_hidden_layers
        if packed.attention_calls != layers:
            raise RuntimeError(
                f"{type(self.model).__name__} did not compute attention through transformers' "
                f"AttentionInterface ({packed.attention_calls} of {layers} layers); capcal-hf cannot score it"
            )
        if not keep:
            return None
        return torch.log_softmax(output.logits[0, : len(keep)], dim=-1, dtype=self.lm.softmax_dtype)

    def prefill(self, prefixes: list[_Prefix]) -> None:
        for start in range(0, len(prefixes), self.max_segments):
            segments, tokens, positions = [], [], []
            for prefix in prefixes[start : start + self.max_segments]:
                segments.append(_Segment(len(tokens), len(prefix.tokens), None, stores=prefix))
                tokens += prefix.tokens
                positions += range(len(prefix.tokens))
            self._forward(segments, tokens, positions, [])

    def score(self, sequences: list[_Sequence], encoded: list[EncodedRequest]) -> None:
        for start in range(0, len(sequences), self.max_segments):
            batch = sequences[start : start + self.max_segments]
            segments, tokens, positions, keep = [], [], [], []
            for sequence in batch:
                offset, begin = len(tokens), sequence.start
                segments.append(_Segment(offset, len(sequence.tokens) - begin, sequence.prefix))
                tokens += sequence.tokens[begin:]
                positions += range(begin, len(sequence.tokens))
                keep += range(offset + sequence.first_scored - begin, offset + len(sequence.tokens) - begin)
            logprobs = self._forward(segments, tokens, positions, keep)
            row = 0
            for sequence in batch:
                scored = len(sequence.tokens) - sequence.first_scored  # positions kept for this sequence
                rows = logprobs[row : row + scored]
                row += scored
                for index in sequence.requests:
                    continuation = encoded[index].continuation
                    picked = rows[scored - len(continuation) :]
                    target = torch.tensor(continuation, device=picked.device)
                    logprob = picked.gather(-1, target[:, None]).squeeze(-1).sum()
                    greedy = bool((picked.argmax(dim=-1) == target).all())
                    self.answer(index, (float(logprob), greedy))


@torch.inference_mode()
def score_loglikelihoods(
    lm,
    encoded: list[EncodedRequest],
    max_segments: int,
    fallback: Callable[[list[tuple[tuple[str, str], list[int], list[int]]]], list[tuple[float, bool]]],
    on_answer: Callable[[int], None] | None = None,
) -> list[tuple[float, bool]]:
    """``(log-likelihood, is_greedy)`` of every encoded request, in order (see the module docstring).

    ``lm``: an lm-eval ``HFLM`` (its model, ``softmax_dtype``, ``mixed_precision_dtype``, ``max_length``).
    ``max_segments``: the most segments (prefixes or sequences) per forward pass. ``fallback``: lm-eval's
    ``_loglikelihood_tokens``, for requests longer than the model's context. ``on_answer(index)`` runs as
    each request is answered (progress, lm-eval's cache hook).
    """
    results: list[tuple[float, bool] | None] = [None] * len(encoded)

    def answer(index: int, value: tuple[float, bool]) -> None:
        results[index] = value
        if on_answer is not None:
            on_answer(index)

    too_long = [i for i, r in enumerate(encoded) if len(r.context) + len(r.continuation) > lm.max_length]
    if too_long:
        values = fallback(
            [(encoded[i].request, encoded[i].context, encoded[i].continuation) for i in too_long]
        )
        for index, value in zip(too_long, values, strict=True):
            answer(index, value)
    skipped = set(too_long)
    documents = _plan(encoded, [i for i in range(len(encoded)) if i not in skipped])
    scorer = _Scorer(lm, max_segments, answer)
    # Documents in waves of about max_segments sequences: prefixes prefilled, then the sequences scored.
    wave: list[_Sequence] = []
    for position, sequences in enumerate(documents):
        wave += sequences
        if len(wave) >= scorer.max_segments or position == len(documents) - 1:
            prefixes = [s.prefix for s in wave if s.prefix is not None and not s.prefix.keys]
            prefixes = list(dict.fromkeys(prefixes))
            scorer.prefill(prefixes)
            scorer.score(wave, encoded)
            for prefix in prefixes:  # free their keys and values
                prefix.keys, prefix.values = [], []
            wave = []
    missing = [index for index, value in enumerate(results) if value is None]
    if missing:
        raise RuntimeError(f"capcal-hf: {len(missing)} log-likelihood requests were not scored")
    return results  # type: ignore[return-value]
