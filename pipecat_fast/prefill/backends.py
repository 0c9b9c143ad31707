"""Prefill-only requests that carry exactly the bytes the real turn will send.

A backend renders the request with the LLM service's own adapter and settings — the same
system instruction, tools and history the service will send when the turn ends — appends the
caller's stable words as the user message, asks for at most one token, and reports the
provider's usage. It talks through the service's own client, so base URL, keys, headers and
``prompt_cache_key`` (in the service settings' ``extra``) are the real request's.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any, Protocol

from loguru import logger
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.llm_service import LLMService
from pipecat.utils.types import is_given

from pipecat_fast._pipecat import llm_identity, llm_provider
from pipecat_fast.providers import identify_provider, prefix_minimum
from pipecat_fast.tokens import count_tokens


@dataclass(frozen=True)
class PrefillResult:
    """The provider's usage for one prefill request (tokens)."""

    prompt_tokens: int
    cached_tokens: int


class PrefillBackend(Protocol):
    """Sends prefill-only requests for one LLM service."""

    min_prompt_tokens: int
    """Smallest prompt the provider caches (tokens); smaller prefills are not sent."""

    async def estimate_tokens(self, context: LLMContext, user_text: str) -> int:
        """Approximate prompt tokens of the prefill request."""
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


def _estimate(messages: Any, tools: Any, system: Any = None) -> int:
    """o200k token count of the request's text parts (within a few % of the provider's)."""
    parts = [json.dumps(tools, ensure_ascii=False, default=str)] if tools else []
    if system:
        parts.append(system if isinstance(system, str) else json.dumps(system, default=str))
    for message in messages or []:
        content = message.get("content") if isinstance(message, dict) else None
        parts.append(content if isinstance(content, str) else json.dumps(content, default=str))
    return count_tokens("\n".join(parts))


