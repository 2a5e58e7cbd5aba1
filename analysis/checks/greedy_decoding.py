"""Greedy decoding with repeats: k responses per question that are one response repeated.

A sampling task draws k responses per question so that mu_hat (the share of them that are right) estimates
the model's expected accuracy. Decoded greedily, the k responses are identical: mu_hat is 0 or 1 on every
question, consistency is 1 everywhere, and a ranking of confidence estimators against such a target says
nothing about capability calibration. The setting is greedy by lm-eval 0.4.13's own rule
(``lm_eval.models.utils.normalize_gen_kwargs``, the rule ``capcal_models.sampling_plan.is_greedy`` applies
after it): ``do_sample`` false; a temperature of 0; neither set (lm-eval reads an unset temperature as 0.0
and then sets ``do_sample`` false); or ``do_sample`` true without a temperature on an engine whose default
temperature is 0 (lm-eval's OpenAI-style API payloads and ``capcal-api``). ``top_k=1`` keeps one token at
every step and is greedy too.

- ``greedy_reason``: why a generation setting decodes greedily (one phrase), or None;
- ``greedy_repeats_problem``: before a run (``analysis.evaluation.check_inputs``), the one-line refusal of a
  greedy setting on a task that draws k > 1 responses per question, with the fix;
- ``greedy_run_warning``: after it, for a run on disk whose results file records a greedy setting with
  k > 1: the line ``capcal check`` prints and the report gives instead of a verdict.

Nothing here imports lm-eval or torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "API_GREEDY_MODELS",
    "greedy_reason",
    "greedy_repeats_problem",
    "greedy_run_warning",
]

#: Models whose requests carry temperature 0 when the generation setting names none (lm-eval's API payloads,
#: ``temperature = gen_kwargs.pop("temperature", 0)``; ``capcal_models.api.API_DEFAULT_TEMPERATURE``).
API_GREEDY_MODELS = frozenset(
    {
        "capcal-api",
        "local-completions",
        "local-chat-completions",
        "openai-completions",
        "openai-chat-completions",
    }
)
_FALSE_WORDS = ("0", "false", "no", "off")


def _is_false(value: Any) -> bool:
    """Whether a ``do_sample`` value says false (a boolean, 0, or a false word as text)."""
    if isinstance(value, str):
        return value.strip().lower() in _FALSE_WORDS
    return value is not None and not bool(value)


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def greedy_reason(generation_kwargs: Mapping[str, Any] | None, model: str | None = None) -> str | None:
    """Why ``generation_kwargs`` (a task's, with ``--gen_kwargs`` merged in) decode greedily, as a phrase
    ("temperature=0", "do_sample=False", "top_k=1", "no temperature and no do_sample", "no temperature
    (capcal-api sends temperature 0)"), or None when they sample. ``model``: the engine's name, for its
    default temperature (``API_GREEDY_MODELS``)."""
    settings = dict(generation_kwargs or {})
    do_sample = settings.get("do_sample")
    if _is_false(do_sample):
        return f"do_sample={do_sample}"
    temperature = settings.get("temperature")
    if temperature is not None and _number(temperature) == 0.0:
        return f"temperature={temperature}"
    if temperature is None and do_sample is None:
        return "no temperature and no do_sample (lm-eval then decodes greedily)"
    if temperature is None and model in API_GREEDY_MODELS:
        return f"no temperature ({model} sends temperature 0)"
    if _number(settings.get("top_k")) == 1.0:
        return f"top_k={settings['top_k']}"
    return None


def _greedy_alone(key: str, value: Any) -> bool:
    """Whether one setting makes decoding greedy by itself: ``do_sample`` false, temperature 0, top_k 1."""
    if value is None:
        return False
    if key == "do_sample":
        return _is_false(value)
    return _number(value) == (0.0 if key == "temperature" else 1.0)


def _k(config: Mapping[str, Any], repeats: int | None) -> int:
    """The responses per question a task draws: ``repeats`` for capcal's tasks that sample k
    (``capcal_tasks.task_manager.REPEATED_SAMPLING_KINDS``, which ``--repeats`` sets), else its YAML's
    ``repeats`` (1 when unset)."""
    from capcal_tasks.task_manager import REPEATED_SAMPLING_KINDS  # lm-eval's task code: only when called

    metadata = config.get("metadata") or {}
    kind = metadata.get("capcal_task") if isinstance(metadata, Mapping) else None
    if repeats is not None and kind in REPEATED_SAMPLING_KINDS:
        return int(repeats)
    own = _number(config.get("repeats"))
    return int(own) if own is not None else 1


def greedy_repeats_problem(
    configs: Mapping[str, Mapping[str, Any]],
    repeats: int | None = None,
    gen_kwargs: Mapping[str, Any] | None = None,
    model: str | None = None,
) -> str | None:
    """The one-line refusal of greedy decoding (``greedy_reason``) on a generation task of ``configs`` (task
    name -> YAML config) that draws k > 1 responses per question (``repeats``, else its own), or None.
    ``gen_kwargs`` (``--gen_kwargs``) update each task's ``generation_kwargs`` as lm-eval applies them.
    The fix names what made it greedy: a ``--gen_kwargs`` setting to drop, or the task's own setting to
    override."""
    cli = dict(gen_kwargs or {})
    found: list[tuple[str, int, str, dict]] = []
    for name, config in configs.items():
        if not isinstance(config, Mapping) or config.get("output_type") != "generate_until":
            continue
        k = _k(config, repeats)
        own = config.get("generation_kwargs")
        own = dict(own) if isinstance(own, Mapping) else {}
        reason = greedy_reason({**own, **cli}, model)
        if k > 1 and reason is not None:
            found.append((name, k, reason, own))
    if not found:
        return None
    name, k, reason, own = found[0]
    names = ", ".join(sorted(entry[0] for entry in found)[:3]) + (
        f" and {len(found) - 3} more" if len(found) > 3 else ""
    )
    flagged = [key for key in ("do_sample", "temperature", "top_k") if _greedy_alone(key, cli.get(key))]
    if flagged and greedy_reason(own, model) is None:
        temperature = own.get("temperature")
        fix = f"drop {', '.join(f'{key}={cli[key]}' for key in flagged)} from --gen_kwargs" + (
            f" ({name} samples at temperature {temperature})" if temperature is not None else ""
        )
    else:
        fix = "add --gen_kwargs do_sample=true,temperature=1.0 (or another temperature > 0) to sample"
    return (
        f"greedy decoding with k = {k} responses per question on {names}: {reason}, so the k responses are "
        f"one response repeated (mu_hat only 0 or 1, nothing to calibrate); {fix}, or run --repeats 1"
    )


def greedy_run_warning(
    task: str, model: str, task_config: Mapping[str, Any], k: int, engine: str | None = None
) -> str | None:
    """For a run on disk: the warning that its results file records a greedy setting (``greedy_reason`` of
    the task config's ``generation_kwargs``, as lm-eval ran it) with ``k`` > 1 responses per question, or
    None. ``capcal check`` prints it; the report gives it instead of a verdict."""
    settings = task_config.get("generation_kwargs") if isinstance(task_config, Mapping) else None
    if k <= 1 or task_config.get("output_type") not in (None, "generate_until"):
        return None
    if not isinstance(settings, Mapping):  # not recorded: nothing to tell
        return None
    reason = greedy_reason(settings, engine)
    if reason is None:
        return None
    return (
        f"{task} ({model}) was decoded greedily ({reason} in the results file's generation_kwargs) with k = "
        f"{k}: its k responses per question are one response repeated, so mu_hat is only 0 or 1 and no "
        "estimator can be judged on it (no verdict); run it again with sampling (the task's own "
        "generation_kwargs, without temperature=0 or do_sample=false)"
    )
