"""Synthetic capability-calibration data for the capcal_metrics tests (fixed seeds, no files)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytest


class CapabilityData(NamedTuple):
    confidence: np.ndarray  # c in [0, 1]
    mu: np.ndarray  # true per-query accuracy
    mu_hat: np.ndarray  # fraction correct among n_samples draws
    n_samples: np.ndarray  # n per query
    z: np.ndarray  # 0/1 correctness of one extra sampled response


def make_capability_data(
    n_queries: int = 400, seed: int = 0, n_samples: int = 10, decimals: int | None = None
) -> CapabilityData:
    """mu ~ Beta(0.6, 0.6); c = mu + noise clipped to [0, 1] (rounded to ``decimals`` to create ties)."""
    rng = np.random.default_rng(seed)
    mu = rng.beta(0.6, 0.6, n_queries)
    confidence = np.clip(mu + rng.normal(0.0, 0.2, n_queries), 0.0, 1.0)
    if decimals is not None:
        confidence = np.round(confidence, decimals)
    n = np.full(n_queries, n_samples)
    mu_hat = rng.binomial(n, mu) / n
    z = (rng.random(n_queries) < mu).astype(float)
    return CapabilityData(confidence, mu, mu_hat, n, z)


@pytest.fixture
def make_data() -> Callable[..., CapabilityData]:
    return make_capability_data
