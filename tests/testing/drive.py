"""Drive one processor with frames, waiting on conditions instead of fixed sleeps.

Pipecat's ``run_test`` waits with ``SleepFrame``: a fixed time for a network answer, which a
loaded machine can outlast. Here a step may be an :class:`Until`: the next frame is queued only
once its condition holds (checked as frames arrive and every few ms, up to a generous bound), so
a test waits as long as the answer takes and no longer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pipecat.frames.frames import EndFrame, Frame, StartFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import SleepFrame
from pipecat.workers.runner import WorkerRunner


@dataclass
class Until:
    """Hold the next step until ``check(down)`` is true (``down``: frames received so far).

    Raises ``TimeoutError`` naming ``what`` after ``timeout_s``.
    """

    check: Callable[[list[Frame]], bool]
    what: str
    timeout_s: float = 20.0


class _Collect(FrameProcessor):
    def __init__(self, down: list[Frame], changed: asyncio.Event):
        super().__init__()
        self.pf_down = down
        self.pf_changed = changed

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if direction == FrameDirection.DOWNSTREAM and not isinstance(frame, StartFrame | EndFrame):
            self.pf_down.append(frame)
            self.pf_changed.set()
        await self.push_frame(frame, direction)


async def drive(processor: FrameProcessor, steps: Sequence[Frame | Until]) -> list[Frame]:
    """Run ``processor`` in a pipeline, queue ``steps`` in order, end it; the frames out of it."""
    down: list[Frame] = []
    changed = asyncio.Event()
    worker = PipelineWorker(
        Pipeline([processor, _Collect(down, changed)]), cancel_on_idle_timeout=False
    )
    started = asyncio.Event()

    @worker.event_handler("on_pipeline_started")
    async def _started(worker, frame):
        started.set()

    async def wait(until: Until) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + until.timeout_s
        while not until.check(down):
            left = deadline - loop.time()
            if left <= 0:
                raise TimeoutError(f"waited {until.timeout_s} s for {until.what}")
            changed.clear()
            try:  # a new frame, or a few ms for conditions on state outside the pipeline
                await asyncio.wait_for(changed.wait(), min(left, 0.02))
            except TimeoutError:
                pass

    async def push() -> None:
        try:
            await asyncio.wait_for(started.wait(), 10.0)
            for step in steps:
                if isinstance(step, Until):
                    await wait(step)
                elif isinstance(step, SleepFrame):  # only to wait for something that must not come
                    await asyncio.sleep(step.sleep)
                else:
                    await worker.queue_frame(step)
        finally:
            await worker.queue_frame(EndFrame())

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await asyncio.gather(runner.run(), push())
    return down
