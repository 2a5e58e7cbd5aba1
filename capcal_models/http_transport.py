"""Async HTTP for sampling requests: bounded concurrency, retries with backoff, one failure report.

``HTTPTransport.run(jobs)`` POSTs each ``Job``'s JSON payload to one URL, at most ``concurrency`` at once
(aiohttp), and reads its samples with the job's ``parse``. ``jobs`` may be any iterable (e.g. a generator
that builds them lazily): a fixed pool of ``max_pending`` worker coroutines (default ``4 * concurrency``)
each takes the next job when its last one has finished, so at most ``max_pending`` jobs are started and
unfinished at once (in flight or waiting for a retry) and memory does not grow with the number of jobs (a
bounded producer/consumer: no coroutine per job). A connection error (refused, reset, closed
mid-body), a timeout (``timeout`` seconds per request), HTTP 408/409/425/429, 5xx and an unreadable 200
response (invalid or truncated JSON, or ``parse`` failing) are retried up to ``RetryPolicy.max_retries``
times, after ``base_delay * 2^(attempt-1) * U(0.5, 1)`` seconds (exponential backoff with jitter) or the
server's ``Retry-After`` (seconds or an HTTP date), at most ``max_delay``; other statuses fail the job at
once. A failing job never stops the others: it keeps its last error, and ``failure_report`` then says in one
message what finished (and where it is cached), what did not and how to resume; ``APIRequestsFailed``
carries that message and the ``FailedRequest`` list.

Counters (in the ``stats`` dict the caller passes): ``requests_sent`` (HTTP attempts, retries included),
``samples_received``, ``retries`` and ``retries_by_cause`` (``http_<status>``, ``timeout``, ``connection``,
``invalid_response``). Every error text goes through ``redact`` before it is logged or kept. This module does
not import lm-eval.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import ssl
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from tqdm import tqdm

__all__ = [
    "RETRYABLE_STATUS",
    "APIRequestsFailed",
    "FailedRequest",
    "HTTPTransport",
    "Job",
    "RetryPolicy",
    "RunSummary",
    "error_cause",
    "failure_report",
    "retry_after_seconds",
]

logger = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
REPORTED_FAILURES = 5  # unfinished requests listed one per line in the failure report


def retry_after_seconds(value: str | None) -> float | None:
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


def error_cause(error: BaseException) -> str:
    """The retry cause of a transport or decoding error: timeout, connection or invalid_response."""
    if isinstance(error, TimeoutError):  # asyncio.TimeoutError, aiohttp.ServerTimeoutError
        return "timeout"
    if isinstance(error, ValueError):  # invalid JSON or UTF-8 in a complete response
        return "invalid_response"
    return "connection"  # refused, reset, disconnected, body cut off (ClientPayloadError)


def is_retryable(status: int | None) -> bool:
    """Whether a failed attempt is retried: no status (a transport error), 408/409/425/429 or 5xx."""
    return status is None or status in RETRYABLE_STATUS or status >= 500


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait: ``max_retries`` retries after the first attempt."""

    max_retries: int = 5
    base_delay: float = 1.0
    max_delay: float = 60.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before retry ``attempt`` (1-based): the server's Retry-After, else exponential backoff
        with jitter, ``base_delay * 2^(attempt-1) * U(0.5, 1)``; at most ``max_delay``."""
        if retry_after is None:
            retry_after = self.base_delay * 2 ** (attempt - 1) * random.uniform(0.5, 1.0)
        return min(retry_after, self.max_delay)


@dataclass(eq=False)
class Job:
    """One request and what it fills in: ``parse(response JSON)`` gives the values of ``repeats`` (in
    order; fewer values than repeats leave the rest to ``split``). ``task``/``question_id`` name it in the
    failure report; ``tag`` is the caller's own data."""

    payload: dict
    parse: Callable[[dict], list[str]]
    repeats: list[int]
    task: str = ""
    question_id: str = ""
    tag: Any = None
    samples: dict[int, str] = field(default_factory=dict)
    attempts: int = 0
    error: str | None = None

    def missing(self) -> list[int]:
        """The repeats this job has no sample for."""
        return [repeat for repeat in self.repeats if repeat not in self.samples]


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
class RunSummary:
    """What one ``HTTPTransport.run`` did: the number of jobs it ran and the ones that still failed."""

    jobs: int = 0
    failed: list[Job] = field(default_factory=list)


