"""Identity and seed of each sampled response, independent of batching and ``--limit``.

A response is identified by (run seed, task, stable question id, request index, repeat index). Its seed is a
64-bit hash of that tuple, so the same response is drawn whatever else is in the batch, whatever the batch
size and whichever ``--limit`` selected the question; different repeats of one question get unrelated seeds.
"""

from __future__ import annotations

import hashlib
import json

from lm_eval.utils import handle_non_serializable, hash_string

__all__ = ["sample_seed", "stable_question_id"]


def stable_question_id(task: str, doc: object) -> str:
    """The id under which a question's samples and activations are keyed.

    ``doc["question_id"]`` when the task provides one (capcal's tasks do); otherwise ``"{task}/doc-{hash}"``
    with lm-eval's ``doc_hash`` (sha256 of the JSON-dumped doc), the fallback ``analysis.runs.load_run`` uses.
    """
    if isinstance(doc, dict) and doc.get("question_id"):
        return str(doc["question_id"])
    doc_json = json.dumps(doc, indent=2, default=handle_non_serializable, ensure_ascii=False)
    return f"{task}/doc-{hash_string(doc_json)}"


def sample_seed(run_seed: int, task: str, question_id: str, request_index: int, repeat: int) -> int:
    """Seed (0 <= seed < 2**63) of one sampled response: a hash of its identity, not of its batch position."""
    identity = json.dumps([int(run_seed), task, question_id, int(request_index), int(repeat)])
    digest = hashlib.sha256(identity.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)
