"""The LLM judge's client: chat-completion requests to any OpenAI-compatible server, cached on disk.

``JudgeClient.ask(requests)`` returns the judge's raw output for each ``JudgeRequest`` (a prompt of
``analysis.judge.prompts`` and the question, gold answer and extracted answer it is filled with, sent as one
user message). It

- sends one request per distinct prompt (the k responses of a question often share an extracted answer) to
  ``<base_url>/chat/completions`` through ``capcal_models.http_transport`` (``num_concurrent`` at once;
  connection errors, timeouts, 408/409/425/429, 5xx and unreadable responses retried with backoff up to
  ``max_retries`` times);
- keeps every output in an on-disk cache (``capcal_models.sample_cache``; ``cache_path``, default
  ``$CAPCAL_HOME/cache/judge/samples.sqlite``) keyed by the request (server URL without credentials, model,
  prompt and its filled-in fields, sampling settings, seed) and committed as each response arrives, so a
  re-run or an interrupted run asks only what is missing;
- reads the API key from the environment variable ``api_key_env`` at each request and sends it only in the
  Authorization header (``capcal_models.credentials``); a ``base_url`` with credentials in it is refused, and
  error messages are scrubbed of the key. Neither the key nor its variable's value enters the cache;
- after the run, raises ``APIRequestsFailed`` with one report (what finished and is cached, what did not, how
  to resume) when requests still failed.

Sampling settings default to the paper's (temperature 1.0, top_p 1.0); each request carries a seed derived
from ``seed`` and the request, so a server that honours seeds gives the same verdict for the same prompt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from analysis.judge.prompts import JudgePrompt, judge_messages
from capcal_models.credentials import EnvironmentKey, credentials_in_url, public_url
from capcal_models.http_transport import APIRequestsFailed, HTTPTransport, Job, RetryPolicy, failure_report
from capcal_models.sample_cache import SampleCache, open_sample_cache, request_key

__all__ = ["CHUNK", "JudgeClient", "JudgeRequest", "chat_completions_url"]

logger = logging.getLogger(__name__)

NAME = "capcal judge"
CHUNK = 1024  # requests built and sent per transport run (memory stays flat on large runs)


@dataclass(frozen=True)
class JudgeRequest:
    """One question to the judge: the prompt and the question, gold answer and extracted answer it is filled
    with (``analysis.judge.prompts``)."""

    prompt: JudgePrompt
    question: str
    gold: str
    answer: str


def chat_completions_url(base_url: str) -> str:
    """``<base_url>/chat/completions`` (a URL that already ends so is kept)."""
    url = base_url.rstrip("/")
    return url if url.endswith("/chat/completions") else f"{url}/chat/completions"


def _content(response: dict) -> list[str]:
    """The text of the first choice ("" when the server returned no content)."""
    content = response["choices"][0]["message"]["content"]
    if content is not None and not isinstance(content, str):
        raise ValueError(f"message content is {type(content).__name__}, not text")
    return [content or ""]


class JudgeClient:
    """Asks an OpenAI-compatible chat-completions server for the judge's verdicts (see the module).

    Why one class of about 165 lines: HTTP (``capcal_models.http_transport``), the cache
    (``capcal_models.sample_cache``), credentials (``capcal_models.credentials``) and the prompts
    (``analysis.judge.prompts``) live elsewhere. What stays is one client's state: its checked settings,
    the served model, request identities and ``ask``.
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        num_concurrent: int = 8,
        cache_path: str | Path | None = None,
        cache: bool = True,
        max_retries: int = 5,
        retry_base_delay: float = 1.0,
        retry_max_delay: float = 60.0,
        timeout: float = 300.0,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_tokens: int | None = None,
        seed: int | None = 0,
    ) -> None:
        if not base_url:
            raise ValueError("the LLM judge needs base_url (an OpenAI-compatible server, e.g. .../v1)")
        secret = credentials_in_url(base_url)
        if secret:
            raise ValueError(
                f"{NAME}: do not pass {secret}; put the key in an environment variable and name it with "
                "api_key_env=NAME (default OPENAI_API_KEY)"
            )
        self.base_url = str(base_url).rstrip("/")
        self.url = chat_completions_url(self.base_url)
        self.key = EnvironmentKey(api_key_env)
        self.concurrency = max(1, int(num_concurrent))
        self.retry = RetryPolicy(int(max_retries), float(retry_base_delay), float(retry_max_delay))
        self.timeout = float(timeout)
        self.settings = {"temperature": float(temperature), "top_p": float(top_p)}
        if max_tokens is not None:
            self.settings["max_tokens"] = int(max_tokens)
        self.seed = None if seed is None else int(seed)
        self.cache: SampleCache | None = open_sample_cache(cache_path, cache, "judge")
        self.model = model or self.served_model()
        self.stats: dict = {
            "prompts": 0,  # distinct prompts asked for
            "cached": 0,  # of those, read from the cache
            "requests_sent": 0,  # HTTP attempts, retries included
            "samples_received": 0,
            "retries": 0,
            "retries_by_cause": {},
            "failed_requests": 0,
        }

    def served_model(self) -> str:
        """The one model the server serves (``GET <base_url>/models``); ``ValueError`` when it serves none or
        several (then pass ``model``)."""
        request = urllib.request.Request(f"{self.base_url}/models", headers=self.key.header())
        try:
            with urllib.request.urlopen(request, timeout=min(self.timeout, 60.0)) as response:
                listed = json.loads(response.read().decode("utf-8"))
        except (urllib.error.URLError, OSError, ValueError) as error:
            message = self.key.redact(f"{type(error).__name__}: {error}")
            raise ValueError(
                f"{NAME}: could not list the models of {public_url(self.base_url)}: {message}"
            ) from None
        models = [entry.get("id") for entry in listed.get("data", []) if isinstance(entry, dict)]
        if len(models) != 1 or not isinstance(models[0], str):
            raise ValueError(
                f"{NAME}: {public_url(self.base_url)} serves {len(models)} models; name the judge with model="
            )
        return models[0]

    def request_identity(self, request: JudgeRequest) -> dict:
        """What defines one request's output (its cache key): the server URL without credentials, the model,
        the prompt (its name and template hash, and the filled-in fields), the settings and the seed; nothing
        secret."""
        return {
            "kind": "judge-chat",
            "url": public_url(self.url),
            "model": self.model,
            "prompt": request.prompt.name,
            "template": hashlib.sha256(request.prompt.template.encode("utf-8")).hexdigest(),
            "question": request.question,
            "gold": request.gold,
            "answer": request.answer,
            "settings": self.settings,
            "seed": self.seed,
        }

    def payload(self, request: JudgeRequest, key: str) -> dict:
        messages = judge_messages(request.prompt, request.question, request.gold, request.answer)
        payload = {"model": self.model, "messages": messages, **self.settings}
        if self.seed is not None:
            payload["seed"] = int(key[:8], 16) % 2**31  # from the run seed and the request
        return payload

    def ask(self, requests: Sequence[JudgeRequest], *, progress: bool = False) -> list[str]:
        """The judge's raw output for each request, in order; one HTTP request per distinct request not in
        the cache, sent in chunks of ``CHUNK`` (payloads exist only for the chunk in flight). Raises
        ``APIRequestsFailed`` when requests still fail after their retries (the others are cached)."""
        keys = [request_key(self.request_identity(request)) for request in requests]
        distinct = dict(zip(keys, requests, strict=True))
        found: dict[str, str] = {}
        missing: list[str] = []
        for key in distinct:
            cached = self.cache.get(key) if self.cache is not None else {}
            if 0 in cached:
                found[key] = cached[0]
            else:
                missing.append(key)
        self.stats["prompts"] += len(distinct)
        self.stats["cached"] += len(found)
        before = self.stats["samples_received"]
        transport = HTTPTransport(
            self.url,
            name=NAME,
            concurrency=self.concurrency,
            timeout=self.timeout,
            retry=self.retry,
            headers=self.key.header,
            redact=self.key.redact,
            stats=self.stats,
        )
        jobs: list[Job] = []
        for start in range(0, len(missing), CHUNK):
            chunk = [
                Job(self.payload(distinct[key], key), _content, [0], "judge", key[:12], key)
                for key in missing[start : start + CHUNK]
            ]
            transport.run(chunk, "judge", on_received=self._store, progress=progress)
            for job in chunk:
                if 0 in job.samples:
                    found[job.tag] = job.samples[0]
                job.payload = {}  # keep the outcome, not the prompt
            jobs += chunk
        report, failures = failure_report(
            jobs,
            name=NAME,
            what="judging",
            max_retries=self.retry.max_retries,
            samples_needed=len(distinct),
            cached_samples=len(distinct) - len(jobs),
            received_samples=self.stats["samples_received"] - before,
            cache_path=self.cache.path if self.cache is not None else None,
        )
        logger.info(
            "%s: %d distinct prompts, %d from the cache, %d asked (%d HTTP attempts so far), %d failed",
            NAME,
            len(distinct),
            len(distinct) - len(jobs),
            len(jobs),
            self.stats["requests_sent"],
            len(failures),
        )
        if failures:
            self.stats["failed_requests"] += len(failures)
            raise APIRequestsFailed(self.key.redact(report), failures)
        return [found[key] for key in keys]

    def _store(self, job: Job, samples: dict[int, str]) -> None:
        """Commit an output to the cache as it arrives (an interrupted run keeps it)."""
        if self.cache is not None:
            self.cache.put(job.tag, samples)

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
