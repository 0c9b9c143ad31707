"""SessionWarmup against the OpenAI and Anthropic emulators, through the real Pipecat services."""

import asyncio

import pytest
from anthropic import AsyncAnthropic
from loguru import logger
from pipecat.frames.frames import LLMContextFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.anthropic.llm import AnthropicLLMService
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.tests.utils import run_test

from pipecat_fast.frames import TTFAAnnotationFrame
from pipecat_fast.testing.anthropic_server import AnthropicEmulator
from pipecat_fast.testing.openai_server import OpenAIEmulator
from pipecat_fast.testing.profiles import LatencyProfile
from pipecat_fast.warmup import PrewarmPolicy
from pipecat_fast.warmup.session import DEFAULT_USER_MESSAGE, SessionWarmup

FAST = LatencyProfile("test", 0, 0, 100, 0, 0.0, 0, 10_000, 0)
SLOW_PREFILL = LatencyProfile("slow", 0, 0, 100, 0, 1.0, 0, 10_000, 0)  # 1 ms per token
SYSTEM = "You are the front desk of a dental clinic. Keep every answer short. " * 150
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "book_appointment",
            "description": "Book a dental appointment.",
            "parameters": {"type": "object", "properties": {"day": {"type": "string"}}},
        },
    }
]


def openai_llm(emulator, system=SYSTEM, **settings):
    return OpenAILLMService(
        api_key="test-key",
        base_url=emulator.base_url,
        settings=OpenAILLMService.Settings(
            model="gpt-4.1-mini", system_instruction=system, **settings
        ),
    )


def tools_context():
    from pipecat_fast.bench.calls import tools_schema

    return LLMContext(tools=tools_schema(TOOLS))


async def live_first_turn(llm, context, text="Hi, I need a cleaning."):
    """The first turn as Pipecat sends it: the service's own request, streamed."""
    context.add_message({"role": "user", "content": text})
    await run_test(llm, frames_to_send=[LLMContextFrame(context)])


def fresh_policy():
    return PrewarmPolicy()  # no memory of other tests' warmups


async def test_two_requests_carry_the_live_prefix_and_the_first_turn_reads_it():
    async with OpenAIEmulator(FAST) as emulator:
        llm = openai_llm(emulator, extra={"prompt_cache_key": "call-42"})
        context = tools_context()
        report = await SessionWarmup(llm, context, policy=fresh_policy()).run()
        warmups = list(emulator.requests)
        await live_first_turn(llm, context)
        live = emulator.requests[-1]
    assert report.warmed and report.reason == "warm"
    assert len(warmups) == 2 and all(r.stream and r.max_tokens == 8 for r in warmups)
    assert warmups[0].cached_tokens == 0 and warmups[1].cached_tokens > 2000
    assert report.prefix_committed and report.cached_tokens == warmups[1].cached_tokens
    assert report.prompt_tokens == sum(r.prompt_tokens for r in warmups)
    assert all(r.namespace == "gpt-4.1-mini|call-42" for r in [*warmups, live])
    # the live turn differs only after the system prompt and tools: it reads them from cache
    assert live.cached_tokens >= warmups[1].cached_tokens - 128
    assert report.requests[0].error is None and report.elapsed_s < 5


async def test_without_the_warmup_the_first_turn_is_cold():
    async with OpenAIEmulator(FAST) as emulator:
        llm = openai_llm(emulator)
        await live_first_turn(llm, tools_context())
        assert emulator.requests[-1].cached_tokens == 0


async def test_below_the_provider_minimum_nothing_is_sent():
    async with OpenAIEmulator(FAST) as emulator:
        llm = openai_llm(emulator, system="You are a short-prompt receptionist.")
        report = await SessionWarmup(llm, LLMContext(), policy=fresh_policy()).run()
        assert emulator.requests == []
    assert not report.warmed and report.reason == "below_minimum"
    assert "1024" in report.detail  # gpt-4.1-mini via OpenAI's 1,024-token floor


async def test_a_retry_is_not_warmed():
    async with OpenAIEmulator(FAST) as emulator:
        warmup = SessionWarmup(openai_llm(emulator), is_retry=True, policy=fresh_policy())
        report = await warmup.run()
        assert emulator.requests == []
    assert report.reason == "retry" and report.prompt_tokens == 0


