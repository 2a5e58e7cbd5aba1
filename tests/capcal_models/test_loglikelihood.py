"""capcal-hf's log-likelihoods (``capcal_models.loglikelihood``), fast: on a random-weight 2-layer model of
SmolLM2's architecture (``benchmarks/decode_step_ops.tiny_model``), with hand-built lm-eval requests of the
shapes P(True) and the self-check make (documents whose contexts share a long prompt, contexts that share
nothing, one- and multi-token continuations, a continuation that is the model's own greedy token, a context
longer than the model's window). The reference is lm-eval's stock ``HFLM`` on the same model, request by
request (its own tokenisation, padding and truncation); the real-model comparison on lm-eval's own P(True) and
self-check requests is ``test_hf_loglikelihood.py`` (slow)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
import torch
from lm_eval.api.instance import Instance

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import decode_step_ops  # noqa: E402  (benchmarks/decode_step_ops.py: a random-weight model)

QUESTIONS = [
    "Question: A farmer has 17 sheep and buys 5 more, then sells 3. How many sheep does the farmer have now?",
    "Question: What is the capital city of the country whose flag has a red maple leaf in its centre?",
    "Question: Name the chemical element with atomic number 26, used since antiquity to make tools.",
]
RESPONSES = ["The answer is 19.", "I think it is 21, but I am not sure", "Ottawa"]
CHECK = "\nIs the proposed answer correct? Answer:"


@pytest.fixture(scope="module")
def tiny(smollm2_path, tmp_path_factory) -> Path:
    return decode_step_ops.tiny_model(smollm2_path, tmp_path_factory.mktemp("tiny_ll"), seed=11)


@pytest.fixture(scope="module")
def stock(tiny):
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=str(tiny), batch_size=1, device="cpu")


def _capcal(stock, batch_size: int, **kwargs):
    from capcal_models.hf import CapcalHFLM

    return CapcalHFLM(
        pretrained=stock.model,
        tokenizer=stock.tokenizer,
        batch_size=batch_size,
        device="cpu",
        sample_cache=False,
        **kwargs,
    )


def _request(context: str, continuation: str, doc_id: int, idx: int) -> Instance:
    return Instance(
        request_type="loglikelihood",
        doc={"question": context[:20]},
        arguments=(context, continuation),
        idx=idx,
        metadata=("capcal_toy_selfcheck", doc_id, 1),
    )


def _greedy_continuation(stock, context: str) -> str | None:
    """The model's own argmax token after ``context``, as text, where lm-eval's tokenisation of context +
    that text gives back exactly that token (so a scorer must call it greedy); None otherwise."""
    ids = stock.tok_encode(context)
    with torch.no_grad():
        logits = stock.model(torch.tensor([ids])).logits[0, -1]
    token = int(torch.argmax(logits))
    text = stock.tokenizer.decode([token])
    context_ids, continuation_ids = stock._encode_pair(context, text)
    return text if continuation_ids == [token] and context_ids == ids else None


@pytest.fixture(scope="module")
def requests(stock) -> list[Instance]:
    """Self-check documents (3 contexts each sharing the question's prompt, " Yes" and " No" after each),
    P(True)-like lone contexts, multi-token continuations, and greedy continuations."""
    built: list[Instance] = []
    for doc_id, question in enumerate(QUESTIONS):
        for response in RESPONSES:
            context = f"{question}\nProposed answer: {response}{CHECK}"
            for continuation in (" Yes", " No"):
                built.append(_request(context, continuation, doc_id, len(built)))
    built.append(_request("Is water wet?", " Yes", 10, len(built)))  # shorter than MIN_SHARED_PREFIX
    built.append(_request("The sky is", " blue and clear today", 11, len(built)))  # many tokens
    greedy = 0
    for doc_id, context in enumerate(["Once upon a time", "1, 2, 3, 4,", "The cat sat on the", "Hello"]):
        text = _greedy_continuation(stock, context)
        if text is not None:
            built.append(_request(context, text, 20 + doc_id, len(built)))
            # the greedy token, then one that is not: greedy means every token is the argmax
            built.append(_request(context, text + " zebra", 20 + doc_id, len(built)))
            greedy += 1
    assert greedy >= 1, "no context gave a greedy token that tokenises back to itself"
    return built


@pytest.fixture(scope="module")
def expected(stock, requests) -> list[tuple[float, bool]]:
    return stock.loglikelihood(requests, disable_tqdm=True)


def test_the_requests_have_the_shapes_the_scorer_plans_for(stock, requests, expected) -> None:
    from capcal_models.loglikelihood import MIN_SHARED_PREFIX

    contexts = [stock.tok_encode(r.args[0]) for r in requests[:6]]  # document 0: three contexts
    shared = 0
    while all(len(c) > shared and c[shared] == contexts[0][shared] for c in contexts):
        shared += 1
    assert MIN_SHARED_PREFIX <= shared < min(map(len, contexts))
    assert len(stock.tok_encode(" blue and clear today")) > 1
    assert any(greedy for _, greedy in expected) and not all(greedy for _, greedy in expected)
    zebras = [i for i, r in enumerate(requests) if r.args[1].endswith(" zebra")]
    assert zebras and all(expected[i - 1][1] and not expected[i][1] for i in zebras)
    assert len({round(value, 4) for value, _ in expected}) > len(requests) // 2  # varied values


@pytest.mark.parametrize("batch_size", [1, 3, 64])
def test_loglikelihoods_equal_stock_hf_request_by_request(stock, requests, expected, batch_size) -> None:
    ours = _capcal(stock, batch_size).loglikelihood(requests, disable_tqdm=True)
    assert len(ours) == len(expected)
    for index, (mine, theirs) in enumerate(zip(ours, expected, strict=True)):
        assert abs(mine[0] - theirs[0]) <= 1e-4, (index, requests[index].args, mine, theirs)
        assert mine[1] == theirs[1], (index, requests[index].args)


def test_a_result_does_not_depend_on_batch_size_order_or_the_other_requests(stock, requests) -> None:
    reference = _capcal(stock, 4).loglikelihood(requests, disable_tqdm=True)
    for batch_size in (1, 2, 64):
        assert _capcal(stock, batch_size).loglikelihood(requests, disable_tqdm=True) == reference
    order = list(range(len(requests)))
    random.Random(0).shuffle(order)
    shuffled = _capcal(stock, 4).loglikelihood([requests[i] for i in order], disable_tqdm=True)
    assert shuffled == [reference[i] for i in order]
    # one document alone (its prefix is the same: the common prefix of its own contexts)
    alone = [i for i, r in enumerate(requests) if r.doc_id == 1]
    assert _capcal(stock, 4).loglikelihood([requests[i] for i in alone], disable_tqdm=True) == [
        reference[i] for i in alone
    ]


def test_requests_longer_than_the_window_take_lm_evals_own_truncating_path(stock, requests) -> None:
    from lm_eval.models.huggingface import HFLM

    lengths = [len(stock.tok_encode(r.args[0] + r.args[1])) for r in requests]
    window = sorted(set(lengths))[len(set(lengths)) // 2]
    long = [i for i, length in enumerate(lengths) if length > window]
    assert 0 < len(long) < len(requests)
    ours = _capcal(stock, 4, max_length=window).loglikelihood(requests, disable_tqdm=True)
    theirs = HFLM(
        pretrained=stock.model, tokenizer=stock.tokenizer, batch_size=1, device="cpu", max_length=window
    ).loglikelihood(requests, disable_tqdm=True)
    for index, (mine, reference) in enumerate(zip(ours, theirs, strict=True)):
        assert abs(mine[0] - reference[0]) <= 1e-4 and mine[1] == reference[1], index
    # the long ones are scored on the truncated context: not what the whole context gives
    whole = stock.loglikelihood([requests[i] for i in long], disable_tqdm=True)
    assert any(abs(ours[i][0] - value) > 1e-3 for i, (value, _) in zip(long, whole, strict=True))


@pytest.mark.parametrize("shared", [7, 8, 9])
def test_a_documents_prefix_is_prefilled_alone_from_eight_shared_tokens(shared) -> None:
    """``MIN_SHARED_PREFIX`` is 8: two answers to one document whose contexts share 8 or more tokens (all of
    them before the first scored position) continue one prefix of exactly those tokens; with 7 they are
    scored whole, without a prefix. Token ids written out; no model."""
    from capcal_models.loglikelihood import EncodedRequest, _plan

    common = list(range(100, 100 + shared))
    first = EncodedRequest(("c", " a"), [*common, 1, 2, 3], [4, 5], "doc")
    second = EncodedRequest(("c", " b"), [*common, 6, 7, 8], [9], "doc")
    [sequences] = _plan([first, second], [0, 1])
    assert [sequence.requests for sequence in sequences] == [[0], [1]]
    prefixes = {id(sequence.prefix): sequence.prefix for sequence in sequences}
    if shared >= 8:
        assert len(prefixes) == 1 and next(iter(prefixes.values())).tokens == tuple(common)
        assert [sequence.start for sequence in sequences] == [shared, shared]
    else:
        assert list(prefixes.values()) == [None]
        assert [sequence.start for sequence in sequences] == [0, 0]


@pytest.mark.parametrize("setting", [{"softcap": 50.0}, {"s_aux": torch.zeros(2)}])
def test_packed_attention_refuses_settings_it_does_not_implement(setting) -> None:
    """An attention with logit soft-capping (Gemma 2) or attention sinks (``s_aux``) is refused in one line
    before anything is computed: the packed path implements plain causal and sliding-window attention."""
    from types import SimpleNamespace

    from capcal_models.loglikelihood import PackedSegments, _Segment, packed_attention

    segments = PackedSegments([_Segment(offset=0, length=3, prefix=None)])
    query, key = torch.zeros(1, 2, 3, 4), torch.zeros(1, 1, 3, 4)
    refusal = r"^capcal-hf log-likelihoods support causal full and sliding-window attention only$"
    with pytest.raises(RuntimeError, match=refusal):
        packed_attention(
            SimpleNamespace(layer_idx=0), query, key, key, None, capcal_segments=segments, **setting
        )
    assert segments.attention_calls == 0
