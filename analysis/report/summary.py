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

**Verdict.** One sentence per (model, evaluation task) says which confidence to use and how sure
(:func:`verdict`), from the ranking alone: the best, the estimators its paired interval cannot tell from it
and those it is ahead of, and where each stands against the base rate (the mean mu_hat announced for every
question) by its Brier skill's interval (above 0, containing 0, below 0). The summary opens with these
sentences and a forest plot of each ranking that compares several estimators (:func:`forest_intervals`;
the base rate drawn where the skill is 0, ``capcal_metrics.base_rate_variance``); rankings that compare
several estimators come first (:func:`order_rankings`).

**Leakage.** The paper-form consistency ``consistency_k{k}`` draws its k responses from the n samples that
also define mu_hat, so it is scored partly against itself; it is never ranked. Its leakage-free form
``consistency_lf_k{k}`` (drawn from a pool disjoint from the samples of its target mu_hat_lf) is ranked, its
corrected Brier scored against mu_hat_lf: unbiased for the same population quantity, so it compares fairly.

**Too little to conclude.** Below :data:`MIN_VERDICT_QUESTIONS` evaluation questions, or when mu_hat is the
same on every question (nothing to discriminate, no Brier skill), the section gives a warning instead of a
verdict and of a sentence on the best and the next: the ranking is shown for reference only. The threshold:
a 95% percentile bootstrap interval of a mean over N questions covers the population value far less often
than 95% at small N; for the corrected capability Brier of a confidence 0.2 (sd) off a U-shaped mu
(Beta(0.5, 0.5), k = 10; 2,000 draws per N, 1,000 resamples each, seed 0) it covered 61% at N = 3, 70% at
N = 5, 79% at N = 8, 81% at N = 10, 87% at N = 20 and 90% at N = 30. A best estimator whose Brier skill is
unknown (not computed or undefined) is recommended tentatively at most.

**Warnings** (thresholds below): fewer than :data:`MIN_QUESTIONS` evaluation questions, a fitted estimator
fitted on fewer than :data:`MIN_TRAINING_QUESTIONS` questions, a confidence source that failed to parse on
more than :data:`MAX_PARSE_FAILURE_RATE` of its questions (or on all), fewer than :data:`MIN_SAMPLES`
samples per question (mu_hat coarse, consistency with small k only), a capability target that does not vary
(the same mu_hat everywhere, or fewer than 10% of the questions with 0 < mu_hat < 1), a leakage-free
consistency that cannot be ranked, an estimator ranked on fewer questions than the others, and an interval
that could not be computed. An estimator lost for want of an input (the probe, when the activations folder a
run recorded is not found) is named in the warnings and after the verdict, so the verdict never silently
ranks without it.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

import capcal_metrics as cm
from analysis.estimators.adaptive import first_look, last_look
from analysis.evaluation.adaptive import RELIABLE_FIRST_LOOK
from analysis.rendering import Figure, ReportSection, format_interval
from analysis.report.calibration_table import is_adaptive
from analysis.report.figures import Interval, forest_figure
from analysis.report.metric_ranges import marked_interval, range_footnotes
from analysis.report.registry import LEAKY
from analysis.report.sections import SectionInputs, higher_is_better, metric_header

__all__ = [
    "LEAKY",
    "MAX_PARSE_FAILURE_RATE",
    "Measured",
    "MIN_QUESTIONS",
    "MIN_SAMPLES",
    "MIN_TRAINING_QUESTIONS",
    "MIN_VERDICT_QUESTIONS",
    "PRIMARY_METRIC",
    "Ranking",
    "DIFFERENCE",
    "compares_several",
    "conclusion",
    "forest_intervals",
    "measured",
    "no_verdict_reason",
    "order_rankings",
    "rank_estimators",
    "summary_sections",
    "verdict",
]

