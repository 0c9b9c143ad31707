"""Many short sessions in one process: real Pipecat pipelines with the levers, no audio.

A session is the voice agent's pipeline from the user aggregator on — ``TwoUpdateStabilizer``,
Pipecat's user aggregator (draft-and-hold around a speech-timeout stop strategy), the
speculative prefill, ``OpenAILLMService``, the sentence aggregator, ``CartesiaTTSService`` over
its WebSocket, the assistant aggregator — plus a session warmup, the TTFA meter and the shared
engine-load probe. Instead of caller audio, VAD and STT, :class:`ScriptedCaller` plays each turn
as the frames those would produce (VAD start, growing interims, the final, VAD stop), each one
once the user aggregator has finished the previous one (Pipecat's own ``on_after_process_frame``
event, no sleeps), and starts the next turn when the reply's audio has been generated. The
providers are the loopback emulators with zero latency, so a two-turn call takes milliseconds
of provider time and the test measures what the process keeps, not what the network costs.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass, field

from openai import AsyncOpenAI, DefaultAsyncHttpxClient
from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    Frame,
    InterimTranscriptionFrame,
    StartFrame,
    TranscriptionFrame,
    TTSStoppedFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.cartesia.tts import CartesiaTTSService
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.turns.user_start import VADUserTurnStartStrategy
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from pipecat.workers.runner import WorkerRunner

from pipecat_fast.aggregator import make_text_processor
from pipecat_fast.load import EngineLoad, YieldConfig
from pipecat_fast.prefill import DraftAndHoldUserTurnStopStrategy, SpeculativePrefill
from pipecat_fast.stabilizer import TwoUpdateStabilizer
from pipecat_fast.ttfa import TTFAObserver
from pipecat_fast.warmup import PrewarmPolicy, SessionWarmup

USER = "caller"
# One TLS trust store for every session's OpenAI client: Pipecat's own client loads certifi's
# bundle per service (~15-60 ms of CPU each, 200 times), for a plain-HTTP loopback engine.
_TLS = ssl.create_default_context()


class LoopbackOpenAILLMService(OpenAILLMService):
    """``OpenAILLMService`` whose client shares one TLS context (nothing else differs)."""

    def create_client(self, api_key=None, base_url=None, **kwargs):
        return AsyncOpenAI(
            api_key=api_key, base_url=base_url, http_client=DefaultAsyncHttpxClient(verify=_TLS)
        )


STOP_SECS = 0.2


@dataclass
class Turn:
    """One scripted caller turn: the interims as they grow, then the final."""

    final: str

    def interims(self) -> list[str]:
        words = self.final.rstrip(".?!").split()
        return [" ".join(words[: i + 1]) for i in range(len(words))]


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


class ScriptedCaller(FrameProcessor):
    """Plays the caller's turns as frames once ``go`` is set; see the module docstring.

    Args:
        turns: The turns to play.
        target: The user aggregator (each frame is sent once it has processed the last one).
        go: Set it to let the caller start talking.
        abandon: Play only the first turn's first interims, then set :attr:`abandoned`
            (the test ends the session there, a prefill still in flight).
    """

    def __init__(self, turns, target, go: asyncio.Event, *, abandon: bool = False):
        super().__init__()
        self._sc_turns = list(turns)
        self._sc_go = go
        self._sc_abandon = abandon
        self._sc_task: asyncio.Task | None = None
        self._sc_waiting: Frame | None = None
        self._sc_done = asyncio.Event()
        self.reply = asyncio.Event()
        self.started = asyncio.Event()
        self.finished = asyncio.Event()
        self.abandoned = asyncio.Event()
        self.answered = 0
        self.timed_out: list[str] = []
        target.add_event_handler("on_after_process_frame", self._sc_after)

    def _sc_after(self, _processor, frame: Frame) -> None:
        if frame is self._sc_waiting:
            self._sc_done.set()

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if isinstance(frame, StartFrame):
            self.started.set()
            self._sc_task = self.create_task(self._sc_play(), "scripted-caller")
        elif isinstance(frame, (EndFrame, CancelFrame)):
            await self._sc_stop()

    async def cleanup(self):
        await super().cleanup()
        await self._sc_stop()

    async def _sc_stop(self) -> None:
        task, self._sc_task = self._sc_task, None
        if task is not None and not task.done():
            await self.cancel_task(task)

    async def _sc_send(self, frame: Frame) -> None:
        self._sc_waiting = frame
        self._sc_done.clear()
        await self.push_frame(frame)
        try:
            await asyncio.wait_for(self._sc_done.wait(), 10.0)
        except TimeoutError:
            self.timed_out.append(f"{frame} never reached the user aggregator")
        self._sc_waiting = None

    async def _sc_play(self) -> None:
        await self._sc_go.wait()
        for turn in self._sc_turns:
            self.reply.clear()
            await self._sc_send(VADUserStartedSpeakingFrame(start_secs=0.2))
            interims = turn.interims()
            for text in interims[:3] if self._sc_abandon else interims:
                await self._sc_send(InterimTranscriptionFrame(text, USER, _stamp()))
            if self._sc_abandon:
                self.abandoned.set()
                return
            await self._sc_send(TranscriptionFrame(turn.final, USER, _stamp(), finalized=True))
            await self._sc_send(VADUserStoppedSpeakingFrame(stop_secs=STOP_SECS))
            try:
                await asyncio.wait_for(self.reply.wait(), 10.0)
                self.answered += 1
            except TimeoutError:
                self.timed_out.append(f"no reply to {turn.final!r}")
        self.finished.set()


class ReplySink(FrameProcessor):
    """Last processor: tells the caller when a reply's audio has been generated."""

    def __init__(self, caller: ScriptedCaller):
        super().__init__()
        self._rs_caller = caller

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSStoppedFrame):
            self._rs_caller.reply.set()
        await self.push_frame(frame, direction)


