"""A pipeline around the barge-in processors: frames in, the assistant context out.

``GatedOutput`` is a real ``BaseOutputTransport`` that writes audio instantly until a set
amount has been written, then holds the next chunk in ``write_audio_frame`` (the caller
starts talking over it): the test then sends the interruption, and the gate opens once the
assistant aggregator has handled it. Everything is ordered by Pipecat's own queues and
events; nothing waits on a timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipecat.frames.frames import (
    EndFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    OutputAudioRawFrame,
    StartFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import TransportParams
from pipecat.workers.runner import WorkerRunner

from pipecat_fast.bargein import BargeInTruncator
from pipecat_fast.testing.synth import plan_speech

RATE = 16_000
FRAME_S = 0.02


class GatedOutput(BaseOutputTransport):
    """Writes audio at once until ``stop_after_s`` are written, then holds the next chunk."""

    def __init__(self, stop_after_s: float | None = None):
        super().__init__(TransportParams(audio_out_enabled=True, audio_out_sample_rate=RATE))
        self.stop_after_s = stop_after_s
        self.written_s = 0.0
        self.reached = asyncio.Event()
        self.gate = asyncio.Event()

    async def start(self, frame: StartFrame):
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        duration = len(frame.audio) / 2 / frame.sample_rate
        if self.stop_after_s is not None and self.written_s + duration > self.stop_after_s + 1e-6:
            self.reached.set()
            await self.gate.wait()
        self.written_s += duration
        return True


def audio_frames(seconds: float, context_id: str | None = None) -> list[TTSAudioRawFrame]:
    """Silence-free stand-in audio of ``seconds``, in 20 ms frames."""
    n = round(seconds / FRAME_S)
    samples = int(RATE * FRAME_S)
    pcm = b"\x01\x00" * samples
    return [TTSAudioRawFrame(pcm, RATE, 1, context_id=context_id) for _ in range(n)]


def speech_seconds(text: str) -> float:
    """How long the emulated TTS takes to say ``text`` (s), rounded to whole 20 ms frames."""
    return round(plan_speech(text)[1] / FRAME_S) * FRAME_S


def word_end(text: str, index: int) -> float:
    """Where word ``index`` of ``text`` ends in the emulated TTS's audio (s)."""
    return plan_speech(text)[0][index].end_s


def ws_reply(sentences: Sequence[str], context_id: str = "ctx-1") -> list[Frame]:
    """What a WebSocket TTS without word timestamps pushes for a reply: text ahead, audio after."""
    frames: list[Frame] = [LLMFullResponseStartFrame(), TTSStartedFrame(context_id=context_id)]
    for s in sentences:
        text = TTSTextFrame(s, text_type="sentence", context_id=context_id)
        frames.append(text)
    for s in sentences:
        frames += audio_frames(speech_seconds(s), context_id)
    frames += [TTSStoppedFrame(context_id=context_id), LLMFullResponseEndFrame()]
    return frames


@dataclass
class Outcome:
    """What the assistant context ended up with."""

    context: LLMContext
    truncator: BargeInTruncator
    transport: GatedOutput
    turn_messages: list = field(default_factory=list)

    @property
    def assistant_texts(self) -> list[str]:
        return [
            m["content"]
            for m in self.context.get_messages()
            if isinstance(m, dict) and m.get("role") == "assistant" and m.get("content")
        ]


async def run_reply(
    frames: Sequence[Frame],
    *,
    stop_after_s: float | None,
    truncator: BargeInTruncator | None = None,
    head: Sequence[FrameProcessor] = (),
    after_interruption: Sequence[Frame] = (),
    resumes: bool = True,
    context: LLMContext | None = None,
    timeout_s: float = 10.0,
) -> Outcome:
    """Push ``frames`` through [head..., before, transport, after, aggregator].

    With ``stop_after_s``, the caller barges in once that much audio is written; without,
    the reply plays to the end. ``after_interruption`` frames follow the interruption (a
    reply that resumes; ``resumes=False`` when they end no assistant turn). With
    ``stop_after_s=None`` and no frames, the interruption comes at once.
    """
    truncator = truncator or BargeInTruncator(playout_delay_s=0.0)
    context = context or LLMContext()
    pair = LLMContextAggregatorPair(context)
    transport = GatedOutput(stop_after_s)
    outcome = Outcome(context, truncator, transport)
    stopped = asyncio.Event()

    @pair.assistant().event_handler("on_assistant_turn_stopped")
    async def _on_stopped(_aggregator, message):
        outcome.turn_messages.append(message)
        stopped.set()

    pipeline = Pipeline(
        [*head, truncator.before_output(), transport, truncator.after_output(), pair.assistant()]
    )
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(audio_out_sample_rate=RATE),
        enable_rtvi=False,
        idle_timeout_secs=None,
    )
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    running = asyncio.create_task(runner.run())
    try:
        await worker.queue_frames(list(frames))
        if not frames:
            await worker.queue_frames([InterruptionFrame(), *after_interruption])
        elif stop_after_s is not None:
            await asyncio.wait_for(transport.reached.wait(), timeout_s)
            await worker.queue_frame(InterruptionFrame())
            await asyncio.wait_for(stopped.wait(), timeout_s)
            transport.gate.set()
            if after_interruption:
                stopped.clear()
                await worker.queue_frames(list(after_interruption))
                if resumes:
                    await asyncio.wait_for(stopped.wait(), timeout_s)
        else:
            await asyncio.wait_for(stopped.wait(), timeout_s)
        await worker.queue_frame(EndFrame())
        await asyncio.wait_for(running, timeout_s)
    finally:
        transport.gate.set()
        if not running.done():
            await worker.cancel()
            await asyncio.wait_for(running, timeout_s)
    return outcome
