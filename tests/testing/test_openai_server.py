"""The OpenAI-compatible emulator, driven by Pipecat's real OpenAILLMService."""

import json

import aiohttp
import pytest
from pipecat.frames.frames import ErrorFrame, LLMContextFrame, LLMTextFrame, MetricsFrame
from pipecat.metrics.metrics import LLMUsageMetricsData
from pipecat.pipeline.worker import PipelineParams
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.tests.utils import run_test

from pipecat_fast.testing.openai_server import OpenAIEmulator, stream_pieces
from pipecat_fast.testing.profiles import LatencyProfile
from pipecat_fast.tokens import count_tokens, encode, encode_within
from tests.testing.http_helpers import post_raw

# Zero-latency profile: tests assert behaviour, never timing.
FAST = LatencyProfile("test", 0, 0, 100, 0, 0.0, 0, 10_000, 0)
SYSTEM = "You are the front desk of a dental clinic. " * 200  # ~2,000 tokens
REPLY = "Of course. Dr. Patel has an opening at 9:30 on Tuesday. Shall I book it?"
USER = [{"role": "user", "content": "x"}]


def service(llm):
    return OpenAILLMService(
        api_key="test-key",
        base_url=llm.base_url,
        settings=OpenAILLMService.Settings(model="gpt-4.1-mini"),
    )


async def complete(llm, messages):
    down, up = await run_test(
        service(llm),
        frames_to_send=[LLMContextFrame(LLMContext(messages=messages))],
        pipeline_params=PipelineParams(enable_metrics=True, enable_usage_metrics=True),
    )
    text = "".join(f.text for f in down if isinstance(f, LLMTextFrame))
    usage = [
        d.value
        for f in down
        if isinstance(f, MetricsFrame)
        for d in f.data
        if isinstance(d, LLMUsageMetricsData)
    ]
    return text, usage, up


async def test_streams_the_scripted_reply_and_reports_cached_tokens_on_a_repeated_prefix():
    async with OpenAIEmulator(FAST, replies=[("Can I book a cleaning?", REPLY)]) as llm:
        turn1 = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "can I book a cleaning"},
        ]
        text, [usage], _ = await complete(llm, turn1)
        assert text == REPLY
        assert usage.cache_read_input_tokens == 0
        # OpenAI's count: 3 framing tokens + role + content per message, 3 to prime the reply.
        content = count_tokens(SYSTEM) + count_tokens("can I book a cleaning")
        assert usage.prompt_tokens == (3 + 1) * 2 + content + 3

        turn2 = turn1 + [
            {"role": "assistant", "content": REPLY},
            {"role": "user", "content": "Yes please."},
        ]
        _, [usage2], _ = await complete(llm, turn2)
        # Everything up to the end of turn 1's prompt is served from the cache, in 128s.
        assert usage2.cache_read_input_tokens == usage.prompt_tokens // 128 * 128
        assert [r.cached_tokens for r in llm.requests] == [0, usage2.cache_read_input_tokens]


async def test_prompt_cache_key_partitions_the_cache():
    async with OpenAIEmulator(FAST) as llm:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]
        async with aiohttp.ClientSession() as http:
            for key in ("call-1", "call-2", "call-1"):
                body = {"model": "m", "messages": messages, "prompt_cache_key": key}
                async with http.post(f"{llm.base_url}/chat/completions", json=body) as r:
                    assert (await r.json())["object"] == "chat.completion"
        assert [r.cached_tokens > 0 for r in llm.requests] == [False, False, True]


async def test_max_tokens_caps_the_reply_like_a_prefill_request():
    async with OpenAIEmulator(FAST, replies=[("hi", REPLY)]) as llm:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{llm.base_url}/chat/completions", json=body) as r:
                data = await r.json()
        assert data["choices"][0]["finish_reason"] == "length"
        assert data["usage"]["completion_tokens"] == 1
        assert data["choices"][0]["message"]["content"] == "Of"


