"""Adaptive (group-sequential) sampling of capcal's sampling tasks: ``capcal eval --adaptive``.

Each question is sampled at fixed looks ``l_1 < ... < l_m = k_max`` (default 8, 16, 32, 64 and k_max, those
below k_max) and stops at the first look where the stopping rule fires on (n, s), the samples drawn and the
successes among them (``capcal_metrics.sequential``: unanimity by default, or an anytime-valid interval
narrower than W, ``width:W``). The estimates that stay unbiased after such a stop are in the records
(``capcal_tasks.adaptive_records``; docs/methods.md, "Adaptive sampling: estimates after stopping").

Design: each pass is one lm-eval evaluation (``analysis.evaluation.evaluate``) with ``repeats`` = a look's
sample count, restricted (lm-eval's ``samples``) to the questions still sampling, on one model object loaded
once. A pass skips the looks where no question still sampling can stop (``next_look``): under unanimity a
question whose first l_1 samples disagree disagrees at every later look, so it draws up to k_max in the
second pass (two lm-eval passes in all, whatever the looks). Why this keeps the required properties:

- lm-eval stays the evaluator: prompts, filters and ``process_results`` are the task's own, so each look's
  record of a question is exactly the fixed-k record of its first n samples;
- capcal's wrappers number a question's clones in request order (repeat 0 .. n-1) and seed each sample from
  (run seed, task, question id, request index, repeat) (``capcal_models.sampling_plan``), not from its
  position in the run, so sample i of a question is the same at every look, in the fixed-k run and whatever
  other questions run beside it: an adaptive run's samples are the first n of the fixed-k run's;
- the sample cache's key leaves k out (``capcal_models.hf``), so a look reads the earlier looks' samples from
  the cache and decodes only the new ones; a killed adaptive run, run again, reads every sample it committed
  and ends with the uninterrupted run's records. With the cache off (``sample_cache=False``) the earlier
  samples are decoded again at each look (same values, more time).

The final record of a question is the one of the look where it stopped, with the adaptive fields; the
results file holds lm-eval's aggregates recomputed over those records and ``capcal_adaptive`` (the plan and
the samples drawn against the fixed-k count).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from analysis.checks.input_checks import repeats_notices
from analysis.evaluation.harness import (
    EvaluationInputError,
    _checked_device,
    _choose_batch_size,
    check_inputs,
    evaluate,
    save_run,
)
from capcal_metrics.sequential import SequentialPlan
from capcal_tasks.adaptive_records import adaptive_fields, parse_rule, sequential_plan
from capcal_tasks.sampling import extraction_rate, is_sampling_config, response_accuracy

__all__ = [
    "ADAPTIVE_MODELS",
    "DEFAULT_LOOKS",
    "RELIABLE_FIRST_LOOK",
    "adaptive_looks",
    "evaluate_adaptive",
    "next_look",
    "parse_looks",
    "small_first_look_warning",
]

# Under unanimity a share u of questions unanimous at the first look l_1 saves exactly u (1 - l_1 / k_max) of
# the fixed-k samples (the others draw k_max): with l_1 = 8 and half the questions unanimous, 25% at
# k_max = 16, 37.5% at 32, 43.75% at 64, 46.9% at 128 (docs/tasks-and-data.md, "Adaptive sampling").
DEFAULT_LOOKS = (8, 16, 32, 64)
# The smallest first look at which the Brier skill after stopping agrees with fixed k's in simulation
# (docs/methods.md, "Adaptive sampling: the capability metrics after stopping"): below it the warning below.
RELIABLE_FIRST_LOOK = 8
# capcal's engines: sample i of a question is numbered and seeded by its repeat index (and cached by it), so
# each look's first samples are the earlier looks' samples. Stock lm-eval models draw new ones at every look,
# which would make the stop depend on samples the record does not hold.
ADAPTIVE_MODELS = ("capcal-hf", "capcal-vllm", "capcal-api", "capcal-api-chat")
_CUSTOM_AGGREGATIONS = {"extracted_answers": extraction_rate}


def parse_looks(text: str) -> tuple[int, ...]:
    """``"16,32,64"`` as looks: whole numbers >= 2, strictly increasing. ``ValueError`` (one line) else."""
    try:
        looks = tuple(int(part) for part in str(text).split(","))
    except ValueError:
        raise ValueError(f"--looks {text}: expected increasing whole numbers, e.g. 16,32,64") from None
    if looks[0] < 2:
        raise ValueError(f"--looks {text}: the first look must be 2 or more (an unbiased mu^2 needs 2 draws)")
    if any(b <= a for a, b in zip(looks, looks[1:], strict=False)):
        raise ValueError(f"--looks {text}: the looks must be strictly increasing")
    return looks


def adaptive_looks(looks: Sequence[int] | None, k_max: int) -> tuple[int, ...]:
    """The plan's looks for ``k_max``: ``looks`` (default ``DEFAULT_LOOKS`` less those >= k_max) then k_max.
    ``ValueError`` (one line) for k_max below 2, a given look above k_max, or a plan of one look (nothing
    could stop before k_max: a fixed-k run)."""
    if k_max < 2:
        raise ValueError(
            f"--adaptive needs k_max >= 2 samples per question (--repeats or the task's repeats), got {k_max}"
        )
    if looks is None:
        plan = (*[look for look in DEFAULT_LOOKS if look < k_max], k_max)
        if len(plan) == 1:
            raise ValueError(
                f"--adaptive with k_max = {k_max} (--repeats or the task's repeats): the default looks "
                f"({', '.join(map(str, DEFAULT_LOOKS))} below k_max) leave one look, so nothing could stop "
                f"early; give --repeats above {DEFAULT_LOOKS[0]} (e.g. 16 or 64), or --looks below {k_max}"
            )
        return plan
    looks = parse_looks(",".join(str(look) for look in looks))
    if looks[-1] > k_max:
        raise ValueError(
            f"--looks: look {looks[-1]} is above k_max = {k_max} (--repeats or the task's repeats)"
        )
    if looks == (k_max,):
        raise ValueError(
            f"--looks {k_max} with k_max = {k_max}: one look, so nothing could stop early; give looks below "
            f"k_max (e.g. --looks {max(2, k_max // 2)}) or a larger --repeats"
        )
    return looks if looks[-1] == k_max else (*looks, k_max)


def small_first_look_warning(looks: Sequence[int]) -> str | None:
    """The warning for a plan whose first look is below ``RELIABLE_FIRST_LOOK`` (None otherwise): there the
    Brier skill after stopping differed from the fixed-k skill by more than its simulation error
    (docs/methods.md, "Adaptive sampling: the capability metrics after stopping")."""
    if looks[0] >= RELIABLE_FIRST_LOOK:
        return None
    return (
        f"--adaptive with a first look of {looks[0]}, below {RELIABLE_FIRST_LOOK}: the capability Brier "
        "skill after stopping is not reliable there (its bias differs from fixed k's by up to 4.1 standard "
        f"errors in simulation; docs/methods.md), and pass@k is estimated only up to k = {looks[0]}"
    )


def next_look(plan: SequentialPlan, look_index: int, successes: Sequence[int]) -> int:
    """The index of the next look a pass must reach: the first look after ``look_index`` where one of the
    questions still sampling (``successes`` at look ``look_index``) could stop, k_max at the latest.

    A question with s successes at look l_i has s' in [s, s + l_j - l_i] at look l_j; a look where
    ``plan.stop[j, s']`` holds for none of them cannot stop it, so drawing straight past it changes no stop
    and no record. Under unanimity a question that disagrees at l_1 (0 < s < l_1) can reach neither 0 nor l_j
    later: every such question goes to k_max in one pass."""
    last = len(plan.looks) - 1
    for index in range(look_index + 1, last):
        grown = plan.looks[index] - plan.looks[look_index]
        if any(plan.stop[index, s : s + grown + 1].any() for s in successes):
            return index
    return last


def _k_max(repeats: int | None, configs: Mapping[str, Mapping[str, Any]]) -> int:
    """k_max: ``repeats``, else the one ``repeats`` all the tasks' YAMLs share."""
    not_sampling = sorted(name for name, config in configs.items() if not is_sampling_config(dict(config)))
    if not_sampling:
        raise EvaluationInputError(
            f"--adaptive samples capcal's sampling tasks only; {', '.join(not_sampling)} is not one"
        )
    if repeats is not None:
        return int(repeats)
    found = {int(config.get("repeats") or 1) for config in configs.values()}
    if len(found) != 1:
        raise EvaluationInputError(
            f"--adaptive: the tasks have different repeats ({sorted(found)}); set k_max with --repeats"
        )
    return found.pop()


def _aggregate(records: list[dict], template: Mapping[str, Any]) -> dict[str, Any]:
    """lm-eval's per-task results entry recomputed over the final records: every ``metric,filter`` of
    ``template`` (the first look's entry) whose metric all records hold; mean, or the task's own aggregation
    for ``extracted_answers``; stderr of a mean as lm-eval's ``mean_stderr``.

    ``correctness`` is the mean over questions of the unbiased per-question estimate of mu
    (``expected_accuracy``), which at a fixed k is the task's own aggregation (every response of every
    question pooled, ``response_accuracy``). Pooled over the unequal n of an adaptive run the responses are
    not: a question that stops unanimous at l_1 weighs l_1 and a mixed one k_max, so the pool leans to the
    mixed questions (``capcal_adaptive`` keeps the pooled value as ``pooled_response_accuracy``, labelled)."""
    from lm_eval.api.metrics import mean_stderr

    entry: dict[str, Any] = {key: value for key, value in template.items() if "," not in key}
    for key in template:
        if "," not in key or key.split(",")[0].endswith("_stderr"):
            continue
        metric, _, filter_name = key.partition(",")
        if not all(metric in record for record in records):
            continue
        values = [record[metric] for record in records]
        if metric == "correctness":  # per question, unbiased: pooled over unequal n it is biased (module doc)
            entry[key] = float(sum(record["expected_accuracy"] for record in records) / len(records))
            entry[f"{metric}_stderr,{filter_name}"] = "N/A"
        elif metric in _CUSTOM_AGGREGATIONS:
            entry[key] = _CUSTOM_AGGREGATIONS[metric](values)
            entry[f"{metric}_stderr,{filter_name}"] = "N/A"
        else:
            entry[key] = float(sum(values) / len(values))
            entry[f"{metric}_stderr,{filter_name}"] = mean_stderr(values) if len(values) > 1 else "N/A"
    return entry


def _final_record(record: dict, looks: tuple[int, ...], rule: dict) -> dict:
    """A look's record of a stopped question as the adaptive run logs it
    (``capcal_tasks.adaptive_records``)."""
    final = {key: value for key, value in record.items() if not key.startswith("pass_at_")}
    final.update(adaptive_fields(list(looks), rule, list(record["correctness"])))
    return final


def evaluate_adaptive(
    model: str,
    tasks: str | Sequence[str],
    model_args: str | Mapping[str, Any] | None = None,
    *,
    looks: Sequence[int] | None = None,
    rule: str = "unanimity",
    repeats: int | None = None,
    output_path: str | Path | None = None,
    log_samples: bool = True,
    limit: float | None = None,
    samples: Mapping[str, Sequence[int]] | None = None,
    device: str | None = "cuda:0",
    inform: Callable[[str], None] | None = None,
    **evaluate_kwargs: Any,
) -> dict[str, Any]:
    """``evaluate`` with adaptive sampling: each question of capcal's sampling tasks stops at the first look
    where ``rule`` fires (see the module docstring for the design).

    ``looks``: sample counts (default 8, 16, 32, 64 below k_max), k_max appended; k_max is ``repeats``, else
    the tasks' own ``repeats``. ``rule``: ``"unanimity"`` or ``"width:W"`` (``width:W:ALPHA``;
    ``capcal_tasks.adaptive_records.parse_rule``). Every setting is checked before a model loads
    (``EvaluationInputError``, one line): k_max >= 2, looks strictly increasing from 2, none above k_max,
    at least two looks (one look is a fixed-k run), the rule, only sampling tasks, and ``evaluate``'s own
    checks; a first look below ``RELIABLE_FIRST_LOOK`` is warned about (``small_first_look_warning``).
    ``inform`` receives one line per pass (questions still sampling, samples drawn so far against fixed k,
    the looks skipped). Other arguments are ``evaluate``'s. Returns lm-eval's
    results dictionary as ``evaluate`` does; each samples record carries ``adaptive`` and the unbiased
    ``expected_accuracy``; ``results["capcal_adaptive"]`` holds the plan and, per task, the samples drawn,
    the fixed-k count and the samples saved.
    """
    try:
        rule_setting = parse_rule(rule)
    except ValueError as error:
        raise EvaluationInputError(str(error)) from None
    if samples is not None and limit is not None:
        raise EvaluationInputError("--samples and --limit cannot be used together")
    if not isinstance(model, str):
        raise EvaluationInputError(
            "--adaptive needs a registered model name (e.g. capcal-hf), not a model object"
        )
    if model not in ADAPTIVE_MODELS:
        raise EvaluationInputError(
            f"--adaptive needs one of capcal's engines ({', '.join(ADAPTIVE_MODELS)}), whose samples are "
            f"seeded by repeat and kept from look to look; {model} draws new samples at every look"
        )
    if evaluate_kwargs.get("predict_only"):
        raise EvaluationInputError(
            "--adaptive stops on each look's scores: it cannot run with --predict_only"
        )
    checked = check_inputs(
        model,
        tasks,
        model_args,
        repeats=repeats,
        limit=limit,
        metadata=evaluate_kwargs.get("metadata"),
        include_path=evaluate_kwargs.get("include_path"),
        data_dir=evaluate_kwargs.get("data_dir"),
        apply_chat_template=evaluate_kwargs.get("apply_chat_template", False),
        plain_prompts=evaluate_kwargs.get("plain_prompts", False),
        output_path=output_path,
        gen_kwargs=evaluate_kwargs.get("gen_kwargs"),
        num_fewshot=evaluate_kwargs.get("num_fewshot"),
        batch_size=evaluate_kwargs.get("batch_size"),
        allow_large=evaluate_kwargs.get("allow_large", False),
        log_samples=log_samples,
    )
    k_max = _k_max(repeats, checked.configs)
    try:
        plan_looks = adaptive_looks(looks, k_max)
        plan = sequential_plan(plan_looks, rule_setting)
    except ValueError as error:
        raise EvaluationInputError(str(error)) from None
    inform = inform or logging.getLogger("analysis.evaluation").info
    notify = evaluate_kwargs.pop("notify", None) or logging.getLogger("analysis.evaluation").warning
    for notice in checked.notices:  # what k_max leaves out, once (not each look's smaller k)
        notify(notice)
    small_first_look = small_first_look_warning(plan_looks)
    if small_first_look:
        notify(small_first_look)
    per_look = {notice for look in plan_looks for notice in repeats_notices(look, checked.configs)}

    def notify_once(message: str) -> None:
        if message not in per_look:
            notify(message)

    device_notice = _checked_device(model, device)
    if device_notice is not None:
        notify(device_notice)
    batch_size_record = _choose_batch_size(model, checked.model_args, device, evaluate_kwargs)
    lm = _load_model(model, checked.model_args, evaluate_kwargs, device)
    # lm-eval logs a question's doc_id as its index among the task's evaluation documents, also under
    # ``samples`` (given sorted: lm-eval maps its i-th selected document to the list's i-th entry)
    first_selection = {name: sorted(set(indices)) for name, indices in samples.items()} if samples else None
    final: dict[str, dict[int, dict]] = {}  # task -> doc_id -> final record
    active: dict[str, dict[int, int]] = {}  # task -> doc_id still sampling -> its successes so far
    first_results: dict[str, Any] | None = None
    look_number = 0
    while True:
        look = plan_looks[look_number]
        if look_number == 0:
            selection, look_limit, look_tasks = first_selection, limit, tasks
        else:
            selection = {task: sorted(ids) for task, ids in active.items() if ids}
            look_limit, look_tasks = None, sorted(selection)
        results = evaluate(
            lm,
            look_tasks,
            repeats=look,
            limit=look_limit,
            samples=selection,
            output_path=None,
            log_samples=True,
            device=device,
            inform=inform,
            notify=notify_once,
            **evaluate_kwargs,
        )
        if results is None:  # not the main process
            return results
        for task, records in results["samples"].items():
            if look_number == 0:
                final[task], active[task] = {}, {}
            still = {}
            for record in records:
                doc_id = record["doc_id"]
                n, s = len(record["correctness"]), sum(record["correctness"])
                if n != look:
                    raise RuntimeError(f"{task}: look {look} logged {n} samples for doc {doc_id}")
                if plan.stop[look_number, s]:
                    final[task][doc_id] = _final_record(record, plan_looks, rule_setting)
                else:
                    still[doc_id] = s
            active[task] = still
        if look_number == 0:
            first_results = results
        successes = [s for ids in active.values() for s in ids.values()]
        following = next_look(plan, look_number, successes) if successes else None
        inform(_look_line(look_number, plan_looks, final, active, following))
        if following is None:
            break
        look_number = following
    assert first_results is not None
    return _finish(
        first_results, final, plan_looks, rule_setting, model, checked.model_args, lm,
        output_path, log_samples, batch_size_record, evaluate_kwargs,
    )  # fmt: skip


def _load_model(model: str, model_args: dict[str, Any], kwargs: dict[str, Any], device: str | None) -> Any:
    """The lm-eval model object, built as ``simple_evaluate`` builds it (once for every look)."""
    import lm_eval.api.registry

    from capcal_models.registry import register_models

    register_models()
    return lm_eval.api.registry.get_model(model).create_from_arg_obj(
        model_args,
        {
            "batch_size": kwargs.get("batch_size"),
            "max_batch_size": kwargs.get("max_batch_size"),
            "device": device,
        },
    )


def _look_line(
    look_number: int,
    looks: tuple[int, ...],
    final: dict[str, dict[int, dict]],
    active: dict[str, dict[int, int]],
    following: int | None,
) -> str:
    """``adaptive look 1/4 (n = 8): 18 of 40 questions still sampling; 608 samples drawn so far, 2,560 at
    fixed k = 64; next pass to n = 64 (no question still sampling can stop at 16, 32)``."""
    questions = sum(len(final[task]) + len(active[task]) for task in final)
    still = sum(len(ids) for ids in active.values())
    look = looks[look_number]
    drawn = sum(len(r["correctness"]) for task in final for r in final[task].values()) + still * look
    line = (
        f"adaptive look {look_number + 1}/{len(looks)} (n = {look}): {still} of {questions} questions still "
        f"sampling; {drawn:,} samples drawn so far, {questions * looks[-1]:,} at fixed k = {looks[-1]}"
    )
    skipped = looks[look_number + 1 : following] if following is not None else ()
    if skipped:
        line += (
            f"; next pass to n = {looks[following]} (no question still sampling can stop at "
            f"{', '.join(map(str, skipped))})"
        )
    return line


def _finish(
    first: dict[str, Any],
    final: dict[str, dict[int, dict]],
    looks: tuple[int, ...],
    rule: dict[str, Any],
    model: str,
    model_args: dict[str, Any],
    lm: Any,
    output_path: str | Path | None,
    log_samples: bool,
    batch_size_record: dict[str, Any],
    kwargs: dict[str, Any],
) -> dict[str, Any]:
    """The adaptive run's results: the first look's, with the final records, recomputed aggregates, the
    config's model as named, ``capcal_adaptive``; saved as ``evaluate`` saves a run."""
    results = copy.deepcopy({key: value for key, value in first.items() if key != "samples"})
    samples = {task: [records[doc_id] for doc_id in sorted(records)] for task, records in final.items()}
    summary: dict[str, Any] = {"looks": list(looks), "rule": rule, "k_max": looks[-1], "tasks": {}}
    for task, records in samples.items():
        results["results"][task] = _aggregate(records, first["results"][task])
        results["configs"][task]["repeats"] = looks[-1]
        drawn = sum(record["adaptive"]["n"] for record in records)
        fixed = len(records) * looks[-1]
        summary["tasks"][task] = {
            "questions": len(records),
            "correctness": "mean over questions of the unbiased estimate of mu (expected_accuracy)",
            "pooled_response_accuracy": response_accuracy([record["correctness"] for record in records]),
            "samples_drawn": drawn,
            "fixed_k_samples": fixed,
            "samples_saved": fixed - drawn,
            "saved_fraction": (fixed - drawn) / fixed if fixed else 0.0,
            "stopped_at": {str(look): sum(r["adaptive"]["n"] == look for r in records) for look in looks},
        }
    results["capcal_adaptive"] = summary
    results["config"]["model"] = model
    results["config"]["model_args"] = model_args
    results["samples"] = samples
    if output_path is None:
        return results
    if not log_samples:  # saved as ``evaluate`` saves a run without --log_samples: the aggregates only
        del results["samples"]
    from lm_eval.loggers import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(output_path))
    apply_chat_template = kwargs.get("apply_chat_template", False)
    multiturn = kwargs.get("fewshot_as_multiturn")
    tracker.general_config_tracker.log_experiment_args(
        model_source=model,
        model_args=model_args,
        system_instruction=kwargs.get("system_instruction"),
        chat_template=lm.chat_template(apply_chat_template) if apply_chat_template else None,
        fewshot_as_multiturn=bool(apply_chat_template) if multiturn is None else multiturn,
    )
    return save_run(results, tracker, output_path, log_samples, model, model_args, batch_size_record)
