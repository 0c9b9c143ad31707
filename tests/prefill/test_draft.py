"""Draft-and-hold with Pipecat's real user aggregator, SpeculationGate and OpenAILLMService.

The decisions are DraftHold's (tests/prefill/test_draft_core.py); here the strategy carries them
out through Pipecat. Deterministic: frames reach the user aggregator one at a time
(``tests.pacing``), the wrapped strategy confirms the turn when the test says so (an
``EndOfTurn`` frame), and waits are on conditions (the draft's reply generated and held).
"""

from dataclasses import dataclass

import pytest
from pipecat.frames.frames import (
    DataFrame,
    LLMContextFrame,
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
from pipecat.tests.utils import run_test
from pipecat.turns.types import ProcessFrameResult, UserTurnSpeculation
from pipecat.turns.user_start import VADUserTurnStartStrategy
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_stop.base_user_turn_stop_strategy import BaseUserTurnStopStrategy
from pipecat.turns.user_stop.eager_match_policy import ExactMatch, NormalizedMatch
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from pipecat_fast._pipecat import STOP_STRATEGY_EVENTS
from pipecat_fast.frames import StableTranscriptFrame, TTFAAnnotationFrame
from pipecat_fast.prefill import DraftAndHoldUserTurnStopStrategy, TranscriptMatch
from pipecat_fast.testing.openai_server import OpenAIEmulator
from pipecat_fast.testing.profiles import LatencyProfile
from tests.pacing import Pacer, Until, paced

FAST = LatencyProfile("test", 0, 0, 100, 0, 0.0, 0, 10_000, 0)
BOOKED = "Great, you're booked for Tuesday at nine."
OTHER = "Sorry, could you say that again?"


@dataclass
class EndOfTurn(DataFrame):
    """The test's verdict: the turn is over (what Smart Turn would decide)."""


class ConfirmOnEndOfTurn(BaseUserTurnStopStrategy):
    """A wrapped strategy that confirms the turn exactly when the test says so."""

    async def process_frame(self, frame):
        if isinstance(frame, EndOfTurn):
            await self.trigger_user_turn_stopped()
        return ProcessFrameResult.CONTINUE


class Recorder(FrameProcessor):
    """Remembers every downstream frame leaving the LLM, in order."""

    def __init__(self):
        super().__init__()
        self.seen = []

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        self.seen.append(frame)
        await self.push_frame(frame, direction)

    def spoken(self):
        return "".join(f.text for f in self.seen if isinstance(f, LLMTextFrame))


class Stack:
    """User aggregator (with the draft strategy), LLM, recorder, assistant aggregator."""

    def __init__(self, emulator, draft, *, stop=None, **user_params):
        self.context = LLMContext()
        self.llm = OpenAILLMService(
            api_key="k", base_url=emulator.base_url, settings=OpenAILLMService.Settings(model="m")
        )
        strategies = UserTurnStrategies(start=[VADUserTurnStartStrategy()], stop=stop or [draft])
        self.pair = LLMContextAggregatorPair(
            self.context,
            user_params=LLMUserAggregatorParams(user_turn_strategies=strategies, **user_params),
        )
        self.recorder = Recorder()
        self.pacer = Pacer(self.pair.user())
        self.inferences = 0
        self.llm.add_event_handler("on_after_process_frame", self._count)

    def _count(self, _llm, frame):
        if isinstance(frame, LLMContextFrame):
            self.inferences += 1  # the whole reply has been generated (and held, if a draft)

    def generated(self, n):
        return Until(lambda: self.inferences >= n, what=f"{n} inferences generated")

    async def run(self, *items):
        pipeline = Pipeline(
            [self.pacer, self.pair.user(), self.llm, self.recorder, self.pair.assistant()]
        )
        await run_test(pipeline, frames_to_send=paced(*items))
        assert self.pacer.timed_out == []

    def before_and_after_confirmation(self):
        seen = self.recorder.seen
        confirmed = next(i for i, f in enumerate(seen) if isinstance(f, UserStoppedSpeakingFrame))
        before = [f.text for f in seen[:confirmed] if isinstance(f, LLMTextFrame)]
        after = "".join(f.text for f in seen[confirmed:] if isinstance(f, LLMTextFrame))
        return before, after


def draft_for(**kwargs):
    return DraftAndHoldUserTurnStopStrategy(ConfirmOnEndOfTurn(), **kwargs)


def final(text):
    return TranscriptionFrame(text, "caller", "2026-11-29T00:00:00Z")


def stable(text):
    words = len(text.split())
    return StableTranscriptFrame(
        text=text, word_count=words, new_words=words, retracted=0, final=False, turn=0
    )


def start():
    return VADUserStartedSpeakingFrame(start_secs=0.2)


def stop():
    return VADUserStoppedSpeakingFrame(stop_secs=0.2)


async def test_matching_draft_is_held_until_confirmation_then_reused():
    async with OpenAIEmulator(FAST, replies=[("yes I want to book it", BOOKED)]) as emulator:
        draft = draft_for()
        stack = Stack(emulator, draft)
        spoken = Until(lambda: stack.recorder.spoken() == BOOKED, what="the reply was spoken")
        frames = [start(), final("Yes, I want to book it."), stop(), stack.generated(1)]
        await stack.run(*frames, EndOfTurn(), spoken)
    before, after = stack.before_and_after_confirmation()
    assert before == []  # the draft's whole reply was held until the turn was confirmed
    assert after == BOOKED
    assert len(emulator.requests) == 1  # the draft answered the turn: no second inference
    assert draft.outcomes == ["reused"]
    user_messages = [m for m in stack.context.get_messages() if m["role"] == "user"]
    assert [m["content"] for m in user_messages] == ["Yes, I want to book it."]
    [note] = [f for f in stack.recorder.seen if isinstance(f, TTFAAnnotationFrame)]
    assert note.fields == {
        "speculation": "reused",
        "drafts": 1,
        "drafts_discarded": 0,
        "drafts_early": 0,
        "drafts_yielded": 0,
    }


async def test_the_context_gets_the_final_transcript_not_the_drafted_words():
    async with OpenAIEmulator(FAST, replies=[("yes I want to book it", BOOKED)]) as emulator:
        draft = draft_for()
        stack = Stack(emulator, draft)
        spoken = Until(lambda: stack.recorder.spoken() == BOOKED, what="the reply was spoken")
        frames = [start(), stable("yes i want to book it"), stop(), stack.generated(1)]
        frames += [final("Yes, I want to book it."), EndOfTurn(), spoken]
        await stack.run(*frames)
    assert len(emulator.requests) == 1
    assert draft.outcomes == ["reused"]  # drafted from stable words, equal under the normaliser
    user_messages = [m["content"] for m in stack.context.get_messages() if m["role"] == "user"]
    assert user_messages == ["Yes, I want to book it."]


async def test_caller_resuming_withdraws_the_draft_and_its_words_are_never_spoken():
    replies = [("I want to", OTHER), ("I want to book a cleaning", BOOKED)]
    async with OpenAIEmulator(FAST, replies=replies) as emulator:
        draft = draft_for()
        stack = Stack(emulator, draft)
        spoken = Until(lambda: BOOKED in stack.recorder.spoken(), what="the reply was spoken")
        frames = [start(), final("I want to"), stop(), stack.generated(1)]
        frames += [start(), final("book a cleaning."), stop(), stack.generated(2), EndOfTurn()]
        await stack.run(*frames, spoken)
    assert stack.recorder.spoken() == BOOKED  # the withdrawn draft's reply never came out
    assert len(emulator.requests) == 2
    assert draft.outcomes == ["reused"]


async def test_final_transcript_that_differs_discards_the_draft_and_runs_the_normal_request():
    replies = [("I want to book", OTHER), ("I want to book a table", BOOKED)]
    async with OpenAIEmulator(FAST, replies=replies) as emulator:
        draft = draft_for(max_drafts_per_turn=1)
        stack = Stack(emulator, draft)
        spoken = Until(lambda: BOOKED in stack.recorder.spoken(), what="the reply was spoken")
        frames = [start(), stable("I want to book"), stop(), stack.generated(1)]
        frames += [final("I want to book a table."), EndOfTurn(), spoken]
        await stack.run(*frames)
    assert draft.outcomes == ["discarded"]
    before, after = stack.before_and_after_confirmation()
    # BOOKED is the emulator's reply to the final transcript only: the normal request ran.
    assert before == [] and after == BOOKED
    assert len(emulator.requests) == 2  # the draft's, generated and dropped, and the real one


async def test_a_draft_that_wants_a_tool_call_never_runs_it():
    calls = []
    tool_reply = {"tool_call": {"name": "book", "arguments": {"day": "Tuesday"}}, "after": BOOKED}
    async with OpenAIEmulator(FAST, replies=[("book me for tuesday", tool_reply)]) as emulator:
        draft = draft_for()
        stack = Stack(emulator, draft)
        held_during_call = []

        async def book(params):
            held_during_call.append(draft.held_draft)
            calls.append(params.arguments)
            await params.result_callback({"booked": True})

        stack.llm.register_function("book", book)
        withdrawn = Until(lambda: draft.held_draft is None, what="the LLM withdrew the draft")
        spoken = Until(lambda: BOOKED in stack.recorder.spoken(), what="the reply was spoken")
        frames = [start(), final("Book me for Tuesday."), stop(), withdrawn, EndOfTurn(), spoken]
        await stack.run(*frames)
    # The draft's tool call was withdrawn, not executed; the confirmed turn ran it once.
    assert calls == [{"day": "Tuesday"}]
    assert held_during_call == [None]
    assert draft.outcomes == ["discarded"]
    before, after = stack.before_and_after_confirmation()
    assert before == [] and BOOKED in after


async def test_a_turn_another_strategy_ends_withdraws_the_draft_and_speaks_the_normal_reply():
    """The draft's own wrapped strategy never decides; a later stop strategy ends the turn."""
    async with OpenAIEmulator(FAST, replies=[("I want to book", OTHER)]) as emulator:
        never = SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=60.0)
        draft = DraftAndHoldUserTurnStopStrategy(never)
        stack = Stack(emulator, draft, stop=[draft, ConfirmOnEndOfTurn()])
        spoken = Until(lambda: OTHER in stack.recorder.spoken(), what="the reply was spoken")
        frames = [start(), final("I want to book"), stop(), stack.generated(1), EndOfTurn(), spoken]
        await stack.run(*frames)
    assert draft.outcomes == ["discarded"]
    before, after = stack.before_and_after_confirmation()
    assert before == []
    # The normal request answered the turn; the draft's copy of the reply was not spoken too.
    assert after == OTHER
    assert len(emulator.requests) == 2


