"""A local transport that plays a scripted caller at real-time pace and plays the bot out.

``CallerTransport`` stands in for a phone or WebRTC caller: its input streams the caller's
utterances as 20 ms audio frames on a real-time clock, with silence between them (as a live
microphone does, so VAD and STT see real gaps), and waits for the bot's reply to finish
before the caller speaks again. Its output consumes the bot's audio at real-time pace, like a
sound card, so ``BotStartedSpeakingFrame`` marks the first audio leaving the transport and
replies take as long to play as they would on a call.

The caller plays each utterance to its end whatever the bot does (a mid-utterance pause is in
the audio itself), then waits for bot audio: a reply that is already playing when it finishes,
or one that starts later, up to its patience (``reply_timeout_s``). Every bot audio start and
stop is recorded in :class:`CallerTimeline`, so the bench can tell a reply from bot audio that
started while the caller was still talking (see :mod:`pipecat_fast.bench.pairing`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from loguru import logger
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    InputAudioRawFrame,
    InterruptionFrame,
    OutputAudioRawFrame,
    StartFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.transports.base_input import BaseInputTransport
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import BaseTransport, TransportParams

CHUNK_MS = 20
CALLER_CLIENT = "scripted-caller"
"""The ``client`` argument of the transport's ``on_client_connected``/``on_client_disconnected``."""


@dataclass
class CallerTimeline:
    """What the caller did and heard (s, epoch), for tests and reports.

    Attributes:
        utterance_started: When each utterance's audio started playing.
        utterance_ended: When each utterance's audio finished playing.
        reply_started: When the caller heard the reply to each utterance start (bot audio
            already playing when the utterance ended counts from that moment); None when
            none came within the caller's patience.
        reply_ended: When that reply stopped; None if it did not.
        bot_started: Every bot audio start the caller heard, in order.
        bot_stopped: Every bot audio stop the caller heard, in order.
        audio_out_ms: Bot audio played in all (ms).
    """

    utterance_started: list[float] = field(default_factory=list)
    utterance_ended: list[float] = field(default_factory=list)
    reply_started: list[float | None] = field(default_factory=list)
    reply_ended: list[float | None] = field(default_factory=list)
    bot_started: list[float] = field(default_factory=list)
    bot_stopped: list[float] = field(default_factory=list)
    audio_out_ms: float = 0.0
    reply_audio_start_ms: float = 0.0
    cut_audio_ms: dict[int, float] = field(default_factory=dict)
    """Reply index (the utterance it answered) to how much of it had played when an
    interruption reached the output (ms): the replies the caller talked over."""
    speaking_reply: int | None = None


