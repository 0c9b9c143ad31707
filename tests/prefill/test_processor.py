"""SpeculativePrefill on fake frame streams, against the OpenAI emulator and the real service.

Frames reach the processor one at a time, in order (``tests.pacing``); waits are on conditions
(a prefill finished), never on the clock.
"""

import asyncio
import warnings

import pytest
from loguru import logger
from pipecat.frames.frames import (
    DataFrame,
    ErrorFrame,
    InterimTranscriptionFrame,
    InterruptionFrame,
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
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.tests.utils import run_test
from pipecat.turns.types import ProcessFrameResult
from pipecat.turns.user_start import VADUserTurnStartStrategy
from pipecat.turns.user_stop.base_user_turn_stop_strategy import BaseUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from pipecat_fast.prefill import OpenAIPrefill, PrefillConfig, SpeculativePrefill
from pipecat_fast.request_tokens import count_chat_tokens
from pipecat_fast.stabilizer import TwoUpdateStabilizer
from pipecat_fast.stabilizer.frames import StableTranscriptFrame
from pipecat_fast.testing.openai_server import OpenAIEmulator
from pipecat_fast.testing.profiles import LatencyProfile
from pipecat_fast.ttfa import TTFAAnnotationFrame
from tests.pacing import Pacer, Until, paced

FAST = LatencyProfile("test", 0, 0, 100, 0, 0.0, 0, 10_000, 0)
SLOW_PREFILL = LatencyProfile("slow", 0, 0, 100, 0, 0.5, 0, 10_000, 0)  # 0.5 ms/token
SYSTEM = "You are the front desk of a dental clinic. Keep every answer short. " * 150
FINAL = "I would like to book a cleaning for next Tuesday."


@pytest.fixture
def log_lines():
    lines = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="DEBUG")
    yield lines
    logger.remove(sink)


