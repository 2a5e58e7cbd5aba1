r"""Before/after Self-Calibration training, on held-out questions.

Each side is a sampling run on the held-out (evaluation) questions and the self-check run on its responses
(``analysis.self_calibration.data.read_checked_run``); c_ij is response j's self-check confidence
(``p_yes``, Huang et al.'s unnormalised P("Yes"), or ``p_yes_normalized``), z_ij its 0/1 correctness,
mu_hat_i the question's expected accuracy. Compared on the questions both sides have (the rest counted):

- response calibration of c against z (all responses pooled): ECE (10 equal-width bins), Brier, AUROC;
- capability calibration of the question's mean self-check confidence ``mean_j c_ij`` against mu_hat_i:
  ECE, Brier, soft-label AUROC ("On Calibration of Large Language Models: From Response To Capability");
- mean expected accuracy, which training must not lower by more than ``tolerance`` (absolute);
- the test-time strategies of Huang et al. on each side's own responses and confidences
  (``analysis.applications.self_calibration_strategies``): early-stopping best-of-N, confidence-weighted
  self-consistency and adaptive self-consistency with confidence, accuracy against average samples used.

Intervals are 95 % percentile bootstrap intervals over questions (a question's responses stay together);
before, after and after - before are computed on the same resamples (paired), so a difference's interval
accounts for the questions being the same. Outputs: ``comparison.json``, ``curves.csv`` and a report
section (``report.html`` / ``report.md`` with the curves figure).
"""

from __future__ import annotations

import io
import json
import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.applications.self_calibration_strategies import DEFAULT_TAUS, self_calibration_curves
from analysis.estimators.consistency import AnswerClasses, encode_answer_classes
from analysis.rendering import Figure, ReportSection, format_interval, write_report
from analysis.self_calibration.data import (
    CheckedRun,
    SelfCalibrationDataError,
    read_checked_sides,
)
from capcal_metrics import (
    UndefinedMetricWarning,
    auroc,
    bootstrap_ci,
    brier_score,
    expected_calibration_error,
    soft_label_auroc,
)

__all__ = [
    "Comparison",
    "DEFAULT_TOLERANCE",
    "compare_checked_runs",
    "comparison_section",
    "compare_runs",
    "read_comparison",
    "write_comparison",
]

DEFAULT_TOLERANCE = 0.02
CURVE_STRATEGIES = {
    "early_stopping": "early-stopping best-of-N",
    "weighted_self_consistency": "confidence-weighted self-consistency",
    "adaptive_weighted_self_consistency": "adaptive self-consistency with confidence",
    "self_consistency": "self-consistency (baseline)",
}


@dataclass(frozen=True)
class Side:
    """One side's aligned arrays: confidences and correctness (N, M), answer classes, mu_hat (N,)."""

    confidence: np.ndarray
    correctness: np.ndarray
    classes: AnswerClasses
    expected_accuracy: np.ndarray


@dataclass
class Comparison:
    """The figures of :func:`compare_checked_runs`: ``metrics`` (one row per metric: before, after,
    difference, each with its interval), ``curves`` (both sides' strategy curves with intervals),
    ``counts`` and ``settings``; ``files`` once written."""

    metrics: pd.DataFrame
    curves: pd.DataFrame
    counts: dict[str, Any]
    settings: dict[str, Any]
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def accuracy_within_tolerance(self) -> bool:
        row = self.metrics.set_index("metric").loc["mean expected accuracy"]
        return bool(row["difference"] >= -self.settings["tolerance"])


def _side(run: CheckedRun, ids: Sequence[str], column: str, m: int) -> Side:
    table = run.table.set_index("question_id").loc[list(ids)]
    confidence = np.array([list(values)[:m] for values in table[column]], dtype=float)
    correctness = np.array([list(values)[:m] for values in table["correctness"]], dtype=float)
    classes = encode_answer_classes([list(values)[:m] for values in table["extracted_answers"]])
    return Side(confidence, correctness, classes, table["expected_accuracy"].to_numpy(dtype=float))


