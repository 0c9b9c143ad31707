"""The real ``sglang-router`` (SGLang Model Gateway) in front of engine replicas, on loopback.

:class:`SglangRouter` runs the router from the ``sglang-router`` PyPI package (a Rust gateway
with a Python launcher) as a subprocess, pointed at OpenAI-compatible workers such as
:class:`~pipecat_fast.testing.llama_cpp_server.LlamaServer`, and waits until every worker is
registered and healthy.

Routing facts used here (sglang-router 0.3.2; SGLang Model Gateway docs, "Routing Policies"):

- ``consistent_hashing`` routes by the ``X-SMG-Routing-Key`` header on a hash ring (a key always
  reaches the same healthy worker); ``X-SMG-Target-Worker`` picks a worker by index; with
  neither it falls back to implicit keys (``Authorization``, ``X-Forwarded-For``, ``Cookie``),
  then random. The launcher's ``--policy`` choices omit it in 0.3.2, but its ``RouterArgs`` and
  the Rust core accept it, so this module builds ``RouterArgs`` itself.
- ``manual`` pins a routing key to the worker it was first given (sticky even when workers
  are added); ``cache_aware`` routes by the request text's longest prefix match against an
  approximate tree per worker; ``round_robin`` and ``random`` ignore the request.
- The router works with any OpenAI-compatible HTTP worker: it probes a worker for gRPC first
  (a worker that only speaks HTTP/1.1 logs one parse error per probe) and then uses HTTP.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from loguru import logger

ROUTING_KEY_HEADER = "X-SMG-Routing-Key"
"""The header ``consistent_hashing`` and ``manual`` route on."""

POLICIES = ("consistent_hashing", "manual", "cache_aware", "round_robin", "random", "power_of_two")


class RouterError(RuntimeError):
    """The router could not be started (its log tail is in the message)."""


def sglang_router_available() -> bool:
    """Whether the ``sglang_router`` package (and its Rust core) can be imported."""
    return (
        importlib.util.find_spec("sglang_router") is not None
        and importlib.util.find_spec("sglang_router.sglang_router_rs") is not None
    )


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class SglangRouter:
    """``sglang-router`` on a free loopback port in front of ``worker_urls``.

    Args:
        worker_urls: The workers' root URLs (``http://127.0.0.1:PORT``, no ``/v1``).
        policy: One of :data:`POLICIES`.
        host: Loopback address to bind.
        port: Port; ``None`` picks a free one.
        startup_timeout_s: Seconds to wait for every worker to be registered and healthy.
        log_path: Where the router's output goes; a temporary file by default.
        extra_args: ``RouterArgs`` fields as ``name=value`` strings (``cache_threshold=0.5``).

    Raises:
        ValueError: For an unknown policy or no workers.
        RouterError: From ``start()`` if the package is missing, the router exits, or the
            workers are not healthy in time.
    """

    def __init__(
        self,
        worker_urls: Sequence[str],
        *,
        policy: str = "consistent_hashing",
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout_s: float = 60.0,
        log_path: str | Path | None = None,
        extra_args: Sequence[str] = (),
    ):
        if policy not in POLICIES:
            raise ValueError(f"unknown router policy {policy!r}; known: {', '.join(POLICIES)}")
        if not worker_urls:
            raise ValueError("the router needs at least one worker URL")
        self.worker_urls = [u.rstrip("/") for u in worker_urls]
        self.policy = policy
        self._router_host = host
        self._router_port = port
        self._router_timeout = startup_timeout_s
        self._router_given_log = Path(log_path) if log_path else None
        self._router_log: Path | None = None
        self._router_tmp: Path | None = None
        self._router_extra = list(extra_args)
        self._router_proc: asyncio.subprocess.Process | None = None

    @property
    def root_url(self) -> str:
        """``http://host:port``."""
        if self._router_port is None:
            raise RouterError("router not started")
        return f"http://{self._router_host}:{self._router_port}"

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL, ``http://host:port/v1``."""
        return self.root_url + "/v1"

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the router's log."""
        if self._router_log is None or not self._router_log.exists():
            return ""
        return "\n".join(self._router_log.read_text(errors="replace").splitlines()[-lines:])

    def command(self, port: int) -> list[str]:
        """The command line that runs the router."""
        return [
            sys.executable,
            "-m",
            "pipecat_fast.testing.sglang_router",
            "--host",
            self._router_host,
            "--port",
            str(port),
            "--policy",
            self.policy,
            *[arg for extra in self._router_extra for arg in ("--set", extra)],
            *self.worker_urls,
        ]

    async def __aenter__(self) -> SglangRouter:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start the router and wait until every worker is registered and healthy."""
        if not sglang_router_available():
            raise RouterError("sglang_router is not importable: pip install sglang-router")
        if self._router_proc is not None:
            raise RouterError("router already started")
        if self._router_given_log is not None:
            self._router_log = self._router_given_log
        else:
            self._router_tmp = Path(tempfile.mkdtemp(prefix="pipecat-fast-router-"))
            self._router_log = self._router_tmp / "router.log"
        port = self._router_port or _free_port(self._router_host)
        self._router_port = port
        try:
            with open(self._router_log, "ab") as log_file:
                self._router_proc = await asyncio.create_subprocess_exec(
                    *self.command(port),
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=asyncio.subprocess.STDOUT,
                    env=dict(os.environ, NO_COLOR="1", RUST_LOG_STYLE="never"),
                )
            await self._wait_ready()
        except BaseException:
            await self.stop()
            raise

    async def _wait_ready(self) -> None:
        import aiohttp

        assert self._router_proc is not None
        url = self.root_url + "/workers"
        try:
            async with asyncio.timeout(self._router_timeout), aiohttp.ClientSession() as http:
                while True:
                    if self._router_proc.returncode is not None:
                        raise RouterError(
                            f"sglang-router exited with code {self._router_proc.returncode}"
                            f"\n{self.log_tail()}"
                        )
                    try:
                        async with http.get(url, timeout=aiohttp.ClientTimeout(total=2)) as r:
                            if r.status == 200:
                                workers = (await r.json()).get("workers", [])
                                healthy = [w for w in workers if w.get("is_healthy")]
                                if len(healthy) >= len(self.worker_urls):
                                    return
                    except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
                        pass
                    await asyncio.sleep(0.2)
        except TimeoutError:
            raise RouterError(
                f"sglang-router's workers not healthy within {self._router_timeout} s"
                f"\n{self.log_tail()}"
            ) from None

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the router: SIGTERM, then SIGKILL. Safe to call twice."""
        proc, self._router_proc = self._router_proc, None
        try:
            if proc is not None and proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), timeout_s)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
        except BaseException:
            if proc is not None and proc.returncode is None:
                proc.kill()
            raise
        finally:
            if self._router_tmp is not None:
                shutil.rmtree(self._router_tmp, ignore_errors=True)
                self._router_tmp = None


def _parse_value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the router (what :class:`SglangRouter` starts): ``... --policy P URL [URL ...]``."""
    parser = argparse.ArgumentParser(description="sglang-router with any of its policies.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--policy", default="consistent_hashing", choices=POLICIES)
    parser.add_argument("--set", action="append", default=[], help="RouterArgs field=value")
    parser.add_argument("workers", nargs="+")
    args = parser.parse_args(argv)
    from sglang_router.launch_router import launch_router
    from sglang_router.router_args import RouterArgs

    fields = dict(
        worker_urls=args.workers,
        host=args.host,
        port=args.port,
        policy=args.policy,
        worker_startup_timeout_secs=60,
        worker_startup_check_interval=1,
        health_check_interval_secs=2,
        log_level="warn",
    )
    for item in args.set:
        name, _, value = item.partition("=")
        fields[name] = _parse_value(value)
    logger.info(f"sglang-router: {args.policy} over {', '.join(args.workers)}")
    launch_router(RouterArgs(**fields))


if __name__ == "__main__":
    main()
