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

Given the VAD's :class:`~pipecat_fast.endofturn.PauseTap`, a Smart Turn analyzer of its own and
``early_silence_s``, it also runs the model at a pause inside the VAD's stop window, on the
turn's audio so far (the segment Pipecat's analyzer would take: from ``pre_speech_ms`` before
the speech started, at most ``max_duration_secs``); a *complete* verdict there confirms the turn
at the VAD's stop, without waiting for the model again (see
:meth:`~pipecat_fast.endofturn.core.EarlyConfirm.early_verdict`). One inference runs at a time,
and the VAD's stop waits for one still running for its pause instead of having the wrapped
analyzer run a second (:class:`~pipecat_fast.endofturn.core.EarlyVerdictSchedule`).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
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
from pipecat_fast._pipecat import smart_turn_predict
from pipecat_fast._strategy import WrappingUserTurnStopStrategy
from pipecat_fast.endofturn.core import (
    ClockUnreliable,
    Confirm,
    Decision,
    EarlyConfirm,
    EarlyVerdictSchedule,
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


_KEEP_S = 10.0  # caller audio kept for the early verdict (Smart Turn looks at 8 s at most)


def _check_early(pauses: Any, analyzer: Any, early_silence_s: Any) -> None:
    given = [x is not None for x in (pauses, analyzer, early_silence_s)]
    if not any(given):
        return
    if not all(given):
        raise ValueError(
            "an early turn verdict needs pauses= (the PauseTap), early_analyzer= (a Smart Turn "
            "analyzer of its own) and early_silence_s= together"
        )
    from pipecat_fast.endofturn.vad import PauseTap

    if not isinstance(pauses, PauseTap):
        raise TypeError(
            f"pauses must be the user aggregator's PauseTap, not {type(pauses).__name__}"
        )
    if not callable(getattr(analyzer, "_predict_endpoint", None)):
        raise TypeError(
            f"early_analyzer must be a Smart Turn analyzer, got {type(analyzer).__name__}"
        )
    bad = isinstance(early_silence_s, bool) or not isinstance(early_silence_s, int | float)
    if bad or not 0 < early_silence_s < pauses.params.stop_secs:
        raise ValueError(
            f"early_silence_s must be a number in (0, the VAD's stop_secs="
            f"{pauses.params.stop_secs}), got {early_silence_s!r}"
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
        pauses: The VAD analyzer's :class:`~pipecat_fast.endofturn.PauseTap`, to take the
            analyzer's verdict at a pause inside the VAD's stop window.
        early_analyzer: A Smart Turn analyzer of its own for that verdict (not the wrapped
            strategy's: its buffer is left alone), e.g. ``LocalSmartTurnAnalyzerV3()``.
        early_silence_s: The pause (s) at which the early verdict is taken: as early as the
            first silent VAD frame (0.032 s with Silero), so the inference fits inside the stop
            window.
        **kwargs: Passed to ``BaseUserTurnStopStrategy``.

    Attributes:
        confirmations: Per proof, the turns confirmed early (``finalized``, ``segment_end``).
        late_finals: Finals that arrived after an early confirmation (logged, never lost).

    Raises:
        TypeError: If ``inner`` is not a user turn stop strategy.
        ValueError: A negative ``tolerance_s``; only some of ``pauses``, ``early_analyzer`` and
            ``early_silence_s``; an ``early_silence_s`` not under the VAD's ``stop_secs``.
    """

    def __init__(
        self,
        inner: BaseUserTurnStopStrategy | None = None,
        *,
        tolerance_s: float = 0.12,
        clock: Callable[[], float] = time.monotonic,
        pauses: Any = None,
        early_analyzer: Any = None,
        early_silence_s: float | None = None,
        **kwargs: Any,
    ):
        _check_inner(inner)
        _check_early(pauses, early_analyzer, early_silence_s)
        core = EarlyConfirm(tolerance_s=tolerance_s)
        super().__init__(inner or default_turn_analyzer_strategy(), **kwargs)
        self._eot_core = core
        self._eot_clock = clock
        self._eot_verdict: bool | None = None
        self._eot_confirming = False
        self._eot_mute_since: float | None = None
        self._eot_log = RateLimitedLog(str(self), burst=3, period_s=1.0)
        self._eot_pauses = pauses
        self._eot_early_model = early_analyzer
        self._eot_early_s = early_silence_s
        self._eot_audio: deque[tuple[float, np.ndarray]] = deque()  # (clock s at start, pcm)
        self._eot_rate = 16000
        self._eot_speaking = False
        self._eot_speech_start: float | None = None  # clock s the turn's speech started
        self._eot_schedule = (
            EarlyVerdictSchedule(early_silence_s) if early_silence_s is not None else None
        )
        self._eot_task: asyncio.Task | None = None
        self._eot_reported_pause = 0
        self._eot_answer: tuple[float, float] | None = None  # (probability, ms) counting now
        self._eot_asked_reported = 0
        self._eot_waiting = False

    @property
    def core(self) -> EarlyConfirm:
        """The decisions' state machine."""
        return self._eot_core

    @property
    def confirmations(self) -> dict[str, int]:
        """Per proof, the turns confirmed early."""
        return dict(self._eot_core.confirmations)

    @property
    def waiting_at_stop(self) -> bool:
        """Whether the VAD's stop is waiting for the early verdict in flight right now."""
        return self._eot_waiting

    @property
    def early_asks(self) -> int:
        """Early verdicts asked so far (each one Smart Turn inference)."""
        return self._eot_schedule.asked if self._eot_schedule is not None else 0

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
        self._eot_speech_start = None
        if self._eot_schedule is not None:
            self._eot_schedule.turn_stopped()  # a verdict still running belongs to the ended turn
        self._eot_answer = None
        await super().handle_user_turn_stopped()

    async def cleanup(self):
        """Stop an early verdict still running."""
        if self._eot_task is not None and not self._eot_task.done():
            await self.task_manager.cancel_task(self._eot_task)
        await super().cleanup()

    # -- the early verdict -----------------------------------------------------------------

    def _eot_keep_audio(self, frame: InputAudioRawFrame, channels: int) -> None:
        if self._eot_early_model is None:
            return
        self._eot_rate = frame.sample_rate or self._eot_rate
        pcm = np.frombuffer(frame.audio, dtype=np.int16)
        if channels > 1:
            pcm = pcm[::channels]
        self._eot_audio.append((self._eot_core.clock_s, pcm))
        horizon = self._eot_core.clock_s - _KEEP_S
        while self._eot_audio and self._eot_audio[0][0] < horizon:
            self._eot_audio.popleft()

    def _eot_segment(self) -> np.ndarray:
        """The audio Pipecat's analyzer would judge.

        From ``pre_speech_ms`` before the speech, at most ``max_duration_secs`` (Smart Turn's
        own parameters).
        """
        params = getattr(self._eot_early_model, "params", None)
        pre = getattr(params, "pre_speech_ms", 500) / 1000.0
        longest = getattr(params, "max_duration_secs", 8)
        start = (self._eot_speech_start or 0.0) - pre
        chunks = [pcm for at, pcm in self._eot_audio if at >= start]
        if not chunks:
            return np.zeros(0, dtype=np.float32)
        audio = np.concatenate(chunks).astype(np.float32) / 32768.0
        return audio[-int(longest * self._eot_rate) :]

    async def _eot_watch_pause(self) -> None:
        schedule = self._eot_schedule
        if schedule is None or not self._eot_speaking:
            return
        asks, ended = schedule.silence(self._eot_pauses.silence_s)
        if ended:
            self._eot_answer = None
            self._eot_core.pause_ended()
        for ask in asks:
            audio = self._eot_segment()
            if not len(audio):
                schedule.answered(ask.pause)
                continue
            self._eot_task = self.task_manager.create_task(
                self._eot_early_verdict(audio, ask.pause), f"{self}::early_verdict"
            )

    async def _eot_early_verdict(self, audio: np.ndarray, pause: int) -> None:
        loop = asyncio.get_running_loop()
        schedule = self._eot_schedule
        assert schedule is not None
        asked = time.perf_counter()
        try:
            complete, probability = await loop.run_in_executor(
                None, smart_turn_predict, self._eot_early_model, audio
            )
        except Exception as e:  # fail open: the VAD's stop asks the analyzer as usual
            schedule.answered(pause)
            self._eot_log.warning(f"the early turn verdict failed ({e}); not used", key="early")
            return
        except BaseException:
            schedule.answered(pause)
            raise
        took_ms = (time.perf_counter() - asked) * 1000
        if not schedule.answered(pause):
            # The caller spoke again (or the turn ended) meanwhile: void. A pause that came
            # while this ran is asked now.
            await self._eot_watch_pause()
            return
        self._eot_answer = (probability, took_ms)
        await self._apply(self._eot_core.early_verdict(complete))

    async def _eot_vad_stopped(self) -> None:
        """At the VAD's stop: wait for the early verdict in flight rather than ask again."""
        schedule = self._eot_schedule
        if schedule is None:
            return
        waited_ms = 0.0
        task = self._eot_task
        if schedule.waits_at_stop() and task is not None and not task.done():
            began = time.perf_counter()
            self._eot_waiting = True
            try:
                await asyncio.wait({task})
            finally:
                self._eot_waiting = False
            waited_ms = (time.perf_counter() - began) * 1000
        schedule.vad_stopped()
        fields: dict[str, Any] = {}
        if self._eot_answer is not None:
            probability, took_ms = self._eot_answer
            fields["eot_early_probability"] = round(probability, 3)
            fields["eot_early_model_ms"] = round(took_ms, 1)
        asks = schedule.asked - self._eot_asked_reported
        self._eot_asked_reported = schedule.asked
        await self.push_frame(
            TTFAAnnotationFrame(
                fields=fields, add={"eot_early_asks": asks, "eot_stop_wait_ms": waited_ms}
            )
        )

    async def process_frame(self, frame: Frame) -> ProcessFrameResult | None:
        """Feed the core; let the wrapped strategy decide; confirm early when proven."""
        core = self._eot_core
        decisions: list[Decision] = []
        if isinstance(frame, InputAudioRawFrame):
            channels = max(1, frame.num_channels or 1)
            self._eot_keep_audio(frame, channels)
            core.audio(len(frame.audio) / (2 * channels * max(1, frame.sample_rate)))
            await self._eot_watch_pause()
        elif isinstance(frame, VADUserStartedSpeakingFrame):
            core.speech_started()
            self._eot_confirming = False
            self._eot_speaking = True
            self._eot_answer = None
            if self._eot_schedule is not None:
                self._eot_schedule.speech_started()
            if self._eot_speech_start is None:
                self._eot_speech_start = max(0.0, core.clock_s - frame.start_secs)
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            await self._eot_vad_stopped()
            self._eot_speaking = False
            decisions += core.speech_stopped(frame.stop_secs)
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

    def _eot_core_used_pause(self) -> bool:
        used = self._eot_core.early_verdicts > self._eot_reported_pause
        self._eot_reported_pause = self._eot_core.early_verdicts
        return used

    # -- carrying out the core's decisions -------------------------------------------------

    async def _apply(self, decisions: list[Decision]) -> None:
        for decision in decisions:
            if isinstance(decision, Confirm):
                logger.debug(
                    f"{self}: the final transcript covers the speech ({decision.proof}): "
                    "confirming the turn without waiting for the STT's p99"
                )
                await self.push_frame(
                    TTFAAnnotationFrame(
                        fields={
                            "eot_early": True,
                            "eot_proof": decision.proof,
                            "eot_verdict": "pause" if self._eot_core_used_pause() else "stop",
                        }
                    )
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
