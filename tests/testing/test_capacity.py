import asyncio
import time
from dataclasses import replace

import aiohttp
import pytest

from pipecat_fast.load import EngineLoad, Reason
from pipecat_fast.testing.capacity import EngineCapacity, SharedPrefill, Slots
from pipecat_fast.testing.openai_server import OpenAIEmulator
from pipecat_fast.testing.profiles import SAME_REGION

FAST = replace(
    SAME_REGION,
    name="fast",
    rtt_ms=0.0,
    llm_queue_ms=0.0,
    llm_first_token_ms=0.0,
    llm_decode_tokens_per_s=200.0,
)


async def test_shared_prefill_is_processor_sharing():
    prefill = SharedPrefill(tokens_per_s=10_000.0)
    finished = []

    async def job(name, tokens, delay):
        await asyncio.sleep(delay)
        await prefill.compute(tokens)
        finished.append((name, time.monotonic()))

    start = time.monotonic()
    await asyncio.gather(job("long", 2000, 0.0), job("short", 100, 0.02))
    # Sharing: the short job, arriving second, finishes first (FIFO would finish it last);
    # the long one took its own tokens plus the short one's at the engine's rate.
    assert [name for name, _ in finished] == ["short", "long"]
    assert finished[1][1] - start >= 0.95 * 2100 / 10_000


async def test_slots_are_first_come_first_served_and_a_cancelled_waiter_leaves():
    slots = Slots(1)
    await slots.acquire()
    order = []

    async def waiter(name):
        await slots.acquire()
        order.append(name)
        slots.release()

    a = asyncio.create_task(waiter("a"))
    await asyncio.sleep(0)
    gone = asyncio.create_task(waiter("gone"))
    await asyncio.sleep(0)
    b = asyncio.create_task(waiter("b"))
    await asyncio.sleep(0)
    assert slots.waiting == 3
    gone.cancel()
    await asyncio.sleep(0)
    assert slots.waiting == 2
    slots.release()
    await asyncio.gather(a, b)
    assert order == ["a", "b"] and slots.running == 0


def test_bad_capacity_is_a_clear_error():
    with pytest.raises(ValueError, match="slots"):
        EngineCapacity(slots=0)
    with pytest.raises(ValueError, match="prefill"):
        EngineCapacity(prefill_tokens_per_s=0)


def body(text, max_tokens=20, stream=True):
    return {
        "model": "gpt-4.1-mini",
        "messages": [{"role": "user", "content": text}],
        "max_tokens": max_tokens,
        "stream": stream,
    }


async def test_more_callers_than_slots_queue_and_are_all_answered():
    capacity = EngineCapacity(slots=1, prefill_tokens_per_s=50_000.0)
    async with OpenAIEmulator(FAST, capacity=capacity) as llm:
        load = EngineLoad(llm.base_url, interval_s=0.01)
        seen_waiting = []
        await load.acquire()

        async def watch():
            while True:
                if load.reading is not None and load.reading.waiting:
                    seen_waiting.append(load.reading.waiting)
                await asyncio.sleep(0.005)

        watcher = asyncio.create_task(watch())
        async with aiohttp.ClientSession() as http:

            async def ask(i):
                async with http.post(
                    llm.base_url + "/chat/completions", json=body(f"caller {i} " * 50)
                ) as response:
                    assert response.status == 200
                    return await response.text()

            replies = await asyncio.gather(*(ask(i) for i in range(4)))
        watcher.cancel()
        await load.release()
    assert all("[DONE]" in r for r in replies)
    queued = sorted(r.queue_ms for r in llm.requests)
    assert queued[0] < 20 and queued[-1] > queued[1] > queued[0]  # each waited for the last
    assert max(seen_waiting) >= 1  # the probe saw them queue (vLLM's gauge names)
    assert load.reading.source == "vllm"
    assert load.verdict("draft").reason is not Reason.QUEUE  # nothing waits any more


async def test_a_request_whose_client_left_while_queued_never_runs():
    capacity = EngineCapacity(slots=1, prefill_tokens_per_s=50_000.0)
    # A slow decode keeps the slot held for about a second, far past the impatient
    # client's 50 ms: at FAST's 200 tokens/s the reply ended near that deadline and the
    # waiter sometimes got the slot just before it left (a race, not the behaviour).
    slow = replace(FAST, llm_decode_tokens_per_s=20.0)
    async with OpenAIEmulator(slow, capacity=capacity) as llm:
        async with aiohttp.ClientSession() as http:
            url = llm.base_url + "/chat/completions"
            long_reply = asyncio.create_task(
                http.post(url, json=body("hold the slot " * 20, max_tokens=60))
            )
            await asyncio.sleep(0.05)
            try:
                await asyncio.wait_for(http.post(url, json=body("impatient")), 0.05)
            except TimeoutError:
                pass
            response = await long_reply
            await response.read()
        await asyncio.sleep(0.1)
    impatient = [r for r in llm.requests if r.completion_tokens == 0]
    assert len(impatient) == 1 and impatient[0].cancelled


async def test_a_client_that_leaves_mid_prefill_stops_its_compute_through_the_metering_proxy():
    from pipecat_fast.testing.metering_proxy import MeteringProxy

    # 4,000 prompt tokens at 2,000 tokens/s: 2 s of prefill, alone on the engine.
    capacity = EngineCapacity(slots=2, prefill_tokens_per_s=2000.0)
    body = {
        "model": "gpt-4.1-mini",
        "messages": [{"role": "user", "content": "word " * 4000}],
        "max_tokens": 1,
    }
    async with OpenAIEmulator(FAST, capacity=capacity) as llm:
        async with MeteringProxy(llm.base_url.removesuffix("/v1")) as proxy:
            async with aiohttp.ClientSession() as http:

                async def post():
                    async with http.post(proxy.url + "/v1/chat/completions", json=body) as r:
                        return await r.read()

                request = asyncio.create_task(post())
                deadline = time.monotonic() + 5
                while not (llm.requests and llm.requests[0].uncached_tokens > 0):
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.3)
                request.cancel()  # the caller's side gives up (a cancelled prefill)
                with pytest.raises(asyncio.CancelledError):
                    await request
            while not llm.requests[0].cancelled:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)
            record = llm.requests[0]
            # The engine stopped computing it well before its 2 s and freed the slot.
            assert record.prefill_ms < 1200
            assert proxy.records[0].cancelled
            while llm._slots.running:  # the handler returns once it saw the client leave
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)
