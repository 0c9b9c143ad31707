"""The provider emulators in a child process, controlled from the bench."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
from loguru import logger

from pipecat_fast.bench.pipeline import BenchCall
from pipecat_fast.testing.serve import script_to_json


class EmulatorProcess:
    """Starts ``python -m pipecat_fast.testing.serve`` for a set of calls.

    Args:
        profile: Latency profile name.
        calls: Calls whose STT scripts and replies the emulators serve.
        start_timeout_s: How long to wait for the child to report its URLs (s).
        llm_capacity: The LLM emulator as one shared engine (``EngineCapacity``), or None.

    Raises:
        RuntimeError: On entry, if the child does not start (the message has its stderr).
    """

    def __init__(
        self,
        profile: str,
        calls: list[BenchCall],
        *,
        start_timeout_s: float = 30.0,
        llm_capacity=None,
    ):
        self.profile = profile
        self.llm_capacity = llm_capacity
        self.calls = calls
        self.start_timeout_s = start_timeout_s
        self.urls: dict[str, str] = {}
        self._proc: asyncio.subprocess.Process | None = None
        self._script = Path(tempfile.mkstemp(prefix="pipecat-fast-emulators-", suffix=".json")[1])

    async def __aenter__(self) -> EmulatorProcess:
        material = script_to_json(
            {c.id: c.stt_script for c in self.calls},
            [pair for c in self.calls for pair in c.replies],
        )
        self._script.write_text(json.dumps(material, ensure_ascii=False), "utf-8")
        capacity = []
        if self.llm_capacity is not None:
            capacity = [
                "--llm-slots",
                str(self.llm_capacity.slots),
                "--llm-prefill-tokens-per-s",
                str(self.llm_capacity.prefill_tokens_per_s),
            ]
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "pipecat_fast.testing.serve",
            "--profile",
            self.profile,
            "--script",
            str(self._script),
            *capacity,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            line = await asyncio.wait_for(self._proc.stdout.readline(), self.start_timeout_s)
            self.urls = json.loads(line)
        except (TimeoutError, ValueError) as e:
            err = b""
            if self._proc.returncode is None:
                self._proc.kill()
            err = await self._proc.stderr.read()
            self._script.unlink(missing_ok=True)
            raise RuntimeError(
                f"emulators did not start ({e!r}): {err.decode(errors='replace')[-2000:]}"
            ) from e
        # Drain the child's log so its pipe never fills up.
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
                logger.warning("emulator process did not exit on stdin close; killing it")
                self._proc.kill()
                await self._proc.wait()
        self._drain.cancel()
        self._script.unlink(missing_ok=True)

    async def _llm(self, method: str, path: str) -> Any:
        url = self.urls["llm_base_url"].removesuffix("/v1") + path
        async with aiohttp.ClientSession() as http:
            async with http.request(method, url) as response:
                response.raise_for_status()
                return await response.json()

    async def reset_llm(self) -> None:
        """Clear the LLM emulator's prefix cache and request records."""
        await self._llm("POST", "/_emulator/reset")

    async def llm_requests(self) -> list[dict[str, Any]]:
        """Accounting of every LLM request since the last reset."""
        return (await self._llm("GET", "/_emulator/stats"))["requests"]