PRIMARY_METRIC = "corrected_capability_brier"
PRIMARY_NAME = "corrected capability Brier"
MIN_QUESTIONS = 100  # below: the intervals are wide, the ranking tentative
MIN_VERDICT_QUESTIONS = 10  # below: a warning instead of a verdict (see "Too little to conclude")
MIN_TRAINING_QUESTIONS = 50  # below: a fitted estimator (probe, isotonic) is fitted on too few questions
MIN_SAMPLES = 10  # below: mu_hat moves in steps of 1/n and consistency has only small k
MAX_PARSE_FAILURE_RATE = 0.2
# The other capability metrics shown beside the primary one in the summary, when computed.
SUMMARY_METRICS = ("capability_brier_skill", "capability_ece_debiased", "soft_auroc")
SKILL = "capability_brier_skill"
DIFFERENCE = "difference to the best (paired; above 0: the best is better)"
NOT_AVAILABLE_NOTE = (
    "n/a: undefined on these questions (the Brier skill when the spread of the target over the questions is "
    "no larger than its sampling noise; the AUROC when the target does not vary)"
)


@dataclass
class Ranking:
    """One (model, evaluation task)'s ranking: the table (rank, estimator, target, primary metric with its
    interval, the best's paired advantage over each, questions), the verdict (what to use and how sure), the
    sentence on the best and the next, the warnings, the estimators left out of the ranking (leaky), the
    table's footnotes and the base rate's score on the primary metric (the forest plot's reference)."""

    model: str
    task: str
    questions: int
    samples: str
    table: pd.DataFrame
    sentence: str
    warnings: list[str] = field(default_factory=list)
    unranked: list[str] = field(default_factory=list)
    long: pd.DataFrame | None = None  # the ranked rows: estimator, estimate, low, high, advantage, ...
    verdict: str = ""
    footnotes: list[str] = field(default_factory=list)
    base_rate: float = float("nan")


@dataclass(frozen=True)
class _Candidate:
    name: str
    target: str  # what it is scored against: mu_hat, or mu_hat_lf for the leakage-free consistency
    confidence: np.ndarray
    mu_hat: np.ndarray
    n: np.ndarray
    mu_square_hat: np.ndarray | None = None  # an adaptive run's unbiased mu^2 after stopping