async def test_a_draft_the_stop_watchdog_ends_is_withdrawn_not_spoken():
    async with OpenAIEmulator(FAST, replies=[("I want to book", OTHER)]) as emulator:
        never = SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=60.0)
        draft = DraftAndHoldUserTurnStopStrategy(never)
        stack = Stack(emulator, draft, user_turn_stop_timeout=0.3)
        ended = Until(lambda: draft.outcomes == ["discarded"], what="the watchdog ended the turn")
        spoken = Until(lambda: OTHER in stack.recorder.spoken(), what="the reply was spoken")
        frames = [start(), final("I want to book"), stop(), stack.generated(1), ended, spoken]
        await stack.run(*frames)
    before, after = stack.before_and_after_confirmation()
    assert before == [] and after == OTHER
    assert len(emulator.requests) == 2


@pytest.mark.parametrize("text", [None, "   "])
async def test_no_words_no_draft(text):
    words = [final(text)] if text else []
    requests = {}
    for wrapped in (True, False):
        async with OpenAIEmulator(FAST) as emulator:
            draft = draft_for() if wrapped else ConfirmOnEndOfTurn()
            stack = Stack(emulator, draft)
            await stack.run(start(), *words, stop(), EndOfTurn())
            requests[wrapped] = [r.prompt_tokens for r in emulator.requests]
        if wrapped:
            assert draft.outcomes == ["none"]
    # Nothing was drafted: the emulator saw exactly what stock Pipecat sends for such a turn.
    assert requests[True] == requests[False]


