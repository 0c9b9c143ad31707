"""TwoUpdateStabilizer: the stabiliser as a processor between the STT and the user aggregator."""

from __future__ import annotations

from datetime import datetime

from loguru import logger
from pipecat.frames.frames import (
    Frame,
    InterimTranscriptionFrame,
    TranscriptionFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from pipecat_fast.frames import StableTranscriptFrame
from pipecat_fast.stabilizer.core import Mode, PartialStabilizer, StabilizerCounters
from pipecat_fast.tokens import DEFAULT_ENCODING


def _iso_seconds(timestamp: object) -> float | None:
    """Seconds since the epoch of an ISO 8601 timestamp string, or None if it is not one."""
    if not isinstance(timestamp, str) or not timestamp:
        return None
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        return None


class TwoUpdateStabilizer(FrameProcessor):
    """Pushes a :class:`StableTranscriptFrame` whenever the settled words of the turn change.

    Place it right after the STT service, before the user context aggregator. Every frame
    passes on unchanged; after each downstream ``InterimTranscriptionFrame`` or
    ``TranscriptionFrame`` that changes the stable prefix (see
    :class:`~pipecat_fast.stabilizer.core.PartialStabilizer`), a ``StableTranscriptFrame``
    follows it downstream. State resets when the user turn ends: on the
    ``UserStoppedSpeakingFrame`` the aggregator broadcasts: it reaches this processor going
    upstream, from the aggregator, which has already seen every transcript of the turn. A
    downstream copy, from a turn processor placed before this one, ends the turn too, but a
    system frame overtakes the data frames queued here (Pipecat runs system frames first), so
    a transcript still queued would count in the next turn: place the stabiliser before the
    aggregator that ends the turns. The two copies of one broadcast end one turn.
    Interruptions, including the one the first interim of a turn triggers, do not reset it.

    ``StableTranscriptFrame`` is an uninterruptible data frame (see
    :mod:`pipecat_fast.frames`), so it reaches the next processors in order, right after the
    transcript it came from, and no interruption drops it.

    Bad input never stops the pipeline: empty, whitespace- or punctuation-only transcripts
    and interims older than the newest one (by their ISO 8601 ``timestamp``) are ignored
    with a debug line; an exception inside the stabiliser is logged and the frame still
    passes on.

    Args:
        updates: Consecutive hypotheses a word must survive before it is stable (2: seed
            003's two-update rule; 1 passes every interim on).
        normalize: Compare words case- and punctuation-insensitively.
        mode: ``"auto"``, ``"whole"`` or ``"segment"``: whether interims repeat the final
            segments before them (see ``PartialStabilizer``).
        encoding: Token encoding for the prefill accounting; None turns it off.
        **kwargs: Passed to ``FrameProcessor``.

    Attributes:
        finished_turns: Counters of each ended user turn, indexed by turn.
    """

    def __init__(
        self,
        *,
        updates: int = 2,
        normalize: bool = True,
        mode: Mode = "auto",
        encoding: str | None = DEFAULT_ENCODING,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self._stab_core = PartialStabilizer(updates, normalize, mode=mode, encoding=encoding)
        self._stab_turn = 0
        self._stab_turn_active = False
        self._stab_last_stop_id: int | None = None
        self.finished_turns: list[StabilizerCounters] = []

    @property
    def stabilizer(self) -> PartialStabilizer:
        """The pure stabiliser this processor drives."""
        return self._stab_core

    @property
    def turn(self) -> int:
        """0-based index of the current (or next) user turn."""
        return self._stab_turn

    @property
    def turn_counters(self) -> StabilizerCounters:
        """Counters of the current user turn."""
        return self._stab_core.turn

    @property
    def session_counters(self) -> StabilizerCounters:
        """Counters summed over the session."""
        return self._stab_core.session

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Pass the frame on; feed transcripts to the stabiliser; end the turn on user stop."""
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if isinstance(frame, (InterimTranscriptionFrame, TranscriptionFrame)):
            if direction == FrameDirection.DOWNSTREAM:
                await self._stab_on_transcript(frame)
            else:
                logger.debug(f"{self}: ignoring a transcript going upstream: {frame}")
        elif isinstance(frame, UserStartedSpeakingFrame):
            self._stab_turn_active = True
        elif isinstance(frame, UserStoppedSpeakingFrame):
            self._stab_end_turn(frame)

    async def _stab_on_transcript(self, frame: InterimTranscriptionFrame | TranscriptionFrame):
        final = isinstance(frame, TranscriptionFrame)
        if not isinstance(frame.text, str):
            logger.warning(f"{self}: transcript text is not a string, ignored: {frame}")
            return
        try:
            update = self._stab_core.feed(
                frame.text, final=final, at=_iso_seconds(getattr(frame, "timestamp", None))
            )
        except Exception as e:  # fail open: the transcript has already passed on
            logger.warning(f"{self}: stabiliser failed on {frame}, skipped: {e!r}")
            return
        self._stab_turn_active = True
        if update.ignored:
            logger.debug(f"{self}: {update.ignored} transcript adds nothing: {frame.text!r}")
            return
        if not update.changed:
            return
        await self.push_frame(
            StableTranscriptFrame(
                text=update.text,
                word_count=update.word_count,
                new_words=len(update.new_words),
                retracted=len(update.retracted_words),
                final=update.final,
                turn=self._stab_turn,
                user_id=frame.user_id if isinstance(frame.user_id, str) else "",
            )
        )

    def _stab_end_turn(self, frame: UserStoppedSpeakingFrame) -> None:
        sibling = frame.broadcast_sibling_id
        if sibling is not None and sibling == self._stab_last_stop_id:
            return  # the other copy of a broadcast we already ended the turn on
        self._stab_last_stop_id = frame.id
        if not self._stab_turn_active:
            logger.debug(f"{self}: user stopped speaking with no turn open; nothing to reset")
            return
        self.finished_turns.append(self._stab_core.reset())
        self._stab_turn += 1
        self._stab_turn_active = False
