"""Drive one real Pipecat TTS service in a running pipeline and time its first audio.

``TTSHarness`` runs ``Pipeline([tts, sink])`` in a ``PipelineWorker`` and lets a test or a
measurement push sentences and interruptions the way the pipeline would, waiting on the
frames the service pushes (no sleeps)::

    async with TTSHarness(tts, sample_rate=16000) as run:
        ms = await run.speak("Hello there.")  # text handed to the TTS -> its first audio
        await run.interrupt()                 # a barge-in (InterruptionFrame)
        ms = await run.speak("Sorry, go ahead.")

``started_at`` is when the worker began running (the call was answered), and ``setup_ms``
how long the pipeline took to start (the TTS connects during setup), so a greeting's
answer-to-first-audio time is ``setup_ms`` plus the first ``speak``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pipecat.frames.frames import (
    EndFrame,
    ErrorFrame,
    Frame,
    InterruptionFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner


class _Sink(FrameProcessor):
    """Counts the TTS's audio per context and errors; wakes whoever waits for audio."""

    def __init__(self):
        super().__init__()
        self.audio_frames = 0
        self.contexts: set[str | None] = set()
        self.errors: list[str] = []
        self.audio = asyncio.Condition()

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            async with self.audio:
                self.audio_frames += 1
                self.contexts.add(frame.context_id)
                self.audio.notify_all()
        elif isinstance(frame, ErrorFrame):
            self.errors.append(frame.error)
        await self.push_frame(frame, direction)


class TTSHarness:
    """A running pipeline around one TTS service (see the module docstring).

    Args:
        tts: The Pipecat TTS service.
        sample_rate: The pipeline's ``audio_out_sample_rate``.
        start_timeout_s: How long the pipeline may take to start.
        observers: Pipecat observers for the worker (a ``TTFAObserver``, say).

    Attributes:
        started_at: ``time.monotonic()`` when the worker started running.
        setup_ms: From ``started_at`` to the pipeline started (setup, TTS connect included).
        sink: Audio-frame count and the errors seen downstream of the TTS.
    """

    def __init__(
        self,
        tts: Any,
        *,
        sample_rate: int = 16000,
        start_timeout_s: float = 15.0,
        observers: list | None = None,
    ):
        self.tts = tts
        self.observers = list(observers or [])
        self.sample_rate = sample_rate
        self.start_timeout_s = start_timeout_s
        self.sink = _Sink()
        self.started_at = 0.0
        self.setup_ms = 0.0
        self._worker: PipelineWorker | None = None
        self._running: asyncio.Task | None = None

    async def __aenter__(self) -> TTSHarness:
        self._worker = PipelineWorker(
            Pipeline([self.tts, self.sink]),
            params=PipelineParams(audio_out_sample_rate=self.sample_rate),
            enable_rtvi=False,
            observers=self.observers,
            idle_timeout_secs=None,
            cancel_on_idle_timeout=False,
        )
        started = asyncio.Event()

        @self._worker.event_handler("on_pipeline_started")
        async def _started(_worker, _frame):
            started.set()

        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(self._worker)
        self.started_at = time.monotonic()
        self._running = asyncio.create_task(runner.run())
        waiter = asyncio.create_task(started.wait())
        done, _ = await asyncio.wait(
            {waiter, self._running}, timeout=self.start_timeout_s, return_when="FIRST_COMPLETED"
        )
        if waiter not in done:
            waiter.cancel()
            await self._stop(cancel=True)
            raise RuntimeError("the TTS pipeline did not start")
        self.setup_ms = (time.monotonic() - self.started_at) * 1000.0
        return self

    async def speak(self, text: str, *, timeout_s: float = 10.0) -> float:
        """Hand ``text`` to the TTS; return the ms until its first audio frame.

        The first audio of a context (``context_id``) not seen before counts, so audio still
        arriving for an earlier sentence never passes for this one's.

        Raises:
            TimeoutError: If no audio comes within ``timeout_s``.
        """
        assert self._worker is not None
        async with self.sink.audio:
            seen = set(self.sink.contexts)
        sent = time.monotonic()
        await self._worker.queue_frame(TTSSpeakFrame(text))
        async with self.sink.audio:
            await asyncio.wait_for(
                self.sink.audio.wait_for(lambda: bool(self.sink.contexts - seen)), timeout_s
            )
        return (time.monotonic() - sent) * 1000.0

    async def interrupt(self) -> None:
        """Push a barge-in's ``InterruptionFrame`` through the pipeline."""
        assert self._worker is not None
        await self._worker.queue_frame(InterruptionFrame())

    async def _stop(self, *, cancel: bool = False) -> None:
        if self._worker is None or self._running is None:
            return
        if cancel:
            await self._worker.cancel(reason="TTSHarness")
        else:
            await self._worker.queue_frame(EndFrame())
        try:
            await asyncio.wait_for(self._running, 30)
        finally:
            self._running = None

    async def __aexit__(self, *exc: object) -> None:
        await self._stop(cancel=exc[0] is not None)
