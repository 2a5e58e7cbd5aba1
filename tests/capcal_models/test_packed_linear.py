"""capcal_models.packed_linear: MKL-packed weights give the plain layers' bits, and only inside the block.

- inside ``packed_linears``, a model's output for every row count from the batch-invariance floor to the
  largest bucket (padded to its bucket) is bit-for-bit its output without packing, and the layers run the
  packed product once the bucket is packed (counted: at the largest bucket's first use, a smaller one's
  ``PACK_AFTER_USES``-th); other row counts run the plain product;
- ``row_buckets``: ascending, within [min_rows, rows], every count in range padded by less than a third;
- no packed copy beyond the memory budget, none kept after the block, none with autograd or in bfloat16.
"""

from __future__ import annotations

import pytest
import torch

from capcal_models import linux_proc, packed_linear
from capcal_models.decoding import batch_invariant_rows
from capcal_models.packed_linear import PACK_AFTER_USES, packed_linears, packing_is_exact, row_buckets

pytestmark = pytest.mark.skipif(not torch.backends.mkl.is_available(), reason="needs torch with MKL")

SHAPES = [(96, 256), (256, 96), (96, 5000)]


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(96, 256),
        torch.nn.SiLU(),
        torch.nn.Linear(256, 96, bias=False),
        torch.nn.Linear(96, 5000),
    ).eval()


@pytest.fixture
def packed_calls(monkeypatch) -> list[int]:
    """The row count of every packed product taken."""
    calls: list[int] = []
    product = torch.ops.mkl._mkl_linear
    monkeypatch.setattr(
        torch.ops.mkl,
        "_mkl_linear",
        lambda inputs, *args: calls.append(inputs.shape[0]) or product(inputs, *args),
        raising=False,
    )
    return calls


def test_packed_layers_give_the_plain_bits_for_every_row_count(packed_calls):
    model = _model()
    floor = batch_invariant_rows(model)
    buckets = row_buckets(max(24, floor), floor)
    if not all(packing_is_exact(SHAPES, bucket) for bucket in buckets):
        pytest.skip("MKL's packed product does not give F.linear's bits here: capcal-hf does not pack")
    counts = [1, floor - 1, *range(floor, buckets[-1] + 1), buckets[-1] + 3]
    counts = [count for count in counts if count >= 1]
    inputs = torch.randn(max(counts), 1, 96, generator=torch.Generator().manual_seed(1))
    packed_calls.clear()  # the probes' products
    with torch.inference_mode():
        plain = {count: model(inputs[:count]) for count in counts}
        with packed_linears(model, buckets, floor) as packed:
            assert packed
            passes = [{count: model(inputs[:count]) for count in counts} for _ in range(PACK_AFTER_USES)]
        after = model(inputs[: buckets[-1]])
    for outputs in passes:
        assert all(torch.equal(outputs[count], plain[count]) for count in counts)
    # a count in range runs at its bucket's rows, packed from the largest bucket's first use and a smaller
    # bucket's PACK_AFTER_USES-th use on (three layers each), while fewer than MAX_COPIES buckets are packed
    # (a low floor, 4 rows on some CPUs, gives more buckets than that)
    uses: dict[int, int] = {}
    packed_buckets: set[int] = set()
    expected = []
    for count in counts * PACK_AFTER_USES:
        if floor <= count <= buckets[-1]:
            bucket = next(b for b in buckets if b >= count)
            uses[bucket] = uses.get(bucket, 0) + 1
            threshold = 1 if bucket == buckets[-1] else PACK_AFTER_USES
            if uses[bucket] >= threshold and len(packed_buckets) < packed_linear.MAX_COPIES:
                packed_buckets.add(bucket)
            expected += [bucket] * 3 if bucket in packed_buckets else []
    assert packed_calls == expected
    assert set(expected) == packed_buckets and len(packed_buckets) == min(
        len(buckets), packed_linear.MAX_COPIES
    )
    assert torch.equal(after, plain[buckets[-1]])
    assert all("capcal_packed" not in m.__dict__ and "forward" not in m.__dict__ for m in model)


def test_no_copy_beyond_the_memory_budget(monkeypatch, packed_calls):
    model = _model()
    floor = batch_invariant_rows(model)
    inputs = torch.randn(floor, 1, 96, generator=torch.Generator().manual_seed(2))
    monkeypatch.setattr(linux_proc, "available_memory_bytes", lambda: 4 * 300_000)  # room for the two small
    if not packing_is_exact(SHAPES, floor):
        pytest.skip("MKL's packed product does not give F.linear's bits here: capcal-hf does not pack")
    packed_calls.clear()  # the probes' products
    with torch.inference_mode():
        plain = model(inputs)
        with packed_linears(model, [floor], floor):
            outputs = [model(inputs) for _ in range(3)]
    assert all(torch.equal(output, plain) for output in outputs)
    assert packed_calls == [floor, floor] * 3  # the 96 x 5000 layer (1.9 MB) is never packed


