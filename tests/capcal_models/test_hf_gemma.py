"""capcal-hf on the real Gemma-3-270M base model: sliding-window layers (five of every six layers attend to
the last 512 positions only), against transformers' ``generate`` and stock lm-eval ``hf``.

- exactness: greedy tokens equal transformers' ``generate`` token for token on a prompt longer than the
  sliding window (without the window, capcal-hf's decoder continues this prompt differently), whatever the
  batch size;
- same distribution: with the window shrunk to 8 positions on the one model object both backends use (so the
  window slides during decoding of short prompts, cheaply), per-sample log-probabilities of capcal-hf and
  stock ``hf`` samples (k = 16 per prompt, 4 prompts, temperature 1, full vocabulary, fixed seeds) pass a
  stratified permutation test at p > 0.001, while temperature 0.5 against stock ``hf`` at 1 gives p < 0.01
  (the test can fail); duplicate samples within a prompt at most the Poisson 0.999 quantile of what
  independent sampling explains;
- log-likelihoods of contexts longer than the window equal stock ``hf``'s within 1e-4;
- refusal: architectures the shared-prefix attention cannot run exactly (soft-capped attention logits,
  chunked or recurrent layers, bidirectional attention) are refused when capcal-hf loads them, in one line.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
import torch
from lm_eval.api.instance import Instance

from capcal_models.decoding import PromptJob, SamplingParams, sample_continuations
from capcal_models.kv_cache import unsupported_attention

sys.path.insert(0, str(Path(__file__).parent))  # sampling_checks.py, shared with the vLLM tests
from sampling_checks import duplicate_excess, stratified_permutation_pvalue  # noqa: E402

K, MAX_GEN_TOKS, RUN_SEED, SHRUNK_WINDOW = 16, 16, 1234, 8
PROMPTS = [
    "Once upon a time",
    "The best way to cook rice is",
    "My favourite animal",
    "Question: Why?\nAnswer:",
]


def test_refuses_what_it_cannot_decode_exactly():
    from transformers import Gemma2Config, Gemma3TextConfig, Llama4TextConfig, LlamaConfig

    assert unsupported_attention(LlamaConfig()) is None
    assert unsupported_attention(Gemma3TextConfig()) is None  # sliding and full layers
    assert "soft-capping" in unsupported_attention(Gemma2Config())
    assert "chunked_attention" in unsupported_attention(Llama4TextConfig())
    assert "bidirectional" in unsupported_attention(Gemma3TextConfig(use_bidirectional_attention=True))


def test_capcal_hf_refuses_a_soft_capped_model_in_one_line(smollm2_path):
    from transformers import AutoTokenizer, Gemma2Config, Gemma2ForCausalLM

    from capcal_models.hf import CapcalHFLM

    tokenizer = AutoTokenizer.from_pretrained(smollm2_path)
    config = Gemma2Config(
        vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=8,
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"capcal-hf cannot sample from Gemma2ForCausalLM exactly") as error:
        CapcalHFLM(pretrained=Gemma2ForCausalLM(config), tokenizer=tokenizer, device="cpu")
    assert "\n" not in str(error.value) and "soft-capping" in str(error.value)


# ------------------------------------------------------------------------------------------ real model


@pytest.fixture(scope="module")
def gemma():
    from capcal_models.prepare import prepare_model

    return prepare_model("gemma3-270m").path


@pytest.fixture(scope="module")
def models(gemma):
    """capcal-hf and stock hf on one Gemma-3 model object (capcal-hf loads it; stock hf wraps it)."""
    from lm_eval.models.huggingface import HFLM

    from capcal_models.hf import CapcalHFLM

    capcal = CapcalHFLM(pretrained=str(gemma), batch_size=64, device="cpu", seed=RUN_SEED, sample_cache=False)
    stock = HFLM(pretrained=capcal.model, tokenizer=capcal.tokenizer, batch_size=64, device="cpu")
    return capcal, stock


def _long_prompt(questions: int) -> str:
    rng = random.Random(0)
    examples = []
    for _ in range(questions):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        examples.append(f"Question: What is {a} + {b}?\nAnswer: {a + b}")
    return "\n\n".join(examples) + "\n\nQuestion: Write a story about a dragon.\nAnswer:"


@pytest.mark.slow
def test_greedy_matches_generate_beyond_the_sliding_window(models):
    capcal, _ = models
    model, tokenizer = capcal.model, capcal.tokenizer
    window = model.config.sliding_window
    token_ids = [tokenizer.encode(_long_prompt(36)), tokenizer.encode("The capital of France is")]
    assert len(token_ids[0]) > window + 100 and "sliding_attention" in model.config.layer_types
    expected = [
        model.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False)[0, len(ids) :].tolist()
        for ids in token_ids
    ]
    for max_rows in (1, 2):
        jobs = [PromptJob(ids, seeds=[0]) for ids in token_ids]
        sample_continuations(model, jobs, SamplingParams(do_sample=False), 24, None, set(), max_rows)
        assert [job.outputs[0] for job in jobs] == expected, max_rows


def _requests(k: int, **gen_kwargs) -> list[Instance]:
    settings = {"until": [], "do_sample": True, "top_k": 0, "max_gen_toks": MAX_GEN_TOKS, **gen_kwargs}
    requests = []
    for index, prompt in enumerate(PROMPTS):
        request = Instance(
            "generate_until",
            {"question_id": f"prompt-{index}"},
            (prompt, dict(settings)),
            idx=0,
            metadata=("gemma_window", index, k),
        )
        requests += [request] * k
    return requests


def _by_prompt(texts: list[str], k: int) -> dict[str, list[str]]:
    return {prompt: texts[index * k : (index + 1) * k] for index, prompt in enumerate(PROMPTS)}


def _logprobs(stock, samples: dict[str, list[str]]) -> dict[str, list[float]]:
    order = [(prompt, text) for prompt, texts in samples.items() for text in texts]
    requests = [
        Instance("loglikelihood", {}, (prompt, text), idx=0, metadata=("score", i, 1))
        for i, (prompt, text) in enumerate(order)
    ]
    scores: dict[str, list[float]] = {prompt: [] for prompt in samples}
    for (prompt, _), (logprob, _) in zip(
        order, stock.loglikelihood(requests, disable_tqdm=True), strict=True
    ):
        scores[prompt].append(logprob)
    return scores


@pytest.fixture(scope="module")
def shrunk_window_runs(models):
    """Samples of both backends with every sliding layer's window shrunk to ``SHRUNK_WINDOW``, and each
    sample's log-probability under stock hf (same window); the window is restored afterwards."""
    capcal, stock = models
    model = capcal.model
    sliding = [layer.self_attn for layer in model.model.layers if layer.self_attn.sliding_window is not None]
    window = model.config.sliding_window
    model.config.sliding_window = SHRUNK_WINDOW
    for attention in sliding:
        attention.sliding_window = SHRUNK_WINDOW
    try:
        torch.manual_seed(RUN_SEED)
        samples = {
            "stock": _by_prompt(stock.generate_until(_requests(K, temperature=1.0), disable_tqdm=True), K),
            "capcal": _by_prompt(capcal.generate_until(_requests(K, temperature=1.0), disable_tqdm=True), K),
            "capcal_cooler": _by_prompt(
                capcal.generate_until(_requests(K, temperature=0.5), disable_tqdm=True), K
            ),
        }
        scores = {name: _logprobs(stock, texts) for name, texts in samples.items()}
    finally:
        model.config.sliding_window = window
        for attention in sliding:
            attention.sliding_window = window
    return samples, scores


