"""A Sarvam-compatible streaming TTS WebSocket server on loopback.

Speaks the wire protocol of Sarvam's ``/text-to-speech/ws`` as Pipecat's real
``SarvamTTSService(url=emulator.url, api_key="...")`` uses it: a ``config`` message first,
then ``text``, ``flush`` and ``ping`` messages; replies ``audio`` (base64 PCM), ``event``
(``final`` once a flush's audio is out, with ``send_completion_event=true``) and ``error``.
Pipecat's Sarvam service is an ``InterruptibleTTSService``: it closes its socket and dials a
new one on every interruption, which makes this the project's *reconnecting* provider (the
TTS warm-pool's spare socket, ``docs/ttspool.md``). Connection handshake cost and time to
first byte follow the latency profile; audio is :mod:`pipecat_fast.testing.synth` stand-in
speech generated faster than real time, as the Cartesia emulator's.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

from loguru import logger
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from pipecat_fast.testing._loopback import BadJSON, WebSocketEmulator, parse_json, sleep_ms
from pipecat_fast.testing.cartesia_server import CHUNK_MS, MAX_TRANSCRIPT_CHARS, REALTIME_FACTOR
from pipecat_fast.testing.profiles import SAME_REGION, LatencyProfile
from pipecat_fast.testing.synth import plan_speech, render_pcm_chunks

SAMPLE_RATES = (8000, 16000, 22050, 24000, 44100, 48000)
"""``speech_sample_rate`` values Sarvam's streaming TTS accepts (its API reference)."""


class SarvamEmulator(WebSocketEmulator):
    """Sarvam streaming TTS WebSocket on 127.0.0.1.

    A malformed message, text before ``config``, or an unsupported sample rate or codec is
    answered with Sarvam's ``error`` message (``{"type": "error", "data": {"message"}}``) and
    the connection stays open.

    Args:
        profile: Latency model: ``rtt_ms``, ``tts_ttfb_ms``, ``tts_handshake_rtts``.
        port: TCP port; 0 picks a free one.
        require_api_key: Reject handshakes without an ``api-subscription-key`` header (401).
        **options: ``host``, ``ssl``, ``idle_close_s`` (see ``WebSocketEmulator``).

    Attributes:
        connections: Accepted connections.
        texts: Every text received, in order.
        configs: Every config received.
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
        self.texts: list[str] = []
        self.configs: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        """``ws://127.0.0.1:PORT/text-to-speech/ws``, for ``SarvamTTSService(url=...)``."""
        return f"{self.scheme}://{self.authority}/text-to-speech/ws"

    async def check_request(
        self, connection: ServerConnection, request: Request
    ) -> Response | None:
        """Charge the connection handshake (TCP + TLS + upgrade) and check the API key."""
        await sleep_ms(self.profile.tts_handshake_rtts * self.profile.rtt_ms)
        parts = urlsplit(request.path)
        if parts.path != "/text-to-speech/ws":
            return connection.respond(404, "not found\n")
        if self.require_api_key and not request.headers.get("api-subscription-key"):
            return connection.respond(401, "missing api-subscription-key\n")
        if not parse_qs(parts.query).get("model"):
            return connection.respond(400, "model query parameter is required\n")
        return None

    async def handle(self, connection: ServerConnection) -> None:
        """Serve one connection: config, then text/flush/ping until the client closes."""
        self.connections += 1
        state: dict[str, Any] = {"config": None, "pending": [], "first": True}
        queue: asyncio.Queue[object] = asyncio.Queue()
        send_lock = asyncio.Lock()

        async def send(payload: dict[str, Any]) -> None:
            async with send_lock:
                await connection.send(json.dumps(payload))
                self.touch(connection)

        speaker = asyncio.create_task(self._speak_loop(queue, state, send))
        try:
            async for raw in connection:
                self.touch(connection)
                await self._on_message(raw, state, queue, send)
        except ConnectionClosed:
            pass
        finally:
            speaker.cancel()

    async def _on_message(self, raw, state, queue: asyncio.Queue, send) -> None:
        try:
            msg = parse_json(raw)
            if not isinstance(msg, dict):
                raise BadJSON("message must be a JSON object")
        except BadJSON as e:
            await send(self._error(f"invalid JSON message: {e}"))
            return
        kind = msg.get("type")
        data = msg.get("data") if isinstance(msg.get("data"), dict) else {}
        if kind == "ping":
            return
        if kind == "config":
            problem = self._check_config(data)
            if problem:
                await send(self._error(problem))
                return
            state["config"] = data
            self.configs.append(data)
            return
        if state["config"] is None:
            await send(self._error("send a config message first"))
            return
        if kind == "text":
            text = data.get("text")
            if not isinstance(text, str) or len(text) > MAX_TRANSCRIPT_CHARS:
                await send(self._error(f"text must be a string of at most {MAX_TRANSCRIPT_CHARS}"))
                return
            self.texts.append(text)
            queue.put_nowait(text)
        elif kind == "flush":
            queue.put_nowait(None)  # a final event once everything before it is spoken
        else:
            await send(self._error(f"unknown message type {kind!r}"))

    @staticmethod
    def _check_config(data: dict[str, Any]) -> str | None:
        rate = data.get("speech_sample_rate")
        try:
            rate = int(rate)
        except (TypeError, ValueError):
            return "config.speech_sample_rate is required"
        if rate not in SAMPLE_RATES:
            return f"config.speech_sample_rate must be one of {SAMPLE_RATES}, got {rate}"
        if data.get("output_audio_codec", "linear16") != "linear16":
            return "only output_audio_codec linear16 is emulated"
        return None

    async def _speak_loop(self, queue: asyncio.Queue, state, send) -> None:
        p = self.profile
        try:
            while True:
                item = await queue.get()
                if item is None:
                    await send({"type": "event", "data": {"event_type": "final"}})
                    state["first"] = True
                    continue
                if state["first"]:
                    await sleep_ms(p.rtt_ms + p.tts_ttfb_ms)
                    state["first"] = False
                await self._speak(str(item), int(state["config"]["speech_sample_rate"]), send)
        except (asyncio.CancelledError, ConnectionClosed):
            pass
        except Exception as e:  # a bug here must not leave the client waiting in silence
            logger.exception("SarvamEmulator: generation failed")
            try:
                await send(self._error(f"generation failed: {e}"))
            except ConnectionClosed:
                pass

    async def _speak(self, text: str, sample_rate: int, send) -> None:
        words, duration = plan_speech(text)
        if not words:
            return
        chunk_samples = sample_rate * CHUNK_MS // 1000
        for pcm in render_pcm_chunks(words, duration, sample_rate, chunk_samples):
            audio = base64.b64encode(pcm).decode("ascii")
            await send({"type": "audio", "data": {"audio": audio, "request_id": "emulated"}})
            await sleep_ms(CHUNK_MS / REALTIME_FACTOR)

    @staticmethod
    def _error(message: str) -> dict[str, Any]:
        logger.debug(f"SarvamEmulator: rejecting message: {message}")
        return {"type": "error", "data": {"message": message}}
