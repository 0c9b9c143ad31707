"""Confirm the end of turn as soon as the transcript provably covers the speech.

:class:`CompleteTranscriptUserTurnStopStrategy` wraps Pipecat's turn analyzer stop strategy
(by default ``TurnAnalyzerUserTurnStopStrategy`` with Smart Turn v3) and leaves every decision
to it, except one: when the analyzer has said the turn is complete and the STT's results prove
that the final transcript covers the speech up to the VAD's end of speech, it confirms at once
instead of letting the wrapped strategy wait for the STT's p99 time-to-final. The rules are
:class:`~pipecat_fast.endofturn.core.EarlyConfirm`'s (pure, tested without a pipeline); this
class turns frames into its events and its decisions into Pipecat's public triggers.

It composes with draft-and-hold (the draft strategy wraps it)::

    DraftAndHoldUserTurnStopStrategy(CompleteTranscriptUserTurnStopStrategy())

The analyzer's verdict is read from the ``TurnMetricsData`` the wrapped strategy pushes; a
wrapped strategy that reports none (a speech timeout, say) is never confirmed early.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    Frame,
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    MetricsFrame,
    TranscriptionFrame,
    UserMuteStartedFrame,
    UserMuteStoppedFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.metrics.metrics import TurnMetricsData
from pipecat.processors.frame_processor import FrameDirection
from pipecat.turns.types import ProcessFrameResult
from pipecat.turns.user_stop.base_user_turn_stop_strategy import BaseUserTurnStopStrategy

from pipecat_fast._logging import RateLimitedLog
from pipecat_fast._strategy import WrappingUserTurnStopStrategy
from pipecat_fast.endofturn.core import (
    ClockUnreliable,
    Confirm,
    Decision,
    EarlyConfirm,
    LateFinal,
)
from pipecat_fast.endofturn.readers import read_frame
from pipecat_fast.frames import STTFinalizeAnswerFrame, TTFAAnnotationFrame


def default_turn_analyzer_strategy(**analyzer_kwargs: Any) -> BaseUserTurnStopStrategy:
    """Pipecat's default stop strategy: ``TurnAnalyzerUserTurnStopStrategy`` + Smart Turn v3."""
    from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import LocalSmartTurnAnalyzerV3
    from pipecat.turns.user_stop.turn_analyzer_user_turn_stop_strategy import (
        TurnAnalyzerUserTurnStopStrategy,
    )

    return TurnAnalyzerUserTurnStopStrategy(
        turn_analyzer=LocalSmartTurnAnalyzerV3(**analyzer_kwargs)
    )


def _check_inner(inner: Any) -> None:
    if inner is None or isinstance(inner, BaseUserTurnStopStrategy):
        return
    raise TypeError(
        "CompleteTranscriptUserTurnStopStrategy(inner) takes the user turn stop strategy that "
        "decides the end of turn (TurnAnalyzerUserTurnStopStrategy(turn_analyzer=...), or "
        f"nothing for Pipecat's default), got {type(inner).__name__}"
    )


