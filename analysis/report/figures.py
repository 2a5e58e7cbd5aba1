"""The report's figures (matplotlib, rendered off-screen to PNG bytes)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import capcal_metrics as cm  # noqa: E402

__all__ = [
    "Curve",
    "Interval",
    "curves_figure",
    "figures_not_rendered",
    "forest_figure",
    "line_description",
    "reliability_figure",
    "target_scatter_figure",
]

# How a reader names a line's style, colour and marker (the words of the captions; see line_description).
LINE_STYLES = {"-": "solid", "--": "dashed", ":": "dotted", "-.": "dash-dot"}
COLOURS = {"black": "black", "0.45": "grey", "0.25": "dark grey"}
MARKERS = {"o": "circles", "s": "squares", "^": "triangles", "v": "down-pointing triangles"}


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


def line_description(curve: Curve) -> str:
    """The words for a reference line as drawn: ``black dashed line with triangles`` (its colour, from
    :data:`COLOURS`; its line style, from :data:`LINE_STYLES`; its marker, from :data:`MARKERS`), so that a
    caption names the lines the legend shows."""
    style = curve.style.lstrip("bgrcmykw") or "-"
    colour = COLOURS.get(curve.color or "", "coloured")
    return f"{colour} {LINE_STYLES[style]} line with {MARKERS[curve.marker]}"


@dataclass(frozen=True)
class Interval:
    """One row of a forest plot: an estimate with its interval; ``highlight`` draws it in colour (the best),
    ``hollow`` with an open marker (scored against another target)."""

    label: str
    estimate: float
    low: float
    high: float
    highlight: bool = False
    hollow: bool = False


def forest_figure(
    rows: Sequence[Interval],
    xlabel: str,
    reference: tuple[str, float] | None = None,
    zero_floor: bool = False,
) -> bytes:
    """A forest plot: one row per interval, the first on top, the estimate as a dot and the interval as a
    line; the highlighted row in colour with "best" beside it; ``reference`` (label, x) as a grey dotted
    vertical line (the base rate); with ``zero_floor`` and an interval reaching below 0, a black line at 0
    labelled as the metric's lowest possible population value."""
    height = 0.75 + 0.26 * max(len(rows), 1)
    figure, axis = plt.subplots(figsize=(6.4, height), layout="constrained")
    for position, row in enumerate(rows):
        y = len(rows) - 1 - position
        colour = "#c44e52" if row.highlight else "#4c72b0"
        if np.isfinite(row.low) and np.isfinite(row.high):
            axis.plot([row.low, row.high], [y, y], color=colour, linewidth=2.4 if row.highlight else 1.6)
        face = "white" if row.hollow else colour
        axis.plot(row.estimate, y, "o", color=colour, markerfacecolor=face, markersize=7, zorder=3)
    labels = [f"{row.label} (best)" if row.highlight else row.label for row in rows]
    axis.set_yticks(range(len(rows) - 1, -1, -1), labels, fontsize=8)
    for tick, row in zip(axis.get_yticklabels(), rows, strict=True):
        if row.highlight:
            tick.set_fontweight("bold")
    if reference is not None and np.isfinite(reference[1]):
        axis.axvline(reference[1], color="0.45", linestyle=":", linewidth=1.4, label=reference[0])
    if zero_floor and any(np.isfinite(r.low) and r.low < 0 for r in rows):
        axis.axvline(0.0, color="black", linewidth=0.8, label="0: the lowest possible population value")
    axis.set_ylim(-0.7, len(rows) - 0.3)
    axis.set_xlabel(xlabel, fontsize=9)
    axis.tick_params(axis="x", labelsize=8)
    axis.grid(axis="x", alpha=0.3)
    if axis.get_legend_handles_labels()[0]:  # beside the axis: "best" inside it sat on the best row's dot
        axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return _png(figure)


_NOT_RENDERED: ContextVar[bool] = ContextVar("capcal_figures_not_rendered", default=False)


@contextlib.contextmanager
def figures_not_rendered() -> Iterator[None]:
    """Within the block every figure function returns ``b""``: its figure is built and closed, never drawn
    to PNG. For callers that read a report's numbers and none of its figures (``paper_table``, so ``capcal
    table``): drawing and saving the PNGs was about three quarters of ``analyze_runs``' time on a two-task
    toy report (tests/README.md, "The suite's time"). The numbers do not depend on it."""
    token = _NOT_RENDERED.set(True)
    try:
        yield
    finally:
        _NOT_RENDERED.reset(token)


def _png(figure) -> bytes:
    if _NOT_RENDERED.get():
        plt.close(figure)
        return b""
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
    # one legend for the panels, above them (outside every axis: inside one it hid points)
    figure.legend(*axes[0].get_legend_handles_labels(), fontsize=7, loc="outside upper center", ncols=2)
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
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # beside the axis: hides no line
    return _png(figure)
