"""TTFAObserver on fake frame streams: known frame timings give known TTFA and stage marks."""

import pytest
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    InterimTranscriptionFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    MetricsFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.metrics.metrics import LLMTokenUsage, LLMUsageMetricsData
from pipecat.observers.base_observer import FramePushed
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.services.tts_service import TTSService
from pipecat.tests.utils import SleepFrame, run_test

from pipecat_fast.ttfa import STAGE_NAMES, TTFAObserver


class FakeLLM(LLMService):
    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame):
            await self.push_frame(LLMFullResponseStartFrame())
            await self.push_frame(LLMTextFrame("Sure, nine works. "))
            await self.push_frame(LLMTextFrame("See you then."))
            await self.push_frame(LLMFullResponseEndFrame())
        else:
            await self.push_frame(frame, direction)


class FakeTTS(TTSService):
    def __init__(self, **kwargs):
        super().__init__(sample_rate=16000, **kwargs)

    async def run_tts(self, text, context_id):
        yield TTSAudioRawFrame(b"\x00\x01" * 320, 16000, 1, context_id=context_id)


class Other(FrameProcessor):
    pass


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


LLM, TTS, SRC = FakeLLM(), FakeTTS(), Other()


async def push(observer, clock, at, frame, source=SRC, destination=SRC, first_push=True):
    clock.now = at
    await observer.on_push_frame(
        FramePushed(
            source=source,
            destination=destination,
            frame=frame,
            direction=FrameDirection.DOWNSTREAM,
            timestamp=0,
            first_push=first_push,
        )
    )


def usage(prompt, cached):
    return MetricsFrame(
        data=[
            LLMUsageMetricsData(
                processor="llm",
                value=LLMTokenUsage(
                    prompt_tokens=prompt,
                    completion_tokens=20,
                    total_tokens=prompt + 20,
                    cache_read_input_tokens=cached,
                ),
            )
        ]
    )


async def one_turn(obs, clock, base=10.0):
    await push(obs, clock, base + 0.0, VADUserStoppedSpeakingFrame(stop_secs=0.2, timestamp=base))
    await push(obs, clock, base + 0.05, TranscriptionFrame("nine please", "u", "t"))
    await push(obs, clock, base + 0.10, UserStoppedSpeakingFrame())
    await push(obs, clock, base + 0.12, LLMContextFrame(LLMContext()), destination=LLM)
    await push(obs, clock, base + 0.40, LLMTextFrame("Sure"), source=LLM)
    await push(obs, clock, base + 0.45, TTSStartedFrame(), source=TTS)
    await push(obs, clock, base + 0.50, TTSAudioRawFrame(b"\0\0", 16000, 1), source=TTS)
    await push(obs, clock, base + 0.52, BotStartedSpeakingFrame())


async def test_known_timings_give_known_ttfa_and_blocking_stages():
    clock = Clock()
    obs = TTFAObserver(time_source=clock)
    await one_turn(obs, clock)
    await push(obs, clock, 11.0, usage(3100, 2944))
    [turn] = obs.turns
    assert turn.ttfa_ms == pytest.approx(720)
    stages = turn.stages_ms()
    assert list(stages) == list(STAGE_NAMES)
    expected = [200, 50, 50, 20, 280, 50, 50, 20]
    assert [v for v in stages.values()] == pytest.approx(expected)
    assert (turn.prompt_tokens, turn.cached_tokens) == (3100, 2944)
    assert obs.summary()["ttfa_p50_ms"] == pytest.approx(720)


async def test_second_turn_gets_its_own_index_and_usage():
    clock = Clock()
    obs = TTFAObserver(time_source=clock)
    await one_turn(obs, clock, base=10.0)
    await push(obs, clock, 11.0, usage(3100, 0))
    await push(obs, clock, 15.0, VADUserStartedSpeakingFrame())
    await one_turn(obs, clock, base=20.0)
    await push(obs, clock, 21.0, usage(3180, 3072))
    assert [t.turn for t in obs.turns] == [0, 1]
    assert [t.cached_tokens for t in obs.turns] == [0, 3072]


