"""The report's summary: which confidence to trust for each (model, evaluation task), how sure that is, and
where the conclusion is weak.

**Primary metric.** Estimators are ranked by the finite-sample-corrected capability Brier score
(``corrected_capability_brier``, lower is better; ``capcal_metrics.corrected_capability_brier_score``):
``mean_i [(c_i - mu_hat_i)^2 - mu_hat_i (1 - mu_hat_i) / (n_i - 1)]``. It is a proper score, so it rewards
both calibration and discrimination; it is unbiased for the population ``mean_i (c_i - mu_i)^2`` against the
true expected accuracy mu whatever n is (the plain Brier is biased upward by the noise of mu_hat, by the same
amount for every estimator; binned ECE is biased by the binning and the noise of mu_hat, and its bootstrap
interval does not cover the population ECE, while the Brier's does); and it is a mean over questions, so the
percentile bootstrap and its paired differences behave as for a mean.

**Paired differences.** For the best estimator b and every other one o, the interval of
``Brier_o - Brier_b`` comes from :func:`capcal_metrics.bootstrap_differences`: both on the *same*
resamples of the questions both estimators have a confidence for, so what is common to the questions cancels.
An interval above 0 means b is better; one containing 0 means the two are not distinguishable at this N.

**Leakage.** The paper-form consistency ``consistency_k{k}`` draws its k responses from the n samples that
also define mu_hat, so it is scored partly against itself; it is never ranked. Its leakage-free form
``consistency_lf_k{k}`` (drawn from a pool disjoint from the samples of its target mu_hat_lf) is ranked, its
corrected Brier scored against mu_hat_lf: unbiased for the same population quantity, so it compares fairly.

**Warnings** (thresholds below): fewer than :data:`MIN_QUESTIONS` evaluation questions, a fitted estimator
fitted on fewer than :data:`MIN_TRAINING_QUESTIONS` questions, a confidence source that failed to parse on
more than :data:`MAX_PARSE_FAILURE_RATE` of its questions (or on all), fewer than :data:`MIN_SAMPLES`
samples per question (mu_hat coarse, consistency with small k only), a capability target that does not vary
(the same mu_hat everywhere, or fewer than 10% of the questions with 0 < mu_hat < 1), a leakage-free
consistency that cannot be ranked, an estimator ranked on fewer questions than the others, and an interval
that could not be computed.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

import capcal_metrics as cm
from analysis.report.render import ReportSection, format_interval
from analysis.report.sections import SectionInputs, higher_is_better, metric_header

__all__ = [
    "LEAKY",
    "MAX_PARSE_FAILURE_RATE",
    "Measured",
    "MIN_QUESTIONS",
    "MIN_SAMPLES",
    "MIN_TRAINING_QUESTIONS",
    "PRIMARY_METRIC",
    "Ranking",
    "conclusion",
    "measured",
    "rank_estimators",
    "summary_sections",
]

PRIMARY_METRIC = "corrected_capability_brier"
PRIMARY_NAME = "corrected capability Brier"
MIN_QUESTIONS = 100  # below: the intervals are wide, the ranking tentative
MIN_TRAINING_QUESTIONS = 50  # below: a fitted estimator (probe, isotonic) is fitted on too few questions
MIN_SAMPLES = 10  # below: mu_hat moves in steps of 1/n and consistency has only small k
MAX_PARSE_FAILURE_RATE = 0.2
LEAKY = re.compile(r"consistency_k\d+$")  # the paper form: scored against samples it was drawn from
# The other capability metrics shown beside the primary one in the summary, when computed.
SUMMARY_METRICS = ("capability_brier_skill", "capability_ece_debiased", "soft_auroc")


@dataclass
class Ranking:
    """One (model, evaluation task)'s ranking: the table (rank, estimator, target, primary metric with its
    interval, the best's paired advantage over each, questions), the plain sentence, the warnings and the
    estimators left out of the ranking (leaky)."""

    model: str
    task: str
    questions: int
    samples: str
    table: pd.DataFrame
    sentence: str
    warnings: list[str] = field(default_factory=list)
    unranked: list[str] = field(default_factory=list)
    long: pd.DataFrame | None = None  # the ranked rows: estimator, estimate, low, high, advantage, ...


@dataclass(frozen=True)
class _Candidate:
    name: str
    target: str  # what it is scored against, in words
    confidence: np.ndarray
    mu_hat: np.ndarray
    n: np.ndarray


def _candidates(inputs: SectionInputs) -> tuple[list[_Candidate], list[str]]:
    """The honest estimators (with their scoring target) and the leaky ones left out."""
    mu, n = inputs.mu, inputs.counts[0].astype(float)
    candidates, leaky = [], []
    for name in inputs.estimators:
        if LEAKY.match(name):
            leaky.append(name)
            continue
        target = inputs.computed.columns[name].target
        candidates.append(_Candidate(name, target, inputs.confidences[name], mu, n))
    table = inputs.leakage_free
    if table is not None:
        for name in (c for c in table.columns if c.startswith("consistency_lf_k")):
            candidates.append(
                _Candidate(
                    name,
                    "capability (vs mu_hat_lf)",
                    table[name].to_numpy(dtype=float),
                    table["mu_hat_lf"].to_numpy(dtype=float),
                    table["n_lf"].to_numpy(dtype=float),
                )
            )
    return candidates, leaky


def _metric_rows(inputs: SectionInputs) -> pd.DataFrame:
    frames = [inputs.metrics]
    if inputs.leakage_free_metrics is not None:
        frames.append(inputs.leakage_free_metrics)
    return pd.concat(frames, ignore_index=True)


def _advantage(best: _Candidate, other: _Candidate, metric: str, n_resamples: int, seed: int) -> tuple:
    """(advantage, low, high, questions): how much better ``best`` is than ``other`` on the primary metric
    (positive: better), paired bootstrap on the questions both have a confidence for."""
    shared = np.isfinite(best.confidence) & np.isfinite(other.confidence)
    if shared.sum() < 2:
        return np.nan, np.nan, np.nan, int(shared.sum())
    function = cm.corrected_capability_brier_score if metric == PRIMARY_METRIC else cm.brier_score

    def arrays(candidate: _Candidate) -> tuple:
        base = (candidate.confidence[shared], candidate.mu_hat[shared])
        return (*base, candidate.n[shared]) if metric == PRIMARY_METRIC else base

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        ci = cm.bootstrap_differences(
            {"best": (function, arrays(best)), "other": (function, arrays(other))},
            "best",
            n_resamples=n_resamples,
            seed=seed,
        )["other"]
    # other - best: positive when best has the lower (better) score
    return ci.estimate, ci.low, ci.high, int(shared.sum())


def conclusion(ranked: pd.DataFrame, metric_name: str) -> str:
    """The plain sentence on the best estimator and the next in ``ranked`` (rows in rank order with the
    paired ``advantage``, ``advantage_low``, ``advantage_high`` and ``paired_questions`` of each over the
    best): it beats it (interval above 0), they are not distinguishable (interval contains 0), or, on the
    questions both have, the next is better (interval below 0)."""
    if ranked.empty:
        return "No estimator could be ranked."
    best = ranked.iloc[0]
    if len(ranked) == 1:
        return f"{best.estimator} is the only estimator ranked: nothing to compare it with."
    second = ranked.iloc[1]
    interval = format_interval(second.advantage, second.advantage_low, second.advantage_high)
    at = f"N = {int(second.paired_questions)}"
    if np.isnan(second.advantage_low):
        return f"{best.estimator} ranks first; its difference to {second.estimator} has no interval at {at}."
    if second.advantage_high < 0:  # possible when the two have confidences on different questions
        return (
            f"{second.estimator} is better than {best.estimator} on {metric_name} on the {at} questions both "
            f"have, by {format_interval(-second.advantage, -second.advantage_high, -second.advantage_low)}; "
            f"{best.estimator} ranks first on its own questions only."
        )
    if second.advantage_low > 0:
        return (
            f"{best.estimator} beats {second.estimator} on {metric_name} by {interval} "
            f"(paired bootstrap, {at}): the best is distinguishable from the next."
        )
    return (
        f"{best.estimator} and {second.estimator} are not distinguishable on {metric_name} at {at}: "
        f"the paired difference {interval} includes 0."
    )


def _warnings(inputs: SectionInputs, ranked: pd.DataFrame) -> list[str]:
    computed, evaluation = inputs.computed, inputs.evaluation
    out = []
    questions = len(evaluation)
    if questions < MIN_QUESTIONS:
        out.append(
            f"N = {questions} evaluation questions, below {MIN_QUESTIONS}: the intervals are wide and the "
            "ranking is tentative."
        )
    mu = inputs.mu
    spread = float(np.mean((mu > 0) & (mu < 1))) if mu.size else 0.0
    if mu.size and np.all(mu == mu[0]):
        out.append(
            f"mu_hat is {mu[0]:g} on every question: no estimator can be told apart by discrimination (soft "
            "AUROC and the Brier skill are undefined); the ranking reflects calibration alone."
        )
    elif spread < 0.1:
        out.append(
            f"only {spread:.0%} of the questions have 0 < mu_hat < 1: the capability target barely varies, "
            "so capability and response calibration nearly coincide."
        )
    n = inputs.counts[0]
    if n.min() < MIN_SAMPLES:
        has_consistency = any(LEAKY.match(e) for e in inputs.estimators)
        out.append(
            f"k = {int(n.min())} samples per question, below {MIN_SAMPLES}: mu_hat moves in steps of "
            f"1/{int(n.min())}, "
            + (
                "consistency uses only k < n and its leakage-free target rests on the few samples left."
                if has_consistency
                else "too few for any consistency k."
            )
        )
    for name, count in computed.trained_questions.items():
        if count < MIN_TRAINING_QUESTIONS:
            out.append(
                f"{name} was fitted on {count} questions, below {MIN_TRAINING_QUESTIONS}: its parameters "
                "are noisy and its rank may not hold on another draw."
            )
    failures = computed.parse_failures
    if failures is not None:
        for row in failures.itertuples():
            rate = row.parse_failures / row.questions if row.questions else 1.0
            if row.parse_failures == row.questions:
                out.append(
                    f"{row.kind} confidence ({row.task}) never parsed ({row.parse_failures}/{row.questions} "
                    "failures): no estimator from it."
                )
            elif rate > MAX_PARSE_FAILURE_RATE:
                out.append(
                    f"{row.kind} confidence ({row.task}) failed to parse on {row.parse_failures}/"
                    f"{row.questions} questions ({rate:.0%}): its estimators rest on the rest, which may "
                    "not be a random subset."
                )
    for candidate in _candidates(inputs)[0]:
        if candidate.name not in set(ranked["estimator"]) and candidate.name.startswith("consistency_lf"):
            held_out = int(np.nanmin(candidate.n)) if candidate.n.size else 0
            out.append(
                f"{candidate.name} is not ranked: its target mu_hat_lf rests on {held_out} held-out "
                "sample(s) per question (the corrected Brier needs 2); sample more responses per question."
            )
    if not ranked.empty:
        most = int(ranked["questions"].max())
        for row in ranked.itertuples():
            if row.questions < most:
                out.append(f"{row.estimator} is ranked on {row.questions} of {most} questions.")
            if np.isnan(row.low):
                out.append(f"{row.estimator}: no interval for its {PRIMARY_NAME} (too few questions).")
    return out


def rank_estimators(inputs: SectionInputs, model: str, task: str) -> Ranking:
    """Rank the honest estimators of one section by :data:`PRIMARY_METRIC` (its estimate and interval are
    the section table's), with the best one's paired bootstrap advantage over each other one, the sentence
    whether the best is distinguishable from the next, and the warnings."""
    candidates, leaky = _candidates(inputs)
    rows = _metric_rows(inputs)
    metric = PRIMARY_METRIC if (rows["metric"] == PRIMARY_METRIC).any() else "capability_brier"
    metric_name = PRIMARY_NAME if metric == PRIMARY_METRIC else "capability Brier"
    primary = rows[rows["metric"] == metric].set_index("estimator")
    names = [
        c.name for c in candidates if c.name in primary.index and np.isfinite(primary.at[c.name, "estimate"])
    ]
    sign = -1.0 if higher_is_better(metric) else 1.0
    order = sorted(names, key=lambda name: sign * primary.at[name, "estimate"])
    by_name = {c.name: c for c in candidates}
    ranked_rows = []
    for rank, name in enumerate(order, start=1):
        row = primary.loc[name]
        advantage = (np.nan, np.nan, np.nan, int(row["questions"]))
        if rank > 1:
            advantage = _advantage(by_name[order[0]], by_name[name], metric, inputs.n_resamples, inputs.seed)
        ranked_rows.append(
            {
                "rank": rank,
                "estimator": name,
                "target": by_name[name].target,
                "estimate": float(row["estimate"]),
                "low": float(row["low"]),
                "high": float(row["high"]),
                "advantage": advantage[0],
                "advantage_low": advantage[1],
                "advantage_high": advantage[2],
                "paired_questions": advantage[3],
                "questions": int(row["questions"]),
            }
        )
    ranked = pd.DataFrame(
        ranked_rows,
        columns=[
            "rank", "estimator", "target", "estimate", "low", "high", "advantage", "advantage_low",
            "advantage_high", "paired_questions", "questions",
        ],
    )  # fmt: skip
    table = pd.DataFrame(
        {
            "rank": ranked["rank"],
            "estimator": ranked["estimator"],
            "target": ranked["target"],
            metric_header(metric): [
                format_interval(e, lo, hi)
                for e, lo, hi in zip(ranked.estimate, ranked.low, ranked.high, strict=True)
            ],
        }
    )
    for other in SUMMARY_METRICS:
        values = rows[rows["metric"] == other].set_index("estimator")
        if values.empty:
            continue
        table[metric_header(other)] = [
            format_interval(values.at[e, "estimate"], values.at[e, "low"], values.at[e, "high"])
            if e in values.index
            else ""
            for e in ranked["estimator"]
        ]
    table["best's advantage ↑ (paired)"] = [
        "" if r == 1 else format_interval(a, lo, hi)
        for r, a, lo, hi in zip(
            ranked["rank"], ranked.advantage, ranked.advantage_low, ranked.advantage_high, strict=True
        )
    ]
    table["questions"] = ranked["questions"]
    n = inputs.counts[0]
    return Ranking(
        model=model,
        task=task,
        questions=len(inputs.evaluation),
        samples=f"{n.min()}" if n.min() == n.max() else f"{n.min()}-{n.max()}",
        table=table,
        sentence=conclusion(ranked, metric_name),
        warnings=_warnings(inputs, ranked),
        unranked=leaky,
        long=ranked.assign(metric=metric),
    )


@dataclass(frozen=True)
class Measured:
    """One (model, evaluation task) of the report: N questions, k samples per question, and whether any
    confidence estimator could be computed for it."""

    model: str
    task: str
    questions: int
    samples: str
    estimators: bool


def measured(model: str, task: str, evaluation: pd.DataFrame, estimators: bool) -> Measured:
    """What the summary says was measured for one (model, evaluation task) table."""
    n = evaluation["n"].to_numpy(dtype=int)
    samples = "" if not n.size else (f"{n.min()}" if n.min() == n.max() else f"{n.min()}-{n.max()}")
    return Measured(model, task, len(evaluation), samples, estimators)


def summary_sections(
    rankings: Sequence[Ranking],
    notices: Sequence[str] = (),
    n_resamples: int = 1000,
    what: Sequence[Measured] = (),
) -> list[ReportSection]:
    """The report's first sections: what was measured (``what``: every (model, evaluation task), also
    those without an estimator) and the input warnings, then one subsection per ranked (model, evaluation
    task) with its ranking table, its sentence and its warnings."""
    measured = list(what) or [Measured(r.model, r.task, r.questions, r.samples, True) for r in rankings]
    models = sorted({m.model for m in measured})
    tasks = sorted({m.task for m in measured})
    facts: dict[str, object] = {
        "models": ", ".join(models) or "none",
        "evaluation tasks": ", ".join(tasks) or "none",
        "questions (N) and samples per question (k)": "; ".join(
            f"{m.model} · {m.task}: N = {m.questions}, k = {m.samples}"
            + ("" if m.estimators else " (no confidence estimator: not ranked)")
            for m in measured
        )
        or "no evaluation run",
        "primary metric": f"{PRIMARY_NAME} (lower is better): proper, unbiased for the Brier against the "
        "true expected accuracy, its intervals cover",
        "intervals": f"95% percentile bootstrap over questions ({n_resamples} resamples); differences paired",
    }
    head = ReportSection(title="Summary", facts=facts, warnings=list(notices))
    if not rankings:
        head.sentences.append("No evaluation task with a confidence estimator was found.")
    sections = [head]
    for ranking in rankings:
        notes = [
            f"Ranked by {PRIMARY_NAME} ↓ with its 95% interval, every estimator scored against mu_hat "
            '(target: what it was built to estimate); "best\'s advantage" is the paired bootstrap difference '
            "(this estimator minus the best; above 0: the best is better) on the questions both have."
        ]
        if ranking.unranked:
            notes.append(
                f"Not ranked (leaky): {', '.join(ranking.unranked)}, the paper-form consistency, whose draws "
                "overlap the samples that define mu_hat; its leakage-free form consistency_lf_k is ranked "
                "instead (when its held-out target has 2 samples or more)."
            )
        sections.append(
            ReportSection(
                title=f"Summary · {ranking.model} · {ranking.task}",
                sentences=[ranking.sentence],
                warnings=ranking.warnings,
                notes=notes,
                tables=[
                    (
                        f"Estimators ranked by {PRIMARY_NAME} "
                        f"(N = {ranking.questions}, k = {ranking.samples})",
                        ranking.table,
                    )
                ],
                level=3,
            )
        )
    return sections
