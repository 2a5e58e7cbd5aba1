"""capcal-hf samples are bit-for-bit independent of the batch: batch size, ``--limit`` and a resume that
decodes only some repeats of a question give the same tokens (full-vocabulary sampling, ``top_k: 0``, where
a logit change in the last bits flips about one token in a thousand)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # sampling_checks.py
from sampling_checks import cloned_requests, gsm8k_task  # noqa: E402

QUESTIONS, K, MAX_GEN_TOKS, RUN_SEED = 8, 8, 48, 1234


@pytest.fixture(scope="module")
def lm(smollm2_path):
    from capcal_models.hf import CapcalHFLM

    return CapcalHFLM(
        pretrained=str(smollm2_path), batch_size=16, device="cpu", seed=RUN_SEED, sample_cache=False
    )


def _samples(lm, batch_size: int, questions: int = QUESTIONS, k: int = K) -> dict[tuple[str, int], str]:
    """(question id, repeat) -> text of the first capcal_gsm8k questions, ``batch_size`` rows at a time."""
    requests = cloned_requests(gsm8k_task(lm, questions), questions, k, max_gen_toks=MAX_GEN_TOKS, top_k=0)
    lm.batch_size_per_gpu = batch_size
    texts = lm.generate_until(requests, disable_tqdm=True)
    repeats: dict[str, int] = {}
    samples = {}
    for request, text in zip(requests, texts, strict=True):
        question = request.doc["question_id"]
        repeats[question] = repeats.get(question, -1) + 1
        samples[(question, repeats[question])] = text
    return samples


@pytest.fixture(scope="module")
def reference(lm) -> dict[tuple[str, int], str]:
    return _samples(lm, 16)


@pytest.mark.slow
def test_samples_are_identical_at_batch_sizes_12_and_16(lm, reference):
    """Batch size 12 groups the rows differently (the last batch holds 4) and, where the machine's
    batch-invariant row floor (``batch_invariant_rows``) is above 12, also runs the padding rows that keep
    every step at that floor; every one of the reference's 3,072 tokens is compared. (Batch size 3 pads the
    same way at five times the cost: 22 steps of floor rows where 12 takes 6; the next test runs it on fewer
    rows, and test_hf_resume.py's kill-and-resume test runs at batch size 1.)"""
    other = _samples(lm, 12)
    changed = sorted(key for key in reference if other[key] != reference[key])
    assert not changed, f"batch size 12: {len(changed)} of {len(reference)} samples changed"


@pytest.mark.slow
def test_samples_do_not_depend_on_limit_or_on_which_repeats_are_decoded(lm, reference):
    """A smaller ``--limit`` and fewer repeats (as a resume decodes only the missing ones), three rows per
    batch (each step padded to the row floor), change nothing."""
    fewer = _samples(lm, 3, questions=3, k=3)
    changed = sorted(key for key in fewer if fewer[key] != reference[key])
    assert not changed, f"{len(changed)} of {len(fewer)} samples changed"
