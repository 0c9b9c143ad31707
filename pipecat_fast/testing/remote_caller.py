"""A scripted caller on the far end of a real transport, and the TTFA it hears.

The callers in :mod:`~pipecat_fast.testing.twilio_caller` (Twilio Media Streams over a
WebSocket) and :mod:`~pipecat_fast.testing.webrtc_caller` (WebRTC with aiortc) dial a bot
server as a user's caller does, speak the shipped espeak-ng utterances at real-time pace and
listen to what comes back. This module is what they share:

- :class:`Playout` (pure: arrival times and durations in, what the caller hears and when
  out) plays the bot's audio as the far end's buffer does: a chunk plays when it arrives or
  when the chunk before it has finished, whichever is later; a ``clear`` drops what is queued.
  A bot that sends audio faster than real time (Pipecat's WebSocket output sends at twice the
  pace) is therefore heard at the pace it plays, not the pace it arrives.
- :func:`client_turns` (pure) turns the caller's timeline into TTFA per utterance: from the
  caller's real end of speech to the first bot speech the caller hears after it.
- :func:`play_script` (async, transport-agnostic) speaks the utterances, waiting for each
  reply to start and end as the bench's caller does.

TTFA measured here ends where the bytes reach the client. It still leaves out the far end's
own leg (a handset's jitter buffer, 20-60 ms on WebRTC; a carrier leg, 100 ms or more on a
phone call, seed 002), which no loopback test has.
"""

from __future__ import annotations

import array
import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

SPEECH_RMS = 300.0
"""A chunk whose RMS (16-bit samples) is above this is speech; the bot's padding is silence."""

STOP_GAP_S = 0.35
"""Speech that pauses shorter than this is one stretch (Pipecat's own bot-stopped window)."""

CHUNK_S = 0.02


def rms(pcm: bytes) -> float:
    """Root mean square of 16-bit little-endian mono samples (0 for no samples)."""
    samples = array.array("h")
    samples.frombytes(pcm[: len(pcm) - len(pcm) % 2])
    if not samples:
        return 0.0
    return math.sqrt(sum(s * s for s in samples) / len(samples))


@dataclass
class Playout:
    """The far end's playout buffer: when each received chunk is heard (pure; times in s).

    Parameters:
        stop_gap_s: Speech separated by less silence than this is one stretch.
        buffered: The far end queues what arrives early and plays it in order (Twilio's
            media buffer). False: a chunk plays when it arrives (it comes out of a WebRTC
            jitter buffer that has paced it already).

    Attributes:
        segments: Stretches of bot speech as heard, ``[start, end]`` in playout time.
        received_s: Bot audio received in all (s).
    """

    stop_gap_s: float = STOP_GAP_S
    buffered: bool = True
    segments: list[list[float]] = field(default_factory=list)
    received_s: float = 0.0
    _clock: float = 0.0

    def feed(self, arrival_s: float, duration_s: float, speech: bool) -> float:
        """A chunk arrived; returns when it starts playing."""
        start = max(arrival_s, self._clock) if self.buffered else arrival_s
        self._clock = start + duration_s
        self.received_s += duration_s
        if speech:
            last = self.segments[-1] if self.segments else None
            if last is not None and start - last[1] < self.stop_gap_s:
                last[1] = self._clock
            else:
                self.segments.append([start, self._clock])
        return start

    def clear(self, now_s: float) -> None:
        """Drop what is queued but not yet played (a Twilio ``clear``, a barge-in)."""
        self._clock = min(self._clock, now_s)
        for segment in self.segments:
            segment[1] = min(segment[1], max(segment[0], now_s))

    def queued_until(self, now_s: float) -> float:
        """Seconds of received audio still to play after ``now_s`` (0 when none is queued)."""
        return max(0.0, self._clock - now_s)

    def speaking(self, now_s: float) -> bool:
        """Whether bot speech is heard at ``now_s`` (within a stop gap) or queued after it."""
        return any(s <= now_s < e + self.stop_gap_s for s, e in self.segments) or any(
            s > now_s for s, _ in self.segments
        )

    def first_start(self, after_s: float, before_s: float = math.inf) -> float | None:
        """The first speech stretch that starts in ``[after_s, before_s)``, if any."""
        return next((s for s, _ in self.segments if after_s <= s < before_s), None)


@dataclass
class ClientTurn:
    """One utterance as the caller met it (ms; None when no reply came)."""

    turn: int
    ttfa_ms: float | None
    speech_end: float
    heard_at: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "turn": self.turn,
            "ttfa_ms": None if self.ttfa_ms is None else round(self.ttfa_ms, 1),
        }