async def test_a_second_call_with_the_same_prefix_inside_the_ttl_is_not_warmed_again():
    policy = fresh_policy()
    clock = iter([1000.0, 1000.5, 1001.0, 1060.0]).__next__
    async with OpenAIEmulator(FAST) as emulator:
        first = await SessionWarmup(openai_llm(emulator), policy=policy, clock=clock).run()
        sent = len(emulator.requests)
        second = await SessionWarmup(openai_llm(emulator), policy=policy, clock=clock).run()
        assert len(emulator.requests) == sent == 2
    assert first.warmed and second.reason == "already_warm"


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_a_provider_error_is_logged_and_never_retried(status):
    lines = []
    sink = logger.add(lines.append, level="WARNING")
    try:
        async with OpenAIEmulator(FAST) as emulator:
            emulator.fail_next(status, count=5)
            report = await SessionWarmup(openai_llm(emulator), policy=fresh_policy()).run()
            # the SDK's own retries are off and the batch stops at the first error
            assert emulator.cache.stats.lookups == 0
            assert emulator._faults == [status] * 4
    finally:
        logger.remove(sink)
    assert report.warmed and len(report.requests) == 1
    assert report.error.startswith(f"HTTP {status}") and report.completed == 0
    assert any("not retried" in str(line) for line in lines)


async def test_the_deadline_abandons_the_warmup_and_the_call_goes_on_cold():
    async with OpenAIEmulator(SLOW_PREFILL) as emulator:  # ~3.3 s of prefill per request
        warmup = SessionWarmup(openai_llm(emulator), deadline_s=0.3, policy=fresh_policy())
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        report = await warmup.run()
        took = loop.time() - t0
        for _ in range(100):  # the emulator notices the hang-up when it streams
            if emulator.requests and emulator.requests[0].cancelled:
                break
            await asyncio.sleep(0.05)
        assert emulator.requests[0].cancelled
    assert report.deadline_hit and report.completed == 0 and len(report.requests) == 1
    assert took < 1.5
    assert "deadline" in report.error


async def test_a_tool_call_in_the_warmup_answer_is_drained_and_never_executed():
    reply = {"tool_call": {"name": "book_appointment", "arguments": {"day": "Tue"}}, "after": "ok"}
    calls = []

    async def book_appointment(params):
        calls.append(params)
        await params.result_callback({"booked": True})

    async with OpenAIEmulator(FAST, replies=[(DEFAULT_USER_MESSAGE, reply)]) as emulator:
        llm = openai_llm(emulator)
        llm.register_function("book_appointment", book_appointment)
        report = await SessionWarmup(llm, tools_context(), policy=fresh_policy()).run()
        await asyncio.sleep(0.1)
        assert [r.extra.get("tool_call") for r in emulator.requests] == ["book_appointment"] * 2
    assert report.tool_calls == 2 and calls == []
    assert report.completed == 2  # the tool-call streams were drained to their end


async def test_a_prompt_changed_before_the_first_turn_is_detected_and_warned():
    lines = []
    sink = logger.add(lines.append, level="WARNING")
    try:
        async with OpenAIEmulator(FAST) as emulator:
            llm = openai_llm(emulator)
            context = tools_context()
            warmup = SessionWarmup(llm, context, policy=fresh_policy())
            await warmup.run()
            first = LLMContext(messages=[{"role": "user", "content": "hi"}], tools=context.tools)
            assert await warmup.check_first_turn(first) is True
            llm._settings.system_instruction = SYSTEM + " Today is Tuesday."
            assert await warmup.check_first_turn(first) is False
            llm._settings.system_instruction = SYSTEM
            assert await warmup.check_first_turn(LLMContext(messages=first.messages)) is False
    finally:
        logger.remove(sink)
    wasted = [str(line) for line in lines if "the warmup was wasted" in str(line)]
    assert len(wasted) == 2
    assert "system changed" in wasted[0] and "tools changed" in wasted[1]


