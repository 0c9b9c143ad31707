"""A metering proxy in front of an OpenAI-compatible engine: what every request cost, as seen.

``python -m pipecat_fast.testing.metering_proxy --upstream http://127.0.0.1:8080`` listens on
a free loopback port, prints one JSON line ``{"url": ...}``, forwards ``/v1/chat/completions``
(streamed chunk by chunk, unchanged) and every ``GET`` (``/metrics``, ``/slots``, ``/health``)
to the upstream engine, and records per chat request:

- ``caller`` (the ``X-PF-Caller`` header, if any), ``arrived`` (epoch s), ``stream``,
  ``max_tokens``, HTTP ``status``;
- ``ttft_ms`` (arrival to the first content delta, or to the whole body when not streamed),
  ``total_ms``;
- ``prompt_tokens`` / ``cached_tokens`` / ``completion_tokens`` from the engine's usage;
- ``prompt_ms`` (the engine's own prompt time, llama.cpp's ``timings.prompt_ms``) and
  ``queue_ms``: the emulator's ``timings.queue_ms`` when it reports one, else time to first
  token minus the engine's prompt time and one decode step — the time the request waited
  before its prompt was processed;
- ``cancelled``: the client hung up before the end (a withdrawn draft, a cancelled prefill).

It runs in its own process so its work stays off the measured event loop.
``GET /_proxy/records`` returns the records, ``POST /_proxy/reset`` clears them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp
from aiohttp import web

from pipecat_fast.testing._loopback import HttpEmulator

CALLER_HEADER = "X-PF-Caller"
GONE_POLL_S = 0.05
"""How often a relayed request's client connection is checked (s)."""
_HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


@dataclass
class MeteredRequest:
    """One chat request through the proxy (see the module docstring)."""

    caller: str
    arrived: float
    stream: bool
    max_tokens: int | None
    status: int = 0
    ttft_ms: float | None = None
    total_ms: float = 0.0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    prompt_ms: float | None = None
    queue_ms: float | None = None
    cancelled: bool = False

    def finish(self, usage: Any, timings: Any) -> None:
        """Take the engine's usage and timings; derive the queue time."""
        if isinstance(usage, dict):
            self.prompt_tokens = int(usage.get("prompt_tokens") or 0)
            self.completion_tokens = int(usage.get("completion_tokens") or 0)
            details = usage.get("prompt_tokens_details") or {}
            self.cached_tokens = int(details.get("cached_tokens") or 0)
        if isinstance(timings, dict):
            if timings.get("prompt_ms") is not None:
                self.prompt_ms = float(timings["prompt_ms"])
            if timings.get("queue_ms") is not None:
                self.queue_ms = float(timings["queue_ms"])
            elif self.ttft_ms is not None and self.prompt_ms is not None:
                step = float(timings.get("predicted_per_token_ms") or 0.0)
                self.queue_ms = max(0.0, self.ttft_ms - self.prompt_ms - step)


