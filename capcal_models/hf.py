"""capcal-hf: lm-eval's Hugging Face model with fast, independent, reproducible repeated sampling.

Stock lm-eval ``hf`` turns ``repeats: k`` into k identical requests: k prefills of the same prompt, and
samples that depend on the batch they land in. ``CapcalHFLM`` (registered as ``capcal-hf``) is an ``HFLM``
whose ``generate_until``

- groups the k clones of a question (``capcal_models.repeat_groups``) into one prompt that is prefilled
  once; its KV cache is shared by the k rows, which decode batched with the rows of other questions
  (``capcal_models.decoding``, ``capcal_models.kv_cache``);
- seeds each sample from (run seed, task, stable question id, request index, repeat index)
  (``capcal_models.seeding``), so a sample does not change with the batch size, ``--limit`` or the other
  questions in the run. The run seed is the model argument ``seed``, else a ``seed`` in the task's generation
  kwargs, else lm-eval's torch seed (``--seed``; lm-eval's default is 1234);
- samples like transformers' ``generate`` (temperature, top-k, top-p, min-p; unset values from the model's
  generation config, then transformers' defaults, which include top_k=50), honours ``until`` per row, EOS and
  ``max_gen_toks``, and returns the texts in lm-eval's request order, post-processed like stock ``hf``;
- decodes greedily once per unique prompt and copies the text to the k clones when ``do_sample`` is false;
- with ``activations=DIR`` writes the prompt activations of every unique prompt from that same prefill
  (``capcal_models.activations``; read them with ``analysis.activations.load_activations``).

``--batch_size`` is the most samples (rows) decoded at once, as for stock ``hf``. Log-likelihood requests use
``HFLM`` unchanged.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from functools import partial

from lm_eval.api.instance import Instance
from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM
from lm_eval.models.utils import handle_stop_sequences, normalize_gen_kwargs, postprocess_generated_text
from tqdm import tqdm

from capcal_models.activations import ActivationWriter
from capcal_models.decoding import (
    PromptJob,
    SamplingParams,
    StopSequences,
    resolve_sampling_params,
    sample_continuations,
)
from capcal_models.repeat_groups import RepeatGroup, group_repeats, resolve_run_seed, setting_key

__all__ = ["CapcalHFLM"]

logger = logging.getLogger(__name__)


@register_model("capcal-hf")
class CapcalHFLM(HFLM):
    """``HFLM`` with shared-prefill, per-sample-seeded repeated sampling (see the module docstring).

    Extra model arguments: ``seed`` (the run seed for sampling) and ``activations`` (a folder for prompt
    activations). Everything else is ``HFLM``'s.
    """

    def __init__(self, *args, seed: int | None = None, activations: str | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.backend != "causal":
            raise ValueError("capcal-hf supports decoder-only (causal) models; use hf for seq2seq models")
        layer_types = set(getattr(self.config, "layer_types", None) or ["full_attention"])
        if layer_types != {"full_attention"}:
            raise ValueError(
                f"capcal-hf decodes full-attention layers only; this model has {sorted(layer_types)}"
            )
        self.run_seed = None if seed is None else int(seed)
        model_name = self.pretrained if isinstance(self.pretrained, str) else type(self.model).__name__
        self.activation_writer = ActivationWriter(activations, model_name) if activations else None

    def _rows_per_batch(self) -> int:
        return int(self.batch_size) if str(self.batch_size).isdigit() else int(self.max_batch_size)

    def _encode_prompt(self, context: str, max_gen_toks: int) -> list[int]:
        max_context_tokens = self.max_length - max_gen_toks
        if max_context_tokens <= 0:
            raise ValueError(
                f"max_gen_toks={max_gen_toks} leaves no room for the prompt (max_length {self.max_length})"
            )
        input_ids, _ = self.tok_batch_encode(
            [context], left_truncate_len=max_context_tokens, truncation=self.truncation
        )
        return input_ids[0].tolist()

    def _decode(self, tokens: list[int], until: list[str]) -> str:
        if isinstance(self.think_end_token, int) and self.think_end_token in tokens:
            last = len(tokens) - 1 - tokens[::-1].index(self.think_end_token)
            text = self.tok_decode(tokens[last + 1 :]).lstrip()
        else:
            text = self.tok_decode(tokens)
        think_end = self.think_end_token if isinstance(self.think_end_token, str) else None
        return postprocess_generated_text(generation=text, stop=until, think_end_token=think_end)

    def generate_until(self, requests: list[Instance], disable_tqdm: bool = False) -> list[str]:
        results: list[str | None] = [None] * len(requests)
        progress = tqdm(
            total=len(requests), disable=disable_tqdm or self.rank != 0, desc="capcal-hf: sampling"
        )
        by_setting: dict[str, list[RepeatGroup]] = defaultdict(list)
        for group in group_repeats(requests):
            by_setting[setting_key(group.gen_kwargs)].append(group)
        for groups in by_setting.values():
            self._generate_setting(groups, results, progress)
        progress.close()
        if self.activation_writer is not None:
            self.activation_writer.flush()
        return results

    def _generate_setting(self, groups: list[RepeatGroup], results: list[str | None], progress: tqdm) -> None:
        """Sample every group of one generation setting and put the texts at the groups' request positions."""
        gen_kwargs = dict(groups[0].gen_kwargs)
        run_seed = resolve_run_seed(self.run_seed, gen_kwargs.pop("seed", None), "capcal-hf")
        settings = normalize_gen_kwargs(gen_kwargs, self.max_gen_toks)
        eos_text = self.tok_decode(self.eot_token_id, skip_special_tokens=False)
        until = handle_stop_sequences(settings.pop("until", None), eos=eos_text)
        max_gen_toks = int(settings.pop("max_gen_toks"))
        params = resolve_sampling_params(dict(settings), self.model.generation_config)
        logger.info(
            "capcal-hf: run seed %d, %s, max_gen_toks %d, until %r", run_seed, params, max_gen_toks, until
        )

        jobs = [self._prompt_job(group, params, run_seed, max_gen_toks) for group in groups]
        longest_first = sorted(jobs, key=lambda job: -len(job.token_ids))  # similar lengths batch together
        sample_continuations(
            self.model,
            longest_first,
            params,
            max_new_tokens=max_gen_toks,
            stop=StopSequences(self.tokenizer, until),
            eos_token_ids=self._eos_token_ids(),
            max_rows=self._rows_per_batch(),
            on_sample_done=None if not params.do_sample else partial(progress.update, 1),
        )
        for group, job in zip(groups, jobs, strict=True):
            texts = [self._decode(tokens, until) for tokens in job.outputs]
            if not params.do_sample:  # greedy: one decode, copied to every clone
                texts = texts * group.k
                self.cache_hook.add_partial("generate_until", (group.context, group.gen_kwargs), texts[0])
                progress.update(group.k)
            for position, text in zip(group.positions, texts, strict=True):
                results[position] = text

    def _prompt_job(
        self, group: RepeatGroup, params: SamplingParams, run_seed: int, max_gen_toks: int
    ) -> PromptJob:
        samples = group.k if params.do_sample else 1
        seeds = [group.seed(run_seed, repeat) for repeat in range(samples)]
        on_prefill = None
        writer = self.activation_writer
        if writer is not None and writer.wants(group.task, group.question_id, group.context):
            on_prefill = partial(writer.add, group.task, group.question_id, group.context)
        return PromptJob(self._encode_prompt(group.context, max_gen_toks), seeds, on_prefill)

    def _eos_token_ids(self) -> set[int]:
        """EOS ids that end a sample: the generation config's (as ``generate`` uses) and the tokenizer's."""
        configured = getattr(self.model.generation_config, "eos_token_id", None)
        if configured is None:
            configured = []
        elif not isinstance(configured, list):
            configured = [configured]
        return {int(token) for token in configured} | {int(self.eot_token_id)}

    def get_model_info(self) -> dict:
        info = super().get_model_info()
        info["capcal_sampler"] = "capcal-hf: shared prefill, per-sample seeds"
        if self.run_seed is not None:
            info["capcal_run_seed"] = self.run_seed
        return info
