"""Test doubles: an OpenAI LLM service whose "provider" emulates automatic prefix caching.

The service is Pipecat's real ``OpenAILLMService`` (real adapter, real tool registration and
system-instruction composition); only the HTTP call is replaced. The fake provider caches
like OpenAI documents it (../shared/reference/prompt_caching_rules.md): a request reads from
cache the longest token prefix it shares with an earlier request, rounded down to 128-token
increments, and nothing below 1,024 tokens.
"""

from __future__ import annotations

import json

from openai.types.chat import ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import Choice, ChoiceDelta
from openai.types.completion_usage import CompletionUsage, PromptTokensDetails
from pipecat.services.openai.llm import OpenAILLMService

from pipecat_fast import tokens


class FakeStream:
    def __init__(self, chunks):
        self._chunks = chunks

    def __aiter__(self):
        return self._gen()

    async def _gen(self):
        for c in self._chunks:
            yield c

    async def close(self):
        pass


def _chunk(**kw) -> ChatCompletionChunk:
    return ChatCompletionChunk(
        id="fake", created=0, model="gpt-4o", object="chat.completion.chunk", **kw
    )


class PrefixCachingProvider:
    """Emulates OpenAI's automatic prefix cache over serialized requests."""

    def __init__(self, minimum: int = 1024, step: int = 128) -> None:
        self.minimum = minimum
        self.step = step
        self.seen: list[list[int]] = []
        self.requests: list[dict] = []
        self.cached: list[int] = []

    def serve(self, params: dict) -> tuple[int, int]:
        self.requests.append(params)
        # Tools precede messages in the cached prefix.
        text = json.dumps(params.get("tools") or [], ensure_ascii=False) + json.dumps(
            params["messages"], ensure_ascii=False
        )
        ids = tokens.encode(text)
        best = 0
        for old in self.seen:
            n = 0
            for a, b in zip(old, ids, strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        self.seen.append(ids)
        cached = 0 if best < self.minimum else best - best % self.step
        self.cached.append(cached)
        return len(ids), cached


class FakeOpenAILLMService(OpenAILLMService):
    """Real ``OpenAILLMService``; the completion comes from ``PrefixCachingProvider``."""

    def __init__(self, provider: PrefixCachingProvider, **kwargs) -> None:
        super().__init__(api_key="test-key-not-used", **kwargs)
        self.fake_provider = provider
        self.after_request = []  # callbacks(service) run after each request is served

    async def get_chat_completions(self, context):
        adapter = self.get_llm_adapter()
        params = await adapter.get_llm_invocation_params(
            context,
            system_instruction=self._settings.system_instruction or None,
            convert_developer_to_user=False,
        )
        prompt, cached = self.fake_provider.serve(dict(params))
        for callback in self.after_request:
            callback(self)
        usage = CompletionUsage(
            prompt_tokens=prompt,
            completion_tokens=1,
            total_tokens=prompt + 1,
            prompt_tokens_details=PromptTokensDetails(cached_tokens=cached),
        )
        return FakeStream(
            [
                _chunk(choices=[Choice(index=0, delta=ChoiceDelta(content="OK"))]),
                _chunk(choices=[], usage=usage),
            ]
        )
