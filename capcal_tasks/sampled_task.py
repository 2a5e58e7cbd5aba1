"""Any admitted lm-eval generative task, sampled k times per question and scored response by response.

``SampledTask`` wraps a loaded stock task (the *base*): the same docs, prompt, few-shot examples and stop
sequences; one of its filter pipelines without the final ``take_first``, so the k filtered answers of a
question reach scoring; ``repeats`` k; and a ``process_results`` that calls the **base task's own**
``process_results(doc, [answer_i])`` once per response and writes capcal's sampling record
(``capcal_tasks.sampling``): ``extracted_answers`` (the pipeline's output per response; a regex filter's
fallback, e.g. ``[invalid]``, is no answer), ``correctness`` (the base metric's 0/1 label per response),
``n_samples``, ``expected_accuracy``, ``pass_at_{m}``, ``majority_vote_accuracy`` (over answer classes: the
filter output normalised as the task's ``exact_match`` normalises it, so "18" and "18." are one class when
the metric says they are equal), plus every ``mean`` metric of the base task averaged over the k responses
(so the task's own metric in the results table equals the mean of ``expected_accuracy``). A task whose
pipeline extracts nothing (whole responses reach its metric) has no answer classes: no majority vote, and
its protocol says consistency is left out; where the metric itself compares the whole response with the gold
(no ``process_results`` of the task's own, e.g. triviaqa's short answers), that comparison's normalisation
gives the classes.

Which tasks are admitted, and why the others are refused: ``capcal_tasks.task_admission``. A greedy task is
turned into sampling (``do_sample: true``, ``temperature`` 1.0, ``top_p`` 1.0, ``top_k`` 0, capcal's
sampling protocol); the change is recorded in the config's ``metadata.capcal_sampled`` with the base task,
its version, the pipeline, the metric and the few-shot settings
(``capcal_tasks.sampled_protocol.protocol_lines`` renders it).

Two ways in:

- ``capcal eval --tasks gsm8k,triviaqa --repeats 8``: ``capcal_tasks.task_manager.CapcalTaskManager`` wraps
  every task that is not one of capcal's own (``CapcalTaskManager.stock_task_configs``), named by the
  base task's name;
- stock ``lm_eval``: a YAML task in an ``--include_path`` folder,
  ``{task: gsm8k_k8, class: !function capcal_tasks.sampled_task.SampledTask, metadata: {base_task: gsm8k,
  k: 8}}`` (lm-eval's ``class:`` convention; ``--metadata`` may add ``filter``, ``correct_metric``,
  ``temperature``); its P(True) task is a second YAML, ``{task: gsm8k_k8_ptrue, class: !function
  capcal_tasks.sampled_task.SampledPTrueTask, metadata: {base_task: gsm8k}}`` (``SampledPTrueTask``).

Its calibration task, ``<task>_calibration`` (the sampling, P(True) and the verbalized confidence in one task
whose results are the calibration columns), is ``capcal_tasks.sampled_calibration.SampledCalibrationTask``.
"""

from __future__ import annotations

import copy
import logging
import re
import string
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import fields
from typing import Any

from lm_eval.api.metrics import mean
from lm_eval.api.task import ConfigurableTask
from lm_eval.filters import build_filter_ensemble
from lm_eval.tasks import TaskManager
from lm_eval.tasks._yaml_loader import load_yaml

from capcal_tasks.sampled_confidence import ptrue_task
from capcal_tasks.sampled_protocol import PROTOCOL_KEY, relative_config_path
from capcal_tasks.sampling import (
    extraction_rate,
    keep_all_responses,
    pass_at_k_levels,
    response_accuracy,
    sampling_record,
)
from capcal_tasks.settings import CONFIDENCES_KEY
from capcal_tasks.task_admission import RefusedTask, admit
from capcal_tasks.task_index import put_over_lm_eval_tasks

__all__ = [
    "SAMPLING_SETTINGS",
    "SampledPTrueTask",
    "SampledTask",
    "base_task_config",
    "base_task_from_metadata",
    "build_base_task",
    "config_of",
    "sampling_generation_kwargs",
]

