"""capcal-api and capcal-api-chat: lm-eval's OpenAI-compatible API models for repeated sampling.

Stock ``local-completions`` / ``local-chat-completions`` send the k clones of a question (``repeats: k``)
as k identical requests, each with ``"seed": 1234``: against vLLM or SGLang the k samples are then
identical. They retry a failed request a few times and then abort the whole run. capcal's subclasses

- send one request per question with ``n = k`` (``supports_n=True``, the default; a server that returns fewer
  choices is detected and the rest is sampled per repeat), or k requests with ``n = 1``
  (``supports_n=False``); seeds come from ``capcal_models.seeding.sample_seed`` (run seed, task, question id,
  request index, repeat): the n = k request carries the seed of its first repeat (vLLM gives choice i that
  seed + i), per-repeat requests carry their own; never one seed for all repeats. The run seed is the model
  argument ``seed``, else a ``seed`` in the generation kwargs, else lm-eval's ``--seed``;
- run up to ``num_concurrent`` requests at once (``capcal_models.http_transport``); retry connection errors
  (refused, reset, closed mid-body), timeouts (``timeout`` seconds per request), 408/409/425/429, 5xx and
  unreadable 200 responses (invalid or truncated JSON, missing choices) with exponential backoff
  (``retry_base_delay`` * 2^attempt, at most ``retry_max_delay``, or the server's ``Retry-After``) up to
  ``max_retries`` times, without stopping the other requests; report what still failed at the end in one
  message (what finished and where it is cached, what did not, how to resume), then raise
  ``APIRequestsFailed`` (or, with ``allow_failures=True``, log it and return empty texts for the failed
  samples);
- count requests, cached samples, retries by cause and failures in ``stats``: one summary line is logged per
  call, and ``get_model_info`` (which lm-eval calls after the run) puts them into the results JSON as
  ``config.capcal_api_stats``;
- keep every received sample in an on-disk cache (``capcal_models.sample_cache``; ``cache_path``, default
  ``$CAPCAL_HOME/cache/api/samples.sqlite``; ``sample_cache=False`` turns it off) keyed by (request, repeat
  index), committed in batches (``sample_cache.BatchedWriter``): once ``cache_commit_rows`` samples (default
  1000) are pending, every ``cache_commit_seconds`` (default 0.2) and at the end of each call. A killed run
  restarts without sampling its committed requests again and loses at most the last uncommitted batch (at
  most ``cache_commit_rows`` samples, received within about the last ``cache_commit_seconds``);
- build requests lazily and keep at most ``4 * num_concurrent`` of them started and unfinished at once
  (``HTTPTransport``'s bounded worker pool): beyond lm-eval's own requests and results, a call's memory does
  not grow with the number of requests;
- read the API key from an environment variable (``api_key_env``, default ``OPENAI_API_KEY``) and send it only
  in the Authorization header (``capcal_models.credentials``); ``api_key`` and ``auth_token`` model arguments
  and credentials in ``base_url`` (user:password@ or a key/token query parameter) are refused, because lm-eval
  writes model arguments into its results files and logs. Error messages are scrubbed of the key;
- answer log-likelihood requests of one-word choices (P(True): "Yes"/"No") from the top log-probabilities of
  the first answer token (``capcal_models.answer_logprobs``): always for ``capcal-api-chat`` (chat endpoints
  have no prompt log-likelihoods), and for ``capcal-api`` with ``first_token_logprobs=True`` (otherwise it
  keeps lm-eval's exact echo log-likelihoods). A word missing from the top ``top_logprobs`` (default 20) gets
  ``MISSING_LOGPROB`` (-100); both missing is a parse failure, counted in a warning. Thinking models: set
  ``think_end_token`` (and ``ptrue_max_tokens`` large enough to finish thinking); the answer token is the
  first one after the last ``think_end_token`` or harmony ``<|channel|>final<|message|>`` header;
- decode once per unique prompt when the setting is greedy (``do_sample`` false or temperature 0, unset
  meaning 0 as in lm-eval's payloads: ``capcal_models.sampling_plan``, shared with capcal-hf and capcal-vllm)
  and copy the text to the k clones, and never write sampled texts to lm-eval's ``--use_cache`` database (all
  k clones share one key there).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import ssl
from collections.abc import Callable, Iterable, Iterator

from lm_eval.api.instance import Instance
from lm_eval.api.registry import register_model
from lm_eval.models.api_models import JsonChatStr
from lm_eval.models.openai_completions import LocalChatCompletion, LocalCompletionsAPI
from lm_eval.models.utils import postprocess_generated_text

from capcal_models.answer_logprobs import (
    MISSING_LOGPROB,
    TokenLogprobs,
    answer_loglikelihoods,
    answer_record,
    chat_token_logprobs,
    completion_token_logprobs,
)
from capcal_models.api_requests import (
    RequestOrigin,
    context_groups,
    follow_up_jobs,
    request_identity,
    request_job,
    sampling_jobs,
)
from capcal_models.api_stats import call_counts, call_summary, new_api_stats
from capcal_models.credentials import EnvironmentKey, public_url, refuse_credentials
from capcal_models.http_transport import (
    APIRequestsFailed,
    FailedRequest,
    HTTPTransport,
    Job,
    RetryPolicy,
    RunSummary,
    failure_report,
)
from capcal_models.sample_cache import open_sample_cache, request_key
from capcal_models.sampling_plan import RepeatGroup, SamplingPlan, resolve_run_seed
from capcal_tasks.settings import parse_bool

__all__ = ["APIRequestsFailed", "CapcalChatAPI", "CapcalCompletionsAPI", "FailedRequest"]

logger = logging.getLogger(__name__)

LMEVAL_NONE_PLACEHOLDER = os.environ.get("LMEVAL_MODEL_NONE_ANSWER_PLACEHOLDER", "")
API_DEFAULT_TEMPERATURE = 0.0  # lm-eval's API payloads send temperature 0 when a request sets none


class _CapcalAPIMixin:
    """The lm-eval side of capcal-api: lm-eval's calls turned into requests, sent, cached and answered.

    The concepts live in their own modules: which requests a call needs (``capcal_models.api_requests``), HTTP
    (concurrency, retries, the failure report: ``capcal_models.http_transport``), the counters
    (``capcal_models.api_stats``), the answer words' log-likelihoods at the first answer token
    (``capcal_models.answer_logprobs``), the credential policy (``capcal_models.credentials``). What stays
    here is lm-eval's interface (``generate_until``, ``loglikelihood``, ``get_model_info``) and the state
    they share for one model object (the cache, the counters, ``supports_n``), so it is one class.
    """

    BACKEND = "capcal-api"
    ENDPOINT = "completions"
    PROMPT_FIELD = "prompt"  # where the payload holds the prompt

    def __init__(
        self,
        *args,
        seed: int | None = None,
        supports_n: bool = True,
        cache_path: str | None = None,
        sample_cache: bool = True,
        cache_commit_rows: int = 1000,
        cache_commit_seconds: float = 0.2,
        allow_failures: bool = False,
        api_key_env: str = "OPENAI_API_KEY",
        max_retries: int = 5,
        retry_base_delay: float = 1.0,
        retry_max_delay: float = 60.0,
        top_logprobs: int = 20,
        ptrue_max_tokens: int | None = None,
        first_token_logprobs: bool = False,
        think_end_token: str | None = None,
        **kwargs,
    ) -> None:
        refuse_credentials(self.BACKEND, kwargs)
        super().__init__(*args, max_retries=max_retries, **kwargs)
        self.run_seed = None if seed is None else int(seed)
        self.supports_n = parse_bool(supports_n)
        self.allow_failures = parse_bool(allow_failures)
        self.key = EnvironmentKey(api_key_env)
        self.retry = RetryPolicy(int(max_retries), float(retry_base_delay), float(retry_max_delay))
        self.top_logprobs = int(top_logprobs)
        self.ptrue_max_tokens = None if ptrue_max_tokens is None else int(ptrue_max_tokens)
        self.first_token_logprobs = parse_bool(first_token_logprobs)
        self.think_end_token = think_end_token
        self.cache = open_sample_cache(cache_path, sample_cache, "api")
        self.cache_commit_rows = int(cache_commit_rows)
        self.cache_commit_seconds = float(cache_commit_seconds)
        if self.cache_commit_rows < 1 or self.cache_commit_seconds <= 0:
            raise ValueError(
                f"{self.BACKEND}: cache_commit_rows must be >= 1 and cache_commit_seconds > 0, not "
                f"{cache_commit_rows} and {cache_commit_seconds}"
            )
        self.stats: dict = new_api_stats()
        self.failures: list[FailedRequest] = []

    # --- credentials: read from the environment on use, never stored on the object -------------------------

    @property
    def api_key(self) -> str:  # type: ignore[override]
        return self.key.value

    @property
    def header(self) -> dict:  # type: ignore[override]
        return self.key.header()

    # --- prompts and payloads ------------------------------------------------------------------------------

    def _prompt(self, context, max_gen_toks: int):
        """What goes into the payload for one context (endpoint-specific)."""
        raise NotImplementedError

    def _parse_texts(self, response: dict) -> list[str]:
        """Generated texts of a response, in choice order (endpoint-specific)."""
        raise NotImplementedError

    def _postprocess(self, text: str, until: list[str]) -> str:
        return postprocess_generated_text(text, until, self.think_end_token)

    def _key(self, group: RepeatGroup, payload: dict, run_seed: int, kind: str) -> str:
        """The sample cache key of a request (``api_requests.request_identity``, hashed)."""
        url = public_url(self.base_url)
        return request_key(request_identity(self.ENDPOINT, url, group, payload, run_seed, kind))

    # --- generation ----------------------------------------------------------------------------------------

    def generate_until(self, requests: list[Instance], disable_tqdm: bool = False) -> list[str]:
        before = copy.deepcopy(self.stats)
        plan = SamplingPlan(
            requests,
            backend=self.BACKEND,
            model_seed=self.run_seed,
            default_max_gen_toks=self._max_gen_toks,
            default_temperature=API_DEFAULT_TEMPERATURE,
        )
        samples: dict[str, dict[int, str]] = {}  # request key -> samples (from the cache, then received)
        keys = []  # (setting, group, key)

        def jobs() -> Iterator[Job]:
            """The requests still to send, built one at a time as the transport's workers take them."""
            for setting in plan.settings:
                options = setting.normalized()
                if options.get("top_k") in (0, -1):
                    # no top-k (capcal tasks set top_k: 0) is every server's default; OpenAI's API rejects it
                    del options["top_k"]
                for group in setting.groups:
                    payload = self._create_payload(
                        self._prompt(group.context, setting.max_gen_toks),
                        generate=True,
                        gen_kwargs=dict(options, until=list(setting.until)),
                        seed=0,
                        eos=self.eos_string if self.ENDPOINT == "completions" else None,
                    )
                    key = self._key(group, payload, setting.run_seed, "generate")
                    found, missing = setting.look_up(self.cache, key, group)
                    samples[key] = found
                    keys.append((setting, group, key))
                    self.stats["samples_needed"] += setting.samples(group)
                    self.stats["cached_samples_used"] += len(found)
                    if not missing:
                        continue
                    origin = RequestOrigin(group, setting.run_seed, key)
                    # read per request: once a server returned fewer choices than n, _split turns n off
                    yield from sampling_jobs(origin, payload, missing, self.supports_n, self._parse_texts)

        def received(job: Job, new: dict[int, str]) -> None:
            samples[job.tag.key].update(new)

        summary = self._run(jobs(), "sampling", disable_tqdm, received)
        for setting, group, key in keys:
            found = samples[key]
            texts = [
                self._postprocess(found[repeat], list(setting.until))
                if repeat in found
                else LMEVAL_NONE_PLACEHOLDER
                for repeat in range(setting.samples(group))
            ]
            plan.fill(setting, group, texts, self.cache_hook if 0 in found else None)
        self._finish(summary, "sampling", before)
        return plan.results

    # --- log-likelihoods of one-word answers from the first answer token ----------------------------------

    def loglikelihood(self, requests: list[Instance], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        if not self.first_token_logprobs:
            return super().loglikelihood(requests, disable_tqdm=disable_tqdm)
        # one request per (question, context); each answer choice reads its word from the same position
        groups = context_groups(requests)
        max_tokens = self.ptrue_max_tokens or (self._max_gen_toks if self.think_end_token else 1)
        before = copy.deepcopy(self.stats)
        plans, jobs = [], []
        for group in groups:
            run_seed = resolve_run_seed(self.run_seed, None, self.BACKEND)
            payload = self._logprobs_payload(self._prompt(group.context, max_tokens), max_tokens)
            payload["seed"] = group.seed(run_seed, 0)
            key = self._key(group, payload, run_seed, "first_token_logprobs")
            cached = self.cache.get(key) if self.cache is not None else {}
            plans.append((key, group.positions, cached))
            self.stats["samples_needed"] += 1
            if 0 in cached:
                self.stats["cached_samples_used"] += 1
            else:
                origin = RequestOrigin(group, run_seed, key)
                jobs.append(request_job(origin, payload, [0], self._parse_answer_position))

        summary = self._run(jobs, "first-token log-probabilities", disable_tqdm)
        found = {job.tag.key: job.samples[0] for job in jobs if 0 in job.samples}
        results: list[tuple[float, bool] | None] = [None] * len(requests)
        unparsed = 0
        for key, positions, cached in plans:
            record = cached[0] if 0 in cached else found.get(key)
            pairs = answer_loglikelihoods(record, [requests[position].args[1] for position in positions])
            for position, pair in zip(positions, pairs, strict=True):
                results[position] = pair
            if all(logprob <= MISSING_LOGPROB for logprob, _ in pairs):
                unparsed += 1
        if unparsed:
            logger.warning(
                "%s: %d of %d questions have none of their answer words among the top-%d tokens of the first "
                "answer token (parse failures: their log-likelihoods are all %s)",
                self.BACKEND,
                unparsed,
                len(plans),
                self.top_logprobs,
                MISSING_LOGPROB,
            )
        self._finish(summary, "first-token log-probabilities", before)
        return results

    def _logprobs_payload(self, prompt, max_tokens: int) -> dict:
        """A greedy request of ``max_tokens`` tokens that returns the top log-probabilities of each token."""
        return {
            "model": self.model,
            self.PROMPT_FIELD: prompt,
            "max_tokens": max_tokens,
            "temperature": 0,
            **self._logprobs_fields(),
        }

    def _logprobs_fields(self) -> dict:
        """The payload fields that ask for the top log-probabilities (endpoint-specific)."""
        raise NotImplementedError

    def _answer_tokens(self, choice: dict) -> list[TokenLogprobs]:
        """The generated tokens of a choice with their top log-probabilities (endpoint-specific)."""
        raise NotImplementedError

    def _parse_answer_position(self, response: dict) -> list[str]:
        """The first answer token's record (``answer_logprobs.answer_record``: the cached value)."""
        return [answer_record(self._answer_tokens(response["choices"][0]), self.think_end_token)]

    # --- HTTP (capcal_models.http_transport), the cache, the failure report ---------------------------------

    def _ssl(self) -> ssl.SSLContext | bool | None:
        if not self.verify_certificate:
            return False
        if self.ca_cert_path:
            return ssl.create_default_context(cafile=self.ca_cert_path)
        return None

    def _run(
        self,
        jobs: Iterable[Job],
        what: str,
        disable_tqdm: bool,
        received: Callable[[Job, dict[int, str]], None] | None = None,
    ) -> RunSummary:
        """Send ``jobs`` (a list or a generator), committing each response's samples through a
        ``BatchedWriter`` (closed, so every received sample is committed, before this returns or raises) and
        passing them to ``received``."""
        transport = HTTPTransport(
            self.base_url,
            name=self.BACKEND,
            concurrency=self._concurrent,
            timeout=self.timeout,
            retry=self.retry,
            ssl_context=self._ssl(),
            headers=self.key.header,
            redact=self.key.redact,
            stats=self.stats,
        )
        writer = None
        if self.cache is not None:
            writer = self.cache.writer(self.cache_commit_rows, self.cache_commit_seconds)

        def store(job: Job, samples: dict[int, str]) -> None:
            if writer is not None:
                writer.put(job.tag.key, samples)
            if received is not None:
                received(job, samples)

        def counted(jobs: Iterable[Job]) -> Iterator[Job]:
            for job in jobs:
                self.stats["requests_needed"] += 1
                yield job

        total = len(jobs) if isinstance(jobs, list) else None
        try:
            return transport.run(
                counted(jobs),
                what,
                on_received=store,
                split=self._split,
                progress=not disable_tqdm,
                total=total,
            )
        finally:
            if writer is not None:
                writer.close()

    def _split(self, job: Job, rest: list[int]) -> list[Job]:
        """The server returned fewer choices than n: sample the other repeats one request each (each with
        its own seed) and stop sending n."""
        if self.supports_n:
            logger.warning(
                "%s: the server returned %d choices for n=%d; sampling the other repeats one request each "
                "(supports_n=False from now on)",
                self.BACKEND,
                len(job.repeats) - len(rest),
                len(job.repeats),
            )
            self.supports_n = False
        return follow_up_jobs(job, rest)

    def _finish(self, summary: RunSummary, what: str, before: dict) -> None:
        """Log the call's one-line summary; report the requests that still failed (raise, or log them with
        ``allow_failures=True``)."""
        failed = summary.failed
        missing = sum(len(job.missing()) for job in failed)
        self.stats["failed_requests"] += len(failed)
        self.stats["missing_samples"] += missing
        now, by_cause = call_counts(self.stats, before)
        logger.info("%s", call_summary(self.BACKEND, what, now, by_cause))
        report, failures = failure_report(
            failed,
            name=self.BACKEND,
            what=what,
            max_retries=self.retry.max_retries,
            samples_needed=now["samples_needed"],
            cached_samples=now["cached_samples_used"],
            received_samples=now["samples_received"],
            cache_path=self.cache.path if self.cache is not None else None,
            total=summary.jobs,
        )
        if not failures:
            return
        self.failures.extend(failures)
        report = self.key.redact(report)
        if self.allow_failures:
            logger.error("%s\nThe failed samples are empty strings (allow_failures=True).", report)
        else:
            raise APIRequestsFailed(report, failures)

    def get_model_info(self) -> dict:
        info = {
            "capcal_sampler": f"{self.BACKEND}: n=k (supports_n={self.supports_n}), per-sample seeds",
            "capcal_api_cache": str(self.cache.path) if self.cache is not None else None,
        }
        if self.run_seed is not None:
            info["capcal_run_seed"] = self.run_seed
        info["capcal_api_stats"] = copy.deepcopy(self.stats)  # lm-eval calls this after the run
        return info


@register_model("capcal-api")
class CapcalCompletionsAPI(_CapcalAPIMixin, LocalCompletionsAPI):
    """OpenAI-compatible /v1/completions (``local-completions`` with capcal's sampling; see the module)."""

    BACKEND = "capcal-api"
    ENDPOINT = "completions"

    def _prompt(self, context, max_gen_toks: int):
        if not self.tokenized_requests:
            return context
        tokens = self.tok_encode(context, add_special_tokens=self.add_bos_token)
        max_context = self.max_length - max_gen_toks
        if len(tokens) > max_context:
            logger.warning(
                "%s: prompt of %d tokens left-truncated to %d", self.BACKEND, len(tokens), max_context
            )
            tokens = tokens[-max_context:]
        return tokens

    def _parse_texts(self, response: dict) -> list[str]:
        return [choice["text"] for choice in sorted(response["choices"], key=lambda c: c["index"])]

    def _logprobs_fields(self) -> dict:
        return {"logprobs": self.top_logprobs}

    def _answer_tokens(self, choice: dict) -> list[TokenLogprobs]:
        return completion_token_logprobs(choice)


@register_model("capcal-api-chat")
class CapcalChatAPI(_CapcalAPIMixin, LocalChatCompletion):
    """OpenAI-compatible /v1/chat/completions (``local-chat-completions`` with capcal's sampling and
    first-token P(True); see the module). Needs ``--apply_chat_template``."""

    BACKEND = "capcal-api-chat"
    ENDPOINT = "chat"
    PROMPT_FIELD = "messages"

    def __init__(self, *args, first_token_logprobs: bool = True, **kwargs) -> None:
        super().__init__(*args, first_token_logprobs=first_token_logprobs, **kwargs)

    def _prompt(self, context, max_gen_toks: int):
        if not isinstance(context, JsonChatStr):
            raise ValueError(f"{self.BACKEND} needs chat messages: run with --apply_chat_template")
        return json.loads(context.prompt)

    def _parse_texts(self, response: dict) -> list[str]:
        texts = []
        for choice in sorted(response["choices"], key=lambda c: c["index"]):
            content = choice["message"]["content"]
            texts.append(LMEVAL_NONE_PLACEHOLDER if content is None else content)
        return texts

    def _postprocess(self, text: str, until: list[str]) -> str:
        # the server applied the stop sequences; only a thinking part is cut off (as local-chat-completions)
        return postprocess_generated_text(text, None, self.think_end_token)

    def _logprobs_fields(self) -> dict:
        return {"logprobs": True, "top_logprobs": self.top_logprobs}

    def _answer_tokens(self, choice: dict) -> list[TokenLogprobs]:
        return chat_token_logprobs(choice)