class OpenAIPrefill:
    """Prefill through an OpenAI-compatible ``OpenAILLMService`` (OpenAI, vLLM, SGLang, llama.cpp).

    Args:
        llm: The pipeline's OpenAI-compatible LLM service (a ``BaseOpenAILLMService``).
        min_prompt_tokens: The provider's minimum cacheable prompt; OpenAI caches from
            1,024 tokens, self-hosted engines from 0 (``prompt_caching_rules.md``). Default:
            the provider registry's figure (:func:`pipecat_fast.providers.prefix_minimum`)
            for the provider the service and its model identify
            (:func:`pipecat_fast.providers.identify_provider`: ``gpt-4o`` is OpenAI's
            wherever it is served), else 0 (a self-hosted engine caches any prefix).
        provider: The provider's registry name, when the service and model do not say
            (``"vllm"``, ``"sglang"``, ``"llama.cpp"``...).

    Raises:
        TypeError: If ``llm`` is not OpenAI-compatible.
    """

    def __init__(
        self,
        llm: LLMService,
        *,
        min_prompt_tokens: int | None = None,
        provider: str | None = None,
    ):
        if not hasattr(llm, "build_chat_completion_params") or not hasattr(llm, "_client"):
            raise TypeError(f"{llm} is not an OpenAI-compatible Pipecat LLM service")
        self.llm = llm
        ident = llm_identity(llm)
        # OpenAI's own API wants max_completion_tokens (its reasoning models reject
        # max_tokens); every OpenAI-compatible engine reads max_tokens.
        self._hosted = identify_provider(base_url=ident.base_url) == "openai"
        self.provider = llm_provider(llm, provider)
        if min_prompt_tokens is None:
            minimum = prefix_minimum(self.provider, ident.model) if self.provider else None
            min_prompt_tokens = minimum.tokens if minimum else 0
        self.min_prompt_tokens = min_prompt_tokens

    async def render(self, context: LLMContext, user_text: str) -> dict[str, Any]:
        """The request the service sends for ``context`` plus a user message ``user_text``.

        Rendered by the service's own adapter and ``build_chat_completion_params`` (system
        instruction, tools, model, settings, ``extra``), unchanged: streaming, with the
        service's own output cap. Shared by the prefill and the session warmup.
        """
        llm = self.llm
        adapter = llm.get_llm_adapter()
        system = llm._settings.system_instruction
        invocation = await adapter.get_llm_invocation_params(
            provisional_context(context, user_text),
            system_instruction=system if is_given(system) else None,
            convert_developer_to_user=not llm.supports_developer_role,
        )
        return llm.build_chat_completion_params(invocation)

    @property
    def hosted_openai(self) -> bool:
        """Whether the service talks to OpenAI's own API (which reads ``max_completion_tokens``)."""
        return self._hosted

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
        """Approximate prompt tokens of the prefill request."""
        params = await self._params(context, user_text)
        return _estimate(params.get("messages"), params.get("tools"))

    async def prefill(self, context: LLMContext, user_text: str) -> PrefillResult:
        """Send ``max_tokens=1`` with the real request's messages, tools and settings."""
        params = await self._params(context, user_text)
        # No SDK retries: a 429 or 5xx is one failed prefill, and the planner backs off.
        client = self.llm._client.with_options(max_retries=0)
        response = await client.chat.completions.create(**params)
        usage = response.usage
        details = getattr(usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None) or 0
        return PrefillResult(
            prompt_tokens=usage.prompt_tokens if usage else 0, cached_tokens=cached
        )


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
        min_prompt_tokens: The model's minimum cacheable prefix; default from the linter's
            table (512-4,096 tokens by model, ``prompt_caching_rules.md``).

    Raises:
        TypeError: If ``llm`` is not an Anthropic service.
    """

    def __init__(self, llm: LLMService, *, min_prompt_tokens: int | None = None):
        if not hasattr(llm, "_get_llm_invocation_params") or not hasattr(llm, "_client"):
            raise TypeError(f"{llm} is not a Pipecat Anthropic LLM service")
        self.llm = llm
        if min_prompt_tokens is None:
            model = str(getattr(llm._settings, "model", "") or "")
            min_prompt_tokens = prefix_minimum("anthropic", model).tokens
        if getattr(llm._settings, "enable_prompt_caching", False) is not True:
            # Without Pipecat's cache markers the real request never reads what a prefill
            # writes, and every prefill would pay the cache-write premium for nothing.
            logger.warning(
                f"{llm}: enable_prompt_caching is off, so speculative prefill is disabled"
            )
            min_prompt_tokens = sys.maxsize
        self.min_prompt_tokens = min_prompt_tokens

    async def render(self, context: LLMContext, user_text: str) -> dict[str, Any]:
        """The prefill's request without its output cap (shared with the session warmup).

        The service's own rendering (its adapter, with Pipecat's cache markers) of ``context``
        plus ``user_text`` as a marked user message of its own, a breakpoint at the end of the
        history before it, ``model`` and ``tools``.
        """
        params = await self._params(context, user_text)
        params.pop("max_tokens", None)
        return params

    async def _params(self, context: LLMContext, user_text: str) -> dict[str, Any]:
        invocation = await self.llm._get_llm_invocation_params(
            provisional_context(context, user_text)
        )
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
            "model": self.llm._settings.model,
            "max_tokens": 1,
            "messages": messages,
            "tools": invocation["tools"],
        }
        from pipecat.adapters.llm.services.anthropic_adapter import anthropic_is_given

        if anthropic_is_given(invocation["system"]):
            params["system"] = invocation["system"]
        return params

    async def estimate_tokens(self, context: LLMContext, user_text: str) -> int:
        """Approximate prompt tokens of the prefill request."""
        params = await self._params(context, user_text)
        return _estimate(params["messages"], params.get("tools"), params.get("system"))

    async def prefill(self, context: LLMContext, user_text: str) -> PrefillResult:
        """Send ``max_tokens=1`` with the real request's blocks, partial words as their own."""
        params = await self._params(context, user_text)
        # No SDK retries: a 429 or 5xx is one failed prefill, and the planner backs off.
        response = await self.llm._client.with_options(max_retries=0).messages.create(**params)
        usage = response.usage
        read = getattr(usage, "cache_read_input_tokens", 0) or 0
        created = getattr(usage, "cache_creation_input_tokens", 0) or 0
        return PrefillResult(prompt_tokens=usage.input_tokens + read + created, cached_tokens=read)


def backend_for(llm: LLMService) -> PrefillBackend:
    """The prefill backend for a Pipecat LLM service (Anthropic or OpenAI-compatible).

    Raises:
        TypeError: If the service is neither.
    """
    for cls in type(llm).__mro__:
        if cls.__name__ == "AnthropicLLMService":
            return AnthropicPrefill(llm)
    return OpenAIPrefill(llm)
