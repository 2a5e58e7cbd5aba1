"""Unbiased pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code").

Given n sampled responses of which c are correct, the probability that at least one of k responses drawn
without replacement is correct is

    pass@k = 1 - C(n - c, k) / C(n, k)
           = 1                                   if n - c < k
           = 1 - prod_{j = n - c + 1}^{n} (1 - k / j)   otherwise,

the product form being numerically stable for large n. It is an unbiased estimator of 1 - (1 - mu)^k when the
n responses are i.i.d. draws from the model with per-response accuracy mu.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .validation import check_integer, check_probabilities, check_sample_counts

__all__ = ["pass_at_k", "predicted_pass_at_k"]


def pass_at_k(n_samples: ArrayLike, n_correct: ArrayLike, k: int) -> np.ndarray:
    """Unbiased pass@k for each query, vectorised over queries.

    Parameters
    ----------
    n_samples : array of int, shape (N,) or scalar
        Number of sampled responses n per query, n >= 1.
    n_correct : array of int, shape (N,) or scalar
        Number of correct responses c per query, 0 <= c <= n.
    k : int
        Number of draws, 1 <= k <= min(n).

    Returns
    -------
    ndarray of float, shape (N,) (0-d for scalar input)
        ``1 - C(n - c, k) / C(n, k)`` per query.

    Notes
    -----
    With ``L(m) = sum_{j=k+1}^{m} log(1 - k/j)`` tabulated once by a cumulative sum up to max(n), the product
    is ``exp(L(n) - L(n - c))`` for every query with n - c >= k: O(N + max n) time and memory.
    """
    n, c = check_sample_counts(n_samples, n_correct, unit="query")
    k = check_integer(k, "k")
    if n.size and k > n.min():
        raise ValueError(f"k={k} exceeds the smallest number of samples n_samples={int(n.min())}")

    n_wrong = n - c
    out = np.ones(n.shape, dtype=float)
    solvable = n_wrong >= k  # otherwise every k-subset contains a correct response: pass@k = 1
    if np.any(solvable):
        j = np.arange(k + 1, int(n.max()) + 1)
        log_prefix = np.concatenate([np.zeros(k + 1), np.cumsum(np.log1p(-k / j))])  # L(m), m = 0..max n
        out[solvable] = 0.0 - np.expm1(log_prefix[n[solvable]] - log_prefix[n_wrong[solvable]])
    return out


def predicted_pass_at_k(confidence: ArrayLike, k: int) -> np.ndarray:
    """pass@k predicted from a capability confidence p: ``1 - (1 - p)^k`` (any shape)."""
    p = check_probabilities(confidence, "confidence", ndim=None, allow_empty=True)
    k = check_integer(k, "k")
    return 1.0 - (1.0 - p) ** k
