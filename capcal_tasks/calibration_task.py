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

What does not depend on capcal's datasets (the requests per question, the filter pipeline applied to the
sampling requests only, the columns from all instances, their aggregation and bookkeeping) is
:class:`CalibrationColumns`, which ``capcal_tasks.sampled_calibration.SampledCalibrationTask`` shares: the
calibration task of a stock lm-eval task (``<task>_calibration``), whose sampling is the wrapped task's and
whose confidence prompts are those of its separate ``<task>_ptrue`` and ``<task>_verbalized`` tasks.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping
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

__all__ = [
    "PTRUE_CHOICES",
    "CalibrationColumns",
    "CalibrationTask",
    "RequestIndex",
    "column_metric_list",
    "ptrue_delimiter",
]

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


def column_metric_list() -> list[dict[str, Any]]:
    """The calibration columns as an lm-eval ``metric_list`` (``mean`` aggregation each)."""
    return [
        {"metric": column.name, "aggregation": "mean", "higher_is_better": column.higher_is_better}
        for column in COLUMNS
    ]


def ptrue_delimiter(apply_chat_template: bool, gen_prefix: str | None) -> str:
    """lm-eval's ``multiple_choice`` delimiter rule for P(True)'s continuations: " " after a plain prompt,
    none after a chat template's generation prompt unless a ``gen_prefix`` not ending in white space is
    set."""
    if not apply_chat_template or (gen_prefix and not ends_with_whitespace(gen_prefix)):
        return PTRUE_DELIMITER
    return ""


class CalibrationColumns:
    """What every calibration task shares, mixed into an lm-eval ``ConfigurableTask`` subclass: the requests
    of a question (module docstring; the sampling request's filter pipeline applied to the sampling requests
    only), the model probe for log-likelihoods, the calibration columns from all instances
    (``capcal_tasks.calibration_columns``), their aggregation and the ``capcal_calibration`` bookkeeping.

    Its users: :class:`CalibrationTask` (capcal's own datasets) and
    ``capcal_tasks.sampled_calibration.SampledCalibrationTask`` (a wrapped stock lm-eval task). A user
    implements ``_question_sampling`` (the labels and answer classes of a question's k filtered responses),
    ``_ptrue_context`` and ``_verbalized_context`` (the confidence prompts), and calls
    ``_init_calibration`` in its ``__init__``.
    """

    # the attributes of the lm-eval task this is mixed into
    config: Any
    _filters: list
    _instances: list[Instance]
    _metric_fn_list: dict

    def _init_calibration(
        self,
        verbalized_kwargs: Mapping[str, Any] | None,
        metadata: Mapping[str, Any],
        unavailable: Mapping[str, str] | None = None,
    ) -> None:
        """The calibration state: the verbalized generation settings (None: no verbalized request),
        ``metadata.ptrue``, and ``unavailable`` (source -> why the run cannot give it,
        ``calibration_columns``)."""
        self._check_repeats(self.config.repeats)
        self._verbalized_kwargs: dict[str, Any] | None = (
            None if verbalized_kwargs is None else dict(verbalized_kwargs)
        )
        try:
            self._ptrue_setting = parse_bool(metadata["ptrue"]) if "ptrue" in metadata else None
        except ValueError as error:
            raise ValueError(f"{self.config.task}: metadata ptrue: {error}") from None
        self._with_ptrue = self._ptrue_setting is not False
        self._unavailable: dict[str, str] = dict(unavailable or {})
        self._items: dict[int, dict[str, Any]] | None = None
        self._bookkeeping: dict[str, Any] | None = None
        # the prompt settings of the build_all_requests under way (None outside one)
        self._rendering: dict[str, Any] | None = None

    # --- the user's part ----------------------------------------------------------------------------------

    def _question_sampling(self, doc: dict, responses: list) -> tuple[list[int], list, dict[str, Any]]:
        """(0/1 label per response, answer class per response (None: no answer), further items of the
        question's row) of one question's k filtered responses."""
        raise NotImplementedError

    def _ptrue_context(self, doc: dict, rendering: dict) -> tuple[str, str | None]:
        """(the P(True) prompt of ``doc`` rendered with ``rendering``, the gen_prefix that its delimiter rule
        reads)."""
        raise NotImplementedError

    def _verbalized_context(self, doc: dict, rendering: dict) -> str:
        """The verbalized-confidence prompt of ``doc`` rendered with ``rendering``."""
        raise NotImplementedError

    # --- configuration ----------------------------------------------------------------------------------

    def set_config(self, key: str, value: Any, update: bool = False) -> None:
        """As lm-eval's; ``--gen_kwargs`` (an update of ``generation_kwargs``) also updates the verbalized
        generation; ``repeats`` (capcal eval's ``--repeats``) is checked like the YAML's."""
        if key == "repeats":
            self._check_repeats(value)
        super().set_config(key, value, update=update)  # type: ignore[misc]
        if key == "generation_kwargs" and update and isinstance(value, dict) and self._verbalized_kwargs:
            self._verbalized_kwargs.update(value)

    def _check_repeats(self, repeats: Any) -> None:
        if int(repeats or 1) < 2:
            raise ValueError(
                f"{self.config.task}: repeats must be >= 2 (k samples per question), got {repeats}"
            )

    def dump_config(self) -> dict:
        """As lm-eval's, plus the verbalized generation and, after scoring, ``capcal_calibration``: k, whether
        P(True) and the verbalized confidence were requested, why each NaN column is undefined, and which
        standard errors do not cover."""
        config = dict(super().dump_config())  # type: ignore[misc]
        if self._verbalized_kwargs is not None:
            config["verbalized_generation_kwargs"] = dict(self._verbalized_kwargs)
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
            super().build_all_requests(**kwargs)  # type: ignore[misc]
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
            ptrue_context, gen_prefix = self._ptrue_context(doc, rendering)
            delimiter = ptrue_delimiter(apply_chat_template, gen_prefix)
            for idx, choice in zip(
                (RequestIndex.PTRUE_YES, RequestIndex.PTRUE_NO), PTRUE_CHOICES, strict=True
            ):
                requests.append(request("loglikelihood", (ptrue_context, f"{delimiter}{choice}"), idx, 1))
        if self._verbalized_kwargs is not None:
            requests.append(
                request(
                    "generate_until",
                    (self._verbalized_context(doc, rendering), deepcopy(self._verbalized_kwargs)),
                    RequestIndex.VERBALIZED,
                    1,
                )
            )
        return requests

    def apply_filters(self) -> None:
        """The task's filter pipeline on the sampling requests only (a regex pipeline would fail on P(True)'s
        log-likelihood pairs); every other request's responses pass unchanged under the pipeline's name."""
        sampling = [i for i in self._instances if i.idx == RequestIndex.SAMPLING]
        for ensemble in self._filters:
            if sampling:
                ensemble.apply(sampling)
            for instance in self._instances:
                if instance.idx != RequestIndex.SAMPLING:
                    instance.filtered_resps[ensemble.name] = instance.resps

    # --- results ------------------------------------------------------------------------------------------

    def aggregation(self) -> dict[str, Callable]:
        """As lm-eval's (``mean`` for every column), except for the columns whose standard error is undefined
        on this run: :func:`value_without_standard_error`, the same mean, for which lm-eval reports "N/A"."""
        aggregations = dict(super().aggregation())  # type: ignore[misc]
        for column in (self._bookkeeping or {}).get("stderr_undefined", {}):
            aggregations[column] = value_without_standard_error
        return aggregations

    def process_results(self, doc: dict, results: list) -> dict[str, Any]:
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

    def _all_items(self) -> dict[int, dict[str, Any]]:
        """Column items per question, keyed by the identity of the question's filtered sampling responses."""
        (filter_name,) = [ensemble.name for ensemble in self._filters]
        by_question: dict[int, dict[int, Instance]] = defaultdict(dict)
        for instance in self._instances:
            by_question[instance.doc_id][instance.idx] = instance
        keys, questions, extras = [], [], []
        for doc_id in sorted(by_question):
            parts = by_question[doc_id]
            sampling = parts[RequestIndex.SAMPLING]
            responses = sampling.filtered_resps[filter_name]
            labels, classes, extra = self._question_sampling(sampling.doc, responses)
            p_true = None
            if RequestIndex.PTRUE_YES in parts:
                answers = [
                    parts[idx].filtered_resps[filter_name][0]
                    for idx in (RequestIndex.PTRUE_YES, RequestIndex.PTRUE_NO)
                ]
                p_true = ptrue.process_results(sampling.doc, answers)["p_true"]
            confidence = None
            if RequestIndex.VERBALIZED in parts:
                response = parts[RequestIndex.VERBALIZED].filtered_resps[filter_name][0]
                confidence = verbalized.process_results(sampling.doc, [response])["verbalized_confidence"]
            keys.append(id(responses))
            questions.append(QuestionData(labels, classes, p_true, confidence))
            extras.append(extra)
        table = calibration_columns(questions, task=self.config.task, unavailable=self._unavailable)
        self._bookkeeping = {
            "samples_per_question": table.samples_per_question,
            "ptrue_requested": table.ptrue_requested,
            "verbalized_requested": self._verbalized_kwargs is not None,
            "undefined_columns": table.undefined,
            "left_out_columns": table.left_out,
            "stderr_undefined": table.stderr_undefined,
            "stderr_does_not_cover": dict(STDERR_DOES_NOT_COVER),
        }
        rows = [{**row, **extra} for row, extra in zip(table.rows, extras, strict=True)]
        return dict(zip(keys, rows, strict=True))


