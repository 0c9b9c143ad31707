"""TTFAObserver on fake frame streams: known frame timings give known TTFA and stage marks."""

import asyncio

import pytest
from loguru import logger
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    EndFrame,
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
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.services.tts_service import TTSService
from pipecat.tests.utils import run_test
from pipecat.workers.runner import WorkerRunner

from pipecat_fast.frames import TTFAAnnotationFrame
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


LLM, TTS, SRC = FakeLLM(), FakeTTS(), Other()


def ms(value):
    """A time in ms, to the microsecond: records hold epoch seconds (doubles resolve ~0.2 µs)."""
    return pytest.approx(value, abs=1e-3)


async def push(observer, at, frame, source=SRC, destination=SRC, first_push=True, up=False):
    """Observe ``frame`` as pushed at ``at`` seconds on the pipeline clock."""
    await observer.on_push_frame(
        FramePushed(
            source=source,
            destination=destination,
            frame=frame,
            direction=FrameDirection.UPSTREAM if up else FrameDirection.DOWNSTREAM,
            timestamp=round(at * 1e9),
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


async def one_turn(obs, base=10.0):
    await push(obs, base + 0.0, VADUserStoppedSpeakingFrame(stop_secs=0.2))
    await push(obs, base + 0.05, TranscriptionFrame("nine please", "u", "t"))
    await push(obs, base + 0.10, UserStoppedSpeakingFrame())
    await push(obs, base + 0.12, LLMContextFrame(LLMContext()), destination=LLM)
    await push(obs, base + 0.40, LLMTextFrame("Sure"), source=LLM)
    await push(obs, base + 0.45, TTSStartedFrame(), source=TTS)
    await push(obs, base + 0.50, TTSAudioRawFrame(b"\0\0", 16000, 1), source=TTS)
    await push(obs, base + 0.52, BotStartedSpeakingFrame())


async def test_known_timings_give_known_ttfa_and_blocking_stages():
    obs = TTFAObserver()
    await one_turn(obs)
    await push(obs, 11.0, usage(3100, 2944))
    [turn] = obs.turns
    assert turn.ttfa_ms == ms(720)
    stages = turn.stages_ms()
    assert list(stages) == list(STAGE_NAMES)
    expected = [200, 50, 50, 20, 280, 50, 50, 20]
    assert [v for v in stages.values()] == ms(expected)
    assert (turn.prompt_tokens, turn.cached_tokens) == (3100, 2944)
    assert obs.summary()["ttfa_p50_ms"] == ms(720)


async def test_second_turn_gets_its_own_index_and_usage():
    obs = TTFAObserver()
    await one_turn(obs, base=10.0)
    await push(obs, 11.0, usage(3100, 0))
    await push(obs, 15.0, VADUserStartedSpeakingFrame())
    await one_turn(obs, base=20.0)
    await push(obs, 21.0, usage(3180, 3072))
    assert [t.turn for t in obs.turns] == [0, 1]
    assert [t.cached_tokens for t in obs.turns] == [0, 3072]


async def test_leftover_tts_audio_from_the_previous_reply_does_not_mark_the_turn():
    obs = TTFAObserver()
    await push(obs, 10.0, VADUserStoppedSpeakingFrame(stop_secs=0.2))
    await push(obs, 10.01, TTSAudioRawFrame(b"\0\0", 16000, 1), source=TTS)
    await push(obs, 10.02, BotStartedSpeakingFrame())
    assert obs.turns == []
    await push(obs, 10.1, UserStoppedSpeakingFrame())
    await push(obs, 10.2, LLMContextFrame(LLMContext()), destination=LLM)
    await push(obs, 10.5, TTSAudioRawFrame(b"\0\0", 16000, 1), source=TTS)
    await push(obs, 10.6, BotStartedSpeakingFrame())
    [turn] = obs.turns
    assert turn.marks_ms()["tts_first_byte"] == ms(700)


async def test_discarded_speculative_request_is_replaced_by_the_real_one():
    obs = TTFAObserver()
    await push(obs, 10.0, VADUserStoppedSpeakingFrame(stop_secs=0.2))
    await push(obs, 10.02, LLMContextFrame(LLMContext(), speculation=True), destination=LLM)
    await push(obs, 10.05, usage(3000, 0))  # the discarded draft's usage
    await push(obs, 10.10, UserStoppedSpeakingFrame())
    await push(obs, 10.11, LLMContextFrame(LLMContext()), destination=LLM)
    await push(obs, 10.30, LLMTextFrame("Hi"), source=LLM)
    await push(obs, 10.40, BotStartedSpeakingFrame())
    await push(obs, 10.90, usage(3010, 2990))
    [turn] = obs.turns
    assert turn.marks_ms()["llm_request"] == ms(310)
    assert (turn.prompt_tokens, turn.cached_tokens) == (3010, 2990)


async def test_reused_draft_sent_before_confirmation_costs_no_dispatch_time():
    obs = TTFAObserver()
    await push(obs, 10.0, VADUserStoppedSpeakingFrame(stop_secs=0.2))
    await push(obs, 10.02, LLMContextFrame(LLMContext(), speculation=True), destination=LLM)
    await push(obs, 10.10, UserStoppedSpeakingFrame())
    await push(obs, 10.101, LLMTextFrame("Hi"), source=LLM)  # released by the gate
    await push(obs, 10.30, BotStartedSpeakingFrame())
    stages = obs.turns[0].stages_ms()
    assert stages["llm_dispatch"] == 0.0
    assert stages["llm_ttft"] == ms(1)


async def test_caller_resuming_after_a_pause_is_not_a_turn_and_silence_is_unanswered():
    obs = TTFAObserver()
    # A pause the turn detector did not confirm: the caller goes on speaking.
    await push(obs, 10.0, VADUserStoppedSpeakingFrame(stop_secs=0.2))
    await push(obs, 10.5, VADUserStartedSpeakingFrame())
    # A confirmed turn that never got audio before the caller spoke again.
    await push(obs, 12.0, VADUserStoppedSpeakingFrame(stop_secs=0.2))
    await push(obs, 12.1, UserStoppedSpeakingFrame())
    await push(obs, 14.0, VADUserStartedSpeakingFrame())
    await one_turn(obs, base=20.0)
    assert len(obs.unanswered) == 1
    assert [t.turn for t in obs.turns] == [1]
    assert obs.summary()["n_unanswered"] == 1


async def test_interim_transcripts_and_non_first_pushes_do_not_mark():
    obs = TTFAObserver()
    await push(obs, 10.0, VADUserStoppedSpeakingFrame(stop_secs=0.2))
    await push(obs, 10.01, InterimTranscriptionFrame("nine", "u", "t"))
    await push(obs, 10.03, TranscriptionFrame("nine", "u", "t"), first_push=False)
    await push(obs, 10.1, UserStoppedSpeakingFrame())
    await push(obs, 10.2, LLMContextFrame(LLMContext()), destination=LLM)
    await push(obs, 10.4, BotStartedSpeakingFrame())
    assert "final_transcript" not in obs.turns[0].marks


async def test_on_turn_measured_event_and_annotate():
    obs = TTFAObserver()
    seen = []

    @obs.event_handler("on_turn_measured")
    async def _seen(observer, record):
        seen.append(record.turn)

    await push(obs, 10.0, VADUserStoppedSpeakingFrame(stop_secs=0.2))
    obs.annotate(speculation="reused", prefill_requests=3)
    await push(obs, 10.1, UserStoppedSpeakingFrame())
    await push(obs, 10.2, LLMContextFrame(LLMContext()), destination=LLM)
    await push(obs, 10.4, BotStartedSpeakingFrame())
    await obs.cleanup()
    assert seen == [0]
    assert obs.turns[0].to_dict()["prefill_requests"] == 3


class FakeOutput(FrameProcessor):
    """An output transport stand-in: the first TTS audio of a reply starts the bot speaking."""

    def __init__(self):
        super().__init__()
        self.speaking = False

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame) and not self.speaking:
            self.speaking = True
            await self.push_frame(BotStartedSpeakingFrame())


class SlowLLM(FakeLLM):
    """Takes 50 ms to its first token, so the turn has a TTFA worth measuring."""

    async def process_frame(self, frame, direction):
        if isinstance(frame, LLMContextFrame):
            await asyncio.sleep(0.05)
        await super().process_frame(frame, direction)


def one_turn_frames():
    return [
        VADUserStoppedSpeakingFrame(stop_secs=0.2),
        TranscriptionFrame("nine please", "u", "t"),
        UserStoppedSpeakingFrame(),
        LLMContextFrame(LLMContext()),
    ]


async def test_in_a_real_pipeline_with_pipecat_llm_and_tts_services():
    """Wiring check through Pipecat's real TTSService machinery (sentence aggregation, contexts)."""
    obs = TTFAObserver()
    vad = VADUserStoppedSpeakingFrame(stop_secs=0.2)
    frames = [vad, *one_turn_frames()[1:]]
    await run_test(
        Pipeline([SlowLLM(), FakeTTS(), FakeOutput()]),
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
    assert sum(turn.stages_ms().values()) == ms(turn.ttfa_ms)
    assert turn.stages_ms()["llm_ttft"] >= 50  # the LLM's 50 ms, on the pipeline clock
    # The push time maps onto the epoch: the VAD's own wall-clock stamp agrees with it.
    assert turn.marks["vad_stopped"] == pytest.approx(vad.timestamp, abs=0.05)


class SlowedTTFAObserver(TTFAObserver):
    """A TTFA observer whose callbacks each take 3 ms, as on a loaded machine.

    Pipecat queues every observer's callbacks in a task of its own, so the backlog grows: by
    the first bot audio this observer runs well behind the pipeline.
    """

    def __init__(self):
        super().__init__()
        self.lag_at_first_audio_ms = None
        self.done = asyncio.Event()

    async def on_push_frame(self, data):
        await asyncio.sleep(0.003)
        if isinstance(data.frame, BotStartedSpeakingFrame) and data.first_push:
            now = data.source.get_clock().get_time()
            self.lag_at_first_audio_ms = (now - data.timestamp) / 1e6
        await super().on_push_frame(data)
        if self.turns:
            self.done.set()


async def test_a_slowed_observer_measures_the_same_ttfa():
    """Marks come from the frames' push times, so how late the callbacks run changes nothing."""
    prompt, slowed = TTFAObserver(), SlowedTTFAObserver()
    worker = PipelineWorker(
        Pipeline([SlowLLM(), FakeTTS(), FakeOutput()]),
        observers=[prompt, slowed],
        params=PipelineParams(),
        cancel_on_idle_timeout=False,
    )
    started = asyncio.Event()

    @worker.event_handler("on_pipeline_started")
    async def _started(_worker, _frame):
        started.set()

    async def drive():
        await asyncio.wait_for(started.wait(), 5)
        for frame in one_turn_frames():
            await worker.queue_frame(frame)
        # The slowed observer must see the whole turn before the pipeline ends.
        await asyncio.wait_for(slowed.done.wait(), 30)
        await worker.queue_frame(EndFrame())

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await asyncio.gather(runner.run(), drive())

    [fast_turn], [slow_turn] = prompt.turns, slowed.turns
    assert slowed.lag_at_first_audio_ms > 30, slowed.lag_at_first_audio_ms  # it really ran late
    assert slow_turn.ttfa_ms == ms(fast_turn.ttfa_ms), (slow_turn.ttfa_ms, fast_turn.ttfa_ms)
    assert slow_turn.stages_ms() == ms(fast_turn.stages_ms())


async def test_final_transcript_inside_the_vad_window_is_marked_and_costs_nothing():
    obs = TTFAObserver()
    # STT finalizes 120 ms after end of speech; VAD reports the stop 200 ms after it.
    await push(obs, 9.92, TranscriptionFrame("nine please", "u", "t"))
    await push(obs, 10.0, VADUserStoppedSpeakingFrame(stop_secs=0.2))
    await push(obs, 10.1, UserStoppedSpeakingFrame())
    await push(obs, 10.2, LLMContextFrame(LLMContext()), destination=LLM)
    await push(obs, 10.5, BotStartedSpeakingFrame())
    [turn] = obs.turns
    assert turn.marks_ms()["final_transcript"] == ms(120)
    assert turn.stages_ms()["stt_final"] == 0.0


async def test_annotation_frames_land_where_their_target_says():
    obs = TTFAObserver()
    await push(obs, 1.0, TTFAAnnotationFrame(add={"warmup_tokens": 1500}, target="session"))
    await push(obs, 9.0, TTFAAnnotationFrame(fields={"pool_prewarmed": True}, target="next"))
    await push(obs, 10.0, VADUserStoppedSpeakingFrame(stop_secs=0.2))
    await push(obs, 10.1, TTFAAnnotationFrame(add={"pool_handshakes": 1}), up=True)
    await push(obs, 10.2, TTFAAnnotationFrame(add={"pool_handshakes": 1}))
    await push(obs, 10.2, TTFAAnnotationFrame(add={"pool_handshakes": 5}), first_push=False)
    await push(obs, 10.3, UserStoppedSpeakingFrame())
    await push(obs, 10.4, LLMContextFrame(LLMContext()), destination=LLM)
    await push(obs, 10.6, BotStartedSpeakingFrame())
    await push(obs, 10.9, TTFAAnnotationFrame(fields={"prefill_requests": 2}))
    row = obs.turns[0].to_dict()
    assert (row["pool_prewarmed"], row["pool_handshakes"], row["prefill_requests"]) == (True, 2, 2)
    assert obs.session == {"warmup_tokens": 1500}


def test_a_malformed_annotation_frame_is_refused_where_it_is_made():
    with pytest.raises(TypeError, match=r"add\['ms'\] must be a number"):
        TTFAAnnotationFrame(add={"ms": "12"})
    with pytest.raises(ValueError, match="target must be one of current, next, session"):
        TTFAAnnotationFrame(fields={"a": 1}, target="previous")
    with pytest.raises(TypeError, match="fields must be a dict"):
        TTFAAnnotationFrame(fields=[("a", 1)])


async def test_an_annotation_spoiled_after_it_was_made_is_ignored_with_one_warning():
    obs = TTFAObserver()
    lines = []
    sink = logger.add(lines.append, level="WARNING")
    try:
        await push(obs, 10.0, VADUserStoppedSpeakingFrame(stop_secs=0.2))
        for _ in range(5):
            frame = TTFAAnnotationFrame(add={"n": 1})
            frame.add["n"] = "one"
            await push(obs, 10.1, frame)
        await push(obs, 10.2, TTFAAnnotationFrame(add={"n": 1}))
        obs.close()
    finally:
        logger.remove(sink)
    assert obs.unanswered[0].extra == {"n": 1}
    assert len(lines) == 2  # the first one, then the count at close
    assert "5 malformed annotations ignored" in lines[1]


async def test_usage_reports_cache_writes_additively():
    obs = TTFAObserver()
    await one_turn(obs)
    frame = usage(3100, 0)
    frame.data[0].value.cache_creation_input_tokens = 3000
    await push(obs, 11.0, frame)
    row = obs.turns[0].to_dict()
    assert (row["prompt_tokens"], row["cached_tokens"], row["cache_write_tokens"]) == (
        3100,
        0,
        3000,
    )


async def test_the_turn_models_inference_time_lands_on_the_turn_it_judged():
    from pipecat.metrics.metrics import TurnMetricsData

    obs = TTFAObserver()
    await push(obs, 10.0, VADUserStoppedSpeakingFrame(stop_secs=0.2))
    verdict = TurnMetricsData(
        processor="smart-turn", is_complete=True, probability=0.97, e2e_processing_time_ms=61.23
    )
    await push(obs, 10.06, MetricsFrame(data=[verdict]))
    await push(obs, 10.1, UserStoppedSpeakingFrame())
    await push(obs, 10.12, LLMContextFrame(LLMContext()), destination=LLM)
    await push(obs, 10.4, LLMTextFrame("Sure"), source=LLM)
    await push(obs, 10.52, BotStartedSpeakingFrame())
    [turn] = obs.turns
    assert turn.extra["turn_model_ms"] == 61.2
