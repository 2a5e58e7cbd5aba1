"""capcal-api and capcal-api-chat: lm-eval's OpenAI-compatible API models for repeated sampling.

Stock ``local-completions`` / ``local-chat-completions`` send the k clones of a question (``repeats: k``)
as k identical requests, each with ``"seed": 1234``: against vLLM or SGLang the k samples are then
identical. They retry a failed request a few times and then abort the whole run. capcal's subclasses

- send one request per question with ``n = k`` (``supports_n=True``, the default; a server that returns
  fewer choices is detected and the rest is sampled per repeat), or k requests with ``n = 1``
  (``supports_n=False``); seeds come from ``capcal_models.seeding.sample_seed`` (run seed, task, question
  id, request index, repeat): the n = k request carries the seed of its first repeat (vLLM gives choice i
  that seed + i), per-repeat requests carry their own; never one seed for all repeats. The run seed is the
  model argument ``seed``, else a ``seed`` in the generation kwargs, else lm-eval's ``--seed``;
- run up to ``num_concurrent`` requests at once; retry connection errors (refused, reset, closed mid-body),
  timeouts (``timeout`` seconds per request), 408/409/425/429, 5xx and unreadable 200 responses (invalid or
  truncated JSON, missing choices) with exponential backoff (``retry_base_delay`` * 2^attempt, at most
  ``retry_max_delay``, or the server's ``Retry-After``) up to ``max_retries`` times, without stopping the
  other requests; report what still failed at the end in one message (what finished and where it is cached,
  what did not, how to resume), then raise ``APIRequestsFailed`` (or, with ``allow_failures=True``, log it
  and return empty texts for the failed samples);
- count requests, cached samples, retries by cause and failures in ``stats``: one summary line is logged per
  call, and ``get_model_info`` (which lm-eval calls after the run) puts them into the results JSON as
  ``config.capcal_api_stats``;
- keep every received sample in an on-disk cache (``capcal_models.sample_cache``; ``cache_path``, default
  ``$CAPCAL_HOME/cache/api/samples.sqlite``; ``sample_cache=False`` turns it off) keyed by (request, repeat
  index), committed as each response arrives: a killed run restarts without sampling its finished requests
  again;
- read the API key from an environment variable (``api_key_env``, default ``OPENAI_API_KEY``) and send it
  only in the Authorization header; ``api_key`` and ``auth_token`` model arguments and credentials in
  ``base_url`` (user:password@ or a key/token query parameter) are refused, because lm-eval writes model
  arguments into its results files and logs. Error messages are scrubbed of the key;
- answer log-likelihood requests of one-word choices (P(True): "Yes"/"No") from the top log-probabilities
  of the first answer token (``capcal_models.answer_logprobs``): always for ``capcal-api-chat`` (chat
  endpoints have no prompt log-likelihoods), and for ``capcal-api`` with ``first_token_logprobs=True``
  (otherwise it keeps lm-eval's exact echo log-likelihoods). A word missing from the top ``top_logprobs``
  (default 20) gets ``MISSING_LOGPROB`` (-100); both missing is a parse failure, counted in a warning.
  Thinking models: set ``think_end_token`` (and ``ptrue_max_tokens`` large enough to finish thinking); the
  answer token is the first one after the last ``think_end_token`` or harmony
  ``<|channel|>final<|message|>`` header;
- decode once per unique prompt when sampling is greedy (temperature 0) and copy the text to the k clones,
  and never write sampled texts to lm-eval's ``--use_cache`` database (all k clones share one key there).
"""

from __future__ import annotations

import asyncio
import copy
import email.utils
import json
import logging
import os
import random
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import aiohttp
from lm_eval.api.instance import Instance
from lm_eval.api.registry import register_model
from lm_eval.models.api_models import JsonChatStr
from lm_eval.models.openai_completions import LocalChatCompletion, LocalCompletionsAPI
from lm_eval.models.utils import normalize_gen_kwargs, postprocess_generated_text
from tqdm import tqdm

from capcal_models.answer_logprobs import (
    DEFAULT_THINKING_ENDS,
    MISSING_LOGPROB,
    answer_logprob,
    chat_token_logprobs,
    completion_token_logprobs,
    first_answer_position,
)
from capcal_models.repeat_groups import RepeatGroup, group_repeats, request_question_id, resolve_run_seed
from capcal_models.sample_cache import open_sample_cache, request_key

