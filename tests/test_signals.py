"""SIGTERM ends an async command like Ctrl-C does: its cleanup runs, then Terminated."""

import asyncio
import os
import signal
import subprocess
import sys

import pytest

from pipecat_fast._signals import Terminated, run


def test_sigterm_cancels_the_command_runs_its_cleanup_and_raises_terminated():
    cleaned = []

    async def command():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(30)  # cancelled by the SIGTERM, not reached to its end
            return "finished"
        finally:
            cleaned.append("servers closed")

    with pytest.raises(Terminated):
        run(command())
    assert cleaned == ["servers closed"]
    # The handler is gone with the loop: the default is back for whoever comes next.
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_a_command_that_is_not_stopped_returns_its_value():
    async def command():
        return 7

    assert run(command()) == 7


def test_the_cli_module_runs_as_a_script():
    out = subprocess.run(
        [sys.executable, "-m", "pipecat_fast.cli", "lint", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and "usage: pipecat-fast lint" in out.stdout
