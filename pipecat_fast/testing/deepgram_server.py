"""A Deepgram-compatible live transcription WebSocket server on loopback.

Speaks Deepgram's ``/v1/listen`` streaming protocol, so Pipecat's real
``DeepgramSTTService(api_key=..., base_url="ws://127.0.0.1:PORT")`` runs unchanged: binary
linear16 audio in; ``Results`` messages with interim (``is_final: false``) and final
transcripts out; ``KeepAlive``, ``Finalize`` (answered with ``from_finalize: true``) and
``CloseStream`` control messages.

What each ``Results`` message carries follows Deepgram's documentation (developers.deepgram.com,
"Endpointing & Interim Results", "Finalize"): ``start`` and ``duration`` are the audio time range
(s of the stream) the result covers — consecutive finals tile the stream, an interim covers the
stretch after the last final heard so far; ``is_final`` marks the last result for its range;
``speech_final`` marks a final that Deepgram's endpointing cut at a pause (``endpointing``
query parameter, ms of silence, default 10; ``endpointing=false`` turns it off, and finals then
come only from ``Finalize`` or ``NO_ENDPOINT_FINAL_S`` after the speech); ``from_finalize``
marks the answer to a ``Finalize`` (empty when an earlier final already covered everything).
So both orders happen as they do on Deepgram: with the default endpointing the final of an
utterance arrives before the ``Finalize`` Pipecat sends at the VAD's stop, which is then answered
with an empty ``from_finalize`` result; with an endpointing longer than the VAD's stop window
(``endpointing=300``) the ``Finalize`` arrives first and its answer carries the words.

It does not recognize speech. It knows the call's script — what each utterance says, with
word timings relative to the utterance's speech onset — and aligns it to the audio it
actually receives: an energy detector finds the onset of each utterance in the stream (the
n-th onset is the n-th scripted utterance), and the audio clock (bytes received) decides when
each word has been heard. Interim transcripts follow the words heard so far (or scripted
revising partials, replayed at their audio times); the final comes ``stt_final_ms`` + RTT
after the utterance's end of speech. The script is chosen per connection by Deepgram's
``tag`` query parameter (``DeepgramSTTService(tag=...)``).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
from loguru import logger
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from pipecat_fast.testing._loopback import BadJSON, WebSocketEmulator, parse_json
from pipecat_fast.testing.profiles import SAME_REGION, LatencyProfile

# RMS (int16 full scale 32767) above which a 20 ms frame counts as speech, and how many
# consecutive speech frames make an onset. Our choice for clean synthetic caller audio.
ONSET_RMS = 300.0
ONSET_FRAMES = 2
FRAME_S = 0.02
# Silence (s) required after an utterance's scripted end before the next onset counts.
MIN_GAP_S = 0.3
# Frames measured per numpy call in OnsetDetector.feed (bounds its temporaries to ~1 MB).
_BLOCK_FRAMES = 256
# Interim results are cheaper than finals: processing time before one is sent (our choice).
INTERIM_PROCESSING_MS = 50.0
# Deepgram's default endpointing: a final after 10 ms of silence ("By default, Deepgram
# identifies an endpoint after 10 milliseconds (ms) of silence", developers.deepgram.com,
# "Endpointing & Interim Results With Live Streaming").
DEFAULT_ENDPOINTING_MS = 10.0
# With endpointing off, Deepgram still finalizes on its own "every few seconds" (same page);
# our choice of how long after the last word.
NO_ENDPOINT_FINAL_S = 1.0
# A silence between two scripted words of one utterance at least this long is a pause the
# endpointer cuts at, as it cuts at the utterance's end (a final with ``speech_final``, the
# endpointing silence after the word before it). Shorter gaps are inside a phrase. Our choice:
# the shipped calls' inter-word gaps are at most 190 ms, their sentence breaks 300-310 ms and
# their deliberate pauses 1.5 s.
PAUSE_ENDPOINT_S = 0.3


@dataclass(frozen=True)
class ScriptedWord:
    """A word of an utterance, times in s relative to its speech onset."""

    text: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class ScriptedUtterance:
    """What the caller says in one utterance, as the STT emulator should transcribe it.

    Parameters:
        text: The final transcript (punctuated).
        words: Word timings relative to the speech onset (s).
        partials: Optional revising interim hypotheses ``(s after onset, text)`` replayed
            instead of the word-by-word interims (e.g. real ASR revision structure).
    """

    text: str
    words: tuple[ScriptedWord, ...]
    partials: tuple[tuple[float, str], ...] = ()

    @property
    def duration_s(self) -> float:
        """Onset to end of speech (s)."""
        return self.words[-1].end_s if self.words else 0.0


@dataclass
class SentResult:
    """A result the emulator sent (for tests and bench accounting).

    ``queued_at`` is when the result was decided (s, epoch); it goes out ``stt_final_ms``
    (or the interim processing time) plus RTT later.
    """

    queued_at: float
    audio_time_s: float
    is_final: bool
    transcript: str
    from_finalize: bool = False
    speech_final: bool = False
    start_s: float = 0.0
    duration_s: float = 0.0


def interim_events(utterance: ScriptedUtterance, interval_s: float) -> list[tuple[float, str]]:
    """Interim transcripts of an utterance as ``(s after onset, text)``, no repeats.

    Uses the scripted partials when the utterance has them, else the words whose end has
    been heard, every ``interval_s`` of audio.
    """
    if utterance.partials:
        events = list(utterance.partials)
    else:
        events = []
        t = interval_s
        while t < utterance.duration_s:
            heard = [w.text for w in utterance.words if w.end_s <= t]
            events.append((t, " ".join(heard)))
            t += interval_s
    out: list[tuple[float, str]] = []
    for t, text in events:
        if text.strip() and (not out or out[-1][1] != text):
            out.append((t, text))
    return out


class OnsetDetector:
    """Finds speech onsets in 16-bit mono PCM fed in arbitrary pieces. Pure, no clock.

    Linear in the audio fed: each piece is cut into frames once, in blocks of
    :data:`_BLOCK_FRAMES` frames, and only the partial frame at its end is kept for the next.
    """

    def __init__(self, sample_rate: int):
        self.sample_rate = sample_rate
        self._frame_bytes = int(sample_rate * FRAME_S) * 2
        self._pending = b""
        self._frames = 0
        self._run = 0

    @property
    def audio_time_s(self) -> float:
        """Audio received so far, in whole frames (s)."""
        return self._frames * FRAME_S

    def feed(self, pcm: bytes) -> list[float]:
        """Add audio; returns onset times (s of audio) detected in it."""
        data = self._pending + pcm if self._pending else pcm
        whole = len(data) // self._frame_bytes * self._frame_bytes
        self._pending = bytes(data[whole:])
        onsets = []
        view = memoryview(data)
        step = _BLOCK_FRAMES * self._frame_bytes
        for start in range(0, whole, step):
            block = view[start : min(whole, start + step)]
            samples = np.frombuffer(block, dtype="<i2").astype(np.float32)
            frames = samples.reshape(-1, self._frame_bytes // 2)
            rms = np.sqrt(np.mean(frames * frames, axis=1))
            for loud in (rms > ONSET_RMS).tolist():
                self._frames += 1
                self._run = self._run + 1 if loud else 0
                if self._run == ONSET_FRAMES:
                    onsets.append((self._frames - ONSET_FRAMES) * FRAME_S)
        return onsets


class _Session:
    """One connection: audio clock, script position and pending results."""

    def __init__(
        self,
        emulator: DeepgramEmulator,
        script: Sequence[ScriptedUtterance],
        rate: int,
        where: str = "",
        endpointing_ms: float | None = DEFAULT_ENDPOINTING_MS,
    ):
        self.emulator = emulator
        self.endpointing_ms = endpointing_ms  # None: endpointing off
        self.script = script
        self.where = where  # which script, for log lines: "tag 'x'" or why the default
        self.detector = OnsetDetector(rate)
        self.request_id = str(uuid.uuid4())
        self.index = -1  # utterance being heard
        self.onset = 0.0
        self.busy_until = -1.0  # audio time before which no new onset is taken
        self.events: list[tuple[float, str, bool]] = []  # (audio time, text, is_final)
        self.finalized_words = 0
        self.final_pending = False
        self.finalize_requested = False
        self.segment_start = 0.0  # audio time the next result's range starts (last final's end)
        self.outbox: asyncio.Queue[tuple[float, dict[str, Any]] | None] = asyncio.Queue()

    def on_audio(self, pcm: bytes) -> None:
        for onset in self.detector.feed(pcm):
            if onset >= self.busy_until:
                self._start_utterance(onset)
        now = self.detector.audio_time_s
        while self.events and self.events[0][0] <= now:
            at, text, is_final = self.events.pop(0)
            if is_final:
                self._send_final(at, finalize=False, speech_final=self.endpointing_ms is not None)
                continue
            # After a Finalize, interims carry only the words no final has covered yet, as
            # Deepgram's do (a finalized word is never sent again).
            text = " ".join(text.split()[self.finalized_words :])
            if text:
                self._send(at, text, is_final=False, delay_ms=INTERIM_PROCESSING_MS)

    def on_finalize(self) -> None:
        """Finalize what has been heard now (Deepgram's ``Finalize``)."""
        now = self.detector.audio_time_s
        if 0 <= self.index < len(self.script) and (self.final_pending or self.events):
            if self._heard(now) > self.finalized_words:
                self._send_final(now, finalize=True)
                return
        # Nothing left to transcribe: an empty answer, quickly (there is nothing to process).
        self._send(now, "", is_final=True, from_finalize=True, delay_ms=INTERIM_PROCESSING_MS)

    def _start_utterance(self, onset: float) -> None:
        if self.final_pending and 0 <= self.index < len(self.script):
            # New speech before the last utterance was finalized (endpointing off): Deepgram
            # finalizes the earlier words first.
            self._send_final(onset, finalize=False)
        self.index += 1
        if self.index >= len(self.script):
            logger.warning(
                f"DeepgramEmulator: speech at {onset:.2f}s beyond the {len(self.script)} "
                f"scripted utterances of {self.where}; not transcribed"
            )
            self.busy_until = float("inf")
            return
        utterance = self.script[self.index]
        self.onset = onset
        self.finalized_words = 0
        self.final_pending = True
        interval = self.emulator.profile.stt_interim_interval_ms / 1000.0
        self.events = [(onset + t, text, False) for t, text in interim_events(utterance, interval)]
        # The endpointer decides the final once it has heard enough silence after the speech.
        if self.endpointing_ms is None:
            final_at = onset + utterance.duration_s + NO_ENDPOINT_FINAL_S
        else:
            endpointing_s = self.endpointing_ms / 1000.0
            final_at = onset + utterance.duration_s + endpointing_s
            # ... and at a pause inside the utterance: Deepgram's endpointing knows silence, not
            # the script's utterances, so the words before the pause get their own final.
            words = utterance.words
            for before, after in zip(words, words[1:], strict=False):
                gap = after.start_s - before.end_s
                if gap >= PAUSE_ENDPOINT_S and gap > endpointing_s:
                    self.events.append((onset + before.end_s + endpointing_s, "", True))
            self.events.sort(key=lambda e: e[0])  # stable: interims before a final at a tie
        self.events.append((final_at, utterance.text, True))
        self.busy_until = onset + utterance.duration_s + MIN_GAP_S

    def _heard(self, at: float) -> int:
        """How many words of the current utterance have ended by audio time ``at``."""
        utterance = self.script[self.index]
        return sum(1 for w in utterance.words if w.end_s <= at - self.onset + 1e-6)

    def _send_final(self, at: float, *, finalize: bool, speech_final: bool = False) -> None:
        """Final for the words heard up to ``at`` that no earlier final covered."""
        utterance = self.script[self.index]
        heard = utterance.words[: self._heard(at)]
        complete = len(heard) == len(utterance.words)
        words = utterance.words[self.finalized_words : len(heard)]
        if not words and not complete and not finalize:
            return  # a pause's endpoint after a Finalize already covered its words
        if complete:
            # The end of speech: the punctuated transcript for whatever is left.
            text = utterance.text if self.finalized_words == 0 else " ".join(w.text for w in words)
            self.events = []
            self.final_pending = False
        else:
            text = " ".join(w.text for w in words)
            # Interims before this point are superseded by the final.
            self.events = [e for e in self.events if e[0] > at]
        self.finalized_words = len(heard)
        delay_ms = None
        if not finalize and self.endpointing_ms is not None:
            # The final's latency from the end of speech stays ``stt_final_ms``: the endpointing
            # silence is part of it.
            p = self.emulator.profile
            delay_ms = max(0.0, p.stt_final_ms - self.endpointing_ms)
        self._send(
            at,
            text,
            is_final=True,
            from_finalize=finalize,
            speech_final=speech_final,
            words=words,
            delay_ms=delay_ms,
        )

    def _send(
        self,
        at: float,
        text: str,
        *,
        is_final: bool,
        from_finalize: bool = False,
        speech_final: bool = False,
        delay_ms: float | None = None,
        words: Sequence[ScriptedWord] = (),
    ) -> None:
        p = self.emulator.profile
        delay = p.rtt_ms + (p.stt_final_ms if delay_ms is None else delay_ms)
        # The range this result covers: from the end of the last final to the audio heard.
        start = self.segment_start
        duration = max(0.0, at - start)
        if is_final:
            self.segment_start = max(start, at)
        payload = {
            "type": "Results",
            "channel_index": [0, 1],
            "duration": round(duration, 3),
            "start": round(start, 3),
            "is_final": is_final,
            "speech_final": is_final and speech_final,
            "from_finalize": from_finalize,
            "channel": {
                "alternatives": [
                    {
                        "transcript": text,
                        "confidence": 0.98,
                        "words": [
                            {
                                "word": w.text.strip(".,!?").lower(),
                                "start": round(self.onset + w.start_s, 3),
                                "end": round(self.onset + w.end_s, 3),
                                "confidence": 0.98,
                                "punctuated_word": w.text,
                            }
                            for w in words
                        ],
                    }
                ]
            },
            "metadata": {
                "request_id": self.request_id,
                "model_info": {"name": "emulated", "version": "0", "arch": "emulator"},
                "model_uuid": "00000000-0000-0000-0000-000000000000",
            },
        }
        self.outbox.put_nowait((time.monotonic() + delay / 1000.0, payload))
        self.emulator.results.append(
            SentResult(
                time.time(),
                at,
                is_final,
                text,
                from_finalize,
                speech_final=is_final and speech_final,
                start_s=round(start, 3),
                duration_s=round(duration, 3),
            )
        )


class DeepgramEmulator(WebSocketEmulator):
    """Deepgram live transcription on 127.0.0.1.

    Args:
        profile: Latency model: ``rtt_ms``, ``stt_final_ms``, ``stt_interim_interval_ms``.
        scripts: Call id (the ``tag`` query parameter) to its utterances, in order.
        default_script: Utterances for connections without a known ``tag``.
        port: TCP port; 0 picks a free one.

    Attributes:
        results: Every result sent, in order (for tests and bench accounting).
    """

    def __init__(
        self,
        profile: LatencyProfile = SAME_REGION,
        *,
        scripts: Mapping[str, Sequence[ScriptedUtterance]] | None = None,
        default_script: Sequence[ScriptedUtterance] = (),
        port: int = 0,
    ):
        super().__init__(port=port)
        self.profile = profile
        self.scripts: dict[str, Sequence[ScriptedUtterance]] = dict(scripts or {})
        self.default_script = default_script
        self.results: list[SentResult] = []

    @property
    def base_url(self) -> str:
        """``ws://127.0.0.1:PORT``, for ``DeepgramSTTService(base_url=...)``."""
        return f"ws://127.0.0.1:{self.port}"

    async def check_request(
        self, connection: ServerConnection, request: Request
    ) -> Response | None:
        """Reject handshakes Deepgram would reject: path, auth, audio format."""
        url = urlsplit(request.path)
        query = parse_qs(url.query)
        if url.path != "/v1/listen":
            return connection.respond(404, "not found\n")
        if not request.headers.get("Authorization"):
            return connection.respond(401, "missing Authorization header\n")
        if query.get("encoding", ["linear16"])[0] != "linear16":
            return connection.respond(400, "only encoding=linear16 is emulated\n")
        rate = query.get("sample_rate", [""])[0]
        if not rate.isdigit() or not 8000 <= int(rate) <= 48000:
            return connection.respond(400, "sample_rate must be an integer in [8000, 48000]\n")
        if query.get("channels", ["1"])[0] != "1":
            return connection.respond(400, "only mono audio is emulated\n")
        if _endpointing(query) == "bad":
            return connection.respond(400, "endpointing must be false or an integer (ms)\n")
        return None

    async def handle(self, connection: ServerConnection) -> None:
        """Transcribe one stream until ``CloseStream`` or disconnect."""
        query = parse_qs(urlsplit(connection.request.path).query)
        tag = query.get("tag", [""])[0]
        script = self.scripts.get(tag, self.default_script)
        where = f"tag {tag!r}"
        if tag not in self.scripts:
            known = ", ".join(repr(t) for t in self.scripts) or "none"
            why = f"no script for tag {tag!r}" if tag else "the connection has no tag"
            where = (
                f"the default script ({why}: set DeepgramSTTService(tag=...) to one of the "
                f"scripted tags: {known})"
            )
            if self.scripts or not self.default_script:
                logger.warning(f"DeepgramEmulator: {why}; using the default script")
        endpointing = _endpointing(query)
        session = _Session(
            self,
            script,
            int(query["sample_rate"][0]),
            where,
            endpointing_ms=None if endpointing is False else float(endpointing),
        )
        sender = asyncio.create_task(self._sender(connection, session))
        try:
            async for message in connection:
                if isinstance(message, bytes):
                    session.on_audio(message)
                elif not await self._on_control(connection, session, message):
                    break
        except ConnectionClosed:
            pass
        finally:
            session.outbox.put_nowait(None)
            try:
                await asyncio.wait_for(sender, timeout=5.0)
            except (TimeoutError, ConnectionClosed):
                sender.cancel()

    async def _on_control(self, connection: ServerConnection, session: _Session, raw: str) -> bool:
        """Handle a JSON control message; False ends the stream."""
        try:
            message = parse_json(raw)
        except BadJSON:
            message = None
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "KeepAlive":
            return True
        if kind == "Finalize":
            session.on_finalize()
            return True
        if kind == "CloseStream":
            return False
        error = {
            "type": "Error",
            "variant": "invalid_message",
            "description": f"unsupported control message: {raw[:80]!r}",
        }
        await connection.send(json.dumps(error))
        return True

    async def _sender(self, connection: ServerConnection, session: _Session) -> None:
        """Send results in order, each no earlier than its due time."""
        while True:
            item = await session.outbox.get()
            if item is None:
                break
            due, payload = item
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            await connection.send(json.dumps(payload, ensure_ascii=False))
        metadata = {
            "type": "Metadata",
            "transaction_key": "deprecated",
            "request_id": session.request_id,
            "sha256": "0" * 64,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "duration": session.detector.audio_time_s,
            "channels": 1,
        }
        try:
            await connection.send(json.dumps(metadata))
        except ConnectionClosed:
            pass


def _endpointing(query: Mapping[str, list[str]]) -> float | bool | str:
    """The ``endpointing`` query parameter: ms of silence, ``False`` (off), or ``"bad"``."""
    raw = query.get("endpointing", [""])[0].strip().lower()
    if not raw or raw == "true":
        return DEFAULT_ENDPOINTING_MS
    if raw == "false":
        return False
    return float(raw) if raw.isdigit() else "bad"


def utterance_from_words(
    text: str, words: Sequence[tuple[str, float, float]], partials: Sequence[tuple[float, str]] = ()
) -> ScriptedUtterance:
    """Build a :class:`ScriptedUtterance` from ``(word, start_s, end_s)`` relative to onset."""
    return ScriptedUtterance(
        text=text,
        words=tuple(ScriptedWord(w, float(a), float(b)) for w, a, b in words),
        partials=tuple((float(t), p) for t, p in partials),
    )


__all__ = [
    "DeepgramEmulator",
    "OnsetDetector",
    "ScriptedUtterance",
    "ScriptedWord",
    "SentResult",
    "interim_events",
    "utterance_from_words",
]
