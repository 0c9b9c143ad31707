"""Prefill-only requests that carry exactly the bytes the real turn will send.

A backend renders the request with the LLM service's own adapter and settings — the same
system instruction, tools and history the service will send when the turn ends — appends the
caller's stable words as the user message, asks for at most one token, and reports the
provider's usage. It talks through the service's own client, so base URL, keys, headers and
``prompt_cache_key`` (in the service settings' ``extra``) are the real request's.

Which provider a service talks to — and so its minimum cacheable prefix and cache block — comes
from :func:`pipecat_fast._pipecat.llm_provider` (the service's module, base URL and model, looked
up in :mod:`pipecat_fast.providers`); ``provider=`` overrides it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Protocol

from loguru import logger
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.llm_service import LLMService
from pipecat.utils.types import is_given

from pipecat_fast._pipecat import (
    anthropic_given,
    is_anthropic_messages,
    is_openai_compatible,
    llm_client,
    llm_identity,
    llm_provider,
)
from pipecat_fast.providers import identify_provider, prefix_minimum
from pipecat_fast.request_tokens import count_chat_tokens


@dataclass(frozen=True)
class PrefillResult:
    """The provider's usage for one prefill request (tokens).

    ``cached_tokens`` is ``None`` when the usage does not report it (llama-cpp-python's server
    sends no ``prompt_tokens_details``): unknown, not zero.
    """

    prompt_tokens: int
    cached_tokens: int | None


class PrefillBackend(Protocol):
    """Sends prefill-only requests for one LLM service."""

    min_prompt_tokens: int
    """Smallest prompt the provider caches (tokens); smaller prefills are not sent."""

    block_tokens: int
    """The provider's cache block (tokens; 1 = any length)."""

    provider: str | None
    """The provider's registry name, or ``None`` when nothing identified it."""

    async def estimate_tokens(self, context: LLMContext, user_text: str) -> int:
        """Prompt tokens of the prefill request, as the provider counts them (estimated)."""
        ...

    async def prefill(self, context: LLMContext, user_text: str) -> PrefillResult:
        """Send one prefill-only request; raise on any failure."""
        ...


def provisional_context(context: LLMContext, user_text: str) -> LLMContext:
    """The context the turn will send if the caller's words so far are the whole turn.

    A new object: the real context is never touched (no unheard word enters it).
    """
    return LLMContext(
        messages=[*context.get_messages(), {"role": "user", "content": user_text}],
        tools=context.tools,
        tool_choice=context.tool_choice,
    )


def _plain_system(message: Any) -> str | None:
    """The text of a context message that is a plain system message, else ``None``."""
    if (
        isinstance(message, dict)
        and message.get("role") == "system"
        and isinstance(message.get("content"), str)
        and set(message) <= {"role", "content"}
    ):
        return message["content"]
    return None


def lift_context_system(context: LLMContext, user_text: str) -> tuple[LLMContext, str | None]:
    """The provisional context without a leading plain system message, and that message's text.

    Pipecat 1.9+ deprecates a system message inside the context (``system_instruction`` on the
    service is the way); its adapters warn once, from whoever renders the context first. A
    prefill renders before the service does, so it lifts such a message out and passes it the
    non-deprecated way: the request is byte-identical, and the deprecation warning stays with
    the service's own request, pointing at the user's context rather than at this module.
    """
    provisional = provisional_context(context, user_text)
    messages = provisional.get_messages()
    system = _plain_system(messages[0]) if messages else None
    if system is None:
        return provisional, None
    rest = LLMContext(messages=messages[1:], tools=context.tools, tool_choice=context.tool_choice)
    return rest, system


def _minimum(provider: str | None, model: str | None) -> tuple[int, int]:
    minimum = prefix_minimum(provider, model) if provider else None
    if minimum is None:
        return 0, 1
    return minimum.tokens, max(1, minimum.granularity)


