"""capcal-hf against stock lm-eval ``hf`` and transformers, on the real SmolLM2.

The sampler's parts (logit warping, inverse-CDF sampling, parameter resolution, stop sequences) are tested
in test_decoding.py. Sampling statistics are judged with the helpers in sampling_checks.py (shared with the
vLLM tests). Every sampled run uses a fixed run seed (1234), so each test is deterministic; the tolerances
say how unlikely a failure would be if capcal-hf sampled exactly like stock ``hf``:

- token-level equivalence: first tokens of 2000 samples per prompt against transformers' own warped
  distribution, chi-square goodness of fit, p > 0.001;
- sequence-level equivalence: per-sample log-probabilities of capcal-hf and stock ``hf`` samples on
  capcal_gsm8k, stratified permutation test, p > 0.001 (a temperature of 0.5 instead of 1 must give
  p < 0.01, so the test can fail); mean expected accuracy within 3 standard errors;
- independence: duplicate pairs within questions at most the Poisson 0.999 quantile of what independent
  sampling explains (k copies of one sample must fail it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from lm_eval.api.instance import Instance

from capcal_models.decoding import PromptJob, SamplingParams, sample_continuations

sys.path.insert(0, str(Path(__file__).parent))  # sampling_checks.py, shared with the vLLM tests
from sampling_checks import (  # noqa: E402
    chi_square,
    cloned_requests,
    duplicate_excess,
    evaluate_gsm8k,
    gsm8k_task,
    mean_difference_z,
    samples_by_question,
    stock_sample_logprobs,
    stratified_permutation_pvalue,
    transformers_scores,
)

QUESTIONS, K, MAX_GEN_TOKS, RUN_SEED = 5, 4, 16, 1234


def gsm8k_requests(lm, questions: int, k: int, **gen_kwargs) -> list[Instance]:
    """lm-eval's capcal_gsm8k requests of the first questions, k clones each, ``gen_kwargs`` added."""
    return cloned_requests(gsm8k_task(lm, questions), questions, k, **gen_kwargs)


def test_capcal_hf_is_registered_next_to_lm_evals_models():
    from lm_eval.api.registry import get_model

    from capcal_models.hf import CapcalHFLM
    from capcal_models.registry import register_models

    names = register_models()
    assert "capcal-hf" in names and "hf" in names
    assert get_model("capcal-hf") is CapcalHFLM


def test_a_long_prompt_keeps_its_last_max_length_minus_max_gen_toks_tokens(tiny_smollm2_path):
    """Stock ``hf``'s window: a prompt longer than ``max_length - max_gen_toks`` tokens loses its start (its
    question is at its end); a ``max_gen_toks`` that leaves no room is refused in one line. On a random-weight
    model of SmolLM2's architecture and tokenizer (no real weights are read)."""
    from transformers import AutoTokenizer

    from capcal_models.hf import CapcalHFLM

    model = tiny_smollm2_path
    lm = CapcalHFLM(pretrained=str(model), batch_size=1, device="cpu", max_length=16, sample_cache=False)
    prompt = " ".join(f"word{index}" for index in range(40))
    tokenizer = AutoTokenizer.from_pretrained(model)
    ids = tokenizer(prompt)["input_ids"]
    assert len(ids) > 16
    assert lm._encode_prompt(prompt, max_gen_toks=6) == ids[-10:]
    assert lm._encode_prompt("word0 word1", max_gen_toks=6) == tokenizer("word0 word1")["input_ids"]
    refusal = r"^max_gen_toks=16 leaves no room for the prompt \(max_length 16\)$"
    with pytest.raises(ValueError, match=refusal):
        lm._encode_prompt(prompt, max_gen_toks=16)


# ------------------------------------------------------------------------------------------ real model


@pytest.fixture(scope="module")
def models(smollm2_path):
    from lm_eval.models.huggingface import HFLM

    from capcal_models.hf import CapcalHFLM

    capcal = CapcalHFLM(
        pretrained=str(smollm2_path), batch_size=32, device="cpu", seed=RUN_SEED, sample_cache=False
    )  # every run samples (the resume tests cover the cache)
    stock = HFLM(pretrained=str(smollm2_path), batch_size=32, device="cpu")
    return capcal, stock


