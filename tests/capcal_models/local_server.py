"""Local HTTP servers for the API tests: an aiohttp application on 127.0.0.1, served from its own thread
and event loop so that a test can call synchronous client code against it. Needs aiohttp only (no lm-eval).

``CompletionsStandIn`` answers without a model; ``FaultInjectingProxy`` forwards to a real server and fails on
purpose (test_api.py), and counts what it passed on (test_judge.py counts its requests there, because the
session's server is shared by other tests)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import threading
from collections import Counter
from collections.abc import Coroutine
from typing import Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ThreadedApp:
    """Serves an ``aiohttp.web.Application`` on 127.0.0.1:``port`` until ``stop``."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self, app) -> None:
        from aiohttp import web

        self._runner = web.AppRunner(app)
        self.loop.run_until_complete(self._runner.setup())
        self.loop.run_until_complete(web.TCPSite(self._runner, "127.0.0.1", self.port).start())
        self._thread.start()

    def call(self, coroutine: Coroutine[Any, Any, Any], timeout: float = 30) -> Any:
        """Run a coroutine on the server's loop (to read its state safely) and return its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=timeout)

    def stop(self) -> None:
        self.call(self._runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)


class PostServer:
    """A test server that answers POSTs to ``ROUTE`` with ``_handle`` (an aiohttp handler) while in a ``with``
    block, served by a ``ThreadedApp`` on 127.0.0.1:``port``."""

    ROUTE = "/v1/completions"

    def __init__(self, port: int | None = None) -> None:
        self._server = ThreadedApp(port)
        self.port = self._server.port

    def __enter__(self) -> PostServer:
        from aiohttp import web

        app = web.Application()
        app.router.add_post(self.ROUTE, self._handle)
        self._server.start(app)
        return self

    def __exit__(self, *exc_info) -> None:
        self._server.stop()

    async def _handle(self, request):
        raise NotImplementedError


GATHER_TIMEOUT_S = 60.0


class GatheringServer(PostServer):
    """A ``PostServer`` that counts requests in flight (``in_flight``, ``max_in_flight``) and can hold its
    first answers until ``gather`` requests are in flight at once (at most ``GATHER_TIMEOUT_S``;
    ``_wait_until_gathered``), so that a test of a concurrency bound reaches it whatever the scheduling (with
    only a delay, a loaded machine may answer each request before the next arrives)."""

    def __init__(self, port: int | None = None, gather: int = 0) -> None:
        super().__init__(port)
        self.gather = gather
        self.in_flight = self.max_in_flight = 0
        self._gathered: asyncio.Event | None = None

    async def _wait_until_gathered(self) -> None:
        if self._gathered is None:
            self._gathered = asyncio.Event()
        if self.in_flight >= self.gather:
            self._gathered.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._gathered.wait(), GATHER_TIMEOUT_S)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.ROUTE}"


class CompletionsStandIn(GatheringServer):
    """A stand-in for an OpenAI-compatible completions server (no model): answers each POST after ``delay_s``
    with ``n`` choices whose text is ``"<prompt> #<seed + i>"``; counts requests and the most in flight.
    ``gather``: as ``GatheringServer``."""

    def __init__(self, port: int | None = None, delay_s: float = 0.0, gather: int = 0) -> None:
        super().__init__(port, gather)
        self.delay_s = delay_s
        self.received = 0

    async def _handle(self, request):
        from aiohttp import web

        body = await request.json()
        self.received += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.gather and not (self._gathered and self._gathered.is_set()):
                await self._wait_until_gathered()
            await asyncio.sleep(self.delay_s)
        finally:
            self.in_flight -= 1
        seed = int(body.get("seed", 0))
        choices = [{"index": i, "text": f"{body['prompt']} #{seed + i}"} for i in range(body.get("n", 1))]
        return web.json_response({"choices": choices})


FAULT_KINDS = ("http_500", "http_429", "timeout", "reset", "truncated_json")


class FaultInjectingProxy(PostServer):
    """An HTTP proxy to the real server that fails on purpose (see the module docstring).

    ``inject_faults(every, seed)`` fails one request in every ``every`` it receives (retries included), at a
    seeded offset, cycling through ``FAULT_KINDS`` in a seeded order: HTTP 500 (whose body echoes the
    Authorization header, as a debugging server might), 429 with ``Retry-After: 1``, a timeout (held for
    ``hold_s``, longer than the client's timeout), a connection reset (transport aborted) and truncated JSON
    (status 200, the server's body cut in half). ``down_after`` answers 503 to everything after that many
    successful answers. Counts what it injected per kind, the successful answers per request identity, the
    requests in flight, the Authorization headers it saw and the most requests in flight at once.

    ``sample_logprobs`` (a dict; None: off) records each sample's log-probability as the server drew it: a
    request without ``logprobs`` is forwarded with ``"logprobs": 0`` (the sampled tokens' own
    log-probabilities, which change no sample), and each choice's (sum of its token log-probabilities, token
    count) goes to ``sample_logprobs[prompt][text]`` (``prompt``: its prompt as JSON, text or token ids),
    its ``logprobs`` answered as null, as to a request that did not ask for them.
    """

    ROUTE = "/v1/{endpoint:.*}"

    def __init__(self, upstream: str, port: int | None = None) -> None:
        super().__init__(port)
        self.upstream = upstream.rstrip("/")
        self.reject_first_attempt = False
        self.failing_seeds: set[int] = set()
        self.delay_s = 0.0
        self.hold_s = 0.0
        self.down_after: int | None = None
        self.received = 0
        self.injected: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()  # request identity -> 200 answers passed on whole
        self.seen: set[str] = set()
        self.authorization: set[str] = set()
        self.forwarded: list[dict] = []
        self.sample_logprobs: dict[str, dict[str, list[float]]] | None = None
        self.in_flight = self.max_in_flight = 0
        self._fault_every = 0
        self._fault_offset = 0
        self._fault_order: list[str] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def inject_faults(self, every: int, seed: int, hold_s: float) -> None:
        """Fail one request in every ``every`` (see the class); ``hold_s``: how long a timeout is held."""
        rng = random.Random(seed)
        self._fault_every, self._fault_offset = every, rng.randrange(every)
        self._fault_order = rng.sample(FAULT_KINDS, len(FAULT_KINDS))
        self.hold_s = hold_s

    def _fault(self) -> str | None:
        number = self.received
        self.received += 1
        if not self._fault_every or number % self._fault_every != self._fault_offset:
            return None
        return self._fault_order[(number // self._fault_every) % len(self._fault_order)]

    async def _handle(self, request):
        from aiohttp import web

        body = await request.json()
        authorization = request.headers.get("Authorization", "")
        self.authorization.add(authorization)
        identity = json.dumps(body, sort_keys=True)
        if self.down_after is not None and sum(self.answered.values()) >= self.down_after:
            return web.Response(status=503, text=f"down for maintenance (you sent {authorization})")
        fault = self._fault()
        if fault is not None:
            self.injected[fault] += 1
            if fault == "http_500":
                return web.Response(status=500, text=f"injected failure; request headers: {authorization}")
            if fault == "http_429":
                return web.Response(status=429, text="slow down", headers={"Retry-After": "1"})
            if fault == "timeout":
                await asyncio.sleep(self.hold_s)
                return web.Response(status=504, text="too late")
            if fault == "reset":
                request.transport.abort()
                return web.Response(status=500)  # never reaches the client
            status, text = await self._forward(request, body)
            return web.Response(status=status, text=text[: len(text) // 2], content_type="application/json")
        if self.reject_first_attempt and identity not in self.seen:
            self.seen.add(identity)
            return web.Response(
                status=503, text=f"overloaded, try again ({authorization})", headers={"Retry-After": "0"}
            )
        if body.get("seed") in self.failing_seeds:
            return web.Response(status=500, text="injected failure")
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
            status, text = await self._forward(request, body)
            self.forwarded.append(body)
            if status == 200:
                self.answered[identity] += 1
            return web.Response(status=status, text=text, content_type="application/json")
        finally:
            self.in_flight -= 1

    async def _forward(self, request, body: dict) -> tuple[int, str]:
        import aiohttp

        record = self.sample_logprobs is not None and "logprobs" not in body
        async with aiohttp.ClientSession() as session:
            url = f"{self.upstream}/{request.match_info['endpoint']}"
            async with session.post(url, json={**body, "logprobs": 0} if record else body) as upstream:
                status, text = upstream.status, await upstream.text()
        if not record or status != 200:
            return status, text
        answer, prompts = json.loads(text), body["prompt"]
        if isinstance(prompts, str) or (prompts and isinstance(prompts[0], int)):
            prompts = [prompts]  # one prompt (text or token ids), not a batch of them
        for choice in answer["choices"]:  # choice i of a batch: prompt i // n (vLLM's order)
            prompt = json.dumps(prompts[choice["index"] // int(body.get("n") or 1)])
            token_logprobs = choice["logprobs"]["token_logprobs"]
            recorded = self.sample_logprobs.setdefault(prompt, {})
            recorded[choice["text"]] = [float(sum(token_logprobs)), len(token_logprobs)]
            choice["logprobs"] = None
        return status, json.dumps(answer)