async def test_leftover_tts_audio_from_the_previous_reply_does_not_mark_the_turn():
    clock = Clock()
    obs = TTFAObserver(time_source=clock)
    await push(obs, clock, 10.0, VADUserStoppedSpeakingFrame(stop_secs=0.2, timestamp=10.0))
    await push(obs, clock, 10.01, TTSAudioRawFrame(b"\0\0", 16000, 1), source=TTS)
    await push(obs, clock, 10.02, BotStartedSpeakingFrame())
    assert obs.turns == []
    await push(obs, clock, 10.1, UserStoppedSpeakingFrame())
    await push(obs, clock, 10.2, LLMContextFrame(LLMContext()), destination=LLM)
    await push(obs, clock, 10.5, TTSAudioRawFrame(b"\0\0", 16000, 1), source=TTS)
    await push(obs, clock, 10.6, BotStartedSpeakingFrame())
    [turn] = obs.turns
    assert turn.marks_ms()["tts_first_byte"] == pytest.approx(700)


async def test_discarded_speculative_request_is_replaced_by_the_real_one():
    clock = Clock()
    obs = TTFAObserver(time_source=clock)
    await push(obs, clock, 10.0, VADUserStoppedSpeakingFrame(stop_secs=0.2, timestamp=10.0))
    await push(obs, clock, 10.02, LLMContextFrame(LLMContext(), speculation=True), destination=LLM)
    await push(obs, clock, 10.05, usage(3000, 0))  # the discarded draft's usage
    await push(obs, clock, 10.10, UserStoppedSpeakingFrame())
    await push(obs, clock, 10.11, LLMContextFrame(LLMContext()), destination=LLM)
    await push(obs, clock, 10.30, LLMTextFrame("Hi"), source=LLM)
    await push(obs, clock, 10.40, BotStartedSpeakingFrame())
    await push(obs, clock, 10.90, usage(3010, 2990))
    [turn] = obs.turns
    assert turn.marks_ms()["llm_request"] == pytest.approx(310)
    assert (turn.prompt_tokens, turn.cached_tokens) == (3010, 2990)


async def test_reused_draft_sent_before_confirmation_costs_no_dispatch_time():
    clock = Clock()
    obs = TTFAObserver(time_source=clock)
    await push(obs, clock, 10.0, VADUserStoppedSpeakingFrame(stop_secs=0.2, timestamp=10.0))
    await push(obs, clock, 10.02, LLMContextFrame(LLMContext(), speculation=True), destination=LLM)
    await push(obs, clock, 10.10, UserStoppedSpeakingFrame())
    await push(obs, clock, 10.101, LLMTextFrame("Hi"), source=LLM)  # released by the gate
    await push(obs, clock, 10.30, BotStartedSpeakingFrame())
    stages = obs.turns[0].stages_ms()
    assert stages["llm_dispatch"] == 0.0
    assert stages["llm_ttft"] == pytest.approx(1, abs=1e-6)


async def test_caller_resuming_after_a_pause_is_not_a_turn_and_silence_is_unanswered():
    clock = Clock()
    obs = TTFAObserver(time_source=clock)
    # A pause the turn detector did not confirm: the caller goes on speaking.
    await push(obs, clock, 10.0, VADUserStoppedSpeakingFrame(stop_secs=0.2, timestamp=10.0))
    await push(obs, clock, 10.5, VADUserStartedSpeakingFrame())
    # A confirmed turn that never got audio before the caller spoke again.
    await push(obs, clock, 12.0, VADUserStoppedSpeakingFrame(stop_secs=0.2, timestamp=12.0))
    await push(obs, clock, 12.1, UserStoppedSpeakingFrame())
    await push(obs, clock, 14.0, VADUserStartedSpeakingFrame())
    await one_turn(obs, clock, base=20.0)
    assert len(obs.unanswered) == 1
    assert [t.turn for t in obs.turns] == [1]
    assert obs.summary()["n_unanswered"] == 1