def client_turns(
    utterance_started: Sequence[float],
    speech_end_ms: Sequence[int],
    playout: Playout,
) -> list[ClientTurn]:
    """TTFA per utterance: its real end of speech to the first bot speech heard after it.

    A reply counts only if it starts before the next utterance does (a later one answers
    nothing the caller is still waiting on).
    """
    turns = []
    for i, started in enumerate(utterance_started):
        end = started + speech_end_ms[i] / 1000.0
        before = utterance_started[i + 1] if i + 1 < len(utterance_started) else math.inf
        heard = playout.first_start(end, before)
        ttfa = None if heard is None else (heard - end) * 1000.0
        turns.append(ClientTurn(i, ttfa, end, heard))
    return turns


@dataclass
class CallerTimeline:
    """What the remote caller did (epoch s)."""

    answered: float | None = None
    utterance_started: list[float] = field(default_factory=list)
    utterance_ended: list[float] = field(default_factory=list)
    greeting_heard: float | None = None
    no_reply: list[int] = field(default_factory=list)


Mic = Callable[[bytes], Awaitable[None]]
"""Sends one 20 ms chunk of 16-bit mono PCM at the caller's rate."""


async def play_script(
    mic: Mic,
    playout: Playout,
    utterances: Sequence[bytes],
    *,
    sample_rate: int,
    timeline: CallerTimeline,
    await_greeting: bool = True,
    lead_silence_s: float = 0.6,
    reply_gap_s: float = 0.6,
    patience_s: float = 15.0,
    clock: Callable[[], float] = time.time,
) -> None:
    """Speak ``utterances`` at real-time pace, each after the bot's reply to the last.

    Between utterances the caller keeps sending silence, as an open microphone does. It waits
    for the greeting first (``await_greeting``), then after each utterance for the reply to
    start and end (up to ``patience_s`` each), then ``reply_gap_s`` before speaking again.
    """
    step = int(sample_rate * CHUNK_S) * 2
    silence = b"\x00" * step
    pace = time.monotonic()

    async def send(chunk: bytes) -> None:
        nonlocal pace
        pace += CHUNK_S
        await asyncio.sleep(max(0.0, pace - time.monotonic()))
        await mic(chunk)

    async def silence_for(seconds: float) -> None:
        for _ in range(round(seconds / CHUNK_S)):
            await send(silence)

    async def silence_until(condition: Callable[[float], bool], timeout_s: float) -> bool:
        deadline = clock() + timeout_s
        while clock() < deadline:
            if condition(clock()):
                return True
            await send(silence)
        return condition(clock())

    if await_greeting:
        answered = timeline.answered or clock()
        if await silence_until(
            lambda now: playout.first_start(answered, now) is not None, patience_s
        ):
            timeline.greeting_heard = playout.first_start(answered)
            await silence_until(lambda now: not playout.speaking(now), patience_s)
    await silence_for(lead_silence_s)
    for index, pcm in enumerate(utterances):
        timeline.utterance_started.append(clock())
        for i in range(0, len(pcm), step):
            await send(pcm[i : i + step].ljust(step, b"\x00"))
        ended = clock()
        timeline.utterance_ended.append(ended)

        def replied(now: float, ended: float = ended) -> bool:
            return playout.first_start(ended, now) is not None  # heard by now

        if not await silence_until(replied, patience_s):
            timeline.no_reply.append(index)
            continue
        await silence_until(lambda now: not playout.speaking(now), patience_s)
        await silence_for(reply_gap_s)


def summary(turns: Sequence[ClientTurn]) -> dict[str, Any]:
    """p50/p95 client-side TTFA over the answered turns (the TTFA meter's arithmetic)."""
    from pipecat_fast.ttfa.core import summarize

    return summarize([t.ttfa_ms for t in turns])


def call_dict(
    turns: Sequence[ClientTurn],
    timeline: CallerTimeline,
    greeting_ms: float | None,
    bot_audio_s: float,
    error: str | None,
    **transport: Any,
) -> dict[str, Any]:
    """JSON-ready result of one remote call: what every transport's caller reports.

    ``transport`` adds the transport's own keys first (a call SID, a peer connection id, the
    connect time); floats among them are rounded to 0.1 ms.
    """
    out: dict[str, Any] = {
        k: round(v, 1) if isinstance(v, float) else v for k, v in transport.items()
    }
    out.update(
        turns=[t.to_dict() for t in turns],
        summary=summary(turns),
        greeting_ms=None if greeting_ms is None else round(greeting_ms, 1),
        bot_audio_s=round(bot_audio_s, 2),
        no_reply=timeline.no_reply,
        error=error,
    )
    return out