@pytest.fixture(scope="module")
def runs(models):
    """Stock hf and capcal-hf through lm-eval on capcal_gsm8k, then capcal-hf on the same requests directly
    (again, and at temperature 0.5), and every sample's log-probability."""
    capcal, stock = models
    torch.manual_seed(RUN_SEED)
    result = {"stock": evaluate_gsm8k(stock, QUESTIONS, K, MAX_GEN_TOKS)}
    result["capcal"] = evaluate_gsm8k(capcal, QUESTIONS, K, MAX_GEN_TOKS)
    requests = gsm8k_requests(capcal, QUESTIONS, K, max_gen_toks=MAX_GEN_TOKS)
    result["requests"] = requests
    contexts = {r.doc["question_id"]: r.args[0] for r in requests}
    result["capcal_again"] = samples_by_question(requests, capcal.generate_until(requests, disable_tqdm=True))
    cooler = gsm8k_requests(capcal, QUESTIONS, K, max_gen_toks=MAX_GEN_TOKS, temperature=0.5)
    result["capcal_temperature_0.5"] = samples_by_question(
        cooler, capcal.generate_until(cooler, disable_tqdm=True)
    )
    to_score = {
        "stock": result["stock"]["samples"],
        "capcal": result["capcal"]["samples"],
        "capcal_temperature_0.5": result["capcal_temperature_0.5"],
    }
    result["scores"] = {
        name: stock_sample_logprobs(stock, contexts, samples) for name, samples in to_score.items()
    }
    return result


@pytest.mark.slow
def test_every_clone_gets_a_sample_through_lm_eval(runs):
    capcal = runs["capcal"]["samples"]
    assert set(capcal) == set(runs["stock"]["samples"]) and len(capcal) == QUESTIONS
    assert set(runs["capcal"]["n_samples"].values()) == {K}
    for question, texts in capcal.items():
        assert len(texts) == K and all(isinstance(text, str) and text for text in texts), question


@pytest.mark.slow
def test_samples_are_distributed_like_stock_hf(runs):
    scores = runs["scores"]
    assert stratified_permutation_pvalue(scores["capcal"], scores["stock"]) > 1e-3
    # The same test tells a temperature of 0.5 from 1.
    assert stratified_permutation_pvalue(scores["capcal_temperature_0.5"], scores["stock"]) < 1e-2


@pytest.mark.slow
def test_mean_expected_accuracy_agrees_with_stock_hf(runs):
    """Per-question expected accuracy of the two lm-eval runs: mean difference within 3 standard errors."""
    z = mean_difference_z(runs["capcal"]["expected_accuracy"], runs["stock"]["expected_accuracy"])
    assert abs(z) < 3


@pytest.mark.slow
def test_no_more_duplicate_samples_than_sampling_explains(runs):
    capcal = runs["capcal"]["samples"]
    logprobs = runs["scores"]["capcal"]
    excess = duplicate_excess(capcal, logprobs)
    assert excess["observed"] <= excess["allowed"], excess
    # The check catches the pitfall it is for: k copies of one sample per question.
    copies = {question: [texts[0]] * K for question, texts in capcal.items()}
    copied_logprobs = {question: [values[0]] * K for question, values in logprobs.items()}
    collapsed = duplicate_excess(copies, copied_logprobs)
    assert collapsed["observed"] > collapsed["allowed"], collapsed


@pytest.mark.slow
def test_same_seed_gives_the_same_samples(runs):
    """The lm-eval run and a direct call on the same requests draw the same samples."""
    assert runs["capcal_again"] == runs["capcal"]["samples"]


@pytest.mark.slow
def test_samples_do_not_depend_on_batch_size_or_limit(models, runs):
    capcal, _ = models
    subset = [r for r in runs["requests"] if r.doc_id in (1, 3)][::-1]  # other questions, other order
    capcal.batch_size_per_gpu = 3  # fewer rows than one question's k: its samples split across batches
    try:
        texts = samples_by_question(subset, capcal.generate_until(subset, disable_tqdm=True))
    finally:
        capcal.batch_size_per_gpu = 32
    assert texts == {question: runs["capcal"]["samples"][question] for question in texts}


@pytest.mark.slow
def test_run_seed_and_seed_in_gen_kwargs(models, runs):
    capcal, _ = models
    requests = gsm8k_requests(capcal, 2, K, max_gen_toks=MAX_GEN_TOKS, seed=7)
    capcal.run_seed = None  # the seed in the generation kwargs becomes the run seed
    try:
        with_task_seed = samples_by_question(requests, capcal.generate_until(requests, disable_tqdm=True))
        capcal.run_seed = 7
        with_model_seed = samples_by_question(requests, capcal.generate_until(requests, disable_tqdm=True))
    finally:
        capcal.run_seed = RUN_SEED
    assert with_task_seed == with_model_seed
    for question, texts in with_task_seed.items():
        assert len(set(texts)) > 1, texts  # stock hf raises on a seed; capcal-hf keeps the k samples apart
        assert texts != runs["capcal"]["samples"][question]  # another run seed, other samples