class OpenAIPrefill:
    """Prefill through an OpenAI-compatible ``OpenAILLMService`` (OpenAI, vLLM, SGLang, llama.cpp).

    Args:
        llm: The pipeline's OpenAI-compatible LLM service (a ``BaseOpenAILLMService``).
        min_prompt_tokens: The provider's minimum cacheable prompt. Default: the provider
            registry's figure (:func:`pipecat_fast.providers.prefix_minimum`) for the provider
            the service and its model identify (``gpt-4o`` is OpenAI's wherever it is served:
            1,024), else 0 (a self-hosted engine caches any prefix).
        block_tokens: The provider's cache block (OpenAI 128, vLLM 16, SGLang and llama.cpp
            1, from the registry); set it to your engine's block size.
        provider: The provider's registry name, when the service and model do not say
            (``"vllm"``, ``"sglang"``, ``"llama.cpp"``...).

    Raises:
        TypeError: If ``llm`` is not OpenAI-compatible.
        ValueError: If ``provider`` is not in the registry.
    """

    def __init__(
        self,
        llm: LLMService,
        *,
        min_prompt_tokens: int | None = None,
        block_tokens: int | None = None,
        provider: str | None = None,
    ):
        if not is_openai_compatible(llm):
            raise TypeError(
                f"{llm!r} is not an OpenAI-compatible Pipecat LLM service "
                "(a BaseOpenAILLMService such as OpenAILLMService)"
            )
        self.llm = llm
        ident = llm_identity(llm)
        self.provider = llm_provider(llm, provider)
        self.identity = ident
        # OpenAI's own API wants max_completion_tokens (its reasoning models reject
        # max_tokens); every OpenAI-compatible engine reads max_tokens.
        self._hosted = identify_provider(base_url=ident.base_url) == "openai"
        registry_min, registry_block = _minimum(self.provider, ident.model)
        self.min_prompt_tokens = registry_min if min_prompt_tokens is None else min_prompt_tokens
        self.block_tokens = registry_block if block_tokens is None else max(1, block_tokens)

    @property
    def hosted_openai(self) -> bool:
        """Whether the service talks to OpenAI's own API (which reads ``max_completion_tokens``)."""
        return self._hosted

    async def render(self, context: LLMContext, user_text: str) -> dict[str, Any]:
        """The request the service sends for ``context`` plus a user message ``user_text``.

        Rendered by the service's own adapter and ``build_chat_completion_params`` (system
        instruction, tools, model, settings, ``extra``), unchanged: streaming, with the
        service's own output cap. Shared by the prefill and the session warmup.
        """
        llm = self.llm
        adapter = llm.get_llm_adapter()
        rest, context_system = lift_context_system(context, user_text)
        configured = llm.settings.system_instruction
        configured = configured if is_given(configured) and configured else None
        invocation = await adapter.get_llm_invocation_params(
            rest,
            system_instruction=configured or context_system,
            convert_developer_to_user=not llm.supports_developer_role,
        )
        if configured and context_system is not None:
            # The service sends both: its own instruction first, then the context's message.
            messages = list(invocation["messages"])
            messages.insert(1, {"role": "system", "content": context_system})
            invocation = {**invocation, "messages": messages}
        return llm.build_chat_completion_params(invocation)

    async def _params(self, context: LLMContext, user_text: str) -> dict[str, Any]:
        params = await self.render(context, user_text)
        params.pop("stream_options", None)
        params.pop("max_completion_tokens", None)
        params.pop("max_tokens", None)
        # OpenAI's reasoning models reject max_tokens; llama.cpp's server ignores
        # max_completion_tokens. Each gets the one it reads.
        params["max_completion_tokens" if self._hosted else "max_tokens"] = 1
        params["stream"] = False
        return params

    async def estimate_tokens(self, context: LLMContext, user_text: str) -> int:
        """Prompt tokens of the prefill request as OpenAI counts them (framing included)."""
        params = await self.render(context, user_text)
        return count_chat_tokens(params.get("messages") or [], _given(params.get("tools")))

    async def prefill(self, context: LLMContext, user_text: str) -> PrefillResult:
        """Send ``max_tokens=1`` with the real request's messages, tools and settings."""
        params = await self._params(context, user_text)
        # No SDK retries: a 429 or 5xx is one failed prefill, and the planner backs off.
        client = llm_client(self.llm).with_options(max_retries=0)
        response = await client.chat.completions.create(**params)
        usage = response.usage
        details = getattr(usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None)
        return PrefillResult(
            prompt_tokens=usage.prompt_tokens if usage else 0, cached_tokens=cached
        )


def _given(value: Any) -> Any:
    """``value`` unless it is an SDK's NOT_GIVEN sentinel (then ``None``)."""
    return value if isinstance(value, (list, dict, str)) else None


