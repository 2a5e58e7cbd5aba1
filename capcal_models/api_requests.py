"""The requests capcal-api sends: which samples are still needed, in which requests, with which seeds.

For sampling, a repeat group (``capcal_models.sampling_plan.RepeatGroup``: the k clones of one question)
whose samples are not all in the cache becomes one request per run of consecutive missing repeats, with ``n``
= its length and the seed s + r of its first repeat r, s the seed of repeat 0 (vLLM gives choice i that seed
+ i, so repeat r always has seed s + r), or, with ``supports_n`` off, one request per missing repeat with its
own seed (``RepeatGroup.seed``). When a server returns fewer choices than ``n``,
``follow_up_jobs`` asks for each of the rest in a request of its own. For first-token log-likelihoods
(P(True)), the requests that share a question and a prompt (its answer words) become one greedy request
(``context_groups``).

A request's cache key (``capcal_models.sample_cache.request_key``) is the hash of ``request_identity``: the
endpoint, the server URL without credentials, the payload without ``seed`` and ``n``, the run seed, the task,
the question id and the request index. The samples of a key are indexed by repeat, so the key does not depend
on how the repeats were split into requests. This module builds ``Job``s for
``capcal_models.http_transport``; it sends nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from lm_eval.api.instance import Instance

from capcal_models.http_transport import Job
from capcal_models.sampling_plan import RepeatGroup, request_question_id

__all__ = [
    "RequestOrigin",
    "context_groups",
    "follow_up_jobs",
    "request_identity",
    "request_job",
    "sampling_jobs",
]


@dataclass(frozen=True)
class RequestOrigin:
    """What a request samples for: its repeat group, run seed and sample cache key (a ``Job``'s tag)."""

    group: RepeatGroup
    run_seed: int
    key: str


def request_identity(
    endpoint: str, url: str, group: RepeatGroup, payload: dict, run_seed: int, kind: str
) -> dict:
    """What a request's samples depend on (hashed into its cache key): everything but ``seed`` and ``n``,
    which depend on the repeats a request carries, not on what the samples are."""
    request = {name: value for name, value in payload.items() if name not in ("seed", "n")}
    return {
        "kind": kind,
        "endpoint": endpoint,
        "url": url,
        "request": request,
        "run_seed": run_seed,
        "task": group.task,
        "question_id": group.question_id,
        "request_index": group.request_index,
    }


def request_job(
    origin: RequestOrigin, payload: dict, repeats: list[int], parse: Callable[[dict], list[str]]
) -> Job:
    """One request for ``repeats`` of ``origin``'s group, named by its task and question in failure
    reports."""
    group = origin.group
    return Job(payload, parse, repeats, group.task, group.question_id, origin)


def sampling_jobs(
    origin: RequestOrigin,
    payload: dict,
    missing: Sequence[int],
    supports_n: bool,
    parse: Callable[[dict], list[str]],
) -> Iterator[Job]:
    """The requests for the ``missing`` repeats of a group. With ``supports_n``: one request per run of
    consecutive missing repeats r_0, ..., r_0 + m - 1, with ``n = m`` (left out for m = 1) and seed s + r_0,
    s the seed of repeat 0: vLLM gives choice i the seed + i, so repeat r has seed s + r however the repeats
    are split (all k at once, the rest of a cached run, an adaptive run's later looks), as in capcal-vllm.
    Without it: one request per repeat with its own seed (``RepeatGroup.seed``)."""
    group = origin.group
    if supports_n:
        batches: list[list[int]] = []
        for repeat in missing:
            if batches and repeat == batches[-1][-1] + 1:
                batches[-1].append(repeat)
            else:
                batches.append([repeat])
    else:
        batches = [[repeat] for repeat in missing]
    for repeats in batches:
        seed = (
            group.seed(origin.run_seed, 0) + repeats[0]
            if supports_n
            else group.seed(origin.run_seed, repeats[0])
        )
        job_payload = dict(payload, seed=seed)
        if len(repeats) > 1:
            job_payload["n"] = len(repeats)
        yield request_job(origin, job_payload, repeats, parse)


def follow_up_jobs(job: Job, rest: Sequence[int]) -> list[Job]:
    """One request per repeat in ``rest`` (each with its own seed and no ``n``): the repeats a response to
    ``job`` left out, when the server returned fewer choices than ``n``."""
    origin: RequestOrigin = job.tag
    follow_ups = []
    for repeat in rest:
        payload = {name: value for name, value in job.payload.items() if name != "n"}
        payload["seed"] = origin.group.seed(origin.run_seed, repeat)
        follow_ups.append(request_job(origin, payload, [repeat], job.parse))
    return follow_ups


def context_groups(requests: Sequence[Instance]) -> list[RepeatGroup]:
    """Log-likelihood requests grouped by (task, doc_id, prompt), in first-seen order: each group is one
    request, whose first answer token gives every answer word of the group (``positions`` in request order).
    Request index 0 and no generation kwargs: the request is greedy and its seed is repeat 0's."""
    groups: dict[tuple, RepeatGroup] = {}
    for position, request in enumerate(requests):
        task, context = request.task_name or "", request.args[0]
        group = groups.get((task, request.doc_id, context))
        if group is None:
            group = RepeatGroup(task, request_question_id(request), 0, context, {})
            groups[(task, request.doc_id, context)] = group
        group.positions.append(position)
    return list(groups.values())
