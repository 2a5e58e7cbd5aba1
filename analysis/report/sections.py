"""The sections of the report, computed from the per-question tables: one per (model, evaluation task) and
one per routing pair."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

import capcal_metrics as cm
from analysis.applications.budget import budget_allocation_curves
from analysis.applications.pass_at_k_prediction import dataset_curve, instance_mse
from analysis.applications.routing import pair_models, routing_curves
from analysis.applications.self_calibration_strategies import self_calibration_curves
from analysis.estimators.adaptive import first_look, first_look_table
from analysis.estimators.consistency import encode_answer_classes
from analysis.judge.agreement import NOT_SENT, UNPARSEABLE, RescoreAgreement
from analysis.rendering import Figure, ReportSection, format_interval
from analysis.report.calibration_table import (
    CAPABILITY_METRICS,
    HIGHER_IS_BETTER,
    INTERVAL_NOTES,
    RESPONSE_METRICS,
    calibration_table,
    first_response_correctness,
    intervals_note,
    sampling_of,
)
from analysis.report.figures import (
    Curve,
    curves_figure,
    line_description,
    reliability_figure,
    target_scatter_figure,
)
from analysis.report.metric_ranges import marked_interval, range_footnotes
from analysis.report.registry import BUDGET, CALIBRATION_TABLES, LEAKY, PASS_AT_K, ComputedEstimators
from analysis.runs.joins import join_questions

__all__ = [
    "CAPABILITY_PARTS",
    "SectionInputs",
    "SectionPart",
    "capability_facts",
    "capability_section",
    "display_name",
    "higher_is_better",
    "metric_header",
    "pass_at_k_curves",
    "section_inputs",
    "examples_table",
    "judge_agreement_section",
    "RANDOM_ROW_NOTE",
    "routing_guide",
    "routing_lines",
    "routing_section",
]

# Reference lines: each baseline its own line style, marker and grey level, drawn above the estimators; the
# captions name them by line_description (so caption and legend name the same lines).
BASELINE_STYLES = {
    "uniform": dict(style=":", marker="s", color="0.45"),
    "random": dict(style=":", marker="s", color="0.45"),
    "oracle": dict(style="--", marker="^", color="black"),
    "oracle_cheap": dict(style="--", marker="^", color="black"),
    "oracle_gain": dict(style="-.", marker="v", color="0.25"),
}
# The legend label of each baseline (method name -> label) and what the caption says it is.
BASELINE_LABELS = {
    "uniform": "uniform (the same budget for every question)",
    "random": "random routing",
    "oracle": "oracle (allocates by mu_hat itself)",
    "oracle_cheap": "oracle_cheap (routes by the cheap model's mu_hat)",
    "oracle_gain": "oracle_gain (routes by the gain mu_strong - mu_cheap)",
}
RANDOM_ROW = "random (expected)"
RANDOM_ROW_NOTE = (
    f"{RANDOM_ROW}: the expected value of a confidence drawn uniformly from [0, 1], an expectation with no "
    "interval; shown only for the metrics where it is exact (its other cells are blank)"
)


def higher_is_better(metric: str) -> bool:
    """Whether a larger value of ``metric`` (a :mod:`analysis.report.calibration_table` metric) is better."""
    return HIGHER_IS_BETTER[metric]


def metric_header(metric: str) -> str:
    """A metric's column header with its direction: ``capability_ece ↓``, ``soft_auroc ↑``."""
    return f"{metric} {'↑' if higher_is_better(metric) else '↓'}"


def display_name(model: str) -> str:
    """A model's display name: the last component of a checkpoint path."""
    return Path(model).name or model


