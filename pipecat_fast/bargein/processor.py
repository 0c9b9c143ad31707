"""Barge-in truncation: the assistant context keeps only the words the caller heard.

Two thin processors around the output transport feed one :class:`PlaybackLedger`::

    truncation = BargeInTruncator(playout_delay_s=0.06)
    Pipeline([..., tts, truncation.before_output(), transport.output(),
              truncation.after_output(), context_aggregator.assistant()])

``before_output()`` sees what the TTS sends to the transport (audio contexts, sentence text,
word timestamps, audio durations). ``after_output()`` sees what the transport has written
(the transport pushes each audio chunk on once it is written) and holds the TTS's text
frames until their audio has been played and the playout delay has passed. On an
interruption it hands the assistant aggregator exactly the heard words (a partial word
dropped, nothing at all if nothing played), a short marker, and every uninterruptible frame
(function calls), then lets the interruption through. Both run in Pipecat's direct mode, so
they see frames in the order the neighbours push them, with no queue of their own.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    AggregatedTextFrame,
    BotStoppedSpeakingFrame,
    CancelFrame,
    ControlFrame,
    EndFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    StartFrame,
    SystemFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.utils.base_object import BaseObject
from pipecat.utils.string import TextPartForConcatenation, concatenate_aggregated_text

from pipecat_fast._pipecat import (
    add_inline_frame_hooks,
    tts_synthesizes_sequentially,
    word_start_s,
    word_timing_baseline,
)
from pipecat_fast.bargein.core import PlaybackLedger, Unit, word_spans
from pipecat_fast.frames import TTFAAnnotationFrame

DEFAULT_PLAYOUT_DELAY_S = 0.06
"""Audio written but not yet heard: a WebRTC client's jitter buffer holds 20-60 ms (issue
13); a telephony leg adds 100 ms or more, so phone deployments should set ~0.15."""

DEFAULT_MARKER = "—"
"""Appended to an interrupted reply: a cut-off sentence ends in a dash in written dialogue,
which models read as "interrupted", and which a TTS does not pronounce if the model
imitates it."""

STALL_S = 3.0
"""Held text whose audio stopped coming this long ago (no stop frame either) is settled with
what played (Pipecat's own TTS gives up on an audio context after 3 s of silence)."""

FENCE_TIMEOUT_S = 0.5
"""Longest wait for the assistant aggregator to take the heard text before the interruption
is let through (it is normally a single event-loop turn)."""


def _audio_seconds(frame: TTSAudioRawFrame) -> float:
    channels = max(1, frame.num_channels)
    return len(frame.audio) / 2 / channels / max(1, frame.sample_rate)


def _spoken_text(frame: Frame) -> bool:
    """A TTS text frame on its way to the context (the ones this lever holds)."""
    return isinstance(frame, TTSTextFrame) and frame.append_to_context and not frame.skip_tts


@dataclass
class TruncatedReply:
    """What one interruption committed.

    Attributes:
        text: The heard text committed to the context (without the marker); "" if none.
        words_committed: Whole words committed.
        words_sent: Words the interrupted reply had sent to the TTS so far.
        playout_delay_s: The delay still unplayed when it was cut.
        marked: Whether the marker was appended.
    """

    text: str
    words_committed: int
    words_sent: int
    playout_delay_s: float
    marked: bool

    def annotation(self) -> dict[str, Any]:
        """The TTFA meter's per-turn keys (``bargein_*``) for the turn whose reply was cut."""
        return {
            "bargein_words_committed": self.words_committed,
            "bargein_words_sent": self.words_sent,
            "bargein_committed_text": self.text,
        }


@dataclass
class _Fence(ControlFrame):
    """Sent after the heard text; the interruption waits until the aggregator has taken it."""

    token: int = 0


@dataclass
class _Held:
    frame: Frame
    known: bool = False
    at: float = field(default_factory=time.monotonic)


class BargeInTruncator(BaseObject):
    """Commit to the assistant context only what the caller heard when they barge in.

    Args:
        playout_delay_s: Audio still in the far end's buffers after the transport wrote it
            (s); words whose audio ends within it are not yet heard.
        marker: Text appended to an interrupted reply so the LLM knows it was cut off;
            ``None`` or ``""`` for none (the ``on_reply_truncated`` event and Pipecat's
            ``AssistantTurnStoppedMessage.interrupted`` still say so).
        unit: Speech units for the estimate without word timestamps: ``"chars"`` (default)
            or ``"syllables"``.
        seconds_per_unit: Fallback speaking rate before any audio completes.

    Event handlers:
        on_reply_truncated(truncator, reply: TruncatedReply): after an interruption.

    Raises:
        ValueError: On a negative or non-number delay, or an unknown unit.
    """

    def __init__(
        self,
        *,
        playout_delay_s: float = DEFAULT_PLAYOUT_DELAY_S,
        marker: str | None = DEFAULT_MARKER,
        unit: Unit = "chars",
        seconds_per_unit: float | None = None,
    ):
        super().__init__()
        if not isinstance(playout_delay_s, int | float) or not playout_delay_s >= 0:
            raise ValueError(f"playout_delay_s must be >= 0, got {playout_delay_s!r}")
        self.playout_delay_s = float(playout_delay_s)
        self.marker = marker or ""
        self.ledger = PlaybackLedger(unit=unit, seconds_per_unit=seconds_per_unit)
        self.truncations: list[TruncatedReply] = []
        self._bargein_before: _BeforeOutput | None = None
        self._bargein_after: _AfterOutput | None = None
        self._register_event_handler("on_reply_truncated")

    def before_output(self) -> FrameProcessor:
        """The processor to put right after the TTS service, before ``transport.output()``."""
        if self._bargein_before is None:
            self._bargein_before = _BeforeOutput(self)
        return self._bargein_before

    def after_output(self) -> FrameProcessor:
        """The processor to put after ``transport.output()``, right before the aggregator."""
        if self._bargein_after is None:
            self._bargein_after = _AfterOutput(self)
        return self._bargein_after

    async def _report(self, reply: TruncatedReply) -> None:
        self.truncations.append(reply)
        await self._call_event_handler("on_reply_truncated", reply)


class _BeforeOutput(FrameProcessor):
    """Reports what the TTS sends to the transport; passes every frame on unchanged."""

    def __init__(self, owner: BargeInTruncator):
        super().__init__(enable_direct_mode=True)
        self._bargein = owner
        self._bargein_context: str | None = None
        self._bargein_last_word_pts = 0
        self._bargein_baselines: dict[str | None, int] = {}

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Note the frame in the ledger, then pass it on."""
        await super().process_frame(frame, direction)
        if direction == FrameDirection.DOWNSTREAM:
            try:
                self._bargein_observe(frame)
            except Exception as e:  # fail open: the frame still goes on
                logger.warning(f"{self}: barge-in bookkeeping failed on {frame}: {e}")
        await self.push_frame(frame, direction)

    def _bargein_baseline(self, context_id: str | None) -> int:
        """Where the context's word times start on Pipecat's clock (set at its first output)."""
        if context_id not in self._bargein_baselines:
            now = self.get_clock().get_time()
            self._bargein_baselines[context_id] = word_timing_baseline(
                self._bargein_last_word_pts, now
            )
        return self._bargein_baselines[context_id]

    def _bargein_observe(self, frame: Frame) -> None:
        ledger = self._bargein.ledger
        if isinstance(frame, StartFrame):
            sequential = tts_synthesizes_sequentially(self.previous)
            ledger.mode = "sequential" if sequential else "streamed"
        elif isinstance(frame, InterruptionFrame):
            ledger.interruption_sent()
            self._bargein_last_word_pts = 0
            self._bargein_baselines.clear()
        elif isinstance(frame, TTSStartedFrame):
            self._bargein_context = frame.context_id
            ledger.open(frame.context_id)
        elif isinstance(frame, TTSAudioRawFrame):
            cid = frame.context_id or self._bargein_context
            self._bargein_baseline(cid)
            ledger.audio(cid, _audio_seconds(frame))
        elif _spoken_text(frame):
            assert isinstance(frame, TTSTextFrame)
            cid = frame.context_id or self._bargein_context
            if frame.pts:
                start = word_start_s(frame.pts, self._bargein_baseline(cid))
                self._bargein_last_word_pts = max(self._bargein_last_word_pts, frame.pts)
                spaces = frame.includes_inter_frame_spaces
                ledger.word(cid, frame.id, frame.text, start, spaces=spaces)
            else:
                ledger.sentence(
                    cid,
                    frame.id,
                    frame.text,
                    segment=frame.segment_id,
                    includes_spaces=frame.includes_inter_frame_spaces,
                )
        elif (
            isinstance(frame, AggregatedTextFrame)
            and not isinstance(frame, TTSTextFrame)
            and frame.will_be_spoken
            and not frame.skip_tts
        ):
            ledger.announce(frame.context_id or self._bargein_context, frame.id, frame.text)
        elif isinstance(frame, TTSStoppedFrame):
            cid = frame.context_id or self._bargein_context
            ledger.close(cid)
            self._bargein_baselines.pop(cid, None)


class _AfterOutput(FrameProcessor):
    """Holds the TTS's text until it is heard; commits the heard part on an interruption."""

    def __init__(self, owner: BargeInTruncator):
        super().__init__(enable_direct_mode=True)
        self._bargein = owner
        self._bargein_held: deque[_Held] = deque()
        self._bargein_lock = asyncio.Lock()
        self._bargein_last_write = 0.0
        self._bargein_timer: asyncio.Task | None = None
        self._bargein_interrupting = False
        self._bargein_fences: dict[int, asyncio.Event] = {}
        self._bargein_fence_count = 0
        self._bargein_warned_unknown = False
        self._bargein_watching: FrameProcessor | None = None
        self._bargein_reply_words = 0  # words of the reply in progress already released

    # -- timing -------------------------------------------------------------------------------

    def _bargein_remaining_delay(self) -> float:
        """Playout delay of the last audio written that has not yet elapsed (s)."""
        since = time.monotonic() - self._bargein_last_write
        return max(0.0, self._bargein.playout_delay_s - since)

    def _bargein_arm_timer(self, delay_s: float) -> None:
        if self._bargein_timer is not None and not self._bargein_timer.done():
            return
        self._bargein_timer = self.create_task(self._bargein_release_later(delay_s))

    async def _bargein_release_later(self, delay_s: float) -> None:
        await asyncio.sleep(delay_s + 0.001)
        self._bargein_timer = None
        await self._bargein_release()

    async def _bargein_cancel_timer(self) -> None:
        if self._bargein_timer is not None:
            timer, self._bargein_timer = self._bargein_timer, None
            if timer is not asyncio.current_task():
                await self.cancel_task(timer)

    # -- frames -------------------------------------------------------------------------------

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Pass frames on, holding the TTS's text (and what follows it) until heard."""
        await super().process_frame(frame, direction)
        if direction == FrameDirection.UPSTREAM:
            await self.push_frame(frame, direction)
            return
        ledger = self._bargein.ledger
        if isinstance(frame, StartFrame):
            self._bargein_watch_next()
            await self.push_frame(frame, direction)
        elif isinstance(frame, InterruptionFrame):
            await self._bargein_interrupt(frame)
        elif isinstance(frame, EndFrame):
            await self._bargein_release(final=True)
            await self._bargein_cancel_timer()
            await self.push_frame(frame, direction)
        elif isinstance(frame, CancelFrame):
            await self._bargein_cancel_timer()
            await self.push_frame(frame, direction)
        elif isinstance(frame, SystemFrame):
            if isinstance(frame, BotStoppedSpeakingFrame):
                # The transport has nothing more to play: whatever is still held has played.
                ledger.all_played_out()
                await self.push_frame(frame, direction)
                await self._bargein_release()
            else:
                await self.push_frame(frame, direction)
        elif self._bargein_interrupting:
            if not frame.interruptible:
                await self.push_frame(frame, direction)
        elif isinstance(frame, TTSAudioRawFrame):
            ledger.written(_audio_seconds(frame))
            self._bargein_last_write = time.monotonic()
            await self.push_frame(frame, direction)
            if self._bargein_held:
                await self._bargein_release()
        else:
            if isinstance(frame, TTSStartedFrame):
                ledger.playing(frame.context_id)
            elif isinstance(frame, TTSStoppedFrame):
                ledger.played_out(frame.context_id)
            known = _spoken_text(frame) and ledger.knows(frame.id)
            if _spoken_text(frame) and not known and not self._bargein_warned_unknown:
                self._bargein_warned_unknown = True
                logger.warning(
                    f"{self}: text reached the transport's output without passing "
                    "before_output(); it goes to the context as Pipecat sends it"
                )
            if known or self._bargein_held:
                self._bargein_held.append(_Held(frame, known))
                await self._bargein_release()
            else:
                await self._bargein_pass(frame)

    async def _bargein_release(self, *, final: bool = False) -> None:
        """Pass on held frames from the front whose text's fate is settled."""
        async with self._bargein_lock:
            if self._bargein_interrupting:
                return
            ledger = self._bargein.ledger
            delay = 0.0 if final else self._bargein_remaining_delay()
            released: list[int] = []
            while self._bargein_held:
                held = self._bargein_held[0]
                if held.known:
                    fate = ledger.fate(held.frame.id, delay)
                    if not (fate.final or final):
                        # Wait for the delay to pass, or for more audio; with neither for
                        # STALL_S (a TTS that went quiet without stopping), settle it as is.
                        quiet_since = max(self._bargein_last_write, held.at)
                        stalled = STALL_S - (time.monotonic() - quiet_since)
                        if delay <= 0 and stalled <= 0:
                            final = True
                            fate = ledger.fate(held.frame.id, 0.0)
                        else:
                            self._bargein_arm_timer(delay if delay > 0 else stalled)
                            break
                    self._bargein_held.popleft()
                    released.append(held.frame.id)
                    if fate.complete:
                        await self.push_frame(held.frame)
                    elif fate.text:
                        await self.push_frame(_text_like(held.frame, fate.text))
                    else:
                        logger.debug(f"{self}: dropping unheard text {held.frame.text!r}")
                    self._bargein_reply_words += len(word_spans(fate.text))
                else:
                    self._bargein_held.popleft()
                    await self._bargein_pass(held.frame)
            ledger.forget(released)

    async def _bargein_pass(self, frame: Frame) -> None:
        """Push a frame that is not held text; the end of a reply closes its word count."""
        if isinstance(frame, LLMFullResponseEndFrame):
            self._bargein_reply_words = 0
        await self.push_frame(frame)

    async def _bargein_interrupt(self, frame: InterruptionFrame) -> None:
        """Commit what was heard, then let the interruption through."""
        async with self._bargein_lock:
            self._bargein_interrupting = True
            try:
                await self._bargein_commit_heard()
            except Exception as e:  # fail open: the interruption must go through
                logger.warning(f"{self}: committing the heard text failed: {e}")
            finally:
                self._bargein.ledger.interrupted()
                self._bargein_interrupting = False
        await self._bargein_cancel_timer()
        await self.push_frame(frame, FrameDirection.DOWNSTREAM)

    async def _bargein_commit_heard(self) -> None:
        """Push the heard part of the interrupted reply (and its function calls)."""
        ledger = self._bargein.ledger
        delay = self._bargein_remaining_delay()
        cut_off = ledger.interrupted_keys()
        held = list(self._bargein_held)
        # Text of a reply sent after the interruption stays held, with what follows it.
        split = next(
            (i for i, h in enumerate(held) if h.known and h.frame.id not in cut_off), len(held)
        )
        self._bargein_held = deque(held[split:])
        out: list[Frame] = []
        committed: list[tuple[str, bool]] = []
        sent_words = 0
        cut = False
        held_keys = set()
        for h in held[:split]:
            f = h.frame
            if h.known:
                held_keys.add(f.id)
                sent_words += len(word_spans(f.text))
            if cut:
                if not f.interruptible and not _spoken_text(f):
                    out.append(f)  # function calls and results must reach the context
                continue
            if not h.known:
                out.append(f)
                continue
            fate = ledger.fate(f.id, delay)
            if fate.complete:
                out.append(f)
                committed.append((f.text, f.includes_inter_frame_spaces))
            else:
                cut = True
                if fate.text:
                    out.append(_text_like(f, fate.text))
                    committed.append((fate.text, f.includes_inter_frame_spaces))
        # Text still inside the transport (an HTTP TTS's sentence frame follows its audio),
        # or a sentence known only by its announcement.
        for part in ledger.unheld_parts(held_keys, delay):
            sent_words += part.words_sent
            if part.text and not cut:
                frame = TTSTextFrame(part.text, text_type="sentence")
                frame.includes_inter_frame_spaces = part.includes_spaces
                out.append(frame)
                committed.append((part.text, part.includes_spaces))
            cut = cut or not part.complete
        text = concatenate_aggregated_text(
            [TextPartForConcatenation(t, includes_inter_part_spaces=s) for t, s in committed]
        )
        reply_words = self._bargein_reply_words + len(word_spans(text))
        marked = bool(self._bargein.marker and cut and reply_words)
        if marked:
            marker = TTSTextFrame(self._bargein.marker, text_type="marker")
            out.append(marker)
        for f in out:
            await self.push_frame(f)
        if out:
            await self._bargein_fence()
        sent_total = self._bargein_reply_words + sent_words
        if sent_total and cut:
            reply = TruncatedReply(
                text=text,
                words_committed=reply_words,
                words_sent=max(sent_total, reply_words),
                playout_delay_s=delay,
                marked=marked,
            )
            await self._bargein._report(reply)
            await self.push_frame(TTFAAnnotationFrame(fields=reply.annotation()))
        self._bargein_reply_words = 0

    # -- fence ---------------------------------------------------------------------------------

    def _bargein_watch_next(self) -> None:
        nxt = self.next
        if nxt is None or nxt is self._bargein_watching:
            return
        self._bargein_watching = nxt

        async def on_after(_processor, frame):
            if isinstance(frame, _Fence):
                event = self._bargein_fences.pop(frame.token, None)
                if event is not None:
                    event.set()

        try:
            add_inline_frame_hooks(nxt, after_process=on_after)
        except RuntimeError as e:  # fail open: no fence, the interruption goes straight on
            logger.warning(f"{self}: cannot wait for {nxt} to take the heard text ({e})")
            self._bargein_watching = None

    async def _bargein_fence(self) -> None:
        """Wait until the next processor has processed everything pushed so far."""
        if self._bargein_watching is None:
            return
        self._bargein_fence_count += 1
        token = self._bargein_fence_count
        event = self._bargein_fences[token] = asyncio.Event()
        await self.push_frame(_Fence(token=token))
        try:
            await asyncio.wait_for(event.wait(), FENCE_TIMEOUT_S)
        except TimeoutError:
            logger.warning(f"{self}: the aggregator did not take the heard text in time")
        finally:
            self._bargein_fences.pop(token, None)


def _text_like(frame: TTSTextFrame, text: str) -> TTSTextFrame:
    """A copy of ``frame`` carrying only ``text`` (the heard part of it)."""
    out = TTSTextFrame(text, text_type=frame.text_type, context_id=frame.context_id)
    out.segment_id = frame.segment_id
    out.includes_inter_frame_spaces = frame.includes_inter_frame_spaces
    out.will_be_spoken = frame.will_be_spoken
    return out
