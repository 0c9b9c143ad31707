"""Every Pipecat assumption ``pipecat_fast._pipecat`` makes, checked by name.

When a Pipecat upgrade moves one of these, the failing test says which attribute or event
went missing and which adapter function needs a new way to reach it.
"""

import inspect

import pytest
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_text_processor import LLMTextProcessor
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.anthropic.llm import AnthropicLLMService
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.turns.user_stop.base_user_turn_stop_strategy import (
    BaseUserTurnStopStrategy,
    UserTurnStoppedParams,
)

from pipecat_fast import _pipecat


def require(condition, what, used_by):
    assert condition, f"Pipecat changed: {what} (needed by pipecat_fast._pipecat.{used_by})"


def params_of(fn):
    return set(inspect.signature(fn).parameters)


@pytest.fixture
def openai_llm():
    return OpenAILLMService(
        api_key="k",
        base_url="http://127.0.0.1:9/v1",
        settings=OpenAILLMService.Settings(model="gpt-4.1-mini", system_instruction="S"),
    )


@pytest.fixture
def anthropic_llm():
    return AnthropicLLMService(
        api_key="k",
        settings=AnthropicLLMService.Settings(
            model="claude-sonnet-4-5", enable_prompt_caching=True
        ),
    )


def test_openai_service_client(openai_llm):
    client = _pipecat.llm_client(openai_llm)
    require(client is not None, "BaseOpenAILLMService._client is gone", "llm_client")
    require(
        "127.0.0.1:9" in str(getattr(client, "base_url", "")),
        "the OpenAI client no longer carries base_url",
        "llm_identity",
    )
    require(callable(getattr(client, "with_options", None)), "client.with_options", "llm_client")
    require(
        _pipecat.is_openai_compatible(openai_llm), "OpenAI service shape", "is_openai_compatible"
    )
    assert _pipecat.llm_identity(openai_llm).model == "gpt-4.1-mini"


def test_anthropic_service_client(anthropic_llm):
    client = _pipecat.llm_client(anthropic_llm)
    require(client is not None, "AnthropicLLMService._client is gone", "llm_client")
    require(
        callable(getattr(client, "with_options", None)),
        "Anthropic client.with_options",
        "llm_client",
    )
    require(
        _pipecat.is_anthropic_messages(anthropic_llm),
        "the Anthropic client lost messages.create",
        "is_anthropic_messages",
    )
    assert not _pipecat.is_openai_compatible(anthropic_llm)
    assert not _pipecat.is_anthropic_messages(object())


def test_public_settings_carry_what_prefill_reads(openai_llm, anthropic_llm):
    for name in ("model", "system_instruction", "extra"):
        require(hasattr(openai_llm.settings, name), f"OpenAI settings.{name}", "(prefill)")
    for name in ("model", "system_instruction", "enable_prompt_caching", "system_prompt_cache_ttl"):
        require(hasattr(anthropic_llm.settings, name), f"Anthropic settings.{name}", "(prefill)")
    require(
        callable(getattr(openai_llm, "build_chat_completion_params", None)),
        "BaseOpenAILLMService.build_chat_completion_params",
        "is_openai_compatible",
    )
    require(hasattr(openai_llm, "supports_developer_role"), "supports_developer_role", "(prefill)")


def test_adapters_take_the_arguments_prefill_passes(openai_llm, anthropic_llm):
    openai = params_of(openai_llm.get_llm_adapter().get_llm_invocation_params)
    require(
        {"context", "system_instruction", "convert_developer_to_user"} <= openai,
        f"OpenAI adapter get_llm_invocation_params arguments are now {sorted(openai)}",
        "(prefill backends)",
    )
    anthropic = params_of(anthropic_llm.get_llm_adapter().get_llm_invocation_params)
    wanted = {
        "context",
        "enable_prompt_caching",
        "system_instruction",
        "ensure_last_message_is_user",
        "system_prompt_cache_ttl",
    }
    require(
        wanted <= anthropic,
        f"Anthropic adapter get_llm_invocation_params arguments are now {sorted(anthropic)}",
        "(prefill backends)",
    )


async def test_anthropic_not_given_sentinel(anthropic_llm):
    params = await anthropic_llm.get_llm_adapter().get_llm_invocation_params(
        LLMContext(messages=[{"role": "user", "content": "hi"}]), enable_prompt_caching=False
    )
    require(not _pipecat.anthropic_given(params["system"]), "anthropic_is_given", "anthropic_given")
    assert _pipecat.anthropic_given("a system prompt")


def test_stop_strategy_events_are_registered_and_run_inline():
    strategy = BaseUserTurnStopStrategy()
    for name in _pipecat.STOP_STRATEGY_EVENTS:
        require(
            _pipecat.event_runs_inline(strategy, name) is True,
            f"BaseUserTurnStopStrategy no longer emits {name} inline",
            "STOP_STRATEGY_EVENTS",
        )
    for method, kwargs in [
        ("trigger_user_turn_finalized", {"enable_user_speaking_frames", "confirms_speculation"}),
        ("trigger_user_turn_inference_triggered", {"speculation"}),
        ("trigger_user_turn_speculation_cancelled", set()),
        ("push_frame", {"frame", "direction"}),
        ("broadcast_frame", {"frame_cls"}),
    ]:
        fn = getattr(strategy, method, None)
        require(callable(fn), f"BaseUserTurnStopStrategy.{method}", "(draft-and-hold)")
        require(kwargs <= params_of(fn), f"{method} arguments", "(draft-and-hold)")
    fields = set(UserTurnStoppedParams.__dataclass_fields__)
    require(
        {"enable_user_speaking_frames", "confirms_speculation"} <= fields,
        f"UserTurnStoppedParams fields are now {sorted(fields)}",
        "(draft-and-hold)",
    )


def test_frame_hooks_run_inline():
    processor = FrameProcessor()
    for name in _pipecat.FRAME_HOOK_EVENTS:
        require(
            _pipecat.event_runs_inline(processor, name) is True,
            f"FrameProcessor no longer runs {name} inline",
            "add_inline_frame_hooks",
        )
    assert _pipecat.event_runs_inline(processor, "on_no_such_event") is None
    seen = []
    _pipecat.add_inline_frame_hooks(processor, before_push=lambda p, f: seen.append(f))
    assert _pipecat.event_runs_inline(processor, "on_before_push_frame")
    with pytest.raises(RuntimeError, match="no longer runs inline"):
        _pipecat.add_inline_frame_hooks(object(), before_process=print)


def test_llm_text_processor_internals():
    processor = LLMTextProcessor()
    require(
        inspect.iscoroutinefunction(getattr(processor, "_aggregated_text_frame", None)),
        "LLMTextProcessor._aggregated_text_frame",
        "text_processor_frame",
    )
    require(
        hasattr(processor, "_skip_tts"), "LLMTextProcessor._skip_tts", "text_processor_skip_tts"
    )
    assert _pipecat.text_processor_skip_tts(processor) is None


async def test_text_processor_frame_applies_the_processor():
    from pipecat.utils.text.base_text_aggregator import Aggregation, TextType

    frame = await _pipecat.text_processor_frame(
        LLMTextProcessor(), Aggregation(text="Hello there.", type=TextType.SENTENCE)
    )
    require(
        frame is not None and frame.text == "Hello there.",
        "aggregated frame",
        "text_processor_frame",
    )
