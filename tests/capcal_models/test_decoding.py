"""capcal_models.decoding: the parts of capcal-hf's sampler, against transformers.

Logit warping equals transformers' warpers bit for bit; inverse-CDF sampling draws from the warped
distribution (chi-square goodness of fit, p > 0.001, 20000 draws); sampling parameters resolve as
transformers' ``generate`` resolves them and unsupported settings raise; stop sequences are found in the last
tokens of a row, with the real SmolLM2 tokenizer. The decoder on the real model (token-for-token greedy
equality with ``generate``, first-token distribution) is tested in test_hf.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from transformers import GenerationConfig

from capcal_models.decoding import (
    TRANSFORMERS_SAMPLING_DEFAULTS,
    SamplingParams,
    StopSequences,
    filter_logits,
    inverse_cdf,
    resolve_sampling_params,
    sample_tokens,
)

sys.path.insert(0, str(Path(__file__).parent))  # sampling_checks.py
from sampling_checks import chi_square, transformers_scores  # noqa: E402

WARPER_SETTINGS = [
    SamplingParams(True, temperature=1.0, top_k=50),
    SamplingParams(True, temperature=0.7, top_k=None, top_p=0.9),
    SamplingParams(True, temperature=1.3, top_k=20, top_p=0.8, min_p=0.05),
    SamplingParams(True, temperature=1.0, top_k=None, min_p=0.1),
]


@pytest.mark.parametrize("params", WARPER_SETTINGS, ids=str)
def test_filter_logits_equals_transformers_warpers(params):
    logits = torch.randn(8, 1000, generator=torch.Generator().manual_seed(0)) * 4
    assert torch.equal(filter_logits(logits, params), transformers_scores(logits, params))


@pytest.mark.parametrize("params", WARPER_SETTINGS, ids=str)
def test_inverse_cdf_sampling_draws_from_the_warped_distribution(params):
    logits = torch.randn(1, 300, generator=torch.Generator().manual_seed(1)) * 3
    expected = transformers_scores(logits, params).softmax(dim=-1)[0].double()
    draws = 20000
    uniforms = torch.rand(draws, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    tokens = sample_tokens(logits.expand(draws, -1), params, uniforms)
    assert expected[tokens].min() > 0  # never a filtered token
    counts = torch.bincount(tokens, minlength=300).double()
    _, p_value = chi_square(counts, expected)
    assert p_value > 1e-3


@pytest.mark.parametrize("size", [1, 7, 256, 300, 49152])
def test_inverse_cdf_equals_one_cumulative_sum_and_is_the_same_per_row(size):
    generator = torch.Generator().manual_seed(size)
    probs = torch.rand(16, size, generator=generator) ** 4
    probs[probs < 0.2] = 0.0  # filtered tokens, some whole blocks among them
    probs[:, : min(size, 300)] *= torch.rand(16, 1, generator=generator) > 0.5
    probs[:, -1] += 1e-3  # no row without mass
    probs = probs / probs.sum(dim=-1, keepdim=True)
    uniforms = torch.rand(16, generator=generator, dtype=torch.float64)
    uniforms[:3] = torch.tensor([0.0, 1.0 - 2.0**-53, 0.5])
    cdf = probs.to(torch.float64).cumsum(dim=-1)
    one_sum = torch.searchsorted(cdf, (uniforms * cdf[:, -1])[:, None], right=True).clamp(max=size - 1)
    picked = inverse_cdf(probs, uniforms)
    assert torch.equal(picked, one_sum.squeeze(-1))
    assert bool((probs.gather(-1, picked[:, None]) > 0).all())
    alone = torch.cat([inverse_cdf(probs[row : row + 1], uniforms[row : row + 1]) for row in range(16)])
    assert torch.equal(alone, picked)


def test_inverse_cdf_never_returns_a_zero_probability_entry_at_the_edges():
    """Targets at the very end of the mass, with zero-probability entries after the last positive one in
    its block and whole empty blocks after it."""
    probs = torch.zeros(2, 1000)
    probs[0, [3, 200, 255]] = torch.tensor([0.25, 0.25, 0.5])
    probs[1, [0, 511]] = torch.tensor([0.5, 0.5])
    uniforms = torch.tensor([1.0 - 2.0**-53, 1.0 - 2.0**-53], dtype=torch.float64)
    assert inverse_cdf(probs, uniforms).tolist() == [255, 511]
    assert inverse_cdf(probs, torch.zeros(2, dtype=torch.float64)).tolist() == [3, 0]


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