class CalibrationTask(CalibrationColumns, ConfigurableTask):
    """A capcal sampling task that also asks for P(True) and a verbalized confidence, and reports
    calibration columns (see the module).

    Each method overrides one hook of lm-eval's ``ConfigurableTask`` (config, few-shot context); the requests,
    filters, columns and bookkeeping are :class:`CalibrationColumns`', the confidence parsers
    ``confidence.ptrue`` and ``confidence.verbalized``.
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
        config["metric_list"] = column_metric_list()
        # the prompt doc_to_text gives while fewshot_context renders a confidence request (else None)
        self._confidence_prompt: Callable[[dict], str] | None = None
        super().__init__(config=config)
        if self.config.output_type != "generate_until" or len(self._filters) != 1:
            raise ValueError(f"{name}: expected a generate_until task with one (keep-all) filter")
        self._score_sampling: Callable[[dict, list], dict] = score_sampling
        self._init_calibration(verbalized_kwargs, metadata)

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

    def _ptrue_context(self, doc: dict, rendering: dict) -> tuple[str, str | None]:
        return self._confidence_context(doc, ptrue.capability_prompt, rendering), self.config.gen_prefix

    def _verbalized_context(self, doc: dict, rendering: dict) -> str:
        return self._confidence_context(doc, verbalized.capability_prompt, rendering)

    def _question_sampling(self, doc: dict, responses: list) -> tuple[list[int], list, dict[str, Any]]:
        """The dataset's checker (the sampling task's ``process_results``): its labels, extracted answers."""
        record = self._score_sampling(doc, [responses])
        return record["correctness"], record["extracted_answers"], {}


def _positive_integer(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
        raise ValueError(f"{what} must be a positive integer, got {value!r}")
    number = int(value)
    if number < 1:
        raise ValueError(f"{what} must be a positive integer, got {value!r}")
    return number
