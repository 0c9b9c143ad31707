"""Preemptive TTS around Pipecat's own TTS service: first audio synthesized early, held, released.

Two processors, one pair::

    preempt = PreemptiveTTS(llm, tts)
    Pipeline([..., user_aggregator, llm, preempt, tts, preempt.hold, transport.output(), ...])

:class:`PreemptiveTTS` goes right after the LLM service. While a draft reply is held by the
LLM's ``SpeculationGate`` (draft-and-hold), it hands the TTS copies of the reply's start and
first phrase; the TTS — any Pipecat TTS service, WebSocket or HTTP, unchanged — synthesizes them
as the start of a normal reply. :class:`HeldAudioGate` goes right after the TTS and holds
everything the TTS produces for the draft until the turn is confirmed, so nothing of an
unconfirmed turn reaches the transport. On confirmation the held audio is released in order and
the rest of the reply follows (the originals the LLM's gate releases, minus those already
handed over). On withdrawal the TTS's synthesis is cancelled (an interruption into the TTS,
which cancels the provider's context; the hold swallows it) and the held audio dropped; a TTS
error on the draft withdraws the draft itself, and the normal path answers the turn.

The decisions are :mod:`pipecat_fast.preemptive.core`'s (pure); these classes move frames.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    EagerEndOfTurnCancelFrame,
    EndFrame,
    ErrorFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    SystemFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from pipecat_fast._pipecat import tap_speculation_gate
from pipecat_fast.frames import DraftWithdrawalRequestFrame, TTFAAnnotationFrame
from pipecat_fast.preemptive.core import (
    CancelTTS,
    Feed,
    FeedCore,
    FeedDecision,
    FeedStats,
    HoldCore,
    Settle,
    WithdrawDraft,
)


@dataclass
class _PreemptDecisions(SystemFrame):
    """Internal: decisions taken in the LLM's task, carried out in this processor's."""

    decisions: list = field(default_factory=list)


def _kind(frame: Frame) -> str:
    if isinstance(frame, LLMFullResponseStartFrame):
        return "start"
    if isinstance(frame, LLMFullResponseEndFrame):
        return "end"
    if isinstance(frame, LLMTextFrame):
        return "text"
    return "other"


class HeldAudioGate(FrameProcessor):
    """The hold after the TTS: a draft's synthesis reaches the transport only once confirmed.

    Made by :class:`PreemptiveTTS` (``preempt.hold``); put it right after the TTS service.
    """

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._hold_core = HoldCore()

    @property
    def core(self) -> HoldCore:
        """The hold's state machine."""
        return self._hold_core

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Hold the draft's frames until its verdict; then release them or drop them."""
        await super().process_frame(frame, direction)
        if direction != FrameDirection.DOWNSTREAM:
            await self.push_frame(frame, direction)
            return
        core = self._hold_core
        if isinstance(frame, EndFrame):
            out = [*core.end(), frame]
        else:
            out = core.frame(
                frame,
                frame_id=frame.id,
                context_id=getattr(frame, "context_id", None),
                system=isinstance(frame, SystemFrame),
                interruptible=frame.interruptible,
            )
        for item in out:
            await self.push_frame(item, direction)


