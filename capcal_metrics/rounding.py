r"""Zero up to rounding: when a computed denominator is indistinguishable from 0 in float64.

A ratio metric (a skill score, a correlation, AUROC, PRR) divides by a quantity that is exactly 0 on some
inputs (every target equal, the spread of mu_hat all sampling noise). Computed in floating point that zero
comes out as a tiny number of either sign (the variance of a constant 0.7 as ~1e-33, a difference of two
equal sums as ~1e-17), and the ratio as +-1e15 or worse. Every ratio of this package therefore treats a
denominator within its rounding bound of 0 as 0 (the metric is then undefined: NaN).

The bounds are those of recursive summation (Higham 2002, "Accuracy and Stability of Numerical Algorithms",
2nd ed., eq. (4.4)): a computed sum of n terms is within gamma_n sum_i |x_i| of the exact one, gamma_n =
n u / (1 - n u) with u = eps / 2; numpy's pairwise summation is tighter still. capcal uses
``n eps`` (= 2 n u > gamma_n while n u < 1/2) times the sum of the magnitudes involved:

- a sum or difference of sums with magnitude M = sum of the absolute values of its terms:
  ``|computed - exact| <= n eps M`` (:func:`summation_error_bound`);
- a two-pass variance V = mean_i (t_i - mean t)^2 of n values: if every t_i is equal, the computed mean
  differs from them by at most n eps max|t|, so the computed V is at most (n eps max|t|)^2
  (:func:`variance_is_zero`). A genuinely non-zero variance of n values on a grid of step 1/k is at least
  (1 - 1/n) / (n k^2), far above that bound for any realistic n and k.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["EPS", "is_zero_up_to_rounding", "summation_error_bound", "variance_is_zero"]

EPS = float(np.finfo(np.float64).eps)


def summation_error_bound(n_terms: ArrayLike, magnitude: ArrayLike) -> np.ndarray:
    """``n eps M``: a bound on the rounding error of a float64 sum (or difference of sums) of ``n_terms``
    terms whose absolute values add up to ``magnitude`` (Higham 2002, eq. 4.4)."""
    return np.asarray(n_terms, dtype=np.float64) * EPS * np.abs(np.asarray(magnitude, dtype=np.float64))


def is_zero_up_to_rounding(value: ArrayLike, n_terms: ArrayLike, magnitude: ArrayLike) -> np.ndarray:
    """``|value| <= n eps M`` (elementwise): ``value``, computed from ``n_terms`` terms of total absolute
    size ``magnitude``, cannot be told from 0 in float64 (see :func:`summation_error_bound`)."""
    return np.abs(np.asarray(value, dtype=np.float64)) <= summation_error_bound(n_terms, magnitude)


def variance_is_zero(variance: ArrayLike, n_values: ArrayLike, max_abs_value: ArrayLike) -> np.ndarray:
    """``variance <= (n eps max|t|)^2`` (elementwise): a two-pass variance of ``n_values`` values, at most
    ``max_abs_value`` in size, that equal values would also have given (module docstring)."""
    bound = summation_error_bound(n_values, max_abs_value)
    return np.asarray(variance, dtype=np.float64) <= bound * bound
