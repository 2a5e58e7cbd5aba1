"""capcal-hf against stock lm-eval ``hf`` and transformers, on the real SmolLM2.

Sampling statistics are judged with the helpers in sampling_checks.py (shared with the vLLM tests). Every
sampled run uses a fixed run seed (1234), so each test is deterministic; the tolerances say how unlikely a
failure would be if capcal-hf sampled exactly like stock ``hf``:

- token-level equivalence: first tokens of 2000 samples per prompt against transformers' own warped
  distribution, chi-square goodness of fit, p > 0.001;
- sequence-level equivalence: per-sample log-probabilities of capcal-hf and stock ``hf`` samples on
  capcal_gsm8k, stratified permutation test, p > 0.001 (a temperature of 0.5 instead of 1 must give
  p < 0.01, so the test can fail); mean expected accuracy within 3 standard errors;
- independence: duplicate pairs within questions at most the Poisson 0.999 quantile of what independent
  sampling explains (k copies of one sample must fail it).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch
from lm_eval.api.instance import Instance
from scipy.stats import chisquare
from transformers import GenerationConfig
from transformers.generation.logits_process import (
    LogitsProcessorList,
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from capcal_models.decoding import (
    TRANSFORMERS_SAMPLING_DEFAULTS,
    PromptJob,
    SamplingParams,
    StopSequences,
    filter_logits,
    resolve_sampling_params,
    sample_continuations,
    sample_tokens,
)

sys.path.insert(0, str(Path(__file__).parent))  # sampling_checks.py, shared with the vLLM tests
from sampling_checks import (  # noqa: E402
    cloned_requests,
    duplicate_excess,
    gsm8k_task,
    mean_difference_z,
    samples_by_question,
    stratified_permutation_pvalue,
)

QUESTIONS, K, MAX_GEN_TOKS, RUN_SEED = 5, 4, 16, 1234


def gsm8k_requests(lm, questions: int, k: int, **gen_kwargs) -> list[Instance]:
    """lm-eval's capcal_gsm8k requests of the first questions, k clones each, ``gen_kwargs`` added."""
    return cloned_requests(gsm8k_task(lm, questions), questions, k, **gen_kwargs)


def _transformers_scores(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    warpers = LogitsProcessorList()
    if params.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(params.temperature))
    if params.top_k:
        warpers.append(TopKLogitsWarper(params.top_k))
    if params.top_p < 1.0:
        warpers.append(TopPLogitsWarper(params.top_p))
    if params.min_p is not None:
        warpers.append(MinPLogitsWarper(params.min_p))
    return warpers(None, logits.float().clone())


WARPER_SETTINGS = [
    SamplingParams(True, temperature=1.0, top_k=50),
    SamplingParams(True, temperature=0.7, top_k=None, top_p=0.9),
    SamplingParams(True, temperature=1.3, top_k=20, top_p=0.8, min_p=0.05),
    SamplingParams(True, temperature=1.0, top_k=None, min_p=0.1),
]


@pytest.mark.parametrize("params", WARPER_SETTINGS, ids=str)
def test_filter_logits_equals_transformers_warpers(params):
    logits = torch.randn(8, 1000, generator=torch.Generator().manual_seed(0)) * 4
    assert torch.equal(filter_logits(logits, params), _transformers_scores(logits, params))


