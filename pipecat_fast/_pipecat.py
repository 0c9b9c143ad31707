"""The one module that touches Pipecat internals.

Pipecat's public API does not expose everything a lever needs (an OpenAI-compatible
service's client and base URL, for one). Every such access lives here, each behind a small
function with a plain return value, so a Pipecat upgrade that moves something breaks one
function — and ``tests/test_pipecat_adapter.py``, which checks each assumption by name and
says which Pipecat attribute went missing.

Public API is used wherever it exists (``service.settings``, ``get_llm_adapter()``,
``build_chat_completion_params``, ``add_event_handler``, a strategy's ``trigger_*`` methods);
what is here is what is not public, or an event name / behaviour a lever relies on.

Sections: LLM services, user turn stop strategies, frame hooks, ``LLMTextProcessor``. A new
lever adds its function to the right section and its check to the adapter test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipecat_fast.providers import identify_provider

# -- LLM services -------------------------------------------------------------------------


@dataclass(frozen=True)
class LLMIdentity:
    """Plain facts about a Pipecat LLM service, for provider lookups.

    Attributes:
        modules: Module names of the service class and its bases, most derived first.
        base_url: The client's base URL, or ``None`` when the service has no such client.
        model: The model id in the service's settings, or ``None``.
    """

    modules: tuple[str, ...]
    base_url: str | None
    model: str | None


def llm_client(service: Any) -> Any | None:
    """The SDK client a Pipecat LLM service sends with (``_client``), or ``None``.

    Pipecat 1.14: ``BaseOpenAILLMService._client`` (an ``openai.AsyncOpenAI``) and
    ``AnthropicLLMService._client`` (an ``anthropic.AsyncAnthropic``); there is no public
    accessor.
    """
    return getattr(service, "_client", None)


def llm_identity(service: Any) -> LLMIdentity:
    """Module names, base URL and model of a Pipecat LLM service."""
    modules = tuple(cls.__module__ for cls in type(service).__mro__ if cls is not object)
    client = llm_client(service)
    base_url = getattr(client, "base_url", None) if client is not None else None
    settings = getattr(service, "settings", None)  # public in Pipecat 1.14
    model = getattr(settings, "model", None) if settings is not None else None
    return LLMIdentity(
        modules=modules,
        base_url=str(base_url) if base_url else None,
        model=str(model) if isinstance(model, str) and model else None,
    )


def llm_provider(service: Any, provider: str | None = None) -> str | None:
    """The canonical provider of a Pipecat LLM service (see ``identify_provider``).

    Args:
        service: The LLM service.
        provider: An explicit provider name, which wins (``ValueError`` if unknown).
    """
    if provider:
        from pipecat_fast.providers import cache_facts

        return cache_facts(provider).provider
    ident = llm_identity(service)
    return identify_provider(ident.modules, ident.base_url, ident.model)


def is_openai_compatible(service: Any) -> bool:
    """Whether ``service`` sends through an OpenAI SDK client (``BaseOpenAILLMService``).

    Checks the shape a prefill needs: the public ``build_chat_completion_params`` and
    ``get_llm_adapter``, and a client with ``chat.completions.create``.
    """
    client = llm_client(service)
    completions = getattr(getattr(client, "chat", None), "completions", None)
    return (
        callable(getattr(service, "build_chat_completion_params", None))
        and callable(getattr(service, "get_llm_adapter", None))
        and callable(getattr(completions, "create", None))
    )


def is_anthropic_messages(service: Any) -> bool:
    """Whether ``service`` sends through an Anthropic SDK client (``messages.create``)."""
    client = llm_client(service)
    messages = getattr(client, "messages", None)
    return callable(getattr(messages, "create", None)) and callable(
        getattr(service, "get_llm_adapter", None)
    )


def anthropic_given(value: Any) -> bool:
    """Whether a value from Pipecat's Anthropic adapter is set (not the SDK's ``NOT_GIVEN``)."""
    from pipecat.adapters.llm.services.anthropic_adapter import anthropic_is_given

    return bool(anthropic_is_given(value))


# -- user turn stop strategies ---------------------------------------------------------------

STOP_STRATEGY_EVENTS = (
    "on_push_frame",
    "on_broadcast_frame",
    "on_user_turn_inference_triggered",
    "on_user_turn_speculation_cancelled",
    "on_user_turn_stopped",
)
"""The events every ``BaseUserTurnStopStrategy`` emits (Pipecat 1.14; its class docstring),
all run inline (``sync=True``). A strategy that wraps another re-emits each of them."""


# -- frame hooks ----------------------------------------------------------------------------

FRAME_HOOK_EVENTS = ("on_before_process_frame", "on_after_process_frame", "on_before_push_frame")
"""``FrameProcessor`` events that run inline in the processor's own task (``sync=True``)."""


def event_runs_inline(obj: Any, event_name: str) -> bool | None:
    """Whether ``obj``'s event runs its handlers inline, in a task, or is not registered.

    Returns ``True``, ``False`` or ``None``. Reads ``BaseObject._event_handlers``.
    """
    handler = getattr(obj, "_event_handlers", {}).get(event_name)
    if handler is None:
        return None
    return bool(getattr(handler, "is_sync", False))


def add_inline_frame_hooks(
    processor: Any,
    *,
    before_process: Any = None,
    after_process: Any = None,
    before_push: Any = None,
) -> None:
    """Attach handlers that run inline in ``processor``'s task, before/after it handles a frame.

    Each handler is called as ``handler(processor, frame)``.

    Raises:
        RuntimeError: If this Pipecat no longer runs one of those events inline (a handler
            would then run later, from a task, and see the processor's state too late).
    """
    hooks = {
        "on_before_process_frame": before_process,
        "on_after_process_frame": after_process,
        "on_before_push_frame": before_push,
    }
    for name, handler in hooks.items():
        if handler is None:
            continue
        if event_runs_inline(processor, name) is not True:
            raise RuntimeError(f"{processor}: Pipecat's {name} event no longer runs inline")
        processor.add_event_handler(name, handler)


def remove_inline_frame_hooks(
    processor: Any,
    *,
    before_process: Any = None,
    after_process: Any = None,
    before_push: Any = None,
) -> None:
    """Detach handlers added by :func:`add_inline_frame_hooks` (absent ones are ignored)."""
    hooks = {
        "on_before_process_frame": before_process,
        "on_after_process_frame": after_process,
        "on_before_push_frame": before_push,
    }
    for name, handler in hooks.items():
        if handler is not None:
            processor.remove_event_handler(name, handler)


# -- LLMTextProcessor -----------------------------------------------------------------------


async def text_processor_frame(processor: Any, aggregation: Any) -> Any | None:
    """The frame an ``LLMTextProcessor`` would push for ``aggregation``, or ``None``.

    Its text transforms applied. Calls ``_aggregated_text_frame``.
    """
    return await processor._aggregated_text_frame(aggregation)


def text_processor_skip_tts(processor: Any) -> bool | None:
    """The ``skip_tts`` of the reply an ``LLMTextProcessor`` is aggregating (``_skip_tts``)."""
    return processor._skip_tts