__all__ = ["APIRequestsFailed", "CapcalChatAPI", "CapcalCompletionsAPI", "FailedRequest"]

logger = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
SECRET_QUERY_WORDS = ("key", "token", "secret", "password", "sig")
REPORTED_FAILURES = 5  # unfinished requests listed one per line in the failure report
LMEVAL_NONE_PLACEHOLDER = os.environ.get("LMEVAL_MODEL_NONE_ANSWER_PLACEHOLDER", "")


@dataclass
class FailedRequest:
    """A request that still failed after its retries."""

    task: str
    question_id: str
    repeats: list[int]
    attempts: int
    error: str


class APIRequestsFailed(RuntimeError):
    """Some API requests failed after all retries; ``failures`` lists them (everything else is cached)."""

    def __init__(self, report: str, failures: list[FailedRequest]) -> None:
        super().__init__(report)
        self.failures = failures


@dataclass
class _Job:
    """One HTTP request and what it fills in."""

    group: RepeatGroup
    run_seed: int
    payload: dict
    key: str
    repeats: list[int]
    parse: Callable[[dict], list[str]]
    samples: dict[int, str] = field(default_factory=dict)
    attempts: int = 0
    error: str | None = None


def _retry_after_seconds(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _public_url(url: str | None) -> str:
    """scheme://host[:port]/path: the URL without credentials, query or fragment (for cache keys and logs)."""
    if not url:
        return ""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _credentials_in_url(url: str | None) -> str | None:
    """What in a URL looks like a credential (user info, a key/token query parameter), or None."""
    if not url:
        return None
    parts = urlsplit(url)
    if parts.username or parts.password:
        return "user:password@ in base_url"
    for name, _ in parse_qsl(parts.query, keep_blank_values=True):
        if any(word in name.lower() for word in SECRET_QUERY_WORDS):
            return f"the query parameter {name!r} in base_url"
    return None


def _error_cause(error: BaseException) -> str:
    """The retry cause of a transport or decoding error: timeout, connection or invalid_response."""
    if isinstance(error, TimeoutError):  # asyncio.TimeoutError, aiohttp.ServerTimeoutError
        return "timeout"
    if isinstance(error, ValueError):  # invalid JSON or UTF-8 in a complete response
        return "invalid_response"
    return "connection"  # refused, reset, disconnected, body cut off (ClientPayloadError)


def _repeat_ranges(repeats: list[int]) -> str:
    return ",".join(str(r) for r in repeats) if len(repeats) <= 4 else f"{repeats[0]}..{repeats[-1]}"


class _CapcalAPIMixin:
    """Repeated sampling, retries, cache and first-token log-likelihoods shared by both endpoints."""

    BACKEND = "capcal-api"
    ENDPOINT = "completions"

    def __init__(
        self,
        *args,
        seed: int | None = None,
        supports_n: bool = True,
        cache_path: str | None = None,
        sample_cache: bool = True,
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
        secret = next((f"{name} in model_args" for name in ("api_key", "auth_token") if name in kwargs), None)
        secret = secret or _credentials_in_url(kwargs.get("base_url"))
        if secret:
            raise ValueError(
                f"{self.BACKEND}: do not pass {secret} (lm-eval writes model_args into its results files and "
                "logs); put the key in an environment variable and name it with api_key_env=NAME (default "
                "OPENAI_API_KEY)"
            )
        super().__init__(*args, max_retries=max_retries, **kwargs)
        self.run_seed = None if seed is None else int(seed)
        self.supports_n = _as_bool(supports_n)
        self.allow_failures = _as_bool(allow_failures)
        self.api_key_env = str(api_key_env)
        self.max_retries = int(max_retries)
        self.retry_base_delay = float(retry_base_delay)
        self.retry_max_delay = float(retry_max_delay)
        self.top_logprobs = int(top_logprobs)
        self.ptrue_max_tokens = None if ptrue_max_tokens is None else int(ptrue_max_tokens)
        self.first_token_logprobs = _as_bool(first_token_logprobs)
        self.think_end_token = think_end_token
        self.cache = open_sample_cache(cache_path, sample_cache, "api")
        self.stats: dict = {
            "samples_needed": 0,  # samples the calls asked for (one per question when greedy)
            "cached_samples_used": 0,  # of those, read from the sample cache
            "requests_needed": 0,  # requests for the rest (after the cache)
            "requests_sent": 0,  # HTTP attempts, retries included
            "samples_received": 0,
            "retries": 0,
            "retries_by_cause": {},  # http_<status>, timeout, connection, invalid_response
            "failed_requests": 0,  # still failing after max_retries
            "missing_samples": 0,
        }
        self.failures: list[FailedRequest] = []

    # --- credentials: read from the environment on use, never stored on the object -------------------------

    @property
    def api_key(self) -> str:  # type: ignore[override]
        return os.environ.get(self.api_key_env, "")

    @property
    def header(self) -> dict:  # type: ignore[override]
        key = self.api_key
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _redact(self, text: str) -> str:
        key = self.api_key
        return text.replace(key, "[API key]") if key else text

    # --- prompts and payloads ------------------------------------------------------------------------------

    def _prompt(self, context, max_gen_toks: int):
        """What goes into the payload for one context (endpoint-specific)."""
        raise NotImplementedError

    def _parse_texts(self, response: dict) -> list[str]:
        """Generated texts of a response, in choice order (endpoint-specific)."""
        raise NotImplementedError

    def _postprocess(self, text: str, until: list[str]) -> str:
        return postprocess_generated_text(text, until, self.think_end_token)

    def _identity(self, group: RepeatGroup, payload: dict, run_seed: int, kind: str) -> dict:
        request = {name: value for name, value in payload.items() if name not in ("seed", "n")}
        return {
            "kind": kind,
            "endpoint": self.ENDPOINT,
            "url": _public_url(self.base_url),
            "request": request,
            "run_seed": run_seed,
            "task": group.task,
            "question_id": group.question_id,
            "request_index": group.request_index,
        }

    # --- generation ----------------------------------------------------------------------------------------

    def generate_until(self, requests: list[Instance], disable_tqdm: bool = False) -> list[str]:
        before = copy.deepcopy(self.stats)
        results: list[str | None] = [None] * len(requests)
        plans = []  # (group, key, until, greedy, cached samples)
        jobs: list[_Job] = []
        for group in group_repeats(requests):
            gen_kwargs = dict(group.gen_kwargs)
            run_seed = resolve_run_seed(self.run_seed, gen_kwargs.pop("seed", None), self.BACKEND)
            if gen_kwargs.pop("n", None) is not None:
                logger.warning(
                    "%s: n in the generation kwargs is ignored; n is the task's repeats", self.BACKEND
                )
            settings = normalize_gen_kwargs(gen_kwargs, self._max_gen_toks)
            if settings.get("top_k") in (0, -1):
                # no top-k (capcal tasks set top_k: 0) is every server's default; OpenAI's API rejects it
                del settings["top_k"]
            greedy = float(settings.get("temperature", 0.0)) == 0.0
            until = list(settings.get("until") or [])
            payload = self._create_payload(
                self._prompt(group.context, int(settings["max_gen_toks"])),
                generate=True,
                gen_kwargs=dict(settings),
                seed=0,
                eos=self.eos_string if self.ENDPOINT == "completions" else None,
            )
            key = request_key(self._identity(group, payload, run_seed, "generate"))
            samples_needed = 1 if greedy else group.k
            cached = self.cache.get(key) if self.cache is not None else {}
            missing = [repeat for repeat in range(samples_needed) if repeat not in cached]
            self.stats["samples_needed"] += samples_needed
            self.stats["cached_samples_used"] += samples_needed - len(missing)
            plans.append((group, key, until, greedy, cached))
            if not missing:
                continue
            if self.supports_n and len(missing) > 1:
                batches = [missing]
            else:
                batches = [[repeat] for repeat in missing]
            for repeats in batches:
                job_payload = dict(payload, seed=group.seed(run_seed, repeats[0]))
                if len(repeats) > 1:
                    job_payload["n"] = len(repeats)
                jobs.append(_Job(group, run_seed, job_payload, key, repeats, self._parse_texts))

        self._run(jobs, "sampling", disable_tqdm)
        new_samples: dict[str, dict[int, str]] = {}
        for job in jobs:
            new_samples.setdefault(job.key, {}).update(job.samples)
        for group, key, until, greedy, cached in plans:
            samples = {**cached, **new_samples.get(key, {})}
            texts = [
                self._postprocess(samples[repeat], until) if repeat in samples else LMEVAL_NONE_PLACEHOLDER
                for repeat in range(1 if greedy else group.k)
            ]
            if greedy:
                texts = texts * group.k
                if 0 in samples:
                    self.cache_hook.add_partial("generate_until", (group.context, group.gen_kwargs), texts[0])
            for position, text in zip(group.positions, texts, strict=True):
                results[position] = text
        self._finish(jobs, "sampling", before)
        return results

    # --- log-likelihoods of one-word answers from the first answer token ----------------------------------

    def loglikelihood(self, requests: list[Instance], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        if not self.first_token_logprobs:
            return super().loglikelihood(requests, disable_tqdm=disable_tqdm)
        # one request per (question, context); each answer choice reads its word from the same position
        by_context: dict[tuple, RepeatGroup] = {}
        for position, request in enumerate(requests):
            task, context = request.task_name or "", request.args[0]
            group = by_context.get((task, request.doc_id, context))
            if group is None:
                group = RepeatGroup(task, request_question_id(request), 0, context, {})
                by_context[(task, request.doc_id, context)] = group
            group.positions.append(position)

        max_tokens = self.ptrue_max_tokens or (self._max_gen_toks if self.think_end_token else 1)
        before = copy.deepcopy(self.stats)
        plans, jobs = [], []
        for group in by_context.values():
            run_seed = resolve_run_seed(self.run_seed, None, self.BACKEND)
            payload = self._logprobs_payload(self._prompt(group.context, max_tokens), max_tokens)
            payload["seed"] = group.seed(run_seed, 0)
            key = request_key(self._identity(group, payload, run_seed, "first_token_logprobs"))
            cached = self.cache.get(key) if self.cache is not None else {}
            plans.append((key, group.positions, cached))
            self.stats["samples_needed"] += 1
            if 0 in cached:
                self.stats["cached_samples_used"] += 1
            else:
                jobs.append(_Job(group, run_seed, payload, key, [0], self._parse_answer_position))

        self._run(jobs, "first-token log-probabilities", disable_tqdm)
        found = {job.key: job.samples[0] for job in jobs if 0 in job.samples}
        results: list[tuple[float, bool] | None] = [None] * len(requests)
        unparsed = 0
        for key, positions, cached in plans:
            answer = json.loads(cached[0] if 0 in cached else found.get(key, '{"top": null}'))
            top, chosen = answer.get("top"), answer.get("token")
            pairs = []
            for position in positions:
                word = requests[position].args[1]
                logprob = MISSING_LOGPROB if top is None else answer_logprob(top, word)
                pairs.append((logprob, chosen is not None and chosen.strip() == word.strip()))
                results[position] = pairs[-1]
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
        self._finish(jobs, "first-token log-probabilities", before)
        return results

    def _logprobs_payload(self, prompt, max_tokens: int) -> dict:
        raise NotImplementedError

    def _answer_tokens(self, choice: dict):
        raise NotImplementedError

    def _parse_answer_position(self, response: dict) -> list[str]:
        """The top log-probabilities at the first answer token, as a JSON string (the cached value)."""
        choice = response["choices"][0]
        tokens = self._answer_tokens(choice)
        ends = (
            (self.think_end_token, *DEFAULT_THINKING_ENDS) if self.think_end_token else DEFAULT_THINKING_ENDS
        )
        index = first_answer_position(tokens, ends, require_thinking_end=self.think_end_token is not None)
        if index is None:
            return [json.dumps({"top": None, "token": None})]
        token = tokens[index]
        top = dict(token.top)
        top.setdefault(token.token, token.logprob)
        return [json.dumps({"top": top, "token": token.token}, ensure_ascii=False)]

    # --- HTTP: concurrency, retries, cache ------------------------------------------------------------------

    def _run(self, jobs: list[_Job], what: str, disable_tqdm: bool) -> None:
        self.stats["requests_needed"] += len(jobs)
        if jobs:
            asyncio.run(self._run_jobs(jobs, what, disable_tqdm))

    def _ssl(self) -> ssl.SSLContext | bool | None:
        if not self.verify_certificate:
            return False
        if self.ca_cert_path:
            return ssl.create_default_context(cafile=self.ca_cert_path)
        return None

    async def _run_jobs(self, jobs: list[_Job], what: str, disable_tqdm: bool) -> None:
        concurrency = max(1, int(self._concurrent))
        semaphore = asyncio.Semaphore(concurrency)
        connector = aiohttp.TCPConnector(limit=concurrency, ssl=self._ssl())
        progress = tqdm(total=len(jobs), disable=disable_tqdm, desc=f"{self.BACKEND}: {what} requests")
        async with aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=self.timeout)
        ) as session:

            async def run_one(job: _Job) -> None:
                await self._run_job(session, semaphore, job)
                progress.update(1)

            await asyncio.gather(*(run_one(job) for job in jobs))
        progress.close()

    async def _post(
        self, session: aiohttp.ClientSession, payload: dict
    ) -> tuple[int | None, dict | None, str, str, float | None]:
        """POST once: (status, None on a transport or decoding error; JSON body on success; error text;
        retry cause; Retry-After)."""
        self.stats["requests_sent"] += 1
        try:
            async with session.post(self.base_url, json=payload, headers=self.header) as response:
                body = await response.text()
                if response.status == 200:
                    return 200, json.loads(body), "", "", None
                retry_after = _retry_after_seconds(response.headers.get("Retry-After"))
                error = f"HTTP {response.status}: {body[:500]}"
                return response.status, None, error, f"http_{response.status}", retry_after
        except (aiohttp.ClientError, OSError, ValueError) as error:  # OSError includes TimeoutError
            return None, None, f"{type(error).__name__}: {error}", _error_cause(error), None

    async def _run_job(self, session: aiohttp.ClientSession, semaphore: asyncio.Semaphore, job: _Job) -> None:
        while True:
            job.attempts += 1
            async with semaphore:
                status, body, error, cause, retry_after = await self._post(session, job.payload)
            if status == 200:
                try:
                    values = job.parse(body)
                except (KeyError, IndexError, TypeError, ValueError) as parse_error:
                    error = f"unreadable response ({type(parse_error).__name__}: {parse_error})"
                    cause, retryable = "invalid_response", True
                else:
                    await self._accept(session, semaphore, job, values)
                    return
            else:
                retryable = status is None or status in RETRYABLE_STATUS or status >= 500
            if not retryable or job.attempts > self.max_retries:
                job.error = self._redact(error)
                return
            delay = retry_after if retry_after is not None else self._backoff(job.attempts)
            delay = min(delay, self.retry_max_delay)
            self.stats["retries"] += 1
            by_cause = self.stats["retries_by_cause"]
            by_cause[cause] = by_cause.get(cause, 0) + 1
            logger.info(
                "%s: request failed (%s); retry %d of %d in %.1f s",
                self.BACKEND,
                self._redact(error)[:200],
                job.attempts,
                self.max_retries,
                delay,
            )
            await asyncio.sleep(delay)

    def _backoff(self, attempt: int) -> float:
        """Exponential backoff with jitter: base * 2^(attempt-1) * U(0.5, 1)."""
        return self.retry_base_delay * 2 ** (attempt - 1) * random.uniform(0.5, 1.0)

    async def _accept(
        self, session: aiohttp.ClientSession, semaphore: asyncio.Semaphore, job: _Job, values: list[str]
    ) -> None:
        """Store a response's samples; when the server returned fewer choices than n, sample the rest per
        repeat (each with its own seed) and stop sending n."""
        received = dict(zip(job.repeats, values, strict=False))
        job.samples.update(received)
        self.stats["samples_received"] += len(received)
        if self.cache is not None and received:
            self.cache.put(job.key, received)
        rest = job.repeats[len(values) :]
        if not rest:
            return
        if self.supports_n:
            logger.warning(
                "%s: the server returned %d choices for n=%d; sampling the other repeats one request each "
                "(supports_n=False from now on)",
                self.BACKEND,
                len(values),
                len(job.repeats),
            )
            self.supports_n = False
        for repeat in rest:
            payload = {name: value for name, value in job.payload.items() if name != "n"}
            payload["seed"] = job.group.seed(job.run_seed, repeat)
            follow_up = _Job(job.group, job.run_seed, payload, job.key, [repeat], job.parse)
            await self._run_job(session, semaphore, follow_up)
            job.samples.update(follow_up.samples)
            if follow_up.error is not None:
                job.error = follow_up.error
                job.attempts = max(job.attempts, follow_up.attempts)

    def _finish(self, jobs: list[_Job], what: str, before: dict) -> None:
        """Log the call's one-line summary; report the requests that still failed (raise, or log them with
        ``allow_failures=True``)."""
        failed = [job for job in jobs if job.error is not None]
        missing = sum(len([r for r in job.repeats if r not in job.samples]) for job in failed)
        self.stats["failed_requests"] += len(failed)
        self.stats["missing_samples"] += missing
        now = {name: value - before[name] for name, value in self.stats.items() if isinstance(value, int)}
        by_cause = {
            cause: count - before["retries_by_cause"].get(cause, 0)
            for cause, count in sorted(self.stats["retries_by_cause"].items())
            if count > before["retries_by_cause"].get(cause, 0)
        }
        causes = ", ".join(f"{cause} {count}" for cause, count in by_cause.items())
        logger.info(
            "%s %s: %d samples needed, %d from the cache; %d requests (%d HTTP attempts), %d samples "
            "received; %d retries%s; %d requests failed (%d samples missing)",
            self.BACKEND,
            what,
            now["samples_needed"],
            now["cached_samples_used"],
            now["requests_needed"],
            now["requests_sent"],
            now["samples_received"],
            now["retries"],
            f" ({causes})" if causes else "",
            len(failed),
            missing,
        )
        if not failed:
            return
        failures = [
            FailedRequest(
                job.group.task,
                job.group.question_id,
                [r for r in job.repeats if r not in job.samples],
                job.attempts,
                job.error or "",
            )
            for job in failed
        ]
        self.failures.extend(failures)
        finished = now["samples_needed"] - missing
        lines = [
            f"{self.BACKEND}: {what} did not finish: {len(failed)} of {len(jobs)} requests ({missing} of "
            f"{now['samples_needed']} samples) still failed after up to {self.max_retries} retries; last "
            f"error: {failures[-1].error[:300]}",
        ]
        if self.cache is not None:
            lines.append(
                f"Finished: {finished} of {now['samples_needed']} samples ({now['cached_samples_used']} read "
                f"from the cache, {now['samples_received']} received now), all cached in {self.cache.path}."
            )
        else:
            lines.append(
                f"Finished: {finished} of {now['samples_needed']} samples (not cached: sample_cache=False)."
            )
        shown = failures[:REPORTED_FAILURES]
        lines.append(
            f"Not finished: {len(failures)} requests"
            + (f" (the first {len(shown)}):" if len(shown) < len(failures) else ":")
        )
        lines += [
            f"  {f.task} {f.question_id} repeats {_repeat_ranges(f.repeats)} ({f.attempts} attempts): "
            f"{f.error[:300]}"
            for f in shown
        ]
        if self.cache is not None:
            lines.append(
                f"To resume, re-run the same command: finished samples are read from {self.cache.path} and "
                "only the unfinished requests are sent."
            )
        else:
            lines.append("To resume, re-run the same command (everything is sampled again: no sample cache).")
        report = self._redact("\n".join(lines))
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


def _as_bool(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


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

    def _logprobs_payload(self, prompt, max_tokens: int) -> dict:
        return {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 0,
            "logprobs": self.top_logprobs,
        }

    def _answer_tokens(self, choice: dict):
        return completion_token_logprobs(choice)


@register_model("capcal-api-chat")
class CapcalChatAPI(_CapcalAPIMixin, LocalChatCompletion):
    """OpenAI-compatible /v1/chat/completions (``local-chat-completions`` with capcal's sampling and
    first-token P(True); see the module). Needs ``--apply_chat_template``."""

    BACKEND = "capcal-api-chat"
    ENDPOINT = "chat"

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

    def _logprobs_payload(self, prompt, max_tokens: int) -> dict:
        return {
            "model": self.model,
            "messages": prompt,
            "max_tokens": max_tokens,
            "temperature": 0,
            "logprobs": True,
            "top_logprobs": self.top_logprobs,
        }

    def _answer_tokens(self, choice: dict):
        return chat_token_logprobs(choice)
