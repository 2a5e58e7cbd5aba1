"""capcal_models.http_transport against a local aiohttp server on 127.0.0.1, without lm-eval.

The module is loaded from its file (not through the ``capcal_models`` package, whose ``__init__`` registers
the lm-eval wrappers), and a subprocess checks that loading it imports no lm-eval module. The server answers
each request by its identity (its prompt and how many requests with that prompt came before), never by
arrival order, which depends on scheduling: a 200 with n choices, HTTP 429 with Retry-After, 500 (echoing the
Authorization header), 400, a held response (client timeout), a reset connection or truncated JSON; a port
where nothing listens stands for a server that is down.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiohttp import web

sys.path.insert(0, str(Path(__file__).parent))  # local_server.py
from local_server import GatheringServer, free_port  # noqa: E402

# exercises: capcal_models.http_transport (loaded from its file below, so no import line names it)
MODULE_PATH = Path(__file__).resolve().parents[2] / "capcal_models" / "http_transport.py"


def _load_transport():
    spec = importlib.util.spec_from_file_location("capcal_http_transport_under_test", MODULE_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


transport = _load_transport()
SECRET = "sk-transport-test-0123456789"


FAULT_TIMEOUT_S = 2.0  # the client timeout of the fault tests (a local answer: milliseconds, even loaded)
HOLD_S = FAULT_TIMEOUT_S + 1.0  # a "hold" answer comes after the client's timeout


class ScriptedServer(GatheringServer):
    """An aiohttp server on its own thread. The a-th request (from 0, retries included) with prompt p gets
    ``script[p][a]``, then "ok": a request's answer depends on which request it is, not on when it arrived
    (an arrival-order script gave one job a 500 on every attempt when the machine was loaded).

    ``gather``: the first answers (200s) are held as ``GatheringServer`` holds them; then ``delay_s`` holds
    each answer."""

    def __init__(
        self, script: dict[str, list[str]] | None = None, delay_s: float = 0.0, gather: int = 0
    ) -> None:
        super().__init__(gather=gather)
        self.script = {prompt: list(behaviours) for prompt, behaviours in (script or {}).items()}
        self.delay_s = delay_s
        self.received: list[dict] = []
        self.attempts: dict[str, int] = {}

    def _behaviour(self, prompt: str) -> str:
        attempt = self.attempts.get(prompt, 0)
        self.attempts[prompt] = attempt + 1
        behaviours = self.script.get(prompt, [])
        return behaviours[attempt] if attempt < len(behaviours) else "ok"

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        behaviour = self._behaviour(body["prompt"])
        self.received.append(body)
        choices = [
            {"index": i, "text": f"{body['prompt']}-{body['seed'] + i}"} for i in range(body.get("n", 1))
        ]
        answer = json.dumps({"choices": choices})
        if behaviour == "429":
            return web.Response(status=429, text="slow down", headers={"Retry-After": "1"})
        if behaviour == "500":
            return web.Response(status=500, text=f"failed; you sent {request.headers.get('Authorization')}")
        if behaviour == "400":
            return web.Response(status=400, text="bad request")
        if behaviour == "hold":
            await asyncio.sleep(HOLD_S)
        if behaviour == "reset":
            request.transport.abort()
            return web.Response(status=500)
        if behaviour == "truncated":
            return web.Response(status=200, text=answer[: len(answer) // 2], content_type="application/json")
        if behaviour == "one_choice":
            answer = json.dumps({"choices": choices[:1]})
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.gather and not (self._gathered and self._gathered.is_set()):
                await self._wait_until_gathered()
            await asyncio.sleep(self.delay_s)
        finally:
            self.in_flight -= 1
        return web.Response(status=200, text=answer, content_type="application/json")


def _texts(response: dict) -> list[str]:
    return [choice["text"] for choice in sorted(response["choices"], key=lambda c: c["index"])]


def _job(prompt: str, seed: int, repeats: list[int]) -> transport.Job:
    payload = {"prompt": prompt, "seed": seed}
    if len(repeats) > 1:
        payload["n"] = len(repeats)
    return transport.Job(payload, _texts, repeats, task="task", question_id=prompt)


def _transport(url: str, stats: dict | None = None, **settings) -> transport.HTTPTransport:
    retry = transport.RetryPolicy(settings.pop("max_retries", 3), settings.pop("base_delay", 0.01), 60.0)
    return transport.HTTPTransport(url, name="test", retry=retry, stats=stats, **settings)


def test_the_module_imports_no_lm_eval():
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('t', {str(MODULE_PATH)!r})\n"
        "module = importlib.util.module_from_spec(spec); sys.modules['t'] = module\n"
        "spec.loader.exec_module(module)\n"
        "print(sorted(name for name in sys.modules if name.startswith(('lm_eval', 'capcal'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_retry_after_header() -> None:
    assert transport.retry_after_seconds("3") == 3.0
    assert transport.retry_after_seconds(None) is None and transport.retry_after_seconds("soon") is None
    in_ten_seconds = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 10))
    assert 5.0 < transport.retry_after_seconds(in_ten_seconds) <= 10.0


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    policy = transport.RetryPolicy(max_retries=5, base_delay=1.0, max_delay=6.0)
    for attempt, (low, high) in enumerate([(0.5, 1.0), (1.0, 2.0), (2.0, 4.0), (4.0, 6.0)], start=1):
        delays = [policy.delay(attempt, None) for _ in range(200)]
        assert low <= min(delays) and max(delays) <= high, attempt
    assert policy.delay(1, 3.0) == 3.0 and policy.delay(1, 100.0) == 6.0  # Retry-After wins, capped


def test_every_request_succeeds_with_bounded_concurrency() -> None:
    stats: dict = {}
    received: list[tuple[str, dict]] = []
    with ScriptedServer(delay_s=0.01, gather=2) as server:  # two at once, whatever the scheduling
        jobs = [_job(f"p{i}", 10 * i, [0, 1]) for i in range(6)]
        _transport(server.url, stats, concurrency=2).run(
            jobs, on_received=lambda j, s: received.append((j, s))
        )
    assert [job.samples for job in jobs] == [{0: f"p{i}-{10 * i}", 1: f"p{i}-{10 * i + 1}"} for i in range(6)]
    assert all(job.error is None and job.attempts == 1 for job in jobs)
    assert server.max_in_flight == 2 and len(received) == 6
    assert stats == {"requests_sent": 6, "samples_received": 12, "retries": 0, "retries_by_cause": {}}


@pytest.mark.parametrize(
    "fault, cause",
    [("429", "http_429"), ("500", "http_500"), ("hold", "timeout"), ("reset", "connection"),
     ("truncated", "invalid_response")],
)  # fmt: skip
def test_each_fault_is_retried_and_counted_by_cause(fault: str, cause: str) -> None:
    stats: dict = {}
    with ScriptedServer({"p": [fault]}) as server:
        job = _job("p", 1, [0])
        started = time.monotonic()
        _transport(server.url, stats, timeout=FAULT_TIMEOUT_S).run([job])
        elapsed = time.monotonic() - started
    assert job.samples == {0: "p-1"} and job.error is None and job.attempts == 2
    assert stats["retries"] == 1 and stats["retries_by_cause"] == {cause: 1} and stats["requests_sent"] == 2
    if fault == "429":
        assert elapsed >= 0.95  # the server's Retry-After: 1, not the 0.01 s backoff


def test_a_request_that_keeps_failing_gets_its_last_error_redacted_and_the_others_finish() -> None:
    stats: dict = {}
    key = {"value": SECRET}
    with ScriptedServer({"bad": ["500", "500", "500"]}) as server:  # "bad": 3 attempts, all 500
        failing, passing = _job("bad", 1, [0, 1]), _job("good", 5, [0])
        _transport(
            server.url,
            stats,
            max_retries=2,
            headers=lambda: {"Authorization": f"Bearer {key['value']}"},
            redact=lambda text: text.replace(key["value"], "[API key]"),
        ).run([failing, passing])
    assert passing.samples == {0: "good-5"} and passing.error is None
    assert failing.attempts == 3 and failing.samples == {} and failing.missing() == [0, 1]
    assert failing.error == "HTTP 500: failed; you sent Bearer [API key]"
    assert stats["retries_by_cause"] == {"http_500": 2}


def test_a_client_error_is_not_retried() -> None:
    with ScriptedServer({"p": ["400"]}) as server:
        job = _job("p", 1, [0])
        _transport(server.url).run([job])
    assert job.attempts == 1 and job.error == "HTTP 400: bad request"


def test_fewer_choices_than_asked_for_are_completed_by_follow_ups() -> None:
    def split(job, rest):
        return [_job(job.payload["prompt"], 100 + repeat, [repeat]) for repeat in rest]

    with ScriptedServer({"p": ["one_choice"]}) as server:
        job = _job("p", 1, [0, 1, 2])
        _transport(server.url).run([job], split=split)
    assert job.samples == {0: "p-1", 1: "p-101", 2: "p-102"} and job.error is None
    assert [body.get("n") for body in server.received] == [3, None, None]


def test_a_server_that_is_down_gives_one_failure_report(tmp_path: Path) -> None:
    stats: dict = {}
    jobs = [_job(f"p{i}", i, [0, 1]) for i in range(7)]
    _transport(f"http://127.0.0.1:{free_port()}/v1/completions", stats, max_retries=1).run(jobs)
    assert all(job.error.startswith("ClientConnectorError") and job.attempts == 2 for job in jobs)
    assert stats["retries_by_cause"] == {"connection": 7} and stats["requests_sent"] == 14
    cache = tmp_path / "samples.sqlite"
    report, failures = transport.failure_report(
        jobs, name="test", what="sampling", max_retries=1, samples_needed=16, cached_samples=2,
        received_samples=0, cache_path=cache,
    )  # fmt: skip
    assert [(f.question_id, f.repeats, f.attempts) for f in failures] == [
        (f"p{i}", [0, 1], 2) for i in range(7)
    ]
    lines = report.splitlines()
    assert lines[0].startswith(
        "test: sampling did not finish: 7 of 7 requests (14 of 16 samples) still failed after up to 1 "
        "retries; last error: ClientConnectorError"
    )
    assert (
        lines[1]
        == f"Finished: 2 of 16 samples (2 read from the cache, 0 received now), all cached in {cache}."
    )
    assert lines[2] == "Not finished: 7 requests (the first 5):"
    assert lines[3].startswith("  task p0 repeats 0,1 (2 attempts): ClientConnectorError")
    assert len(lines) == 9 and lines[-1].startswith(
        f"To resume, re-run the same command: finished samples are read from {cache}"
    )
    raised = transport.APIRequestsFailed(report, failures)
    assert str(raised) == report and raised.failures == failures
    uncached, _ = transport.failure_report(
        jobs[:1], name="test", what="sampling", max_retries=1, samples_needed=2, cached_samples=0,
        received_samples=0, cache_path=None,
    )  # fmt: skip
    assert "not cached: sample_cache=False" in uncached and "no sample cache" in uncached
    assert transport.failure_report(
        [], name="t", what="w", max_retries=1, samples_needed=0, cached_samples=0, received_samples=0,
        cache_path=None,
    ) == ("", [])  # fmt: skip


def test_a_stream_of_jobs_is_run_with_bounded_in_flight_work() -> None:
    """500 jobs from a generator, 3 at once, at most 7 started and unfinished (some wait for a retry after a
    500): the generator is read lazily (no coroutine or payload per job up front), the server never sees more
    than 3 requests at once, and the event loop holds 7 worker tasks (plus aiohttp's few per connection)."""
    concurrency, max_pending, count = 3, 7, 500
    started, finished, most_pending, most_workers, most_tasks = [0], [0], [0], [0], [0]
    pending_at_first_done: list[int] = []

    def jobs():
        for i in range(count):
            started[0] += 1
            most_pending[0] = max(most_pending[0], started[0] - finished[0])
            tasks = asyncio.all_tasks()
            most_workers[0] = max(most_workers[0], sum(t.get_coro().__name__ == "worker" for t in tasks))
            most_tasks[0] = max(most_tasks[0], len(tasks))
            yield _job(f"p{i}", i, [0])

    def on_done(job: transport.Job) -> None:
        if not pending_at_first_done:
            pending_at_first_done.append(started[0])
        finished[0] += 1

    stats: dict = {}
    script = {f"p{i}": ["500"] for i in range(1, 40, 2)}  # 20 jobs get a 500 on their first attempt
    with ScriptedServer(script, delay_s=0.002, gather=concurrency) as server:
        summary = _transport(server.url, stats, concurrency=concurrency, max_pending=max_pending).run(
            jobs(), on_done=on_done
        )
    assert summary.jobs == finished[0] == count and summary.failed == []
    assert stats["samples_received"] == count and stats["retries_by_cause"] == {"http_500": 20}
    assert most_pending[0] == max_pending  # the bound is reached (the workers are busy) and never exceeded
    assert pending_at_first_done == [max_pending]  # only the first max_pending jobs were built at first
    assert most_workers[0] == max_pending  # one worker task per pending job, not one per job
    assert most_tasks[0] <= max_pending + 2 * concurrency + 1  # + run()'s and aiohttp's connection tasks
    assert server.max_in_flight == concurrency


def test_an_error_of_the_job_iterator_stops_the_run_and_is_raised_as_is() -> None:
    def jobs():
        yield from (_job(f"p{i}", i, [0]) for i in range(5))
        raise ValueError("bad request list")

    with ScriptedServer() as server, pytest.raises(ValueError, match="bad request list"):
        _transport(server.url, concurrency=2).run(jobs())


def test_the_failure_report_counts_the_requests_run_when_given_only_the_failed_ones() -> None:
    failed = _job("bad", 1, [0, 1])
    failed.error = "HTTP 500: failed"
    report, failures = transport.failure_report(
        [failed], name="test", what="sampling", max_retries=1, samples_needed=20, cached_samples=0,
        received_samples=18, cache_path=None, total=10,
    )  # fmt: skip
    assert report.startswith("test: sampling did not finish: 1 of 10 requests (2 of 20 samples)")
    assert [f.question_id for f in failures] == ["bad"]


# --- by kind: boundaries, units, pass-through, state across two events, whole messages ----------------------


def test_retry_after_reads_seconds_clamps_at_zero_and_refuses_what_it_cannot_read() -> None:
    assert transport.retry_after_seconds("2.5") == 2.5  # seconds, not milliseconds
    assert transport.retry_after_seconds("0") == 0.0 and transport.retry_after_seconds("-4") == 0.0
    assert transport.retry_after_seconds("") is None
    assert transport.retry_after_seconds("Mon, 01 Jan 2001 00:00:00 GMT") == 0.0  # a date in the past


def test_each_error_has_its_own_retry_cause() -> None:
    import aiohttp

    causes = {
        TimeoutError("t"): "timeout",
        aiohttp.ServerTimeoutError("t"): "timeout",
        json.JSONDecodeError("bad", "{", 0): "invalid_response",
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad"): "invalid_response",
        ConnectionResetError("r"): "connection",
        aiohttp.ClientPayloadError("cut"): "connection",
    }
    assert {type(error).__name__: transport.error_cause(error) for error in causes} == {
        type(error).__name__: cause for error, cause in causes.items()
    }


def test_retryable_statuses_on_both_sides_of_each_boundary() -> None:
    retryable = {None, 408, 409, 425, 429, 500, 503, 599}
    refused = {400, 404, 407, 410, 424, 426, 428, 430, 499}
    assert {status: transport.is_retryable(status) for status in retryable | refused} == {
        **dict.fromkeys(retryable, True),
        **dict.fromkeys(refused, False),
    }


def test_backoff_is_base_times_two_to_the_attempt_minus_one_times_the_jitter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the jitter drawn at its bound (recorded: U(0.5, 1)), retry a waits base * 2^(a-1), capped at
    max_delay; a Retry-After of 0 s is the server's (no backoff), one above the cap is capped."""
    drawn: list[tuple[float, float]] = []

    def jitter(low: float, high: float) -> float:
        drawn.append((low, high))
        return high

    monkeypatch.setattr(transport.random, "uniform", jitter)
    policy = transport.RetryPolicy(max_retries=9, base_delay=0.25, max_delay=1.5)
    assert [policy.delay(attempt, None) for attempt in range(1, 6)] == [0.25, 0.5, 1.0, 1.5, 1.5]
    assert drawn == [(0.5, 1.0)] * 5
    assert policy.delay(3, 0.0) == 0.0 and policy.delay(1, 1.5) == 1.5 and policy.delay(1, 1.75) == 1.5
    assert len(drawn) == 5  # a Retry-After draws no jitter
    assert transport.RetryPolicy() == transport.RetryPolicy(5, 1.0, 60.0)


def test_the_transport_settings_and_their_bounds() -> None:
    made = transport.HTTPTransport("http://x", concurrency=0, timeout="7")
    assert (made.concurrency, made.max_pending, made.timeout) == (1, 4, 7.0)
    assert transport.HTTPTransport("http://x", concurrency=3).max_pending == 12
    assert transport.HTTPTransport("http://x", concurrency=3, max_pending=2).max_pending == 3
    assert transport.HTTPTransport("http://x", concurrency=3, max_pending=5).max_pending == 5
    assert transport.HTTPTransport("http://x").retry == transport.RetryPolicy()
    stats = {"requests_sent": 4, "retries_by_cause": {"timeout": 1}}
    transport.HTTPTransport("http://x", stats=stats)
    assert stats == {
        "requests_sent": 4,
        "samples_received": 0,
        "retries": 0,
        "retries_by_cause": {"timeout": 1},
    }


def test_the_last_retry_is_made_and_its_success_kept() -> None:
    """max_retries = 2: two 500s, then the third attempt (the last retry) succeeds; with three 500s the job
    fails after exactly three attempts (covered above), with max_retries = 0 after one."""
    with ScriptedServer({"p": ["500", "500"], "q": ["500"]}) as server:
        job = _job("p", 3, [0])
        _transport(server.url, max_retries=2).run([job])
        once = _job("q", 4, [0])
        _transport(server.url, max_retries=0).run([once])
    assert (job.attempts, job.samples, job.error) == (3, {0: "p-3"}, None)
    assert (once.attempts, once.samples, once.error) == (1, {}, "HTTP 500: failed; you sent None")


class HeaderServer(ScriptedServer):
    """A ScriptedServer that records the Authorization header of each attempt."""

    def __init__(self, script: dict[str, list[str]] | None = None) -> None:
        super().__init__(script)
        self.authorizations: list[str | None] = []

    async def _handle(self, request: web.Request) -> web.Response:
        self.authorizations.append(request.headers.get("Authorization"))
        return await super()._handle(request)


def test_headers_are_read_for_each_attempt_and_counters_add_up_across_two_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    keys = iter(["key-1", "key-2", "key-3"])
    stats: dict = {}
    with HeaderServer({"p": ["500"], "q": ["reset"]}) as server:
        http = _transport(server.url, stats, headers=lambda: {"Authorization": next(keys)}, max_retries=4)
        with caplog.at_level(logging.INFO, logger=transport.__name__):
            http.run([_job("p", 1, [0, 1, 2])])
        # the first run's lines, read now: whether the second run's reach caplog depends on the log level
        # that pytest or an earlier test left
        messages = [r.getMessage() for r in caplog.records if r.name == transport.__name__]
        assert messages == ["test: request failed (HTTP 500: failed; you sent key-1); retry 1 of 4 in 0.0 s"]
        assert server.authorizations == ["key-1", "key-2"]
        assert stats == {
            "requests_sent": 2,
            "samples_received": 3,
            "retries": 1,
            "retries_by_cause": {"http_500": 1},
        }
        keys = iter(["key-4", "key-5"])
        job = _job("q", 9, [5])
        http.run([job])
    assert job.samples == {5: "q-9"}
    assert stats == {
        "requests_sent": 4,
        "samples_received": 4,
        "retries": 2,
        "retries_by_cause": {"http_500": 1, "connection": 1},
    }


def test_the_retry_after_of_a_429_is_slept_and_logged_in_seconds(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's ``Retry-After: 1`` is one second (not 1 ms, not 1000 s): what the client sleeps (asyncio's
    sleep recorded, not slept; the server's own sleeps are of 0 s) and what it logs."""
    slept: list[float] = []
    sleep = asyncio.sleep

    async def recorded_sleep(delay: float, *args, **kwargs):
        if delay:
            slept.append(delay)
        return await sleep(0)

    monkeypatch.setattr(transport.asyncio, "sleep", recorded_sleep)
    with ScriptedServer({"p": ["429"]}) as server, caplog.at_level(logging.INFO, logger=transport.__name__):
        job = _job("p", 1, [0])
        _transport(server.url, max_retries=3).run([job])
    assert slept == [1.0] and job.samples == {0: "p-1"}
    assert [r.getMessage() for r in caplog.records if r.name == transport.__name__] == [
        "test: request failed (HTTP 429: slow down); retry 1 of 3 in 1.0 s"
    ]


def test_response_values_fill_the_jobs_repeats_in_order_and_extra_values_are_dropped() -> None:
    received: list[tuple[str, dict]] = []
    with ScriptedServer() as server:
        job = transport.Job({"prompt": "p", "seed": 20, "n": 3}, _texts, [7, 4], task="t", question_id="p")
        stats: dict = {}
        _transport(server.url, stats).run([job], on_received=lambda j, s: received.append((j.question_id, s)))
    assert job.samples == {7: "p-20", 4: "p-21"} and job.missing() == []
    assert stats["samples_received"] == 2 and received == [("p", {7: "p-20", 4: "p-21"})]


def test_a_follow_ups_error_and_attempts_reach_the_job_and_empty_responses_are_not_reported() -> None:
    received: list[dict] = []

    def split(job, rest):
        return [_job(f"f{repeat}", 100 + repeat, [repeat]) for repeat in rest]

    def parse(response: dict) -> list[str]:
        return _texts(response)[:1]  # one value of three: repeats 1 and 2 go to follow-ups

    with ScriptedServer({"f2": ["500", "400"]}) as server:
        job = transport.Job({"prompt": "p", "seed": 1, "n": 3}, parse, [0, 1, 2], question_id="p")
        _transport(server.url).run([job], split=split, on_received=lambda j, s: received.append(s))
        empty = transport.Job({"prompt": "e", "seed": 1}, lambda response: [], [0])
        _transport(server.url).run([empty], on_received=lambda j, s: received.append(s))
    assert job.samples == {0: "p-1", 1: "f1-101"} and job.missing() == [2]
    assert job.error == "HTTP 400: bad request" and job.attempts == 2  # the follow-up's two attempts
    assert received == [{0: "p-1"}, {1: "f1-101"}]
    assert empty.samples == {} and empty.error is None and empty.missing() == [0]


def test_a_failed_follow_up_keeps_its_error_when_a_later_one_succeeds() -> None:
    """Follow-ups run in order; the job keeps the error of one that failed (and its attempts) even when a
    follow-up after it succeeds: the job is still missing that repeat."""

    def split(job, rest):
        return [_job(f"g{repeat}", 200 + repeat, [repeat]) for repeat in rest]

    def parse(response: dict) -> list[str]:
        return _texts(response)[:1]

    with ScriptedServer({"g1": ["500", "400"]}) as server:  # the first follow-up fails, the second succeeds
        job = transport.Job({"prompt": "q", "seed": 1, "n": 3}, parse, [0, 1, 2], question_id="q")
        _transport(server.url).run([job], split=split)
    assert job.samples == {0: "q-1", 2: "g2-202"} and job.missing() == [1]
    assert job.error == "HTTP 400: bad request" and job.attempts == 2


def test_run_counts_its_jobs_calls_on_done_once_each_and_lists_the_failed_in_order() -> None:
    done: list[str] = []
    with ScriptedServer({"b1": ["400"], "b2": ["400"]}) as server:
        jobs = [_job(name, i, [0]) for i, name in enumerate(["b1", "g1", "b2", "g2"])]
        summary = _transport(server.url, concurrency=1, max_pending=1).run(
            jobs, on_done=lambda j: done.append(j.question_id)
        )
    assert summary.jobs == 4 and [job.question_id for job in summary.failed] == ["b1", "b2"]
    assert done == ["b1", "g1", "b2", "g2"]
    assert transport.HTTPTransport("http://127.0.0.1:9").run([]) == transport.RunSummary(0, [])


def test_a_long_error_body_is_cut_at_500_characters() -> None:
    class LongErrorServer(ScriptedServer):
        async def _handle(self, request: web.Request) -> web.Response:
            await request.json()
            return web.Response(status=400, text="x" * 499 + "yz" + "w" * 100)

    with LongErrorServer() as server:
        job = _job("p", 1, [0])
        _transport(server.url).run([job])
    assert job.error == "HTTP 400: " + "x" * 499 + "y"


def _failed(name: str, repeats: list[int], attempts: int, error: str) -> transport.Job:
    job = _job(name, 0, repeats)
    job.attempts, job.error = attempts, error
    return job


@pytest.mark.parametrize("count", [5, 6])
def test_the_report_lists_at_most_five_requests_and_names_the_last_error(count: int) -> None:
    jobs = [_failed(f"p{i}", [0], i + 1, f"error {i}") for i in range(count)]
    report, _ = transport.failure_report(
        jobs, name="n", what="w", max_retries=3, samples_needed=count + 4, cached_samples=1,
        received_samples=3, cache_path=None,
    )  # fmt: skip
    lines = report.splitlines()
    assert lines[0] == (
        f"n: w did not finish: {count} of {count} requests ({count} of {count + 4} samples) still failed "
        f"after up to 3 retries; last error: error {count - 1}"
    )
    assert lines[1] == "Finished: 4 of " + f"{count + 4} samples (not cached: sample_cache=False)."
    shown = "" if count == 5 else " (the first 5)"
    assert lines[2] == f"Not finished: {count} requests{shown}:"
    assert lines[3:8] == [f"  task p{i} repeats 0 ({i + 1} attempts): error {i}" for i in range(5)]
    assert len(lines) == 9


def test_the_report_writes_up_to_four_repeats_and_a_range_beyond_and_cuts_errors_at_300() -> None:
    """Each failed request's missing repeats (a's repeat 1 arrived), written one by one up to four, as a
    range beyond; the last error named in the first line; errors cut at 300 characters."""
    long_error = "e" * 299 + "fg"
    jobs = [
        _failed("a", [0, 1, 2, 3], 2, "short"),
        _failed("c", [4, 5, 6, 7], 3, "other"),
        _failed("b", [3, 4, 5, 6, 7], 2, long_error),
        _job("ok", 0, [0]),  # no error: finished, not reported
    ]
    jobs[0].samples = {1: "arrived"}
    jobs[3].samples = {0: "done"}
    report, failures = transport.failure_report(
        jobs, name="n", what="w", max_retries=1, samples_needed=16, cached_samples=2, received_samples=1,
        cache_path="/c.sqlite",
    )  # fmt: skip
    assert [(f.question_id, f.repeats, f.attempts, f.error) for f in failures] == [
        ("a", [0, 2, 3], 2, "short"),
        ("c", [4, 5, 6, 7], 3, "other"),
        ("b", [3, 4, 5, 6, 7], 2, long_error),
    ]
    assert report.splitlines() == [
        "n: w did not finish: 3 of 4 requests (12 of 16 samples) still failed after up to 1 retries; last "
        f"error: {long_error[:300]}",
        "Finished: 4 of 16 samples (2 read from the cache, 1 received now), all cached in /c.sqlite.",
        "Not finished: 3 requests:",
        "  task a repeats 0,2,3 (2 attempts): short",
        "  task c repeats 4,5,6,7 (3 attempts): other",
        f"  task b repeats 3..7 (2 attempts): {long_error[:300]}",
        "To resume, re-run the same command: finished samples are read from /c.sqlite and only the "
        "unfinished requests are sent.",
    ]
