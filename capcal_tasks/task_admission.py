"""Which lm-eval generative tasks capcal can sample k times and score response by response: the static rule.

capcal wraps a stock lm-eval task (``capcal_tasks.sampled_task``) by keeping one of its filter pipelines,
dropping that pipeline's final ``take_first`` (so the k filtered answers reach scoring) and calling the task's
own ``process_results(doc, [answer_i])`` once per response. That is honest only when

1. the task is a YAML task (no ``class:`` of its own, whose methods the wrapper would not know);
2. its ``output_type`` is ``generate_until`` (k log-likelihoods of one continuation are one number);
3. it does not sample already (``repeats`` 1) and the chosen pipeline holds no ``majority_vote`` or
   ``take_first_k`` (a self-consistency task scores a vote, not a response);
4. the chosen pipeline ends in ``take_first`` (lm-eval's default when a task has no ``filter_list``); a
   pipeline ending in another filter (a custom function) may reduce the k responses in its own way;
5. it has a metric that is 0/1 per response with ``mean`` aggregation: ``exact_match`` and the others in
   ``ZERO_ONE_METRICS``, or the one the user names with ``--metadata correct_metric=NAME`` (the wrapper checks
   every value is 0 or 1 while scoring); a task whose metrics are all corpus-level (``bleu``, ``chrf``,
   ``ter``) is refused for that.

``admit(config, metadata)`` reads a task's YAML config as lm-eval's task index holds it (includes merged,
``!function`` entries not imported) and returns an ``Admission`` (the pipeline, its filters without the final
``take_first``, the metric) or raises ``RefusedTask`` with the reason in one line. Nothing is loaded, so the
refusals come before any model or dataset (``analysis.evaluation.harness.check_inputs``). The census of
lm-eval's tasks (``benchmarks/task_census.py``) applies the same function.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CORPUS_METRICS",
    "VOTING_FILTERS",
    "WHOLE_RESPONSE_FILTERS",
    "ZERO_ONE_METRICS",
    "Admission",
    "RefusedTask",
    "admit",
    "refusal_lines",
]

#: metrics that are 0/1 for one response (lm-eval's registry and its tasks' own ``process_results``).
ZERO_ONE_METRICS = (
    "exact_match",
    "acc",
    "em",
    "exact",
    "math_verify",
    "exact_match_flex",
    "is_correct",
    "correct",
    "accuracy",
    "pass@1",
)
#: metrics computed over a whole corpus: no per-response label exists.
CORPUS_METRICS = frozenset({"bleu", "chrf", "ter", "sacrebleu", "comet"})
#: filters that turn the k responses into one vote: the task scores a vote, not a response.
VOTING_FILTERS = frozenset({"majority_vote", "take_first_k"})
#: filters that change a response's text without extracting an answer from it: a pipeline of only these (or
#: none) hands the whole response to scoring, which leaves no answer classes to vote or count over.
WHOLE_RESPONSE_FILTERS = frozenset({"take_first", "lowercase", "uppercase", "remove_whitespace"})


class RefusedTask(ValueError):
    """A task capcal cannot sample k times and score response by response; the message is the reason."""


@dataclass(frozen=True)
class Admission:
    """How an admitted task is wrapped: the ``pipeline`` kept (its ``name`` in the task's ``filter_list``,
    ``none`` for lm-eval's default), its ``filters`` without the final ``take_first`` (lm-eval's
    ``filter_list`` entries), the ``metric`` read as each response's 0/1 label and whether the user named it
    (``metric_named``), and whether the responses have answer classes (``extracts``): the pipeline extracts
    an answer, or the metric itself compares the (whole, filtered) response with the gold (no
    ``process_results`` of the task's own); False where whole responses reach the task's own scorer, which
    extracts what it compares out of sight."""

    pipeline: str
    filters: tuple[dict, ...]
    metric: str
    metric_named: bool
    extracts: bool


def _metric_entries(config: Mapping[str, Any]) -> list[dict]:
    """The task's ``metric_list`` (lm-eval's default for ``generate_until``, ``exact_match``, when absent)."""
    entries = config.get("metric_list")
    if entries is None:
        return [{"metric": "exact_match", "aggregation": "mean"}]
    return [dict(entry) for entry in entries if isinstance(entry, Mapping)]


def _aggregation(entry: Mapping[str, Any]) -> str:
    """A metric entry's aggregation by name: lm-eval's registry default (``mean`` for the 0/1 metrics) when
    the entry names none, ``custom`` for a function."""
    aggregation = entry.get("aggregation")
    if aggregation is None:
        return "mean"
    return aggregation if isinstance(aggregation, str) and "/" not in aggregation else "custom"


def _choose_pipeline(task: str, config: Mapping[str, Any], wanted: Any) -> tuple[str, list[dict]]:
    """The pipeline to keep: the one the user named (``filter`` in the metadata: a name, or {task: name}),
    else the task's first; lm-eval's default (``none``: take_first) when the task has no ``filter_list``."""
    pipelines = [entry for entry in config.get("filter_list") or [] if isinstance(entry, Mapping)]
    if not pipelines:
        if wanted not in (None, "none") and not isinstance(wanted, Mapping):
            raise RefusedTask(f"has no filter pipeline named {wanted!r} (it has none: lm-eval's take_first)")
        return "none", [{"function": "take_first"}]
    names = [str(entry.get("name")) for entry in pipelines]
    name = wanted.get(task) if isinstance(wanted, Mapping) else wanted
    if name is None:
        return names[0], [dict(step) for step in pipelines[0].get("filter") or []]
    if name not in names:
        raise RefusedTask(f"has no filter pipeline named {name!r} (it has {', '.join(names)})")
    chosen = pipelines[names.index(name)]
    return name, [dict(step) for step in chosen.get("filter") or []]


def admit(task: str, config: Mapping[str, Any], metadata: Mapping[str, Any] | None = None) -> Admission:
    """The ``Admission`` of task ``task`` (its YAML ``config``, includes merged) under the static rule of the
    module docstring; ``RefusedTask`` with the reason otherwise. ``metadata`` may name ``filter`` (the
    pipeline to keep: a name or {task: name}) and ``correct_metric`` (the 0/1 metric: a name or
    {task: name})."""
    metadata = metadata or {}
    if "class" in config:
        raise RefusedTask(
            "is a Python task class (class:), whose own methods capcal cannot wrap; only YAML tasks are"
            " wrapped"
        )
    output_type = config.get("output_type")
    if output_type != "generate_until":
        raise RefusedTask(
            f"output_type is {output_type}, not generate_until: k samples of one scored continuation are "
            "the same number; only generative tasks are sampled"
        )
    repeats = config.get("repeats") or 1
    if repeats != 1:
        raise RefusedTask(
            f"already samples {repeats} responses per question (repeats: {repeats}) and scores them its own "
            "way; wrap its single-sample variant instead"
        )
    pipeline, steps = _choose_pipeline(task, config, metadata.get("filter"))
    functions = [str(step.get("function")) for step in steps]
    voting = sorted(set(functions) & VOTING_FILTERS)
    if voting:
        raise RefusedTask(
            f"its filter pipeline {pipeline} holds {', '.join(voting)}: it scores a vote over responses, not "
            "each response"
        )
    if not functions or functions[-1] != "take_first":
        last = functions[-1] if functions else "nothing"
        detail = steps[-1].get("filter_fn") if steps and functions[-1] == "custom" else None
        shown = f"{last} ({detail})" if detail else last
        raise RefusedTask(
            f"its filter pipeline {pipeline} ends in {shown}, not take_first: capcal cannot tell how it "
            "reduces the k responses; choose another with --metadata filter=NAME"
        )
    entries = _metric_entries(config)
    names = [str(entry.get("metric")) for entry in entries]
    means = [name for name, entry in zip(names, entries, strict=True) if _aggregation(entry) == "mean"]
    named = metadata.get("correct_metric")
    named = named.get(task) if isinstance(named, Mapping) else named
    if named is not None:
        if named not in names:
            raise RefusedTask(f"has no metric {named!r} (correct_metric); its metrics: {', '.join(names)}")
        if named not in means:
            raise RefusedTask(f"its metric {named} is not aggregated by mean; a 0/1 label per response is")
        metric = named
    else:
        zero_one = [name for name in means if name in ZERO_ONE_METRICS]
        if not zero_one:
            corpus = [name for name in names if name in CORPUS_METRICS]
            if corpus and len(corpus) == len(names):
                raise RefusedTask(
                    f"its metrics ({', '.join(names)}) are corpus-level: no 0/1 label exists per response"
                )
            suggestion = (
                f"; name one that is 0/1 per response with --metadata correct_metric={means[0]}"
                if means
                else ""
            )
            raise RefusedTask(
                f"has no per-response 0/1 metric with mean aggregation among {', '.join(names)}{suggestion}"
            )
        metric = zero_one[0]
    kept = tuple(steps[:-1])
    extracts = any(str(step.get("function")) not in WHOLE_RESPONSE_FILTERS for step in kept)
    extracts = extracts or config.get("process_results") is None
    return Admission(pipeline, kept, metric, named is not None, extracts)


def refusal_lines(refusals: Sequence[tuple[str, str]]) -> str:
    """One line per refused task, ``task NAME: reason``, joined by newlines."""
    return "\n".join(f"task {name}: {reason}" for name, reason in refusals)
