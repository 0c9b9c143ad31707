"""A WebRTC caller (aiortc) for a SmallWebRTC bot server, on loopback.

:class:`WebRTCCaller` does what a browser client of Pipecat's SmallWebRTC transport does: it
makes an ``RTCPeerConnection`` with one audio track, posts its SDP offer to the bot's
``/api/offer`` (``{"sdp", "type", "request_data"}``), applies the answer, and once the
connection is up speaks the shipped utterances on the track at real-time pace (Opus, as a
browser sends) while it listens to the bot's track. Frames come out of aiortc's own jitter
buffer and decoder when a browser would play them, so the TTFA it reports ends where a
browser's audio element would start the reply (less the browser's own output latency).

:func:`loopback_ice` keeps ICE on 127.0.0.1: aioice (aiortc's ICE) leaves loopback out of its
host candidates, and on a closed machine no other address is for tests to use. Call it in
the bot server's process and the caller's (the WebRTC example does with ``--offline``).
"""

from __future__ import annotations

import argparse
import asyncio
import fractions
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

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


def loopback_ice() -> None:
    """Make aiortc's ICE offer 127.0.0.1 as its only host candidate (tests on loopback).

    Raises:
        RuntimeError: If aioice no longer has the function this replaces.
    """
    import aioice.ice

    if not callable(getattr(aioice.ice, "get_host_addresses", None)):
        raise RuntimeError("aioice.ice.get_host_addresses is gone: loopback_ice needs updating")

    def loopback(use_ipv4: bool, use_ipv6: bool) -> list[str]:
        return ["127.0.0.1"] if use_ipv4 else []

    aioice.ice.get_host_addresses = loopback


def _caller_track_class():
    from aiortc.mediastreams import MediaStreamTrack
    from av import AudioFrame

    class CallerTrack(MediaStreamTrack):
        """The caller's microphone: 20 ms frames, as :func:`play_script` sends them."""

        kind = "audio"

        def __init__(self, sample_rate: int):
            super().__init__()
            self.sample_rate = sample_rate
            self.queue: asyncio.Queue[bytes] = asyncio.Queue()
            self._pts = 0

        async def recv(self):
            pcm = await self.queue.get()
            samples = len(pcm) // 2
            frame = AudioFrame(format="s16", layout="mono", samples=samples)
            frame.planes[0].update(pcm)
            frame.sample_rate = self.sample_rate
            frame.time_base = fractions.Fraction(1, self.sample_rate)
            frame.pts = self._pts
            self._pts += samples
            return frame

    return CallerTrack


@dataclass
class WebRTCCallResult:
    """What the caller heard on one session."""

    pc_id: str | None
    turns: list[ClientTurn]
    timeline: CallerTimeline
    greeting_ms: float | None
    bot_audio_s: float
    connect_ms: float | None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return call_dict(
            self.turns,
            self.timeline,
            self.greeting_ms,
            self.bot_audio_s,
            self.error,
            pc_id=self.pc_id,
            connect_ms=self.connect_ms,
        )


