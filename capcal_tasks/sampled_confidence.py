"""P(True), capability form, on the questions of a stock lm-eval task that capcal samples
(``capcal_tasks.sampled_task``).

capcal's own P(True) tasks ask "Are you able to answer the question correctly?" after the question text
(``capcal_tasks.prompts.ptrue_capability_prompt``). A stock task has no question-text field; its question is
what its own ``doc_to_text`` shows zero-shot, so that text stands in for the question, with a leading
question label (``Question:``, ``Q:``, ``Problem:``) and a final answer cue (a last line that starts with
``Answer:``, ``A:`` or ``Solution:``, e.g. ``A: Let's think step by step.``) removed: the model is asked about
the question, not invited to answer it.

``ptrue_task(base, target)`` is an lm-eval ``multiple_choice`` task (choices Yes / No, as
``capcal_tasks/_ptrue_template_yaml``) over the base task's evaluation docs, each with ``question_id`` (the
id the wrapped task's samples are keyed under: ``capcal_tasks.question_id.doc_question_id`` of the
unmodified doc under the wrapped task's name) and ``question_text``; its records join the sampling records
as capcal's own P(True) records do (``metadata.capcal_target_task``). ``capcal eval --repeats k --metadata
'{"capcal_confidences": ["ptrue"]}'`` adds one, named ``<task>_ptrue``, for every wrapped task.
"""

from __future__ import annotations

import re
from typing import Any

import datasets
from lm_eval.api.task import ConfigurableTask

from capcal_tasks.confidence.ptrue import capability_prompt, process_results
from capcal_tasks.question_id import doc_question_id

__all__ = ["CONFIDENCES_KEY", "ptrue_task", "question_text"]

#: the metadata key that asks for confidence tasks on the wrapped tasks' questions
CONFIDENCES_KEY = "capcal_confidences"
_LEADING_LABEL = re.compile(r"^\s*(?:Question|Q|Problem)\s*:\s*", re.IGNORECASE)
_ANSWER_CUE = re.compile(r"\n[ \t]*(?:Answer|A|Solution)[ \t]*:[^\n]*\s*$", re.IGNORECASE)


def question_text(prompt: str) -> str:
    """A stock task's zero-shot prompt as a question: its leading question label and final answer-cue line
    removed (module docstring); the prompt stripped when it has neither."""
    text = _ANSWER_CUE.sub("", prompt.rstrip())
    return _LEADING_LABEL.sub("", text).strip()


def ptrue_task(base: ConfigurableTask, target: str) -> ConfigurableTask:
    """The capability-form P(True) task on ``base``'s evaluation docs, for the wrapped task named ``target``
    (its samples' question ids), named ``<target>_ptrue``."""
    docs: list[dict[str, Any]] = []
    for doc in base.eval_docs:
        prompt = base.doc_to_text(doc)
        docs.append(
            {
                **doc,
                "question_id": doc_question_id(target, doc),
                "question_text": question_text(prompt if isinstance(prompt, str) else str(prompt)),
            }
        )
    rows = datasets.Dataset.from_list(docs)
    version = (base.config.metadata or {}).get("version")
    config = {
        "task": f"{target}_ptrue",
        "output_type": "multiple_choice",
        "custom_dataset": lambda **_: datasets.DatasetDict({"test": rows}),
        "test_split": "test",
        "doc_to_text": capability_prompt,
        "doc_to_choice": ["Yes", "No"],
        "doc_to_target": "Yes",
        "target_delimiter": " ",
        "process_results": process_results,
        "repeats": 1,
        "num_fewshot": 0,
        "metric_list": [
            {"metric": "p_true", "aggregation": "mean", "higher_is_better": True},
            {"metric": "logprob_yes", "aggregation": "mean", "higher_is_better": True},
            {"metric": "logprob_no", "aggregation": "mean", "higher_is_better": False},
        ],
        "metadata": {
            "version": 1.0,
            "capcal_task": "ptrue",
            "capcal_role": "confidence",
            "capcal_target_task": target,
            "capcal_dataset": f"lm_eval/{base.config.task}",
            "capcal_question_text": "the task's zero-shot prompt, its question label and answer cue removed",
            "base_version": version,
        },
    }
    return ConfigurableTask(config=config)