@pytest.mark.slow
def test_greedy_decodes_once_and_matches_stock_hf(models):
    capcal, stock = models
    requests = gsm8k_requests(capcal, 2, K, max_gen_toks=MAX_GEN_TOKS, do_sample=False, temperature=0.0)
    capcal_texts = capcal.generate_until(requests, disable_tqdm=True)
    assert capcal_texts == stock.generate_until(requests, disable_tqdm=True)
    for texts in samples_by_question(requests, capcal_texts).values():
        assert len(set(texts)) == 1


@pytest.mark.slow
def test_decoder_matches_transformers_generate_token_for_token(models):
    """Greedy tokens of the shared-prefix decoder equal transformers' generate for prompts of different
    lengths, whatever the batch size (rows leave and join the batch between steps)."""
    capcal, _ = models
    model, tokenizer = capcal.model, capcal.tokenizer
    prompts = [
        "Question: What is 12 + 7?\nAnswer:",
        "Write a haiku about the sea.",
        "The capital of France is",
    ]
    prompts.append("def fibonacci(n):\n    " * 3)
    token_ids = [tokenizer.encode(prompt) for prompt in prompts]
    expected = []
    for ids in token_ids:
        generated = model.generate(
            torch.tensor([ids]), max_new_tokens=16, do_sample=False, pad_token_id=tokenizer.eos_token_id
        )[0, len(ids) :].tolist()
        eos = tokenizer.eos_token_id
        expected.append(generated[: generated.index(eos) + 1] if eos in generated else generated)
    for max_rows in (1, 3):
        jobs = [PromptJob(ids, seeds=[0]) for ids in token_ids]
        sample_continuations(
            model, jobs, SamplingParams(do_sample=False), 16, None, {tokenizer.eos_token_id}, max_rows
        )
        assert [job.outputs[0] for job in jobs] == expected, max_rows


@pytest.mark.slow
def test_first_tokens_follow_transformers_distribution(models):
    """Token-level equivalence: 2000 first tokens per prompt against transformers' warped next-token
    distribution: top-k 50 at temperature 1 (the capcal_gsm8k setting) on two prompts, temperature 0.7 with
    top-p 0.9 on one."""
    capcal, _ = models
    model = capcal.model
    prompts = [request.args[0] for request in gsm8k_requests(capcal, 2, 1, max_gen_toks=1)]
    settings = [(SamplingParams(True, 1.0, top_k=50), prompt) for prompt in prompts]
    settings.append((SamplingParams(True, 0.7, top_k=None, top_p=0.9), prompts[0]))
    for params, prompt in settings:
        ids = capcal.tok_batch_encode([prompt])[0][0].tolist()
        with torch.inference_mode():
            logits = model(torch.tensor([ids])).logits[:, -1]
        expected = transformers_scores(logits, params).softmax(dim=-1)[0].double()
        job = PromptJob(ids, seeds=list(range(2000)))
        sample_continuations(model, [job], params, 1, None, set(), max_rows=250)
        counts = torch.bincount(torch.tensor([out[0] for out in job.outputs]), minlength=len(expected))
        _, p_value = chi_square(counts.double(), expected)
        assert p_value > 1e-3, (params, p_value)


@pytest.mark.slow
def test_stop_sequences_end_each_row(models):
    capcal, stock = models
    requests = gsm8k_requests(capcal, 2, K, max_gen_toks=MAX_GEN_TOKS, until=[" the", "\n"])
    texts = capcal.generate_until(requests, disable_tqdm=True)
    assert not any(" the" in text or "\n" in text for text in texts)
    lengths = [len(capcal.tokenizer.encode(text, add_special_tokens=False)) for text in texts]
    assert min(lengths) < MAX_GEN_TOKS - 2  # some rows stopped early while others went on


@pytest.mark.slow
def test_loglikelihood_is_stock_hf(models):
    capcal, stock = models
    requests = [
        Instance("loglikelihood", {}, ("The capital of France is", " Paris"), idx=0, metadata=("t", 0, 1)),
        Instance("loglikelihood", {}, ("2 + 2 =", " 5"), idx=0, metadata=("t", 1, 1)),
    ]
    for (capcal_logprob, capcal_greedy), (stock_logprob, stock_greedy) in zip(
        capcal.loglikelihood(requests, disable_tqdm=True),
        stock.loglikelihood(requests, disable_tqdm=True),
        strict=True,
    ):
        # capcal-hf's own log-likelihood path (one pass per context, batch-invariant kernels) sums in another
        # order than stock hf: equal within the documented 1e-4, as in test_hf_loglikelihood.py
        assert abs(capcal_logprob - stock_logprob) <= 1e-4 and capcal_greedy == stock_greedy
