"""llama.cpp's OpenAI-compatible server, run as a subprocess on loopback.

:class:`LlamaCppServer` starts ``python -m llama_cpp.server`` (from ``llama-cpp-python
[server]``, the ``llama`` extra) on a generated test model (:mod:`.gguf_model`), waits until it
answers, and stops it on exit. It is a real inference engine with a real prefix (KV) cache, so
benches and tests see what prefix caching does to time to first token (TTFT).

Engine facts (llama-cpp-python 0.3.36 server, read in its source and measured; see
``docs/engine.md``): one model, one sequence, requests served one at a time under a global
lock; the KV cache holds only the previous request's tokens, and a new prompt reuses the
longest common token prefix with it; streamed replies carry no ``usage`` object; a request
the client abandons mid-prefill still finishes its prefill before the next one starts, while
one abandoned mid-reply stops at its next token.

``server.request_settings()`` (:mod:`.engine_settings`) gives what each request should carry;
``server.engine_log()`` (:mod:`.engine_log`) what the engine reported about its prefix cache.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loguru import logger

from pipecat_fast.testing.engine_log import EngineLog, parse_engine_log
from pipecat_fast.testing.engine_settings import EngineRequestSettings
from pipecat_fast.testing.gguf_model import MODEL_SPECS, ensure_model


class LlamaServerError(RuntimeError):
    """The engine could not be started (its log tail is in the message)."""


def llama_cpp_available() -> bool:
    """Whether ``llama_cpp`` (llama-cpp-python) can be imported in this environment."""
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None


def engine_llm_settings(server: LlamaCppServer, **overrides: Any) -> dict[str, Any]:
    """``OpenAILLMService.Settings`` keyword arguments for a running engine.

    Shorthand for ``server.request_settings(**overrides).openai_settings_fields()``.

    Args:
        server: A started :class:`LlamaCppServer`.
        **overrides: :class:`EngineRequestSettings` fields (``max_tokens``, ``seed``, ...).

    Returns:
        ``max_tokens``, ``seed`` and ``extra`` (with ``logit_bias``).
    """
    return server.request_settings(**overrides).openai_settings_fields()


# ---------------------------------------------------------------------------------------------
# The server process


_LIVE_PIDS: set[int] = set()  # servers started and not yet stopped, for the atexit hook


@atexit.register
def _kill_leftovers() -> None:  # a last resort when an owner never stopped its server
    for pid in list(_LIVE_PIDS):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # already gone
            pass


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class LlamaCppServer:
    """llama-cpp-python's OpenAI-compatible server on a free loopback port.

    Single model, single sequence (the server's only mode): requests are served one at a
    time, which keeps TTFT figures honest. An async context manager::

        async with LlamaCppServer(size="small") as server:
            llm = OpenAILLMService(
                base_url=server.base_url,
                api_key="none",
                settings=server.request_settings().openai_settings(),
            )

    Args:
        model_path: GGUF file to serve; defaults to :func:`.gguf_model.ensure_model` of
            ``size``.
        size: Named test model when ``model_path`` is not given (``"small"`` or ``"bench"``).
        host: Loopback address to bind.
        port: Port to bind; ``None`` picks a free one.
        n_ctx: Context window in tokens; ``None`` uses the model's trained context
            (8192 for ``bench``, 4096 for ``small``).
        n_threads: CPU threads for decode; ``None``: half the machine's cores (at least 1),
            leaving the rest to the pipeline under test. llama.cpp's threads wait for each
            other at every layer, so one thread starved by other work stalls them all:
            measured on 2 shared cores, a 3,200-token prefill took ~7 s on 1 thread but
            8-32 s on 2 threads while another process kept one core busy (~3.9 s on 2
            threads in the quietest run). See ``docs/engine.md``.
        n_threads_batch: CPU threads for prefill; defaults to ``n_threads``.
        n_batch: Prefill batch size in tokens.
        interrupt_requests: The server's option of that name (its default: on). On, a
            request arriving while a reply streams ends that reply after its next chunk, and
            OpenAI clients see a normal end of stream: the reply is cut silently. Off (the
            default here), the new request waits for the reply to finish, one at a time.
        startup_timeout_s: Seconds to wait for the server to answer.
        log_path: Where the server's stdout and stderr go; defaults to a temporary file,
            removed on stop.
        python: Interpreter that runs the server; defaults to this one.

    Raises:
        LlamaServerError: From ``start()`` / ``__aenter__`` when the server exits early or
            does not answer in time; the message ends with its log tail.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        size: str = "small",
        host: str = "127.0.0.1",
        port: int | None = None,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        n_batch: int = 512,
        interrupt_requests: bool = False,
        startup_timeout_s: float = 60.0,
        log_path: str | Path | None = None,
        python: str | None = None,
    ):
        self._llama_model_path = Path(model_path) if model_path is not None else None
        self._llama_size = size
        self._llama_host = host
        self._llama_fixed_port = port
        self._llama_port: int | None = None
        self._llama_n_ctx = n_ctx or 0  # 0: llama.cpp takes the model's trained context
        self._llama_n_threads = n_threads or max(1, (os.cpu_count() or 2) // 2)
        self._llama_n_threads_batch = n_threads_batch or self._llama_n_threads
        self._llama_n_batch = n_batch
        self._llama_interrupt = interrupt_requests
        self._llama_startup_timeout_s = startup_timeout_s
        self._llama_given_log = Path(log_path) if log_path is not None else None
        self._llama_log_path: Path | None = None
        self._llama_tmpdir: Path | None = None
        self._llama_python = python or sys.executable
        self._llama_proc: asyncio.subprocess.Process | None = None
        self._llama_final_log = ""

    # -- what callers read ------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        """The model name the server reports (the GGUF file's stem)."""
        if self._llama_model_path is None:
            raise LlamaServerError("server not started")
        return self._llama_model_path.stem

    @property
    def port(self) -> int:
        """The bound port (after start)."""
        if self._llama_port is None:
            raise LlamaServerError("server not started")
        return self._llama_port

    @property
    def pid(self) -> int | None:
        """The server process id while it runs, else ``None``."""
        return self._llama_proc.pid if self._llama_proc is not None else None

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL, ``http://host:port/v1``."""
        return f"http://{self._llama_host}:{self.port}/v1"

    @property
    def log_path(self) -> Path | None:
        """The server's log file while it runs."""
        return self._llama_log_path

    def log_text(self) -> str:
        """The server's log so far (after stop: as it was when stopped)."""
        if self._llama_log_path is not None and self._llama_log_path.exists():
            return self._llama_log_path.read_text(errors="replace")
        return self._llama_final_log

    def engine_log(self) -> EngineLog:
        """Prefix-cache reuses and generation timings logged so far (:func:`parse_engine_log`)."""
        return parse_engine_log(self.log_text())

    def request_settings(self, **overrides: Any) -> EngineRequestSettings:
        """:class:`EngineRequestSettings` for the model this server serves (after start).

        Args:
            **overrides: Fields to change (``max_tokens``, ``seed``, ``temperature``).
        """
        if self._llama_model_path is None:
            raise LlamaServerError("server not started")
        return EngineRequestSettings.for_model(self._llama_model_path, **overrides)

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the server's log."""
        return "\n".join(self.log_text().splitlines()[-lines:])

    # -- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> LlamaCppServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def _command(self, port: int) -> list[str]:
        assert self._llama_model_path is not None
        return [
            self._llama_python,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self._llama_model_path),
            "--model_alias",
            self.model_name,
            "--host",
            self._llama_host,
            "--port",
            str(port),
            "--n_ctx",
            str(self._llama_n_ctx),
            "--n_batch",
            str(self._llama_n_batch),
            "--n_ubatch",
            str(self._llama_n_batch),
            "--n_threads",
            str(self._llama_n_threads),
            "--n_threads_batch",
            str(self._llama_n_threads_batch),
            # Logits for the last token only, as a serving engine computes them.
            "--logits_all",
            "false",
            "--interrupt_requests",
            "true" if self._llama_interrupt else "false",
            # The verbose log is the only place the server reports prefix-cache reuse.
            "--verbose",
            "true",
        ]

    async def start(self) -> None:
        """Start the server and wait until it answers.

        Raises:
            LlamaServerError: If ``llama_cpp`` is missing, the server exits, or it does not
                answer within ``startup_timeout_s``.
        """
        if self._llama_proc is not None:
            raise LlamaServerError("server already started")
        self._check_available()
        if self._llama_model_path is None:
            self._llama_model_path = await asyncio.to_thread(ensure_model, self._llama_size)
        if self._llama_given_log is not None:
            self._llama_log_path = self._llama_given_log
        else:
            self._llama_tmpdir = Path(tempfile.mkdtemp(prefix="pipecat-fast-llama-"))
            self._llama_log_path = self._llama_tmpdir / "server.log"
        try:
            attempts = 1 if self._llama_fixed_port is not None else 3
            for attempt in range(attempts):
                port = self._llama_fixed_port or _free_port(self._llama_host)
                if await self._launch(port):
                    self._llama_port = port
                    return
                logger.debug(f"llama.cpp server: port {port} taken, retry {attempt + 1}")
            raise LlamaServerError(f"no free port after {attempts} tries\n{self.log_tail()}")
        except BaseException:
            await self.stop()
            raise

    def _check_available(self) -> None:
        """Raise :class:`LlamaServerError` when the engine cannot be run here."""
        if not llama_cpp_available():
            raise LlamaServerError(
                "llama_cpp is not importable: install llama-cpp-python[server] "
                "(the pipecat-fast 'llama' extra)"
            )

    def _ready_url(self, port: int) -> str:
        """A URL that answers 200 once the model is loaded."""
        return f"http://{self._llama_host}:{port}/v1/models"

    async def _launch(self, port: int) -> bool:
        """Start one process; True when it answers, False when its port was taken."""
        assert self._llama_log_path is not None
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(self._llama_log_path, "ab") as log_file:
            proc = await asyncio.create_subprocess_exec(
                *self._command(port),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log_file,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
            )
        self._llama_proc = proc
        _LIVE_PIDS.add(proc.pid)
        logger.debug(f"llama.cpp server pid {proc.pid} starting on {self._llama_host}:{port}")
        url = self._ready_url(port)
        try:
            async with asyncio.timeout(self._llama_startup_timeout_s):
                while not await _answers(url):
                    if proc.returncode is not None:
                        tail = self.log_tail()
                        if "address already in use" in tail.lower():
                            _LIVE_PIDS.discard(proc.pid)
                            self._llama_proc = None
                            return False
                        raise LlamaServerError(
                            f"llama.cpp server exited with code {proc.returncode} "
                            f"before answering\n{tail}"
                        )
                    await asyncio.sleep(0.1)
        except TimeoutError:
            raise LlamaServerError(
                f"llama.cpp server did not answer within {self._llama_startup_timeout_s} s"
                f"\n{self.log_tail()}"
            ) from None
        logger.debug(f"llama.cpp server ready at http://{self._llama_host}:{port}/v1")
        return True

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the server: SIGTERM, then SIGKILL after ``timeout_s``. Safe to call twice.

        If the caller is cancelled while waiting, the process is killed before the
        cancellation propagates, so no server outlives its owner.
        """
        proc, self._llama_proc = self._llama_proc, None
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
            if proc is not None and proc.returncode is not None:
                _LIVE_PIDS.discard(proc.pid)
            if self._llama_log_path is not None and self._llama_log_path.exists():
                self._llama_final_log = self._llama_log_path.read_text(errors="replace")
            if self._llama_tmpdir is not None:
                shutil.rmtree(self._llama_tmpdir, ignore_errors=True)
                self._llama_tmpdir = None
                self._llama_log_path = None


async def _answers(url: str) -> bool:
    import aiohttp

    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=2)) as response:
                return response.status == 200
    except (aiohttp.ClientError, OSError, TimeoutError):
        return False


async def _serve_forever(args: argparse.Namespace) -> None:
    async with LlamaCppServer(
        size=args.size, port=args.port, n_threads=args.threads, log_path=args.log
    ) as server:
        settings = server.request_settings(max_tokens=args.max_tokens)
        print(f"llama.cpp engine ({args.size} model) at {server.base_url}")
        print(f"model file: {server.model_name}.gguf; log: {server.log_path}")
        print("add to each /v1/chat/completions request:")
        print(json.dumps(settings.request_params()))
        print("Ctrl-C to stop.")
        await asyncio.Event().wait()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the engine by hand: ``python -m pipecat_fast.testing.llama_server --size bench``."""
    parser = argparse.ArgumentParser(description="Serve the generated test model with llama.cpp.")
    parser.add_argument("--size", default="bench", choices=sorted(MODEL_SPECS))
    parser.add_argument("--port", type=int, default=None, help="default: a free port")
    parser.add_argument("--threads", type=int, default=None, help="default: half the cores")
    parser.add_argument("--max-tokens", type=int, default=20, help="reply cap to print")
    parser.add_argument("--log", default=None, help="server log file (default: temporary)")
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve_forever(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
