"""A Deepgram-compatible text-to-speech server on loopback: the WebSocket and REST ``/v1/speak``.

Pipecat's real ``DeepgramTTSService(api_key=..., base_url=emulator.ws_url)`` and
``DeepgramHttpTTSService(api_key=..., base_url=emulator.http_url, aiohttp_session=...)``
talk to it unchanged. One port serves both, as ``api.deepgram.com`` does:

- WebSocket ``GET /v1/speak?model=&encoding=linear16&sample_rate=``: a ``Metadata`` message
  on connect; ``Speak`` (``{"type": "Speak", "text"}``), ``Flush``, ``Clear`` and ``Close``
  in; binary audio, ``Flushed`` / ``Cleared`` (with a ``sequence_id``) and ``Warning``
  (``description``, ``code``) out. Audio carries no word timestamps: it is just PCM.
- REST ``POST /v1/speak?model=&encoding=linear16&sample_rate=&container=none`` with
  ``{"text"}``: the audio streamed as the response body; errors as Deepgram's JSON
  (``err_code``, ``err_msg``, ``request_id``).

Message shapes follow Deepgram's API reference and SDK types (``SpeakV1Metadata``,
``SpeakV1Flushed``, ``SpeakV1Cleared``, ``SpeakV1Warning`` in deepgram-python-sdk). Audio
is :mod:`pipecat_fast.testing.synth` stand-in speech, generated faster than real time after
the profile's time to first byte. Every word the emulator speaks is recorded with its time
in the connection's (or request's) audio, the ground truth for what was said when.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web
from loguru import logger

from pipecat_fast.testing._loopback import BadJSON, HttpEmulator, parse_json, sleep_ms
from pipecat_fast.testing.profiles import SAME_REGION, LatencyProfile
from pipecat_fast.testing.synth import plan_speech, render_pcm_chunks

REALTIME_FACTOR = 5.0
"""Audio is generated this many times faster than real time (as the Cartesia emulator's)."""
CHUNK_MS = 40
MIN_SAMPLE_RATE = 8_000
MAX_SAMPLE_RATE = 48_000
DEFAULT_SAMPLE_RATE = 24_000  # Deepgram's documented default for linear16
MAX_TEXT_CHARS = 2_000
"""Longest text accepted in one ``Speak`` message or REST request (our limit)."""
MODEL_VERSION = "2025-04-07.0"  # any stable string: the emulator has one model


@dataclass(frozen=True)
class SpokenWord:
    """A word the emulator spoke and where it sits in its stream's audio (s)."""

    text: str
    start_s: float
    end_s: float


@dataclass
class StreamRecord:
    """One WebSocket connection or REST request: what it was asked and what it spoke.

    Attributes:
        kind: ``"websocket"`` or ``"http"``.
        texts: Every text received, in order.
        words: Every word spoken, timed in this stream's audio.
        audio_s: Audio sent so far (s).
        flushes / clears: Flush and Clear messages received.
    """

    kind: str
    texts: list[str] = field(default_factory=list)
    words: list[SpokenWord] = field(default_factory=list)
    audio_s: float = 0.0
    flushes: int = 0
    clears: int = 0


class _Closed(Exception):
    """The client asked to close, or went away."""


class DeepgramTTSEmulator(HttpEmulator):
    """Deepgram TTS (WebSocket and REST ``/v1/speak``) on 127.0.0.1.

    Bad input: a handshake or request without ``Authorization: Token ...`` gets 401; an
    encoding other than ``linear16``, a sample rate that is not an integer from 8,000 to
    48,000 Hz, or (REST) a container other than ``none``/``wav`` gets 400 in Deepgram's
    error JSON, before any audio. On the WebSocket, a message that is not JSON, has no
    known ``type``, or whose ``text`` is not a string of at most :data:`MAX_TEXT_CHARS`
    characters gets a ``Warning`` message and is ignored; the connection stays open.

    Args:
        profile: Latency model: ``rtt_ms``, ``tts_ttfb_ms``, ``tts_handshake_rtts``.
        port: TCP port; 0 picks a free one.

    Attributes:
        streams: Every connection and request, in order.
        fail_after_s: If set, each WebSocket connection is dropped (no close message) once
            this much audio has been sent: a socket that dies mid-reply.
    """

    def __init__(self, profile: LatencyProfile = SAME_REGION, *, port: int = 0):
        super().__init__(port=port)
        self.profile = profile
        self.streams: list[StreamRecord] = []
        self.fail_after_s: float | None = None

    @property
    def ws_url(self) -> str:
        """``ws://127.0.0.1:PORT``, for ``DeepgramTTSService(base_url=...)``."""
        return f"ws://127.0.0.1:{self.port}"

    @property
    def http_url(self) -> str:
        """``http://127.0.0.1:PORT``, for ``DeepgramHttpTTSService(base_url=...)``."""
        return f"http://127.0.0.1:{self.port}"

    def routes(self, app: web.Application) -> None:
        """``GET /v1/speak`` (WebSocket) and ``POST /v1/speak`` (REST)."""
        app.router.add_get("/v1/speak", self._websocket)
        app.router.add_post("/v1/speak", self._rest)

    # -- shared --------------------------------------------------------------------------------

    @staticmethod
    def _error(status: int, code: str, message: str) -> web.Response:
        logger.debug(f"DeepgramTTSEmulator: {status} {message}")
        body = {"err_code": code, "err_msg": message, "request_id": str(uuid.uuid4())}
        return web.json_response(body, status=status)

    def _check(self, request: web.Request, *, rest: bool) -> web.Response | int:
        """The output sample rate, or the error response for a bad request."""
        auth = request.headers.get("Authorization", "")
        if not auth.startswith(("Token ", "token ", "Bearer ", "bearer ")) or not auth[6:].strip():
            return self._error(401, "INVALID_AUTH", "Invalid credentials.")
        q = request.query
        if q.get("encoding", "linear16") != "linear16":
            return self._error(
                400, "UNSUPPORTED_ENCODING", "the emulator only speaks encoding=linear16"
            )
        raw_rate = q.get("sample_rate", str(DEFAULT_SAMPLE_RATE))
        if not raw_rate.isdigit() or not MIN_SAMPLE_RATE <= int(raw_rate) <= MAX_SAMPLE_RATE:
            return self._error(
                400,
                "INVALID_QUERY_PARAMETER",
                f"sample_rate must be an integer from {MIN_SAMPLE_RATE} to {MAX_SAMPLE_RATE}",
            )
        if rest and q.get("container", "none") not in ("none", "wav"):
            return self._error(400, "INVALID_QUERY_PARAMETER", "container must be none or wav")
        return int(raw_rate)

    async def _speak(self, text: str, rate: int, record: StreamRecord, send_audio) -> None:
        """Render ``text`` in 40 ms chunks, faster than real time, recording its words."""
        words, duration = plan_speech(text)
        if not words:
            return
        offset = record.audio_s
        record.words += [SpokenWord(w.text, offset + w.start_s, offset + w.end_s) for w in words]
        chunk_samples = rate * CHUNK_MS // 1000
        for pcm in render_pcm_chunks(words, duration, rate, chunk_samples):
            if self.fail_after_s is not None and record.audio_s >= self.fail_after_s:
                raise _Closed("fault: the socket dies")
            await send_audio(pcm)
            record.audio_s += len(pcm) / 2 / rate
            await sleep_ms(CHUNK_MS / REALTIME_FACTOR)
        record.audio_s = offset + duration

    # -- REST ------------------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        checked = self._check(request, rest=True)
        if isinstance(checked, web.Response):
            return checked
        try:
            body = parse_json(await request.read())
        except web.HTTPRequestEntityTooLarge:
            return self._error(413, "PAYLOAD_TOO_LARGE", "request body too large")
        except BadJSON as e:
            return self._error(400, "Bad Request", f"could not process the JSON payload: {e}")
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text.strip():
            return self._error(400, "Bad Request", "text must be a non-empty string")
        if len(text) > MAX_TEXT_CHARS:
            return self._error(400, "Bad Request", f"text is over {MAX_TEXT_CHARS} characters")
        record = StreamRecord("http", texts=[text])
        self.streams.append(record)
        p = self.profile
        await sleep_ms(p.tts_handshake_rtts * p.rtt_ms + p.rtt_ms + p.tts_ttfb_ms)
        response = web.StreamResponse(headers={"Content-Type": "audio/l16", "dg-request-id": "1"})
        await response.prepare(request)
        try:
            await self._speak(text, checked, record, response.write)
            await response.write_eof()
        except (ConnectionResetError, _Closed):
            logger.debug("DeepgramTTSEmulator: REST client went away")
        return response

    # -- WebSocket -------------------------------------------------------------------------------

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        p = self.profile
        await sleep_ms(p.tts_handshake_rtts * p.rtt_ms)
        checked = self._check(request, rest=False)
        if isinstance(checked, web.Response):
            return checked
        ws = web.WebSocketResponse(max_msg_size=16 * 1024 * 1024)
        if not ws.can_prepare(request).ok:
            return self._error(400, "Bad Request", "expected a WebSocket upgrade")
        await ws.prepare(request)
        record = StreamRecord("websocket")
        self.streams.append(record)
        session = _Session(self, ws, checked, record, request)
        await session.run(request.query.get("model", "aura-2-helena-en"))
        return ws


class _Session:
    """One WebSocket connection: a queue of texts spoken in order, flushes and clears."""

    def __init__(self, emulator: DeepgramTTSEmulator, ws: web.WebSocketResponse, rate, record,
                 request: web.Request):  # fmt: skip
        self.emulator = emulator
        self.request = request
        self.ws = ws
        self.rate = rate
        self.record = record
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.sequence = itertools.count()
        self.idle = True  # the next audio pays the time to first byte
        self.worker: asyncio.Task | None = None

    async def send_json(self, payload: dict[str, Any]) -> None:
        if not self.ws.closed:
            await self.ws.send_str(json.dumps(payload))

    async def warn(self, code: str, description: str) -> None:
        logger.debug(f"DeepgramTTSEmulator: warning {code}: {description}")
        await self.send_json({"type": "Warning", "code": code, "description": description})

    async def run(self, model: str) -> None:
        await self.send_json(
            {
                "type": "Metadata",
                "request_id": str(uuid.uuid4()),
                "model_name": model,
                "model_version": MODEL_VERSION,
                "model_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, model)),
            }
        )
        self.worker = asyncio.create_task(self.generate())
        try:
            async for msg in self.ws:
                if msg.type != WSMsgType.TEXT:
                    if msg.type == WSMsgType.BINARY:
                        await self.warn("INVALID_MESSAGE", "binary messages are not accepted")
                    continue
                if not await self.on_message(msg.data):
                    break
        finally:
            if self.worker is not None:
                if self.ws.closed:
                    self.worker.cancel()
                try:
                    await self.worker
                except (asyncio.CancelledError, _Closed, ConnectionResetError):
                    pass
            if not self.ws.closed:
                await self.ws.close()

    async def on_message(self, raw: str) -> bool:
        """Handle one client message; False once the client asked to close."""
        try:
            msg = parse_json(raw)
            if not isinstance(msg, dict):
                raise BadJSON("message must be a JSON object")
        except BadJSON as e:
            await self.warn("INVALID_JSON", f"invalid JSON message: {e}")
            return True
        kind = msg.get("type")
        if kind == "Speak":
            text = msg.get("text")
            if not isinstance(text, str):
                await self.warn("INVALID_MESSAGE", "Speak needs a string text")
            elif len(text) > MAX_TEXT_CHARS:
                await self.warn("TEXT_TOO_LONG", f"text is over {MAX_TEXT_CHARS} characters")
            else:
                self.record.texts.append(text)
                self.queue.put_nowait(("speak", text))
        elif kind == "Flush":
            self.record.flushes += 1
            self.queue.put_nowait(("flush", None))
        elif kind == "Clear":
            self.record.clears += 1
            await self.clear()
        elif kind == "Close":
            self.queue.put_nowait(("close", None))
            return False
        else:
            await self.warn("INVALID_MESSAGE", f"unknown message type {kind!r}")
        return True

    async def clear(self) -> None:
        """Drop the text buffer and stop the audio in progress, then say ``Cleared``."""
        if self.worker is not None:
            self.worker.cancel()
            try:
                await self.worker
            except (asyncio.CancelledError, _Closed, ConnectionResetError):
                pass
        while not self.queue.empty():
            self.queue.get_nowait()
        self.idle = True
        await self.send_json({"type": "Cleared", "sequence_id": next(self.sequence)})
        self.worker = asyncio.create_task(self.generate())

    async def generate(self) -> None:
        p = self.emulator.profile
        try:
            while True:
                kind, text = await self.queue.get()
                if kind == "close":
                    return
                if kind == "flush":
                    self.idle = True
                    await self.send_json({"type": "Flushed", "sequence_id": next(self.sequence)})
                    continue
                if self.idle:
                    await sleep_ms(p.rtt_ms + p.tts_ttfb_ms)
                    self.idle = False
                await self.emulator._speak(text, self.rate, self.record, self.ws.send_bytes)
        except _Closed:
            # A fault: the connection dies without a close handshake.
            if self.request.transport is not None:
                self.request.transport.abort()
        except ConnectionResetError:
            logger.debug("DeepgramTTSEmulator: client went away while speaking")