def _metric_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """Long metric rows (estimator, metric, estimate, low, high, questions) as one row per estimator: the
    question count, then each metric as ``estimate [low, high]`` in the order the metrics come."""
    metrics = metrics.assign(
        value=[
            marked_interval(m, e, lo, hi)
            for m, e, lo, hi in zip(metrics.metric, metrics.estimate, metrics.low, metrics.high, strict=True)
        ]
    )
    wide = metrics.pivot(index="estimator", columns="metric", values="value")
    order = [m for m in metrics["metric"].drop_duplicates() if m in wide.columns]
    questions = metrics.groupby("estimator")["questions"].max()
    wide = wide[order].fillna("")
    wide.columns = [metric_header(m) + (" †" if INTERVAL_NOTES.get(m) else "") for m in order]
    wide.insert(0, "questions", questions.reindex(wide.index))
    estimators = list(metrics["estimator"].drop_duplicates())
    return wide.reindex(estimators).reset_index()


@dataclass
class SectionPart:
    """What one part of a capability section adds: tables (caption, frame) and figures, in order, and the
    footnotes under them (by caption)."""

    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    footnotes: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class SectionInputs:
    """What the parts of one (model, evaluation task) section read: the computed estimators, those registered
    for the calibration tables (``estimators``), and the bootstrap settings."""

    computed: ComputedEstimators
    estimators: list[str]
    n_resamples: int
    seed: int

    @property
    def evaluation(self) -> pd.DataFrame:
        return self.computed.evaluation

    @cached_property
    def mu(self) -> np.ndarray:
        """The capability target mu_hat per question."""
        return self.evaluation["expected_accuracy"].to_numpy(dtype=float)

    @cached_property
    def z(self) -> np.ndarray:
        """The response target: the first response's correctness per question."""
        return first_response_correctness(self.evaluation)

    @cached_property
    def counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Per question: the number of samples n and of correct samples c."""
        n = self.evaluation["n"].to_numpy(dtype=int)
        c = np.array([int(sum(vector)) for vector in self.evaluation["correctness"]])
        return n, c

    @cached_property
    def first_look_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """``counts`` of the samples drawn before any stopping decision: an adaptive run's first l_1 samples
        of every question (``analysis.estimators.adaptive.first_look_table``), where pass@k is exact for k
        <= l_1; ``counts`` for a fixed-k run."""
        table = first_look_table(self.evaluation)
        n = table["n"].to_numpy(dtype=int)
        c = np.array([int(sum(vector)) for vector in table["correctness"]])
        return n, c

    @cached_property
    def confidences(self) -> dict[str, np.ndarray]:
        """Each calibration-table estimator's confidence per question (NaN where it has none)."""
        return {name: self.evaluation[name].to_numpy(dtype=float) for name in self.estimators}

    @cached_property
    def metrics(self) -> pd.DataFrame:
        """``calibration_table`` of every calibration-table estimator: the section's and summary's numbers."""
        return calibration_table(
            self.evaluation, self.estimators, n_resamples=self.n_resamples, seed=self.seed
        )

    @cached_property
    def leakage_free(self) -> pd.DataFrame | None:
        """The leakage-free consistency columns ``consistency_lf_k{k}`` with their own target (mu_hat_lf of
        the samples outside the draw pool, as ``expected_accuracy``, and n_lf as ``n``); None without. An
        adaptive run's target (``mu_squared_hat_lf`` present) keeps the run's ``sampling`` and ``looks``, so
        its metrics take the moment forms, unbiased after stopping."""
        table = self.computed.extra.get("leakage_free")
        if table is None:
            return None
        sampling: dict = (
            {
                "mu_squared_hat": table["mu_squared_hat_lf"],
                "sampling": self.evaluation["sampling"].to_numpy(),
                "looks": self.evaluation["looks"].to_numpy(),
            }
            if "mu_squared_hat_lf" in table.columns
            else {"sampling": sampling_of(first_look_table(self.evaluation))}
        )
        return table.assign(
            expected_accuracy=table["mu_hat_lf"],
            n=table["n_lf"],
            correctness=self.evaluation["correctness"],
            **sampling,
        )

    @cached_property
    def leakage_free_metrics(self) -> pd.DataFrame | None:
        """Capability ECE (binned and debiased), Brier, corrected Brier, Brier skill (over the base rate of
        mu_hat_lf) and soft AUROC of the leakage-free consistency, each scored against mu_hat_lf."""
        table = self.leakage_free
        if table is None:
            return None
        columns = [c for c in table.columns if c.startswith("consistency_lf_k")]
        metrics = calibration_table(table, columns, n_resamples=self.n_resamples, seed=self.seed)
        keep = [metric for metric in CAPABILITY_METRICS if metric != "spearman"]
        chosen = metrics["metric"].isin(keep) & metrics["estimator"].isin(columns)  # (random: main table)
        return metrics[chosen].reset_index(drop=True)

    @cached_property
    def complete(self) -> dict[str, np.ndarray]:
        """The confidences defined on every question of the estimators registered for pass@k prediction."""
        registered = self.computed.in_section(PASS_AT_K)
        return {
            name: values
            for name, values in self.confidences.items()
            if np.isfinite(values).all() and name in registered
        }