async def test_interim_transcripts_and_non_first_pushes_do_not_mark():
    clock = Clock()
    obs = TTFAObserver(time_source=clock)
    await push(obs, clock, 10.0, VADUserStoppedSpeakingFrame(stop_secs=0.2, timestamp=10.0))
    await push(obs, clock, 10.01, InterimTranscriptionFrame("nine", "u", "t"))
    await push(obs, clock, 10.03, TranscriptionFrame("nine", "u", "t"), first_push=False)
    await push(obs, clock, 10.1, UserStoppedSpeakingFrame())
    await push(obs, clock, 10.2, LLMContextFrame(LLMContext()), destination=LLM)
    await push(obs, clock, 10.4, BotStartedSpeakingFrame())
    assert "final_transcript" not in obs.turns[0].marks


async def test_on_turn_measured_event_and_annotate():
    clock = Clock()
    obs = TTFAObserver(time_source=clock)
    seen = []

    @obs.event_handler("on_turn_measured")
    async def _seen(observer, record):
        seen.append(record.turn)

    await push(obs, clock, 10.0, VADUserStoppedSpeakingFrame(stop_secs=0.2, timestamp=10.0))
    obs.annotate(speculation="reused", prefill_requests=3)
    await push(obs, clock, 10.1, UserStoppedSpeakingFrame())
    await push(obs, clock, 10.2, LLMContextFrame(LLMContext()), destination=LLM)
    await push(obs, clock, 10.4, BotStartedSpeakingFrame())
    await obs.cleanup()
    assert seen == [0]
    assert obs.turns[0].to_dict()["prefill_requests"] == 3


async def test_in_a_real_pipeline_with_pipecat_llm_and_tts_services():
    """Wiring check through Pipecat's real TTSService machinery (sentence aggregation, contexts)."""
    obs = TTFAObserver()
    frames = [
        VADUserStoppedSpeakingFrame(stop_secs=0.2),
        TranscriptionFrame("nine please", "u", "t"),
        UserStoppedSpeakingFrame(),
        LLMContextFrame(LLMContext()),
        SleepFrame(0.3),
        BotStartedSpeakingFrame(),
    ]
    await run_test(
        Pipeline([FakeLLM(), FakeTTS()]),
        frames_to_send=frames,
        observers=[obs],
        pipeline_params=PipelineParams(),
    )
    [turn] = obs.turns
    marks = turn.marks_ms()
    assert list(marks) == [
        "vad_stopped",
        "final_transcript",
        "turn_confirmed",
        "llm_request",
        "llm_first_token",
        "tts_text",
        "tts_first_byte",
        "first_audio_out",
    ]
    assert list(marks.values()) == sorted(marks.values())
    assert sum(turn.stages_ms().values()) == pytest.approx(turn.ttfa_ms)


async def test_final_transcript_inside_the_vad_window_is_marked_and_costs_nothing():
    clock = Clock()
    obs = TTFAObserver(time_source=clock)
    # STT finalizes 120 ms after end of speech; VAD reports the stop 200 ms after it.
    await push(obs, clock, 9.92, TranscriptionFrame("nine please", "u", "t"))
    await push(obs, clock, 10.0, VADUserStoppedSpeakingFrame(stop_secs=0.2, timestamp=10.0))
    await push(obs, clock, 10.1, UserStoppedSpeakingFrame())
    await push(obs, clock, 10.2, LLMContextFrame(LLMContext()), destination=LLM)
    await push(obs, clock, 10.5, BotStartedSpeakingFrame())
    [turn] = obs.turns
    assert turn.marks_ms()["final_transcript"] == pytest.approx(120)
    assert turn.stages_ms()["stt_final"] == 0.0
