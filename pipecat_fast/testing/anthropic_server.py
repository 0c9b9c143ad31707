"""An Anthropic Messages streaming server on loopback, with ``cache_control`` semantics.

Pipecat's real ``AnthropicLLMService(api_key=..., client=AsyncAnthropic(base_url=...))`` talks
to it unchanged (``POST /v1/messages``, server-sent events). It shares the scripted replies,
latency model and control routes of :class:`~pipecat_fast.testing.openai_server.OpenAIEmulator`;
only the wire format and the caching rules differ. The rules, from Anthropic's prompt-caching
docs (``shared/reference/prompt_caching_rules.md``):

- the prompt is tools, then system, then messages; a block marked ``cache_control`` is a
  breakpoint, and a request writes a cache entry for the prefix up to each breakpoint;
- a request reads the longest cached prefix ending at a block boundary within about 20
  blocks before one of its breakpoints (the lookback);
- nothing is cached below the model's minimum (512-4,096 tokens; here a parameter);
- usage reports ``input_tokens`` net of ``cache_read_input_tokens`` and
  ``cache_creation_input_tokens``.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from loguru import logger

from pipecat_fast.testing._loopback import is_json_int, sleep_ms
from pipecat_fast.testing.openai_server import (
    OpenAIEmulator,
    RequestError,
    RequestRecord,
    content_text,
    read_json_body,
    stream_pieces,
)
from pipecat_fast.testing.prefix_cache import PrefixCache
from pipecat_fast.tokens import encode_within

LOOKBACK_BLOCKS = 20  # "automatic prefix checking looks back ~20 content blocks"


@dataclass(frozen=True)
class Block:
    """One content block of the rendered prompt: its text and whether it is a breakpoint."""

    text: str
    breakpoint: bool


def anthropic_error(message: str, *, status: int) -> web.Response:
    """An error in Anthropic's shape (``{"type": "error", "error": {...}}``)."""
    kind = {
        400: "invalid_request_error",
        413: "request_too_large",
        429: "rate_limit_error",
    }.get(status, "api_error")
    return web.json_response(
        {"type": "error", "error": {"type": kind, "message": message}}, status=status
    )


def render_blocks(body: dict[str, Any]) -> list[Block]:
    """The request as the model reads it, block by block: tools, system, messages.

    Raises:
        RequestError: If a field has the wrong shape.
    """
    blocks: list[Block] = []
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise RequestError("tools must be an array", "tools")
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise RequestError(f"tools.{i}: Input should be a valid dictionary", f"tools.{i}")
        text = "<tool>" + json.dumps({k: v for k, v in tool.items() if k != "cache_control"})
        blocks.append(Block(text, "cache_control" in tool))
    system = body.get("system")
    if isinstance(system, str):
        blocks.append(Block("<system>" + system, False))
    elif isinstance(system, list):
        for i, block in enumerate(system):
            if not isinstance(block, dict):
                raise RequestError(f"system.{i}: Input should be a valid dictionary", f"system.{i}")
            blocks.append(Block("<system>" + str(block.get("text", "")), "cache_control" in block))
    elif system is not None:
        raise RequestError("system must be a string or an array of blocks", "system")
    for i, message in enumerate(body["messages"]):
        header = f"<{message['role']}>"
        content = message.get("content")
        if isinstance(content, str):
            blocks.append(Block(header + content, False))
            continue
        if not isinstance(content, list) or not content:
            raise RequestError("content must be a string or a non-empty array", f"messages.{i}")
        for j, block in enumerate(content):
            if not isinstance(block, dict):
                raise RequestError("content blocks must be objects", f"messages.{i}.content.{j}")
            text = content_text([block]) if block.get("type") == "text" else json.dumps(block)
            blocks.append(Block((header if j == 0 else "") + text, "cache_control" in block))
    if body.get("cache_control") and blocks:  # automatic mode: breakpoint at the last block
        blocks[-1] = Block(blocks[-1].text, True)
    return blocks