@pytest.mark.slow
def test_samples_are_distributed_like_stock_hf_while_the_window_slides(shrunk_window_runs):
    samples, scores = shrunk_window_runs
    prompt_tokens = max(len(prompt.split()) for prompt in PROMPTS)
    assert prompt_tokens + MAX_GEN_TOKS > 2 * SHRUNK_WINDOW  # the window slides over prompt and samples
    assert stratified_permutation_pvalue(scores["capcal"], scores["stock"]) > 1e-3
    assert stratified_permutation_pvalue(scores["capcal_cooler"], scores["stock"]) < 1e-2
    excess = duplicate_excess(samples["capcal"], scores["capcal"])
    assert excess["observed"] <= excess["allowed"], excess


@pytest.mark.slow
def test_loglikelihoods_beyond_the_sliding_window_equal_stock_hf(models):
    """capcal-hf's log-likelihoods (``capcal_models.loglikelihood``; the SmolLM2 tests are in
    test_hf_loglikelihood.py) on contexts of about 600 tokens that share a prefix: equal to stock ``hf``
    within 1e-4, also for a multi-token continuation. Hand-written requests (two self-check-like contexts of
    one document), at batch size 4 on the module's model object; stock ``hf`` at batch size 1 (its
    full-vocabulary logits are large)."""
    from lm_eval.models.huggingface import HFLM

    from capcal_models.hf import CapcalHFLM

    capcal, _ = models
    lm = CapcalHFLM(
        pretrained=capcal.model, tokenizer=capcal.tokenizer, batch_size=4, device="cpu", sample_cache=False
    )
    assert lm.model.config.sliding_window == 512
    facts = " ".join(f"Line {i}: the value of item {i} is {i * 7 % 13}." for i in range(36))
    requests = [
        Instance("loglikelihood", {}, (context, continuation), idx=0, metadata=("notes", 0, 1))
        for response in ("The value is 8.", "It is 3.")
        for context in [f"{facts}\nWhat is the value of item 3?\n{response}\nIs the answer correct? (Yes/No)"]
        for continuation in (" Yes", " No", " Yes, definitely")
    ]
    assert len(lm.tok_encode(requests[0].args[0])) > 512
    ours = lm.loglikelihood(requests, disable_tqdm=True)
    theirs = HFLM(pretrained=lm.model, tokenizer=lm.tokenizer, batch_size=1).loglikelihood(
        requests, disable_tqdm=True
    )
    for ours_one, theirs_one in zip(ours, theirs, strict=True):
        assert abs(ours_one[0] - theirs_one[0]) <= 1e-4 and ours_one[1] == theirs_one[1]
