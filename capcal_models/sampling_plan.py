"""The sampling plan shared by capcal's wrappers: lm-eval's cloned requests turned into sampling jobs.

lm-eval's evaluator turns ``repeats: k`` into k references to the same ``Instance`` in the request list. A
``SamplingPlan`` built from that list

- groups the clones: a ``RepeatGroup`` collects the positions of the clones of one (task, question, request
  index, prompt, generation setting), so a backend samples k responses from one request and puts response i
  at the group's i-th position;
- gathers the groups of one generation setting into a ``SamplingSetting`` and normalises that setting once:
  ``seed`` is taken out and only selects the run seed (``resolve_run_seed``), ``n`` is dropped (n is the
  task's repeats), and lm-eval's ``normalize_gen_kwargs`` gives ``until`` (a list) and ``max_gen_toks`` (an
  int, the default when unset);
- applies one greedy rule (``is_greedy``) for every wrapper;
- gives each sample its seed, ``capcal_models.seeding.sample_seed`` of (run seed, task, question id, request
  index, repeat), so a sample does not depend on the batch, the batch size or ``--limit``;
- looks up which samples of a group an on-disk ``SampleCache`` already holds (``SamplingSetting.look_up``);
- fans the texts out to the clone positions (``SamplingPlan.fill``): a greedy text is decoded once and copied
  to the k clones (and handed to lm-eval's ``--use_cache`` hook, where all clones share one key; sampled
  texts never are).

The greedy rule is lm-eval's: ``normalize_gen_kwargs`` sets ``do_sample`` from the request
(``do_sample=False`` forces temperature 0.0; an unset ``do_sample`` becomes ``temperature > 0``, an unset
temperature read as 0.0), and every backend of lm-eval decodes greedily at temperature 0 (vLLM and the
OpenAI-style APIs read only the temperature). So a setting is greedy when, after ``normalize_gen_kwargs``,
``do_sample`` is false or the temperature the engine uses is 0: the request's, else the engine's default
(transformers: the model's generation config, else 1.0; vLLM: 1.0; lm-eval's API payloads: 0). A greedy
setting decodes one text per question, copied to the k clones; the engine then decodes greedily (capcal-vllm
sends temperature 0).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import torch
from lm_eval.api.instance import Instance
from lm_eval.models.utils import normalize_gen_kwargs

from capcal_models.sample_cache import SampleCache
from capcal_models.seeding import sample_seed
from capcal_tasks.question_id import doc_question_id

__all__ = [
    "RepeatGroup",
    "SamplingPlan",
    "SamplingSetting",
    "group_repeats",
    "is_greedy",
    "request_question_id",
    "resolve_run_seed",
    "setting_key",
]

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
    """The stable question id of a request: its document's (``capcal_tasks.question_id.doc_question_id``), or
    ``"{task}/prompt-{hash}"`` of its prompt when it has no document (requests built by hand)."""
    task = request.task_name or ""
    if isinstance(request.doc, dict) and request.doc:
        return doc_question_id(task, request.doc)
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


def is_greedy(options: dict, default_temperature: float) -> bool:
    """Whether a setting decodes greedily: ``do_sample`` false, or temperature 0 (see the module docstring).

    ``options`` is ``normalize_gen_kwargs``'s output; ``default_temperature`` is the engine's temperature when
    the request sets none.
    """
    if not options.get("do_sample", True):
        return True
    temperature = options.get("temperature")
    return float(default_temperature if temperature is None else temperature) == 0.0


@dataclass
class SamplingSetting:
    """The groups of one generation setting and that setting, normalised.

    ``gen_kwargs``: the requests' own generation kwargs; ``options``: ``normalize_gen_kwargs``'s output
    without ``seed``, ``n``, ``until`` and ``max_gen_toks``; ``until`` (without EOS; engines add theirs) and
    ``max_gen_toks``; ``run_seed``; ``greedy`` (``is_greedy``).
    """

    gen_kwargs: dict
    options: dict
    until: tuple[str, ...]
    max_gen_toks: int
    run_seed: int
    greedy: bool
    groups: list[RepeatGroup] = field(default_factory=list)

    def samples(self, group: RepeatGroup) -> int:
        """Samples to decode for a group: one when greedy (copied to the k clones), else k."""
        return 1 if self.greedy else group.k

    def seed(self, group: RepeatGroup, repeat: int) -> int:
        """Seed of sample ``repeat`` of ``group`` under this setting's run seed."""
        return group.seed(self.run_seed, repeat)

    def normalized(self) -> dict:
        """``options`` with ``until`` (a new list) and ``max_gen_toks``: lm-eval's normalised kwargs."""
        return {**self.options, "until": list(self.until), "max_gen_toks": self.max_gen_toks}

    def look_up(
        self, cache: SampleCache | None, key: str | None, group: RepeatGroup
    ) -> tuple[dict[int, str], list[int]]:
        """(cached samples by repeat index, repeat indices still to decode) of a group's needed samples."""
        needed = self.samples(group)
        found = {}
        if cache is not None and key is not None:
            found = {repeat: value for repeat, value in cache.get(key).items() if repeat < needed}
        return found, [repeat for repeat in range(needed) if repeat not in found]


class SamplingPlan:
    """Sampling jobs for one ``generate_until`` call and the results list they fill (see the module)."""

    def __init__(
        self,
        requests: Sequence[Instance],
        *,
        backend: str,
        model_seed: int | None,
        default_max_gen_toks: int,
        default_temperature: float,
    ) -> None:
        self.backend = backend
        self.results: list[str | None] = [None] * len(requests)
        by_setting: dict[str, list[RepeatGroup]] = {}
        for group in group_repeats(requests):
            by_setting.setdefault(setting_key(group.gen_kwargs), []).append(group)
        self.settings = [
            self._setting(groups, model_seed, default_max_gen_toks, default_temperature)
            for groups in by_setting.values()
        ]

    def _setting(
        self,
        groups: list[RepeatGroup],
        model_seed: int | None,
        default_max_gen_toks: int,
        default_temperature: float,
    ) -> SamplingSetting:
        gen_kwargs = dict(groups[0].gen_kwargs)
        run_seed = resolve_run_seed(model_seed, gen_kwargs.pop("seed", None), self.backend)
        if gen_kwargs.pop("n", None) is not None:
            logger.warning("%s: n in the generation kwargs is ignored; n is the task's repeats", self.backend)
        options = dict(normalize_gen_kwargs(gen_kwargs, default_max_gen_toks))
        until = tuple(options.pop("until", None) or ())
        max_gen_toks = int(options.pop("max_gen_toks"))
        greedy = is_greedy(options, default_temperature)
        return SamplingSetting(groups[0].gen_kwargs, options, until, max_gen_toks, run_seed, greedy, groups)

    def fill(self, setting: SamplingSetting, group: RepeatGroup, texts: list[str], cache_hook=None) -> None:
        """Put a group's texts (one per decoded sample) at its clone positions; a greedy text goes to every
        clone and, with ``cache_hook`` (lm-eval's), into lm-eval's request cache."""
        if setting.greedy:
            if len(texts) != 1:
                raise RuntimeError(f"{self.backend}: {len(texts)} greedy texts for one question, expected 1")
            if cache_hook is not None:
                cache_hook.add_partial("generate_until", (group.context, group.gen_kwargs), texts[0])
            texts = texts * group.k
        if len(texts) != group.k:
            raise RuntimeError(f"{self.backend}: {len(texts)} samples for {group.k} clones")
        for position, text in zip(group.positions, texts, strict=True):
            self.results[position] = text