@pytest.mark.parametrize(
    "body, param",
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
        (
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
            "max_tokens",
        ),
        ({"model": "m", "messages": USER, "max_tokens": True}, "max_tokens"),
        ({"model": "m", "messages": USER, "tools": [5]}, "tools[0]"),
        ({"model": "m", "messages": USER, "stream": "no"}, "stream"),
        (
            {"model": "m", "messages": USER, "stream": True, "stream_options": 5},
            "stream_options",
        ),
        (
            {"model": "m", "messages": USER, "prompt_cache_key": {"a": 1}},
            "prompt_cache_key",
        ),
    ],
)
async def test_malformed_requests_get_openai_error_shape(body, param):
    async with OpenAIEmulator(FAST) as llm:
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{llm.base_url}/chat/completions", json=body) as r:
                assert r.status == 400
                error = (await r.json())["error"]
            async with http.post(f"{llm.base_url}/chat/completions", data=b"{nope") as r:
                assert r.status == 400
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"


async def test_injected_429_reaches_pipecat_as_an_error_not_a_hang():
    async with OpenAIEmulator(FAST) as llm:
        llm.fail_next(429, count=3)  # the OpenAI SDK retries a 429 twice by itself
        text, usage, up = await complete(llm, [{"role": "user", "content": "hi"}])
        assert text == "" and usage == []
        assert any(isinstance(f, ErrorFrame) and "429" in f.error for f in up)


def test_stream_pieces_never_split_a_code_point():
    pieces, finish = stream_pieces("नमस्ते! 👋🏽 Hello", None)
    assert "".join(pieces) == "नमस्ते! 👋🏽 Hello"
    assert finish == "stop"
    assert all("\ufffd" not in p for p in pieces)


DEEP = b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [' + (
    b"[" * 100_000 + b"]" * 100_000 + b"]}"
)


@pytest.mark.parametrize(
    "data",
    [
        b'{"model": "m", "messages": [{"role": "user", "content": "\xff\xfe"}]}',
        DEEP,
        b'{"model": "m", "messages": [{"role": "user", "content": "a\\ud800b"}]}',
    ],
    ids=["invalid-utf8", "deep-nesting", "lone-surrogate"],
)
async def test_unparsable_bodies_get_a_400_up_front_and_are_not_recorded(data):
    slow = LatencyProfile("slow", 0, 0, 100, 0, 0.0, 2_000, 10_000, 0)  # 2 s to first token
    async with OpenAIEmulator(slow) as llm:
        status, body = await post_raw(f"{llm.base_url}/chat/completions", data)
        assert llm.requests == []
    assert status == 400
    assert body["error"]["type"] == "invalid_request_error"
    assert "invalid JSON body" in body["error"]["message"]


async def test_a_body_over_the_size_limit_gets_openai_error_json():
    llm = OpenAIEmulator(FAST)
    llm.max_body_bytes = 4096
    async with llm:
        big = {"model": "m", "messages": [{"role": "user", "content": "x" * 5000}]}
        status, body = await post_raw(f"{llm.base_url}/chat/completions", json.dumps(big))
    assert status == 413
    assert body["error"]["type"] == "invalid_request_error"
    assert "4096" in body["error"]["message"]


async def test_a_prompt_over_the_context_window_gets_context_length_exceeded():
    async with OpenAIEmulator(FAST, context_window=100) as llm:
        long = {"model": "m", "messages": [{"role": "user", "content": "word " * 500}]}
        status, body = await post_raw(f"{llm.base_url}/chat/completions", json.dumps(long))
        short = {"model": "m", "messages": [{"role": "user", "content": "word " * 50}]}
        ok, _ = await post_raw(f"{llm.base_url}/chat/completions", json.dumps(short))
        assert len(llm.requests) == 1  # only the short one
    assert status == 400 and ok == 200
    assert body["error"]["code"] == "context_length_exceeded"
    assert body["error"]["param"] == "messages"
    assert body["error"]["type"] == "invalid_request_error"


def test_counting_against_a_window_stops_soon_after_the_window():
    text = "hello world " * 2_000_000  # 24 M characters, 4 M tokens
    tokens = encode_within(text, 1_000)
    assert 1_000 < len(tokens) < 100_000  # one 200,000-character piece, not the whole text
    assert encode_within("hello world", 1_000) == encode("hello world")
