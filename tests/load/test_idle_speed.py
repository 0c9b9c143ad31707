"""The prefill tags its timings with the engine's load, so the provider's speed is its idle one.

Real ``SpeculativePrefill`` processors with the load probe against the OpenAI emulator as one
shared engine (its capacity model: prompt compute shared by the requests running at once).
"""

import asyncio
from dataclasses import replace

import aiohttp
from pipecat.processors.aggregators.llm_context import LLMContext

from pipecat_fast.load import EngineLoad, YieldConfig
from pipecat_fast.prefill import SpeculativePrefill
from pipecat_fast.prefill.core import ProviderSpeed
from pipecat_fast.testing.capacity import EngineCapacity
from pipecat_fast.testing.openai_server import OpenAIEmulator
from tests.load.test_cancel import FAST, llm_for, run, stable
from tests.pacing import Until


def shared_engine():
    capacity = EngineCapacity(slots=4, prefill_tokens_per_s=4000.0)
    return OpenAIEmulator(replace(FAST, name="shared"), capacity=capacity)


def another_callers_turn(emulator, tasks):
    """Send another caller's real turn (~3.6k cold tokens, ~0.9 s alone) straight to the engine."""
    body = {
        "model": "gpt-4.1-mini",
        "messages": [{"role": "user", "content": "another caller's turn " * 800}],
        "max_tokens": 4,
    }

    async def post():
        async with aiohttp.ClientSession() as http:
            async with http.post(emulator.base_url + "/chat/completions", json=body) as r:
                return r.status

    tasks.append(asyncio.create_task(post()))
    return True


async def test_a_prefill_sent_to_an_idle_engine_measures_its_idle_speed():
    async with shared_engine() as emulator:
        load = EngineLoad(emulator.base_url, interval_s=0.02)
        speed = ProviderSpeed()
        context = LLMContext()
        llm = llm_for(emulator)
        prefill = SpeculativePrefill(llm, context=context, load=load, speed=speed)
        await run(
            prefill,
            llm,
            Until(lambda: load.reading is not None, what="the first load reading"),
            stable("I would like"),
            Until(lambda: len(emulator.requests) == 1, what="the prefill reached the engine"),
            Until(lambda: not prefill.in_flight, what="the prefill finished"),
        )
    assert prefill.turns[-1].prefills == 1 and prefill.turns[-1].prefill_failures == 0
    [(tokens, seconds)] = speed.idle_samples
    assert tokens > 1_500 and seconds > 0
    assert speed.samples == speed.idle_samples


async def test_a_prefill_that_shared_the_engine_with_another_callers_turn_is_no_idle_sample():
    async with shared_engine() as emulator:
        load = EngineLoad(emulator.base_url, interval_s=0.02)
        speed = ProviderSpeed()
        context = LLMContext()
        llm = llm_for(emulator)
        # Yielding off (the bench's greedy levers): the prefill goes although the engine is busy.
        prefill = SpeculativePrefill(
            llm, context=context, load=load, speed=speed, yield_config=YieldConfig(enabled=False)
        )
        other: list[asyncio.Task] = []

        def other_is_running():
            reading = load.reading
            return reading is not None and (reading.running or 0) >= 1

        await run(
            prefill,
            llm,
            Until(lambda: load.reading is not None, what="the first load reading"),
            Until(lambda: another_callers_turn(emulator, other)),
            Until(other_is_running, what="a reading with the other caller's turn running"),
            stable("I would like"),
            Until(lambda: len(emulator.requests) == 2, what="the prefill reached the engine"),
            Until(lambda: not prefill.in_flight, what="the prefill finished"),
        )
        assert await other[0] == 200
    assert prefill.turns[-1].prefills == 1 and prefill.turns[-1].prefill_failures == 0
    assert len(speed.samples) == 1  # measured, but not as the engine's idle speed
    assert speed.idle_samples == []