def llm_for(emulator, model="gpt-4.1-mini", system=SYSTEM):
    return OpenAILLMService(
        api_key="test-key",
        base_url=emulator.base_url,
        settings=OpenAILLMService.Settings(model=model, system_instruction=system),
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


def idle(prefill):
    return Until(lambda: not prefill.in_flight, what="the prefill finished")


async def run(prefill, llm, *items):
    pacer = Pacer(prefill)
    down, up = await run_test(Pipeline([pacer, prefill, llm]), frames_to_send=paced(*items))
    assert pacer.timed_out == []
    return down, up


async def test_prefill_warms_the_cache_for_the_real_request():
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext()
        llm = llm_for(emulator)
        prefill = SpeculativePrefill(llm, context=context)
        frames = [stable("I would"), idle(prefill), stable("I would like to book a cleaning")]
        down, _ = await run(prefill, llm, *frames, idle(prefill), *real_turn(context))
        prefills = [r for r in emulator.requests if r.max_tokens == 1]
        [real] = [r for r in emulator.requests if r.max_tokens != 1]
    # The first prefill carries the whole context; four more words stay inside the same
    # 128-token cache block, so a second prefill would add nothing OpenAI can cache.
    assert len(prefills) == 1
    assert prefill.turns[-1].skipped == {"no_new_block": 1}
    assert all(not r.stream for r in prefills)
    # The real request reads everything up to the caller's stable words from the cache.
    assert real.cached_tokens == prefills[-1].prompt_tokens // 128 * 128
    assert real.cached_tokens > 2000
    assert "".join(f.text for f in down if isinstance(f, LLMTextFrame))  # the real reply streamed
    [note] = [f for f in down if isinstance(f, TTFAAnnotationFrame)]
    assert note.fields["prefill_requests"] == 1


async def test_a_later_prefill_goes_when_the_new_words_fill_a_cache_block():
    long_turn = " ".join(["tuesday morning please"] * 60)  # ~180 tokens more
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext()
        llm = llm_for(emulator)
        prefill = SpeculativePrefill(llm, context=context)
        frames = [stable("I would"), idle(prefill), stable(f"I would {long_turn}"), idle(prefill)]
        await run(prefill, llm, *frames, *real_turn(context, f"I would {long_turn}"))
        first, second, real = emulator.requests
    assert second.prompt_tokens // 128 > first.prompt_tokens // 128
    assert second.cached_tokens == first.prompt_tokens // 128 * 128
    assert real.cached_tokens == second.prompt_tokens // 128 * 128


async def test_without_prefill_the_same_real_request_misses():
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext()
        llm = llm_for(emulator)
        await run_test(llm, frames_to_send=real_turn(context))
    assert [r.cached_tokens for r in emulator.requests] == [0]


async def test_the_estimate_is_the_providers_count_with_role_and_tool_framing():
    tools = [
        {
            "type": "function",
            "function": {
                "name": "book",
                "description": "Book a visit.",
                "parameters": {
                    "type": "object",
                    "properties": {"day": {"type": "string", "description": "Weekday."}},
                    "required": ["day"],
                },
            },
        }
    ]
    from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
    from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema

    schema = ToolsSchema(
        standard_tools=[
            FunctionSchema(
                name="book",
                description="Book a visit.",
                properties={"day": {"type": "string", "description": "Weekday."}},
                required=["day"],
            )
        ]
    )
    async with OpenAIEmulator(FAST) as emulator:
        history = [
            {"role": "assistant", "content": "Hello, dental clinic."},
            {"role": "user", "content": "Hi."},
            {"role": "assistant", "content": "How can I help?"},
        ]
        context = LLMContext(messages=history, tools=schema)
        llm = llm_for(emulator)
        backend = OpenAIPrefill(llm)
        estimate = await backend.estimate_tokens(context, "I want to book")
        await backend.prefill(context, "I want to book")
        [sent] = emulator.requests
    assert estimate == sent.prompt_tokens
    # The framing is most of what the old text-only estimate missed: 3 + role per message,
    # the reply priming, and the tool namespace rather than nothing.
    texts = [SYSTEM, *(m["content"] for m in history), "I want to book"]
    assert estimate > count_chat_tokens([{"role": "user", "content": t} for t in texts]) - 5 * 1
    assert estimate >= count_chat_tokens([], tools) + 5 * 4


async def test_a_context_system_message_is_sent_as_is_without_a_deprecation_from_here():
    async with OpenAIEmulator(FAST) as emulator:
        llm = llm_for(emulator, system=None)
        context = LLMContext(
            messages=[
                {"role": "system", "content": "You are terse."},
                {"role": "assistant", "content": "Hi."},
            ]
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mine = await OpenAIPrefill(llm).render(context, "hello")
        assert not [w for w in caught if issubclass(w.category, DeprecationWarning)]
        # Byte-identical to what the service renders for the same turn (its deprecated path).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = await llm.get_llm_adapter().get_llm_invocation_params(
                LLMContext(
                    messages=[*context.get_messages(), {"role": "user", "content": "hello"}]
                ),
                system_instruction=None,
                convert_developer_to_user=False,
            )
    assert mine["messages"] == theirs["messages"]
    assert mine["messages"][0] == {"role": "system", "content": "You are terse."}


async def test_a_context_system_message_beside_the_services_instruction_is_kept_second():
    async with OpenAIEmulator(FAST) as emulator:
        llm = llm_for(emulator, system="Be kind.")
        context = LLMContext(messages=[{"role": "system", "content": "You are terse."}])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mine = await OpenAIPrefill(llm).render(context, "hello")
        assert not [w for w in caught if issubclass(w.category, DeprecationWarning)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = await llm.get_llm_adapter().get_llm_invocation_params(
                LLMContext(
                    messages=[*context.get_messages(), {"role": "user", "content": "hello"}]
                ),
                system_instruction="Be kind.",
                convert_developer_to_user=False,
            )
    assert mine["messages"] == theirs["messages"]


async def test_never_two_in_flight():
    async with OpenAIEmulator(SLOW_PREFILL) as emulator:  # each prefill takes ~2 s
        context = LLMContext()
        llm = llm_for(emulator)
        prefill = SpeculativePrefill(llm, context=context, config=PrefillConfig(min_new_words=2))
        sent = Until(lambda: len(emulator.requests) == 1, what="the first prefill was sent")
        frames = [stable("one two"), sent, stable("one two three four"), stable("one two six")]
        await run(prefill, llm, *frames)
    assert len(emulator.requests) == 1
    assert prefill.turns[-1].skipped == {"in_flight": 2}
    leftovers = [t for t in asyncio.all_tasks() if "prefill" in t.get_name() and not t.done()]
    assert leftovers == []  # cancelled at the end of the session, not leaked


async def test_no_new_prefill_once_the_caller_is_silent():
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext()
        llm = llm_for(emulator)
        prefill = SpeculativePrefill(llm, context=context)
        frames = [stable("one two"), idle(prefill), VADUserStoppedSpeakingFrame(stop_secs=0.2)]
        await run(prefill, llm, *frames, stable("one two three four five six"))
    assert len(emulator.requests) == 1
    assert prefill.turns[-1].skipped == {"silence": 1}


async def test_a_short_next_turn_stable_only_after_the_vad_stop_sends_no_prefill():
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext()
        llm = llm_for(emulator)
        prefill = SpeculativePrefill(llm, context=context)
        frames = [VADUserStartedSpeakingFrame(), stable("hello there", turn=0), idle(prefill)]
        frames += [VADUserStoppedSpeakingFrame(stop_secs=0.2), UserStoppedSpeakingFrame()]
        # Turn 1 is a short "Yes": the stabiliser passes it on only with the final.
        frames += [VADUserStartedSpeakingFrame(), VADUserStoppedSpeakingFrame(stop_secs=0.2)]
        frames += [stable("Yes", turn=1)]
        await run(prefill, llm, *frames)
    assert len([r for r in emulator.requests if r.max_tokens == 1]) == 1  # turn 0's only
    assert prefill.turns[-1].skipped == {"silence": 1}


async def test_session_ending_with_a_prefill_in_flight_cancels_it():
    async with OpenAIEmulator(SLOW_PREFILL) as emulator:
        context = LLMContext()
        llm = llm_for(emulator)
        prefill = SpeculativePrefill(llm, context=context)
        sent = Until(lambda: len(emulator.requests) == 1, what="the prefill reached the server")
        await run(prefill, llm, stable("I would like"), sent)
        assert prefill.in_flight is False
    leftovers = [t for t in asyncio.all_tasks() if "prefill" in t.get_name() and not t.done()]
    assert leftovers == []


async def test_provider_errors_are_logged_backed_off_and_never_reach_the_pipeline(log_lines):
    async with OpenAIEmulator(FAST) as emulator:
        emulator.fail_next(429)  # prefills do not retry: one failed prefill
        context = LLMContext()
        llm = llm_for(emulator)
        prefill = SpeculativePrefill(llm, context=context, config=PrefillConfig(backoff_s=30.0))
        frames = [stable("I would"), idle(prefill), stable("I would like to book a")]
        down, up = await run(prefill, llm, *frames, *real_turn(context))
    assert not [f for f in up + down if isinstance(f, ErrorFrame)]
    [turn] = prefill.turns
    assert turn.prefill_failures == 1
    # Backing off: the second stable update (4 new words, enough to go) sent nothing...
    assert turn.skipped == {"backing_off": 1}
    # ...and the real request still ran.
    assert [r.max_tokens for r in emulator.requests] == [None]
    assert "".join(f.text for f in down if isinstance(f, LLMTextFrame))
    assert len([m for m in log_lines if "speculative prefill failed" in m]) == 1


async def test_a_provider_down_for_a_whole_call_logs_a_handful_of_lines_and_a_count(log_lines):
    async with OpenAIEmulator(FAST) as emulator:
        emulator.fail_next(500, count=40)
        context = LLMContext()
        llm = llm_for(emulator)
        config = PrefillConfig(min_new_words=1, backoff_s=0.0, max_backoff_s=0.0)
        prefill = SpeculativePrefill(llm, context=context, config=config)
        words = "one two three four five six seven eight nine ten eleven twelve".split()
        frames = []
        for n in range(1, len(words) + 1):
            frames += [stable(" ".join(words[:n])), idle(prefill)]
        await run(prefill, llm, *frames)
    assert prefill.turns[-1].prefill_failures == 12
    failures = [m for m in log_lines if "speculative prefill failed" in m]
    assert 1 <= len(failures) <= 4  # 3 per second, and a summary at the end of the session
    assert any("more like this were not logged" in m for m in failures)


async def test_below_the_provider_minimum_no_prefill_is_sent_and_the_fix_is_named(log_lines):
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext()
        llm = llm_for(emulator, system="Be brief.")  # gpt-*: OpenAI's 1,024-token minimum
        prefill = SpeculativePrefill(llm, context=context)
        await run(
            prefill, llm, stable("I would like to book"), stable("I would like to book a b c d")
        )
    assert emulator.requests == []
    assert prefill.turns[-1].skipped == {"below_minimum": 2}
    [warning] = [m for m in log_lines if "minimum cacheable prefix" in m]
    assert "openai's minimum cacheable prefix (1024 tokens)" in warning
    assert "PrefillConfig(min_prompt_tokens=N)" in warning


async def test_a_prompt_too_small_to_cache_is_reported_at_start_up(log_lines):
    async with OpenAIEmulator(FAST) as emulator:
        llm = llm_for(emulator, system="Be brief.")
        prefill = SpeculativePrefill(llm, context=LLMContext())
        started = Until(lambda: any("minimum cacheable" in m for m in log_lines), what="warned")
        await run(prefill, llm, started)  # no caller turn at all
    [warning] = [m for m in log_lines if "minimum cacheable prefix" in m]
    # "Be brief." (3 tokens) + an empty user message, each with 3 + 1 framing, + 3 to prime.
    assert "is ~14 tokens, below openai's minimum cacheable prefix (1024 tokens)" in warning


async def test_an_unknown_provider_that_caches_nothing_gets_a_warning_and_no_more(log_lines):
    """The trial: five prefills of ~350 tokens, none cached, no word. Now two, then a warning."""
    async with OpenAIEmulator(FAST) as emulator:  # caches from 1,024 tokens only
        context = LLMContext()
        llm = llm_for(emulator, model="qwen2.5-7b-instruct", system="Be brief. " * 100)
        prefill = SpeculativePrefill(llm, context=context, config=PrefillConfig(min_new_words=1))
        assert prefill.config.min_prompt_tokens == 0  # nothing identified the provider
        words = "one two three four five six".split()
        frames = []
        for n in range(1, len(words) + 1):
            frames += [stable(" ".join(words[:n])), idle(prefill)]
        await run(prefill, llm, *frames)
    assert len(emulator.requests) == 3  # a cold one, two repeats that read nothing, then stop
    assert all(r.cached_tokens == 0 for r in emulator.requests)
    assert prefill.turns[-1].skipped == {"not_caching": 3}
    [warning] = [m for m in log_lines if "cached nothing" in m]
    assert "PrefillConfig(min_prompt_tokens=N)" in warning
    assert any("name no provider the registry knows" in m for m in log_lines)


async def test_interruption_mid_prefill_passes_and_frames_are_unchanged():
    async with OpenAIEmulator(SLOW_PREFILL) as emulator:
        context = LLMContext()
        llm = llm_for(emulator)
        prefill = SpeculativePrefill(llm, context=context)
        sent = Until(lambda: len(emulator.requests) == 1, what="the prefill reached the server")
        frames = [stable("I would like"), sent, InterruptionFrame()]
        down, _ = await run(prefill, llm, *frames)
    passed = [f for f in down if not type(f).__name__.endswith("MetadataFrame")]
    # Both frames pass, unchanged. (The LLM's queue runs the interruption, a system frame,
    # ahead of the stable frame, an uninterruptible data frame: that order is Pipecat's.)
    assert sorted(passed, key=lambda f: type(f).__name__) == [frames[2], frames[0]]
    assert len(emulator.requests) == 1


async def test_prefill_never_touches_the_real_context():
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext(messages=[{"role": "assistant", "content": "Hi, how can I help?"}])
        llm = llm_for(emulator)
        prefill = SpeculativePrefill(llm, context=context)
        await run(prefill, llm, stable("I want to cancel"), idle(prefill))
    assert context.get_messages() == [{"role": "assistant", "content": "Hi, how can I help?"}]
    assert len(emulator.requests) == 1


def test_backend_rejects_a_non_openai_service():
    with pytest.raises(TypeError, match="not an OpenAI-compatible Pipecat LLM service"):
        OpenAIPrefill(object())


def test_a_message_list_for_context_is_a_type_error_naming_the_fix():
    llm = OpenAILLMService(api_key="k", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(TypeError, match=r"got list; wrap a message list as LLMContext\(messages"):
        SpeculativePrefill(llm, context=[{"role": "user", "content": "hi"}])


def test_a_tts_service_for_llm_is_a_type_error():
    from pipecat.services.cartesia.tts import CartesiaTTSService

    tts = CartesiaTTSService(api_key="k", settings=CartesiaTTSService.Settings(voice="v"))
    with pytest.raises(TypeError, match="must be the pipeline's LLM service, got CartesiaTTS"):
        SpeculativePrefill(tts, context=LLMContext())


def test_the_providers_minimum_and_block_fill_in_what_the_config_leaves_open():
    llm = OpenAILLMService(
        api_key="k", base_url="http://127.0.0.1:9/v1", settings=OpenAILLMService.Settings(model="m")
    )
    vllm = SpeculativePrefill(llm, context=LLMContext(), provider="vllm")
    assert (vllm.config.min_prompt_tokens, vllm.config.block_tokens) == (0, 16)
    mine = SpeculativePrefill(
        llm,
        context=LLMContext(),
        provider="vllm",
        config=PrefillConfig(min_new_words=2, block_tokens=32, min_prompt_tokens=64),
    )
    assert (mine.config.min_prompt_tokens, mine.config.block_tokens) == (64, 32)
    assert mine.config.min_new_words == 2


class BrokenBackend:
    """A backend whose sizing fails: the lever must fail open."""

    min_prompt_tokens = 1024
    block_tokens = 1
    provider = "openai"

    async def estimate_tokens(self, context, user_text):
        raise RuntimeError("tokenizer exploded")

    async def prefill(self, context, user_text):
        raise AssertionError("must not be called")


async def test_a_failing_size_estimate_skips_the_prefill_and_passes_every_frame():
    context = LLMContext()
    prefill = SpeculativePrefill(backend=BrokenBackend(), context=context)
    sent = [stable("I would like to book"), InterruptionFrame()]
    pacer = Pacer(prefill)
    down, up = await run_test(Pipeline([pacer, prefill]), frames_to_send=paced(*sent))
    assert pacer.timed_out == []
    assert sorted(down, key=lambda f: type(f).__name__) == [sent[1], sent[0]]
    assert not [f for f in up if isinstance(f, ErrorFrame)]


class _EndOfTurn(DataFrame):
    """The test's verdict that the turn is over."""


class _ConfirmOnEndOfTurn(BaseUserTurnStopStrategy):
    async def process_frame(self, frame):
        if isinstance(frame, _EndOfTurn):
            await self.trigger_user_turn_stopped()
        return ProcessFrameResult.CONTINUE


def spoken_turn(words):
    interims = [" ".join(words[:n]) for n in range(1, len(words))]
    return [
        VADUserStartedSpeakingFrame(start_secs=0.2),
        *(InterimTranscriptionFrame(t, "caller", "t") for t in interims),
        TranscriptionFrame(" ".join(words), "caller", "t"),
        VADUserStoppedSpeakingFrame(stop_secs=0.2),
        _EndOfTurn(),
    ]


@pytest.mark.parametrize("stabiliser_after_aggregator", [False, True])
async def test_without_a_stabiliser_before_the_aggregator_it_says_so_once(
    log_lines, stabiliser_after_aggregator
):
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext()
        llm = llm_for(emulator)
        strategies = UserTurnStrategies(
            start=[VADUserTurnStartStrategy()], stop=[_ConfirmOnEndOfTurn()]
        )
        pair = LLMContextAggregatorPair(
            context, user_params=LLMUserAggregatorParams(user_turn_strategies=strategies)
        )
        prefill = SpeculativePrefill(llm, context=context)
        # The trial's two mistakes: no stabiliser, or one after pair.user() (which consumes
        # the transcripts, so the stabiliser sees none).
        middle = [TwoUpdateStabilizer()] if stabiliser_after_aggregator else []
        pacer = Pacer(pair.user())
        pipeline = Pipeline([pacer, pair.user(), *middle, prefill, llm])
        turn = "I would like to book a cleaning please".split()
        frames = paced(*spoken_turn(turn), *spoken_turn(["yes", "that", "works", "fine"]))
        await run_test(pipeline, frames_to_send=frames)
        assert pacer.timed_out == []
    # No prefill of the caller's words: only the turn's cold prefix, at speech start.
    prefills = [r for r in emulator.requests if r.max_tokens == 1]
    assert len(prefills) == sum(t.prefix_prefills for t in prefill.turns) <= 1
    [warning] = [m for m in log_lines if "no StableTranscriptFrame" in m]
    assert "the caller spoke a 8-word turn" in warning
    assert "Put TwoUpdateStabilizer() between the STT and the user aggregator" in warning


async def test_a_turn_a_held_draft_answered_still_gets_the_no_stabiliser_warning(log_lines):
    """With draft-and-hold no LLMContextFrame follows the confirmed turn (the draft answered
    it), so the check runs when the caller speaks again, with the reply already in the context:
    it must read the caller's last user message, not the context's last message."""
    context = LLMContext(
        messages=[
            {"role": "user", "content": "I would like to book a cleaning please"},
            {"role": "assistant", "content": "Sure, which day suits you?"},
        ]
    )
    prefill = SpeculativePrefill(backend=BrokenBackend(), context=context)
    frames = paced(
        UserStoppedSpeakingFrame(),  # the turn confirmed; the held draft is the reply
        VADUserStartedSpeakingFrame(start_secs=0.2),  # the caller speaks again
    )
    pacer = Pacer(prefill)
    await run_test(Pipeline([pacer, prefill]), frames_to_send=frames)
    assert pacer.timed_out == []
    [warning] = [m for m in log_lines if "no StableTranscriptFrame" in m]
    assert "the caller spoke a 8-word turn" in warning


async def test_a_call_ending_on_a_turn_a_held_draft_answered_gets_the_warning(log_lines):
    context = LLMContext(
        messages=[
            {"role": "user", "content": "I would like to book a cleaning please"},
            {"role": "assistant", "content": "Sure, which day suits you?"},
        ]
    )
    prefill = SpeculativePrefill(backend=BrokenBackend(), context=context)
    pacer = Pacer(prefill)
    await run_test(Pipeline([pacer, prefill]), frames_to_send=paced(UserStoppedSpeakingFrame()))
    assert pacer.timed_out == []
    [warning] = [m for m in log_lines if "no StableTranscriptFrame" in m]
    assert "the caller spoke a 8-word turn" in warning


async def test_with_the_stabiliser_in_place_no_such_warning(log_lines):
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext()
        llm = llm_for(emulator)
        strategies = UserTurnStrategies(
            start=[VADUserTurnStartStrategy()], stop=[_ConfirmOnEndOfTurn()]
        )
        pair = LLMContextAggregatorPair(
            context, user_params=LLMUserAggregatorParams(user_turn_strategies=strategies)
        )
        prefill = SpeculativePrefill(llm, context=context)
        pacer = Pacer(pair.user())
        pipeline = Pipeline([pacer, TwoUpdateStabilizer(), pair.user(), prefill, llm])
        frames = paced(*spoken_turn("I would like to book a cleaning please".split()))
        await run_test(pipeline, frames_to_send=frames)
        assert pacer.timed_out == []
    assert [r for r in emulator.requests if r.max_tokens == 1]  # it prefilled
    assert not [m for m in log_lines if "no StableTranscriptFrame" in m]


# -- the cold prefix at speech start ---------------------------------------------------------


def sent(emulator, n, what="the prefix prefill reached the server"):
    return Until(lambda: len([r for r in emulator.requests if r.max_tokens == 1]) >= n, what=what)


async def test_the_cold_prefix_goes_when_the_caller_starts_speaking_before_any_word():
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext()
        llm = llm_for(emulator)
        prefill = SpeculativePrefill(llm, context=context)
        frames = [VADUserStartedSpeakingFrame(), sent(emulator, 1), idle(prefill)]
        frames += [stable("I would like to book a cleaning"), idle(prefill)]
        down, _ = await run(prefill, llm, *frames, *real_turn(context))
        [prefix, *_] = [r for r in emulator.requests if r.max_tokens == 1]
        [real] = [r for r in emulator.requests if r.max_tokens != 1]
    # Sent on the VAD's start alone, before any stable word, carrying the whole cold context.
    assert prefix.prompt_tokens > 2000 and prefix.cached_tokens == 0
    assert real.cached_tokens >= prefix.prompt_tokens // 128 * 128 - 128
    [note] = [f for f in down if isinstance(f, TTFAAnnotationFrame)]
    assert note.fields["prefill_prefix_requests"] == 1
    assert note.fields["prefill_decisions"][0]["words"] == 0


class _Warmup:
    def __init__(self, running, committed):
        self.running = running
        self.report = type("Report", (), {"prefix_committed": committed})()


@pytest.mark.parametrize(("running", "committed"), [(True, False), (False, True)])
async def test_no_prefix_at_speech_start_while_a_warmup_runs_or_once_it_committed(
    running, committed
):
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext()
        llm = llm_for(emulator)
        warmup = _Warmup(running, committed)
        prefill = SpeculativePrefill(llm, context=context, warmup=warmup)
        await run(prefill, llm, VADUserStartedSpeakingFrame(), idle(prefill))
    assert [r for r in emulator.requests if r.max_tokens == 1] == []


async def test_a_caller_who_never_says_a_word_costs_one_prefix_counted_as_unused():
    async with OpenAIEmulator(FAST) as emulator:
        context = LLMContext()
        llm = llm_for(emulator)
        prefill = SpeculativePrefill(llm, context=context)
        frames = [VADUserStartedSpeakingFrame(), sent(emulator, 1), idle(prefill)]
        await run(prefill, llm, *frames, VADUserStoppedSpeakingFrame(stop_secs=0.2))
    assert len(emulator.requests) == 1
    [turn] = prefill.turns
    assert turn.prefix_wasted == {"unused": 1}


async def test_a_context_reset_after_the_prefix_counts_it_wasted_and_resends_the_prompt():
    async with OpenAIEmulator(FAST) as emulator:
        history = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
        context = LLMContext(messages=history)
        llm = llm_for(emulator)
        prefill = SpeculativePrefill(llm, context=context)
        frames = [VADUserStartedSpeakingFrame(), sent(emulator, 1), idle(prefill)]
        reset = Until(
            lambda: context.set_messages([{"role": "user", "content": "x " * 400}]) or True,
            what="the context was reset",
        )
        frames += [reset, stable("I would like to book a cleaning"), idle(prefill)]
        await run(prefill, llm, *frames)
    [turn] = prefill.turns
    assert turn.prefix_wasted == {"changed": 1}
    # The words' prefill is judged with the new context cold (nothing known cached).
    assert turn.decisions[-1].outcome == "sent"
    assert turn.decisions[-1].work_tokens > 2000