@dataclass
class Session:
    """One caller's session: its pipeline, worker and levers."""

    worker: PipelineWorker
    caller: ScriptedCaller
    prefill: SpeculativePrefill
    draft: DraftAndHoldUserTurnStopStrategy
    warmup: SessionWarmup
    ttfa: TTFAObserver
    runner: WorkerRunner = field(default_factory=lambda: WorkerRunner(handle_sigint=False))
    task: asyncio.Task | None = None


def build_session(
    *,
    llm_url: str,
    tts_url: str,
    system_prompt: str,
    turns: list[Turn],
    go: asyncio.Event,
    load: EngineLoad,
    yield_config: YieldConfig | None = None,
    abandon: bool = False,
) -> Session:
    """A session's pipeline with every lever on (not started)."""
    llm = LoopbackOpenAILLMService(
        api_key="emulator-key",
        base_url=llm_url,
        settings=OpenAILLMService.Settings(
            model="gpt-4.1-mini", system_instruction=system_prompt, max_tokens=16
        ),
    )
    context = LLMContext()
    draft = DraftAndHoldUserTurnStopStrategy(
        SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.01),
        load=load,
        yield_config=yield_config,
    )
    pair = LLMContextAggregatorPair(
        context,
        user_params=LLMUserAggregatorParams(
            user_turn_strategies=UserTurnStrategies(
                start=[VADUserTurnStartStrategy()], stop=[draft]
            ),
        ),
    )
    user = pair.user()
    caller = ScriptedCaller(turns, user, go, abandon=abandon)
    prefill = SpeculativePrefill(llm, context=context, load=load, yield_config=yield_config)
    tts = CartesiaTTSService(
        api_key="emulator-key",
        url=tts_url,
        settings=CartesiaTTSService.Settings(voice="emulated-voice"),
    )
    pipeline = Pipeline(
        [
            caller,
            TwoUpdateStabilizer(),
            user,
            prefill,
            llm,
            make_text_processor(),
            tts,
            ReplySink(caller),
            pair.assistant(),
        ]
    )
    ttfa = TTFAObserver()
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(enable_metrics=True, enable_usage_metrics=True),
        observers=[ttfa],
        enable_rtvi=False,
        idle_timeout_secs=None,
    )
    warmup = SessionWarmup(llm, context, policy=PrewarmPolicy(), requests=1, max_tokens=1)
    return Session(worker, caller, prefill, draft, warmup, ttfa)


async def start(session: Session) -> None:
    """Warm up (in the background) and start the pipeline."""
    session.warmup.start()
    await session.runner.add_workers(session.worker)
    session.task = asyncio.create_task(session.runner.run())


async def end(session: Session, *, cancel: bool = False) -> None:
    """End the call (``cancel``: hang up at once) and wait for the pipeline to finish."""
    if cancel:
        await session.worker.cancel(reason="caller hung up")
    else:
        await session.worker.queue_frame(EndFrame())
    assert session.task is not None
    await asyncio.wait_for(session.task, 20.0)
    await session.warmup.cancel()
    session.ttfa.close()
