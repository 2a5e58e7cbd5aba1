"""Identity and seed of each sampled response, independent of batching and ``--limit``.

A response is identified by (run seed, task, stable question id, request index, repeat index). Its seed is a
64-bit hash of that tuple, so the same response is drawn whatever else is in the batch, whatever the batch
size and whichever ``--limit`` selected the question; different repeats of one question get unrelated seeds.
"""

from __future__ import annotations

import hashlib
import json

__all__ = ["sample_seed"]


def sample_seed(run_seed: int, task: str, question_id: str, request_index: int, repeat: int) -> int:
    """Seed (0 <= seed < 2**63) of one sampled response: a hash of its identity, not of its batch position."""
    identity = json.dumps([int(run_seed), task, question_id, int(request_index), int(repeat)])
    digest = hashlib.sha256(identity.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)