def _usable(run: CheckedRun, column: str) -> tuple[set[str], int]:
    """Question ids with a complete self-check, and how many lack one (no record or a missing entry)."""
    ok, missing = set(), 0
    for qid, values in zip(run.table["question_id"], run.table[column], strict=True):
        if values is None or any(v is None or not math.isfinite(v) for v in values):
            missing += 1
        else:
            ok.add(qid)
    return ok, missing


def _response_metrics(c: np.ndarray, z: np.ndarray) -> np.ndarray:
    c, z = c.ravel(), z.ravel()
    return np.array([expected_calibration_error(c, z), brier_score(c, z), auroc(c, z)])


def _capability_metrics(c: np.ndarray, mu: np.ndarray) -> np.ndarray:
    mean_c = c.mean(axis=1)
    return np.array(
        [expected_calibration_error(mean_c, mu), brier_score(mean_c, mu), soft_label_auroc(mean_c, mu)]
    )


METRIC_NAMES = (
    "response ECE",
    "response Brier",
    "response AUROC",
    "capability ECE",
    "capability Brier",
    "capability soft AUROC",
    "mean self-check confidence",
    "mean expected accuracy",
)


def _all_metrics(c: np.ndarray, z: np.ndarray, mu: np.ndarray) -> np.ndarray:
    return np.concatenate([_response_metrics(c, z), _capability_metrics(c, mu), [c.mean(), mu.mean()]])


def _paired(
    function: Callable[..., np.ndarray], before: Sequence[np.ndarray], after: Sequence[np.ndarray]
) -> Callable[..., np.ndarray]:
    """A metric of the stacked (before..., after...) arrays: [before values, after values, differences]."""
    k = len(before)

    def metric(*arrays: np.ndarray) -> np.ndarray:
        b, a = function(*arrays[:k]), function(*arrays[k:])
        return np.concatenate([b, a, a - b])

    return metric


def _intervals(
    function: Callable[..., np.ndarray],
    before: Sequence[np.ndarray],
    after: Sequence[np.ndarray],
    n_resamples: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimates, lows, highs), each [before, after, difference] stacked, paired over questions."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        result = bootstrap_ci(
            _paired(function, before, after), *before, *after, n_resamples=n_resamples, seed=seed
        )
    return np.asarray(result.estimate), np.asarray(result.low), np.asarray(result.high)


def _curves(side: Side, taus: Sequence[float]) -> pd.DataFrame:
    return self_calibration_curves(side.classes, side.correctness, side.confidence, taus=taus)


def _curve_values(ids: np.ndarray, unparseable: np.ndarray, z: np.ndarray, c: np.ndarray, taus) -> np.ndarray:
    classes = AnswerClasses(
        ids.astype(np.int32), np.full(ids.shape[0], ids.shape[1]), unparseable.astype(bool)
    )
    frame = self_calibration_curves(classes, z, c, taus=taus)
    return np.concatenate([frame["accuracy"].to_numpy(), frame["avg_samples"].to_numpy()])


