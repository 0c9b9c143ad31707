"""Twilio's side of a phone call, played against your bot server on loopback.

:class:`TwilioCaller` does what Twilio does for a call to a Media Streams bot: it posts the
voice webhook (``application/x-www-form-urlencoded``: ``CallSid``, ``AccountSid``, ``From``,
``To``, ``CallStatus``, ``Direction``), reads the TwiML it gets back
(``<Connect><Stream url=...>`` with its ``<Parameter>``s), opens the stream's WebSocket and
speaks Twilio's Media Streams protocol on it: ``connected``, ``start`` (``streamSid``,
``callSid``, ``tracks``, ``mediaFormat`` audio/x-mulaw 8000 Hz mono, ``customParameters``),
one ``media`` message per 20 ms of caller audio (base64 mu-law, ``track``/``chunk``/
``timestamp``), and ``stop`` at the end. The bot's ``media`` messages are played out at
real-time pace as Twilio plays them (:class:`~pipecat_fast.testing.remote_caller.Playout`), a
``clear`` drops what is queued, a ``mark`` is answered when the audio before it has played.
Field names and order follow Twilio's "Media Streams - WebSocket Messages" page.

An outbound call rings first: with ``ring_s`` the caller posts the status callback
(``CallStatus=ringing``) to ``status_url`` and waits that long before the voice webhook, as
Twilio fetches the TwiML only when the callee answers.

``python -m pipecat_fast.testing.twilio_caller http://127.0.0.1:8765/twilio --call
book_cleaning`` plays one of the shipped calls and prints the TTFA the caller heard.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import secrets
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

import aiohttp
import websockets
from pipecat.audio.utils import create_stream_resampler, pcm_to_ulaw, ulaw_to_pcm

from pipecat_fast.testing.remote_caller import (
    SPEECH_RMS,
    CallerTimeline,
    ClientTurn,
    Playout,
    call_dict,
    client_turns,
    play_script,
    rms,
)

TWILIO_RATE = 8000
TWILIO_FRAME = 160
"""Bytes of mu-law in one ``media`` message: 20 ms at 8 kHz, as Twilio sends them."""


def twilio_sid(prefix: str) -> str:
    """A Twilio-shaped SID: two letters and 32 hex digits (``CA...``, ``MZ...``)."""
    return prefix + secrets.token_hex(16)


@dataclass
class TwiMLStream:
    """The ``<Connect><Stream>`` of a TwiML answer."""

    url: str
    parameters: dict[str, str] = field(default_factory=dict)


def parse_twiml(xml: str) -> TwiMLStream:
    """The stream a TwiML ``<Response>`` connects to.

    Raises:
        ValueError: If the TwiML has no ``<Connect><Stream url=...>``.
    """
    root = ET.fromstring(xml)
    stream = root.find("./Connect/Stream")
    if stream is None or not stream.get("url"):
        raise ValueError(f"TwiML without <Connect><Stream url=...>: {xml[:300]!r}")
    params = {p.get("name", ""): p.get("value", "") for p in stream.findall("Parameter")}
    return TwiMLStream(stream.get("url", ""), params)


@dataclass
class TwilioCallResult:
    """What the caller heard on one call."""

    call_sid: str
    turns: list[ClientTurn]
    timeline: CallerTimeline
    greeting_ms: float | None
    bot_audio_s: float
    clears: int
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return call_dict(
            self.turns,
            self.timeline,
            self.greeting_ms,
            self.bot_audio_s,
            self.error,
            call_sid=self.call_sid,
            clears=self.clears,
        )


class TwilioCaller:
    """Plays Twilio's side of one call against a bot server.

    Args:
        webhook_url: The bot's voice webhook (what you set on your Twilio number).
        utterances: The caller's utterances, 16-bit mono PCM at ``sample_rate``.
        speech_end_ms: Per utterance, the caller's real end of speech (ms from its start).
        sample_rate: Rate of ``utterances`` (Hz); sent as 8 kHz mu-law.
        status_url: The status-callback URL (``None``: none is posted).
        ring_s: Seconds the phone rings before it is answered (an outbound call).
        from_number, to_number: The call's numbers, as Twilio posts them.
        await_greeting: The bot speaks first; the caller listens before speaking.
        patience_s: How long the caller waits for a reply to start, and to end.
        timeout_s: Give up on the whole call after this long.
    """

    def __init__(
        self,
        webhook_url: str,
        utterances: Sequence[bytes],
        speech_end_ms: Sequence[int],
        *,
        sample_rate: int = 16000,
        status_url: str | None = None,
        ring_s: float = 0.0,
        from_number: str = "+15005550006",
        to_number: str = "+15005550001",
        await_greeting: bool = True,
        patience_s: float = 15.0,
        timeout_s: float = 180.0,
    ):
        self.webhook_url = webhook_url
        self.utterances = list(utterances)
        self.speech_end_ms = list(speech_end_ms)
        self.sample_rate = sample_rate
        self.status_url = status_url
        self.ring_s = ring_s
        self.from_number = from_number
        self.to_number = to_number
        self.await_greeting = await_greeting
        self.patience_s = patience_s
        self.timeout_s = timeout_s
        self.call_sid = twilio_sid("CA")
        self.account_sid = twilio_sid("AC")
        self.stream_sid = twilio_sid("MZ")
        self._clears = 0

    def _form(self, status: str) -> dict[str, str]:
        return {
            "CallSid": self.call_sid,
            "AccountSid": self.account_sid,
            "From": self.from_number,
            "To": self.to_number,
            "CallStatus": status,
            "Direction": "outbound-api" if self.ring_s > 0 else "inbound",
            "ApiVersion": "2010-04-01",
        }

    async def run(self) -> TwilioCallResult:
        """Ring, answer, stream the call, hang up; a failure is recorded, not raised."""
        timeline = CallerTimeline()
        playout = Playout()
        clears = 0
        error = None
        try:
            async with aiohttp.ClientSession() as http:
                if self.status_url and self.ring_s > 0:
                    await _post(http, self.status_url, self._form("ringing"))
                if self.ring_s > 0:
                    await asyncio.sleep(self.ring_s)
                twiml = await _post(http, self.webhook_url, self._form("in-progress"))
                stream = parse_twiml(twiml)
                clears = await asyncio.wait_for(
                    self._stream(stream, playout, timeline), self.timeout_s
                )
                if self.status_url:
                    await _post(http, self.status_url, self._form("completed"))
        except Exception as e:  # the run's report says what failed
            error = f"{type(e).__name__}: {e}"
        turns = client_turns(timeline.utterance_started, self.speech_end_ms, playout)
        greeting = None
        if timeline.greeting_heard is not None and timeline.answered is not None:
            greeting = (timeline.greeting_heard - timeline.answered) * 1000.0
        return TwilioCallResult(
            self.call_sid, turns, timeline, greeting, playout.received_s, clears, error
        )

    async def _stream(self, stream: TwiMLStream, playout: Playout, timeline: CallerTimeline):
        url = stream.url if "://" in stream.url else urljoin(self.webhook_url, stream.url)
        url = url.replace("https://", "wss://").replace("http://", "ws://")
        async with websockets.connect(url, max_size=2**22) as ws:
            sequence = 0

            def message(event: str, **body: Any) -> str:
                nonlocal sequence
                sequence += 1
                return json.dumps(
                    {"event": event, "sequenceNumber": str(sequence), **body}, separators=(",", ":")
                )

            await ws.send(
                json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"})
            )
            start = {
                "accountSid": self.account_sid,
                "streamSid": self.stream_sid,
                "callSid": self.call_sid,
                "tracks": ["inbound"],
                "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
                "customParameters": stream.parameters,
            }
            await ws.send(message("start", start=start, streamSid=self.stream_sid))
            timeline.answered = time.time()
            receiver = asyncio.create_task(self._receive(ws, playout, message))
            to_twilio = create_stream_resampler()
            chunk = 0
            began = time.monotonic()
            pending = bytearray()  # the resampler's output, sent in Twilio's 20 ms frames

            async def mic(pcm: bytes) -> None:
                nonlocal chunk
                pending.extend(await pcm_to_ulaw(pcm, self.sample_rate, TWILIO_RATE, to_twilio))
                while len(pending) >= TWILIO_FRAME:
                    ulaw = bytes(pending[:TWILIO_FRAME])
                    del pending[:TWILIO_FRAME]
                    chunk += 1
                    media = {
                        "track": "inbound",
                        "chunk": str(chunk),
                        "timestamp": str(int((time.monotonic() - began) * 1000)),
                        "payload": base64.b64encode(ulaw).decode("ascii"),
                    }
                    await ws.send(message("media", media=media, streamSid=self.stream_sid))

            try:
                await play_script(
                    mic,
                    playout,
                    self.utterances,
                    sample_rate=self.sample_rate,
                    timeline=timeline,
                    await_greeting=self.await_greeting,
                    patience_s=self.patience_s,
                )
                stop = {"accountSid": self.account_sid, "callSid": self.call_sid}
                await ws.send(message("stop", stop=stop, streamSid=self.stream_sid))
            finally:
                receiver.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await receiver
            return self._clears

    async def _receive(self, ws, playout: Playout, message) -> int:
        from_twilio = create_stream_resampler()
        marks: set[asyncio.Task] = set()

        async def answer_mark(name: str, delay_s: float) -> None:
            # Twilio answers a mark when the audio queued before it has played.
            await asyncio.sleep(delay_s)
            await ws.send(message("mark", mark={"name": name}, streamSid=self.stream_sid))

        try:
            async for raw in ws:
                now = time.time()
                try:
                    data = json.loads(raw)
                except (TypeError, ValueError):
                    continue
                event = data.get("event")
                if event == "media":
                    ulaw = base64.b64decode(data.get("media", {}).get("payload", ""))
                    pcm = await ulaw_to_pcm(ulaw, TWILIO_RATE, TWILIO_RATE, from_twilio)
                    playout.feed(now, len(ulaw) / TWILIO_RATE, rms(pcm) > SPEECH_RMS)
                elif event == "clear":
                    self._clears += 1
                    playout.clear(now)
                elif event == "mark":
                    name = str(data.get("mark", {}).get("name", ""))
                    task = asyncio.create_task(answer_mark(name, playout.queued_until(now)))
                    marks.add(task)
                    task.add_done_callback(marks.discard)
        finally:
            for task in marks:
                task.cancel()
        return self._clears


async def _post(http: aiohttp.ClientSession, url: str, form: dict[str, str]) -> str:
    async with http.post(url, data=form) as response:
        text = await response.text()
        if response.status >= 400:
            raise RuntimeError(f"POST {url}: HTTP {response.status}: {text[:300]}")
        return text


def main(argv: list[str] | None = None) -> int:
    """Play one shipped call against a bot's webhook and print the caller's TTFA."""
    from pipecat_fast.bench.material import bench_calls

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("webhook_url")
    parser.add_argument("--call", default="book_cleaning", help="a shipped call script")
    parser.add_argument("--ring-s", type=float, default=0.0)
    parser.add_argument("--status-url", default=None)
    args = parser.parse_args(argv)
    call = bench_calls(ids=[args.call])[0]
    caller = TwilioCaller(
        args.webhook_url,
        call.utterances,
        call.speech_end_ms,
        sample_rate=call.sample_rate,
        status_url=args.status_url,
        ring_s=args.ring_s,
    )
    result = asyncio.run(caller.run())
    print(json.dumps(result.to_dict(), indent=2))
    return 1 if result.error else 0


if __name__ == "__main__":
    raise SystemExit(main())