def sampling_facts(evaluation: pd.DataFrame) -> dict[str, str]:
    """How the questions were sampled (``sampling_of``) and, for an adaptive run, the samples drawn against
    the fixed-k run of k_max (the last look) and the share saved: ``sum_i n_i`` and ``N k_max``, the
    ``samples_drawn`` and ``fixed_k_samples`` of the results file's ``capcal_adaptive`` for these
    questions."""
    facts = {"sampling": sampling_of(evaluation)}
    if first_look(evaluation) is not None:
        drawn = int(evaluation["n"].sum())
        fixed = int(sum(int(looks[-1]) for looks in evaluation["looks"]))
        facts["samples drawn"] = (
            f"{drawn} of {fixed} (fixed k), {fixed - drawn} saved ({1 - drawn / fixed:.0%})"
        )
    return facts


def capability_facts(computed: ComputedEstimators, facts: dict[str, object], estimators: list[str]) -> dict:
    """The section's key facts: ``facts`` (model, task, relations), then the question count, samples per
    question, mean mu_hat, the share of questions with 0 < mu_hat < 1 and the estimators with their target."""
    evaluation = computed.evaluation
    mu = evaluation["expected_accuracy"].to_numpy(dtype=float)
    n = evaluation["n"].to_numpy(dtype=int)
    return {
        **facts,
        **sampling_facts(evaluation),
        "questions": len(evaluation),
        "samples per question": f"{n.min()}" if n.min() == n.max() else f"{n.min()}-{n.max()}",
        "mean expected accuracy": f"{mu.mean():.3f}",
        "questions with 0 < mu_hat < 1": f"{np.mean((mu > 0) & (mu < 1)):.1%}",
        "estimators": ", ".join(f"{e} ({computed.columns[e].target})" for e in estimators) or "none",
    }


def fitted_estimators_part(computed: ComputedEstimators) -> SectionPart:
    """What each fitted estimator (isotonic recalibration, probe) was trained on, when there is one."""
    if not computed.trained_on:
        return SectionPart()
    trained = pd.DataFrame(
        {"estimator": list(computed.trained_on), "trained on": list(computed.trained_on.values())}
    )
    return SectionPart(tables=[("Fitted estimators: what each was trained on", trained)])


def metric_tables_part(inputs: SectionInputs) -> SectionPart:
    """Capability metrics (target mu_hat) and response metrics (target z) of every calibration-table
    estimator, with bootstrap intervals over questions."""
    metrics = inputs.metrics
    targets = {
        "Capability calibration (target: mu_hat)": CAPABILITY_METRICS,
        "Response calibration (target: the first response's correctness z)": RESPONSE_METRICS,
    }
    tables, footnotes = [], {}
    for target, names in targets.items():
        caption = f"{target}; {intervals_note(names, inputs.n_resamples)}"
        caption += "".join(f"; † {m}: {INTERVAL_NOTES[m]}" for m in names if INTERVAL_NOTES.get(m))
        chosen = metrics[metrics["metric"].isin(names)]
        tables.append((caption, _metric_table(chosen)))
        footnotes[caption] = [RANDOM_ROW_NOTE, *range_footnotes(chosen)]
    return SectionPart(tables=tables, footnotes=footnotes)