class CompleteTranscriptUserTurnStopStrategy(WrappingUserTurnStopStrategy):
    """Confirm on a complete transcript instead of waiting for the STT's p99.

    Put it where Pipecat's stop strategy goes (alone, or inside draft-and-hold).

    Args:
        inner: The turn analyzer strategy that decides the end of turn; defaults to Pipecat's
            default (Smart Turn v3).
        tolerance_s: How far short of the VAD's end of speech a final the STT cut at a pause
            may end and still cover it (see :class:`~pipecat_fast.endofturn.core.EarlyConfirm`).
        clock: Monotonic clock (s), for the time the caller is muted (counted as audio).
        **kwargs: Passed to ``BaseUserTurnStopStrategy``.

    Attributes:
        confirmations: Per proof, the turns confirmed early (``finalized``, ``segment_end``).
        late_finals: Finals that arrived after an early confirmation (logged, never lost).

    Raises:
        TypeError: If ``inner`` is not a user turn stop strategy.
        ValueError: A negative ``tolerance_s``.
    """

    def __init__(
        self,
        inner: BaseUserTurnStopStrategy | None = None,
        *,
        tolerance_s: float = 0.12,
        clock: Callable[[], float] = time.monotonic,
        **kwargs: Any,
    ):
        _check_inner(inner)
        core = EarlyConfirm(tolerance_s=tolerance_s)
        super().__init__(inner or default_turn_analyzer_strategy(), **kwargs)
        self._eot_core = core
        self._eot_clock = clock
        self._eot_verdict: bool | None = None
        self._eot_confirming = False
        self._eot_mute_since: float | None = None
        self._eot_log = RateLimitedLog(str(self), burst=3, period_s=1.0)

    @property
    def core(self) -> EarlyConfirm:
        """The decisions' state machine."""
        return self._eot_core

    @property
    def confirmations(self) -> dict[str, int]:
        """Per proof, the turns confirmed early."""
        return dict(self._eot_core.confirmations)

    @property
    def late_finals(self) -> int:
        """Finals that arrived after an early confirmation."""
        return self._eot_core.late_finals

    async def handle_user_turn_started(self):
        """A new turn: the transcript so far belongs to the last one."""
        self._eot_core.turn_started()
        await super().handle_user_turn_started()

    async def handle_user_turn_stopped(self):
        """The turn ended, by us or anyone else."""
        self._eot_core.turn_stopped(by_us=self._eot_confirming)
        self._eot_confirming = False
        await super().handle_user_turn_stopped()

    async def process_frame(self, frame: Frame) -> ProcessFrameResult | None:
        """Feed the core; let the wrapped strategy decide; confirm early when proven."""
        core = self._eot_core
        decisions: list[Decision] = []
        if isinstance(frame, InputAudioRawFrame):
            channels = max(1, frame.num_channels or 1)
            core.audio(len(frame.audio) / (2 * channels * max(1, frame.sample_rate)))
        elif isinstance(frame, VADUserStartedSpeakingFrame):
            core.speech_started()
            self._eot_confirming = False
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            core.speech_stopped(frame.stop_secs)
        elif isinstance(frame, TranscriptionFrame | InterimTranscriptionFrame):
            result = read_frame(frame)
            if result is not None:
                decisions += core.result(result)
        elif isinstance(frame, STTFinalizeAnswerFrame):
            result = read_frame(frame)
            if result is not None:
                decisions += core.result(result)
        elif isinstance(frame, UserMuteStartedFrame):
            self._eot_mute_since = self._eot_clock()
        elif isinstance(frame, UserMuteStoppedFrame) and self._eot_mute_since is not None:
            # Muted audio never reaches this strategy but may reach the STT: counting the muted
            # time keeps the clock ahead of the STT's, never behind (a stricter proof).
            core.audio(self._eot_clock() - self._eot_mute_since)
            self._eot_mute_since = None
        await self._apply(decisions)
        if any(isinstance(d, Confirm) for d in decisions):
            # The turn this frame completed is over: the wrapped strategy was reset with it,
            # and must not take the frame for the start of a turn without a VAD stop.
            return ProcessFrameResult.CONTINUE
        self._eot_verdict = None
        result = await self._wrapped.process_frame(frame)
        verdict, self._eot_verdict = self._eot_verdict, None
        if verdict is not None:
            await self._apply(core.verdict(verdict))
        return result

    # -- the wrapped strategy's events -----------------------------------------------------

    async def _on_inner_push(self, _inner, frame: Frame, direction=FrameDirection.DOWNSTREAM):
        if isinstance(frame, MetricsFrame):
            for item in frame.data:
                if isinstance(item, TurnMetricsData):
                    self._eot_verdict = bool(item.is_complete)
        await self.push_frame(frame, direction)

    # -- carrying out the core's decisions -------------------------------------------------

    async def _apply(self, decisions: list[Decision]) -> None:
        for decision in decisions:
            if isinstance(decision, Confirm):
                logger.debug(
                    f"{self}: the final transcript covers the speech ({decision.proof}): "
                    "confirming the turn without waiting for the STT's p99"
                )
                await self.push_frame(
                    TTFAAnnotationFrame(fields={"eot_early": True, "eot_proof": decision.proof})
                )
                self._eot_confirming = True
                await self.trigger_user_turn_stopped()
            elif isinstance(decision, LateFinal):
                self._eot_log.warning(
                    f"a final transcript arrived {decision.after_s * 1000:.0f} ms of audio "
                    f"after an early confirmation: [{decision.text}]; its words go to the "
                    "context with the next user turn",
                    key="late-final",
                )
                await self.push_frame(TTFAAnnotationFrame(add={"eot_late_finals": 1}))
            elif isinstance(decision, ClockUnreliable):
                self._eot_log.warning(
                    f"{decision.reason}: the STT's timing cannot be trusted, so turns are "
                    "confirmed by the wrapped strategy's own wait from now on",
                    key="clock",
                )
