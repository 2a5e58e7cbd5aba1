"""The one definition of a question's id, used by every task, the samplers, the caches and the analysis.

- ``question_id(dataset, text)``: ``"{dataset}/{h}"`` with h the first 16 hex digits of the sha256 of
  the question text with its whitespace collapsed to single spaces (capcal's tasks put it in
  ``doc["question_id"]``).
- ``doc_question_id(task, doc)``: the id a logged document is keyed under: ``doc["question_id"]`` when
  the task provides one, else ``"{task}/doc-{hash}"`` with lm-eval's ``doc_hash`` (sha256 of the
  JSON-dumped doc).

A question id names a question within a dataset, not within a task: two tasks on one dataset (SimpleQA and
SimpleQA-Verified) share ids, so joins also key on the task.
"""

from __future__ import annotations

import hashlib
import json

from lm_eval.utils import handle_non_serializable, hash_string

__all__ = ["doc_question_id", "fallback_question_id", "question_id"]


def question_id(dataset: str, text: str) -> str:
    """A stable id for a question: the dataset name and a hash of the question's text."""
    digest = hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()[:16]
    return f"{dataset}/{digest}"


def fallback_question_id(task: str, doc_hash: str) -> str:
    """The id of a document without ``question_id``: ``"{task}/doc-{doc_hash}"``."""
    return f"{task}/doc-{doc_hash}"


def doc_question_id(task: str, doc: object) -> str:
    """The id under which a question's samples and activations are keyed.

    ``doc["question_id"]`` when the task provides one (capcal's tasks do); otherwise ``"{task}/doc-{hash}"``
    with lm-eval's ``doc_hash`` (sha256 of the JSON-dumped doc, as in lm-eval's samples files).
    """
    if isinstance(doc, dict) and doc.get("question_id"):
        return str(doc["question_id"])
    doc_json = json.dumps(doc, indent=2, default=handle_non_serializable, ensure_ascii=False)
    return fallback_question_id(task, hash_string(doc_json))
