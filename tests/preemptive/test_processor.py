"""Preemptive TTS through Pipecat's real services: the user aggregator with draft-and-hold, the
OpenAI service on its emulator, each kind of TTS (Cartesia WebSocket, Deepgram WebSocket,
Deepgram HTTP) on its emulator, and the hold right after the TTS.

Frames reach the user aggregator one at a time (``tests.pacing``); the turn is confirmed when
the test says so (an ``EndOfTurn`` frame, as in tests/prefill/test_draft.py), and every wait is
on a condition (audio held, a reply spoken), never a sleep.
"""

import pytest
from pipecat.frames.frames import (
    ErrorFrame,
    TTSAudioRawFrame,
    TTSTextFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.services.deepgram.tts import DeepgramHttpTTSService
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.tests.utils import run_test
from pipecat.turns.user_start import VADUserTurnStartStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from pipecat_fast.bench.evals.bargein import KINDS, emulators
from pipecat_fast.frames import TTFAAnnotationFrame
from pipecat_fast.preemptive import PreemptiveTTS
from pipecat_fast.prefill import DraftAndHoldUserTurnStopStrategy
from pipecat_fast.testing.openai_server import OpenAIEmulator
from pipecat_fast.testing.profiles import LatencyProfile
from tests.pacing import Pacer, Until, paced
from tests.prefill.test_draft import ConfirmOnEndOfTurn, EndOfTurn, Recorder, final, start, stop

FAST = LatencyProfile("test", 0, 0, 100, 0, 0.0, 0, 10_000, 0)
BOOKED = "Great, you're booked for Tuesday. See you then!"
OTHER = "Sorry, could you say that again?"


class Stack:
    def __init__(self, llm_emulator, tts, **draft_kwargs):
        self.context = LLMContext()
        self.llm = OpenAILLMService(
            api_key="k",
            base_url=llm_emulator.base_url,
            settings=OpenAILLMService.Settings(model="m"),
        )
        self.draft = DraftAndHoldUserTurnStopStrategy(ConfirmOnEndOfTurn(), **draft_kwargs)
        strategies = UserTurnStrategies(start=[VADUserTurnStartStrategy()], stop=[self.draft])
        self.pair = LLMContextAggregatorPair(
            self.context, user_params=LLMUserAggregatorParams(user_turn_strategies=strategies)
        )
        self.tts = tts
        self.preempt = PreemptiveTTS(self.llm, tts)
        self.out = Recorder()  # stands where the output transport goes
        self.pacer = Pacer(self.pair.user())

    async def run(self, *items):
        pipeline = Pipeline(
            [
                self.pacer,
                self.pair.user(),
                self.llm,
                self.preempt,
                self.tts,
                self.preempt.hold,
                self.out,
                self.pair.assistant(),
            ]
        )
        await run_test(pipeline, frames_to_send=paced(*items))
        assert self.pacer.timed_out == []

    def audio_held(self):
        return Until(
            lambda: any(isinstance(f, TTSAudioRawFrame) for f in self.preempt.hold.core.held_items),
            what="the draft's first audio synthesized and held",
        )

    def spoken(self, text):
        return Until(lambda: self.spoken_text() == " ".join(text.split()), what=f"[{text}] spoken")

    def spoken_text(self):
        words = " ".join(f.text for f in self.out.seen if isinstance(f, TTSTextFrame)).split()
        return " ".join(words)

    def first(self, cls):
        return next((i for i, f in enumerate(self.out.seen) if isinstance(f, cls)), None)

    def notes(self):
        return [
            f for f in self.out.seen if isinstance(f, TTFAAnnotationFrame) and "preempt" in f.fields
        ]


@pytest.mark.parametrize("kind", KINDS)
async def test_first_audio_is_ready_before_confirmation_and_played_only_after(kind):
    async with OpenAIEmulator(FAST, replies=[("yes book it", BOOKED)]) as llm, emulators() as tts:
        stack = Stack(llm, tts.service(kind))
        frames = [start(), final("Yes, book it."), stop(), stack.audio_held()]
        await stack.run(*frames, EndOfTurn(), stack.spoken(BOOKED))
    confirmed = stack.first(UserStoppedSpeakingFrame)
    # Nothing of the draft reached the transport before the turn was confirmed...
    assert confirmed is not None and stack.first(TTSAudioRawFrame) > confirmed
    # ...though its first audio was already synthesized (the wait above), and the reply is
    # spoken once, whole, in order: the first phrase was not synthesized twice.
    assert stack.spoken_text() == " ".join(BOOKED.split())
    assert len(llm.requests) == 1
    assert stack.preempt.stats.released == 1 and stack.preempt.stats.discarded == 0
    assistant = [m["content"] for m in stack.context.get_messages() if m["role"] == "assistant"]
    assert " ".join(assistant).split() == BOOKED.split()
    assert [n.fields["preempt"] for n in stack.notes()] == ["released"]


@pytest.mark.parametrize("kind", KINDS)
async def test_the_caller_speaking_again_drops_the_held_audio_and_nothing_is_played(kind):
    replies = [("I want to", OTHER), ("I want to book it", BOOKED)]
    async with OpenAIEmulator(FAST, replies=replies) as llm, emulators() as tts:
        stack = Stack(llm, tts.service(kind))
        frames = [start(), final("I want to"), stop(), stack.audio_held()]
        # The caller goes on while the draft's audio is held: withdrawn, dropped.
        frames += [start(), Until(lambda: not stack.preempt.hold.core.holding, what="dropped")]
        frames += [final("book it."), stop(), stack.audio_held(), EndOfTurn(), stack.spoken(BOOKED)]
        await stack.run(*frames)
        if kind == "cartesia":
            withdrawn = [c for c in tts.cartesia.contexts.values() if c.cancelled]
            assert withdrawn, "the withdrawn draft's Cartesia context was cancelled"
    assert stack.spoken_text() == " ".join(BOOKED.split())  # none of OTHER was ever played
    assert stack.preempt.stats.discarded == 1 and stack.preempt.stats.released == 1
    assert stack.preempt.stats.chars_discarded > 0
    assert [n.fields["preempt"] for n in stack.notes()] == ["discarded", "released"]
    [discarded] = [n for n in stack.notes() if n.fields["preempt"] == "discarded"]
    assert discarded.add["preempt_chars_discarded"] == stack.preempt.stats.chars_discarded


async def test_a_final_that_differs_discards_the_held_audio_and_the_normal_reply_plays():
    replies = [("I want to book", OTHER), ("I want to book a table", BOOKED)]
    async with OpenAIEmulator(FAST, replies=replies) as llm, emulators() as tts:
        stack = Stack(llm, tts.service("cartesia"), max_drafts_per_turn=1)
        frames = [start(), final("I want to book"), stop(), stack.audio_held()]
        frames += [final("a table."), EndOfTurn(), stack.spoken(BOOKED)]
        await stack.run(*frames)
    assert stack.spoken_text() == " ".join(BOOKED.split())
    assert len(llm.requests) == 2
    assert stack.preempt.stats.discarded == 1


async def test_a_draft_confirmed_while_its_audio_is_still_synthesized_is_released_as_it_comes():
    """Confirmed right after the draft reached the TTS, before any of its audio came back."""
    async with OpenAIEmulator(FAST, replies=[("yes book it", BOOKED)]) as llm, emulators() as tts:
        stack = Stack(llm, tts.service("cartesia"))
        fed = Until(lambda: stack.preempt.stats.drafts_fed == 1, what="the draft went to the TTS")
        frames = [start(), final("Yes, book it."), stop(), fed, EndOfTurn(), stack.spoken(BOOKED)]
        await stack.run(*frames)
    confirmed = stack.first(UserStoppedSpeakingFrame)
    audio = [i for i, f in enumerate(stack.out.seen) if isinstance(f, TTSAudioRawFrame)]
    assert audio and min(audio) > confirmed
    assert stack.spoken_text() == " ".join(BOOKED.split())
    assert stack.preempt.stats.released == 1


class FailsOnce(DeepgramHttpTTSService):
    """Pipecat's Deepgram HTTP TTS whose first request fails, as the real one reports it."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.failures = 0

    async def run_tts(self, text, context_id):
        if self.failures == 0:
            self.failures += 1
            yield ErrorFrame("Error getting audio: HTTP 503: unavailable")
            return
        async for frame in super().run_tts(text, context_id):
            yield frame


async def test_a_tts_error_on_the_held_draft_withdraws_it_and_the_normal_path_runs():
    async with OpenAIEmulator(FAST, replies=[("yes book it", BOOKED)]) as llm, emulators() as tts:
        service = FailsOnce(api_key="k", base_url=tts.deepgram.http_url, aiohttp_session=tts.http)
        stack = Stack(llm, service)
        withdrawn = Until(lambda: stack.preempt.stats.tts_errors == 1, what="the TTS failed")
        frames = [start(), final("Yes, book it."), stop(), withdrawn]
        frames += [Until(lambda: stack.draft.held_draft is None, what="draft withdrawn")]
        await stack.run(*frames, EndOfTurn(), stack.spoken(BOOKED))
    assert stack.draft.outcomes == ["discarded"]
    assert len(llm.requests) == 2  # the draft, and the normal request after confirmation
    assert stack.spoken_text() == " ".join(BOOKED.split())
