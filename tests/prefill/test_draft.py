"""Draft-and-hold with Pipecat's real user aggregator, SpeculationGate and OpenAILLMService."""

import pytest
from pipecat.frames.frames import (
    LLMTextFrame,
    TranscriptionFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.turns.user_start import VADUserTurnStartStrategy
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from pipecat_fast.prefill import DraftAndHoldUserTurnStopStrategy
from pipecat_fast.stabilizer.frames import StableTranscriptFrame
from pipecat_fast.testing.openai_server import OpenAIEmulator
from pipecat_fast.testing.profiles import LatencyProfile
from pipecat_fast.ttfa import TTFAAnnotationFrame

FAST = LatencyProfile("test", 0, 0, 100, 0, 0.0, 0, 10_000, 0)
BOOKED = "Great, you're booked for Tuesday at nine."
OTHER = "Sorry, could you say that again?"


class Recorder(FrameProcessor):
    """Remembers every downstream frame leaving the LLM, in order."""

    def __init__(self):
        super().__init__()
        self.seen = []

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        self.seen.append(frame)
        await self.push_frame(frame, direction)


def pipeline_for(emulator, draft, context):
    llm = OpenAILLMService(
        api_key="k", base_url=emulator.base_url, settings=OpenAILLMService.Settings(model="m")
    )
    strategies = UserTurnStrategies(start=[VADUserTurnStartStrategy()], stop=[draft])
    pair = LLMContextAggregatorPair(
        context, user_params=LLMUserAggregatorParams(user_turn_strategies=strategies)
    )
    recorder = Recorder()
    llm.recorder = recorder
    return Pipeline([pair.user(), llm, recorder, pair.assistant()]), llm


def speech(text=None):
    frames = [VADUserStartedSpeakingFrame(start_secs=0.2)]
    if text:
        # The STT's final lands before the VAD's stop window closes (as Deepgram's does);
        # the sleep keeps the system frame that follows from overtaking it.
        frames += [TranscriptionFrame(text, "caller", "2026-11-29T00:00:00Z"), SleepFrame(0.05)]
    return frames


def silence(seconds):
    return [VADUserStoppedSpeakingFrame(stop_secs=0.2), SleepFrame(seconds)]


def texts_after_confirmation(down):
    confirmed = next(i for i, f in enumerate(down) if isinstance(f, UserStoppedSpeakingFrame))
    before = [f.text for f in down[:confirmed] if isinstance(f, LLMTextFrame)]
    after = "".join(f.text for f in down[confirmed:] if isinstance(f, LLMTextFrame))
    return before, after


async def test_matching_draft_is_held_until_confirmation_then_reused():
    replies = [("yes I want to book it", BOOKED)]
    async with OpenAIEmulator(FAST, replies=replies) as emulator:
        context = LLMContext()
        draft = DraftAndHoldUserTurnStopStrategy(
            SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.5)
        )
        pipeline, llm = pipeline_for(emulator, draft, context)
        await run_test(pipeline, frames_to_send=[*speech("Yes, I want to book it."), *silence(1.2)])
    before, after = texts_after_confirmation(llm.recorder.seen)
    assert before == []  # nothing speculative before the turn is confirmed
    assert after == BOOKED
    assert len(emulator.requests) == 1  # the draft answered the turn: no second inference
    assert draft.outcomes == ["reused"]
    user_messages = [m for m in context.get_messages() if m["role"] == "user"]
    assert [m["content"] for m in user_messages] == ["Yes, I want to book it."]
    [note] = [f for f in llm.recorder.seen if isinstance(f, TTFAAnnotationFrame)]
    assert note.fields == {"speculation": "reused", "drafts": 1, "drafts_discarded": 0}


async def test_caller_resuming_withdraws_the_draft_and_its_words_are_never_spoken():
    replies = [("I want to", OTHER), ("I want to book a cleaning", BOOKED)]
    async with OpenAIEmulator(FAST, replies=replies) as emulator:
        context = LLMContext()
        draft = DraftAndHoldUserTurnStopStrategy(
            SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.5)
        )
        pipeline, llm = pipeline_for(emulator, draft, context)
        frames = [*speech("I want to"), *silence(0.2), *speech("book a cleaning."), *silence(1.2)]
        await run_test(pipeline, frames_to_send=frames)
    spoken = "".join(f.text for f in llm.recorder.seen if isinstance(f, LLMTextFrame))
    assert spoken == BOOKED  # the withdrawn draft's reply never came out
    assert len(emulator.requests) == 2
    assert draft.outcomes == ["reused"]