class AnthropicPrefill:
    """Prefill through Pipecat's ``AnthropicLLMService`` with prompt caching on.

    Anthropic caches at ``cache_control`` breakpoints only, and a later request reads an entry
    only at one of its own content-block boundaries (within ~20 blocks before a breakpoint).
    So the prefill request is the real request's rendering (the service's adapter and
    settings, including Pipecat's own markers on the system prompt and the last two user
    messages) with the caller's stable words as a user message of their own — its own
    content block, marked — plus a breakpoint at the end of the history before it: the
    boundary the real request will share, so the real request reads everything up to the
    new user message from the cache.

    Args:
        llm: The pipeline's ``AnthropicLLMService``; with ``enable_prompt_caching`` off the
            backend logs a warning and never sends (its minimum becomes unreachable).
        min_prompt_tokens: The model's minimum cacheable prefix; default from the provider
            registry (512-4,096 tokens by model, ``prompt_caching_rules.md``).

    Raises:
        TypeError: If ``llm`` is not an Anthropic service.
    """

    def __init__(self, llm: LLMService, *, min_prompt_tokens: int | None = None):
        if not is_anthropic_messages(llm):
            raise TypeError(
                f"{llm!r} is not a Pipecat AnthropicLLMService (an Anthropic SDK client)"
            )
        self.llm = llm
        self.provider = "anthropic"
        self.block_tokens = 1
        settings = llm.settings
        if min_prompt_tokens is None:
            model = settings.model if isinstance(settings.model, str) else ""
            min_prompt_tokens = prefix_minimum("anthropic", model).tokens
        if getattr(settings, "enable_prompt_caching", False) is not True:
            # Without Pipecat's cache markers the real request never reads what a prefill
            # writes, and every prefill would pay the cache-write premium for nothing.
            logger.warning(
                f"{llm}: enable_prompt_caching is off, so speculative prefill is disabled "
                "(AnthropicLLMService.Settings(enable_prompt_caching=True) turns it on)"
            )
            min_prompt_tokens = sys.maxsize
        self.min_prompt_tokens = min_prompt_tokens

    async def _invocation(self, context: LLMContext, user_text: str) -> dict[str, Any]:
        settings = self.llm.settings
        rest, context_system = lift_context_system(context, user_text)
        configured = settings.system_instruction
        configured = configured if is_given(configured) and configured else None
        ttl = settings.system_prompt_cache_ttl
        # Pipecat discards a context system message when the service has an instruction of
        # its own, and uses it otherwise; the lifted one follows the same rule.
        return await self.llm.get_llm_adapter().get_llm_invocation_params(
            rest,
            enable_prompt_caching=bool(settings.enable_prompt_caching),
            system_instruction=configured or context_system,
            # The provisional context always ends with the caller's words (a user message).
            ensure_last_message_is_user=False,
            system_prompt_cache_ttl=ttl if is_given(ttl) else None,
        )

    async def render(self, context: LLMContext, user_text: str) -> dict[str, Any]:
        """The prefill's request without its output cap (shared with the session warmup).

        The service's own rendering (its adapter, with Pipecat's cache markers) of ``context``
        plus ``user_text`` as a marked user message of its own, a breakpoint at the end of the
        history before it, ``model`` and ``tools``.
        """
        invocation = await self._invocation(context, user_text)
        messages = [dict(m) for m in invocation["messages"]]
        if len(messages) >= 2:
            history_end = messages[-2]
            content = history_end["content"]
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            content = [dict(block) for block in content]
            content[-1]["cache_control"] = {"type": "ephemeral"}
            history_end["content"] = content
        params: dict[str, Any] = {
            "model": self.llm.settings.model,
            "messages": messages,
            "tools": invocation["tools"],
        }
        if anthropic_given(invocation["system"]):
            params["system"] = invocation["system"]
        return params

    async def estimate_tokens(self, context: LLMContext, user_text: str) -> int:
        """Approximate prompt tokens of the prefill request (framing included)."""
        params = await self.render(context, user_text)
        return count_chat_tokens(
            params["messages"], _given(params.get("tools")), system=params.get("system")
        )

    async def prefill(self, context: LLMContext, user_text: str) -> PrefillResult:
        """Send ``max_tokens=1`` with the real request's blocks, partial words as their own."""
        params = await self.render(context, user_text)
        params["max_tokens"] = 1
        # No SDK retries: a 429 or 5xx is one failed prefill, and the planner backs off.
        client = llm_client(self.llm).with_options(max_retries=0)
        response = await client.messages.create(**params)
        usage = response.usage
        read = getattr(usage, "cache_read_input_tokens", 0) or 0
        created = getattr(usage, "cache_creation_input_tokens", 0) or 0
        return PrefillResult(prompt_tokens=usage.input_tokens + read + created, cached_tokens=read)


def backend_for(llm: LLMService, *, provider: str | None = None) -> PrefillBackend:
    """The prefill backend for a Pipecat LLM service (Anthropic or OpenAI-compatible).

    The provider comes from :func:`pipecat_fast._pipecat.llm_provider` (``provider=`` wins).

    Raises:
        TypeError: If the service is neither (the message names what is supported).
        ValueError: If ``provider`` is not in the registry.
    """
    name = llm_provider(llm, provider)
    if name == "anthropic" and is_anthropic_messages(llm) and not is_openai_compatible(llm):
        return AnthropicPrefill(llm)
    if is_openai_compatible(llm):
        return OpenAIPrefill(llm, provider=provider)
    raise TypeError(
        f"{llm!r} is not a Pipecat LLM service speculative prefill supports: an "
        "OpenAI-compatible service (OpenAILLMService, vLLM, SGLang, llama.cpp, Azure...) or "
        "AnthropicLLMService"
    )
