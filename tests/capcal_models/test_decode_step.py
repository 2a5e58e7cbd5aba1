"""capcal-hf's decode step: its random stream, its results against a per-sample reference decoder, and the
operators it dispatches (the CPU proxy of its GPU speed, benchmarks/decode_step_ops.py).

- ``sample_uniforms`` is SplitMix64 (the published first output of seed 1234567; a plain-Python
  implementation on 2,000 random (seed, step) pairs), uniform (Kolmogorov-Smirnov, p > 0.001) and without
  correlation between consecutive steps of one seed or between neighbouring seeds (|r| < 0.05, 2,000 pairs);
- on a random-weight 2-layer model of SmolLM2's architecture, ``sample_continuations`` gives, for every batch
  size and both attention modes, the tokens of an independent per-sample decoder (a full forward pass over
  prompt + tokens at each step, transformers' warpers, inverse-CDF with the sample's SplitMix64 uniforms),
  EOS and stop sequences included, and hands every sample to ``on_samples_done`` once;
- a batched decode step dispatches no more operators than stock transformers' ``generate`` at the same batch
  size, as many at 16 rows as at 64, and reads the device from the host at most once every ``SYNC_STEPS``
  steps; a planted per-row loop in the step fails that check.
"""

# exercises: capcal_models.kv_cache (capcal-hf's attention over its cache, reached through the decode step)
from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from capcal_models import decoding
from capcal_models.decoding import (
    SYNC_STEPS,
    PromptJob,
    SamplingParams,
    StopSequences,
    filter_logits,
    inverse_cdf,
    sample_continuations,
)
from capcal_models.seeding import sample_uniforms, splitmix64_uniform

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import decode_step_ops  # noqa: E402  (benchmarks/decode_step_ops.py: the operator counts)

PARAMS = SamplingParams(True, temperature=0.8, top_k=None)


def test_sample_uniforms_are_splitmix64():
    # SplitMix64 seeded with 1234567 first outputs 6457827717110365317 (the reference implementation's).
    assert splitmix64_uniform(1234567, 0) == (6457827717110365317 >> 11) * 2.0**-53
    rng = random.Random(0)
    seeds = [rng.getrandbits(63) for _ in range(1000)] + [0, 1, 2**63 - 1] + list(range(997))
    steps = [rng.randrange(5000) for _ in range(len(seeds))]
    expected = [splitmix64_uniform(seed, step) for seed, step in zip(seeds, steps, strict=True)]
    assert sample_uniforms(torch.tensor(seeds), torch.tensor(steps)).tolist() == expected


def test_sample_uniforms_are_uniform_and_uncorrelated():
    from scipy.stats import kstest

    seeds = torch.arange(2000) * 7919 + 13  # neighbouring, structured seeds: the hard case
    first = sample_uniforms(seeds, torch.zeros_like(seeds)).numpy()
    second = sample_uniforms(seeds, torch.ones_like(seeds)).numpy()
    assert kstest(first, "uniform").pvalue > 1e-3
    assert (
        kstest(sample_uniforms(torch.full((2000,), 5), torch.arange(2000)).numpy(), "uniform").pvalue > 1e-3
    )
    assert abs(np.corrcoef(first, second)[0, 1]) < 0.05  # consecutive steps of one sample
    assert abs(np.corrcoef(first[:-1], first[1:])[0, 1]) < 0.05  # neighbouring seeds


