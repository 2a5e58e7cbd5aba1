"""The bootstraps' documented defaults, messages and warnings, whole (the surviving mutants of
capcal_metrics.bootstrap: tests/README.md, "Mutation testing")."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import capcal_metrics as cm

X = np.linspace(0.05, 0.95, 20)
Y = X[::-1].copy()


def _mean(values):
    return float(np.mean(values))


@pytest.mark.parametrize(
    "call",
    [
        lambda **kw: cm.bootstrap_ci(_mean, X, **kw),
        lambda **kw: cm.bootstrap_cis({"x": (_mean, (X,))}, **kw)["x"],
        lambda **kw: cm.bootstrap_differences({"x": (_mean, (X,)), "y": (_mean, (Y,))}, "y", **kw)["x"],
    ],
    ids=["bootstrap_ci", "bootstrap_cis", "bootstrap_differences"],
)
def test_the_defaults_are_1000_resamples_with_seed_0(call):
    assert call() == call(n_resamples=1000, seed=0)
    assert call() != call(n_resamples=1000, seed=1)


def test_argument_errors_name_the_argument_in_full():
    with pytest.raises(ValueError, match=r"^metric_fn must be callable, got int$"):
        cm.bootstrap_ci(5, X)
    with pytest.raises(ValueError, match=r"^bootstrap_ci needs at least one array to resample$"):
        cm.bootstrap_ci(_mean)
    with pytest.raises(ValueError, match=r"^arrays\[0\] must have a first axis of questions, got a scalar$"):
        cm.bootstrap_ci(_mean, np.float64(0.5))
    label = re.escape("metrics['b'] arrays[1] must have a first axis of questions, got a scalar")
    with pytest.raises(ValueError, match=f"^{label}$"):
        cm.bootstrap_cis({"a": (_mean, (X,)), "b": (_mean, (X, 3.0))})
    label = re.escape("metrics['b'] arrays[0] must have a first axis of questions, got a scalar")
    with pytest.raises(ValueError, match=f"^{label}$"):
        cm.bootstrap_differences({"a": (_mean, (X,)), "b": (_mean, (3.0,))}, "a")
    with pytest.raises(
        ValueError, match=r"^metrics must be a non-empty mapping name -> \(metric_fn, arrays\)$"
    ):
        cm.bootstrap_cis({})
    message = re.escape("metrics['a']: arrays must be a non-empty tuple or list of arrays")
    with pytest.raises(ValueError, match=f"^{message}$"):
        cm.bootstrap_cis({"a": (_mean, (array for array in [X]))})  # an iterator is no sequence
    with pytest.raises(ValueError, match=r"^arrays are empty: no questions to resample$"):
        cm.bootstrap_ci(_mean, np.array([]))
    with pytest.raises(ValueError, match=r"^n_resamples must be a positive integer"):
        cm.bootstrap_ci(_mean, X, n_resamples=0)
    shape = re.escape("metric 'b' has another shape than the reference 'a'")
    with pytest.raises(ValueError, match=f"^{shape}$"):
        cm.bootstrap_differences(
            {"a": (_mean, (X,)), "b": (lambda v: np.array([v.mean(), v.max()]), (X,))}, "a"
        )


@pytest.mark.parametrize(
    "call",
    [
        lambda level: cm.bootstrap_ci(_mean, X, confidence_level=level),
        lambda level: cm.bootstrap_differences(
            {"x": (_mean, (X,)), "y": (_mean, (Y,))}, "y", confidence_level=level
        ),
    ],
    ids=["bootstrap_ci", "bootstrap_differences"],
)
def test_a_confidence_level_of_one_is_refused_by_name(call):
    with pytest.raises(ValueError, match=r"^confidence_level must be in \(0, 1\), got 1\.0$"):
        call(1.0)


def test_one_question_is_resampled_not_refused():
    interval = cm.bootstrap_ci(_mean, np.array([0.3]), n_resamples=20)
    assert tuple(interval) == pytest.approx((0.3, 0.3, 0.3))


def test_the_undefined_resample_warnings_are_whole_and_point_at_the_caller():
    labels = np.array([0, 0, 0, 0, 0, 1])  # a resample without the positive makes AUROC undefined
    scores = np.linspace(0.1, 0.9, 6)
    pair = (cm.auroc, (scores, labels))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", message="auroc is undefined")
        cm.bootstrap_cis({"auroc": pair}, n_resamples=50, seed=0)
        cm.bootstrap_differences({"a": pair, "b": pair}, "b", n_resamples=50, seed=0)
    texts = [str(w.message) for w in caught]
    assert len(texts) == 2, texts
    assert re.fullmatch(
        r"bootstrap_cis: metric 'auroc' was undefined \(NaN\) on \d+ of 50 resamples; "
        r"they are left out of its interval",
        texts[0],
    )
    assert re.fullmatch(
        r"bootstrap_differences: 'a' - 'b' was undefined \(NaN\) on \d+ of 50 resamples; "
        r"they are left out of its interval",
        texts[1],
    )
    assert [w.filename for w in caught] == [__file__] * 2


def test_only_the_undefined_metric_warnings_of_the_resamples_are_silenced():
    """A metric's own warning on the resamples reaches the caller; only UndefinedMetricWarning is counted and
    silenced (it is summarised in one warning instead)."""

    def noisy_mean(values):
        warnings.warn("the metric's own warning", UserWarning, stacklevel=2)
        return float(np.mean(values))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cm.bootstrap_ci(noisy_mean, X, n_resamples=5, seed=0)
    assert len([w for w in caught if str(w.message) == "the metric's own warning"]) > 1, caught
