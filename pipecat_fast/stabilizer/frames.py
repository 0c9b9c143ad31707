"""The frame the stabiliser pushes: the settled words of the current user turn."""

from __future__ import annotations

from dataclasses import dataclass

from pipecat.frames.frames import SystemFrame


@dataclass
class StableTranscriptFrame(SystemFrame):
    """The caller's words in the current user turn that have settled.

    A :class:`~pipecat.frames.frames.SystemFrame` on purpose, so interruptions keep it: the
    interim that starts a user turn makes the user aggregator broadcast an interruption, which
    drops the data frames queued behind that interim (verified on Pipecat 1.14 in
    ``tests/stabilizer/test_stabilizer_processor.py``). Processors that do not know this
    frame pass it on.

    Parameters:
        text: The stable prefix, in the STT's spelling, case and punctuation.
        word_count: Words in ``text``.
        new_words: Words newly stable since the previous frame of this turn.
        retracted: Previously stable words no longer in the prefix.
        final: True when the prefix is made only of final transcript segments.
        turn: 0-based user-turn index in the session.
        user_id: The user the transcript belongs to (from the transcription frame).
    """

    text: str  # stable prefix, STT spelling
    word_count: int
    new_words: int  # newly stable since the previous frame of this turn
    retracted: int  # previously stable words no longer in the prefix
    final: bool  # True when the prefix is made only of final transcript segments
    turn: int  # 0-based user-turn index in the session
    user_id: str = ""

    def __str__(self):
        return (
            f"{self.name}(turn: {self.turn}, words: {self.word_count}, new: {self.new_words}, "
            f"retracted: {self.retracted}, final: {self.final}, text: [{self.text}])"
        )