def validate_messages_request(body: Any) -> dict[str, Any]:
    """Check the fields the emulator relies on.

    Raises:
        RequestError: Naming the offending field.
    """
    if not isinstance(body, dict):
        raise RequestError("request body must be a JSON object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise RequestError("model: Field required", "model")
    max_tokens = body.get("max_tokens")
    if not is_json_int(max_tokens) or max_tokens < 1:
        raise RequestError("max_tokens: must be a positive integer", "max_tokens")
    if body.get("stream") is not None and not isinstance(body["stream"], bool):
        raise RequestError("stream: Input should be a valid boolean", "stream")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages: at least one message is required", "messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise RequestError(f"messages.{i}.role: must be user or assistant", f"messages.{i}")
    return body


class AnthropicEmulator(OpenAIEmulator):
    """Anthropic Messages API on 127.0.0.1 with ``cache_control`` prefix caching.

    Args:
        profile: Latency model (ms figures with their sources).
        replies: ``(user text, reply)`` pairs to stream.
        min_cache_tokens: The model's minimum cacheable prefix (Anthropic: 512-4,096 by
            model; 1,024 for the Sonnet 4.x family, per the docs quoted in
            ``prompt_caching_rules.md``).
        ttl_s: Cache lifetime after the last write or read (Anthropic default: 5 minutes).
        context_window: Most prompt tokens a request may have; a longer prompt gets
            Anthropic's 400 "prompt is too long". Default: Claude's standard 200,000. Counting
            stops once the prompt is over it, so a huge prompt is never tokenized whole.
        port: TCP port; 0 picks a free one.
    """

    # Anthropic: "The maximum request size is 32 MB for standard API endpoints" (413
    # request_too_large; docs.claude.com/en/api/errors).
    max_body_bytes = 32 * 1024 * 1024

    def __init__(
        self,
        profile=None,
        *,
        replies=(),
        min_cache_tokens: int = 1024,
        ttl_s: float = 300.0,
        context_window: int = 200_000,
        port: int = 0,
    ):
        kwargs = {} if profile is None else {"profile": profile}
        super().__init__(
            replies=replies,
            cache=PrefixCache(ttl_s=ttl_s, min_tokens=min_cache_tokens, block_tokens=1),
            context_window=context_window,
            port=port,
            **kwargs,
        )

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``, for ``AsyncAnthropic(base_url=...)``."""
        return f"http://127.0.0.1:{self.port}"

    def routes(self, app: web.Application) -> None:
        """Anthropic's messages route plus the emulator's control routes."""
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_get("/_emulator/stats", self._stats)
        app.router.add_post("/_emulator/reset", self._reset)
        app.router.add_post("/_emulator/faults", self._set_faults)

    def _error_response(self, error: RequestError) -> web.Response:
        """``error`` in Anthropic's shape."""
        return anthropic_error(str(error), status=error.status)

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        try:
            body = validate_messages_request(await read_json_body(request))
            blocks = render_blocks(body)
            tokens: list[int] = []
            ends: list[int] = []  # token position at the end of each block
            for block in blocks:
                tokens.extend(encode_within(block.text, self.context_window - len(tokens)))
                ends.append(len(tokens))
                if len(tokens) > self.context_window:
                    raise RequestError(
                        f"prompt is too long: {len(tokens)} tokens > {self.context_window} maximum"
                    )
        except RequestError as e:
            return self._error_response(e)
        if self._faults:
            status = self._faults.pop(0)
            return anthropic_error(f"injected fault {status}", status=status)

        breakpoints = [ends[i] for i, b in enumerate(blocks) if b.breakpoint]
        candidates = {
            ends[j]
            for i, b in enumerate(blocks)
            if b.breakpoint
            for j in range(max(0, i - LOOKBACK_BLOCKS + 1), i + 1)
        }
        namespace = body["model"]
        read = self.cache.lookup(namespace, tokens, started, candidates, contiguous=False)
        written_upto = max(breakpoints, default=0)
        creation = written_upto - read if written_upto >= self.cache.min_tokens else 0
        record = RequestRecord(
            id=f"msg_emu{next(self._ids)}",
            namespace=namespace,
            prompt_tokens=len(tokens),
            cached_tokens=read,
            max_tokens=body["max_tokens"],
            stream=bool(body.get("stream")),
            model_ttft_ms=self.profile.llm_ttft_ms(len(tokens) - read),
            started_at=time.time(),
            extra={"cache_creation_input_tokens": max(0, creation)},
        )
        self.requests.append(record)
        p = self.profile
        await sleep_ms(
            p.rtt_ms / 2 + p.llm_queue_ms + record.uncached_tokens * p.llm_prefill_ms_per_token
        )
        if breakpoints:
            self.cache.insert(namespace, tokens, time.monotonic(), breakpoints)
        await sleep_ms(p.llm_first_token_ms + p.rtt_ms / 2)
        messages = [{"role": m["role"], "content": m.get("content")} for m in body["messages"]]
        reply = self.replies.reply_for(messages)
        if isinstance(reply, dict):  # scripted tool calls are emulated for OpenAI only
            reply = str(reply.get("after", ""))
        pieces, finish = stream_pieces(reply, body["max_tokens"])
        record.completion_tokens = len(pieces)
        usage = {
            "input_tokens": record.prompt_tokens - read - max(0, creation),
            "cache_creation_input_tokens": max(0, creation),
            "cache_read_input_tokens": read,
            "output_tokens": record.completion_tokens,
        }
        stop_reason = "end_turn" if finish == "stop" else "max_tokens"
        if not record.stream:
            await sleep_ms(1000.0 * max(0, len(pieces) - 1) / p.llm_decode_tokens_per_s)
            return web.json_response(
                {
                    "id": record.id,
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": [{"type": "text", "text": "".join(pieces)}],
                    "stop_reason": stop_reason,
                    "stop_sequence": None,
                    "usage": usage,
                }
            )
        return await self._sse(request, record, body["model"], pieces, stop_reason, usage)

    async def _sse(self, request, record, model, pieces, stop_reason, usage) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})

        def event(kind: str, data: dict[str, Any]) -> bytes:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

        start_usage = {**usage, "output_tokens": 1}
        message = {
            "id": record.id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": model,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": start_usage,
        }
        interval_ms = 1000.0 / self.profile.llm_decode_tokens_per_s
        try:
            await response.prepare(request)
            await response.write(event("message_start", {"message": message}))
            block = {"index": 0, "content_block": {"type": "text", "text": ""}}
            await response.write(event("content_block_start", block))
            for i, piece in enumerate(pieces):
                if i:
                    await sleep_ms(interval_ms)
                if piece:
                    delta = {"index": 0, "delta": {"type": "text_delta", "text": piece}}
                    await response.write(event("content_block_delta", delta))
            await response.write(event("content_block_stop", {"index": 0}))
            await response.write(
                event(
                    "message_delta",
                    {
                        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                        "usage": {"output_tokens": record.completion_tokens},
                    },
                )
            )
            await response.write(event("message_stop", {}))
            await response.write_eof()
        except ConnectionResetError:
            record.cancelled = True
            logger.debug(f"AnthropicEmulator: client went away during {record.id}")
        except asyncio.CancelledError:
            record.cancelled = True
            raise
        return response
