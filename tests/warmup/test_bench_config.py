"""The bench's `warmup` configuration: a session warmup while the phone rings, end to end."""

import asyncio

import pytest

from pipecat_fast.bench.configs import CONFIGS
from pipecat_fast.bench.material import bench_calls
from pipecat_fast.bench.pipeline import Endpoints, PipelineSpec
from pipecat_fast.bench.runner import CallResult, first_turn_summary, ring, run_call
from pipecat_fast.testing.profiles import SAME_REGION
from pipecat_fast.testing.stack import EmulatorStack
from pipecat_fast.ttfa import TurnRecord


def one_turn_call():
    return bench_calls(ids=["reschedule"])[0].only([0])  # an unpaused first utterance


async def test_ring_calls_the_hooks_then_waits_and_no_ring_costs_nothing():
    order = []

    async def later():
        order.append("awaited")

    spec = PipelineSpec.__new__(PipelineSpec)
    spec.ringing, spec.ring_s = [lambda: order.append("called"), later], 0.2
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await ring(spec)
    assert order == ["called", "awaited"] and loop.time() - t0 >= 0.2
    spec.ringing, spec.ring_s = [], 0.0
    t0 = loop.time()
    await ring(spec)
    assert loop.time() - t0 < 0.1


@pytest.mark.slow
async def test_the_warmup_config_warms_during_the_ring_and_the_first_turn_reads_it():
    call = one_turn_call()
    async with EmulatorStack(
        SAME_REGION, stt_scripts={call.id: call.stt_script}, replies=call.replies
    ) as stack:
        result = await run_call(call, CONFIGS["warmup"], Endpoints(**stack.urls()))
        records = list(stack.llm.requests)
    assert result.error is None and len(result.turns) == 1
    warmups, live = records[:2], records[2:]
    assert [r.max_tokens for r in warmups] == [8, 8] and live
    first = result.turns[0]
    assert first.cached_tokens > 3000  # the cold first turn read the ring-time warmup
    assert first.extra["warmup"] == "warm" and first.extra["warmup_prefix_matched"] is True
    assert first.extra["warmup_prompt_tokens"] == sum(r.prompt_tokens for r in warmups)
    assert first.cache_write_tokens in (None, 0)  # OpenAI before GPT-5.6 reports no writes
    summary = first_turn_summary([result], "warmup")["warmup"]
    assert summary["warmup_prompt_tokens"] == first.extra["warmup_prompt_tokens"]
    assert summary["live_cached_tokens"] == first.cached_tokens


def test_first_turn_summary_compares_first_turns_and_counts_their_warmup():
    def result(config, ttfas, warmup=0):
        turns = []
        for i, ms in enumerate(ttfas):
            t = TurnRecord(turn=i, user_stopped_at=0.0, marks={"first_audio_out": ms / 1000})
            t.prompt_tokens, t.cached_tokens = 1000, 900
            turns.append(t)
        turns[0].extra["warmup_prompt_tokens"] = warmup
        return CallResult(config=config, call="c", repeat=0, turns=turns)

    results = [result("stock", [3000, 500]), result("warmup", [900, 500], warmup=60_000)]
    out = first_turn_summary(results, "stock")
    assert out["stock"]["ttfa_p50_ms"] == 3000 and out["warmup"]["ttfa_p50_ms"] == 900
    assert out["warmup"]["p50"] == 0.3 and out["stock"]["p50"] == 1.0
    assert out["warmup"]["warmup_prompt_tokens"] == 60_000
    assert out["warmup"]["live_prompt_tokens"] == 2000