class _CallerInput(BaseInputTransport):
    """Streams the caller's audio at real-time pace."""

    def __init__(self, owner: CallerTransport, params: TransportParams):
        super().__init__(params)
        self._caller = owner
        self._caller_task: asyncio.Task | None = None
        self._caller_reply_started = asyncio.Event()  # set while bot audio plays
        self._caller_reply_ended = asyncio.Event()  # set while it does not
        self._caller_reply_ended.set()

    async def start(self, frame: StartFrame):
        """Start streaming once the pipeline has started."""
        await super().start(frame)
        await self.set_transport_ready(frame)
        if self._caller_task is None:
            self._caller_task = self.create_task(self._play_call(), "caller")
            await self._caller._call_event_handler("on_client_connected", CALLER_CLIENT)

    async def stop(self, frame):
        """Stop streaming."""
        await self._stop_caller()
        await super().stop(frame)

    async def cancel(self, frame):
        """Stop streaming at once."""
        await self._stop_caller()
        await super().cancel(frame)

    async def _stop_caller(self):
        if self._caller_task is not None:
            await self.cancel_task(self._caller_task)
            self._caller_task = None

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Watch the bot's speaking frames coming back upstream."""
        if direction == FrameDirection.UPSTREAM:
            if isinstance(frame, BotStartedSpeakingFrame):
                self._caller.timeline.bot_started.append(time.time())
                self._caller_reply_ended.clear()
                self._caller_reply_started.set()
            elif isinstance(frame, BotStoppedSpeakingFrame):
                self._caller.timeline.bot_stopped.append(time.time())
                self._caller_reply_started.clear()
                self._caller_reply_ended.set()
        await super().process_frame(frame, direction)

    async def _play_call(self):
        caller = self._caller
        rate = caller.sample_rate
        step = rate * 2 * CHUNK_MS // 1000
        clock = time.monotonic()

        async def play(pcm: bytes):
            nonlocal clock
            for i in range(0, len(pcm), step):
                chunk = pcm[i : i + step].ljust(step, b"\x00")
                clock += CHUNK_MS / 1000.0
                await asyncio.sleep(max(0.0, clock - time.monotonic()))
                await self.push_audio_frame(InputAudioRawFrame(chunk, rate, 1))

        silence = b"\x00" * step

        async def play_silence_until(
            event: asyncio.Event, timeout_s: float, since: int | None = None
        ) -> bool:
            """Silence until ``event`` is set, or ``timeout_s`` passes.

            With ``since``: and bot audio started after the ``since``-th start.
            """

            def done() -> bool:
                fresh = since is None or len(caller.timeline.bot_started) > since
                return event.is_set() and fresh

            deadline = time.monotonic() + timeout_s
            while not done() and time.monotonic() < deadline:
                await play(silence)
            return done()

        timeline = caller.timeline
        if caller.await_greeting:
            # The bot speaks first: the callee listens to the greeting before answering it.
            if await play_silence_until(self._caller_reply_started, caller.reply_timeout_s):
                await play_silence_until(self._caller_reply_ended, caller.reply_timeout_s)
            else:
                logger.warning(f"{self}: no greeting within the timeout")
        await play(silence * int(caller.lead_silence_s * 1000 / CHUNK_MS))
        for index, pcm in enumerate(caller.utterances):
            pause = caller.pause_before(index)
            if pause:
                # The caller goes quiet (on hold, looking something up) before going on.
                await play(silence * int(pause * 1000 / CHUNK_MS))
            timeline.utterance_started.append(time.time())
            starts_before = len(timeline.bot_started)
            await play(pcm)
            timeline.utterance_ended.append(time.time())
            # Bot audio still playing now is what the caller hears as the reply; bot audio
            # that started and stopped while the caller talked was not one, and neither is
            # the reply this utterance talked over, if the bot has not stopped it yet.
            started = await play_silence_until(
                self._caller_reply_started, caller.reply_timeout_s, since=starts_before
            )
            timeline.reply_started.append(time.time() if started else None)
            if not started:
                logger.warning(f"{self}: no reply to utterance {index} within the timeout")
                timeline.reply_ended.append(None)
                continue
            timeline.reply_audio_start_ms = timeline.audio_out_ms
            timeline.speaking_reply = index
            barge_in = caller.barge_in_after(index + 1)
            if barge_in is not None:
                # The caller talks over the reply this long after it started.
                barged = asyncio.Event()
                ended = await play_silence_until(barged, barge_in)
                timeline.reply_ended.append(None)
                continue
            ended = await play_silence_until(self._caller_reply_ended, caller.reply_timeout_s)
            timeline.reply_ended.append(time.time() if ended else None)
            timeline.speaking_reply = None
            await play(silence * int(caller.reply_gap_s * 1000 / CHUNK_MS))
        caller.finished.set()
        await caller._call_event_handler("on_client_disconnected", CALLER_CLIENT)
        while True:  # a live line keeps sending silence until hung up
            await play(silence)


class _PacedOutput(BaseOutputTransport):
    """Consumes the bot's audio at real-time pace, like a sound card."""

    def __init__(self, owner: CallerTransport, params: TransportParams):
        super().__init__(params)
        self._caller = owner
        self._caller_play_clock = 0.0

    async def start(self, frame: StartFrame):
        """Ready to play."""
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Note how much of the reply had played when an interruption cuts it."""
        if isinstance(frame, InterruptionFrame):
            timeline = self._caller.timeline
            reply = timeline.speaking_reply
            if reply is not None and reply not in timeline.cut_audio_ms:
                played = timeline.audio_out_ms - timeline.reply_audio_start_ms
                timeline.cut_audio_ms[reply] = played
        await super().process_frame(frame, direction)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        """Return once the chunk's turn to play has come (real-time pacing)."""
        now = time.monotonic()
        self._caller_play_clock = max(self._caller_play_clock, now)
        duration = len(frame.audio) / 2 / max(1, frame.sample_rate) / max(1, frame.num_channels)
        wait = self._caller_play_clock - now
        self._caller_play_clock += duration
        self._caller.timeline.audio_out_ms += duration * 1000.0
        if wait > 0:
            await asyncio.sleep(wait)
        return True


