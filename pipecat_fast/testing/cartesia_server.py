"""A Cartesia-compatible TTS WebSocket server on loopback.

Speaks the wire protocol of Cartesia's ``/tts/websocket`` as Pipecat's real
``CartesiaTTSService(url=emulator.url, api_key="...")`` uses it: generation requests with a
``context_id`` and ``continue`` flag, ``cancel`` messages; replies ``chunk`` (base64 PCM),
``timestamps`` (word timestamps), ``done`` and ``error``. Connection handshake cost and time
to first byte follow the latency profile; audio is :mod:`pipecat_fast.testing.synth`
stand-in speech generated faster than real time.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from dataclasses import dataclass, field
from typing import Any

from loguru import logger
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from pipecat_fast.testing._loopback import (
    BadJSON,
    WebSocketEmulator,
    is_json_int,
    parse_json,
    sleep_ms,
)
from pipecat_fast.testing.profiles import SAME_REGION, LatencyProfile
from pipecat_fast.testing.synth import plan_speech, render_pcm_chunks

# Audio is generated this many times faster than real time once it starts (our assumption;
# streaming TTS services send audio well ahead of playback).
REALTIME_FACTOR = 5.0
CHUNK_MS = 40
# Output sample rates accepted (Hz): Cartesia's raw PCM rates run from 8,000 (telephony) to
# 48,000; accepting any integer in that range keeps rendering cost and chunk sizes sane.
MIN_SAMPLE_RATE = 8_000
MAX_SAMPLE_RATE = 48_000
# Longest transcript accepted in one message (characters; our limit, not a documented one):
# about five minutes of speech, where Pipecat sends a sentence at a time. Audio is rendered
# chunk by chunk as it is sent, so memory does not grow with the text either way.
MAX_TRANSCRIPT_CHARS = 5_000
_END = object()  # queued after the last transcript of a context (``continue`` false)


@dataclass
class ContextRecord:
    """What one ``context_id`` asked for and got (times in s, epoch)."""

    context_id: str
    transcripts: list[str] = field(default_factory=list)
    first_request_at: float | None = None
    first_chunk_at: float | None = None
    audio_ms: float = 0.0
    cancelled: bool = False

    @property
    def ttfb_ms(self) -> float | None:
        """Observed first-byte time of the context at the server (ms)."""
        if self.first_request_at is None or self.first_chunk_at is None:
            return None
        return (self.first_chunk_at - self.first_request_at) * 1000.0


class _Context:
    """Generation state of one context on one connection."""

    def __init__(self, context_id: str, sample_rate: int):
        self.context_id = context_id
        self.sample_rate = sample_rate
        self.queue: asyncio.Queue[object] = asyncio.Queue()
        self.task: asyncio.Task | None = None


class CartesiaEmulator(WebSocketEmulator):
    """Cartesia TTS WebSocket on 127.0.0.1.

    A malformed message is answered with Cartesia's ``error`` message (``status_code`` 400,
    ``done``) and the connection stays open: unparsable or too deeply nested JSON, a missing
    ``context_id``, a transcript that is not a string or is over :data:`MAX_TRANSCRIPT_CHARS`,
    an ``output_format`` that is not ``pcm_s16le`` at an integer rate from 8,000 to 48,000 Hz.

    Args:
        profile: Latency model: ``rtt_ms``, ``tts_ttfb_ms``, ``tts_handshake_rtts``.
        port: TCP port; 0 picks a free one.
        require_api_key: Reject handshakes without an ``X-API-Key`` header (HTTP 401).
        **options: ``host``, ``ssl``, ``idle_close_s`` (see
            :class:`~pipecat_fast.testing._loopback.WebSocketEmulator`); Cartesia closes
            idle sockets after 5 minutes (``pipecat_fast/providers/tts.json``).

    Attributes:
        connections: Number of accepted connections.
        contexts: Every context seen, by id.
    """

    def __init__(
        self,
        profile: LatencyProfile = SAME_REGION,
        *,
        port: int = 0,
        require_api_key: bool = True,
        **options: Any,
    ):
        super().__init__(port=port, **options)
        self.profile = profile
        self.require_api_key = require_api_key
        self.connections = 0
        self.contexts: dict[str, ContextRecord] = {}

    @property
    def url(self) -> str:
        """``ws://127.0.0.1:PORT/tts/websocket``, for ``CartesiaTTSService(url=...)``."""
        return f"{self.scheme}://{self.authority}/tts/websocket"

    async def check_request(
        self, connection: ServerConnection, request: Request
    ) -> Response | None:
        """Charge the connection handshake (TCP + TLS + upgrade) and check the API key."""
        await sleep_ms(self.profile.tts_handshake_rtts * self.profile.rtt_ms)
        if not request.path.startswith("/tts/websocket"):
            return connection.respond(404, "not found\n")
        if self.require_api_key and not request.headers.get("X-API-Key"):
            return connection.respond(401, "missing X-API-Key\n")
        return None

    async def handle(self, connection: ServerConnection) -> None:
        """Serve generation requests until the client closes."""
        self.connections += 1
        contexts: dict[str, _Context] = {}
        send_lock = asyncio.Lock()

        async def send(payload: dict[str, Any]) -> None:
            async with send_lock:
                await connection.send(json.dumps(payload, ensure_ascii=False))
                self.touch(connection)

        try:
            async for raw in connection:
                self.touch(connection)
                await self._on_message(raw, contexts, send)
        except ConnectionClosed:
            pass
        finally:
            for ctx in contexts.values():
                if ctx.task is not None:
                    ctx.task.cancel()

    async def _on_message(self, raw: str | bytes, contexts: dict[str, _Context], send) -> None:
        try:
            msg = parse_json(raw)
            if not isinstance(msg, dict):
                raise BadJSON("message must be a JSON object")
        except BadJSON as e:
            await send(self._error("", f"invalid JSON message: {e}"))
            return
        context_id = msg.get("context_id")
        if not isinstance(context_id, str) or not context_id:
            await send(self._error("", "context_id is required"))
            return
        if msg.get("cancel"):
            ctx = contexts.pop(context_id, None)
            if ctx is not None and ctx.task is not None:
                ctx.task.cancel()
            self._record(context_id).cancelled = True
            return
        transcript = msg.get("transcript")
        if not isinstance(transcript, str):
            await send(self._error(context_id, "transcript must be a string"))
            return
        if len(transcript) > MAX_TRANSCRIPT_CHARS:
            await send(
                self._error(
                    context_id,
                    f"transcript is {len(transcript)} characters; at most "
                    f"{MAX_TRANSCRIPT_CHARS} per message",
                )
            )
            return
        problem = self._check_output_format(msg.get("output_format"))
        if problem:
            await send(self._error(context_id, problem))
            return
        output = msg["output_format"]
        record = self._record(context_id)
        if transcript:
            record.transcripts.append(transcript)
            if record.first_request_at is None:
                record.first_request_at = time.time()
        ctx = contexts.get(context_id)
        if ctx is None:
            ctx = contexts[context_id] = _Context(context_id, output["sample_rate"])
            ctx.task = asyncio.create_task(self._generate(ctx, record, send, contexts))
        if transcript:
            ctx.queue.put_nowait(transcript)
        if not msg.get("continue", False):
            ctx.queue.put_nowait(_END)

    @staticmethod
    def _check_output_format(output: Any) -> str | None:
        """What is wrong with a request's ``output_format``, or None if it is usable.

        Only raw ``pcm_s16le`` is emulated, at an integer ``sample_rate`` (not a boolean) from
        :data:`MIN_SAMPLE_RATE` to :data:`MAX_SAMPLE_RATE` Hz.
        """
        if not isinstance(output, dict) or output.get("encoding") != "pcm_s16le":
            return "output_format needs pcm_s16le and a sample_rate"
        rate = output.get("sample_rate")
        if not is_json_int(rate):
            return "output_format needs pcm_s16le and a sample_rate"
        if not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
            return (
                f"output_format.sample_rate must be from {MIN_SAMPLE_RATE} to "
                f"{MAX_SAMPLE_RATE} Hz, got {rate}"
            )
        return None

    async def _generate(
        self, ctx: _Context, record: ContextRecord, send, contexts: dict[str, _Context]
    ) -> None:
        """Stream audio for each transcript piece in order; ``done`` after the last."""
        p = self.profile
        first = True
        try:
            while True:
                piece = await ctx.queue.get()
                if piece is _END:
                    contexts.pop(ctx.context_id, None)
                    done = {"type": "done", "done": True, "status_code": 200}
                    await send({**done, "context_id": ctx.context_id})
                    return
                assert isinstance(piece, str)
                if first:
                    # Request travels up, first byte is generated, travels down.
                    await sleep_ms(p.rtt_ms + p.tts_ttfb_ms)
                    first = False
                await self._speak(piece, ctx, record, send)
        except asyncio.CancelledError:
            pass
        except ConnectionClosed:
            logger.debug(f"CartesiaEmulator: connection closed while generating {ctx.context_id}")
        except Exception as e:
            # A bug here must not leave the client waiting for audio that never comes.
            logger.exception(f"CartesiaEmulator: generating {ctx.context_id} failed")
            contexts.pop(ctx.context_id, None)
            error = {**self._error(ctx.context_id, f"generation failed: {e}"), "status_code": 500}
            try:
                await send(error)
            except ConnectionClosed:
                pass

    async def _speak(self, text: str, ctx: _Context, record: ContextRecord, send) -> None:
        words, duration = plan_speech(text)
        if not words:
            return
        offset = record.audio_ms / 1000.0
        await send(
            {
                "type": "timestamps",
                "context_id": ctx.context_id,
                "status_code": 206,
                "done": False,
                "word_timestamps": {
                    "words": [w.text for w in words],
                    "start": [round(offset + w.start_s, 3) for w in words],
                    "end": [round(offset + w.end_s, 3) for w in words],
                },
            }
        )
        # Each 40 ms chunk is rendered just before it is sent: memory stays one chunk deep.
        chunk_samples = ctx.sample_rate * CHUNK_MS // 1000
        for pcm in render_pcm_chunks(words, duration, ctx.sample_rate, chunk_samples):
            if record.first_chunk_at is None:
                record.first_chunk_at = time.time()
            await send(
                {
                    "type": "chunk",
                    "data": base64.b64encode(pcm).decode("ascii"),
                    "done": False,
                    "status_code": 206,
                    "step_time": CHUNK_MS / REALTIME_FACTOR,
                    "context_id": ctx.context_id,
                }
            )
            await sleep_ms(CHUNK_MS / REALTIME_FACTOR)
        record.audio_ms += duration * 1000.0

    def _record(self, context_id: str) -> ContextRecord:
        if context_id not in self.contexts:
            self.contexts[context_id] = ContextRecord(context_id)
        return self.contexts[context_id]

    @staticmethod
    def _error(context_id: str, message: str) -> dict[str, Any]:
        logger.debug(f"CartesiaEmulator: rejecting message: {message}")
        return {
            "type": "error",
            "context_id": context_id,
            "status_code": 400,
            "done": True,
            "error": message,
        }
