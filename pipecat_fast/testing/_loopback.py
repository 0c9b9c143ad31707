"""Small helpers shared by the loopback emulators."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from typing import Any

from aiohttp import web
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response


def bind_loopback(port: int = 0, host: str = "127.0.0.1") -> socket.socket:
    """A listening TCP socket on ``host`` (127.0.0.1; ``port=0`` picks a free port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted sockets inherit it. asyncio does not set it on connections accepted from a
    # socket passed in as ``sock=`` with TLS, so Nagle held the WebSocket upgrade's 101 behind
    # the TLS session tickets until the client's delayed ACK: ~40 ms on every wss:// dial.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays and objects the emulators accept in a request or message.

Our limit: far above any real request (tool schemas included) and far below Python's recursion
limit (1,000), so nothing that later walks or re-serializes a request can overflow the stack.
"""

# A JSON escape of U+D800-U+DFFF: the only way a lone surrogate gets into parsed text.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class BadJSON(ValueError):
    """Bytes or text that are not an acceptable JSON document (the message says why)."""


def parse_json(raw: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse a request body or WebSocket message as the providers' APIs accept it.

    Stricter than :func:`json.loads`: bytes must be UTF-8, nesting is at most ``max_depth``
    arrays/objects deep, and no string may hold a lone UTF-16 surrogate (an unpaired escape of
    U+D800-U+DFFF): such text cannot be encoded as UTF-8, so the emulator could neither hash,
    tokenize nor echo it later.

    Raises:
        BadJSON: Saying what is wrong with the input.
    """
    if isinstance(raw, bytes | bytearray | memoryview):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as e:
            raise BadJSON(f"not valid UTF-8 (byte {e.start})") from None
    try:
        value = json.loads(raw)
    except RecursionError:
        raise BadJSON(f"nested deeper than {max_depth} levels") from None
    except ValueError as e:
        raise BadJSON(str(e)) from None
    surrogates = _SURROGATE_ESCAPE.search(raw) is not None
    if surrogates or raw.count("[") + raw.count("{") > max_depth:
        _check_tree(value, max_depth, surrogates)
    return value


def is_json_int(value: Any) -> bool:
    """An integer in JSON's sense: ``true`` and ``false`` parse to bools, not counts."""
    return isinstance(value, int) and not isinstance(value, bool)


def _check_tree(value: Any, max_depth: int, surrogates: bool) -> None:
    """Walk a parsed document without recursion: depth, and lone surrogates if ``surrogates``."""

    def bad_string(s: object) -> bool:
        return surrogates and isinstance(s, str) and _SURROGATE.search(s) is not None

    if bad_string(value):
        raise BadJSON("a string holds a lone UTF-16 surrogate")
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list):
            continue
        if depth > max_depth:
            raise BadJSON(f"nested deeper than {max_depth} levels")
        if isinstance(item, dict):
            if any(bad_string(k) for k in item):
                raise BadJSON("a key holds a lone UTF-16 surrogate")
            children = item.values()
        else:
            children = item
        for child in children:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
            elif bad_string(child):
                raise BadJSON("a string holds a lone UTF-16 surrogate")


async def sleep_ms(ms: float) -> None:
    """Sleep ``ms`` milliseconds (no-op for zero or negative values)."""
    if ms > 0:
        await asyncio.sleep(ms / 1000.0)


class WebSocketEmulator:
    """Base of the WebSocket provider emulators: bind, serve, stop, async context manager.

    Subclasses implement :meth:`handle` (one call per connection), call :meth:`touch` on
    every message in or out (the idle clock), and may override :meth:`check_request` to
    reject a handshake the way the provider does.

    Args:
        port: TCP port; 0 picks a free one.
        host: Address to listen on (127.0.0.1; another address to serve from a network
            namespace).
        ssl: A server ``ssl.SSLContext`` to serve ``wss://`` (TLS), or None for ``ws://``.
        idle_close_s: Close a connection with no message in either direction for this
            long (code 1000, reason ``"idle timeout"``), as providers do; None never.

    Attributes:
        idle_closes: Connections closed for idleness.
    """

    def __init__(
        self,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        ssl: Any = None,
        idle_close_s: float | None = None,
    ):
        self._port = port
        self.host = host
        self.ssl = ssl
        self.idle_close_s = idle_close_s
        self.idle_closes = 0
        self._server: Server | None = None
        self._last_activity: dict[ServerConnection, float] = {}

    @property
    def port(self) -> int:
        """The bound port (valid after :meth:`start`)."""
        return self._port

    @property
    def scheme(self) -> str:
        """``wss`` when serving TLS, ``ws`` otherwise."""
        return "wss" if self.ssl is not None else "ws"

    @property
    def authority(self) -> str:
        """``host:port`` as a URL carries it."""
        return f"{self.host}:{self.port}"

    def touch(self, connection: ServerConnection) -> None:
        """Note traffic on ``connection`` (restarts its idle clock)."""
        if connection in self._last_activity:
            self._last_activity[connection] = asyncio.get_running_loop().time()

    async def _serve(self, connection: ServerConnection) -> None:
        if self.idle_close_s is None:
            await self.handle(connection)
            return
        self._last_activity[connection] = asyncio.get_running_loop().time()
        watcher = asyncio.create_task(self._close_when_idle(connection, self.idle_close_s))
        try:
            await self.handle(connection)
        finally:
            watcher.cancel()
            self._last_activity.pop(connection, None)

    async def _close_when_idle(self, connection: ServerConnection, idle_s: float) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = self._last_activity.get(connection, loop.time()) + idle_s
            if loop.time() >= due:
                self.idle_closes += 1
                await connection.close(1000, "idle timeout")
                return
            await asyncio.sleep(due - loop.time())

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
        sock = bind_loopback(self._port, self.host)
        self._port = sock.getsockname()[1]
        self._server = await serve(
            self._serve,
            sock=sock,
            process_request=self.check_request,
            max_size=16 * 1024 * 1024,
            compression=None,
            ssl=self.ssl,
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

    Attributes:
        max_body_bytes: Largest request body accepted (read when the server starts); a larger
            one makes ``request.read()`` raise ``HTTPRequestEntityTooLarge``, which a route
            answers in its provider's error shape.
    """

    max_body_bytes = 64 * 1024 * 1024
    shutdown_timeout_s = 60.0
    """How long :meth:`stop` lets requests still being handled finish before it cancels
    them (aiohttp's default)."""

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
        app = web.Application(client_max_size=self.max_body_bytes)
        self.routes(app)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=self.shutdown_timeout_s)
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
