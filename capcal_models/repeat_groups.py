"""The k clones of a repeated-sampling request, gathered into one group with reproducible per-sample seeds.

lm-eval's evaluator turns ``repeats: k`` into k references to the same ``Instance`` in the request list. A
``RepeatGroup`` collects the positions of the clones of one (task, question, request index, prompt, generation
setting), so a backend can sample k responses from one request and put response i at the group's i-th
position. Sample i's seed comes from ``capcal_models.seeding.sample_seed`` and so depends on the question, not
on the batch, the batch size or ``--limit``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import torch
from lm_eval.api.instance import Instance

from capcal_models.seeding import sample_seed, stable_question_id

__all__ = ["RepeatGroup", "group_repeats", "request_question_id", "resolve_run_seed", "setting_key"]

logger = logging.getLogger(__name__)


def setting_key(gen_kwargs: dict) -> str:
    """A canonical string for a generation setting (key order and value types do not matter)."""
    return json.dumps(gen_kwargs, sort_keys=True, default=str)


@dataclass
class RepeatGroup:
    """The clones of one request: same task, question, request index, prompt and generation setting."""

    task: str
    question_id: str
    request_index: int
    context: Hashable
    gen_kwargs: dict
    positions: list[int] = field(default_factory=list)

    @property
    def k(self) -> int:
        """Number of samples the group needs (its number of clones)."""
        return len(self.positions)

    def seed(self, run_seed: int, repeat: int) -> int:
        """Seed of sample ``repeat`` (0-based) of this group."""
        return sample_seed(run_seed, self.task, self.question_id, self.request_index, repeat)


def request_question_id(request: Instance) -> str:
    """The stable question id of a request: its document's (``capcal_models.seeding.stable_question_id``), or
    ``"{task}/prompt-{hash}"`` of its prompt when it has no document (requests built by hand)."""
    task = request.task_name or ""
    if isinstance(request.doc, dict) and request.doc:
        return stable_question_id(task, request.doc)
    digest = hashlib.sha256(str(request.args[0]).encode("utf-8")).hexdigest()[:16]
    return f"{task}/prompt-{digest}"


def group_repeats(requests: Sequence[Instance]) -> list[RepeatGroup]:
    """Group the requests by (task, doc_id, request index, prompt, generation setting), in first-seen order.

    Clones need not be adjacent; a group's positions are in request order, which is repeat order.
    """
    groups: dict[tuple, RepeatGroup] = {}
    for position, request in enumerate(requests):
        context, gen_kwargs = request.args[0], request.args[1]
        task = request.task_name or ""
        key = (task, request.doc_id, request.idx, context, setting_key(gen_kwargs))
        group = groups.get(key)
        if group is None:
            group = RepeatGroup(task, request_question_id(request), request.idx, context, gen_kwargs)
            groups[key] = group
        group.positions.append(position)
    return list(groups.values())


def resolve_run_seed(model_seed: int | None, gen_kwargs_seed: object, backend: str) -> int:
    """The run seed from which every sample seed derives, in the order capcal's wrappers share.

    The model argument ``seed`` when given; else a ``seed`` in the task's generation kwargs (which stock
    lm-eval would pass to every clone, making the k samples identical; here it only selects the run seed);
    else lm-eval's torch seed (``--seed``, default 1234).
    """
    if model_seed is not None:
        if gen_kwargs_seed is not None and int(gen_kwargs_seed) != int(model_seed):
            logger.warning(
                "%s: seed=%s in the generation kwargs is ignored; the model argument seed=%d is the run seed",
                backend,
                gen_kwargs_seed,
                model_seed,
            )
        return int(model_seed)
    if gen_kwargs_seed is not None:
        logger.warning(
            "%s: seed=%s in the generation kwargs is used as the run seed; each sample still gets its own "
            "seed derived from it (stock lm-eval would give all k clones this one seed)",
            backend,
            gen_kwargs_seed,
        )
        return int(gen_kwargs_seed)
    return int(torch.initial_seed())
