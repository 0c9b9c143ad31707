"""SpeculativePrefill on fake frame streams, against the OpenAI emulator and the real service."""

import asyncio

import pytest
from pipecat.frames.frames import (
    ErrorFrame,
    InterruptionFrame,
    LLMContextFrame,
    LLMTextFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.tests.utils import SleepFrame, run_test

from pipecat_fast.prefill import OpenAIPrefill, PrefillConfig, SpeculativePrefill
from pipecat_fast.stabilizer.frames import StableTranscriptFrame
from pipecat_fast.testing.openai_server import OpenAIEmulator
from pipecat_fast.testing.profiles import LatencyProfile
from pipecat_fast.ttfa import TTFAAnnotationFrame

FAST = LatencyProfile("test", 0, 0, 100, 0, 0.0, 0, 10_000, 0)
SLOW_PREFILL = LatencyProfile("slow", 0, 0, 100, 0, 0.5, 0, 10_000, 0)  # 0.5 ms/token
SYSTEM = "You are the front desk of a dental clinic. Keep every answer short. " * 150
FINAL = "I would like to book a cleaning for next Tuesday."


def llm_for(emulator):
    return OpenAILLMService(
        api_key="test-key",
        base_url=emulator.base_url,
        settings=OpenAILLMService.Settings(model="gpt-4.1-mini", system_instruction=SYSTEM),
    )


def stable(text, turn=0):
    return StableTranscriptFrame(
        text=text, word_count=len(text.split()), new_words=1, retracted=0, final=False, turn=turn
    )


def real_turn(context, text=FINAL):
    """What the user aggregator sends at end of turn: the context plus the final text.

    (The aggregator appends to the same object when the turn ends; a copy built up front
    keeps this test's prefills from seeing the final text early.)
    """
    final = LLMContext(messages=[*context.get_messages(), {"role": "user", "content": text}])
    return [
        VADUserStoppedSpeakingFrame(stop_secs=0.2),
        UserStoppedSpeakingFrame(),
        LLMContextFrame(final),
    ]


async def run(emulator, frames, context, **kwargs):
    llm = llm_for(emulator)
    # Direct mode: the prefill sees the frames in the order sent (a system frame such as the
    # VAD stop would otherwise overtake the stable frames, which are data frames).
    prefill = SpeculativePrefill(llm, context=context, enable_direct_mode=True, **kwargs)
    down, up = await run_test(Pipeline([prefill, llm]), frames_to_send=frames)
    return prefill, down, up


async def test_prefill_warms_the_cache_for_the_real_request():
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext()
        frames = [
            stable("I would"),
            SleepFrame(0.5),
            stable("I would like to book a cleaning"),
            SleepFrame(0.5),
        ]
        prefill, down, _ = await run(emulator, frames + real_turn(context), context)
        prefills = [r for r in emulator.requests if r.max_tokens == 1]  # 2 words, then 4 more
        [real] = [r for r in emulator.requests if r.max_tokens != 1]
    assert len(prefills) == 2
    assert all(not r.stream for r in prefills)
    # The real request reads everything up to the caller's stable words from the cache.
    assert real.cached_tokens == prefills[-1].prompt_tokens // 128 * 128
    assert real.cached_tokens > 2000
    assert "".join(f.text for f in down if isinstance(f, LLMTextFrame))  # the real reply streamed
    [note] = [f for f in down if isinstance(f, TTFAAnnotationFrame)]
    assert note.fields["prefill_requests"] == 2


async def test_without_prefill_the_same_real_request_misses():
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext()
        llm = llm_for(emulator)
        await run_test(llm, frames_to_send=real_turn(context))
    assert [r.cached_tokens for r in emulator.requests] == [0]


async def test_never_two_in_flight_and_none_after_silence():
    async with OpenAIEmulator(SLOW_PREFILL) as emulator:  # each prefill takes ~2 s
        context = LLMContext()
        frames = [
            stable("one two"),
            stable("one two three four"),
            stable("one two three four five six"),
        ]
        frames += [
            VADUserStoppedSpeakingFrame(stop_secs=0.2),
            stable("one two three four five six seven eight"),
        ]
        frames += [SleepFrame(0.5)]
        prefill, _, _ = await run(emulator, frames, context, config=PrefillConfig(min_new_words=2))
    assert len(emulator.requests) == 1
    leftovers = [t for t in asyncio.all_tasks() if "prefill" in t.get_name() and not t.done()]
    assert leftovers == []  # cancelled at the end of the session, not leaked


async def test_a_short_next_turn_stable_only_after_the_vad_stop_sends_no_prefill():
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext()
        frames = [VADUserStartedSpeakingFrame(), stable("hello there", turn=0), SleepFrame(0.3)]
        frames += [VADUserStoppedSpeakingFrame(stop_secs=0.2), UserStoppedSpeakingFrame()]
        # Turn 1 is a short "Yes": the stabiliser passes it on only with the final.
        frames += [SleepFrame(0.1), VADUserStartedSpeakingFrame(), SleepFrame(0.05)]
        frames += [VADUserStoppedSpeakingFrame(stop_secs=0.2), SleepFrame(0.05)]
        frames += [stable("Yes", turn=1), SleepFrame(0.3)]
        prefill, _, _ = await run(emulator, frames, context)
    assert len([r for r in emulator.requests if r.max_tokens == 1]) == 1  # turn 0's only
    assert prefill.turns[-1].skipped == {"silence": 1}


async def test_session_ending_with_a_prefill_in_flight_cancels_it():
    async with OpenAIEmulator(SLOW_PREFILL) as emulator:
        context = LLMContext()
        prefill, _, _ = await run(emulator, [stable("I would like"), SleepFrame(0.5)], context)
        await asyncio.sleep(0.05)
    assert len(emulator.requests) == 1
    leftovers = [t for t in asyncio.all_tasks() if "prefill" in t.get_name() and not t.done()]
    assert leftovers == []


async def test_provider_errors_are_logged_backed_off_and_never_reach_the_pipeline():
    async with OpenAIEmulator(FAST) as emulator:
        emulator.fail_next(429)  # prefills do not retry: one failed prefill
        context = LLMContext()
        frames = [stable("I would"), SleepFrame(2.0), stable("I would like to"), SleepFrame(0.1)]
        prefill, down, up = await run(
            emulator, frames + real_turn(context), context, config=PrefillConfig(backoff_s=30.0)
        )
    assert not [f for f in up + down if isinstance(f, ErrorFrame)]
    assert prefill.turns[-1].prefill_failures == 1  # the closed turn's account
    # Backing off: the second stable update sent nothing; the real request still ran.
    assert [r.max_tokens for r in emulator.requests if r.status == 200] == [None]
    assert "".join(f.text for f in down if isinstance(f, LLMTextFrame))


async def test_below_the_provider_minimum_no_prefill_is_sent():
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext()
        llm = OpenAILLMService(api_key="k", base_url=emulator.base_url)  # tiny prompt
        prefill = SpeculativePrefill(
            backend=OpenAIPrefill(llm, min_prompt_tokens=1024), context=context
        )
        await run_test(Pipeline([prefill, llm]), frames_to_send=[stable("I would like to book")])
    assert emulator.requests == []
    assert prefill._prefill_warned_minimum


async def test_interruption_mid_prefill_passes_and_frames_are_unchanged():
    async with OpenAIEmulator(SLOW_PREFILL) as emulator:
        context = LLMContext()
        sent = [stable("I would like"), InterruptionFrame(), SleepFrame(0.1)]
        prefill, down, _ = await run(emulator, sent, context)
    passed = [f for f in down if not type(f).__name__.endswith("MetadataFrame")]
    # Both frames pass, unchanged. (The LLM's queue runs the interruption, a system frame,
    # ahead of the stable frame, an uninterruptible data frame: that order is Pipecat's.)
    assert sorted(passed, key=lambda f: type(f).__name__) == [sent[1], sent[0]]
    assert len(emulator.requests) == 1


async def test_prefill_never_touches_the_real_context():
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext(messages=[{"role": "assistant", "content": "Hi, how can I help?"}])
        await run(emulator, [stable("I want to cancel"), SleepFrame(0.2)], context)
    assert context.get_messages() == [{"role": "assistant", "content": "Hi, how can I help?"}]
    assert len(emulator.requests) == 1


def test_backend_rejects_a_non_openai_service():
    with pytest.raises(TypeError):
        OpenAIPrefill(object())


class BrokenBackend:
    """A backend whose sizing fails: the lever must fail open."""

    min_prompt_tokens = 1024

    async def estimate_tokens(self, context, user_text):
        raise RuntimeError("tokenizer exploded")

    async def prefill(self, context, user_text):
        raise AssertionError("must not be called")


async def test_a_failing_size_estimate_skips_the_prefill_and_passes_every_frame():
    context = LLMContext()
    prefill = SpeculativePrefill(backend=BrokenBackend(), context=context, enable_direct_mode=True)
    sent = [stable("I would like to book"), InterruptionFrame()]
    down, up = await run_test(prefill, frames_to_send=sent)
    assert [type(f).__name__ for f in down] == ["StableTranscriptFrame", "InterruptionFrame"]
    assert not [f for f in up if isinstance(f, ErrorFrame)]