def leakage_free_part(inputs: SectionInputs) -> SectionPart:
    """Capability ECE, Brier, corrected Brier and soft AUROC of the leakage-free consistency
    (``consistency_lf_k{k}``), each scored against the target mu_hat_lf of the samples outside its draw
    pool."""
    metrics = inputs.leakage_free_metrics
    if metrics is None:
        return SectionPart()
    caption = "Leakage-free consistency (drawn from a pool disjoint from the samples defining its target)"
    return SectionPart(
        tables=[(caption, _metric_table(metrics))], footnotes={caption: range_footnotes(metrics)}
    )


def _ece_titles(metrics: pd.DataFrame, metric: str) -> dict[str, str]:
    """Estimator -> ``ECE 0.123 [0.100, 0.150]`` (its ``metric`` row) for a reliability panel's title."""
    rows = metrics[metrics["metric"] == metric]
    mark = " †" if INTERVAL_NOTES.get(metric) else ""
    return {
        row.estimator: f"ECE {format_interval(row.estimate, row.low, row.high)}{mark}"
        for row in rows.itertuples(index=False)
    }


def reliability_part(inputs: SectionInputs) -> SectionPart:
    """Reliability diagrams against mu_hat and against z (each panel titled with its ECE and interval), and
    the scatter of confidence against both targets."""
    confidences, mu, z = inputs.confidences, inputs.mu, inputs.z
    return SectionPart(
        figures=[
            Figure(
                "Capability reliability: mean mu_hat per confidence bin",
                reliability_figure(confidences, mu, "mu_hat", _ece_titles(inputs.metrics, "capability_ece")),
                "Bars on the dashed diagonal are calibrated; bars below it are over-confident, above it "
                "under-confident; the number over a bar is its question count. † the binned ECE's interval "
                "is a resampling spread, not a confidence interval (biased upward; see the debiased ECE).",
            ),
            Figure(
                "Response reliability: accuracy of the first response per confidence bin",
                reliability_figure(confidences, z, "z", _ece_titles(inputs.metrics, "response_ece")),
                "As above, against the 0/1 correctness of each question's first response.",
            ),
            Figure(
                "Confidence against the capability target (dots) and the response target (crosses)",
                target_scatter_figure(confidences, mu, z),
                "Dots close to the diagonal mean the confidence tracks mu_hat; the crosses at 0 and 1 show "
                "how far a single response's correctness scatters around it.",
            ),
        ]
    )


def _mse_table(complete: dict[str, np.ndarray], n: np.ndarray, c: np.ndarray, inputs: SectionInputs):
    """Instance-level MSE of the predicted pass@k against the unbiased pass@k, with paired bootstrap
    intervals over questions: ``MSE_k = mean_i (1 - (1 - p_i)^k - pass@k_i)^2``, a Brier score of the
    prediction against the unbiased pass@k (so ``capcal_metrics.bootstrap_cis`` evaluates it)."""
    first = next(iter(complete.values()))
    ks = [int(k) for k in instance_mse(first, n, c)["k"]]
    rows = []
    for name, values in {**complete, "oracle (p = mu_hat)": c / n}.items():
        specs = {k: (cm.brier_score, (cm.predicted_pass_at_k(values, k), cm.pass_at_k(n, c, k))) for k in ks}
        intervals = cm.bootstrap_cis(specs, n_resamples=inputs.n_resamples, seed=inputs.seed)
        row = {"estimator": name}
        for k, ci in intervals.items():
            row[f"MSE pass@{k} ↓"] = format_interval(ci.estimate, ci.low, ci.high, digits=4)
        rows.append(row)
    return pd.DataFrame(rows)


