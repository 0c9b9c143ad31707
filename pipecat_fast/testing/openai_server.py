"""An OpenAI-compatible ``/v1/chat/completions`` streaming server on loopback.

Pipecat's real ``OpenAILLMService(base_url=emulator.base_url, api_key="...")`` talks to it
unchanged. Its time to first token follows a prefix-cache model::

    TTFT = RTT + queue + uncached prompt tokens x prefill cost + first token

with a real token-prefix cache (:class:`~pipecat_fast.testing.prefix_cache.PrefixCache`, TTL
and LRU) over the request's o200k tokens, partitioned by model and ``prompt_cache_key``. Usage
reports ``prompt_tokens_details.cached_tokens``. It streams scripted replies, looked up by the
last user message, at the profile's decode rate.

With ``capacity=EngineCapacity(...)`` (:mod:`.capacity`) it is one shared self-hosted engine
instead: ``slots`` requests at once, the rest queued, prefill compute shared by the requests
prefilling together; ``queue`` then is the wait for a slot, and ``GET /metrics`` reports the
load with vLLM's gauge names (``vllm:num_requests_running``, ``vllm:num_requests_waiting``).

Besides the OpenAI routes it serves ``GET /_emulator/stats`` (every request's accounting),
``POST /_emulator/reset`` (clear the cache and the records) and ``POST /_emulator/faults``
(make the next requests fail with a given HTTP status), for benches and tests.
"""

from __future__ import annotations

import asyncio
import codecs
import itertools
import json
import time
import zlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from aiohttp import web
from loguru import logger

from pipecat_fast.request_tokens import chat_tokens
from pipecat_fast.testing._loopback import (
    BadJSON,
    HttpEmulator,
    is_json_int,
    parse_json,
    sleep_ms,
)
from pipecat_fast.testing.capacity import ClientGone, EngineCapacity, SharedPrefill, Slots
from pipecat_fast.testing.prefix_cache import PrefixCache
from pipecat_fast.testing.profiles import SAME_REGION, LatencyProfile
from pipecat_fast.textnorm import normalize
from pipecat_fast.tokens import encode, get_encoding

_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}

# Replies for user text the script does not know: realistic voice answers, several scripts.
FALLBACK_REPLIES: tuple[str, ...] = (
    "Sure, I can help with that. Could you tell me a little more about what you need?",
    "Thanks for waiting. I have checked that for you, and everything looks fine on our side.",
    "Claro, con gusto le ayudo. ¿Me puede dar su nombre completo, por favor?",
    "जी हाँ, मैं आपकी मदद कर सकती हूँ। कृपया अपना नाम बताइए।",
    "かしこまりました。ご予約の日時を教えていただけますか？",
)


@dataclass
class RequestRecord:
    """Accounting of one chat completion request (times in ms, tokens in o200k tokens)."""

    id: str
    namespace: str
    prompt_tokens: int
    cached_tokens: int
    max_tokens: int | None
    stream: bool
    model_ttft_ms: float
    started_at: float
    completion_tokens: int = 0
    decoded_tokens: int = 0
    status: int = 200
    cancelled: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    queue_ms: float = 0.0
    """Time waiting for a slot (with a capacity model; else the profile's fixed queue)."""
    prefill_ms: float = 0.0
    """Time computing the uncached prompt (with a capacity model)."""

    @property
    def uncached_tokens(self) -> int:
        """Prompt tokens that had to be prefilled."""
        return self.prompt_tokens - self.cached_tokens


class RequestError(Exception):
    """A malformed request, answered with the provider's own error shape."""

    def __init__(
        self, message: str, param: str | None = None, status: int = 400, code: str | None = None
    ):
        super().__init__(message)
        self.param = param
        self.status = status
        self.code = code


def openai_error(
    message: str, *, status: int, param: str | None = None, code: str | None = None
) -> web.Response:
    """An error response in OpenAI's shape (``{"error": {"message", "type", ...}}``)."""
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        413: "invalid_request_error",
        429: "rate_limit_exceeded",
    }.get(status, "server_error")
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return web.json_response(body, status=status)


async def read_json_body(request: web.Request) -> Any:
    """The request's body parsed by :func:`~pipecat_fast.testing._loopback.parse_json`.

    Raises:
        RequestError: Status 413 for a body over the emulator's ``max_body_bytes``, 400 for
            one that is not UTF-8, not JSON, nested too deep or holding a lone surrogate.
    """
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        limit = request.client_max_size
        raise RequestError(
            f"request body exceeds the maximum size of {limit} bytes",
            status=413,
            code="request_too_large",
        ) from None
    try:
        return parse_json(raw)
    except BadJSON as e:
        raise RequestError(f"invalid JSON body: {e}") from None


