"""Percentile bootstrap confidence intervals over questions, for any metric or several metrics at once.

A resample draws N questions with replacement and takes whole rows of every array together (a question's
confidence, target, sample count, ... stay aligned). The interval is the percentile interval
``[q_{alpha/2}, q_{1 - alpha/2}]`` of the metric over the resamples, alpha = 1 - confidence_level (Efron &
Tibshirani 1993, ch. 13).

:func:`bootstrap_cis` evaluates several metrics of the same N questions on the *same* resamples (drawn
once; intervals of different metrics are then coherent, and the drawing is not repeated per metric);
:func:`bootstrap_ci` is the single-metric case of the same machinery.

Each resample is represented by its bootstrap counts (how often each question was drawn, a
Multinomial(N; 1/N, ..., 1/N) vector): resample b's counts are the ``bincount`` of the b-th block of N
indices from ``numpy.random.default_rng(seed).integers(0, N, ...)``, i.e. of exactly the rows the textbook
index resampling ``rows = rng.integers(0, N, size=N)`` would take (drawn in chunks of resamples; the stream,
and so every interval, does not depend on the chunk size). The metric of a resample is the metric of the data
set in which question i appears ``counts[i]`` times, i.e. of the rows ``np.repeat(arange(N), counts)``; every
metric here is a function of that multiset. Two evaluation paths give the same values for the same seed:

* the metrics of this package (also through ``functools.partial`` with keyword arguments) are evaluated by
  their weighted kernels (:mod:`capcal_metrics._kernels`) on a whole chunk at once, the counts acting as
  weights: no per-resample copies, and the data-only work (sorting, grouping ties, binning) is done once;
* any other callable is evaluated resample by resample on the rows ``np.repeat(arange(N), counts)``.

Before resampling, the rows are sorted once by the first array (normally the confidence; ties broken by the
other 1-D numeric arrays), so that the kernels' groups are contiguous and the result does not depend on the
input order of the rows. This reordering is harmless because the bootstrap treats questions as exchangeable
and every metric here depends only on the values, not on the row order; a custom metric must have the same
property.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ._kernels import Workspace
from .kernel_registry import metric_kernel
from .validation import (
    UndefinedMetricWarning,
    caller_stacklevel,
    check_fraction,
    check_integer,
    check_same_length,
)

__all__ = ["BootstrapCI", "bootstrap_ci", "bootstrap_cis", "bootstrap_differences"]

# Resamples per chunk = max(1, this // N): the counts and each kernel temporary of a chunk are (chunk, N)
# float64 arrays of about 4 MB, small enough to stay in cache, large enough to amortise per-call overheads.
_CHUNK_ELEMENTS = 500_000


class BootstrapCI(NamedTuple):
    """Point estimate on the full data and the percentile-bootstrap interval [low, high]."""

    estimate: Any
    low: Any
    high: Any


def bootstrap_ci(
    metric_fn: Callable[..., Any],
    *arrays: Any,
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    seed: int = 0,
) -> BootstrapCI:
    """Percentile bootstrap CI of ``metric_fn(*arrays)``, resampling questions (rows, jointly across arrays).

    ``arrays`` share their first axis (questions); a 2-D array such as per-response confidences of shape
    (N, n) is resampled by rows. ``metric_fn`` may return a scalar or a fixed-shape array (intervals are then
    elementwise) and must not depend on the order of the rows. Use ``functools.partial`` for keyword
    arguments, e.g. ``bootstrap_ci(partial(expected_calibration_error, n_bins=15), c, mu_hat)``.

    Resamples on which the metric is undefined (NaN, e.g. AUROC of a resample with a single class) are left
    out of the percentiles, with a warning saying how many (all undefined: NaN interval). Deterministic for a
    given integer ``seed``. Same as ``bootstrap_cis({"metric": (metric_fn, arrays)}, ...)["metric"]``.

    Returns ``BootstrapCI(estimate, low, high)`` (floats for scalar metrics, arrays otherwise).
    """
    if not callable(metric_fn):
        raise ValueError(f"metric_fn must be callable, got {type(metric_fn).__name__}")
    if not arrays:
        raise ValueError("bootstrap_ci needs at least one array to resample")
    results, undefined = _bootstrap(
        {"": (metric_fn, arrays)}, n_resamples, confidence_level, seed, array_name="arrays[{position}]"
    )
    if undefined[""]:
        warnings.warn(
            f"bootstrap_ci: the metric was undefined (NaN) on {undefined['']} of {n_resamples} "
            "resamples; they are left out of the interval",
            UndefinedMetricWarning,
            stacklevel=caller_stacklevel(),
        )
    return results[""]


def bootstrap_cis(
    metrics: Mapping[str, tuple[Callable[..., Any], Sequence[Any]]],
    *,
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    seed: int = 0,
) -> dict[str, BootstrapCI]:
    """Percentile bootstrap CIs of several metrics of the same questions, all on the same resamples.

    ``metrics`` maps a name to ``(metric_fn, arrays)``: the metric is ``metric_fn(*arrays)``, and every array
    of every metric has the same first axis of N questions (a question's row is resampled jointly in all of
    them). For example::

        bootstrap_cis({
            "ece": (expected_calibration_error, (c, mu_hat)),
            "corrected_brier": (corrected_capability_brier_score, (c, mu_hat, n)),
            "response_auroc": (auroc, (c, z)),
        })

    Each resample is one vector of counts m ~ Multinomial(N; 1/N, ..., 1/N) over the questions, drawn once and
    shared by all metrics, so metric k's interval is the percentile interval of its values
    theta_k(m_1), ..., theta_k(m_R): exactly what :func:`bootstrap_ci` gives for that metric alone with the
    same seed when the row order is the same (the canonical order is set by the first metric's first array,
    ties broken by all other 1-D numeric arrays in order of appearance). Undefined resamples are left out per
    metric, with one warning per metric that had any.

    Returns ``{name: BootstrapCI(estimate, low, high)}`` in the order of ``metrics``.
    """
    _check_specs(metrics)
    results, undefined = _bootstrap(
        metrics, n_resamples, confidence_level, seed, array_name="metrics[{name!r}] arrays[{position}]"
    )
    for name, count in undefined.items():
        if count:
            warnings.warn(
                f"bootstrap_cis: metric {name!r} was undefined (NaN) on {count} of {n_resamples} "
                "resamples; they are left out of its interval",
                UndefinedMetricWarning,
                stacklevel=caller_stacklevel(),
            )
    return results


def bootstrap_differences(
    metrics: Mapping[str, tuple[Callable[..., Any], Sequence[Any]]],
    reference: str,
    *,
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    seed: int = 0,
) -> dict[str, BootstrapCI]:
    """Paired percentile-bootstrap CIs of ``theta_name - theta_reference`` for every other metric in
    ``metrics``, all evaluated on the *same* resamples of the same N questions.

    ``metrics`` is as in :func:`bootstrap_cis`, e.g. one entry per confidence estimator, each the same metric
    of that estimator's confidences against the shared target. For resample b (counts m_b, drawn once and
    shared by all metrics) the difference is ``d_b = theta_name(m_b) - theta_reference(m_b)``; the interval
    is the percentile interval of d_1, ..., d_R, and the estimate is the difference on the full data. Because
    both metrics see the same questions in every resample, the question-to-question variation they share
    cancels: the paired interval is narrower than what two separate intervals suggest, and it answers "is
    the reference better than this one?" (an interval excluding 0) directly. Resamples on which either
    metric is undefined are left out, with one warning per difference that had any. The draws are those of
    :func:`bootstrap_cis` with the same seed and row order, so its per-metric intervals are the marginals.

    Returns ``{name: BootstrapCI(estimate, low, high)}`` for every name except ``reference``, in order.
    """
    if not isinstance(metrics, Mapping) or reference not in metrics:
        raise ValueError(f"reference {reference!r} must be one of the metrics {list(metrics)}")
    _check_specs(metrics)
    estimates, values = _resample(
        metrics, n_resamples, seed, array_name="metrics[{name!r}] arrays[{position}]"
    )
    alpha = 1.0 - check_fraction(confidence_level, "confidence_level", include_one=False)
    results: dict[str, BootstrapCI] = {}
    for name in metrics:
        if name == reference:
            continue
        if estimates[name].shape != estimates[reference].shape:
            raise ValueError(f"metric {name!r} has another shape than the reference {reference!r}")
        ci, undefined = _percentile_interval(
            estimates[name] - estimates[reference], values[name] - values[reference], alpha
        )
        if undefined:
            warnings.warn(
                f"bootstrap_differences: {name!r} - {reference!r} was undefined (NaN) on {undefined} of "
                f"{len(values[name])} resamples; they are left out of its interval",
                UndefinedMetricWarning,
                stacklevel=caller_stacklevel(),
            )
        results[name] = ci
    return results


def _check_specs(metrics: Mapping[str, tuple[Callable[..., Any], Sequence[Any]]]) -> None:
    if not isinstance(metrics, Mapping) or not metrics:
        raise ValueError("metrics must be a non-empty mapping name -> (metric_fn, arrays)")
    for name, spec in metrics.items():
        if not (isinstance(spec, tuple) and len(spec) == 2 and callable(spec[0])):
            raise ValueError(f"metrics[{name!r}] must be a pair (metric_fn, arrays), metric_fn callable")
        if isinstance(spec[1], np.ndarray) or not isinstance(spec[1], Sequence) or not spec[1]:
            raise ValueError(f"metrics[{name!r}]: arrays must be a non-empty tuple or list of arrays")


def _bootstrap(
    metrics: Mapping[str, tuple[Callable[..., Any], Sequence[Any]]],
    n_resamples: int,
    confidence_level: float,
    seed: int,
    array_name: str,
) -> tuple[dict[str, BootstrapCI], dict[str, int]]:
    """The shared machinery: intervals per metric and the number of resamples on which each was undefined."""
    confidence_level = check_fraction(confidence_level, "confidence_level", include_one=False)
    estimates, values = _resample(metrics, n_resamples, seed, array_name)
    results: dict[str, BootstrapCI] = {}
    undefined_counts: dict[str, int] = {}
    for name, estimate in estimates.items():
        results[name], undefined_counts[name] = _percentile_interval(
            estimate, values[name], 1.0 - confidence_level
        )
    return results, undefined_counts


def _percentile_interval(estimate: np.ndarray, values: np.ndarray, alpha: float) -> tuple[BootstrapCI, int]:
    """The percentile interval of ``values`` (resamples on the first axis; a resample with any NaN is left
    out) and the number of resamples left out."""
    n_resamples = len(values)
    undefined = np.isnan(values).reshape(n_resamples, -1).any(axis=1)
    if undefined.all():
        low = high = np.full(estimate.shape, np.nan)
    else:
        low, high = np.nanpercentile(values, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)], axis=0)
    if estimate.ndim == 0:
        return BootstrapCI(float(estimate), float(low), float(high)), int(undefined.sum())
    return BootstrapCI(estimate, np.asarray(low), np.asarray(high)), int(undefined.sum())


def _resample(
    metrics: Mapping[str, tuple[Callable[..., Any], Sequence[Any]]],
    n_resamples: int,
    seed: int,
    array_name: str,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Point estimates on the full data, and each metric's values on the shared resamples."""
    n_resamples = check_integer(n_resamples, "n_resamples")
    # Convert each distinct input object once, so an array shared by several metrics stays one array.
    converted: dict[int, np.ndarray] = {}
    data: dict[str, list[np.ndarray]] = {}
    named: dict[str, np.ndarray] = {}
    for name, (_, arrays) in metrics.items():
        data[name] = [converted.setdefault(id(array), np.asarray(array)) for array in arrays]
        for position, array in enumerate(data[name]):
            label = array_name.format(name=name, position=position)
            if array.ndim == 0:
                raise ValueError(f"{label} must have a first axis of questions, got a scalar")
            named[label] = array
    check_same_length(**named)
    n_questions = len(next(iter(named.values())))
    if n_questions == 0:
        raise ValueError("arrays are empty: no questions to resample")

    # Point estimates on the full data (also validate the inputs).
    estimates = {
        name: np.asarray(metric_fn(*data[name]), dtype=np.float64) for name, (metric_fn, _) in metrics.items()
    }

    # Canonical row order: by the first array, ties broken by the following distinct 1-D numeric arrays. The
    # resamples then depend only on the multiset of rows, not on their input order.
    distinct = list({id(array): array for arrays in data.values() for array in arrays}.values())
    sort_keys = [array for array in distinct if array.ndim == 1 and np.issubdtype(array.dtype, np.number)]
    if sort_keys and sort_keys[0] is distinct[0]:
        order = np.lexsort(sort_keys[::-1])
        reordered = {id(array): array[order] for array in distinct}
        data = {name: [reordered[id(array)] for array in arrays] for name, arrays in data.items()}

    workspace = Workspace()  # shared by all kernels: groupings once, group sums once per chunk
    kernels = {name: metric_kernel(workspace, fn, data[name]) for name, (fn, _) in metrics.items()}
    values = {name: np.empty((n_resamples, *estimate.shape)) for name, estimate in estimates.items()}
    rng = np.random.default_rng(seed)
    questions = np.arange(n_questions)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        for start, counts in _bootstrap_counts(rng, n_questions, n_resamples):
            stop = start + len(counts)
            workspace.load(counts)
            for name, kernel in kernels.items():
                if kernel is not None:
                    values[name][start:stop] = kernel()
                    continue
                metric_fn = metrics[name][0]
                for offset, row_counts in enumerate(counts):
                    rows = np.repeat(questions, row_counts)
                    values[name][start + offset] = metric_fn(*(array[rows] for array in data[name]))

    return estimates, values


def _bootstrap_counts(
    rng: np.random.Generator, n_questions: int, n_resamples: int
) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (first resample index, int64 counts of shape (chunk, N)) until n_resamples are drawn.

    Row b of a chunk is ``bincount`` of N indices drawn uniformly with replacement, i.e. one
    Multinomial(N; 1/N, ..., 1/N) vector of bootstrap counts.
    """
    chunk = max(1, min(n_resamples, _CHUNK_ELEMENTS // n_questions))
    counts = np.empty((chunk, n_questions), dtype=np.int64)
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        draws = rng.integers(0, n_questions, size=(size, n_questions))
        for row in range(size):
            counts[row] = np.bincount(draws[row], minlength=n_questions)
        yield start, counts[:size]
