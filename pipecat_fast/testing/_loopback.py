"""Small helpers shared by the loopback emulators."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from aiohttp import web
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response


def bind_loopback(port: int = 0) -> socket.socket:
    """A listening TCP socket on 127.0.0.1 (``port=0`` picks a free port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def sleep_ms(ms: float) -> None:
    """Sleep ``ms`` milliseconds (no-op for zero or negative values)."""
    if ms > 0:
        await asyncio.sleep(ms / 1000.0)


class WebSocketEmulator:
    """Base of the WebSocket provider emulators: bind, serve, stop, async context manager.

    Subclasses implement :meth:`handle` (one call per connection) and may override
    :meth:`check_request` to reject a handshake the way the provider does.
    """

    def __init__(self, *, port: int = 0):
        self._port = port
        self._server: Server | None = None

    @property
    def port(self) -> int:
        """The bound port (valid after :meth:`start`)."""
        return self._port

    async def check_request(
        self, connection: ServerConnection, request: Request
    ) -> Response | None:
        """Inspect the opening handshake; return a response to reject it, None to accept."""
        return None

    async def handle(self, connection: ServerConnection) -> None:
        """Serve one accepted connection until it closes."""
        raise NotImplementedError

    async def start(self) -> None:
        """Bind and serve."""
        sock = bind_loopback(self._port)
        self._port = sock.getsockname()[1]
        self._server = await serve(
            self.handle,
            sock=sock,
            process_request=self.check_request,
            max_size=16 * 1024 * 1024,
            compression=None,
        )

    async def stop(self) -> None:
        """Close every connection and stop serving."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> Any:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


class HttpEmulator:
    """Base of the HTTP provider emulators: an aiohttp app on a loopback port.

    Subclasses add their routes in :meth:`routes`.
    """

    def __init__(self, *, port: int = 0):
        self._port = port
        self._runner: web.AppRunner | None = None

    @property
    def port(self) -> int:
        """The bound port (valid after :meth:`start`)."""
        return self._port

    def routes(self, app: web.Application) -> None:
        """Register the provider's routes on ``app``."""
        raise NotImplementedError

    async def start(self) -> None:
        """Bind and serve."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        self.routes(app)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        sock = bind_loopback(self._port)
        self._port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    async def stop(self) -> None:
        """Stop serving."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Any:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