@dataclass
class _Attempt:
    """One POST: the status (None on a transport or decoding error), the JSON body of a 200, the error text,
    the retry cause and the Retry-After seconds."""

    status: int | None
    body: dict | None = None
    error: str = ""
    cause: str = ""
    retry_after: float | None = None


class HTTPTransport:
    """POSTs jobs to ``url`` with bounded concurrency and retries (see the module docstring).

    ``headers()`` is called for each attempt (credentials are read when used, never stored here);
    ``on_received(job, samples)`` is called with each response's new samples (e.g. to cache them at once);
    ``split(job, rest)`` gives the follow-up jobs for the repeats a response did not fill (e.g. one request
    per repeat when a server returned fewer choices than asked for), run one after another.
    ``max_pending`` bounds the jobs started and unfinished at once (see the module docstring).
    """

    def __init__(
        self,
        url: str,
        *,
        name: str = "http",
        concurrency: int = 1,
        timeout: float = 300.0,
        retry: RetryPolicy | None = None,
        ssl_context: ssl.SSLContext | bool | None = None,
        headers: Callable[[], dict[str, str]] = dict,
        redact: Callable[[str], str] = str,
        stats: dict | None = None,
        max_pending: int | None = None,
    ) -> None:
        self.url = url
        self.name = name
        self.concurrency = max(1, int(concurrency))
        self.max_pending = max(self.concurrency, int(max_pending or 4 * self.concurrency))
        self.timeout = float(timeout)
        self.retry = retry or RetryPolicy()
        self.ssl_context = ssl_context
        self.headers = headers
        self.redact = redact
        self.stats = {} if stats is None else stats
        for counter in ("requests_sent", "samples_received", "retries"):
            self.stats.setdefault(counter, 0)
        self.stats.setdefault("retries_by_cause", {})

    def run(
        self,
        jobs: Iterable[Job],
        what: str = "requests",
        *,
        on_received: Callable[[Job, dict[int, str]], None] | None = None,
        split: Callable[[Job, list[int]], list[Job]] | None = None,
        on_done: Callable[[Job], None] | None = None,
        progress: bool = False,
        total: int | None = None,
    ) -> RunSummary:
        """Run every job to success or final failure (``job.error``); never raises for a failed request.

        Jobs are taken from ``jobs`` one at a time, as workers free up; ``on_done(job)`` is called when a job
        has finished (its samples or its error are final). ``total`` sizes the progress bar when ``jobs`` has
        no length. Returns the number of jobs run and the failed ones."""
        summary = RunSummary()
        if total is None and hasattr(jobs, "__len__"):
            total = len(jobs)  # type: ignore[arg-type]
        if total != 0:
            asyncio.run(
                self._run_all(iter(jobs), what, on_received, split, on_done, progress, total, summary)
            )
        return summary

    async def _run_all(self, jobs, what, on_received, split, on_done, progress, total, summary) -> None:
        semaphore = asyncio.Semaphore(self.concurrency)
        connector = aiohttp.TCPConnector(limit=self.concurrency, ssl=self.ssl_context)
        bar = tqdm(total=total, disable=not progress, desc=f"{self.name}: {what} requests")
        async with aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=self.timeout),
        ) as session:
            run = _Run(self, session, semaphore, on_received, split)

            async def worker() -> None:
                for job in jobs:  # the next job, when this worker is free (one shared iterator)
                    await run.job(job)
                    summary.jobs += 1
                    if job.error is not None:
                        summary.failed.append(job)
                    if on_done is not None:
                        on_done(job)
                    bar.update(1)

            workers = self.max_pending if total is None else max(1, min(self.max_pending, total))
            tasks = [asyncio.ensure_future(worker()) for _ in range(workers)]
            try:
                await asyncio.gather(*tasks)
            except BaseException:  # the job iterator or a callback raised: stop the other workers, re-raise
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
            finally:
                bar.close()

    async def post(self, session: aiohttp.ClientSession, payload: dict) -> _Attempt:
        """POST once and classify the outcome."""
        self.stats["requests_sent"] += 1
        try:
            async with session.post(self.url, json=payload, headers=self.headers()) as response:
                body = await response.text()
                if response.status == 200:
                    return _Attempt(200, json.loads(body))
                return _Attempt(
                    response.status,
                    error=f"HTTP {response.status}: {body[:500]}",
                    cause=f"http_{response.status}",
                    retry_after=retry_after_seconds(response.headers.get("Retry-After")),
                )
        except (aiohttp.ClientError, OSError, ValueError) as error:  # OSError includes TimeoutError
            return _Attempt(None, error=f"{type(error).__name__}: {error}", cause=error_cause(error))

    def count_retry(self, cause: str) -> None:
        self.stats["retries"] += 1
        by_cause = self.stats["retries_by_cause"]
        by_cause[cause] = by_cause.get(cause, 0) + 1