@pytest.fixture(scope="module")
def tiny(tiny_smollm2_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_smollm2_path, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(tiny_smollm2_path)


def _jobs(prompts: int = 5, k: int = 6) -> list[PromptJob]:
    return [
        PromptJob(list(range(10 + 3 * i, 30 + 7 * i)), [1000 * i + j for j in range(k)])
        for i in range(prompts)
    ]


@torch.inference_mode()
def _reference(model, job: PromptJob, sample: int, max_new: int, eos: set[int], stop) -> list[int]:
    """One sample decoded alone: a full forward pass per token, the warped distribution, its own uniform."""
    tokens: list[int] = []
    while True:
        logits = model(torch.tensor([job.token_ids + tokens])).logits[:, -1].float()
        uniform = torch.tensor([splitmix64_uniform(job.seeds[sample], len(tokens))], dtype=torch.float64)
        tokens.append(int(inverse_cdf(filter_logits(logits, PARAMS).softmax(dim=-1), uniform)[0]))
        if tokens[-1] in eos or len(tokens) == max_new or (stop is not None and stop.found([tokens])[0]):
            return tokens


@pytest.mark.parametrize("attention", ["exact", "batched"])
def test_samples_are_the_reference_decoders_at_every_batch_size(tiny, attention):
    model, tokenizer = tiny
    eos = set(range(0, 49152, 300))  # a random model rarely ends: make EOS frequent
    stop = StopSequences(tokenizer, ["ing", "\n"])
    expected = {}
    for job in _jobs(3, 4):
        for sample in range(len(job.seeds)):
            expected[(job.token_ids[0], sample)] = _reference(model, job, sample, 12, eos, stop)
    lengths = sorted({len(tokens) for tokens in expected.values()})
    assert lengths[0] < 12 and lengths[-1] == 12  # some samples stopped early, others went on
    for rows in (1, 5, 64):
        jobs = _jobs(3, 4)
        handed: list[tuple[int, int]] = []
        sample_continuations(
            model,
            jobs,
            PARAMS,
            12,
            stop,
            eos,
            rows,
            on_samples_done=lambda done, handed=handed: handed.extend(
                (job.token_ids[0], i) for job, i in done
            ),
            attention=attention,
        )
        got = {(job.token_ids[0], sample): job.outputs[sample] for job in jobs for sample in range(4)}
        assert got == expected, rows
        assert sorted(handed) == sorted(expected), rows


def test_a_prompt_without_samples_is_only_prefilled(tiny):
    """A job without seeds (capcal-hf: a question whose samples are all cached, prefilled for its
    activations) beside jobs with samples: its hook runs, the others' samples are the usual ones."""
    model, _ = tiny
    prefilled = []
    jobs = _jobs(3, 4)
    jobs.insert(
        1, PromptJob(list(range(40, 50)), [], on_prefill=lambda states: prefilled.append(len(states)))
    )
    sample_continuations(model, jobs, PARAMS, 6, None, set(), 5, attention="batched")
    alone = _jobs(3, 4)
    sample_continuations(model, alone, PARAMS, 6, None, set(), 5, attention="batched")
    assert prefilled == [model.config.num_hidden_layers + 1] and jobs[1].outputs == []
    assert [job.outputs for job in jobs[:1] + jobs[2:]] == [job.outputs for job in alone]


def _operators(model, run) -> tuple[int, int, int]:
    """(operators, host reads, decode steps) of ``run()``: ``decode_step_ops``' counts."""
    counter = {"decode_steps": 0}
    hook = decode_step_ops._decode_steps(model, counter)
    reads: dict[str, int] = {}
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with decode_step_ops.counted_host_reads(reads), torch.inference_mode():
            run()
    hook.remove()
    names = [event.name for event in prof.events()]
    host = sum(names.count(name) for name in decode_step_ops.HOST_READ_OPERATORS) + sum(reads.values())
    return len(names), host, counter["decode_steps"]


def _per_step(model, run) -> tuple[float, float]:
    """Operators and host reads per decode step: a run of 12 new tokens less one of 4, so that the difference
    is one whole window of ``SYNC_STEPS`` (8) steps and its one host read (16 less 8 before: the same window,
    a third fewer profiled steps)."""
    long = _operators(model, lambda: run(4 + SYNC_STEPS))
    short = _operators(model, lambda: run(4))
    steps = long[2] - short[2]
    return (long[0] - short[0]) / steps, (long[1] - short[1]) / steps


def _capcal(model, rows: int):
    """capcal-hf's batched decoding of ``rows`` samples: rows / 16 prompts x k = 16, one batch."""
    return lambda tokens: sample_continuations(
        model, _jobs(rows // 16, 16), PARAMS, tokens, None, set(), rows, attention="batched"
    )


def _stock(model, rows: int):
    """transformers' ``generate`` (stock lm-eval hf's call) of the same rows: each prompt 16 times, padded."""
    prompts = [job.token_ids for job in _jobs(rows // 16, 1)]
    width = max(map(len, prompts))
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts]).repeat_interleave(16, dim=0)
    mask = (torch.arange(width)[None, :] >= torch.tensor([width - len(p) for p in prompts])[:, None]).long()

    def run(tokens: int) -> None:
        model.generate(
            ids,
            attention_mask=mask.repeat_interleave(16, dim=0),
            do_sample=True,
            temperature=0.8,
            top_k=0,
            max_new_tokens=tokens,
            min_new_tokens=tokens,
            pad_token_id=0,
        )

    return run


def check_decode_step(model) -> dict:
    """The CPU proxy's claims (module docstring); returns the counts per step."""
    counts = {rows: _per_step(model, _capcal(model, rows)) for rows in (16, 64)}
    assert abs(counts[64][0] - counts[16][0]) <= 0.02 * counts[16][0], (
        f"operators grow with the rows: {counts}"
    )
    for rows in (16, 64):
        assert counts[rows][1] <= 1 / SYNC_STEPS + 1e-9, f"host reads per step: {counts}"
    stock = {rows: _per_step(model, _stock(model, rows)) for rows in (16, 64)}
    for rows in (16, 64):
        assert counts[rows][0] <= stock[rows][0], (
            f"more operators than stock at {rows} rows: {counts}, {stock}"
        )
    return {"capcal": counts, "stock": stock}


def test_a_decode_step_dispatches_no_per_row_work(tiny):
    model, _ = tiny
    check_decode_step(model)


def test_a_planted_per_row_loop_fails_the_check(tiny, monkeypatch):
    model, _ = tiny
    step = decoding._Sampler._step

    def step_with_row_loop(self, batch) -> None:
        step(self, batch)
        for row in range(len(batch.rows)):  # per-row bookkeeping on the device: operators grow with the rows
            batch.step_tokens[row, batch.steps] += 0

    monkeypatch.setattr(decoding._Sampler, "_step", step_with_row_loop)
    with pytest.raises(AssertionError, match="operators grow with the rows"):
        check_decode_step(model)


@pytest.fixture(scope="module")
def sliding_window(tmp_path_factory):
    """Gemma-3's architecture (2 layers, hidden 64: one sliding-window layer of 6 positions, one full one),
    its prompts and the reference decoder's samples of them (computed once for both attention modes)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from capcal_models.prepare import prepare_model

    path = decode_step_ops.tiny_model(
        prepare_model("gemma3-270m").path, tmp_path_factory.mktemp("gemma"), seed=5
    )
    config = AutoConfig.from_pretrained(path)
    config.update({"sliding_window": 6, "layer_types": ["sliding_attention", "full_attention"]})
    torch.manual_seed(5)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    jobs = [
        PromptJob(list(range(100 + 5 * i, 108 + 9 * i)), [10 * i + j for j in range(3)]) for i in range(4)
    ]
    expected = [[_reference(model, job, s, 10, set(), None) for s in range(3)] for job in jobs]
    return model, jobs, expected


@pytest.mark.parametrize("attention", ["exact", "batched"])
def test_sliding_window_layers_match_the_reference_decoder(sliding_window, attention):
    """Prompts longer than the window and samples that outgrow it give the reference decoder's tokens."""
    model, jobs, expected = sliding_window
    for rows in (2, 12):
        fresh = [PromptJob(job.token_ids, job.seeds) for job in jobs]
        sample_continuations(model, fresh, PARAMS, 10, None, set(), rows, attention=attention)
        assert [job.outputs for job in fresh] == expected, rows
