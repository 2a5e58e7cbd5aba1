"""capcal-hf's log-likelihoods (``capcal_models.loglikelihood``) on real requests: lm-eval builds the P(True)
and self-check requests of ``capcal_arithmetic`` (the self-check ones on the responses of a real capcal-hf
run of SmolLM2), with and without the chat template; the results must equal stock ``hf``'s within 1e-4 (same
``is_greedy``) and not change, to the last bit, with the batch size, the order or the other requests."""

from __future__ import annotations

import os
import random

import pytest

PER_LEVEL, K, BATCH = 1, 4, 8  # 5 questions (one per level), 4 responses each
TASKS = ("capcal_arithmetic_selfcheck", "capcal_arithmetic_ptrue")


@pytest.fixture(scope="module")
def capcal_lm(smollm2_path):
    from capcal_models.hf import CapcalHFLM

    return CapcalHFLM(pretrained=str(smollm2_path), batch_size=BATCH, device="cpu", sample_cache=False)


@pytest.fixture(scope="module")
def stock_lm(capcal_lm):
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=capcal_lm.model, tokenizer=capcal_lm.tokenizer, batch_size=BATCH, device="cpu")


@pytest.fixture(scope="module")
def earlier_samples(tmp_path_factory, capcal_lm):
    """The samples file of a real capcal-hf run of capcal_arithmetic (K responses per question)."""
    from analysis.evaluation import evaluate

    results = evaluate(
        capcal_lm,
        "capcal_arithmetic",
        repeats=K,
        metadata={"arithmetic_per_level": PER_LEVEL},
        output_path=tmp_path_factory.mktemp("earlier_run"),
        apply_chat_template=True,
        bootstrap_iters=0,
        device="cpu",
    )
    return results["capcal_files"]["samples"]["capcal_arithmetic"]


def _requests(lm, samples_file, chat_template: bool) -> list:
    """lm-eval's requests of the self-check and P(True) tasks, built by the tasks themselves."""
    from capcal_tasks.task_manager import CapcalTaskManager

    metadata = {"samples_file": str(samples_file), "arithmetic_per_level": PER_LEVEL}
    tasks = CapcalTaskManager(include_defaults=False, metadata=metadata).load(list(TASKS))["tasks"]
    requests = []
    for name in TASKS:
        tasks[name].build_all_requests(
            apply_chat_template=chat_template,
            chat_template=lm.apply_chat_template if chat_template else None,
            tokenizer_name=lm.tokenizer_name,
        )
        requests += tasks[name].instances
    return requests


@pytest.fixture(scope="module", params=[True, False], ids=["chat_template", "plain"])
def scored(request, capcal_lm, stock_lm, earlier_samples):
    requests = _requests(capcal_lm, earlier_samples, request.param)
    capcal_lm.batch_size_per_gpu = BATCH
    return request.param, requests, capcal_lm.loglikelihood(requests, disable_tqdm=True)


@pytest.mark.slow
def test_loglikelihoods_equal_stock_hf(scored, capcal_lm, stock_lm):
    chat_template, requests, results = scored
    from capcal_models.loglikelihood import MIN_SHARED_PREFIX, encode_requests

    assert len(requests) == 2 * K * 5 + 2 * 5
    # The requests exercise what the engine does: self-check contexts of one question share a prompt prefix;
    # with the chat template " Yes"/" No" become the two-token "\nYes"/"\nNo" (the context's last newline).
    encoded = encode_requests(
        requests, capcal_lm._encode_pair, capcal_lm.tok_encode, capcal_lm.prefix_token_id
    )
    continuation_lengths = {len(request.continuation) for request in encoded}
    assert continuation_lengths == ({2} if chat_template else {1})
    first_question = [r.context for r, i in zip(encoded, requests, strict=True) if i.doc_id == 0]
    shared = len(os.path.commonprefix(first_question[: 2 * K]))  # the self-check contexts of question 0
    assert MIN_SHARED_PREFIX <= shared < min(map(len, first_question[: 2 * K]))

    expected = stock_lm.loglikelihood(requests, disable_tqdm=True)
    differences = [abs(ours[0] - theirs[0]) for ours, theirs in zip(results, expected, strict=True)]
    assert max(differences) <= 1e-4, f"largest difference {max(differences):.2e}"
    assert [greedy for _, greedy in results] == [greedy for _, greedy in expected]
    assert len({round(value, 3) for value, _ in results}) > 5  # real, varied log-likelihoods


@pytest.mark.slow
def test_loglikelihoods_do_not_depend_on_batch_size_order_or_other_requests(scored, capcal_lm):
    """Batch size 2, the requests shuffled, and the requests of two documents alone: identical bits."""
    _, requests, reference = scored
    for batch_size in (2,):
        capcal_lm.batch_size_per_gpu = batch_size
        assert capcal_lm.loglikelihood(requests, disable_tqdm=True) == reference, f"batch size {batch_size}"
    capcal_lm.batch_size_per_gpu = BATCH
    order = list(range(len(requests)))
    random.Random(0).shuffle(order)
    shuffled = capcal_lm.loglikelihood([requests[i] for i in order], disable_tqdm=True)
    assert shuffled == [reference[i] for i in order]
    documents = {(r.task_name, r.doc_id) for r in requests[:1] + requests[-1:]}
    few = [i for i, r in enumerate(requests) if (r.task_name, r.doc_id) in documents]
    assert capcal_lm.loglikelihood([requests[i] for i in few], disable_tqdm=True) == [
        reference[i] for i in few
    ]


@pytest.mark.slow
def test_requests_longer_than_the_model_context_take_lm_eval_path(capcal_lm, earlier_samples):
    """With a context window of the median of the distinct request lengths (responses cut at max_gen_toks
    share a length), the longer requests are truncated as lm-eval truncates them (its own path), the others
    scored by capcal-hf."""
    from lm_eval.models.huggingface import HFLM

    from capcal_models.hf import CapcalHFLM

    requests = _requests(capcal_lm, earlier_samples, chat_template=False)[: 4 * K]
    lengths = [len(capcal_lm.tok_encode(r.args[0])) + 1 for r in requests]  # context + " Yes" / " No"
    distinct = sorted(set(lengths))
    assert len(distinct) > 1, lengths
    window = distinct[len(distinct) // 2]
    long = [i for i, length in enumerate(lengths) if length > window]
    assert 0 < len(long) < len(requests)
    models = {"pretrained": capcal_lm.model, "tokenizer": capcal_lm.tokenizer, "max_length": window}
    ours = CapcalHFLM(batch_size=BATCH, **models).loglikelihood(requests, disable_tqdm=True)
    theirs = HFLM(batch_size=1, **models).loglikelihood(requests, disable_tqdm=True)
    assert [ours[i] for i in long] == [theirs[i] for i in long]  # the same computation
    for ours_one, theirs_one in zip(ours, theirs, strict=True):
        assert abs(ours_one[0] - theirs_one[0]) <= 1e-4 and ours_one[1] == theirs_one[1]