def content_text(content: Any) -> str:
    """The text of a message ``content``: a string, or a list of ``{"type": "text"}`` parts.

    Raises:
        RequestError: If the content is neither.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict):
                raise RequestError("content parts must be objects", "messages")
            if part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            else:
                parts.append(json.dumps(part, ensure_ascii=False, sort_keys=True))
        return "".join(parts)
    raise RequestError("content must be a string or a list of parts", "messages")


def validate_chat_request(body: Any) -> dict[str, Any]:
    """Check the fields the emulator relies on.

    Returns:
        The request body.

    Raises:
        RequestError: Naming the offending parameter.
    """
    if not isinstance(body, dict):
        raise RequestError("request body must be a JSON object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise RequestError("you must provide a model parameter", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty array", "messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            raise RequestError(f"messages[{i}] needs a valid role", f"messages[{i}].role")
    for name in ("max_tokens", "max_completion_tokens"):
        value = body.get(name)
        if value is not None and (not is_json_int(value) or value < 1):
            raise RequestError(f"{name} must be a positive integer", name)
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise RequestError("tools must be an array", "tools")
        for i, tool in enumerate(tools):
            if not isinstance(tool, dict):
                raise RequestError(f"tools[{i}] must be an object", f"tools[{i}]")
    if body.get("stream") is not None and not isinstance(body["stream"], bool):
        raise RequestError("stream must be a boolean", "stream")
    options = body.get("stream_options")
    if options is not None:
        if not isinstance(options, dict):
            raise RequestError("stream_options must be an object", "stream_options")
        usage = options.get("include_usage")
        if usage is not None and not isinstance(usage, bool):
            raise RequestError(
                "stream_options.include_usage must be a boolean", "stream_options.include_usage"
            )
    key = body.get("prompt_cache_key")
    if key is not None and not isinstance(key, str):
        raise RequestError("prompt_cache_key must be a string", "prompt_cache_key")
    return body


class ReplyBook:
    """Scripted replies looked up by the last user message (case/punctuation-insensitive).

    A reply is text, or a tool call ``{"tool_call": {"name": ..., "arguments": {...}},
    "after": "text once the tool answered"}``.
    """

    def __init__(self, pairs: Iterable[tuple[str, str | dict[str, Any]]] = ()):
        self._replies: dict[str, str | dict[str, Any]] = {}
        self.add(pairs)

    def add(self, pairs: Iterable[tuple[str, str | dict[str, Any]]]) -> None:
        """Add ``(user text, reply)`` pairs."""
        for user_text, reply in pairs:
            self._replies[normalize(user_text)] = reply

    def reply_for(self, messages: list[dict[str, Any]]) -> str | dict[str, Any]:
        """The scripted reply to the last user message, else a stable fallback reply.

        After a tool result (a last message with role ``tool``) the tool call's ``after``
        text is returned, so a scripted tool call is made once per user message.
        """
        user_text = ""
        for message in reversed(messages):
            if message.get("role") == "user":
                user_text = content_text(message.get("content"))
                break
        key = normalize(user_text)
        reply = self._replies.get(key)
        if reply is None:
            return FALLBACK_REPLIES[zlib.crc32(key.encode("utf-8")) % len(FALLBACK_REPLIES)]
        if isinstance(reply, dict) and messages and messages[-1].get("role") == "tool":
            return str(reply.get("after", FALLBACK_REPLIES[0]))
        return reply


def stream_pieces(text: str, max_tokens: int | None) -> tuple[list[str], str]:
    """Split a reply into the text deltas a streaming API sends, one per o200k token.

    A token that ends inside a UTF-8 sequence is held until the sequence completes, as the
    hosted APIs do (deltas are always valid text).

    Returns:
        The deltas (at most ``max_tokens`` tokens' worth) and the finish reason
        (``"stop"`` or ``"length"``).
    """
    enc = get_encoding()
    tokens = encode(text)
    finish = "stop"
    if max_tokens is not None and len(tokens) > max_tokens:
        tokens, finish = tokens[:max_tokens], "length"
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pieces = [decoder.decode(enc.decode_single_token_bytes(t)) for t in tokens]
    tail = decoder.decode(b"", final=True)
    if tail:
        pieces.append(tail)
    return pieces, finish


class OpenAIEmulator(HttpEmulator):
    """OpenAI-compatible chat completions on loopback, with a prefix-cache latency model.

    Use as an async context manager::

        async with OpenAIEmulator(SAME_REGION, replies=[("hi", "Hello!")]) as llm:
            service = OpenAILLMService(api_key="x", base_url=llm.base_url)

    Args:
        profile: Latency model (ms figures with their sources).
        replies: ``(user text, reply)`` pairs to stream.
        cache: The prefix cache; defaults to OpenAI's rules (128-token blocks from 1,024).
        context_window: Most prompt tokens a request may have; a longer prompt gets OpenAI's
            400 ``context_length_exceeded``. Default: GPT-4.1's 1,047,576 tokens. Counting
            stops once the prompt is over it, so a huge prompt is never tokenized whole.
        port: TCP port on 127.0.0.1; 0 picks a free one.
        capacity: A shared engine's slots and prefill throughput (:mod:`.capacity`); ``None``
            answers every request as if it were alone (the profile's fixed queue time).
    """

    def __init__(
        self,
        profile: LatencyProfile = SAME_REGION,
        *,
        replies: Iterable[tuple[str, str | dict[str, Any]]] = (),
        cache: PrefixCache | None = None,
        context_window: int = 1_047_576,
        port: int = 0,
        capacity: EngineCapacity | None = None,
    ):
        super().__init__(port=port)
        self.capacity = capacity
        self._slots = Slots(capacity.slots) if capacity is not None else None
        self._prefill = (
            SharedPrefill(capacity.prefill_tokens_per_s) if capacity is not None else None
        )
        self._running = 0
        self.profile = profile
        self.context_window = context_window
        self.replies = ReplyBook(replies)
        self.cache = cache if cache is not None else PrefixCache()
        self.requests: list[RequestRecord] = []
        self._faults: list[int] = []
        self._ids = itertools.count(1)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, for ``OpenAILLMService(base_url=...)``."""
        return f"http://127.0.0.1:{self._port}/v1"

    def fail_next(self, status: int, count: int = 1) -> None:
        """Answer the next ``count`` requests with HTTP ``status`` (e.g. 429, 500)."""
        self._faults.extend([status] * count)

    def reset(self) -> None:
        """Clear the prefix cache, the request records and pending faults."""
        self.cache.clear()
        self.requests.clear()
        self._faults.clear()

    async def start(self) -> None:
        """Load the tokenizer, bind and serve."""
        # Loading the o200k vocabulary takes a few hundred ms: do it now, not in the first
        # request's TTFT.
        encode("warm up")
        await super().start()

    def routes(self, app: web.Application) -> None:
        """OpenAI's chat completions plus the emulator's control routes."""
        app.router.add_post("/v1/chat/completions", self._chat_completions)
        app.router.add_get("/_emulator/stats", self._stats)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_post("/_emulator/reset", self._reset)
        app.router.add_post("/_emulator/faults", self._set_faults)

    # -- routes ---------------------------------------------------------------------------

    async def _stats(self, request: web.Request) -> web.Response:
        records = [asdict(r) | {"uncached_tokens": r.uncached_tokens} for r in self.requests]
        return web.json_response({"requests": records, "cache": asdict(self.cache.stats)})

    async def _metrics(self, request: web.Request) -> web.Response:
        """The engine's load in Prometheus text, with vLLM's gauge names."""
        running = self._slots.running if self._slots is not None else self._running
        waiting = self._slots.waiting if self._slots is not None else 0
        text = (
            "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
            "# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{model_name="emulator"}} {running}\n'
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
            "# TYPE vllm:num_requests_waiting gauge\n"
            f'vllm:num_requests_waiting{{model_name="emulator"}} {waiting}\n'
        )
        return web.Response(text=text, content_type="text/plain")

    async def _reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"ok": True})

    async def _set_faults(self, request: web.Request) -> web.Response:
        try:
            body = await read_json_body(request)
            status, count = int(body["status"]), int(body.get("count", 1))
        except RequestError as e:
            return self._error_response(e)
        except (ValueError, KeyError, TypeError) as e:
            return self._error_response(RequestError(f"bad faults request: {e}"))
        if not 400 <= status <= 599 or not 0 <= count <= 10_000:
            message = "bad faults request: status must be 400-599 and count 0-10000"
            return self._error_response(RequestError(message))
        self.fail_next(status, count)
        return web.json_response({"ok": True})

    def _error_response(self, error: RequestError) -> web.Response:
        """``error`` in this provider's shape."""
        return openai_error(str(error), status=error.status, param=error.param, code=error.code)

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        try:
            body = validate_chat_request(await read_json_body(request))
            for message in body["messages"]:
                content_text(message.get("content"))  # a malformed content is a 400
            # The prompt as OpenAI counts it (role and tool framing included).
            tokens = chat_tokens(body["messages"], body.get("tools"), limit=self.context_window)
            if len(tokens) > self.context_window:
                raise RequestError(
                    f"This model's maximum context length is {self.context_window} tokens. "
                    f"However, your messages resulted in at least {len(tokens)} tokens. "
                    "Please reduce the length of the messages.",
                    "messages",
                    code="context_length_exceeded",
                )
        except RequestError as e:
            return self._error_response(e)
        if self._faults:
            status = self._faults.pop(0)
            logger.debug(f"OpenAIEmulator: injected HTTP {status}")
            return openai_error(f"injected fault {status}", status=status)

        namespace = f"{body['model']}|{body.get('prompt_cache_key') or ''}"
        cached = self.cache.lookup(namespace, tokens, started)
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        record = RequestRecord(
            id=f"chatcmpl-emu{next(self._ids)}",
            namespace=namespace,
            prompt_tokens=len(tokens),
            cached_tokens=cached,
            max_tokens=max_tokens,
            stream=bool(body.get("stream")),
            model_ttft_ms=self.profile.llm_ttft_ms(len(tokens) - cached),
            started_at=time.time(),
        )
        self.requests.append(record)

        p = self.profile
        if self._slots is not None:
            return await self._shared_engine(request, record, body, namespace, tokens)
        self._running += 1
        try:
            # Request travels up, waits in the queue, is prefilled; then the cache holds it
            # even if the client has gone (a cancelled request still paid for its prefill).
            await sleep_ms(
                p.rtt_ms / 2 + p.llm_queue_ms + record.uncached_tokens * p.llm_prefill_ms_per_token
            )
            self.cache.insert(namespace, tokens, time.monotonic())
            await sleep_ms(p.llm_first_token_ms + p.rtt_ms / 2)
            return await self._answer(request, record, body)
        finally:
            self._running -= 1

    async def _shared_engine(
        self,
        request: web.Request,
        record: RequestRecord,
        body: dict[str, Any],
        namespace: str,
        tokens: list[int],
    ) -> web.StreamResponse:
        """One request on the shared engine: a slot, shared prefill, then the reply."""
        assert self._slots is not None and self._prefill is not None
        p = self.profile
        await sleep_ms(p.rtt_ms / 2)
        queued = time.monotonic()
        await self._slots.acquire()
        try:
            record.queue_ms = (time.monotonic() - queued) * 1000.0
            if request.transport is None or request.transport.is_closing():
                record.cancelled = True  # the client left while it queued: never runs
                return web.Response(status=499)
            # The prefix cache is read when the request starts running, not when it arrived.
            record.cached_tokens = self.cache.lookup(namespace, tokens, time.monotonic())
            computing = time.monotonic()
            transport = request.transport
            try:
                await self._prefill.compute(
                    record.uncached_tokens,
                    gone=lambda: transport is None or transport.is_closing(),
                )
            except ClientGone:
                record.cancelled = True  # the client left mid-prefill: the engine stops it
                record.prefill_ms = (time.monotonic() - computing) * 1000.0
                return web.Response(status=499)
            record.prefill_ms = (time.monotonic() - computing) * 1000.0
            self.cache.insert(namespace, tokens, time.monotonic())
            await sleep_ms(p.llm_first_token_ms + p.rtt_ms / 2)
            return await self._answer(request, record, body)
        finally:
            self._slots.release()

    async def _answer(
        self, request: web.Request, record: RequestRecord, body: dict[str, Any]
    ) -> web.StreamResponse:
        """Send the scripted reply (after prefill and first token)."""
        p = self.profile
        max_tokens = record.max_tokens

        reply = self.replies.reply_for(body["messages"])
        if isinstance(reply, dict):
            return await self._tool_call(request, record, body, reply["tool_call"])
        pieces, finish = stream_pieces(reply, max_tokens)
        record.completion_tokens = len(pieces)
        if not record.stream:
            record.decoded_tokens = len(pieces)
            await sleep_ms(1000.0 * max(0, len(pieces) - 1) / p.llm_decode_tokens_per_s)
            return web.json_response(self._completion(record, body["model"], pieces, finish))
        return await self._stream(request, record, body, pieces, finish)

    # -- responses ------------------------------------------------------------------------

    async def _tool_call(
        self, request: web.Request, record: RequestRecord, body: dict[str, Any], call: dict
    ) -> web.StreamResponse:
        """Answer with one function call (streamed as OpenAI streams ``tool_calls``)."""
        arguments = json.dumps(call.get("arguments", {}))
        record.completion_tokens = len(encode(arguments)) + 1
        record.decoded_tokens = record.completion_tokens
        record.extra["tool_call"] = call.get("name")
        tool = {"index": 0, "id": f"call_{record.id}", "type": "function"}
        first = {**tool, "function": {"name": call["name"], "arguments": ""}}
        rest = {"index": 0, "function": {"arguments": arguments}}
        if not record.stream:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {**tool, "function": {"name": call["name"], "arguments": arguments}}
                ],
            }
            return web.json_response(
                {
                    "id": record.id,
                    "object": "chat.completion",
                    "created": int(record.started_at),
                    "model": body["model"],
                    "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                    "usage": self._usage(record),
                }
            )
        deltas = [
            ({"role": "assistant", "tool_calls": [first]}, None),
            ({"tool_calls": [rest]}, None),
        ]
        deltas.append(({}, "tool_calls"))
        return await self._send_chunks(request, record, body, deltas)

    def _timings(self, record: RequestRecord) -> dict[str, Any]:
        """``{"timings": ...}`` in llama.cpp's shape (with the queue) for a shared engine."""
        if self.capacity is None:
            return {}
        return {
            "timings": {
                "queue_ms": round(record.queue_ms, 3),
                "prompt_ms": round(record.prefill_ms, 3),
                "cache_n": record.cached_tokens,
                "prompt_n": record.uncached_tokens,
            }
        }

    def _usage(self, record: RequestRecord) -> dict[str, Any]:
        return {
            "prompt_tokens": record.prompt_tokens,
            "completion_tokens": record.completion_tokens,
            "total_tokens": record.prompt_tokens + record.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": record.cached_tokens},
        }

    def _completion(
        self, record: RequestRecord, model: str, pieces: list[str], finish: str
    ) -> dict[str, Any]:
        message = {"role": "assistant", "content": "".join(pieces)}
        return {
            "id": record.id,
            "object": "chat.completion",
            "created": int(record.started_at),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": self._usage(record),
            **self._timings(record),
        }

    async def _stream(
        self,
        request: web.Request,
        record: RequestRecord,
        body: dict[str, Any],
        pieces: list[str],
        finish: str,
    ) -> web.StreamResponse:
        deltas: list[tuple[dict[str, Any], str | None]] = [
            ({"role": "assistant", "content": ""}, None)
        ]
        deltas += [({"content": piece}, None) for piece in pieces if piece]
        deltas.append(({}, finish))
        return await self._send_chunks(request, record, body, deltas, pace=True)

    async def _send_chunks(
        self,
        request: web.Request,
        record: RequestRecord,
        body: dict[str, Any],
        deltas: list[tuple[dict[str, Any], str | None]],
        *,
        pace: bool = False,
    ) -> web.StreamResponse:
        """Stream ``(delta, finish_reason)`` chunks as SSE, at the decode rate if ``pace``."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
            payload = {
                "id": record.id,
                "object": "chat.completion.chunk",
                "created": int(record.started_at),
                "model": body["model"],
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }
            return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()

        interval_ms = 1000.0 / self.profile.llm_decode_tokens_per_s
        try:
            await response.prepare(request)
            for i, (delta, finish_reason) in enumerate(deltas):
                # The role chunk and each token's delta arrive one decode step apart.
                if pace and 1 < i < len(deltas) - 1:
                    await sleep_ms(interval_ms)
                await response.write(chunk(delta, finish_reason))
                if pace and delta.get("content"):
                    record.decoded_tokens += 1  # generated and sent (a cancel stops it)
            if (body.get("stream_options") or {}).get("include_usage"):
                # OpenAI sends usage in a last chunk with an empty choices list.
                usage = {
                    "id": record.id,
                    "object": "chat.completion.chunk",
                    "created": int(record.started_at),
                    "model": body["model"],
                    "choices": [],
                    "usage": self._usage(record),
                    **self._timings(record),
                }
                await response.write(f"data: {json.dumps(usage)}\n\n".encode())
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionResetError:
            record.cancelled = True
            logger.debug(f"OpenAIEmulator: client went away during {record.id}")
        except asyncio.CancelledError:
            record.cancelled = True
            raise
        return response