def compare_checked_runs(
    before: CheckedRun,
    after: CheckedRun,
    *,
    confidence: str = "p_yes",
    tolerance: float = DEFAULT_TOLERANCE,
    n_resamples: int = 1000,
    seed: int = 0,
    taus: Sequence[float] = DEFAULT_TAUS,
    training_question_ids: Iterable[str] = (),
    training: dict[str, Any] | None = None,
) -> Comparison:
    """Compare two checked runs on their common, fully self-checked questions (module docstring).

    ``training_question_ids``: the questions the model was trained on; a compared question among them
    raises ``SelfCalibrationDataError`` (the comparison must be on held-out questions). ``training``: what
    made the "after" model (its settings, the data's and the models' identities), kept in ``settings`` and
    listed in the report. Each side's model identity is its runs' ``model_id`` (``analysis.runs``).
    """
    column = "selfcheck_p_yes_normalized" if confidence == "p_yes_normalized" else "selfcheck_p_yes"
    if confidence not in ("p_yes", "p_yes_normalized"):
        raise SelfCalibrationDataError("confidence must be p_yes or p_yes_normalized")
    usable_before, missing_before = _usable(before, column)
    usable_after, missing_after = _usable(after, column)
    common = sorted(usable_before & usable_after)
    if not common:
        raise SelfCalibrationDataError(
            f"no question is fully self-checked in both runs ({before.sampling.path}, {after.sampling.path})"
        )
    trained = set(training_question_ids) & set(common)
    if trained:
        raise SelfCalibrationDataError(
            f"{len(trained)} compared question(s) were training questions, "
            f"e.g. {', '.join(sorted(trained)[:3])}"
        )
    n_before = before.table.set_index("question_id").loc[common, "n"]
    n_after = after.table.set_index("question_id").loc[common, "n"]
    m = int(min(n_before.min(), n_after.min()))
    b, a = _side(before, common, column, m), _side(after, common, column, m)
    estimates, lows, highs = _intervals(
        _all_metrics,
        (b.confidence, b.correctness, b.expected_accuracy),
        (a.confidence, a.correctness, a.expected_accuracy),
        n_resamples,
        seed,
    )
    k = len(METRIC_NAMES)
    metrics = pd.DataFrame(
        {
            "metric": METRIC_NAMES,
            "before": estimates[:k],
            "before_low": lows[:k],
            "before_high": highs[:k],
            "after": estimates[k : 2 * k],
            "after_low": lows[k : 2 * k],
            "after_high": highs[k : 2 * k],
            "difference": estimates[2 * k :],
            "difference_low": lows[2 * k :],
            "difference_high": highs[2 * k :],
        }
    )
    curves = _curve_table(b, a, taus, n_resamples, seed)
    counts = {
        "questions_compared": len(common),
        "responses_per_question": m,
        "questions_before": int(len(before.table)),
        "questions_after": int(len(after.table)),
        "questions_missing_selfcheck_before": missing_before,
        "questions_missing_selfcheck_after": missing_after,
        "questions_in_one_run_only": len(usable_before ^ usable_after),
    }
    settings = {
        "confidence": confidence,
        "tolerance": tolerance,
        "n_resamples": n_resamples,
        "seed": seed,
        "before": _side_settings(before),
        "after": _side_settings(after),
        "training": training,
    }
    return Comparison(metrics, curves, counts, settings)


def _side_settings(run: CheckedRun) -> dict[str, Any]:
    """Where a side's runs are, its model's label and its identity (the sampling run's ``model_id``)."""
    ids = sorted({str(v) for v in run.table["model_id"]}) if "model_id" in run.table else []
    return {
        "sampling": str(run.sampling.path),
        "selfcheck": str(run.selfcheck.path),
        "model": run.sampling.model,
        "model_identity": ids[0] if len(ids) == 1 else ids,
    }


def _curve_table(b: Side, a: Side, taus: Sequence[float], n_resamples: int, seed: int) -> pd.DataFrame:
    frame = _curves(b, taus)
    rows = len(frame)

    def values(ids, unparseable, z, c):  # noqa: ANN001, ANN202
        return _curve_values(ids, unparseable, z, c, taus)

    estimates, lows, highs = _intervals(
        values,
        (b.classes.ids, b.classes.unparseable, b.correctness, b.confidence),
        (a.classes.ids, a.classes.unparseable, a.correctness, a.confidence),
        n_resamples,
        seed,
    )
    out = []
    for side, offset in (("before", 0), ("after", 2 * rows)):
        part = frame[["strategy", "max_samples", "tau"]].copy()
        part.insert(0, "side", side)
        part["accuracy"] = estimates[offset : offset + rows]
        part["accuracy_low"] = lows[offset : offset + rows]
        part["accuracy_high"] = highs[offset : offset + rows]
        part["avg_samples"] = estimates[offset + rows : offset + 2 * rows]
        out.append(part)
    return pd.concat(out, ignore_index=True)


