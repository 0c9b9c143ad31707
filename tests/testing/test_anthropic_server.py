"""The Anthropic emulator, driven by Pipecat's real AnthropicLLMService."""

import json

import aiohttp
import pytest
from anthropic import AsyncAnthropic
from pipecat.frames.frames import LLMContextFrame, LLMTextFrame, MetricsFrame
from pipecat.metrics.metrics import LLMUsageMetricsData
from pipecat.pipeline.worker import PipelineParams
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.anthropic.llm import AnthropicLLMService
from pipecat.tests.utils import run_test

from pipecat_fast.testing.anthropic_server import AnthropicEmulator, render_blocks
from pipecat_fast.testing.profiles import LatencyProfile
from tests.testing.http_helpers import post_raw

FAST = LatencyProfile("test", 0, 0, 100, 0, 0.0, 0, 10_000, 0)
SYSTEM = "You are the front desk of a dental clinic. Keep answers short. " * 150
REPLY = "Sure. Dr. Patel can see you Tuesday at 9:30. Shall I book it?"
USER = [{"role": "user", "content": "x"}]


def service(emulator, caching=True):
    return AnthropicLLMService(
        api_key="test-key",
        client=AsyncAnthropic(api_key="test-key", base_url=emulator.base_url),
        settings=AnthropicLLMService.Settings(
            model="claude-sonnet-4-5", system_instruction=SYSTEM, enable_prompt_caching=caching
        ),
    )


async def complete(emulator, messages, caching=True):
    down, _ = await run_test(
        service(emulator, caching),
        frames_to_send=[LLMContextFrame(LLMContext(messages=messages))],
        pipeline_params=PipelineParams(enable_metrics=True, enable_usage_metrics=True),
    )
    text = "".join(f.text for f in down if isinstance(f, LLMTextFrame))
    [usage] = [
        d.value
        for f in down
        if isinstance(f, MetricsFrame)
        for d in f.data
        if isinstance(d, LLMUsageMetricsData)
    ]
    return text, usage


async def test_cache_control_breakpoints_write_then_read_on_the_next_turn():
    async with AnthropicEmulator(FAST, replies=[("book a cleaning", REPLY)]) as emulator:
        turn1 = [{"role": "user", "content": "Book a cleaning."}]
        text, usage1 = await complete(emulator, turn1)
        assert text == REPLY
        assert usage1.cache_read_input_tokens == 0
        assert usage1.cache_creation_input_tokens > 1000  # system + first user message written
        turn2 = turn1 + [
            {"role": "assistant", "content": REPLY},
            {"role": "user", "content": "Yes please."},
        ]
        _, usage2 = await complete(emulator, turn2)
        # Pipecat marks the last two user messages: the earlier one is where turn 1 wrote.
        assert usage2.cache_read_input_tokens == usage1.cache_creation_input_tokens
        assert usage2.cache_creation_input_tokens > 0


async def test_without_cache_control_nothing_is_cached():
    async with AnthropicEmulator(FAST) as emulator:
        messages = [{"role": "user", "content": "hi"}]
        _, first = await complete(emulator, messages, caching=False)
        _, second = await complete(emulator, messages, caching=False)
    assert (first.cache_read_input_tokens or 0) == (second.cache_read_input_tokens or 0) == 0


async def test_below_the_model_minimum_no_cache_is_written():
    async with AnthropicEmulator(FAST, min_cache_tokens=4096) as emulator:
        messages = [{"role": "user", "content": "hi"}]
        _, usage = await complete(emulator, messages)
        _, again = await complete(emulator, messages)
    assert (usage.cache_creation_input_tokens or 0) == 0
    assert (again.cache_read_input_tokens or 0) == 0


def test_partial_user_text_as_its_own_block_is_its_own_breakpoint():
    body = {
        "model": "m",
        "max_tokens": 1,
        "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "i would like", "cache_control": {"type": "ephemeral"}}
                ],
            }
        ],
    }
    blocks = render_blocks(body)
    assert [b.breakpoint for b in blocks] == [True, True]


@pytest.mark.parametrize(
    "body",
    [
        {"model": "m", "messages": [{"role": "user", "content": "x"}]},  # no max_tokens
        {"model": "m", "max_tokens": 5, "messages": []},
        {"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]},
        {"model": "m", "max_tokens": True, "messages": USER},
        {"model": "m", "max_tokens": 5, "messages": USER, "tools": [5]},
        {"model": "m", "max_tokens": 5, "messages": USER, "system": [5]},
        {"model": "m", "max_tokens": 5, "messages": USER, "stream": "y"},
    ],
)
async def test_malformed_requests_get_anthropic_error_shape(body):
    async with AnthropicEmulator(FAST) as emulator:
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{emulator.base_url}/v1/messages", json=body) as r:
                assert r.status == 400
                data = await r.json()
    assert data["type"] == "error" and data["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    "data",
    [
        b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "\xff"}]}',
        b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], '
        b'"tools": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}",
        b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "a\\udc00"}]}',
    ],
    ids=["invalid-utf8", "deep-nesting", "lone-surrogate"],
)
async def test_unparsable_bodies_get_a_400_up_front_and_are_not_recorded(data):
    slow = LatencyProfile("slow", 0, 0, 100, 0, 0.0, 2_000, 10_000, 0)  # 2 s to first token
    async with AnthropicEmulator(slow) as emulator:
        status, body = await post_raw(f"{emulator.base_url}/v1/messages", data)
        assert emulator.requests == []
    assert status == 400
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"


async def test_a_body_over_the_size_limit_gets_request_too_large():
    assert AnthropicEmulator.max_body_bytes == 32 * 1024 * 1024  # the documented 32 MB
    emulator = AnthropicEmulator(FAST)
    emulator.max_body_bytes = 4096
    async with emulator:
        big = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x" * 5000}]}
        status, body = await post_raw(f"{emulator.base_url}/v1/messages", json.dumps(big))
    assert status == 413
    assert body == {
        "type": "error",
        "error": {"type": "request_too_large", "message": body["error"]["message"]},
    }


async def test_a_prompt_over_the_context_window_is_too_long():
    async with AnthropicEmulator(FAST, context_window=100) as emulator:
        long = {"model": "m", "max_tokens": 5, "system": "word " * 500, "messages": USER}
        status, body = await post_raw(f"{emulator.base_url}/v1/messages", json.dumps(long))
        assert emulator.requests == []
    assert status == 400
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("prompt is too long:")
    assert body["error"]["message"].endswith("> 100 maximum")