def _candidates(inputs: SectionInputs) -> tuple[list[_Candidate], list[str]]:
    """The honest estimators (with their scoring target) and the leaky ones left out."""
    mu, n = inputs.mu, inputs.counts[0].astype(float)
    evaluation = inputs.evaluation
    mu2 = evaluation["mu_squared_hat"].to_numpy(dtype=float) if is_adaptive(evaluation) else None
    candidates, leaky = [], []
    for name in inputs.estimators:
        if LEAKY.match(name):
            leaky.append(name)
            continue
        candidates.append(_Candidate(name, "mu_hat", inputs.confidences[name], mu, n, mu2))
    table = inputs.leakage_free
    if table is not None:
        mu2_lf = table["mu_squared_hat"].to_numpy(dtype=float) if is_adaptive(table) else None
        for name in (c for c in table.columns if c.startswith("consistency_lf_k")):
            candidates.append(
                _Candidate(
                    name,
                    "mu_hat_lf",
                    table[name].to_numpy(dtype=float),
                    table["mu_hat_lf"].to_numpy(dtype=float),
                    table["n_lf"].to_numpy(dtype=float),
                    mu2_lf,
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

    def spec(candidate: _Candidate) -> tuple:
        """The primary metric's (function, arrays): the corrected Brier in its fixed-n form, or from the
        unbiased moments for an adaptive run (as ``calibration_table``)."""
        base = (candidate.confidence[shared], candidate.mu_hat[shared])
        if metric != PRIMARY_METRIC:
            return cm.brier_score, base
        if candidate.mu_square_hat is not None:
            return cm.capability_brier_from_moments, (*base, candidate.mu_square_hat[shared])
        return cm.corrected_capability_brier_score, (*base, candidate.n[shared])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        ci = cm.bootstrap_differences(
            {"best": spec(best), "other": spec(other)},
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


def _names(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _verb(names: Sequence[str]) -> str:
    return "is" if len(names) == 1 else "are"


def _skill_side(skill: tuple[float, float, float] | None) -> str:
    """Where a Brier skill (estimate, low, high) puts an estimator against the base rate: "worse" (its
    interval below 0), "better" (above 0), "tied" (the interval contains 0 or is missing) or "" (unknown)."""
    if skill is None or np.isnan(skill[0]):
        return ""
    if skill[2] < 0:
        return "worse"
    if skill[1] > 0:
        return "better"
    return "tied"


def verdict(ranked: pd.DataFrame, skills: dict[str, tuple[float, float, float]], metric_name: str) -> str:
    """The sentence that says which confidence to use and how sure, from the ranking alone: ``ranked`` (rows
    in rank order with each one's paired ``advantage_low``/``advantage_high`` against the best and
    ``paired_questions``) and ``skills`` (estimator -> Brier skill estimate, low, high, the skill over the
    base rate, the mean target announced for every question). The best is recommended when its skill
    interval lies above 0, tentatively when it contains 0 or is unknown, not at all when it lies below; then
    the estimators not distinguishable from it (paired interval containing 0), those it beats (above 0),
    and those worse than the base rate (skill interval below 0). E.g. "Use probe: best on corrected
    capability Brier, not distinguishable from isotonic_p_true at N = 40, ahead of p_true (paired 95%
    interval above 0); it beats the base rate, while p_true is worse". A section too small to conclude
    from gets no verdict at all (:func:`no_verdict_reason`, applied by :func:`rank_estimators`)."""
    if ranked.empty:
        return "No estimator could be ranked."
    best = str(ranked.iloc[0].estimator)
    side = _skill_side(skills.get(best))
    if side == "worse":
        text = f"Use none of them: {best} is best on {metric_name} but worse than the base rate"
    elif side in ("tied", ""):
        text = f"Use {best}, tentatively: best on {metric_name}"
    else:
        text = f"Use {best}: best on {metric_name}"
    others = ranked.iloc[1:]
    worse = [str(name) for name in others.estimator if _skill_side(skills.get(name)) == "worse"]
    if others.empty:
        text += ", the only estimator ranked (nothing to compare it with)"
    no_interval = others[others.advantage_low.isna()]
    tied = others[(others.advantage_low <= 0) & (others.advantage_high >= 0)]
    beaten = others[others.advantage_low > 0]
    reversed_ = others[others.advantage_high < 0]
    if not tied.empty:
        sizes = sorted({int(n) for n in tied.paired_questions})
        at = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
        text += f", not distinguishable from {_names(tied.estimator)} at N = {at}"
    if not beaten.empty:
        names = list(beaten.estimator)
        plural = "s" if len(names) > 1 else ""
        text += f", ahead of {_names(names)} (paired 95% interval{plural} above 0)"
    if not reversed_.empty:
        names = list(reversed_.estimator)
        text += f"; {_names(names)} {_verb(names)} better than it on the questions both have"
    if not no_interval.empty:
        text += f"; its difference to {_names(no_interval.estimator)} has no interval"
    if side == "better":
        text += "; it beats the base rate" + (
            f", while {_names(worse)} {_verb(worse)} worse" if worse else ""
        )
    elif side == "tied":
        text += "; but it is not distinguishable from the base rate (the mean mu_hat for every question)"
        text += f", and {_names(worse)} {_verb(worse)} worse than the base rate" if worse else ""
    elif side == "":
        text += "; whether it beats the base rate is unknown (its Brier skill is not available)"
        text += f", and {_names(worse)} {_verb(worse)} worse than the base rate" if worse else ""
    elif worse:
        text += f"; {_names(worse)} {_verb(worse)} worse than the base rate"
    return text + "."


def no_verdict_reason(questions: int, mu_hat: np.ndarray) -> str:
    """Why a section is too little to conclude anything from (see "Too little to conclude" above), or ""
    when it is not: fewer than :data:`MIN_VERDICT_QUESTIONS` questions, or the same mu_hat on every
    question."""
    if questions < MIN_VERDICT_QUESTIONS:
        return (
            f"N = {questions} evaluation questions, below {MIN_VERDICT_QUESTIONS}: too few to conclude "
            "anything (a 95% percentile bootstrap over so few questions covers far less than 95%)"
        )
    if mu_hat.size and np.all(mu_hat == mu_hat[0]):
        return (
            f"mu_hat is {mu_hat[0]:g} on every question: nothing to tell estimators apart by (no Brier "
            "skill, no AUROC)"
        )
    return ""


def _adaptive_warnings(look: int, k_max: int, has_consistency: bool) -> list[str]:
    """An adaptive run's few-samples warnings: mu_hat is not on a 1/n grid after stopping (a question stops
    early only when its samples agree), so the counts that matter are k_max (the most any question draws)
    and, for consistency, the first look l_1 (the samples drawn before any stopping decision); a first look
    below ``RELIABLE_FIRST_LOOK`` leaves the Brier skill unreliable (``analysis.evaluation.adaptive``)."""
    out = []
    if k_max < MIN_SAMPLES:
        out.append(
            f"adaptive run with k_max = {k_max} samples, below {MIN_SAMPLES}: a question whose samples "
            f"disagree is estimated from at most {k_max} samples."
        )
    if look < RELIABLE_FIRST_LOOK:
        out.append(
            f"adaptive run with a first look of {look} samples, below {RELIABLE_FIRST_LOOK}: the Brier skill "
            "after stopping is not reliable (in simulation its bias differs from fixed k's by up to 4.1 "
            "standard errors, docs/methods.md); rank by the corrected Brier or the debiased ECE."
        )
    if has_consistency and look < MIN_SAMPLES:
        out.append(
            f"consistency uses each question's first {look} samples (the first look, drawn before any "
            f"stopping decision), below {MIN_SAMPLES}: only k < {look} (its leakage-free form is scored "
            "against every sample outside its draw pool)."
        )
    return out


def _warnings(inputs: SectionInputs, ranked: pd.DataFrame) -> list[str]:
    computed, evaluation = inputs.computed, inputs.evaluation
    out = []
    questions = len(evaluation)
    if questions < MIN_VERDICT_QUESTIONS:
        out.append(
            f"No verdict: {no_verdict_reason(questions, inputs.mu)}; the ranking is for reference only."
        )
    elif questions < MIN_QUESTIONS:
        out.append(
            f"N = {questions} evaluation questions, below {MIN_QUESTIONS}: the intervals are wide and the "
            "ranking is tentative."
        )
    mu = inputs.mu
    spread = float(np.mean((mu > 0) & (mu < 1))) if mu.size else 0.0
    if mu.size and np.all(mu == mu[0]):
        out.append(
            f"mu_hat is {mu[0]:g} on every question: no estimator can be told apart by discrimination (soft "
            "AUROC and the Brier skill are undefined); the ranking reflects calibration alone: no verdict."
        )
    elif spread < 0.1:
        out.append(
            f"only {spread:.0%} of the questions have 0 < mu_hat < 1: the capability target barely varies, "
            "so capability and response calibration nearly coincide."
        )
    n = inputs.counts[0]
    has_consistency = any(LEAKY.match(e) for e in inputs.estimators)
    look = first_look(evaluation)
    if look is not None:
        out.extend(_adaptive_warnings(look, last_look(evaluation), has_consistency))
    elif n.min() < MIN_SAMPLES:
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
    out.extend(computed.not_computed)
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
            "scored against": ranked["target"],
            metric_header(metric): [
                marked_interval(metric, e, lo, hi)
                for e, lo, hi in zip(ranked.estimate, ranked.low, ranked.high, strict=True)
            ],
        }
    )
    shown = [ranked.assign(metric=metric)[["metric", "estimate", "low", "high"]]]
    skills: dict[str, tuple[float, float, float]] = {}
    for other in SUMMARY_METRICS:
        values = rows[rows["metric"] == other].set_index("estimator")
        if values.empty:
            continue
        cells = []
        for name in ranked["estimator"]:
            if name not in values.index:
                cells.append("not computed")
                continue
            estimate, low, high = (float(values.at[name, key]) for key in ("estimate", "low", "high"))
            cells.append(marked_interval(other, estimate, low, high))
            shown.append(pd.DataFrame([{"metric": other, "estimate": estimate, "low": low, "high": high}]))
            if other == SKILL:
                skills[name] = (estimate, low, high)
        table[metric_header(other)] = cells
    table[DIFFERENCE] = [
        "best" if r == 1 else format_interval(a, lo, hi)
        for r, a, lo, hi in zip(
            ranked["rank"], ranked.advantage, ranked.advantage_low, ranked.advantage_high, strict=True
        )
    ]
    table["questions"] = ranked["questions"]
    footnotes = range_footnotes(pd.concat(shown, ignore_index=True))
    cells = table.drop(columns=["rank", "questions"]).astype(str).to_numpy().ravel()
    if any(cell == "n/a" for cell in cells):
        footnotes.append(NOT_AVAILABLE_NOTE)
    if any(cell == "not computed" for cell in cells):
        footnotes.append("not computed: that metric is not computed for this estimator (see its section)")
    n = inputs.counts[0]
    too_little = no_verdict_reason(len(inputs.evaluation), inputs.mu)
    return Ranking(
        model=model,
        task=task,
        questions=len(inputs.evaluation),
        samples=f"{n.min()}" if n.min() == n.max() else f"{n.min()}-{n.max()}",
        table=table,
        sentence=(
            f"No conclusion: {too_little}."
            if too_little and not ranked.empty
            else conclusion(ranked, metric_name)
        ),
        warnings=_warnings(inputs, ranked),
        unranked=leaky,
        long=ranked.assign(metric=metric),
        verdict=(
            f"No verdict: {too_little}; the ranking is for reference only."
            if too_little and not ranked.empty
            else verdict(ranked, skills, metric_name)
        )
        + "".join(f" Left out: {line}." for line in inputs.computed.not_computed),
        footnotes=footnotes,
        base_rate=_base_rate(inputs.mu, n, metric),
    )


def _base_rate(mu_hat: np.ndarray, n: np.ndarray, metric: str) -> float:
    """The base rate's score on ``metric``: the Brier of the constant forecast at mean mu_hat
    (``capcal_metrics.base_rate_variance``, with the finite-k correction for the corrected Brier), where a
    Brier skill is 0; NaN when it is not positive (no skill is defined then)."""
    if mu_hat.size < 2:
        return float("nan")
    corrected = metric == PRIMARY_METRIC and n.min() >= 2
    value = cm.base_rate_variance(mu_hat, n if corrected else None)
    return float(value) if value > 0 else float("nan")


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
    if n.size and first_look(evaluation) is not None:
        samples += f" (adaptive, k_max = {last_look(evaluation)})"
    return Measured(model, task, len(evaluation), samples, estimators)


def forest_intervals(ranking: Ranking) -> list[Interval]:
    """The rows of a ranking's forest plot, in rank order: each ranked estimator's primary metric with its
    interval, the best highlighted, those scored against mu_hat_lf hollow (and named so)."""
    if ranking.long is None:
        return []
    return [
        Interval(
            f"{row.estimator} (vs mu_hat_lf)" if row.target == "mu_hat_lf" else str(row.estimator),
            row.estimate,
            row.low,
            row.high,
            highlight=row.rank == 1,
            hollow=row.target == "mu_hat_lf",
        )
        for row in ranking.long.itertuples(index=False)
    ]


def _forest(ranking: Ranking) -> Figure | None:
    """The ranking as a forest plot (:func:`forest_intervals`), the base rate as a reference line, with its
    reading guide (None without a ranked estimator)."""
    rows = forest_intervals(ranking)
    if not rows:
        return None
    metric = str(ranking.long["metric"].iloc[0])
    other_target = [row for row in rows if row.hollow]
    name = PRIMARY_NAME if metric == PRIMARY_METRIC else "capability Brier"
    reference = ("base rate: the mean mu_hat for every question (skill 0)", ranking.base_rate)
    png = forest_figure(rows, f"{name} (lower is better)", reference, zero_floor=metric == PRIMARY_METRIC)
    guide = (
        f"Dot: {name}; line: its 95% bootstrap interval; the best on top, in red; left is better. "
        "Grey dotted: "
        "the base rate (the mean mu_hat for every question), itself an estimate: the Brier skill's interval "
        "in the table says whether an estimator beats it. Compare estimators by the table's paired "
        "differences, not by overlapping intervals."
    )
    if other_target:
        guide += " Hollow dots: scored against mu_hat_lf."
    if any(np.isfinite(r.low) and r.low < 0 for r in rows) and metric == PRIMARY_METRIC:
        guide += " Black line: 0, the lowest value a Brier can take; an interval below it is noise (‡)."
    return Figure(
        f"{name[0].upper()}{name[1:]} of each estimator ({ranking.model} · {ranking.task})", png, guide
    )


def _target_note(ranking: Ranking) -> str:
    """What the ranked estimators are scored against, and why scores against different targets rank
    together."""
    ranked = ranking.long
    if ranked is None:
        return ""
    lf = sorted(
        str(e) for e, t in zip(ranked["estimator"], ranked["target"], strict=True) if t == "mu_hat_lf"
    )
    if not lf:
        return "Every ranked estimator is scored against mu_hat, the expected accuracy from all k samples."
    pools = "its draw pool" if len(lf) == 1 else "their draw pools"
    text = (
        f"{_names(lf)} {_verb(lf)} scored against mu_hat_lf, the expected accuracy from the samples outside "
        f"{pools}: an unbiased estimate of the same expected accuracy mu as mu_hat, from fewer samples, so "
        "its corrected Brier estimates the same quantity with a wider interval."
    )
    if len(lf) < len(ranked):
        text += (
            " The others are scored against mu_hat from all k samples; the corrected Brier removes each "
            "target's sampling noise, so all are ranked together."
        )
    return text


def compares_several(ranking: Ranking | None) -> bool:
    """Whether a ranking can tell which estimator to use: it ranks two estimators or more (one is compared
    with nothing)."""
    return ranking is not None and ranking.long is not None and len(ranking.long) > 1


def summary_sections(
    rankings: Sequence[Ranking],
    notices: Sequence[str] = (),
    n_resamples: int = 1000,
    what: Sequence[Measured] = (),
) -> list[ReportSection]:
    """The report's first sections: the verdict per (model, evaluation task) (what to use and how sure;
    those without an estimator say so), the forest plot of each ranking that compares several estimators,
    what was measured (``what``: every (model, evaluation task)) and the input warnings; then one subsection
    per ranked (model, evaluation task), those that compare several estimators first
    (:func:`order_rankings`): the sentence on the best and the next, its warnings, notes and table with
    footnotes."""
    rankings = order_rankings(rankings)
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
        "primary metric": f"{PRIMARY_NAME} (lower is better): a proper score, unbiased for the Brier "
        "against the true expected accuracy, whose bootstrap intervals cover it",
        "intervals": f"95% percentile bootstrap over questions ({n_resamples} resamples); differences paired",
    }
    verdicts = [f"{r.model} · {r.task}: {r.verdict}" for r in rankings]
    ranked_pairs = {(r.model, r.task) for r in rankings}
    verdicts += [
        f"{m.model} · {m.task}: no confidence estimator could be computed, so there is nothing to rank."
        for m in measured
        if (m.model, m.task) not in ranked_pairs
    ]
    # the forest plots of the rankings that compare several estimators, right under the verdicts
    forests = [_forest(r) for r in rankings if compares_several(r)]
    head = ReportSection(
        title="Summary",
        facts=facts,
        warnings=list(notices),
        sentences=verdicts,
        figures=[forest for forest in forests if forest is not None],
        figures_first=True,
    )
    if not rankings and not verdicts:
        head.sentences.append("No evaluation task with a confidence estimator was found.")
    sections = [head]
    for ranking in rankings:
        notes = [
            f'Ranked by {PRIMARY_NAME} ↓ with its 95% interval. The column "{DIFFERENCE}" is the paired '
            "bootstrap difference between this estimator's score and the best's, on the questions both "
            "have: above 0, the best is better; an interval that contains 0, the two are not "
            "distinguishable at this N.",
            _target_note(ranking),
        ]
        notes = [note for note in notes if note]
        if ranking.unranked:
            notes.append(
                f"Not ranked (leaky): {_names(ranking.unranked)}, the paper-form consistency, whose draws "
                "overlap the samples that define mu_hat; its leakage-free form consistency_lf_k is ranked "
                "instead (when its held-out target has 2 samples or more)."
            )
        caption = f"Estimators ranked by {PRIMARY_NAME} (N = {ranking.questions}, k = {ranking.samples})"
        sections.append(
            ReportSection(
                title=f"Summary · {ranking.model} · {ranking.task}",
                sentences=[ranking.sentence],
                warnings=ranking.warnings,
                notes=notes,
                tables=[(caption, ranking.table)],
                footnotes={caption: ranking.footnotes},
                level=3,
            )
        )
    return sections


def order_rankings(rankings: Sequence[Ranking]) -> list[Ranking]:
    """The rankings in the order the summary shows them: those that compare several estimators first, then
    those with one estimator (nothing compared); otherwise in the order given."""
    return sorted(rankings, key=lambda ranking: not compares_several(ranking))
