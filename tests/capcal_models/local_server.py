"""A local HTTP server for the API tests: an aiohttp application on 127.0.0.1, served from its own thread
and event loop so that a test can call synchronous client code against it. Needs aiohttp only (no lm-eval)."""

from __future__ import annotations

import asyncio
import socket
import threading
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


class CompletionsStandIn(PostServer):
    """A stand-in for an OpenAI-compatible completions server (no model): answers each POST after ``delay_s``
    with ``n`` choices whose text is ``"<prompt> #<seed + i>"``; counts requests and the most in flight."""

    def __init__(self, port: int | None = None, delay_s: float = 0.0) -> None:
        super().__init__(port)
        self.delay_s = delay_s
        self.received = 0
        self.in_flight = self.max_in_flight = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.ROUTE}"

    async def _handle(self, request):
        from aiohttp import web

        body = await request.json()
        self.received += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
        finally:
            self.in_flight -= 1
        seed = int(body.get("seed", 0))
        choices = [{"index": i, "text": f"{body['prompt']} #{seed + i}"} for i in range(body.get("n", 1))]
        return web.json_response({"choices": choices})
