r"""``<task>_calibration``: a stock lm-eval task sampled k times per question, with P(True) and the verbalized
confidence on its questions, scored as the calibration columns of lm-eval's results table.

``SampledCalibrationTask`` is to a wrapped stock task (``capcal_tasks.sampled_task.SampledTask``) what
``capcal_<dataset>_calibration`` (``capcal_tasks.calibration_task.CalibrationTask``) is to capcal's own
sampling tasks: one lm-eval task that issues per question

- idx 0: the wrapped task's own sampling request (its docs, prompt, description, few-shot examples and stop
  sequences; ``repeats`` = k clones), its one filter pipeline without ``take_first`` applied to these
  requests only, each response scored by the base task's own ``process_results`` exactly as
  ``SampledTask`` scores it (labels, extracted answers, answer classes);
- idx 1, 2: P(True), capability form, on the task's question text: the prompt of the separate
  ``<task>_ptrue`` task (``capcal_tasks.sampled_confidence.ptrue_task``: capcal's P(True) template on
  ``question_text`` of the task's zero-shot prompt, no description, no few-shot examples), rendered by that
  task's own ``fewshot_context``, with ``CalibrationTask``'s chat-template delimiter rule;
- idx 3: the verbalized confidence, capability form, the prompt and generation settings of the separate
  ``<task>_verbalized`` task (``sampled_confidence.verbalized_task``), only where the task's prompt allows it
  (``sampled_confidence.verbalized_problem``; a ``!function`` prompt checked per question). Where it does
  not, the question gets P(True) only and the ``verbalized_*`` columns and
  ``verbalized_parse_failure_rate`` are NaN with the reason in ``configs[task]["capcal_calibration"]``.

The columns, their jackknife items, aggregation and bookkeeping are ``CalibrationTask``'s, by the same code
(``capcal_tasks.calibration_task.CalibrationColumns``, ``capcal_tasks.calibration_columns``); the consistency
columns count the task's answer classes (the filter output, normalised as its metric compares answers) and
are NaN, with the reason, for a task whose pipeline extracts no answer. Each question's row also carries the
sampling record's ``correctness`` and ``extracted_answers`` (aggregated as ``SampledTask`` aggregates them),
so the samples file shows the labels the columns were computed from. The protocol
(``metadata.capcal_sampled``: base task, pipeline, metric, generation settings changed, few-shot) is
``SampledTask``'s; the task declares itself ``capcal_task: leaderboard``, as ``capcal_<dataset>_calibration``
does, so ``capcal check`` and ``report`` read its results file's columns, not its samples.

Two ways in:

- ``capcal eval --tasks gsm8k_calibration --repeats 8``: ``capcal_tasks.task_manager.CapcalTaskManager``
  resolves ``<stock>_calibration`` (a name lm-eval does not know, whose ``<stock>`` is a stock leaf task;
  ``capcal_tasks.task_names.calibration_stem``), refusing a base the admission rule refuses in one line
  before the model loads;
- stock ``lm_eval``: a YAML task ``{task: gsm8k_k8_calibration, class: !function
  capcal_tasks.sampled_calibration.SampledCalibrationTask, metadata: {base_task: gsm8k, k: 8}}`` in an
  ``--include_path`` folder (lm-eval's ``class:`` convention, as ``SampledTask``'s).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lm_eval.api.metrics import mean
from lm_eval.api.task import ConfigurableTask

from capcal_tasks.calibration_task import CalibrationColumns, column_metric_list
from capcal_tasks.sampled_confidence import ptrue_task, question_row, verbalized_task
from capcal_tasks.sampled_task import SampledTask
from capcal_tasks.sampling import extraction_rate, response_accuracy
from capcal_tasks.task_admission import RefusedTask

__all__ = ["SampledCalibrationTask"]

# the sampling record's fields each question's row carries besides the columns, with their aggregations
RECORD_ITEMS = {"correctness": response_accuracy, "extracted_answers": extraction_rate}


class SampledCalibrationTask(CalibrationColumns, SampledTask):
    """A stock lm-eval task sampled k times per question with P(True) and the verbalized confidence on its
    questions, reporting calibration columns (module docstring). Built from a loaded base task (``base``,
    ``k``, ``metadata``, ``name``: default ``<base>_calibration``), or by lm-eval from a YAML ``class:`` entry
    whose metadata names ``base_task`` and ``k``."""

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        base: ConfigurableTask | None = None,
        k: int | None = None,
        metadata: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        if base is not None:
            name = name or f"{base.config.task}_calibration"
        else:
            metadata = dict((config or {}).get("metadata") or {})
        SampledTask.__init__(self, config, base=base, k=k, metadata=metadata, name=name)
        target = str(self.config.task)
        self._ptrue_task = ptrue_task(self.base, target)
        unavailable: dict[str, str] = {}
        self._verbalized_task: ConfigurableTask | None = None
        try:
            self._verbalized_task = verbalized_task(self.base, target)
        except RefusedTask as refusal:
            detail = str(refusal).partition("does not allow: ")[2] or str(refusal)
            unavailable["verbalized"] = (
                f"not asked: the prompt of {self.base.config.task} does not allow the verbalized "
                f"confidence ({detail})"
            )
        if not self.admission.extracts:
            unavailable["consistency"] = (
                f"the pipeline {self.admission.pipeline} of {self.base.config.task} extracts no answer "
                "(whole responses reach its metric): no answer classes to count"
            )
        self.config.metric_list = column_metric_list() + [
            {"metric": metric, "aggregation": "mean", "higher_is_better": True} for metric in RECORD_ITEMS
        ]
        self._aggregation_list = {entry["metric"]: mean for entry in self.config.metric_list}
        self._aggregation_list.update(RECORD_ITEMS)
        self._higher_is_better = {
            entry["metric"]: entry["higher_is_better"] for entry in self.config.metric_list
        }
        self._metric_fn_list = {metric: None for metric in self._aggregation_list}
        self._metric_fn_kwargs = {metric: {} for metric in self._aggregation_list}
        self.config.metadata = {
            **self.config.metadata,
            "capcal_task": "leaderboard",
            "capcal_dataset": f"lm_eval/{self.base.config.task}",
        }
        verbalized_kwargs = (
            None if self._verbalized_task is None else self._verbalized_task.config.generation_kwargs
        )
        self._init_calibration(verbalized_kwargs, dict(metadata or {}), unavailable)

    def _question_sampling(self, doc: dict, responses: list) -> tuple[list[int], list, dict[str, Any]]:
        """``SampledTask``'s record of the question (each response scored by the base task's own
        ``process_results``): its labels, its answer classes, and the record's ``RECORD_ITEMS``."""
        record = SampledTask.process_results(self, doc, [responses])
        classes = [self.answer_class(answer) for answer in record["extracted_answers"]]
        return record["correctness"], classes, {item: record[item] for item in RECORD_ITEMS}

    def _rendered(self, task: ConfigurableTask, doc: dict, rendering: dict) -> str:
        """The zero-shot prompt of the separate confidence ``task`` for the question ``doc``, as that task's
        own ``fewshot_context`` renders it under ``build_all_requests``."""
        row = question_row(self.base, str(self.config.task), doc)
        return task.fewshot_context(row, num_fewshot=0, gen_prefix=task.doc_to_prefix(row), **rendering)

    def _ptrue_context(self, doc: dict, rendering: dict) -> tuple[str, str | None]:
        return self._rendered(self._ptrue_task, doc, rendering), self._ptrue_task.config.gen_prefix

    def _verbalized_context(self, doc: dict, rendering: dict) -> str:
        assert self._verbalized_task is not None  # asked only when there is one (_init_calibration)
        return self._rendered(self._verbalized_task, doc, rendering)
