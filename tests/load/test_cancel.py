"""A speculative prefill stops when it would cost someone else (the engine-load cancel rules).

Real ``SpeculativePrefill`` processors against the OpenAI emulator; the emulator as one shared
engine (its capacity model) stops computing a request whose client left, as llama.cpp's server
and vLLM do, so a cancelled prefill gives its compute back.
"""

import asyncio
from dataclasses import replace

import aiohttp
from pipecat.frames.frames import (
    LLMContextFrame,
    UserStoppedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.tests.utils import run_test

from pipecat_fast.load import EngineLoad
from pipecat_fast.prefill import SpeculativePrefill
from pipecat_fast.prefill.core import ProviderSpeed
from pipecat_fast.stabilizer.frames import StableTranscriptFrame
from pipecat_fast.testing.capacity import EngineCapacity
from pipecat_fast.testing.openai_server import OpenAIEmulator
from pipecat_fast.testing.profiles import LatencyProfile
from pipecat_fast.ttfa import TTFAAnnotationFrame
from tests.pacing import Pacer, Until, paced

FAST = LatencyProfile("test", 0, 0, 100, 0, 0.0, 0, 10_000, 0)
SLOW_PREFILL = LatencyProfile("slow", 0, 0, 100, 0, 0.5, 0, 10_000, 0)  # 0.5 ms/token
SYSTEM = "You are the front desk of a dental clinic. Keep every answer short. " * 150  # ~2k


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


def real_turn(context, text="I would like to book a cleaning."):
    final = LLMContext(messages=[*context.get_messages(), {"role": "user", "content": text}])
    return [
        VADUserStoppedSpeakingFrame(stop_secs=0.2),
        UserStoppedSpeakingFrame(),
        LLMContextFrame(final),
    ]


def annotations(frames):
    return [f.fields for f in frames if isinstance(f, TTFAAnnotationFrame)]


async def run(prefill, llm, *items):
    pacer = Pacer(prefill)
    down, _ = await run_test(Pipeline([pacer, prefill, llm]), frames_to_send=paced(*items))
    assert pacer.timed_out == []
    return down


async def test_the_prefill_is_cancelled_when_its_real_request_leaves_on_a_slotted_engine():
    # llama.cpp's server (the registry: a request does not read another slot's unfinished
    # prefill) computes the prompt again for the real request: the prefill only slows it.
    async with OpenAIEmulator(SLOW_PREFILL) as emulator:  # the prefill takes ~1 s
        context = LLMContext()
        llm = llm_for(emulator)
        prefill = SpeculativePrefill(
            llm, context=context, provider="llama.cpp", speed=ProviderSpeed()
        )
        sent = Until(lambda: len(emulator.requests) == 1, what="the prefill reached the engine")
        down = await run(prefill, llm, stable("I would like"), sent, *real_turn(context))
    assert prefill.turns[-1].cancelled == {"dispatched": 1}
    assert prefill.turns[-1].prefill_cancelled == 1
    # The turn's report (sent again after the cancel) counts it by reason.
    assert annotations(down)[-1]["prefill_cancelled_dispatched"] == 1


async def test_where_the_engine_is_unknown_the_prefill_keeps_running_beside_its_real_request():
    async with OpenAIEmulator(SLOW_PREFILL) as emulator:
        context = LLMContext()
        llm = llm_for(emulator)
        prefill = SpeculativePrefill(llm, context=context, speed=ProviderSpeed())
        sent = Until(lambda: len(emulator.requests) == 1, what="the prefill reached the engine")
        done = Until(lambda: not prefill.in_flight, what="the prefill finished")
        await run(prefill, llm, stable("I would like"), sent, *real_turn(context), done)
    assert prefill.turns[-1].cancelled == {}
    assert prefill.turns[-1].prefills == 1 and prefill.turns[-1].prefill_failures == 0


async def test_a_prefill_still_computing_is_cancelled_when_another_callers_turn_starts():
    # One shared engine, 2,000 prompt tokens/s for all its requests: the ~2k-token cold
    # prefill takes ~1 s alone; another caller's turn arriving meanwhile would share it.
    capacity = EngineCapacity(slots=4, prefill_tokens_per_s=2000.0)
    async with OpenAIEmulator(replace(FAST, name="shared"), capacity=capacity) as emulator:
        load = EngineLoad(emulator.base_url, interval_s=0.02)
        context = LLMContext()
        llm = llm_for(emulator)
        prefill = SpeculativePrefill(
            llm, context=context, load=load, provider="vllm", speed=ProviderSpeed()
        )
        other: list[asyncio.Task] = []

        def another_caller():
            body = {
                "model": "gpt-4.1-mini",
                "messages": [{"role": "user", "content": "another caller's turn " * 200}],
                "max_tokens": 4,
            }

            async def post():
                async with aiohttp.ClientSession() as http:
                    async with http.post(emulator.base_url + "/chat/completions", json=body) as r:
                        return r.status

            other.append(asyncio.create_task(post()))
            return True

        frames = [
            Until(lambda: load.reading is not None, what="the first load reading"),
            stable("I would like"),
            Until(lambda: len(emulator.requests) == 1, what="the prefill reached the engine"),
            Until(another_caller),
            Until(lambda: not prefill.in_flight, what="the prefill ended"),
        ]
        await run(prefill, llm, *frames)
        assert await other[0] == 200
    assert prefill.turns[-1].cancelled == {"contended": 1}
    assert load.summary()["prefills_cancelled"] == {"contended": 1}
    record = emulator.requests[0]
    # The engine stopped computing it: far less than the ~1 s it needed alone.
    assert record.cancelled and record.prefill_ms < 900
    assert not load.polling and load.speculative_in_flight == 0
