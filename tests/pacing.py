"""Deterministic frame order for ``run_test`` without sleeps.

Pipecat processes a ``SystemFrame`` ahead of data frames still queued (its input queue is a
priority queue), so a test that sends ``[TranscriptionFrame, VADUserStoppedSpeakingFrame]``
cannot know which one the processor under test handles first, and sleeps between them only
make the wrong order unlikely. Here every frame travels wrapped in :class:`Step` (an
uninterruptible data frame, so Pipecat's queues keep the steps in order and an interruption the
pipeline raises does not drop them); :class:`Pacer` unwraps one, pushes it, and takes
the next only after the processor under test has *finished* processing it (its inline
``on_after_process_frame`` event). :class:`Until` waits for a condition (a prefill finished, a
request reached the emulator) before the next frame, with a timeout instead of a guess.

    frames = paced(stable("I would"), Until(lambda: not prefill.in_flight), stable("I would like"))
    await run_test(Pipeline([Pacer(prefill), prefill, llm]), frames_to_send=frames)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from pipecat.frames.frames import DataFrame, Frame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor


@dataclass
class Step(DataFrame):
    """One frame to deliver to the processor under test (an interruption never drops it)."""

    frame: Frame = field(default_factory=Frame)
    interruptible: bool = field(default=False, init=False)


@dataclass
class Until(DataFrame):
    """Hold the next frame until ``condition()`` is true (fails the test after ``timeout_s``)."""

    condition: Callable[[], bool] = field(default=lambda: True)
    timeout_s: float = 10.0
    what: str = ""
    interruptible: bool = field(default=False, init=False)


def paced(*items: Frame) -> list[Frame]:
    """Wrap frames in :class:`Step`; :class:`Until` markers pass as they are."""
    return [item if isinstance(item, Until) else Step(frame=item) for item in items]


class Pacer(FrameProcessor):
    """Delivers each :class:`Step`'s frame once ``target`` finished the previous one.

    Args:
        target: The processor whose processing paces the steps (the first one after the pacer,
            or any processor further down).
    """

    def __init__(self, target: FrameProcessor):
        super().__init__()
        self._pacer_target = target
        self._pacer_waiting: Frame | None = None
        self._pacer_done = asyncio.Event()
        self.timed_out: list[str] = []
        target.add_event_handler("on_after_process_frame", self._pacer_after)

    def _pacer_after(self, _processor, frame: Frame) -> None:
        if frame is self._pacer_waiting:
            self._pacer_done.set()

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Unwrap steps in order; pass everything else on."""
        await super().process_frame(frame, direction)
        if isinstance(frame, Step):
            self._pacer_waiting = frame.frame
            self._pacer_done.clear()
            await self.push_frame(frame.frame, direction)
            try:
                await asyncio.wait_for(self._pacer_done.wait(), 10.0)
            except TimeoutError:
                self.timed_out.append(f"{frame.frame} never reached {self._pacer_target}")
            self._pacer_waiting = None
        elif isinstance(frame, Until):
            loop = asyncio.get_running_loop()
            deadline = loop.time() + frame.timeout_s
            while not frame.condition():
                if loop.time() > deadline:
                    self.timed_out.append(f"condition never held: {frame.what or frame.condition}")
                    break
                await asyncio.sleep(0.002)
        else:
            await self.push_frame(frame, direction)