class WebRTCCaller:
    """One WebRTC session against a SmallWebRTC bot server.

    Args:
        offer_url: The bot's offer endpoint (``http://127.0.0.1:7860/api/offer``).
        utterances: The caller's utterances, 16-bit mono PCM at ``sample_rate``.
        speech_end_ms: Per utterance, the caller's real end of speech (ms from its start).
        sample_rate: Rate of ``utterances`` (Hz).
        request_data: Sent with the offer (the example reads ``levers`` and ``script``).
        await_greeting: The bot speaks first; the caller listens before speaking.
        patience_s: How long the caller waits for a reply to start, and to end.
        timeout_s: Give up on the whole session after this long.
    """

    def __init__(
        self,
        offer_url: str,
        utterances: Sequence[bytes],
        speech_end_ms: Sequence[int],
        *,
        sample_rate: int = 16000,
        request_data: dict[str, Any] | None = None,
        await_greeting: bool = True,
        patience_s: float = 15.0,
        timeout_s: float = 180.0,
    ):
        self.offer_url = offer_url
        self.utterances = list(utterances)
        self.speech_end_ms = list(speech_end_ms)
        self.sample_rate = sample_rate
        self.request_data = request_data or {}
        self.await_greeting = await_greeting
        self.patience_s = patience_s
        self.timeout_s = timeout_s

    async def run(self) -> WebRTCCallResult:
        """Connect, speak, listen, hang up; a failure is recorded, not raised."""
        from aiortc import RTCPeerConnection, RTCSessionDescription

        timeline = CallerTimeline()
        playout = Playout(buffered=False)  # aiortc's jitter buffer has paced the frames
        pc = RTCPeerConnection()
        mic = _caller_track_class()(self.sample_rate)
        pc.addTrack(mic)
        listeners: list[asyncio.Task] = []
        connected = asyncio.Event()
        error = None
        pc_id = None
        connect_ms = None

        @pc.on("track")
        def on_track(track):
            if track.kind == "audio":
                listeners.append(asyncio.ensure_future(_listen(track, playout)))

        @pc.on("connectionstatechange")
        async def on_state():
            if pc.connectionState == "connected":
                connected.set()

        try:
            began = time.time()
            await pc.setLocalDescription(await pc.createOffer())
            body = {
                "sdp": pc.localDescription.sdp,
                "type": pc.localDescription.type,
                "request_data": self.request_data,
            }
            async with aiohttp.ClientSession() as http:
                async with http.post(self.offer_url, json=body) as response:
                    if response.status >= 400:
                        text = await response.text()
                        raise RuntimeError(f"offer: HTTP {response.status}: {text[:300]}")
                    answer = await response.json()
            pc_id = answer.get("pc_id")
            await pc.setRemoteDescription(RTCSessionDescription(answer["sdp"], answer["type"]))
            await asyncio.wait_for(connected.wait(), 20.0)
            timeline.answered = time.time()
            connect_ms = (timeline.answered - began) * 1000.0

            async def speak(pcm: bytes) -> None:
                await mic.queue.put(pcm)

            await asyncio.wait_for(
                play_script(
                    speak,
                    playout,
                    self.utterances,
                    sample_rate=self.sample_rate,
                    timeline=timeline,
                    await_greeting=self.await_greeting,
                    patience_s=self.patience_s,
                ),
                self.timeout_s,
            )
        except Exception as e:  # the run's report says what failed
            error = f"{type(e).__name__}: {e}"
        finally:
            for task in listeners:
                task.cancel()
            await pc.close()
        turns = client_turns(timeline.utterance_started, self.speech_end_ms, playout)
        greeting = None
        if timeline.greeting_heard is not None and timeline.answered is not None:
            greeting = (timeline.greeting_heard - timeline.answered) * 1000.0
        return WebRTCCallResult(
            pc_id, turns, timeline, greeting, playout.received_s, connect_ms, error
        )


async def _listen(track, playout: Playout) -> None:
    """Play the bot's track out as it is decoded (aiortc's jitter buffer has paced it)."""
    try:
        while True:
            frame = await track.recv()
            samples = frame.to_ndarray()
            channels = len(frame.layout.channels)
            mono = samples.reshape(-1, channels)[:, 0] if channels > 1 else samples.reshape(-1)
            pcm = mono.astype("<i2").tobytes()
            playout.feed(time.time(), frame.samples / frame.sample_rate, rms(pcm) > SPEECH_RMS)
    except Exception:  # the track ended (the session closed)
        return


def main(argv: list[str] | None = None) -> int:
    """Play one shipped call against a bot's ``/api/offer`` and print the caller's TTFA."""
    from pipecat_fast.bench.material import bench_calls

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("offer_url")
    parser.add_argument("--call", default="book_cleaning", help="a shipped call script")
    parser.add_argument("--levers", default=None, help="ask the example for these levers")
    args = parser.parse_args(argv)
    loopback_ice()
    call = bench_calls(ids=[args.call])[0]
    data = {"script": args.call, **({"levers": args.levers} if args.levers else {})}
    caller = WebRTCCaller(
        args.offer_url,
        call.utterances,
        call.speech_end_ms,
        sample_rate=call.sample_rate,
        request_data=data,
    )
    result = asyncio.run(caller.run())
    print(json.dumps(result.to_dict(), indent=2))
    return 1 if result.error else 0


if __name__ == "__main__":
    raise SystemExit(main())