async def test_final_transcript_that_differs_discards_the_draft_and_runs_the_normal_request():
    replies = [("I want to book", OTHER), ("I want to book a table", BOOKED)]
    async with OpenAIEmulator(FAST, replies=replies) as emulator:
        context = LLMContext()
        draft = DraftAndHoldUserTurnStopStrategy(
            SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.5), max_drafts_per_turn=1
        )
        pipeline, llm = pipeline_for(emulator, draft, context)
        stable = StableTranscriptFrame(
            text="I want to book", word_count=4, new_words=4, retracted=0, final=False, turn=0
        )
        # The stable frame is a data frame, like the final in speech(): the sleep keeps the
        # system frame that follows from overtaking it.
        frames = [*speech(), stable, SleepFrame(0.05)]
        frames += [VADUserStoppedSpeakingFrame(stop_secs=0.2), SleepFrame(0.3)]
        frames += [TranscriptionFrame("I want to book a table.", "caller", "t"), SleepFrame(1.2)]
        await run_test(pipeline, frames_to_send=frames)
    assert draft.outcomes == ["discarded"]
    before, after = texts_after_confirmation(llm.recorder.seen)
    # BOOKED is the emulator's reply to the final transcript only: the normal request ran.
    assert before == [] and after == BOOKED
    # The draft's own request reaches the server unless a loaded machine delays it past its
    # cancellation; either way it is one request at most.
    assert len(emulator.requests) in (1, 2)


async def test_a_draft_that_wants_a_tool_call_never_runs_it():
    calls = []
    tool_reply = {"tool_call": {"name": "book", "arguments": {"day": "Tuesday"}}, "after": BOOKED}
    async with OpenAIEmulator(FAST, replies=[("book me for tuesday", tool_reply)]) as emulator:
        context = LLMContext()
        draft = DraftAndHoldUserTurnStopStrategy(
            SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.6)
        )
        pipeline, llm = pipeline_for(emulator, draft, context)
        seen_during_speculation = []

        async def book(params):
            seen_during_speculation.append(draft._draft_text)
            calls.append(params.arguments)
            await params.result_callback({"booked": True})

        llm.register_function("book", book)
        frames = [*speech("Book me for Tuesday."), *silence(2.0)]
        await run_test(pipeline, frames_to_send=frames)
    # The draft's tool call was withdrawn, not executed; the confirmed turn ran it once.
    assert calls == [{"day": "Tuesday"}]
    assert seen_during_speculation == [None]
    assert draft.outcomes == ["discarded"]
    before, after = texts_after_confirmation(llm.recorder.seen)
    assert before == [] and BOOKED in after


async def test_a_draft_the_wrapped_strategy_never_confirms_is_withdrawn_not_spoken():
    """The turn is ended by the controller's stop watchdog, not by the wrapped strategy."""
    replies = [("I want to book", OTHER)]
    async with OpenAIEmulator(FAST, replies=replies) as emulator:
        context = LLMContext()
        # A wrapped strategy that never fires (its timeout is far away): only the watchdog
        # ends this turn.
        draft = DraftAndHoldUserTurnStopStrategy(
            SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=60.0)
        )
        llm = OpenAILLMService(
            api_key="k", base_url=emulator.base_url, settings=OpenAILLMService.Settings(model="m")
        )
        strategies = UserTurnStrategies(start=[VADUserTurnStartStrategy()], stop=[draft])
        pair = LLMContextAggregatorPair(
            context,
            user_params=LLMUserAggregatorParams(
                user_turn_strategies=strategies, user_turn_stop_timeout=0.8
            ),
        )
        recorder = Recorder()
        pipeline = Pipeline([pair.user(), llm, recorder, pair.assistant()])
        await run_test(pipeline, frames_to_send=[*speech("I want to book"), *silence(2.0)])
    assert draft.outcomes == ["discarded"]
    before, after = texts_after_confirmation(recorder.seen)
    assert before == []
    # The normal request answered the turn; the draft's copy of the reply was not spoken too.
    assert after == OTHER
    assert len(emulator.requests) == 2


@pytest.mark.parametrize("text", ["", "   "])
async def test_no_words_no_draft(text):
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext()
        draft = DraftAndHoldUserTurnStopStrategy(
            SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.3)
        )
        pipeline, llm = pipeline_for(emulator, draft, context)
        await run_test(pipeline, frames_to_send=[*speech(text or None), *silence(0.6)])
    assert draft.outcomes in ([], ["none"])  # whatever the stock path did, nothing was drafted
    if not text:
        assert emulator.requests == []  # no words at all: no request of any kind