def pass_at_k_curves(complete: dict[str, np.ndarray], n: np.ndarray, c: np.ndarray) -> list[Curve]:
    """The dataset-level pass@k curve predicted from each estimator with its 95% band clipped to [0, 1]
    (a pass@k cannot leave it), and the actual unbiased pass@k as a black dashed reference line."""
    curves = []
    for name, values in complete.items():
        curve = dataset_curve(values, n, c)
        low, high = np.clip(curve["band_low"], 0, 1), np.clip(curve["band_high"], 0, 1)
        curves.append(Curve(name, curve["k"], curve["predicted"], low, high))
    actual = dataset_curve(c / n, n, c)
    curves.append(
        Curve("actual (unbiased pass@k)", actual["k"], actual["observed"], style="--", color="black")
    )
    return curves


def pass_at_k_part(inputs: SectionInputs) -> SectionPart:
    """pass@k predicted from each complete pass@k estimator: the instance-level MSE against the unbiased
    pass@k (with intervals), and the dataset-level curve (95% band, clipped to [0, 1]) against the actual
    one."""
    complete = inputs.complete
    if not complete:
        return SectionPart()
    n, c = inputs.first_look_counts
    curves = pass_at_k_curves(complete, n, c)
    actual = curves[-1]
    intervals = f"{inputs.n_resamples} bootstrap resamples over questions, 95% intervals"
    look = first_look(inputs.evaluation)
    if look is not None:
        intervals += (
            f"; adaptive run: from each question's first {look} samples, pass@k for k > {look} not available "
            f"(no unbiased estimate after stopping: k exceeds the first look l_1 = {look})"
        )
    return SectionPart(
        tables=[
            (
                f"pass@k prediction: instance-level MSE against the unbiased pass@k; {intervals}",
                _mse_table(complete, n, c, inputs),
            )
        ],
        figures=[
            Figure(
                "Dataset-level pass@k predicted from each estimator (95% band) vs actual",
                curves_figure(curves, "pass@k", "k", "pass@k", log_x=True, y_limits=(0, 1)),
                f"The closer an estimator's line runs to the {line_description(actual)} ({actual.label}), "
                "the better it predicts how often k attempts succeed; bands are 95%, clipped to [0, 1].",
            )
        ],
    )


def budget_part(inputs: SectionInputs) -> SectionPart:
    """Inference-budget allocation by the complete pass@k estimators also registered for the budget section,
    with the baselines, at average budgets 1, 2, 4, ... up to the smallest n (only with a complete one)."""
    if not inputs.complete:
        return SectionPart()
    n, c = inputs.first_look_counts
    registered = inputs.computed.in_section(BUDGET)
    budget = budget_allocation_curves(
        {name: v for name, v in inputs.complete.items() if name in registered},
        n,
        c,
        budgets=[b for b in (1, 2, 4, 8, 16, 32) if b <= n.min()],
    )
    curves = [
        Curve(BASELINE_LABELS.get(m, m), g["budget"], g["accuracy"], **BASELINE_STYLES.get(m, {}))
        for m, g in budget.groupby("method", sort=False)
    ]
    figure = curves_figure(
        curves, "budget allocation", "samples per question (average)", "accuracy", log_x=True
    )
    caption = "Inference-budget allocation: exact accuracy (mean unbiased pass@b_i) at each average budget"
    uniform, oracle = (_reference(curves, BASELINE_LABELS[m]) for m in ("uniform", "oracle"))
    guide = (
        f"An estimator is useful when its line rises above the {line_description(uniform)} (uniform "
        f"allocation); the {line_description(oracle)} (the oracle, allocating by mu_hat itself) is the "
        "ceiling."
    )
    return SectionPart(figures=[Figure(caption, figure, guide)])


def _reference(curves: list[Curve], label: str) -> Curve:
    """The reference line labelled ``label`` among ``curves``."""
    (curve,) = [c for c in curves if c.label == label]
    return curve


