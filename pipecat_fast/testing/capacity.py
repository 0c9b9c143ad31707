"""A shared engine's capacity for the OpenAI emulator: slots, a queue, prefill compute shared.

Without it the emulator answers every request as if it were the only one (a fixed
``llm_queue_ms``). With :class:`EngineCapacity` it behaves like one self-hosted engine serving
many callers with continuous batching:

- **slots**: at most ``slots`` requests run at once; the others wait, first come first served,
  and their wait is the request's *queue time*. A request whose client left while it waited is
  dropped without running (llama.cpp and vLLM drop aborted queued requests).
- **prefill compute is shared**: the uncached prompt tokens of every running request are
  computed at ``prefill_tokens_per_s`` for the engine as a whole, split evenly between the
  requests prefilling at that moment (processor sharing: continuous batching puts several
  prompts' chunks into each step, and a step's compute is what it is). Ten callers' cold
  prefills together take ten times as long as one.
- **decode is per request** at the profile's rate, unaffected by the batch (the memory-bound
  regime a GPU engine decodes in); a request holds its slot until its reply has streamed.
- **a client that leaves stops its prefill** (checked every ``GONE_POLL_S``): llama.cpp's
  server cancels a task whose connection closed, vLLM aborts the request; the slot is freed.

These are modelling choices, stated so figures can be read against them; the real engine
(:mod:`.llama_cpp_server`) is the check.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

GONE_POLL_S = 0.05
"""How often a prefilling request's connection is checked (s)."""


class ClientGone(Exception):
    """The request's client left while its prompt was being computed."""


@dataclass(frozen=True)
class EngineCapacity:
    """How much one emulated engine does at once.

    Parameters:
        slots: Requests running at once (llama.cpp ``--parallel``, vLLM ``max_num_seqs``).
        prefill_tokens_per_s: Prompt tokens the whole engine computes per second, shared
            by the requests prefilling together.

    Raises:
        ValueError: For fewer than one slot or a non-positive rate.
    """

    slots: int = 4
    prefill_tokens_per_s: float = 2000.0

    def __post_init__(self):
        if not isinstance(self.slots, int) or isinstance(self.slots, bool) or self.slots < 1:
            raise ValueError(f"EngineCapacity.slots must be an integer >= 1, got {self.slots!r}")
        if not self.prefill_tokens_per_s > 0:
            raise ValueError("EngineCapacity.prefill_tokens_per_s must be > 0")


class Slots:
    """``n`` slots, handed out first come first served."""

    def __init__(self, n: int):
        self.n = n
        self.running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot."""
        return len(self._waiters)

    async def acquire(self) -> None:
        """Wait for a slot (FIFO); a cancelled waiter leaves the line."""
        if self.running < self.n and not self._waiters:
            self.running += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            elif waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot just as it was cancelled: pass it on
            raise

    def release(self) -> None:
        """Give a slot back (to the first waiter, if any)."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.running = max(0, self.running - 1)


class SharedPrefill:
    """Prefill compute shared evenly by the requests prefilling at once (processor sharing)."""

    def __init__(self, tokens_per_s: float):
        self.tokens_per_s = tokens_per_s
        self._jobs: dict[int, list] = {}  # id -> [remaining tokens, future]
        self._arrivals: dict[int, list] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._ids = itertools.count()

    @property
    def active(self) -> int:
        """Requests prefilling now."""
        return len(self._jobs) + len(self._arrivals)

    async def compute(self, tokens: int, gone: Callable[[], bool] | None = None) -> None:
        """Return once ``tokens`` prompt tokens of this request have been computed.

        Raises:
            ClientGone: If ``gone()`` turned true first (the rest is not computed).
        """
        if tokens <= 0:
            return
        future = asyncio.get_running_loop().create_future()
        job = next(self._ids)
        self._arrivals[job] = [float(tokens), future, gone]
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        try:
            await future
        finally:
            self._jobs.pop(job, None)
            self._arrivals.pop(job, None)

    async def _run(self) -> None:
        last = time.monotonic()
        while self._jobs or self._arrivals:
            self._jobs.update(self._arrivals)
            self._arrivals.clear()
            self._wake.clear()
            if self._jobs:
                share = self.tokens_per_s / len(self._jobs)
                nearest = min(job[0] for job in self._jobs.values()) / share
                if any(job[2] is not None for job in self._jobs.values()):
                    nearest = min(nearest, GONE_POLL_S)
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout=max(nearest, 0.0))
                except TimeoutError:
                    pass
                now = time.monotonic()
                done = (now - last) * share
                last = now
                for job_id, job in list(self._jobs.items()):
                    job[0] -= done
                    if job[0] <= 1e-6:
                        del self._jobs[job_id]
                        if not job[1].done():
                            job[1].set_result(None)
                    elif job[2] is not None and job[2]():
                        del self._jobs[job_id]
                        if not job[1].done():
                            job[1].set_exception(ClientGone())
            else:
                last = time.monotonic()