@pytest.mark.parametrize(
    ("rows", "min_rows"), [(64, 16), (96, 16), (17, 16), (64, 2), (5, 2), (256, 4), (4, 1), (1, 1)]
)
def test_row_buckets_cover_the_range_with_little_padding(rows, min_rows):
    buckets = row_buckets(rows, min_rows)
    assert buckets == sorted(set(buckets)) and buckets[-1] == rows and buckets[0] >= min_rows
    for count in range(min_rows, rows + 1):
        bucket = next(b for b in buckets if b >= count)
        assert 3 * (bucket - count) < bucket, (count, bucket)


def test_nothing_is_packed_with_autograd_or_in_bfloat16():
    model = _model()
    with packed_linears(model, 8, 1) as packed:
        assert not packed
    with torch.inference_mode(), packed_linears(model.to(torch.bfloat16), 8, 1) as packed:
        assert not packed


def test_at_most_max_copies_of_the_weights(packed_calls):
    model = _model()
    floor = batch_invariant_rows(model)
    buckets = list(range(floor, floor + packed_linear.MAX_COPIES + 2))
    if not all(packing_is_exact(SHAPES, bucket) for bucket in buckets):
        pytest.skip("MKL's packed product does not give F.linear's bits here: capcal-hf does not pack")
    packed_calls.clear()
    inputs = torch.randn(buckets[-1], 1, 96, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode(), packed_linears(model, buckets, floor):
        for _ in range(PACK_AFTER_USES):
            for rows in buckets[::-1]:
                model(inputs[:rows])
    assert sorted(set(packed_calls), reverse=True) == buckets[::-1][: packed_linear.MAX_COPIES]


@pytest.mark.parametrize(("vendor", "pays"), [("GenuineIntel", True), ("AuthenticAMD", False), (None, False)])
def test_packing_is_used_on_intel_cpus_only(monkeypatch, vendor, pays):
    monkeypatch.setattr(linux_proc, "cpu_vendor", lambda: vendor)
    assert packed_linear.packing_pays() is pays


@pytest.mark.slow
def test_real_model_samples_are_the_same_without_packing(
    smollm2_path, shared_data, monkeypatch, packed_calls
):
    """SmolLM2 decoding 4 GSM8K prompts x 12 samples at batch size 36: the full batch, then the last
    prompt's rows (smaller buckets) and rows that finished; with packing and without, the same samples."""
    import json

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from capcal_models import decoding

    tokenizer = AutoTokenizer.from_pretrained(smollm2_path)
    model = AutoModelForCausalLM.from_pretrained(smollm2_path, dtype=torch.float32).eval()
    lines = (shared_data / "gsm8k" / "test.jsonl").read_text(encoding="utf-8").splitlines()[:4]

    def sample() -> list[list[list[int]]]:
        jobs = []
        for index, line in enumerate(lines):
            prompt = tokenizer(json.loads(line)["question"])["input_ids"]
            jobs.append(decoding.PromptJob(prompt, list(range(index * 12, (index + 1) * 12))))
        params = decoding.SamplingParams(do_sample=True, temperature=1.0, top_k=None)
        decoding.sample_continuations(model, jobs, params, 32, None, {tokenizer.eos_token_id}, 36)
        return [job.outputs for job in jobs]

    monkeypatch.setattr(decoding, "packing_pays", lambda: True)  # whatever this CPU's vendor
    packed = sample()
    buckets_used = set(packed_calls)
    monkeypatch.setattr(decoding, "packing_pays", lambda: False)
    packed_calls.clear()
    plain = sample()
    assert not packed_calls
    assert packed == plain
    shapes = [(m.in_features, m.out_features) for m in model.modules() if type(m) is torch.nn.Linear]
    if packing_is_exact(shapes, 36):
        assert len(buckets_used) >= 2, buckets_used  # the full batch and at least one smaller bucket


def test_the_exactness_probe_leaves_torchs_global_generator_alone():
    """The probe draws its random weights from its own seeded generator: a user's ``torch.manual_seed``
    stream is the same whether or not a model was probed in between (and the probe's verdict is
    reproducible)."""
    shapes = [(24, 40), (40, 24)]
    torch.manual_seed(123)
    untouched = torch.rand(4)
    torch.manual_seed(123)
    packed_linear._EXACT.pop((tuple(sorted(set(shapes))), 5), None)  # probe afresh
    verdict = packing_is_exact(shapes, 5)
    assert torch.equal(torch.rand(4), untouched)
    packed_linear._EXACT.pop((tuple(sorted(set(shapes))), 5), None)
    assert packing_is_exact(shapes, 5) == verdict