def self_calibration_part(inputs: SectionInputs) -> SectionPart:
    """Self-Calibration's test-time strategies on the per-response self-checks: accuracy against the average
    number of samples used (only when every question has one self-check per response)."""
    evaluation = inputs.evaluation
    if "selfcheck_p_yes_normalized" not in evaluation.columns:
        return SectionPart()
    lists = evaluation["selfcheck_p_yes_normalized"]
    n, _ = inputs.counts
    if not all(isinstance(v, list) and len(v) == k for v, k in zip(lists, n, strict=True)):
        return SectionPart()
    answers = encode_answer_classes(list(evaluation["extracted_answers"]))
    tts = self_calibration_curves(
        answers, [list(v) for v in evaluation["correctness"]], [list(v) for v in lists]
    )
    curves = [
        Curve(s, g["avg_samples"], g["accuracy"])
        for s, g in tts.sort_values("avg_samples").groupby("strategy", sort=False)
    ]
    caption = (
        "Self-Calibration test-time strategies on the per-response self-checks: "
        "accuracy vs average samples used"
    )
    figure = curves_figure(curves, "test-time scaling", "samples used (average)", "accuracy")
    guide = "Higher and further left is better: more accuracy for fewer samples."
    return SectionPart(figures=[Figure(caption, figure, guide)])


# The parts of a capability section, in the order their tables and figures appear.
CAPABILITY_PARTS: tuple[Callable[[SectionInputs], SectionPart], ...] = (
    metric_tables_part,
    leakage_free_part,
    reliability_part,
    pass_at_k_part,
    budget_part,
    self_calibration_part,
)


def section_inputs(computed: ComputedEstimators, n_resamples: int, seed: int) -> SectionInputs | None:
    """The inputs of a section's parts (None when no estimator is registered for the calibration tables)."""
    estimators = computed.in_section(CALIBRATION_TABLES)
    return SectionInputs(computed, estimators, n_resamples, seed) if estimators else None


def capability_section(
    title: str, computed: ComputedEstimators, facts: dict[str, object], inputs: SectionInputs | None
) -> ReportSection:
    """The section of one (model, evaluation task): facts, what each fitted estimator was trained on, then
    each of :data:`CAPABILITY_PARTS` for the estimators registered for its part of the report (``inputs``,
    from :func:`section_inputs`): metric tables with bootstrap intervals, the leakage-free consistency,
    reliability diagrams and the target scatter, pass@k prediction, budget allocation and (with
    per-response self-checks) Self-Calibration's test-time strategies."""
    estimators = inputs.estimators if inputs is not None else []
    section = ReportSection(
        title=title, facts=capability_facts(computed, facts, estimators), notes=list(computed.notes)
    )
    parts = [fitted_estimators_part(computed)]
    if inputs is not None:
        parts += [part(inputs) for part in CAPABILITY_PARTS]
    else:
        section.notes.append("no confidence estimator is available for this run")
    for part in parts:
        section.tables += part.tables
        section.figures += part.figures
        section.footnotes.update(part.footnotes)
    return section


def _routing_pair(evaluations: dict, eval_task: str, models: list[str]) -> tuple[str, str]:
    """(routed-from, routed-to) model ids: the routed-from model is the one whose confidences were collected
    (most routing estimators; then the less accurate); the other is the next in that order."""
    means = {m: evaluations[(m, eval_task)][0]["expected_accuracy"].mean() for m in models}
    ranked = sorted(models, key=lambda m: (-len(evaluations[(m, eval_task)][1]), means[m]))
    return ranked[0], ranked[1]


def _routing_notes(join_summary: str) -> list[str]:
    """How routing is scored and the join of the two models' questions."""
    return [
        (
            "Route the questions with the lowest confidence of the cheap model to the strong one; "
            "accuracy is the exact expected accuracy (mean mu_hat of whichever model answers)."
        ),
        f"join: {join_summary}",
    ]


