"""capcal-hf: lm-eval's Hugging Face model with fast, independent, reproducible repeated sampling.

Stock lm-eval ``hf`` turns ``repeats: k`` into k identical requests: k prefills of the same prompt, and
samples that depend on the batch they land in. ``CapcalHFLM`` (registered as ``capcal-hf``) is an ``HFLM``
whose ``generate_until``

- takes its sampling jobs from ``capcal_models.sampling_plan`` (shared with capcal-vllm and capcal-api):
  the k clones of a question form one group, whose prompt is prefilled once; its KV cache is shared by the
  k rows, which decode batched with the rows of other questions (``capcal_models.decoding``,
  ``capcal_models.kv_cache``);
- seeds each sample from (run seed, task, stable question id, request index, repeat index)
  (``capcal_models.seeding``), so a sample does not change with the batch size, ``--limit`` or the other
  questions in the run; its random numbers are a counter-based stream of that seed, computed on the device
  for the whole batch (``seeding.sample_uniforms``). The run seed is the model argument ``seed``, else a
  ``seed`` in the task's generation kwargs, else lm-eval's torch seed (``--seed``; lm-eval's default is
  1234);
- samples like transformers' ``generate`` (temperature, top-k, top-p, min-p; unset values from the model's
  generation config, then transformers' defaults, which include top_k=50), honours ``until`` per row, EOS and
  ``max_gen_toks``, and returns the texts in lm-eval's request order, post-processed like stock ``hf``;
- decodes greedily once per unique prompt and copies the text to the k clones when the setting is greedy
  (``do_sample`` false or temperature 0: ``capcal_models.sampling_plan.is_greedy``);
- with ``activations=DIR`` writes the prompt activations of every unique prompt from that same prefill
  (``capcal_models.activations``; read them with ``analysis.runs.activations.load_activations``);
- commits every sample to an on-disk cache (``capcal_models.sample_cache``; ``cache_path``, default
  ``$CAPCAL_HOME/cache/hf/samples.sqlite``; ``sample_cache=False`` turns it off) as soon as its row finishes
  decoding, so a killed run restarts where it stopped: cached samples are read back, a question with some
  repeats cached decodes only the others (each sample has its own seed), and a question whose samples are
  all cached is only prefilled when its activations are still missing. Greedy decodes are cached too (as
  repeat 0, without the run seed in the key). The key (``sample_identity``) covers the model
  (``model_identity``: name or resolved path, revision, loaded commit, dtype, and the name, size and mtime
  of every file of a local model, tokenizer, PEFT or delta folder), the prompt's token ids, the resolved
  sampling parameters, the random stream (``seeding.RANDOM_STREAM``), ``max_gen_toks``, stop sequences,
  EOS ids, run seed, task, question id and request index; not k (a run with more repeats reuses the cached
  ones), the device or the batch size. The value is the sample's generated token ids (JSON), decoded and
  post-processed as a fresh sample is. A model passed as an object has no stable identity and is never
  cached. Samples decoded after a restart share batches with other rows than before and still equal an
  uninterrupted run's: decoding is batch-invariant (docs/model-wrappers.md; with ``attention=batched``, a
  GPU's default, in distribution only).

``--batch_size`` is the most samples (rows) decoded at once, as for stock ``hf``. Log-likelihood requests
(P(True), self-check) are scored by ``capcal_models.loglikelihood``: one forward pass per context for all its
continuations, a document's shared prompt prefilled once, batch-invariant, equal to ``HFLM``'s results;
``--batch_size`` is then the most segments per forward pass. ``loglikelihood_rolling`` is ``HFLM``'s.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from functools import partial
from pathlib import Path

from lm_eval.api.instance import Instance
from lm_eval.api.registry import register_model
from lm_eval.models.huggingface import HFLM
from lm_eval.models.utils import handle_stop_sequences, postprocess_generated_text
from tqdm import tqdm

from capcal_models.activations import ActivationWriter
from capcal_models.decoding import (
    ATTENTION_MODES,
    TRANSFORMERS_SAMPLING_DEFAULTS,
    PromptJob,
    SamplingParams,
    StopSequences,
    resolve_sampling_params,
    sample_continuations,
)
from capcal_models.kv_cache import unsupported_attention
from capcal_models.loglikelihood import encode_requests, score_loglikelihoods
from capcal_models.sample_cache import open_sample_cache, request_key
from capcal_models.sampling_plan import RepeatGroup, SamplingPlan, SamplingSetting
from capcal_models.seeding import RANDOM_STREAM

__all__ = ["CapcalHFLM"]

logger = logging.getLogger(__name__)


@register_model("capcal-hf")
class CapcalHFLM(HFLM):
    """``HFLM`` with shared-prefill, per-sample-seeded repeated sampling (see the module docstring).

    Extra model arguments: ``seed`` (the run seed for sampling), ``activations`` (a folder for prompt
    activations), ``cache_path`` and ``sample_cache`` (the on-disk sample cache), ``attention``
    (``capcal_models.decoding.sample_continuations``: ``exact``, ``batched``, or ``auto``, the default:
    exact on the CPU, batched on a GPU). Everything else is ``HFLM``'s.

    Why one class of about 260 lines: it is lm-eval's ``LM`` interface for a Hugging Face model, and each
    concept it uses has its own module (``decoding``: the shared-prefill decode loop; ``kv_cache``;
    ``loglikelihood``: scoring; ``sampling_plan``: which samples a call needs; ``sample_cache``;
    ``activations``). What stays here is the wiring that needs the loaded model's state: its identity, and
    ``_generate_setting``, which joins the plan, the cache, the decoder and the activation hook for one
    setting.
    """

    def __init__(
        self,
        *args,
        seed: int | None = None,
        activations: str | None = None,
        cache_path: str | None = None,
        sample_cache: bool = True,
        attention: str = "auto",
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        if attention not in ("auto", *ATTENTION_MODES):
            raise ValueError(f"capcal-hf: attention={attention!r}; use auto, {', '.join(ATTENTION_MODES)}")
        if attention == "auto":
            attention = "exact" if self.model.device.type == "cpu" else "batched"
        self.attention = attention
        if self.backend != "causal":
            raise ValueError("capcal-hf supports decoder-only (causal) models; use hf for seq2seq models")
        unsupported = unsupported_attention(self.config)
        if unsupported is not None:
            raise ValueError(
                f"capcal-hf cannot sample from {type(self.model).__name__} exactly ({unsupported}); "
                "use the hf model"
            )
        self.run_seed = None if seed is None else int(seed)
        model_name = self.pretrained if isinstance(self.pretrained, str) else type(self.model).__name__
        self.activation_writer = ActivationWriter(activations, model_name) if activations else None
        identity = self.model_identity()
        self.model_key = None if identity is None else request_key(identity)
        self.cache = None
        if identity is None:
            logger.info("capcal-hf: the model was passed as an object (no stable identity): no sample cache")
        else:
            self.cache = open_sample_cache(cache_path, sample_cache, "hf")
        self.stats = {"cached_samples_used": 0, "samples_generated": 0}

    def model_identity(self) -> dict | None:
        """What identifies the weights (for sample cache keys), None for a model passed as an object.

        The name or resolved local path, revision, the commit transformers loaded (hub models), dtype, and the
        name, size and mtime of every file (hidden ones excluded) of each local folder among the model, its
        tokenizer, PEFT adapter and delta weights: replacing a checkpoint file changes the key, copying the
        folder elsewhere does too (a cache miss, never a wrong hit). Contents are not hashed (a large
        checkpoint would take minutes).
        """
        if not isinstance(self.pretrained, str):
            return None
        sources = {
            "pretrained": self.pretrained,
            "tokenizer": getattr(self.tokenizer, "name_or_path", None),
            "peft": self.peft,
            "delta": self.delta,
        }
        return {
            "backend": "capcal-hf",
            "sources": {name: source_identity(value) for name, value in sources.items() if value},
            "revision": self.revision,
            "commit": getattr(self.config, "_commit_hash", None),
            "dtype": str(self.model.dtype),
        }

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

    def loglikelihood(self, requests: list[Instance], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """``(log-likelihood, is_greedy)`` per request, as ``HFLM`` computes them, from
        ``capcal_models.loglikelihood`` (grouped by context, document prefixes prefilled once)."""
        if self.enable_thinking:
            return super().loglikelihood(requests, disable_tqdm=disable_tqdm)  # HFLM raises its error
        encoded = encode_requests(requests, self._encode_pair, self.tok_encode, self.prefix_token_id)
        progress = tqdm(
            total=len(requests), disable=disable_tqdm or self.rank != 0, desc="capcal-hf: scoring"
        )

        def answered(index: int) -> None:
            progress.update(1)

        results = score_loglikelihoods(
            self, encoded, self._rows_per_batch(), self._loglikelihood_tokens, on_answer=answered
        )
        progress.close()
        for request, result in zip(encoded, results, strict=True):
            self.cache_hook.add_partial("loglikelihood", request.request, result)
        return results

    def generate_until(self, requests: list[Instance], disable_tqdm: bool = False) -> list[str]:
        plan = SamplingPlan(
            requests,
            backend="capcal-hf",
            model_seed=self.run_seed,
            default_max_gen_toks=self.max_gen_toks,
            default_temperature=self._default_temperature(),
        )
        progress = tqdm(
            total=len(requests), disable=disable_tqdm or self.rank != 0, desc="capcal-hf: sampling"
        )
        before = dict(self.stats)
        for setting in plan.settings:
            self._generate_setting(plan, setting, progress)
        progress.close()
        if self.activation_writer is not None:
            self.activation_writer.flush()
        logger.info(
            "capcal-hf: %d samples read from the sample cache (%s), %d generated",
            self.stats["cached_samples_used"] - before["cached_samples_used"],
            self.cache.path if self.cache is not None else "off",
            self.stats["samples_generated"] - before["samples_generated"],
        )
        return plan.results

    def _default_temperature(self) -> float:
        """The temperature of a request that sets none: the generation config's, else transformers'."""
        configured = getattr(self.model.generation_config, "temperature", None)
        return float(TRANSFORMERS_SAMPLING_DEFAULTS["temperature"] if configured is None else configured)

    def _generate_setting(self, plan: SamplingPlan, setting: SamplingSetting, progress: tqdm) -> None:
        """Sample every group of one generation setting and put the texts at the groups' request positions."""
        eos_text = self.tok_decode(self.eot_token_id, skip_special_tokens=False)
        until = handle_stop_sequences(list(setting.until), eos=eos_text)
        max_gen_toks = setting.max_gen_toks
        params = resolve_sampling_params(
            dict(setting.options, do_sample=not setting.greedy), self.model.generation_config
        )
        logger.info(
            "capcal-hf: run seed %d, %s, max_gen_toks %d, until %r",
            setting.run_seed,
            params,
            max_gen_toks,
            until,
        )

        eos_token_ids = self._eos_token_ids()
        jobs: list[tuple[RepeatGroup, dict[int, list[int]], _Pending | None]] = []
        pending: dict[int, _Pending] = {}  # id(prompt job) -> its pending samples
        for group in setting.groups:
            token_ids = self._encode_prompt(group.context, max_gen_toks)
            key = None
            if self.cache is not None:
                identity = self.sample_identity(
                    group, token_ids, params, max_gen_toks, until, eos_token_ids, setting.run_seed
                )
                key = request_key(identity)
            cached, missing = setting.look_up(self.cache, key, group)
            found = {repeat: json.loads(value) for repeat, value in cached.items()}
            self.stats["cached_samples_used"] += len(found)
            if not setting.greedy:
                progress.update(len(found))
            on_prefill = self._activation_hook(group)
            entry = None
            if missing or on_prefill is not None:
                seeds = [setting.seed(group, repeat) for repeat in missing]
                entry = _Pending(PromptJob(token_ids, seeds, on_prefill), key, missing)
                pending[id(entry.job)] = entry
            jobs.append((group, found, entry))

        def samples_done(finished: list[tuple[PromptJob, int]]) -> None:
            self.stats["samples_generated"] += len(finished)
            if self.cache is not None:  # committed at once: a killed run keeps every finished sample
                rows = {}
                for job, sample in finished:
                    entry = pending[id(job)]
                    rows[(entry.key, entry.repeats[sample])] = json.dumps(job.outputs[sample])
                self.cache.put_many(rows)
            if not setting.greedy:
                progress.update(len(finished))

        sample_continuations(
            self.model,
            sorted((entry.job for entry in pending.values()), key=lambda job: -len(job.token_ids)),
            params,
            max_new_tokens=max_gen_toks,
            stop=StopSequences(self.tokenizer, until),
            eos_token_ids=eos_token_ids,
            max_rows=self._rows_per_batch(),
            on_samples_done=samples_done,
            attention=self.attention,
        )
        for group, found, entry in jobs:
            tokens = dict(found)
            if entry is not None:
                tokens.update(zip(entry.repeats, entry.job.outputs, strict=True))
            texts = [self._decode(tokens[repeat], until) for repeat in sorted(tokens)]
            plan.fill(setting, group, texts, self.cache_hook)
            if setting.greedy:
                progress.update(group.k)

    def sample_identity(
        self,
        group: RepeatGroup,
        token_ids: list[int],
        params: SamplingParams,
        max_gen_toks: int,
        until: list[str],
        eos_token_ids: set[int],
        run_seed: int,
    ) -> dict:
        """Everything that defines a group's samples (the sample cache key; the repeat index is the second
        key). Greedy samples do not depend on the run seed, which is left out for them."""
        return {
            "kind": "generate",
            "value": "generated token ids",
            "model": self.model_key,
            "prompt_token_ids": token_ids,
            "sampling": dataclasses.asdict(params),
            "random_stream": RANDOM_STREAM if params.do_sample else None,
            "max_gen_toks": max_gen_toks,
            "until": until,
            "eos_token_ids": sorted(eos_token_ids),
            "run_seed": run_seed if params.do_sample else None,
            "task": group.task,
            "question_id": group.question_id,
            "request_index": group.request_index,
        }

    def _activation_hook(self, group: RepeatGroup):
        """The prefill hook that records this group's activations, None when they are already recorded."""
        writer = self.activation_writer
        if writer is None or not writer.wants(group.task, group.question_id, group.context):
            return None
        return partial(writer.add, group.task, group.question_id, group.context)

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
        info["capcal_sampler"] = f"capcal-hf: shared prefill, per-sample seeds ({RANDOM_STREAM})"
        info["capcal_attention"] = self.attention
        if self.run_seed is not None:
            info["capcal_run_seed"] = self.run_seed
        info["capcal_sample_cache"] = str(self.cache.path) if self.cache is not None else None
        info["capcal_cached_samples_used"] = self.stats["cached_samples_used"]
        info["capcal_samples_generated"] = self.stats["samples_generated"]
        return info


@dataclasses.dataclass(eq=False)
class _Pending:
    """A prompt job and what its samples are: the cache key and the repeat index of each seed."""

    job: PromptJob
    key: str | None
    repeats: list[int]


def source_identity(source: str) -> dict:
    """A model source for ``model_identity``: a hub name as given; a local folder or file by its resolved
    path and the (relative name, size, mtime in ns) of its files."""
    path = Path(source).expanduser()
    if not path.exists():
        return {"name": source}
    path = path.resolve()
    files = [path] if path.is_file() else sorted(_visible_files(path))
    stats = []
    for file in files:
        status = file.stat()
        name = file.name if file == path else file.relative_to(path).as_posix()
        stats.append([name, status.st_size, status.st_mtime_ns])
    return {"path": str(path), "files": stats}


def _visible_files(folder: Path) -> list[Path]:
    found = []
    for root, directories, names in os.walk(folder, followlinks=True):
        directories[:] = [name for name in directories if not name.startswith(".")]
        found += [Path(root) / name for name in names if not name.startswith(".")]
    return found
