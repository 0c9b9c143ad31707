"""Speculative prefill against the Anthropic emulator's cache_control semantics."""

import pytest
from anthropic import AsyncAnthropic
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.anthropic.llm import AnthropicLLMService
from pipecat.services.openai.llm import OpenAILLMService

from pipecat_fast._pipecat import llm_client
from pipecat_fast.prefill import AnthropicPrefill, OpenAIPrefill, backend_for
from pipecat_fast.testing.anthropic_server import AnthropicEmulator
from pipecat_fast.testing.profiles import LatencyProfile

FAST = LatencyProfile("test", 0, 0, 100, 0, 0.0, 0, 10_000, 0)
SYSTEM = "You are the front desk of a dental clinic. Keep answers short. " * 150
REPLY = "Sure. Dr. Patel can see you Tuesday at 9:30, or Thursday at 2:15. " * 8


def service(emulator):
    return AnthropicLLMService(
        api_key="k",
        client=AsyncAnthropic(api_key="k", base_url=emulator.base_url),
        settings=AnthropicLLMService.Settings(
            model="claude-sonnet-4-5", system_instruction=SYSTEM, enable_prompt_caching=True
        ),
    )


async def real_request(llm, messages):
    """What the service sends at end of turn (its own rendering, cache markers included).

    (``_get_llm_invocation_params`` is the service's own request builder: the reference this
    test compares the prefill against, not something the library uses.)
    """
    params = await llm._get_llm_invocation_params(LLMContext(messages=messages))
    params.update(model="claude-sonnet-4-5", max_tokens=5)
    return (await llm_client(llm).messages.create(**params)).usage


async def test_prefill_makes_the_real_request_read_through_the_history():
    history = [
        {"role": "user", "content": "I need a cleaning."},
        {"role": "assistant", "content": REPLY},
    ]
    final = {"role": "user", "content": "Tuesday at nine thirty works."}
    results = {}
    for with_prefill in (False, True):
        async with AnthropicEmulator(FAST) as emulator:
            llm = service(emulator)
            await real_request(llm, history[:1])  # turn 1 wrote system + first user message
            if with_prefill:
                prefill = await AnthropicPrefill(llm).prefill(
                    LLMContext(messages=history), "Tuesday at nine"
                )
                assert prefill.prompt_tokens > 2000
            results[with_prefill] = await real_request(llm, [*history, final])
    without, with_ = results[False], results[True]
    # Pipecat's markers alone let turn 2 read up to the first user message; the prefill's
    # breakpoint at the end of the history lets it read the assistant reply too.
    assert with_.cache_read_input_tokens > without.cache_read_input_tokens + 100


def test_backend_is_picked_by_provider():
    anthropic = AnthropicLLMService(api_key="k", settings=AnthropicLLMService.Settings(model="m"))
    openai = OpenAILLMService(api_key="k", base_url="http://127.0.0.1:1/v1")
    assert isinstance(backend_for(anthropic), AnthropicPrefill)
    assert isinstance(backend_for(openai), OpenAIPrefill)
    hosted = OpenAILLMService(api_key="k", settings=OpenAILLMService.Settings(model="gpt-4.1"))
    assert backend_for(hosted).min_prompt_tokens == 1024
    # An OpenAI model keeps OpenAI's floor wherever it is served (a proxy, an emulator)...
    assert backend_for(openai).min_prompt_tokens == 1024
    # ...a self-hosted engine's own model has none, and an explicit provider wins.
    engine = OpenAILLMService(
        api_key="k",
        base_url="http://127.0.0.1:1/v1",
        settings=OpenAILLMService.Settings(model="qwen2.5-7b-instruct"),
    )
    assert backend_for(engine).min_prompt_tokens == 0
    assert OpenAIPrefill(openai, provider="llama.cpp").min_prompt_tokens == 0
    # Prompt caching off: the real request would never read what a prefill writes.
    assert backend_for(anthropic).min_prompt_tokens > 10**9
    cached = AnthropicLLMService(
        api_key="k", settings=AnthropicLLMService.Settings(model="m", enable_prompt_caching=True)
    )
    assert 512 <= backend_for(cached).min_prompt_tokens <= 4096


def test_block_sizes_come_from_the_registry_and_can_be_overridden():
    engine = OpenAILLMService(
        api_key="k",
        base_url="http://127.0.0.1:1/v1",
        settings=OpenAILLMService.Settings(model="qwen2.5-7b-instruct"),
    )
    assert backend_for(engine, provider="vllm").block_tokens == 16
    assert backend_for(engine, provider="sglang").block_tokens == 1
    assert backend_for(engine, provider="llama.cpp").block_tokens == 1
    assert OpenAIPrefill(engine, provider="vllm", block_tokens=32).block_tokens == 32
    hosted = OpenAILLMService(api_key="k", settings=OpenAILLMService.Settings(model="gpt-4.1"))
    assert backend_for(hosted).block_tokens == 128
    assert backend_for(hosted).hosted_openai
    assert not backend_for(engine).hosted_openai


def test_services_prefill_cannot_drive_are_refused_by_name():
    from pipecat.services.cartesia.tts import CartesiaTTSService

    tts = CartesiaTTSService(api_key="k", settings=CartesiaTTSService.Settings(voice="v"))
    with pytest.raises(TypeError, match="OpenAI-compatible service .* or AnthropicLLMService"):
        backend_for(tts)
    with pytest.raises(ValueError, match="unknown provider 'openia'"):
        backend_for(OpenAILLMService(api_key="k"), provider="openia")