def routing_section(evaluations: dict, eval_task: str) -> ReportSection | None:
    """Routing from the model whose confidences were collected to a second model on the same questions;
    ``evaluations`` maps (model id, task) to (evaluation table, routing estimators); the questions only one
    model answered are counted in the section (the join's summary). When the second model is not more
    accurate on the shared questions, the section says so and routes nothing. None with fewer than two
    models."""
    models = [m for (m, t) in evaluations if t == eval_task]
    if len(models) < 2:
        return None
    cheap_id, strong_id = _routing_pair(evaluations, eval_task, models)
    cheap_table, estimators = evaluations[(cheap_id, eval_task)][:2]
    strong_table = evaluations[(strong_id, eval_task)][0]
    cheap, strong = (display_name(str(table["model"].iloc[0])) for table in (cheap_table, strong_table))
    join = join_questions(cheap, strong, cheap_table["question_id"], strong_table["question_id"])
    paired = pair_models(cheap_table, strong_table)
    facts = {
        "questions": len(paired),
        f"accuracy of {cheap}": f"{paired['mu_cheap'].mean():.3f}",
        f"accuracy of {strong}": f"{paired['mu_strong'].mean():.3f}",
    }
    if paired["mu_strong"].mean() <= paired["mu_cheap"].mean():
        return ReportSection(
            title=f"Routing · {eval_task}: no stronger model",
            facts=facts,
            notes=[
                f"Not routed: {strong} is not more accurate than {cheap} on these questions "
                f"({paired['mu_strong'].mean():.3f} <= {paired['mu_cheap'].mean():.3f}), so routing "
                f"questions from {cheap} to it could only lose accuracy.",
                f"join: {join.summary()}",
            ],
        )
    by_id = cheap_table.set_index("question_id")
    confidences = {
        name: by_id.loc[paired["question_id"], name].to_numpy(dtype=float)
        for name in estimators
        if by_id[name].notna().all()
    }
    curves = routing_curves(confidences, paired["mu_cheap"], paired["mu_strong"])
    lines = routing_lines(curves)
    return ReportSection(
        title=f"Routing · {eval_task}: {cheap} -> {strong}",
        facts=facts,
        notes=_routing_notes(join.summary()),
        figures=[
            Figure(
                "Routing: accuracy against the fraction of questions sent to the strong model",
                curves_figure(lines, "routing", "fraction routed", "accuracy"),
                routing_guide(lines, paired["mu_cheap"].to_numpy(dtype=float), cheap),
            )
        ],
    )


def routing_lines(curves: pd.DataFrame) -> list[Curve]:
    """The lines of the routing figure (``routing_curves``' rows): one per estimator, the paper-form
    consistency labelled ``(leaky)``, and the baselines in their :data:`BASELINE_STYLES` with their
    :data:`BASELINE_LABELS`."""
    lines = []
    for method, group in curves.groupby("method", sort=False):
        label = BASELINE_LABELS.get(method, f"{method} (leaky)" if LEAKY.match(method) else method)
        lines.append(Curve(label, group["fraction"], group["accuracy"], **BASELINE_STYLES.get(method, {})))
    return lines


def routing_guide(lines: list[Curve], mu_cheap: np.ndarray, cheap: str) -> str:
    """The routing figure's reading guide: each reference line named by its drawn style
    (``line_description``) and what it routes by; why oracle_cheap can run close to random (most questions
    tied at one mu_hat); and why a leaky consistency looks better than it is."""
    random, by_mu, by_gain = (
        _reference(lines, BASELINE_LABELS[m]) for m in ("random", "oracle_cheap", "oracle_gain")
    )
    text = (
        f"An estimator helps when its line lies above the {line_description(random)} (random routing). Two "
        f"oracles: the {line_description(by_mu)} is oracle_cheap, routing by {cheap}'s own mu_hat (the best "
        f"any confidence of {cheap} can do); the {line_description(by_gain)} is oracle_gain, routing by the "
        "gain mu_strong - mu_cheap (the best any router can do, knowing both models)."
    )
    values, counts = np.unique(mu_cheap, return_counts=True)
    if mu_cheap.size and counts.max() >= 0.3 * mu_cheap.size:
        tied = values[counts.argmax()]
        text += (
            f" {counts.max()} of the {mu_cheap.size} questions have mu_hat = {tied:g} for {cheap}: routing "
            "by mu_hat picks among them at random, so oracle_cheap runs close to random routing over that "
            "range."
        )
    leaky = [line.label for line in lines if line.label.endswith("(leaky)")]
    if leaky:
        text += (
            f" {', '.join(leaky)}: the paper-form consistency draws from the samples that define mu_hat, "
            "which scores the routing, so its line is optimistic."
        )
    return text