@dataclass
class _Run:
    """The state of one ``HTTPTransport.run``: its session, semaphore and callbacks."""

    transport: HTTPTransport
    session: aiohttp.ClientSession
    semaphore: asyncio.Semaphore
    on_received: Callable[[Job, dict[int, str]], None] | None
    split: Callable[[Job, list[int]], list[Job]] | None

    async def job(self, job: Job) -> None:
        transport, retry = self.transport, self.transport.retry
        while True:
            job.attempts += 1
            async with self.semaphore:
                attempt = await transport.post(self.session, job.payload)
            error, cause = attempt.error, attempt.cause
            if attempt.status == 200:
                try:
                    values = job.parse(attempt.body)
                except (KeyError, IndexError, TypeError, ValueError) as parse_error:
                    error = f"unreadable response ({type(parse_error).__name__}: {parse_error})"
                    cause, retryable = "invalid_response", True
                else:
                    await self.accept(job, values)
                    return
            else:
                retryable = is_retryable(attempt.status)
            if not retryable or job.attempts > retry.max_retries:
                job.error = transport.redact(error)
                return
            delay = retry.delay(job.attempts, attempt.retry_after)
            transport.count_retry(cause)
            logger.info(
                "%s: request failed (%s); retry %d of %d in %.1f s",
                transport.name,
                transport.redact(error)[:200],
                job.attempts,
                retry.max_retries,
                delay,
            )
            await asyncio.sleep(delay)

    async def accept(self, job: Job, values: list[str]) -> None:
        """Store a response's samples; run the follow-ups of the repeats it did not fill."""
        received = dict(zip(job.repeats, values, strict=False))
        job.samples.update(received)
        self.transport.stats["samples_received"] += len(received)
        if self.on_received is not None and received:
            self.on_received(job, received)
        rest = job.repeats[len(values) :]
        if not rest or self.split is None:
            return
        for follow_up in self.split(job, rest):
            await self.job(follow_up)
            job.samples.update(follow_up.samples)
            if follow_up.error is not None:
                job.error = follow_up.error
                job.attempts = max(job.attempts, follow_up.attempts)


def _repeat_ranges(repeats: list[int]) -> str:
    return ",".join(str(r) for r in repeats) if len(repeats) <= 4 else f"{repeats[0]}..{repeats[-1]}"


def failure_report(
    jobs: list[Job],
    *,
    name: str,
    what: str,
    max_retries: int,
    samples_needed: int,
    cached_samples: int,
    received_samples: int,
    cache_path: Path | str | None,
    total: int | None = None,
) -> tuple[str, list[FailedRequest]]:
    """The message for the jobs that still failed (``job.error`` set; ("", []) when none did): what finished
    and where it is cached, what did not (the first ``REPORTED_FAILURES`` requests), how to resume.
    ``total``: the number of requests run, when ``jobs`` holds only some of them (``RunSummary.failed``)."""
    failed = [job for job in jobs if job.error is not None]
    if not failed:
        return "", []
    total = len(jobs) if total is None else total
    failures = [
        FailedRequest(job.task, job.question_id, job.missing(), job.attempts, job.error or "")
        for job in failed
    ]
    missing = sum(len(failure.repeats) for failure in failures)
    finished = samples_needed - missing
    lines = [
        f"{name}: {what} did not finish: {len(failed)} of {total} requests ({missing} of "
        f"{samples_needed} samples) still failed after up to {max_retries} retries; last error: "
        f"{failures[-1].error[:300]}",
    ]
    if cache_path is not None:
        lines.append(
            f"Finished: {finished} of {samples_needed} samples ({cached_samples} read from the cache, "
            f"{received_samples} received now), all cached in {cache_path}."
        )
    else:
        lines.append(f"Finished: {finished} of {samples_needed} samples (not cached: sample_cache=False).")
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
    if cache_path is not None:
        lines.append(
            f"To resume, re-run the same command: finished samples are read from {cache_path} and only the "
            "unfinished requests are sent."
        )
    else:
        lines.append("To resume, re-run the same command (everything is sampled again: no sample cache).")
    return "\n".join(lines), failures