class PreemptiveTTS(FrameProcessor):
    """Hand the TTS a held draft's first phrase before the turn is confirmed.

    Args:
        llm: The LLM service (its speculation gate is watched for held draft frames).
        tts: The TTS service; when given, its ``on_tts_request`` tells when the first phrase
            is being synthesized (no more text is handed over before confirmation).
        max_chars: Text handed to the TTS at most before confirmation.
        **kwargs: Passed to ``FrameProcessor``.

    Attributes:
        hold: The :class:`HeldAudioGate` to put right after the TTS.
        stats: What preemptive synthesis did (:class:`~pipecat_fast.preemptive.core.FeedStats`).

    Raises:
        TypeError: If ``llm`` is not a Pipecat LLM service (no speculation gate).
        ValueError: If ``max_chars`` < 1.
    """

    def __init__(self, llm: Any, tts: Any = None, *, max_chars: int = 120, **kwargs: Any):
        core = FeedCore(max_chars=max_chars)
        super().__init__(**kwargs)
        self._pre_core = core
        self._pre_frames: dict[int, Frame] = {}
        self._pre_marker: int | None = None  # the copy of the current draft's start
        self.hold = HeldAudioGate(name=f"{self.name}::hold")
        tap_speculation_gate(llm, self._pre_on_held)
        if tts is not None:
            tts.add_event_handler("on_tts_request", self._pre_on_tts_request)

    @property
    def stats(self) -> FeedStats:
        """What preemptive synthesis did over the session."""
        return self._pre_core.stats

    # -- the LLM's gate (its task) ---------------------------------------------------------

    def _pre_on_held(self, frame: Frame) -> None:
        decisions = self._pre_core.held(frame.id, _kind(frame), getattr(frame, "text", "") or "")
        if not decisions:
            return
        for d in decisions:
            if isinstance(d, Feed):
                self._pre_frames[d.frame_id] = frame
        self.create_task(
            self.queue_frame(_PreemptDecisions(decisions=decisions)), f"{self}::preempt"
        )

    async def _pre_on_tts_request(self, _tts, _context_id: str, _text: str) -> None:
        self._pre_core.tts_started()

    # -- frames ----------------------------------------------------------------------------

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Carry out the feed decisions; pass every other frame on, minus handed-over ones."""
        await super().process_frame(frame, direction)
        core = self._pre_core
        if isinstance(frame, _PreemptDecisions):
            await self._pre_apply(frame.decisions)
            return
        if direction == FrameDirection.UPSTREAM:
            await self.push_frame(frame, direction)
            if isinstance(frame, ErrorFrame) and core.draft_in_tts:
                logger.warning(f"{self}: the TTS failed on a held draft ({frame.error})")
                await self._pre_apply(core.tts_failed())
            return
        if isinstance(frame, UserStoppedSpeakingFrame):
            # The hold releases the draft when this frame reaches it, after passing it on.
            await self._pre_apply(core.confirmed(), confirmation=frame)
            return
        if isinstance(frame, EagerEndOfTurnCancelFrame | InterruptionFrame):
            await self.push_frame(frame, direction)
            decisions = core.withdrawn("withdrawn")
            if isinstance(frame, InterruptionFrame):
                # The interruption reaches the TTS anyway: it cancels the draft's synthesis.
                decisions = [d for d in decisions if not isinstance(d, CancelTTS)]
            await self._pre_apply(decisions)
            return
        if isinstance(frame, LLMFullResponseStartFrame | LLMTextFrame | LLMFullResponseEndFrame):
            self._pre_frames.pop(frame.id, None)
            if core.original(frame.id):
                if isinstance(frame, LLMFullResponseEndFrame):
                    core.response_ended()
                return  # its copy already went to the TTS
            await self.push_frame(frame, direction)
            if isinstance(frame, LLMFullResponseEndFrame):
                core.response_ended()
            return
        await self.push_frame(frame, direction)

    async def _pre_apply(
        self, decisions: list[FeedDecision], *, confirmation: Frame | None = None
    ) -> None:
        """Carry out ``decisions``.

        With ``confirmation`` (the frame confirming the turn), the hold is told to release the
        draft once that frame passes it, then the frame goes on.
        """
        notes: list[Frame] = []
        for d in decisions:
            if isinstance(d, Feed):
                original = self._pre_frames.pop(d.frame_id, None)
                if original is None or not self._pre_core.take_promise(d.frame_id):
                    continue
                copy = dataclasses.replace(original)
                if isinstance(original, LLMFullResponseStartFrame):
                    self._pre_marker = copy.id
                    self.hold.core.expect(copy.id)
                else:
                    self.hold.core.own(copy.id)
                await self.push_frame(copy)
            elif isinstance(d, CancelTTS):
                interruption = InterruptionFrame()
                self.hold.core.swallow(interruption.id)
                logger.debug(f"{self}: cancelling the TTS's synthesis of a draft ({d.reason})")
                await self.push_frame(interruption)
            elif isinstance(d, WithdrawDraft):
                # Asked of the draft strategy: its withdrawal passes the LLM's gate going down.
                logger.debug(f"{self}: asking for the draft to be withdrawn ({d.reason})")
                await self.push_frame(
                    DraftWithdrawalRequestFrame(reason=d.reason), FrameDirection.UPSTREAM
                )
            elif isinstance(d, Settle):
                if self._pre_marker is not None:
                    released = d.outcome == "released"
                    after = confirmation.id if released and confirmation is not None else None
                    self.hold.core.settle(self._pre_marker, released=released, after=after)
                    self._pre_marker = None
                add = {"preempt_chars": d.chars_fed}
                if d.outcome == "discarded":
                    add["preempt_chars_discarded"] = d.chars_fed
                notes.append(TTFAAnnotationFrame(fields={"preempt": d.outcome}, add=add))
        if confirmation is not None:
            await self.push_frame(confirmation)
        for note in notes:
            await self.push_frame(note)
