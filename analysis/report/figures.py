"""The report's figures (matplotlib, rendered off-screen to PNG bytes)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import capcal_metrics as cm  # noqa: E402

__all__ = ["Curve", "curves_figure", "reliability_figure", "target_scatter_figure"]


@dataclass(frozen=True)
class Curve:
    """One line of a curve figure, with an optional band (e.g. a 95% interval)."""

    label: str
    x: Sequence[float]
    y: Sequence[float]
    band_low: Sequence[float] | None = None
    band_high: Sequence[float] | None = None
    style: str = "-"  # matplotlib line style (with a colour letter, e.g. "k--", or alone)
    marker: str = "o"
    color: str | None = None  # None: the next colour of the cycle


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def _grid(count: int, width: float = 3.0) -> tuple:
    columns = min(count, 4)
    rows = int(np.ceil(count / columns))
    figure, axes = plt.subplots(
        rows, columns, figsize=(width * columns, width * rows), squeeze=False, layout="constrained"
    )
    for axis in axes.flat[count:]:
        axis.set_visible(False)
    return figure, axes.flat


def reliability_figure(
    confidences: Mapping[str, np.ndarray],
    target: np.ndarray,
    target_name: str,
    subtitles: Mapping[str, str] | None = None,
    n_bins: int = 10,
) -> bytes:
    """Reliability diagrams, one panel per estimator: mean target per confidence bin against the diagonal;
    bar width shows the bin, the number above a bar its question count. ``subtitles`` adds a second title
    line per estimator (the report gives each panel's ECE with its interval)."""
    subtitles = subtitles or {}
    figure, axes = _grid(len(confidences))
    for axis, (name, confidence) in zip(axes, confidences.items(), strict=False):
        keep = np.isfinite(confidence)
        diagram = cm.reliability_diagram(confidence[keep], target[keep], n_bins=n_bins)
        filled = diagram.count > 0
        centres = (diagram.bin_lower + diagram.bin_upper) / 2
        axis.bar(
            centres[filled],
            diagram.mean_target[filled],
            width=(diagram.bin_upper - diagram.bin_lower)[filled] * 0.9,
            color="#4c72b0",
            alpha=0.8,
        )
        for x, y, count in zip(
            centres[filled], diagram.mean_target[filled], diagram.count[filled], strict=True
        ):
            axis.text(x, min(y + 0.02, 0.97), str(int(count)), ha="center", fontsize=7)
        axis.plot([0, 1], [0, 1], "k--", linewidth=0.8)
        title = f"{name}\n{subtitles[name]}" if name in subtitles else name
        axis.set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence", ylabel=f"mean {target_name}")
        axis.set_title(title, fontsize=8)
    figure.suptitle(f"Reliability ({target_name})", fontsize=11)
    return _png(figure)


def target_scatter_figure(confidences: Mapping[str, np.ndarray], mu_hat: np.ndarray, z: np.ndarray) -> bytes:
    """Per estimator: confidence against the capability target mu_hat (dots) and against the response target
    z of the first response (crosses at 0 and 1, jittered), showing how far apart the two targets are."""
    figure, axes = _grid(len(confidences))
    jitter = np.random.default_rng(0).uniform(-0.03, 0.03, size=len(z))
    for axis, (name, confidence) in zip(axes, confidences.items(), strict=False):
        axis.scatter(
            confidence, z + jitter, marker="x", s=10, color="#dd8452", alpha=0.5, label="z (response)"
        )
        axis.scatter(confidence, mu_hat, s=12, color="#4c72b0", alpha=0.7, label="mu_hat (capability)")
        axis.plot([0, 1], [0, 1], "k--", linewidth=0.8)
        axis.set(xlim=(-0.02, 1.02), ylim=(-0.06, 1.06), title=name, xlabel="confidence", ylabel="target")
    axes[0].legend(fontsize=7, loc="upper left")
    return _png(figure)


def curves_figure(
    curves: Sequence[Curve],
    title: str,
    xlabel: str,
    ylabel: str,
    log_x: bool = False,
    y_limits: tuple[float, float] | None = None,
) -> bytes:
    """Lines (with optional bands) on one axis: pass@k, budget, test-time-scaling and routing curves.
    A curve with its own ``color`` (a reference line) is drawn thicker and above the others, so a baseline
    that coincides with an estimator stays visible; ``y_limits`` fixes the y axis (bands are drawn as
    given: clip them to the range first)."""
    figure, axis = plt.subplots(figsize=(5.5, 3.8))
    for curve in curves:
        reference = curve.color is not None
        (line,) = axis.plot(
            curve.x,
            curve.y,
            curve.style,
            marker=curve.marker,
            markersize=4 if reference else 3,
            color=curve.color,
            linewidth=1.8 if reference else 1.2,
            zorder=3 if reference else 2,
            label=curve.label,
        )
        if curve.band_low is not None and curve.band_high is not None:
            axis.fill_between(curve.x, curve.band_low, curve.band_high, color=line.get_color(), alpha=0.15)
    if log_x:
        axis.set_xscale("log", base=2)
    if y_limits is not None:
        axis.set_ylim(*y_limits)
    axis.set(title=title, xlabel=xlabel, ylabel=ylabel)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    return _png(figure)