#: what a greedy task's generation settings become (capcal's sampling protocol, as its own sampling tasks)
SAMPLING_SETTINGS = {"do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": 0}
_REGEX_FILTERS = frozenset({"regex", "regex_pos", "multi_choice_regex"})
logger = logging.getLogger(__name__)


def config_of(task: ConfigurableTask) -> dict[str, Any]:
    """A loaded task's config as a plain dict of its fields (callables kept)."""
    return {field.name: getattr(task.config, field.name) for field in fields(task.config)}


def sampling_generation_kwargs(
    settings: Mapping[str, Any] | None, temperature: float | None = None
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """(the generation settings a wrapped task samples with, what changed: {key: [task's, capcal's]}).

    A task that samples already (``do_sample`` true and a temperature above 0) keeps its settings; a greedy
    one (no ``do_sample``, or a temperature of 0 or none: lm-eval's models decode greedily then) gets
    ``SAMPLING_SETTINGS``, ``temperature`` when given, ``top_p``/``top_k`` only where the task sets none."""
    before = dict(settings or {})
    after = dict(before)
    sampled = bool(before.get("do_sample")) and float(before.get("temperature") or 0.0) > 0.0
    if not sampled:
        after["do_sample"] = True
        after["temperature"] = float(
            temperature if temperature is not None else SAMPLING_SETTINGS["temperature"]
        )
        for key in ("top_p", "top_k"):
            after.setdefault(key, SAMPLING_SETTINGS[key])
    elif temperature is not None:
        after["temperature"] = float(temperature)
    changed = {key: [before.get(key), after[key]] for key in after if before.get(key) != after[key]}
    return after, changed


def _normaliser(metric_entry: Mapping[str, Any]) -> Any:
    """The answer-class key of a filtered answer: as lm-eval's ``exact_match`` normalises a prediction
    (``regexes_to_ignore`` removed, ``ignore_case``, ``ignore_punctuation``, ``ignore_numbers``), so answers
    the metric cannot tell apart are one class; for another metric, the answer stripped."""
    if metric_entry.get("metric") != "exact_match":
        return lambda answer: answer.strip()
    regexes = [re.compile(pattern) for pattern in metric_entry.get("regexes_to_ignore") or []]
    punctuation = str.maketrans("", "", string.punctuation)
    digits = str.maketrans("", "", string.digits)

    def key(answer: str) -> str:
        for regex in regexes:
            answer = regex.sub("", answer)
        if metric_entry.get("ignore_case"):
            answer = answer.lower()
        if metric_entry.get("ignore_punctuation"):
            answer = answer.translate(punctuation)
        if metric_entry.get("ignore_numbers"):
            answer = answer.translate(digits)
        return answer.strip()

    return key


def base_task_config(
    name: str, task_manager: TaskManager, metadata: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The config lm-eval builds task ``name`` from (its YAML with includes merged and ``!function`` entries
    imported; ``metadata`` merged into its metadata, as lm-eval's TaskManager does); ``RefusedTask`` for a
    name that is not a YAML task."""
    entry = task_manager.task_index.get(name)
    if entry is None or entry.kind.name not in ("TASK", "PY_TASK") or entry.yaml_path is None:
        raise RefusedTask(
            "is not a task defined by a YAML file in lm-eval's index (a group, tag or inline task)"
        )
    config = copy.deepcopy(load_yaml(entry.yaml_path, resolve_func=True))
    for key in ("tag", "group", "task_list"):
        config.pop(key, None)
    own = config.get("metadata")
    config["metadata"] = (own if isinstance(own, dict) else {"_metadata": own}) | dict(metadata or {})
    config["metadata"]["config_source"] = str(entry.yaml_path)
    return config


def build_base_task(
    name: str,
    task_manager: TaskManager,
    metadata: Mapping[str, Any] | None = None,
    local_rows: bool = False,
) -> ConfigurableTask:
    """The unmodified lm-eval task ``name``, its rows read from the local data folder when ``local_rows``
    (``capcal_tasks.local_rows.local_dataset``: one-line ``MissingLocalRows`` naming the file)."""
    config = base_task_config(name, task_manager, metadata)
    if "class" in config:
        admit(name, config)  # raises RefusedTask: a Python task class
    if local_rows:
        from capcal_tasks.local_rows import local_dataset

        config["custom_dataset"] = local_dataset(name, config)
        config["metadata"][PROTOCOL_KEY + "_local_rows"] = True
    return ConfigurableTask(config=config)


class SampledTask(ConfigurableTask):
    """A stock lm-eval task sampled k times per question, each response scored by the task's own
    ``process_results`` (module docstring). Built from a loaded base task (``base``, ``k``, ``metadata``:
    ``filter``, ``correct_metric``, ``temperature``), or by lm-eval from a YAML ``class:`` entry whose
    metadata names ``base_task`` and ``k``."""

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        base: ConfigurableTask | None = None,
        k: int | None = None,
        metadata: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        if base is None:  # lm-eval's YAML route: the base task and k come as metadata
            base, k, metadata, name = self._from_yaml_config(dict(config or {}))
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k (repeats) must be a positive integer, got {k!r}")
        metadata = dict(metadata or {})
        base_name = base.config.task
        admission = admit(base_name, config_of(base), metadata)
        if type(base) is not ConfigurableTask:
            raise RefusedTask("is a Python task class, whose own methods capcal cannot wrap")
        self.__dict__.update(base.__dict__)  # the same docs, few-shot sampler, prompt and dataset
        self.base = base
        self.admission = admission
        self.k = k
        generation, changed = sampling_generation_kwargs(
            base.config.generation_kwargs, metadata.get("temperature")
        )
        entries = {str(entry.get("metric")): dict(entry) for entry in base.config.metric_list or []}
        self._answer_key = _normaliser(entries.get(admission.metric, {"metric": admission.metric}))
        self._fallbacks = {
            str(step.get("fallback", "[invalid]"))
            for step in admission.filters
            if step.get("function") in _REGEX_FILTERS
        }
        base_means = [
            name_
            for name_, aggregation in base.aggregation().items()
            if aggregation is mean or getattr(aggregation, "__name__", "") == "mean"
        ]
        self.base_metrics = [metric for metric in base_means if metric in entries] or [admission.metric]
        protocol = {
            "base_task": base_name,
            "base_version": (base.config.metadata or {}).get("version"),
            "base_config": relative_config_path((base.config.metadata or {}).get("config_source")),
            "pipeline": admission.pipeline,
            "pipeline_filters": [str(step.get("function")) for step in admission.filters],
            "dropped": "take_first",
            "metric": admission.metric,
            "metric_named_by_user": admission.metric_named,
            "answer_classes": "filter output" if admission.extracts else None,
            "k": k,
            "task_generation_kwargs": _plain(base.config.generation_kwargs),
            "generation_changed": _plain(changed),
            "num_fewshot": base.config.num_fewshot,
            "fewshot_split": base.config.fewshot_split,
            "local_rows": bool((base.config.metadata or {}).get(PROTOCOL_KEY + "_local_rows")),
        }
        config = copy.copy(base.config)
        config.task = name or base_name
        config.repeats = k
        config.generation_kwargs = generation
        config.filter_list = [{"name": admission.pipeline, "filter": [dict(s) for s in admission.filters]}]
        config.custom_dataset = None  # read already (the base task's rows)
        config.process_results = None  # the base task's, called per response (its config keeps it)
        levels = pass_at_k_levels(k)
        record_metrics = [
            "expected_accuracy",
            *(["majority_vote_accuracy"] if admission.extracts else []),
            "correctness",
            "extracted_answers",
            "n_samples",
            *(f"pass_at_{level}" for level in levels),
        ]
        config.metric_list = [
            {"metric": metric, "aggregation": "mean", "higher_is_better": True}
            for metric in record_metrics
            if metric not in ("correctness", "extracted_answers")
        ] + [
            {"metric": metric, "aggregation": "mean", "higher_is_better": True}
            for metric in self.base_metrics
        ]
        own = dict(base.config.metadata or {})
        own.pop(PROTOCOL_KEY + "_local_rows", None)
        config.metadata = {
            **own,
            "capcal_task": "sampling",
            "capcal_role": "evaluation",
            "capcal_calibration_tasks": [],
            "capcal_dataset": f"lm_eval/{base_name}",
            PROTOCOL_KEY: protocol,
        }
        self._config = config
        components = [
            [str(step["function"]), {key: value for key, value in step.items() if key != "function"}]
            for step in admission.filters
        ] or [["custom", {"filter_fn": keep_all_responses}]]
        self._filters = [build_filter_ensemble(admission.pipeline, components)]
        self._aggregation_list = {metric: mean for metric in record_metrics}
        self._aggregation_list["correctness"] = response_accuracy
        self._aggregation_list["extracted_answers"] = extraction_rate
        self._aggregation_list.update({metric: mean for metric in self.base_metrics})
        self._higher_is_better = {metric: True for metric in self._aggregation_list}
        self._metric_fn_list = {metric: None for metric in self._aggregation_list}
        self._metric_fn_kwargs = {metric: {} for metric in self._aggregation_list}

    @staticmethod
    def _from_yaml_config(config: dict[str, Any]) -> tuple[ConfigurableTask, int, dict[str, Any], str]:
        """(base task, k, metadata, task name) of lm-eval's ``class:`` route: ``metadata.base_task`` names
        the task (``base_task_from_metadata``), ``metadata.k`` (or ``repeats``) k."""
        metadata = dict(config.get("metadata") or {})
        name = str(config.get("task") or "capcal_sampled")
        k = metadata.get("k", metadata.get("repeats"))
        if _named_base_task(metadata) and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            _refuse_yaml_task(
                f"task {name}: metadata.k must be the number of samples per question, got {k!r}"
            )
        if metadata.get(CONFIDENCES_KEY):
            logger.warning(
                "task %s: metadata %s is read by capcal eval only; under stock lm_eval a confidence "
                "runs as a task of its own: name a YAML task with class "
                "capcal_tasks.sampled_task.SampledPTrueTask (docs/any-task.md, From stock lm_eval)",
                name,
                CONFIDENCES_KEY,
            )
        return base_task_from_metadata(name, metadata), k, metadata, name

    def process_results(self, doc: dict, results: list) -> dict[str, Any]:
        """The sampling record of one question from its k filtered answers (``results[0]``), each scored by
        the base task's own ``process_results(doc, [answer])``."""
        answers = results[0]
        if isinstance(answers, str) or not isinstance(answers, Sequence):
            answers = [answers]
        labels: list[int] = []
        scores: dict[str, list[float]] = {metric: [] for metric in self.base_metrics}
        for index, answer in enumerate(answers, start=1):
            scored = self.base.process_results(doc, [answer])
            if self.admission.metric not in scored:
                raise ValueError(
                    f"task {self.base.config.task}: its process_results gave no {self.admission.metric} for "
                    f"response {index} (it gave {', '.join(scored)}); name one with --metadata "
                    "correct_metric=NAME"
                )
            labels.append(
                _zero_one(scored[self.admission.metric], self.base.config.task, self.admission.metric)
            )
            for metric in self.base_metrics:
                value = scored.get(metric)
                if isinstance(value, (int, float)):
                    scores[metric].append(float(value))
        extracted = [self._extracted(answer, label) for answer, label in zip(answers, labels, strict=True)]
        classes = [self.answer_class(answer) for answer in extracted] if self.admission.extracts else None
        record = sampling_record(extracted, labels, classes)
        for metric, values in scores.items():
            record[metric] = sum(values) / len(values) if values else float("nan")
        return record

    def _extracted(self, answer: Any, label: int) -> str | None:
        """A filtered answer as logged: text; None for a regex filter's fallback that was scored incorrect
        (the filter found no answer)."""
        text = answer if isinstance(answer, str) else str(answer)
        return None if text in self._fallbacks and not label else text

    def answer_class(self, answer: str | None) -> Hashable | None:
        """The answer class of a logged extracted answer (None: no vote)."""
        if answer is None or not self.admission.extracts:
            return None
        key = self._answer_key(answer)
        return key if key else None


def _named_base_task(metadata: Mapping[str, Any]) -> str | None:
    """``metadata.base_task`` when it is a task name."""
    name = metadata.get("base_task")
    return name if isinstance(name, str) and name else None


def _refuse_yaml_task(problem: str) -> None:
    """Stop on ``problem``: one line and exit 2 under lm-eval's command line, ``RefusedTask`` elsewhere."""
    from capcal_tasks.data_sources import stop_lm_eval_command_line

    stop_lm_eval_command_line(problem)
    raise RefusedTask(problem)


def base_task_from_metadata(task: str, metadata: Mapping[str, Any]) -> ConfigurableTask:
    """The unmodified lm-eval task that the YAML task ``task`` names as ``metadata.base_task`` (lm-eval's
    ``class:`` route; ``metadata.include_path`` adds a folder to look in), admitted by capcal's rule
    (``capcal_tasks.task_admission``) and its rows read from ``CAPCAL_DATA_DIR`` when set. A missing name,
    a refused task or a missing local file stops in one line (``_refuse_yaml_task``)."""
    from capcal_tasks.data_sources import local_data_dir

    base_name = _named_base_task(metadata)
    if base_name is None:
        _refuse_yaml_task(
            f"task {task}: metadata.base_task must name the lm-eval task to sample (e.g. gsm8k)"
        )
    # lm-eval's tree parsed once per process (capcal_tasks.task_index), not once per wrapped task
    manager = TaskManager(include_path=metadata.get("include_path"), include_defaults=False, metadata=None)
    put_over_lm_eval_tasks(manager)
    passed = {key: value for key, value in metadata.items() if key not in ("config_source",)}
    try:
        raw = manager.task_index.get(base_name)
        if raw is None:
            raise RefusedTask("is not a task lm-eval knows")
        admit(base_name, raw.cfg or {}, metadata)
        return build_base_task(base_name, manager, passed, local_rows=local_data_dir() is not None)
    except (RefusedTask, FileNotFoundError) as error:
        _refuse_yaml_task(f"task {base_name}: {error}" if isinstance(error, RefusedTask) else str(error))
        raise  # not reached: _refuse_yaml_task raises


class SampledPTrueTask(ConfigurableTask):
    """lm-eval's ``class:`` route to the P(True) task of a wrapped task (``capcal_tasks.sampled_confidence.
    ptrue_task``), what ``capcal eval --metadata capcal_confidences=ptrue`` adds by itself: a YAML task
    ``{task: gsm8k_k8_ptrue, class: !function capcal_tasks.sampled_task.SampledPTrueTask, metadata:
    {base_task: gsm8k, target_task: gsm8k_k8}}`` beside the ``SampledTask`` YAML named ``target_task``
    (default: this task's name without its ``_ptrue`` suffix), whose samples its records join by question
    id."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        config = dict(config or {})
        metadata = dict(config.get("metadata") or {})
        name = str(config.get("task") or "capcal_sampled_ptrue")
        target = metadata.get("target_task") or (name[: -len("_ptrue")] if name.endswith("_ptrue") else None)
        if not isinstance(target, str) or not target:
            _refuse_yaml_task(
                f"task {name}: metadata.target_task must name the wrapped task (its SampledTask YAML's task) "
                "whose questions it asks about, or the task's name must be that name + _ptrue"
            )
        built = ptrue_task(base_task_from_metadata(name, metadata), str(target))
        self.__dict__.update(built.__dict__)
        self.config.task = name


def _zero_one(value: Any, task: str, metric: str) -> int:
    """A per-response metric value as 0/1; ``ValueError`` naming the task and metric for anything else."""
    if isinstance(value, bool) or value in (0, 1, 0.0, 1.0):
        return int(value)
    raise ValueError(
        f"task {task}: its metric {metric} gave {value!r} for one response, not 0 or 1; name a 0/1 metric "
        "with --metadata correct_metric=NAME"
    )


def _plain(value: Any) -> Any:
    """``value`` as JSON-ready data (lists for tuples, text for anything else)."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
