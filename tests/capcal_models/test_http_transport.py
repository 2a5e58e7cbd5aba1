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
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiohttp import web

sys.path.insert(0, str(Path(__file__).parent))  # local_server.py
from local_server import GatheringServer, free_port  # noqa: E402

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
