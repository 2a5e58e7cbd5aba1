"""Identity and seed of each sampled response, independent of batching and ``--limit``.

A response is identified by (run seed, task, stable question id, request index, repeat index). Its seed is a
64-bit hash of that tuple, so the same response is drawn whatever else is in the batch, whatever the batch
size and whichever ``--limit`` selected the question; different repeats of one question get unrelated seeds.

A sample's random numbers are its own stream, computed on the device for a whole batch at once
(``sample_uniforms``): the uniform of its t-th generated token (t = 0, 1, ...) is the (t + 1)-th output of
SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014; the
generator that seeds Java's ``SplittableRandom`` and xoshiro) started from the sample's seed, to 53 bits. It
depends on (seed, t) only, never on the batch: a counter-based stream, one batch of integer operations per
decode step for every row, no per-sample generator.
"""

from __future__ import annotations

import hashlib
import json

import torch

__all__ = ["RANDOM_STREAM", "sample_seed", "sample_uniforms", "splitmix64_uniform"]

# The name of the random stream, part of every sample cache key (a sample drawn from another stream is not
# reused): capcal-hf drew from a ``torch.Generator`` per sample before this one.
RANDOM_STREAM = "splitmix64-t"
_GOLDEN_GAMMA = 0x9E3779B97F4A7C15
_MIX_1 = 0xBF58476D1CE4E5B9
_MIX_2 = 0x94D049BB133111EB
_MASK_64 = (1 << 64) - 1


def sample_seed(run_seed: int, task: str, question_id: str, request_index: int, repeat: int) -> int:
    """Seed (0 <= seed < 2**63) of one sampled response: a hash of its identity, not of its batch position."""
    identity = json.dumps([int(run_seed), task, question_id, int(request_index), int(repeat)])
    digest = hashlib.sha256(identity.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def splitmix64_uniform(seed: int, step: int) -> float:
    """The uniform of token ``step`` (0-based) of the sample with this ``seed``, in plain Python integers:
    the (step + 1)-th SplitMix64 output from ``seed``, top 53 bits, in [0, 1). ``sample_uniforms`` computes
    the same numbers on tensors."""
    z = (seed + (step + 1) * _GOLDEN_GAMMA) & _MASK_64
    z = ((z ^ (z >> 30)) * _MIX_1) & _MASK_64
    z = ((z ^ (z >> 27)) * _MIX_2) & _MASK_64
    z ^= z >> 31
    return (z >> 11) * 2.0**-53


def _signed(value: int) -> int:
    """A 64-bit pattern as the int64 torch stores it."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _shift_right(values: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 bit patterns (torch's ``>>`` is arithmetic on signed integers)."""
    return (values >> bits) & ((1 << (64 - bits)) - 1)


def sample_uniforms(seeds: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
    """Float64 uniforms in [0, 1), one per row: ``splitmix64_uniform(seeds[i], steps[i])`` for every row at
    once, on the tensors' device (int64 arithmetic wraps modulo 2**64, as SplitMix64's does)."""
    z = seeds + (steps + 1) * _signed(_GOLDEN_GAMMA)
    z = (z ^ _shift_right(z, 30)) * _signed(_MIX_1)
    z = (z ^ _shift_right(z, 27)) * _signed(_MIX_2)
    z = z ^ _shift_right(z, 31)
    return _shift_right(z, 11).to(torch.float64) * 2.0**-53
