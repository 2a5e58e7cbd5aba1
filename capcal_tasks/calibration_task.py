r"""``capcal_<dataset>_calibration``: sampling and capability confidences in one lm-eval task, scored as
calibration columns of lm-eval's results table.

Each ``capcal_<dataset>_calibration.yaml`` includes the dataset's sampling task ``capcal_<dataset>.yaml``
(its data, prompt, generation kwargs, keep-all filter and checker) and then ``_calibration_template_yaml``,
which makes it a :class:`CalibrationTask`. Per question the task issues:

- idx 0: the sampling prompt, ``generate_until`` with the task's ``generation_kwargs``, ``repeats`` = k
  clones; scored by the sampling task's ``process_results`` (``capcal_tasks.sampling.score_responses``);
- idx 1, 2: P(True), capability form (``capcal_tasks.confidence.ptrue``): log-likelihoods of "Yes" and "No"
  after the P(True) prompt, one request each, with lm-eval's ``multiple_choice`` delimiter rule (" Yes"/" No"
  after a plain prompt, "Yes"/"No" after a chat template's generation prompt unless a ``gen_prefix`` not
  ending in white space is set);
- idx 3: verbalized confidence, capability form (``capcal_tasks.confidence.verbalized``), one generation with
  ``verbalized_generation_kwargs`` (the verbalized tasks' settings; ``--gen_kwargs`` updates both kinds of
  generation, as it would update the separate tasks).

The prompts are rendered by lm-eval's own ``fewshot_context`` (system instruction, chat template), the
confidence prompts zero-shot as in the separate confidence tasks. The task keeps lm-eval's Task contract:
``fewshot_context`` returns the sampling prompt (a string, as lm-eval's ``scripts/write_out.py`` and its
``tests/test_tasks.py`` use it) and ``construct_requests(doc, ctx)`` takes that string, with or without
lm-eval's ``metadata``; the two confidence prompts are rendered in ``construct_requests`` with the settings
``build_all_requests`` was given (system instruction, chat template, multi-turn few-shot). lm-eval groups
the instances by request type and clones each by its own ``repeats``.

A model without log-likelihoods (lm-eval raises ``NotImplementedError`` for them, as chat-completions models
do) is detected from the model behind ``--apply_chat_template``: P(True) is then not requested, a warning is
logged and the ``ptrue_*`` columns are NaN (``configs[task]["capcal_calibration"]`` in the results JSON
says so). ``--metadata '{"ptrue": false}'``
turns P(True) off explicitly (for example for a completions endpoint without prompt log-probabilities), and
``--metadata '{"repeats": K}'`` sets k (lm-eval's command line cannot set ``repeats``).

The columns (``capcal_tasks.calibration_columns``) depend on all questions, so the task computes them once
from all of its instances when lm-eval asks for the first question's results, and returns each question's
items; lm-eval's ``mean`` aggregation then gives each column and its standard error (jackknife; see
``capcal_tasks.calibration_columns``). The samples file (``--log_samples``) is not needed. With several
ranks (``world_size > 1``) each rank only sees its own questions and the columns would average per-rank
statistics: the task refuses to run that way.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from copy import deepcopy
from typing import Any

from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask
from lm_eval.api.utils import ends_with_whitespace

from capcal_tasks.calibration_columns import (
    COLUMNS,
    STDERR_DOES_NOT_COVER,
    QuestionData,
    calibration_columns,
    value_without_standard_error,
)
from capcal_tasks.confidence import ptrue, verbalized
from capcal_tasks.settings import parse_bool

__all__ = ["PTRUE_CHOICES", "CalibrationTask", "RequestIndex"]

logger = logging.getLogger(__name__)

PTRUE_CHOICES = ("Yes", "No")  # as the P(True) tasks' doc_to_choice (capcal_tasks/_ptrue_template_yaml)
PTRUE_DELIMITER = " "  # as their target_delimiter
# the keyword arguments of lm-eval's build_all_requests that its fewshot_context renders a prompt with
RENDERING = ("system_instruction", "apply_chat_template", "fewshot_as_multiturn", "chat_template")


class RequestIndex:
    """The ``idx`` of each request of a question."""

    SAMPLING = 0
    PTRUE_YES = 1
    PTRUE_NO = 2
    VERBALIZED = 3


class CalibrationTask(ConfigurableTask):
    """A capcal sampling task that also asks for P(True) and a verbalized confidence, and reports
    calibration columns (see the module).

    Why one class of about 200 lines: each method overrides one hook of lm-eval's ``ConfigurableTask``
    (config, requests, few-shot context, results). The calibration columns (``calibration_columns``) and
    the confidence parsers (``confidence.ptrue``, ``confidence.verbalized``) are their own modules.
    """

    def __init__(self, config: dict | None = None) -> None:
        config = {key: value for key, value in (config or {}).items() if key != "class"}
        name = config.get("task", "calibration task")
        verbalized_kwargs = config.pop("verbalized_generation_kwargs", None)
        if not isinstance(verbalized_kwargs, dict):
            raise ValueError(f"{name}: the config needs verbalized_generation_kwargs (a mapping)")
        score_sampling = config.get("process_results")
        if not callable(score_sampling):
            raise ValueError(f"{name}: process_results must be the sampling task's scoring function")
        metadata = config.get("metadata") or {}
        if "repeats" in metadata:
            config["repeats"] = _positive_integer(metadata["repeats"], f"{name}: metadata repeats")
        config["metric_list"] = [
            {"metric": column.name, "aggregation": "mean", "higher_is_better": column.higher_is_better}
            for column in COLUMNS
        ]
        # the prompt doc_to_text gives while fewshot_context renders a confidence request (else None)
        self._confidence_prompt: Callable[[dict], str] | None = None
        super().__init__(config=config)
        if self.config.output_type != "generate_until" or len(self._filters) != 1:
            raise ValueError(f"{name}: expected a generate_until task with one (keep-all) filter")
        self._check_repeats(self.config.repeats)
        self._score_sampling: Callable[[dict, list], dict] = score_sampling
        self._verbalized_kwargs: dict[str, Any] = dict(verbalized_kwargs)
        try:
            self._ptrue_setting = parse_bool(metadata["ptrue"]) if "ptrue" in metadata else None
        except ValueError as error:
            raise ValueError(f"{name}: metadata ptrue: {error}") from None
        self._with_ptrue = self._ptrue_setting is not False
        self._items: dict[int, dict[str, float]] | None = None
        self._bookkeeping: dict[str, Any] | None = None
        # the prompt settings of the build_all_requests under way (None outside one)
        self._rendering: dict[str, Any] | None = None

    # --- configuration ----------------------------------------------------------------------------------

    def set_config(self, key: str, value: Any, update: bool = False) -> None:
        """As lm-eval's; ``--gen_kwargs`` (an update of ``generation_kwargs``) also updates the verbalized
        generation; ``repeats`` (capcal eval's ``--repeats``) is checked like the YAML's."""
        if key == "repeats":
            self._check_repeats(value)
        super().set_config(key, value, update=update)
        if key == "generation_kwargs" and update and isinstance(value, dict):
            self._verbalized_kwargs.update(value)

    def _check_repeats(self, repeats: Any) -> None:
        if int(repeats or 1) < 2:
            raise ValueError(
                f"{self.config.task}: repeats must be >= 2 (k samples per question), got {repeats}"
            )

    def dump_config(self) -> dict:
        """As lm-eval's, plus the verbalized generation and, after scoring, ``capcal_calibration``: k, whether
        P(True) was requested, why each NaN column is undefined, and which standard errors do not cover."""
        config = {**super().dump_config(), "verbalized_generation_kwargs": dict(self._verbalized_kwargs)}
        if self._bookkeeping is not None:
            config["capcal_calibration"] = dict(self._bookkeeping)
        return config

    # --- requests -----------------------------------------------------------------------------------------

    def build_all_requests(self, **kwargs) -> None:
        if kwargs.get("world_size", 1) > 1:
            raise ValueError(
                f"{self.config.task}: the calibration columns need all questions in one process; run it "
                "with a single rank (world_size 1)"
            )
        self._items = None
        self._bookkeeping = None
        self._with_ptrue = self._ptrue_requested(kwargs.get("chat_template"))
        self._rendering = {key: kwargs[key] for key in RENDERING if key in kwargs}
        try:
            super().build_all_requests(**kwargs)
        finally:
            self._rendering = None

    def _ptrue_requested(self, chat_template: Callable | None) -> bool:
        """False when ``metadata.ptrue`` is false, or when the model behind the chat template raises
        ``NotImplementedError`` for log-likelihoods (probed with an empty list of requests)."""
        if self._ptrue_setting is not None:
            return self._ptrue_setting
        model = getattr(chat_template, "__self__", None)
        if model is None or not hasattr(model, "loglikelihood"):
            return True
        try:
            model.loglikelihood([])
        except NotImplementedError:
            logger.warning(
                "%s: the model (%s) gives no log-likelihoods: P(True) is not requested and the ptrue_* "
                "columns are NaN",
                self.config.task,
                type(model).__name__,
            )
            return False
        return True

    def doc_to_text(self, doc: dict, doc_to_text=None):
        if self._confidence_prompt is not None and doc_to_text is None:
            return self._confidence_prompt(doc)
        return super().doc_to_text(doc, doc_to_text)

    def _confidence_context(self, doc: dict, prompt: Callable[[dict], str], rendering: dict) -> str:
        """A confidence prompt (``ptrue.capability_prompt``, ``verbalized.capability_prompt``) as lm-eval's
        ``fewshot_context`` renders it zero-shot with ``rendering`` (system instruction, chat template)."""
        self._confidence_prompt = prompt
        try:
            return super().fewshot_context(
                doc=doc, num_fewshot=0, gen_prefix=self.doc_to_prefix(doc), **rendering
            )
        finally:
            self._confidence_prompt = None

    def construct_requests(self, doc: dict, ctx: Any, **kwargs) -> list[Instance]:
        """The question's requests (see the module): ``ctx`` (the sampling prompt from ``fewshot_context``:
        a str, or lm-eval's ``JsonChatStr`` for a chat API) k times, P(True)'s Yes and No and the verbalized
        confidence, the last three rendered here with the settings of the ``build_all_requests`` under way
        (outside one: ``apply_chat_template`` and ``chat_template`` as given, no system instruction).
        lm-eval's ``metadata`` (task, doc_id, repeats) is optional, as lm-eval's own
        ``construct_requests`` takes it."""
        apply_chat_template = kwargs.pop("apply_chat_template", False)
        chat_template = kwargs.pop("chat_template", None)
        task, doc_id, _ = kwargs.pop("metadata", (self.config.task, None, None))
        rendering = self._rendering
        if rendering is None:
            rendering = {"apply_chat_template": apply_chat_template, "chat_template": chat_template}

        def request(request_type: str, arguments: tuple, idx: int, repeats: int) -> Instance:
            return Instance(request_type, doc, arguments, idx, metadata=(task, doc_id, repeats), **kwargs)

        requests = [
            request(
                "generate_until",
                (ctx, deepcopy(self.config.generation_kwargs)),
                RequestIndex.SAMPLING,
                int(self.config.repeats),
            )
        ]
        if self._with_ptrue:
            gen_prefix = self.config.gen_prefix
            delimiter = (
                PTRUE_DELIMITER
                if not apply_chat_template or (gen_prefix and not ends_with_whitespace(gen_prefix))
                else ""
            )
            ptrue_context = self._confidence_context(doc, ptrue.capability_prompt, rendering)
            for idx, choice in zip(
                (RequestIndex.PTRUE_YES, RequestIndex.PTRUE_NO), PTRUE_CHOICES, strict=True
            ):
                requests.append(request("loglikelihood", (ptrue_context, f"{delimiter}{choice}"), idx, 1))
        verbalized_context = self._confidence_context(doc, verbalized.capability_prompt, rendering)
        requests.append(
            request(
                "generate_until",
                (verbalized_context, deepcopy(self._verbalized_kwargs)),
                RequestIndex.VERBALIZED,
                1,
            )
        )
        return requests

    # --- results ------------------------------------------------------------------------------------------

    def aggregation(self) -> dict[str, Callable]:
        """As lm-eval's (``mean`` for every column), except for the columns whose standard error is undefined
        on this run: :func:`value_without_standard_error`, the same mean, for which lm-eval reports "N/A"."""
        aggregations = dict(super().aggregation())
        for column in (self._bookkeeping or {}).get("stderr_undefined", {}):
            aggregations[column] = value_without_standard_error
        return aggregations

    def process_results(self, doc: dict, results: list) -> dict[str, float]:
        """The question's column items. ``results[0]`` is the question's list of k responses; the items are
        computed for all questions at the first call (from the task's instances, after lm-eval's filters)."""
        if "bypass" in self._metric_fn_list:  # --predict_only
            return {"bypass": None}
        if self._items is None:
            self._items = self._all_items()
        try:
            return self._items[id(results[0])]
        except KeyError:
            raise ValueError(
                f"{self.config.task}: process_results was given responses that are not this run's; the "
                "calibration columns are computed by lm-eval's evaluator from the task's own instances"
            ) from None

    def _all_items(self) -> dict[int, dict[str, float]]:
        """Column items per question, keyed by the identity of the question's filtered sampling responses."""
        (filter_name,) = [ensemble.name for ensemble in self._filters]
        by_question: dict[int, dict[int, Instance]] = defaultdict(dict)
        for instance in self.instances:
            by_question[instance.doc_id][instance.idx] = instance
        keys, questions = [], []
        for doc_id in sorted(by_question):
            parts = by_question[doc_id]
            sampling = parts[RequestIndex.SAMPLING]
            responses = sampling.filtered_resps[filter_name]
            record = self._score_sampling(sampling.doc, [responses])
            p_true = None
            if RequestIndex.PTRUE_YES in parts:
                answers = [
                    parts[idx].filtered_resps[filter_name][0]
                    for idx in (RequestIndex.PTRUE_YES, RequestIndex.PTRUE_NO)
                ]
                p_true = ptrue.process_results(sampling.doc, answers)["p_true"]
            response = parts[RequestIndex.VERBALIZED].filtered_resps[filter_name][0]
            confidence = verbalized.process_results(sampling.doc, [response])["verbalized_confidence"]
            keys.append(id(responses))
            questions.append(
                QuestionData(record["correctness"], record["extracted_answers"], p_true, confidence)
            )
        table = calibration_columns(questions, task=self.config.task)
        self._bookkeeping = {
            "samples_per_question": table.samples_per_question,
            "ptrue_requested": table.ptrue_requested,
            "undefined_columns": table.undefined,
            "left_out_columns": table.left_out,
            "stderr_undefined": table.stderr_undefined,
            "stderr_does_not_cover": dict(STDERR_DOES_NOT_COVER),
        }
        return dict(zip(keys, table.rows, strict=True))


def _positive_integer(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
        raise ValueError(f"{what} must be a positive integer, got {value!r}")
    number = int(value)
    if number < 1:
        raise ValueError(f"{what} must be a positive integer, got {value!r}")
    return number