def test_a_service_where_the_strategy_goes_is_a_type_error_at_once():
    llm = OpenAILLMService(api_key="k", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(TypeError, match=r"takes the user turn stop strategy .* got OpenAILLM"):
        DraftAndHoldUserTurnStopStrategy(llm)
    with pytest.raises(TypeError, match="must be a Pipecat EagerMatchPolicy"):
        DraftAndHoldUserTurnStopStrategy(ConfirmOnEndOfTurn(), match_policy=str.__eq__)
    with pytest.raises(ValueError, match="max_drafts_per_turn"):
        DraftAndHoldUserTurnStopStrategy(ConfirmOnEndOfTurn(), max_drafts_per_turn=0)


async def test_every_event_of_the_wrapped_strategy_comes_out_of_the_wrapper():
    inner = ConfirmOnEndOfTurn()
    draft = DraftAndHoldUserTurnStopStrategy(inner, match_policy=ExactMatch())
    heard = []
    for name in STOP_STRATEGY_EVENTS:
        draft.add_event_handler(name, lambda source, *a, _n=name, **k: heard.append((_n, source)))
    await inner.push_frame(EndOfTurn())
    await inner.broadcast_frame(EndOfTurn)
    await inner.trigger_user_turn_inference_triggered(speculation=UserTurnSpeculation("x"))
    await inner.trigger_user_turn_speculation_cancelled()
    await inner.trigger_user_turn_finalized()
    assert [name for name, _ in heard] == [
        "on_push_frame",
        "on_broadcast_frame",
        "on_user_turn_inference_triggered",
        "on_user_turn_speculation_cancelled",
        "on_push_frame",  # the turn's accounting for the TTFA meter
        "on_user_turn_stopped",
    ]
    assert all(source is draft for _, source in heard)


def test_the_default_match_is_the_projects_normaliser_and_agrees_with_pipecats():
    ours, theirs = TranscriptMatch(), NormalizedMatch()
    for eager, committed in [
        ("yes i want to book it", "Yes, I want to book it."),
        ("its fine", "It's fine."),
        ("book a cleaning", "book a filling"),
    ]:
        assert ours.matches(eager, committed) == theirs.matches(eager, committed)
