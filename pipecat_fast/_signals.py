"""Ending a command on SIGTERM the way Ctrl-C ends it: an orderly unwind, then one line.

Python's default SIGTERM ends the process at once — no ``finally``, no ``async with`` exit, no
``atexit`` — so a bench stopped that way would leave its engine and emulator processes running.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Terminated(KeyboardInterrupt):
    """The command was stopped by SIGTERM (after its cleanup ran)."""


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, with SIGTERM cancelling ``coro``'s task.

    The cancellation unwinds the command like Ctrl-C inside ``asyncio.run`` does (its ``async
    with`` blocks close their servers in order), then :class:`Terminated` is raised.
    """
    terminated = False

    async def main() -> T:
        nonlocal terminated
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()

        def on_sigterm() -> None:
            nonlocal terminated
            terminated = True
            task.cancel()

        installed = False
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGTERM, on_sigterm)  # main thread, Unix only
            installed = True
        try:
            return await coro
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGTERM)

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        if terminated:
            raise Terminated from None
        raise
