"""Fake frame streams for the end-of-turn strategies: a scripted turn analyzer, Deepgram-shaped
results, audio that moves the strategy's clock, and the user aggregator they run in."""

from __future__ import annotations

from pipecat.audio.turn.base_turn_analyzer import BaseTurnAnalyzer, BaseTurnParams, EndOfTurnState
from pipecat.frames.frames import (
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    STTMetadataFrame,
    TranscriptionFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.metrics.metrics import TurnMetricsData
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.tests.utils import run_test
from pipecat.turns.user_start import VADUserTurnStartStrategy
from pipecat.turns.user_start.transcription_user_turn_start_strategy import (
    TranscriptionUserTurnStartStrategy,
)
from pipecat.turns.user_stop.turn_analyzer_user_turn_stop_strategy import (
    TurnAnalyzerUserTurnStopStrategy,
)
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from tests.pacing import Pacer, paced

RATE = 16000


class ScriptedAnalyzer(BaseTurnAnalyzer):
    """Says what the test tells it: ``verdicts`` are consumed one per VAD stop."""

    def __init__(self, verdicts=(True,)):
        super().__init__(sample_rate=RATE)
        self.verdicts = list(verdicts)
        self.asked = 0

    @property
    def speech_triggered(self) -> bool:
        return True

    @property
    def params(self):
        return BaseTurnParams()

    def append_audio(self, buffer, is_speech):
        return EndOfTurnState.INCOMPLETE

    async def analyze_end_of_turn(self):
        self.asked += 1
        complete = self.verdicts.pop(0) if self.verdicts else True
        state = EndOfTurnState.COMPLETE if complete else EndOfTurnState.INCOMPLETE
        return state, TurnMetricsData(
            processor="scripted", is_complete=complete, probability=0.9, e2e_processing_time_ms=1
        )

    def clear(self):
        pass


def analyzer_strategy(verdicts=(True,)):
    return TurnAnalyzerUserTurnStopStrategy(turn_analyzer=ScriptedAnalyzer(verdicts))


def dg(text, start, duration, *, is_final=True, speech_final=False, from_finalize=False):
    """A Deepgram ``Results`` message as the SDK parses it."""
    from deepgram.listen.v1.types import ListenV1Results

    return ListenV1Results.model_validate(
        {
            "type": "Results",
            "channel_index": [0, 1],
            "duration": duration,
            "start": start,
            "is_final": is_final,
            "speech_final": speech_final,
            "from_finalize": from_finalize,
            "channel": {"alternatives": [{"transcript": text, "confidence": 0.98, "words": []}]},
            "metadata": {
                "request_id": "r",
                "model_info": {"name": "m", "version": "0", "arch": "a"},
                "model_uuid": "00000000-0000-0000-0000-000000000000",
            },
        }
    )


def final(text, start=0.0, end=None, *, speech_final=True, from_finalize=False, finalized=False):
    result = (
        None
        if end is None
        else dg(text, start, end - start, speech_final=speech_final, from_finalize=from_finalize)
    )
    frame = TranscriptionFrame(text, "caller", "2026-12-01T00:00:00Z", result=result)
    frame.finalized = finalized
    return frame


def interim(text, start=0.0, end=None):
    result = None if end is None else dg(text, start, end - start, is_final=False)
    return InterimTranscriptionFrame(text, "caller", "2026-12-01T00:00:00Z", result=result)


def audio(seconds):
    """``seconds`` of caller audio in one frame (moves the strategy's audio clock)."""
    return InputAudioRawFrame(b"\x00\x00" * int(RATE * seconds), RATE, 1)


def start():
    return VADUserStartedSpeakingFrame(start_secs=0.2)


def stop(stop_secs=0.2):
    return VADUserStoppedSpeakingFrame(stop_secs=stop_secs)


def p99(seconds):
    return STTMetadataFrame(service_name="stt", ttfs_p99_latency=seconds)


class Recorder(FrameProcessor):
    def __init__(self):
        super().__init__()
        self.seen = []

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        self.seen.append(frame)
        await self.push_frame(frame, direction)

    def stops(self):
        return [f for f in self.seen if isinstance(f, UserStoppedSpeakingFrame)]


class UserSide:
    """The user aggregator with the strategy under test, and what comes out of it."""

    def __init__(self, strategy, *, transcription_starts=True, **user_params):
        self.context = LLMContext()
        start_strategies = [VADUserTurnStartStrategy()]
        if transcription_starts:
            start_strategies.append(TranscriptionUserTurnStartStrategy())
        strategies = UserTurnStrategies(start=start_strategies, stop=[strategy])
        self.pair = LLMContextAggregatorPair(
            self.context,
            user_params=LLMUserAggregatorParams(user_turn_strategies=strategies, **user_params),
        )
        self.recorder = Recorder()
        self.pacer = Pacer(self.pair.user())

    async def run(self, *items, extra=()):
        pipeline = Pipeline([self.pacer, self.pair.user(), *extra, self.recorder])
        await run_test(pipeline, frames_to_send=paced(*items))
        assert self.pacer.timed_out == []

    def user_messages(self):
        return [m["content"] for m in self.context.get_messages() if m["role"] == "user"]