def examples_table(evaluation: pd.DataFrame, estimators: list[str], count: int) -> pd.DataFrame:
    """The first ``count`` questions: id, question and first response (300 characters each), mu_hat and the
    confidences of the first four ``estimators``."""
    rows = evaluation.head(count)
    frame = pd.DataFrame(
        {
            "question_id": rows["question_id"],
            "question": [str(q)[:300] for q in rows["question"]],
            "first response": [str(r)[:300] for r in rows["first_response"]],
            "mu_hat": [_three_decimals(v) for v in rows["expected_accuracy"]],
        }
    )
    for name in estimators[:4]:
        frame[name] = [_three_decimals(v) for v in rows[name].to_numpy(dtype=float)]
    return frame


def _three_decimals(value: float) -> str:
    """One number format for a column of values in [0, 1]: ``0.167``; ``n/a`` for NaN."""
    return "n/a" if not np.isfinite(value) else f"{value:.3f}"


def judge_agreement_section(agreement: RescoreAgreement, model: str) -> ReportSection:
    """Judge vs rule agreement for one task of a rescored run: confusion counts of the source run's
    (rule-based) labels x the rescored labels over the responses kept, Cohen's kappa, the judge's grades per
    rule label, and the verdicts that could not be read (their questions are left out, never guessed)."""
    c = agreement.confusion
    new = "judge" if agreement.is_judge else f"rescored ({agreement.checker})"
    confusion = pd.DataFrame(
        {
            "rule label (source run)": ["correct", "incorrect", "total"],
            f"{new}: correct": [int(c[1, 1]), int(c[0, 1]), int(c[:, 1].sum())],
            f"{new}: incorrect": [int(c[1, 0]), int(c[0, 0]), int(c[:, 0].sum())],
            "total": [int(c[1].sum()), int(c[0].sum()), int(c.sum())],
        }
    )
    unparseable = agreement.unparseable_verdicts
    left_out = agreement.questions_left_out
    observed = float(np.trace(c)) / c.sum() if c.sum() else float("nan")
    facts = {
        "model": model,
        "task": agreement.task,
        "checker": f"{agreement.checker} ({agreement.checker_version})",
        "judge model": agreement.judge_model or "none (rule-based)",
        "source run": agreement.source or "not recorded",
        "questions kept": agreement.questions,
        "responses kept": agreement.responses,
        "observed agreement": "n/a" if np.isnan(observed) else f"{observed:.3f}",
        "Cohen's kappa": agreement.kappa_text(),
        "unparseable verdicts": "not recorded" if unparseable is None else unparseable,
        "questions left out (unparseable verdict)": "not recorded" if left_out is None else left_out,
    }
    notes = [
        "Rows: the source run's labels (its task checker); columns: the rescored labels. A verdict that "
        "could not be read is never guessed: its question is left out of the rescored run and counted above."
    ]
    if agreement.left_out_ids:
        notes.append("questions left out (first ids): " + ", ".join(agreement.left_out_ids))
    tables = [(f"Confusion counts over responses (rule x {new})", confusion)]
    if agreement.grades:
        order = ["A", "B", "C", "Yes", "No", NOT_SENT, UNPARSEABLE]
        seen = [g for g in order if any(grade == g for _, grade in agreement.grades)]
        grades = pd.DataFrame(
            {
                "rule label (source run)": ["correct", "incorrect"],
                **{g: [agreement.grades[(1, g)], agreement.grades[(0, g)]] for g in seen},
            }
        )
        tables.append(("Judge grades per rule label (only A, or Yes, counts as correct)", grades))
    title = "Judge vs rule agreement" if agreement.is_judge else "Rescored vs source labels"
    return ReportSection(
        title=f"{title} · {display_name(model)} · {agreement.task}", facts=facts, tables=tables, notes=notes
    )