class MeteringProxy(HttpEmulator):
    """The proxy server (see the module docstring).

    Args:
        upstream: The engine's root URL (``http://host:port``).
        port: Port to listen on (0: a free one).
    """

    def __init__(self, upstream: str, *, port: int = 0):
        super().__init__(port=port)
        self.upstream = upstream.rstrip("/").removesuffix("/v1")
        self.records: list[MeteredRequest] = []
        self._http: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        """The proxy's root URL (its OpenAI base URL is this plus ``/v1``)."""
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Open the upstream connection pool, then serve."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        self._http = aiohttp.ClientSession(timeout=timeout, auto_decompress=False)
        await super().start()

    async def stop(self) -> None:
        """Stop serving and close the pool."""
        await super().stop()
        if self._http is not None:
            await self._http.close()
            self._http = None

    def routes(self, app: web.Application) -> None:
        """Chat completions (metered), the proxy's own routes, every other GET forwarded."""
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/_proxy/records", self._records)
        app.router.add_post("/_proxy/reset", self._reset)
        app.router.add_get("/{tail:.*}", self._forward_get)

    async def _records(self, request: web.Request) -> web.Response:
        return web.json_response({"requests": [asdict(r) for r in self.records]})

    async def _reset(self, request: web.Request) -> web.Response:
        self.records.clear()
        return web.json_response({"ok": True})

    def _headers(self, request: web.Request) -> dict[str, str]:
        return {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}

    async def _forward_get(self, request: web.Request) -> web.StreamResponse:
        assert self._http is not None
        try:
            async with self._http.get(
                self.upstream + request.path_qs, headers=self._headers(request)
            ) as upstream:
                body = await upstream.read()
                return web.Response(
                    body=body, status=upstream.status, content_type=upstream.content_type
                )
        except (aiohttp.ClientError, OSError) as e:
            return web.json_response({"error": f"upstream: {e}"}, status=502)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        assert self._http is not None
        raw = await request.read()
        started = time.monotonic()
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        record = MeteredRequest(
            caller=request.headers.get(CALLER_HEADER, ""),
            arrived=time.time(),
            stream=bool(body.get("stream")) if isinstance(body, dict) else False,
            max_tokens=(body.get("max_tokens") or body.get("max_completion_tokens"))
            if isinstance(body, dict)
            else None,
        )
        self.records.append(record)
        return await self._unless_gone(request, record, self._relay(request, raw, record, started))

    async def _unless_gone(
        self, request: web.Request, record: MeteredRequest, relay: Any
    ) -> web.StreamResponse:
        """Relay the request; if its client leaves meanwhile, drop the upstream request too.

        aiohttp does not cancel a handler whose client left (``handler_cancellation`` off),
        so without this a cancelled prefill would go on running at the engine through the
        proxy: the connection is checked every ``GONE_POLL_S``, as an engine's server does.
        """
        task = asyncio.ensure_future(relay)
        transport = request.transport
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=GONE_POLL_S)
                if done:
                    return task.result()
                if transport is None or transport.is_closing():
                    record.cancelled = True
                    task.cancel()  # closes the upstream connection: the engine stops it
                    try:
                        await task
                    except (asyncio.CancelledError, Exception):
                        pass
                    raise ConnectionResetError("the client left")  # aiohttp ignores it
        finally:
            if not task.done():
                task.cancel()

    async def _relay(
        self, request: web.Request, raw: bytes, record: MeteredRequest, started: float
    ) -> web.StreamResponse:
        assert self._http is not None
        try:
            upstream = await self._http.post(
                self.upstream + "/v1/chat/completions", data=raw, headers=self._headers(request)
            )
        except (aiohttp.ClientError, OSError) as e:
            record.status = 502
            record.total_ms = (time.monotonic() - started) * 1000.0
            return web.json_response({"error": {"message": f"upstream: {e}"}}, status=502)
        record.status = upstream.status
        try:
            if not record.stream or upstream.status != 200:
                data = await upstream.read()
                record.ttft_ms = (time.monotonic() - started) * 1000.0
                try:
                    parsed = json.loads(data)
                except ValueError:
                    parsed = {}
                if isinstance(parsed, dict):
                    record.finish(parsed.get("usage"), parsed.get("timings"))
                return web.Response(
                    body=data, status=upstream.status, content_type=upstream.content_type
                )
            return await self._stream(request, upstream, record, started)
        finally:
            upstream.release()
            record.total_ms = (time.monotonic() - started) * 1000.0

    async def _stream(
        self,
        request: web.Request,
        upstream: aiohttp.ClientResponse,
        record: MeteredRequest,
        started: float,
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            status=upstream.status, headers={"Content-Type": "text/event-stream"}
        )
        await response.prepare(request)
        usage = timings = None
        pending = b""
        try:
            async for piece in upstream.content.iter_any():
                pending += piece
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if not line.startswith(b"data: ") or line == b"data: [DONE]":
                        continue
                    try:
                        chunk = json.loads(line[6:])
                    except ValueError:
                        continue
                    if record.ttft_ms is None and _has_content(chunk):
                        record.ttft_ms = (time.monotonic() - started) * 1000.0
                    usage = chunk.get("usage") or usage
                    timings = chunk.get("timings") or timings
                await response.write(piece)
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            record.cancelled = True  # the client hung up: stop reading the engine
            upstream.close()
            raise
        finally:
            record.finish(usage, timings)
        return response


def _has_content(chunk: Any) -> bool:
    for choice in chunk.get("choices") or ():
        delta = choice.get("delta") or {}
        if delta.get("content") or delta.get("tool_calls"):
            return True
    return False


async def _serve(upstream: str) -> None:
    proxy = MeteringProxy(upstream)
    await proxy.start()
    print(json.dumps({"url": proxy.url}), flush=True)
    try:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    finally:
        await proxy.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m pipecat_fast.testing.metering_proxy --upstream URL``; ends when stdin closes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="the engine's root URL")
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve(args.upstream))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())


class MeteringProxyProcess:
    """The proxy in a child process (its work off the caller's event loop).

    ``async with MeteringProxyProcess(upstream) as proxy:`` gives ``proxy.url`` (its root;
    the OpenAI base URL is ``proxy.url + "/v1"``), ``proxy.pid``, ``await proxy.records()``
    and ``await proxy.reset()``. The child exits when the context ends (its stdin closes).

    Raises:
        RuntimeError: On entry, if the child does not start (with its stderr).
    """

    def __init__(self, upstream: str, *, start_timeout_s: float = 30.0):
        self.upstream = upstream
        self.start_timeout_s = start_timeout_s
        self.url = ""
        self._proc: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task | None = None

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    async def __aenter__(self) -> MeteringProxyProcess:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "pipecat_fast.testing.metering_proxy",
            "--upstream",
            self.upstream,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            line = await asyncio.wait_for(self._proc.stdout.readline(), self.start_timeout_s)
            self.url = json.loads(line)["url"]
        except (TimeoutError, ValueError, KeyError) as e:
            if self._proc.returncode is None:
                self._proc.kill()
            err = await self._proc.stderr.read()
            raise RuntimeError(
                f"metering proxy did not start ({e!r}): {err.decode(errors='replace')[-2000:]}"
            ) from e
        self._drain = asyncio.create_task(self._drain_stderr())
        return self

    async def _drain_stderr(self) -> None:
        assert self._proc is not None
        while await self._proc.stderr.readline():
            pass

    async def __aexit__(self, *exc: object) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self._proc.stdin.close()
            try:
                await asyncio.wait_for(self._proc.wait(), 5.0)
            except TimeoutError:
                self._proc.kill()
                await self._proc.wait()
        if self._drain is not None:
            self._drain.cancel()

    async def _call(self, method: str, path: str) -> Any:
        async with aiohttp.ClientSession() as http:
            async with http.request(method, self.url + path) as response:
                response.raise_for_status()
                return await response.json()

    async def records(self) -> list[dict[str, Any]]:
        """Every chat request since the last reset."""
        return (await self._call("GET", "/_proxy/records"))["requests"]

    async def reset(self) -> None:
        """Forget the records."""
        await self._call("POST", "/_proxy/reset")
