"""Prefill-only requests that carry exactly the bytes the real turn will send.

A backend renders the request with the LLM service's own adapter and settings — the same
system instruction, tools and history the service will send when the turn ends — appends the
caller's stable words as the user message, asks for at most one token, and reports the
provider's usage. It talks through the service's own client, so base URL, keys, headers and
``prompt_cache_key`` (in the service settings' ``extra``) are the real request's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.llm_service import LLMService
from pipecat.utils.types import is_given

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
            1,024 when the service points at ``api.openai.com``, else 0.

    Raises:
        TypeError: If ``llm`` is not OpenAI-compatible.
    """

    def __init__(self, llm: LLMService, *, min_prompt_tokens: int | None = None):
        if not hasattr(llm, "build_chat_completion_params") or not hasattr(llm, "_client"):
            raise TypeError(f"{llm} is not an OpenAI-compatible Pipecat LLM service")
        self.llm = llm
        if min_prompt_tokens is None:
            base_url = str(getattr(llm._client, "base_url", ""))
            min_prompt_tokens = 1024 if "api.openai.com" in base_url else 0
        self.min_prompt_tokens = min_prompt_tokens

    async def _params(self, context: LLMContext, user_text: str) -> dict[str, Any]:
        llm = self.llm
        adapter = llm.get_llm_adapter()
        system = llm._settings.system_instruction
        invocation = await adapter.get_llm_invocation_params(
            provisional_context(context, user_text),
            system_instruction=system if is_given(system) else None,
            convert_developer_to_user=not llm.supports_developer_role,
        )
        params = llm.build_chat_completion_params(invocation)
        params.pop("stream_options", None)
        params.pop("max_completion_tokens", None)
        params.update(stream=False, max_tokens=1)
        return params

    async def estimate_tokens(self, context: LLMContext, user_text: str) -> int:
        """Approximate prompt tokens of the prefill request."""
        params = await self._params(context, user_text)
        return _estimate(params.get("messages"), params.get("tools"))

    async def prefill(self, context: LLMContext, user_text: str) -> PrefillResult:
        """Send ``max_tokens=1`` with the real request's messages, tools and settings."""
        params = await self._params(context, user_text)
        response = await self.llm._client.chat.completions.create(**params)
        usage = response.usage
        details = getattr(usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None) or 0
        return PrefillResult(
            prompt_tokens=usage.prompt_tokens if usage else 0, cached_tokens=cached
        )