class CallerTransport(BaseTransport):
    """A scripted caller on a local line at real-time pace.

    Args:
        utterances: The caller's utterances as 16-bit mono PCM at ``sample_rate``.
        sample_rate: Caller audio rate (Hz); the bot's output rate comes from the pipeline.
        lead_silence_s: Silence before the first utterance (s).
        reply_gap_s: Silence between the end of the bot's reply and the caller's next
            utterance (s).
        reply_timeout_s: The caller's patience: how long it waits for a reply to start, then
            to end (s). A reply that starts later is talked over by the next utterance.
        barge_in_after_s: Per utterance, ``None`` to wait for the previous reply to end, or
            how long after that reply started the caller starts this utterance, talking over
            it (the first utterance's entry is ignored). Missing entries wait.
        await_greeting: The bot speaks first: the caller waits for its greeting to start and
            end (each up to ``reply_timeout_s``) before the lead silence and first utterance.
        pause_before_s: Per utterance, extra silence before it (s, after the reply gap) or
            ``None``: a caller who goes quiet mid-call (an idle gap).
        params: Transport parameters; audio in and out are enabled.

    Attributes:
        finished: Set once the caller has heard the reply to its last utterance.
        timeline: What the caller did and heard.

    Events, as a phone or WebRTC transport fires them (handlers get ``(transport, client)``):
    ``on_client_connected`` when the pipeline has started and the caller is on the line, and
    ``on_client_disconnected`` when the caller hangs up, once it has heard the reply to its last
    utterance (then ``finished`` is set). A bot that ends its worker on disconnect, as
    Pipecat's examples do, ends the call the same way here. The line keeps sending silence
    until the pipeline stops.
    """

    def __init__(
        self,
        utterances: Sequence[bytes],
        *,
        sample_rate: int = 16000,
        lead_silence_s: float = 0.6,
        reply_gap_s: float = 0.6,
        reply_timeout_s: float = 15.0,
        barge_in_after_s: Sequence[float | None] = (),
        await_greeting: bool = False,
        pause_before_s: Sequence[float | None] = (),
        params: TransportParams | None = None,
    ):
        super().__init__()
        self.utterances = list(utterances)
        self.sample_rate = sample_rate
        self.lead_silence_s = lead_silence_s
        self.reply_gap_s = reply_gap_s
        self.reply_timeout_s = reply_timeout_s
        self.barge_in_after_s = list(barge_in_after_s)
        self.await_greeting = await_greeting
        self.pause_before_s = list(pause_before_s)
        self.finished = asyncio.Event()
        self.timeline = CallerTimeline()
        self._caller_params = params or TransportParams(
            audio_in_enabled=True,
            audio_out_enabled=True,
            audio_in_sample_rate=sample_rate,
        )
        self._caller_input: _CallerInput | None = None
        self._caller_output: _PacedOutput | None = None
        self._register_event_handler("on_client_connected")
        self._register_event_handler("on_client_disconnected")

    def barge_in_after(self, index: int) -> float | None:
        """When utterance ``index`` starts over the previous reply (s after it began), if so."""
        if 0 < index < min(len(self.utterances), len(self.barge_in_after_s)):
            return self.barge_in_after_s[index]
        return None

    def pause_before(self, index: int) -> float | None:
        """Extra silence before utterance ``index`` (s), after the usual reply gap, if any."""
        if 0 <= index < len(self.pause_before_s):
            return self.pause_before_s[index]
        return None

    def input(self) -> FrameProcessor:
        """The caller's microphone."""
        if self._caller_input is None:
            self._caller_input = _CallerInput(self, self._caller_params)
        return self._caller_input

    def output(self) -> FrameProcessor:
        """The caller's earpiece."""
        if self._caller_output is None:
            self._caller_output = _PacedOutput(self, self._caller_params)
        return self._caller_output
