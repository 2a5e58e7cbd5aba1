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
