"""Frames that pipecat-fast's levers exchange with each other and with the TTFA meter.

One home for them, so a lever that reacts to another lever's frame (prefill to the stabiliser's
``StableTranscriptFrame``) or reports to the meter (``TTFAAnnotationFrame``) imports only this
module, not the other lever's processor or the meter's observer. The old paths
(``pipecat_fast.stabilizer.StableTranscriptFrame``, ``pipecat_fast.ttfa.TTFAAnnotationFrame``)
still work.

Why each frame has the class it has (Pipecat 1.14 queues; ``FrameProcessorQueue`` and
``FrameQueue`` in ``pipecat.processors.frame_processor`` / ``pipecat.utils.frame_queue``):

- A processor runs system frames from its input queue at once and puts every other frame
  into a second, in-order queue. A system frame therefore overtakes data and control frames
  queued ahead of it.
- An interruption empties that in-order queue of every frame whose ``interruptible`` is True
  (data and control frames by default) and keeps the others, in their order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipecat.frames.frames import DataFrame, SystemFrame

from pipecat_fast.ttfa.core import AnnotationTarget, check_accounting


@dataclass
class StableTranscriptFrame(DataFrame):
    """The caller's words in the current user turn that have settled.

    A :class:`~pipecat.frames.frames.DataFrame`, so every processor handles it in order with the
    transcripts: it always comes after the interim or final transcript that produced it (a
    ``SystemFrame`` would overtake that transcript in the next processor's queue). It is
    *uninterruptible* (``interruptible`` False), so the interruption the first interim of a turn
    makes the user aggregator broadcast does not drop it from a queue: an interruption keeps
    uninterruptible frames in place and in order. Processors that do not know this frame pass
    it on.

    A ``SystemFrame`` such as ``UserStoppedSpeakingFrame`` can still overtake it in a later
    processor's queue, so a consumer tells turns apart by :attr:`turn`, not by arrival order.

    Parameters:
        text: The stable prefix, in the STT's spelling, case and punctuation.
        word_count: Words in ``text``.
        new_words: Words newly stable since the previous frame of this turn.
        retracted: Previously stable words no longer in the prefix.
        final: True when the prefix is made only of final transcript segments.
        turn: 0-based user-turn index in the session (the stabiliser's count).
        user_id: The user the transcript belongs to (from the transcription frame).
    """

    text: str  # stable prefix, STT spelling
    word_count: int
    new_words: int  # newly stable since the previous frame of this turn
    retracted: int  # previously stable words no longer in the prefix
    final: bool  # True when the prefix is made only of final transcript segments
    turn: int  # 0-based user-turn index in the session
    user_id: str = ""
    interruptible: bool = field(default=False, init=False)

    def __str__(self):
        return (
            f"{self.name}(turn: {self.turn}, words: {self.word_count}, new: {self.new_words}, "
            f"retracted: {self.retracted}, final: {self.final}, text: [{self.text}])"
        )


@dataclass
class STTFinalizeAnswerFrame(DataFrame):
    """An STT's answer to a finalize request that Pipecat's service does not surface itself.

    Deepgram answers Pipecat's ``Finalize`` with an empty ``from_finalize`` result when its own
    endpointing final already covered the speech; Pipecat 1.14 then pushes nothing. With
    :func:`pipecat_fast.endofturn.report_finalize_answers` on the STT service, that answer is
    pushed as this frame, so the end-of-turn confirmation can read how far the STT finalized.
    A :class:`~pipecat.frames.frames.DataFrame` (in order with the transcripts around it),
    uninterruptible (an interruption keeps it in place). Processors that do not know it pass
    it on.

    Parameters:
        result: The provider's result object, as the STT service received it.
    """

    result: Any = None
    interruptible: bool = field(default=False, init=False)

    def __str__(self):
        return f"{self.name}()"


@dataclass
class DraftWithdrawalRequestFrame(SystemFrame):
    """A lever downstream of the LLM asks draft-and-hold to withdraw the held draft.

    Pushed upstream (the preemptive TTS does when the TTS fails on a draft). The draft
    strategy withdraws through Pipecat's own path — the user aggregator broadcasts
    ``EagerEndOfTurnCancelFrame``, which passes the LLM service's ``SpeculationGate`` on its way
    down and discards the held reply — so the confirmed turn runs the normal request. (An
    ``EagerEndOfTurnCancelFrame`` pushed upstream from below the LLM never reaches that gate: it
    only acts on frames going down.) Without draft-and-hold in the pipeline nothing acts on it.

    Parameters:
        reason: Why, for the log.
    """

    reason: str = ""


@dataclass
class TTFAAnnotationFrame(SystemFrame):
    """Lever accounting for the TTFA meter; :class:`~pipecat_fast.ttfa.TTFAObserver` merges it.

    Push it (any direction) when a lever knows what it did: how many speculative prefills it
    sent, whether a pooled TTS socket was reused, how many words of a cut reply were heard.
    The meter reads it at the moment it was pushed (its place among the other frames' pushes),
    so it lands on the turn that was open then. A ``SystemFrame``, so an interruption never
    drops it. Nothing else reacts to it.

    Parameters:
        fields: JSON-serializable values set on the target (a later value for the same key
            replaces the earlier one).
        add: Numbers added to the target's values of the same keys (counters, ms spent), so
            several frames of one turn add up; a key first seen here starts at 0.
        target: Where the accounting goes:

            - ``"current"`` (default): the turn whose caller has stopped and that is not
              answered yet; when none is open, the turn closed last (answered or unanswered),
              so accounting that arrives after the first audio still lands on its turn; before
              the first turn, the first turn.
            - ``"next"``: the next turn that opens (accounting gathered while the caller is
              still speaking, e.g. a socket opened ahead of the reply).
            - ``"session"``: the session as a whole (``TTFAObserver.session``), e.g. warmup
              requests sent before the first turn.

    Keys are the lever's name and what it counts, ``"<lever>_<what>"`` (``"pool_reused"``,
    ``"warmup_tokens"``); see docs/ttfa.md for the keys each lever writes.

    Raises:
        TypeError: ``fields``/``add`` not dicts of string keys, or an ``add`` value not a number.
        ValueError: An unknown ``target``.
    """

    fields: dict[str, Any] = field(default_factory=dict)
    add: dict[str, float] = field(default_factory=dict)
    target: AnnotationTarget = "current"

    def __post_init__(self):
        super().__post_init__()
        check_accounting(self.fields, self.add, self.target)

    def __str__(self):
        return f"{self.name}(target: {self.target}, fields: {self.fields}, add: {self.add})"