@pytest.mark.parametrize("params", WARPER_SETTINGS, ids=str)
def test_inverse_cdf_sampling_draws_from_the_warped_distribution(params):
    logits = torch.randn(1, 300, generator=torch.Generator().manual_seed(1)) * 3
    expected = _transformers_scores(logits, params).softmax(dim=-1)[0].double()
    draws = 20000
    uniforms = torch.rand(draws, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    tokens = sample_tokens(logits.expand(draws, -1), params, uniforms)
    assert expected[tokens].min() > 0  # never a filtered token
    counts = torch.bincount(tokens, minlength=300).double()
    _, p_value = _chi_square(counts, expected)
    assert p_value > 1e-3


def _chi_square(counts: torch.Tensor, probabilities: torch.Tensor) -> tuple[float, float]:
    """Chi-square goodness of fit; tokens expected fewer than 5 times are pooled into one bin."""
    expected = probabilities / probabilities.sum() * counts.sum()
    large = expected >= 5
    observed = torch.cat([counts[large], counts[~large].sum().reshape(1)])
    expected = torch.cat([expected[large], expected[~large].sum().reshape(1)])
    keep = expected > 0
    statistic, p_value = chisquare(observed[keep].numpy(), expected[keep].numpy())
    return float(statistic), float(p_value)


def test_sampling_parameters_resolve_like_transformers_generate():
    defaults = GenerationConfig._get_default_generation_params()
    for name, value in TRANSFORMERS_SAMPLING_DEFAULTS.items():
        assert defaults.get(name) == value, name
    # Unset values come from transformers' defaults (top_k 50), as with stock hf.
    assert resolve_sampling_params({"do_sample": True, "temperature": 1.0}, GenerationConfig()) == (
        SamplingParams(do_sample=True, temperature=1.0, top_k=50, top_p=1.0)
    )
    # The model's generation config comes before the defaults, the request before both.
    configured = GenerationConfig(top_k=20, top_p=0.9, temperature=0.6)
    assert resolve_sampling_params({"do_sample": True, "temperature": 0.8}, configured) == (
        SamplingParams(do_sample=True, temperature=0.8, top_k=20, top_p=0.9)
    )
    assert resolve_sampling_params({"do_sample": True, "top_k": 0}, GenerationConfig()).top_k is None
    assert not resolve_sampling_params({"do_sample": False, "temperature": 0.0}, GenerationConfig()).do_sample


@pytest.mark.parametrize(
    "gen_kwargs, config",
    [
        ({"do_sample": True, "repetition_penalty": 1.2}, GenerationConfig()),
        ({"do_sample": True, "num_beams": 4}, GenerationConfig()),
        ({"do_sample": True, "no_such_setting": 1}, GenerationConfig()),
        ({"do_sample": True}, GenerationConfig(repetition_penalty=1.05)),
        ({"do_sample": True, "temperature": 0.0}, GenerationConfig()),
    ],
)
def test_unsupported_generation_settings_raise(gen_kwargs, config):
    with pytest.raises(ValueError):
        resolve_sampling_params(gen_kwargs, config)


def test_capcal_hf_is_registered_next_to_lm_evals_models():
    from lm_eval.api.registry import get_model

    from capcal_models.hf import CapcalHFLM
    from capcal_models.registry import register_models

    names = register_models()
    assert "capcal-hf" in names and "hf" in names
    assert get_model("capcal-hf") is CapcalHFLM


def test_neutral_generation_settings_are_accepted():
    gen_kwargs = {"do_sample": True, "repetition_penalty": 1.0, "num_beams": 1}
    assert resolve_sampling_params(gen_kwargs, GenerationConfig(repetition_penalty=1.05)).do_sample


# ------------------------------------------------------------------------------------------ real model


@pytest.fixture(scope="module")
def tokenizer(smollm2_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_path)


def test_stop_sequences_are_found_in_the_last_tokens(tokenizer):
    stop = StopSequences(tokenizer, ["Question:", "\n\n"])
    rows = [
        tokenizer.encode("The answer is 4.\n\nQuestion:", add_special_tokens=False),
        tokenizer.encode("The answer is 4. Quest", add_special_tokens=False),
        # "Question:" spelled one character per token still ends the row.
        [tokenizer.convert_tokens_to_ids(c) for c in "Question:"],
    ]
    assert stop.found(rows) == [True, False, True]


@pytest.fixture(scope="module")
def models(smollm2_path):
    from lm_eval.models.huggingface import HFLM

    from capcal_models.hf import CapcalHFLM

    capcal = CapcalHFLM(
        pretrained=str(smollm2_path), batch_size=32, device="cpu", seed=RUN_SEED, sample_cache=False
    )  # every run samples (the resume tests cover the cache)
    stock = HFLM(pretrained=str(smollm2_path), batch_size=32, device="cpu")
    return capcal, stock


def _evaluate(lm) -> dict:
    """lm-eval's run of capcal_gsm8k (k samples per question) with ``lm``: samples and expected accuracy."""
    from analysis.evaluation import evaluate

    results = evaluate(
        lm,
        "capcal_gsm8k",
        repeats=K,
        data_dir="bundled",
        limit=QUESTIONS,
        log_samples=True,
        apply_chat_template=True,
        gen_kwargs=f"max_gen_toks={MAX_GEN_TOKS}",
        bootstrap_iters=0,
    )
    samples = results["samples"]["capcal_gsm8k"]
    return {
        "samples": {s["doc"]["question_id"]: s["resps"][0] for s in samples},
        "expected_accuracy": {s["doc"]["question_id"]: s["expected_accuracy"] for s in samples},
        "n_samples": {s["doc"]["question_id"]: s["n_samples"] for s in samples},
    }


@pytest.fixture(scope="module")
def runs(models):
    """Stock hf and capcal-hf through lm-eval on capcal_gsm8k, then capcal-hf on the same requests directly
    (again, and at temperature 0.5), and every sample's log-probability."""
    capcal, stock = models
    torch.manual_seed(RUN_SEED)
    result = {"stock": _evaluate(stock), "capcal": _evaluate(capcal)}
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
        name: _sample_logprobs(stock, contexts, samples) for name, samples in to_score.items()
    }
    return result


def _sample_logprobs(lm, contexts: dict[str, str], samples: dict[str, list[str]]) -> dict[str, list[float]]:
    """Each sample's log-probability given its prompt (lm-eval's loglikelihood of the response)."""
    order = [(question, text) for question, texts in samples.items() for text in texts]
    requests = [
        Instance("loglikelihood", {}, (contexts[question], text), idx=0, metadata=("score", i, 1))
        for i, (question, text) in enumerate(order)
    ]
    logprobs: dict[str, list[float]] = {question: [] for question in samples}
    for (question, _), (logprob, _) in zip(order, lm.loglikelihood(requests, disable_tqdm=True), strict=True):
        logprobs[question].append(logprob)
    return logprobs


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
        expected = _transformers_scores(logits, params).softmax(dim=-1)[0].double()
        job = PromptJob(ids, seeds=list(range(2000)))
        sample_continuations(model, [job], params, 1, None, set(), max_rows=250)
        counts = torch.bincount(torch.tensor([out[0] for out in job.outputs]), minlength=len(expected))
        _, p_value = _chi_square(counts.double(), expected)
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
        assert math.isclose(capcal_logprob, stock_logprob, rel_tol=1e-6) and capcal_greedy == stock_greedy