def _metric_table(comparison: Comparison) -> pd.DataFrame:
    rows = []
    for row in comparison.metrics.itertuples(index=False):
        rows.append(
            {
                "metric": row.metric,
                "before": format_interval(row.before, row.before_low, row.before_high),
                "after": format_interval(row.after, row.after_low, row.after_high),
                "after - before": format_interval(row.difference, row.difference_low, row.difference_high),
            }
        )
    return pd.DataFrame(rows)


def _operating_points(curves: pd.DataFrame) -> pd.DataFrame:
    """A few points of each curve, before and after side by side: N = 1, M/2, M for the votes; tau = 0.5,
    0.7, 0.9 for early stopping and adaptive self-consistency."""
    m = int(curves["max_samples"].max())
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for strategy, label in CURVE_STRATEGIES.items():
        part = curves[curves["strategy"] == strategy]
        if part["tau"].isna().all():
            picks = part[part["max_samples"].isin(sorted({1, max(1, m // 2), m}))]
            points = [f"N = {int(n)}" for n in picks["max_samples"]]
        else:
            picks = part[part["tau"].round(6).isin([0.5, 0.7, 0.9])]
            points = [f"tau = {t:.1f}" for t in picks["tau"]]
        for point, r in zip(points, picks.itertuples(index=False), strict=True):
            row = rows.setdefault((label, point), {"strategy": label, "point": point})
            row[f"{r.side} accuracy"] = format_interval(r.accuracy, r.accuracy_low, r.accuracy_high)
            row[f"{r.side} samples"] = f"{r.avg_samples:.2f}"
    columns = ["strategy", "point", "before accuracy", "before samples", "after accuracy", "after samples"]
    return pd.DataFrame(list(rows.values()), columns=columns)


def _curves_figure(curves: pd.DataFrame) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [s for s in CURVE_STRATEGIES if s != "self_consistency"]
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.4), squeeze=False)
    for axis, strategy in zip(axes[0], names, strict=True):
        for side, colour in (("before", "tab:gray"), ("after", "tab:blue")):
            part = curves[(curves["strategy"] == strategy) & (curves["side"] == side)].sort_values(
                "avg_samples"
            )
            axis.plot(part["avg_samples"], part["accuracy"], marker=".", color=colour, label=side)
            axis.fill_between(
                part["avg_samples"], part["accuracy_low"], part["accuracy_high"], color=colour, alpha=0.15
            )
            base = curves[(curves["strategy"] == "self_consistency") & (curves["side"] == side)]
            axis.plot(
                base["avg_samples"],
                base["accuracy"],
                linestyle=":",
                color=colour,
                linewidth=1,
                label=f"{side}: self-consistency",
            )
        axis.set_title(CURVE_STRATEGIES[strategy], fontsize=9)
        axis.set_xlabel("average samples used")
        axis.set_ylabel("accuracy")
        axis.legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def comparison_section(
    comparison: Comparison, title: str = "Self-Calibration training: before vs after"
) -> ReportSection:
    """The side-by-side report section: counts, the metric table (before, after, difference with 95 %
    intervals), operating points of the test-time curves and the curves figure (dotted: plain
    self-consistency)."""
    accuracy = comparison.metrics.set_index("metric").loc["mean expected accuracy"]
    verdict = "within" if comparison.accuracy_within_tolerance else "NOT within"
    return ReportSection(
        title,
        facts={
            **comparison.counts,
            "confidence": comparison.settings["confidence"],
            "before model": comparison.settings["before"]["model"],
            "before model identity": comparison.settings["before"].get("model_identity"),
            "after model": comparison.settings["after"]["model"],
            "after model identity": comparison.settings["after"].get("model_identity"),
            "accuracy change": f"{accuracy['difference']:+.3f} ({verdict} the tolerance "
            f"{comparison.settings['tolerance']:.3f})",
        },
        tables=[
            (
                "Calibration of the self-check confidence and accuracy (95 % paired bootstrap intervals)",
                _metric_table(comparison),
            ),
            (
                "Test-time strategies (accuracy with 95 % interval, average samples used)",
                _operating_points(comparison.curves),
            ),
            *_training_tables(comparison.settings.get("training")),
        ],  # fmt: skip
        figures=[
            Figure(
                "Accuracy against average samples used (dotted: self-consistency)",
                _curves_figure(comparison.curves),
            )
        ],
        notes=[
            "Response calibration: each response's self-check P(Yes) against its 0/1 correctness; capability "
            "calibration: the mean P(Yes) over a question's responses against its expected accuracy.",
        ],
    )


def _training_tables(training: dict[str, Any] | None) -> list[tuple[str, pd.DataFrame]]:
    """The training settings and identities of the "after" model, one row each (none when unknown)."""
    if not training:
        return [("Training settings", pd.DataFrame({"setting": ["training"], "value": ["not recorded"]}))]
    rows = [(k, v) for k, v in training.items() if k != "config"]
    rows += [(k, v) for k, v in (training.get("config") or {}).items()]
    values = [" ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v) for _, v in rows]
    return [("Training of the after model", pd.DataFrame({"setting": [k for k, _ in rows], "value": values}))]


def read_comparison(folder: str | Path) -> Comparison:
    """A comparison back from the ``comparison.json`` and ``curves.csv`` that ``write_comparison`` wrote."""
    folder = Path(folder)
    data = json.loads((folder / "comparison.json").read_text(encoding="utf-8"))
    files = {"json": folder / "comparison.json", "curves": folder / "curves.csv",
             "html": folder / "report.html", "markdown": folder / "report.md"}  # fmt: skip
    return Comparison(
        pd.DataFrame(data["metrics"]), pd.read_csv(files["curves"]), data["counts"], data["settings"], files
    )


def write_comparison(comparison: Comparison, output_dir: str | Path) -> dict[str, Path]:
    """Write ``comparison.json``, ``curves.csv`` and ``report.html`` / ``report.md`` (+ figure)."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    data = {
        "counts": comparison.counts,
        "settings": comparison.settings,
        "accuracy_within_tolerance": comparison.accuracy_within_tolerance,
        "metrics": json.loads(comparison.metrics.to_json(orient="records")),
    }
    files = {"json": output_dir / "comparison.json", "curves": output_dir / "curves.csv"}
    files["json"].write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    comparison.curves.to_csv(files["curves"], index=False)
    report = write_report([comparison_section(comparison)], output_dir, title="Self-Calibration training")
    files.update({"html": report.html, "markdown": report.markdown})
    comparison.files = files
    return files


def compare_runs(
    before_sampling: str | Path,
    before_selfcheck: str | Path,
    after_sampling: str | Path,
    after_selfcheck: str | Path,
    output_dir: str | Path,
    *,
    training_data: str | Path | None = None,
    **options: Any,
) -> Comparison:
    """Read both sides (``read_checked_sides``), compare (``compare_checked_runs``; ``options`` go there) and
    write the outputs to ``output_dir``. ``training_data``: a ``train.jsonl`` (or its folder) whose
    questions must not be compared."""
    before, after = (before_sampling, before_selfcheck), (after_sampling, after_selfcheck)
    sides = read_checked_sides(before, after, training_data)
    comparison = compare_checked_runs(
        sides.before, sides.after, training_question_ids=sides.training_question_ids, **options
    )
    write_comparison(comparison, output_dir)
    return comparison