async def test_hanging_up_during_the_warmup_cancels_it_and_leaks_nothing():
    async with OpenAIEmulator(SLOW_PREFILL) as emulator:
        before = asyncio.all_tasks()
        warmup = SessionWarmup(openai_llm(emulator), policy=fresh_policy())
        task = warmup.start()
        for _ in range(100):
            if emulator.requests:
                break
            await asyncio.sleep(0.02)
        await warmup.cancel()
        assert task.cancelled()
        await asyncio.sleep(0.1)
        leftover = {t for t in asyncio.all_tasks() - before if not t.done()}
        leftover.discard(asyncio.current_task())
        names = [t.get_name() for t in leftover]
        assert not [n for n in names if "warmup" in n]
        for _ in range(100):
            if emulator.requests[0].cancelled:
                break
            await asyncio.sleep(0.05)
        assert emulator.requests[0].cancelled and len(emulator.requests) == 1
    assert warmup.report.cancelled and warmup.report.requests[0].error == "cancelled"


async def test_the_async_context_manager_cancels_on_exit():
    async with OpenAIEmulator(SLOW_PREFILL) as emulator:
        async with SessionWarmup(openai_llm(emulator), policy=fresh_policy()) as warmup:
            await asyncio.sleep(0.2)
        assert warmup.report.cancelled


async def test_a_broken_service_fails_open_with_a_report():
    llm = OpenAILLMService(api_key="k", base_url="http://127.0.0.1:9/v1")
    llm._settings.system_instruction = SYSTEM
    report = await SessionWarmup(llm, policy=fresh_policy(), deadline_s=5).run()
    assert report.warmed and report.error and report.completed == 0


async def test_anthropic_warmup_writes_the_cache_and_the_second_request_reads_it():
    async with AnthropicEmulator(FAST) as emulator:
        llm = AnthropicLLMService(
            api_key="k",
            client=AsyncAnthropic(api_key="k", base_url=emulator.base_url),
            settings=AnthropicLLMService.Settings(
                model="claude-sonnet-4-6", system_instruction=SYSTEM, enable_prompt_caching=True
            ),
        )
        report = await SessionWarmup(llm, policy=fresh_policy()).run()
        records = list(emulator.requests)
    first, second = report.requests
    assert report.provider == "anthropic" and all(r.stream for r in records)
    assert first.cache_write_tokens > 2000 and first.cached_tokens == 0
    assert second.cached_tokens >= first.cache_write_tokens - 50
    assert report.cache_write_tokens >= first.cache_write_tokens


async def test_the_checker_annotates_the_first_turn_and_passes_frames_on():
    async with OpenAIEmulator(FAST) as emulator:
        llm = openai_llm(emulator)
        context = tools_context()
        warmup = SessionWarmup(llm, context, policy=fresh_policy())
        await warmup.run()
        turn = LLMContext(messages=[{"role": "user", "content": "hi"}], tools=context.tools)
        down, _ = await run_test(
            warmup.checker(),
            frames_to_send=[LLMContextFrame(turn), LLMContextFrame(turn)],
            expected_down_frames=[
                TTFAAnnotationFrame,
                TTFAAnnotationFrame,
                LLMContextFrame,
                LLMContextFrame,
            ],
        )
    session = down[1]
    assert session.target == "session"
    assert session.add["warmup_prompt_tokens"] == warmup.report.prompt_tokens
    assert session.add["warmup_requests"] == 2
    fields = down[0].fields
    assert fields["warmup"] == "warm" and fields["warmup_prefix_matched"] is True
    assert fields["warmup_prompt_tokens"] == warmup.report.prompt_tokens > 4000
    assert fields["warmup_requests"] == 2


async def test_anthropic_without_prompt_caching_is_not_warmed():
    async with AnthropicEmulator(FAST) as emulator:
        llm = AnthropicLLMService(
            api_key="k",
            client=AsyncAnthropic(api_key="k", base_url=emulator.base_url),
            settings=AnthropicLLMService.Settings(
                model="claude-sonnet-4-6", system_instruction=SYSTEM
            ),
        )
        report = await SessionWarmup(llm, policy=fresh_policy()).run()
        assert emulator.requests == []
    assert not report.warmed and report.reason == "caching_off"


async def test_running_says_whether_the_warmup_is_still_computing_the_prefix():
    # What the speculative prefill reads at speech start (SpeculativePrefill(warmup=...)).
    async with OpenAIEmulator(FAST) as emulator:
        warmup = SessionWarmup(openai_llm(emulator), tools_context(), policy=fresh_policy())
        assert warmup.running is False  # not started
        warmup.start()
        assert warmup.running is True
        report = await warmup.wait()
        assert warmup.running is False and report.prefix_committed
