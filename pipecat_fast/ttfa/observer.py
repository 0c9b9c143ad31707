"""``TTFAObserver``: a Pipecat observer that measures time to first audio per user turn.

It only watches frames; it never changes the pipeline. Marks come from the frames Pipecat
already pushes (see :data:`pipecat_fast.ttfa.core.MARKS`):

===================  ==========================================================================
mark                 frame
===================  ==========================================================================
user stopped         ``VADUserStoppedSpeakingFrame.timestamp - stop_secs`` (the turn's zero)
vad_stopped          ``VADUserStoppedSpeakingFrame.timestamp``
final_transcript     last ``TranscriptionFrame`` before the turn is confirmed
turn_confirmed       ``UserStoppedSpeakingFrame``
llm_request          ``LLMContextFrame`` arriving at an ``LLMService`` (the latest one before the
                     reply's first token, so a discarded speculative request is not counted)
llm_first_token      first ``LLMTextFrame`` pushed by an ``LLMService``
tts_text             first text handed to the ``TTSService``: an ``AggregatedTextFrame`` entering
                     it, or the one it announces (or its ``TTSStartedFrame``) as it starts
                     synthesizing its first chunk
tts_first_byte       first ``TTSAudioRawFrame`` pushed by the ``TTSService``
first_audio_out      ``BotStartedSpeakingFrame`` from the output transport
===================  ==========================================================================

Prompt and cached token counts come from the ``LLMUsageMetricsData`` (Pipecat's
``LLMTokenUsage``) of the request that answered the turn; enable them with
``PipelineParams(enable_metrics=True, enable_usage_metrics=True)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipecat.frames.frames import (
    AggregatedTextFrame,
    BotStartedSpeakingFrame,
    LLMContextFrame,
    LLMTextFrame,
    MetricsFrame,
    SystemFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSTextFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.metrics.metrics import LLMUsageMetricsData
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import LLMService
from pipecat.services.tts_service import TTSService

from pipecat_fast.ttfa.core import TurnRecord, summarize


class TTFAObserver(BaseObserver):
    """Measures TTFA and its blocking stages for every user turn of a session.

    Add it to the worker: ``PipelineWorker(pipeline, observers=[TTFAObserver()], ...)``.

    Events:
        on_turn_measured(observer, record): A turn got its first bot audio; ``record`` is a
            :class:`~pipecat_fast.ttfa.core.TurnRecord`.

    Attributes:
        turns: Every answered turn, in order, as :class:`TurnRecord` (times in s, epoch).
        unanswered: Turns whose caller stopped speaking but got no bot audio before the caller
            spoke again or the session ended.
    """

    def __init__(self, *, time_source: Callable[[], float] = time.time, **kwargs: Any):
        """Initialize the observer.

        Args:
            time_source: Returns the current time in s since the epoch (the same clock as
                ``VADUserStoppedSpeakingFrame.timestamp``); tests pass a fake one.
            **kwargs: Passed to ``BaseObserver``.
        """
        super().__init__(**kwargs)
        self._ttfa_now = time_source
        self.turns: list[TurnRecord] = []
        self.unanswered: list[TurnRecord] = []
        self._ttfa_open: TurnRecord | None = None  # caller stopped, no bot audio yet
        self._ttfa_last: TurnRecord | None = None  # last answered turn (late usage lands here)
        self._ttfa_usage_pending = False
        self._ttfa_final_at: float | None = None  # last final transcript of the caller's turn
        self._ttfa_turn_index = 0
        self._register_event_handler("on_turn_measured")

    # -- results ---------------------------------------------------------------------------

    def summary(self) -> dict[str, float | int | None]:
        """p50/p95 TTFA in ms over answered turns (see :func:`pipecat_fast.ttfa.summarize`)."""
        return summarize([t.ttfa_ms for t in self.turns] + [None for _ in self.unanswered])

    def annotate(self, **fields: Any) -> None:
        """Attach lever accounting to the turn being measured (or the last measured one).

        Args:
            **fields: JSON-serializable values, merged into the turn's ``extra``.
        """
        target = self._ttfa_open or self._ttfa_last
        if target is not None:
            target.extra.update(fields)

    def close(self) -> None:
        """Record a still-open turn as unanswered; call when the session ends."""
        if self._ttfa_open is not None:
            self.unanswered.append(self._ttfa_open)
            self._ttfa_open = None

    # -- frames ----------------------------------------------------------------------------

    async def on_push_frame(self, data: FramePushed):
        """Turn pushed frames into marks of the open turn."""
        frame = data.frame
        if isinstance(frame, MetricsFrame):
            if data.first_push:
                self._on_metrics(frame)
            return
        if isinstance(frame, TTFAAnnotationFrame):
            if data.first_push:
                self.annotate(**frame.fields)
            return
        if data.direction != FrameDirection.DOWNSTREAM:
            return
        if isinstance(frame, VADUserStartedSpeakingFrame):
            if data.first_push:
                self._on_user_started()
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            if data.first_push:
                self._on_user_stopped(frame)
        elif isinstance(frame, TranscriptionFrame):
            if data.first_push:
                self._on_final_transcript()
        elif self._ttfa_open is None:
            return
        elif isinstance(frame, UserStoppedSpeakingFrame):
            if data.first_push:
                self._mark_once("turn_confirmed")
        elif isinstance(frame, LLMContextFrame):
            if isinstance(data.destination, LLMService) and "llm_first_token" not in (
                self._ttfa_open.marks
            ):
                self._ttfa_open.marks["llm_request"] = self._ttfa_now()
                self._ttfa_usage_pending = True
        elif isinstance(frame, LLMTextFrame):
            if data.first_push and isinstance(data.source, LLMService):
                self._mark_after("llm_first_token", "llm_request")
        elif isinstance(frame, AggregatedTextFrame) and not isinstance(frame, TTSTextFrame):
            # Either a text processor hands the TTS a chunk, or the TTS announces the chunk it
            # is about to synthesize (pushed just ahead of its audio context).
            into_tts = isinstance(data.destination, TTSService)
            from_tts = data.first_push and isinstance(data.source, TTSService)
            if into_tts or from_tts:
                self._mark_after("tts_text", "llm_request")
        elif isinstance(frame, TTSStartedFrame):
            if data.first_push and isinstance(data.source, TTSService):
                self._mark_after("tts_text", "llm_request")
        elif isinstance(frame, TTSAudioRawFrame):
            if data.first_push and isinstance(data.source, TTSService):
                self._mark_after("tts_first_byte", "llm_request")
        elif isinstance(frame, BotStartedSpeakingFrame):
            if data.first_push:
                await self._on_first_audio_out()

    def _on_user_started(self) -> None:
        # The caller spoke again before hearing anything: the pause was not the end of the
        # turn (or the bot never answered it). Either way nothing was measured for it.
        if self._ttfa_open is not None and "turn_confirmed" in self._ttfa_open.marks:
            self.unanswered.append(self._ttfa_open)
            self._ttfa_turn_index += 1
            # A final from before an unanswered turn must not mark the next one.
            self._ttfa_final_at = None
        self._ttfa_open = None

    def _on_user_stopped(self, frame: VADUserStoppedSpeakingFrame) -> None:
        marks = {"vad_stopped": frame.timestamp}
        # A fast STT finalizes inside the VAD's silence window, before the turn opens.
        if self._ttfa_final_at is not None:
            marks["final_transcript"] = self._ttfa_final_at
        self._ttfa_open = TurnRecord(
            turn=self._ttfa_turn_index,
            user_stopped_at=frame.timestamp - frame.stop_secs,
            marks=marks,
        )
        self._ttfa_usage_pending = False

    def _on_final_transcript(self) -> None:
        # The last final before the turn is confirmed is the one the turn waited for.
        now = self._ttfa_now()
        if self._ttfa_open is None:
            self._ttfa_final_at = now
        elif "turn_confirmed" not in self._ttfa_open.marks:
            self._ttfa_open.marks["final_transcript"] = now
            self._ttfa_final_at = now

    def _mark_once(self, mark: str) -> None:
        if self._ttfa_open is not None and mark not in self._ttfa_open.marks:
            self._ttfa_open.marks[mark] = self._ttfa_now()

    def _mark_after(self, mark: str, requires: str) -> None:
        # Leftovers of the previous reply (its TTS audio, say) must not mark this turn.
        if self._ttfa_open is not None and requires in self._ttfa_open.marks:
            self._mark_once(mark)

    async def _on_first_audio_out(self) -> None:
        record = self._ttfa_open
        if record is None or "llm_request" not in record.marks:
            return
        record.marks["first_audio_out"] = self._ttfa_now()
        self._ttfa_final_at = None
        self.turns.append(record)
        self._ttfa_last = record
        self._ttfa_open = None
        self._ttfa_turn_index += 1
        # Handlers run in their own tasks (Pipecat's default), so a slow one never delays
        # frame observation.
        await self._call_event_handler("on_turn_measured", record)

    def _on_metrics(self, frame: MetricsFrame) -> None:
        for data in frame.data:
            if not isinstance(data, LLMUsageMetricsData) or not self._ttfa_usage_pending:
                continue
            # The first usage after the request that answers the turn is that request's;
            # usage usually arrives after the first audio, so it may land on the last turn.
            target = self._ttfa_open if self._ttfa_open is not None else self._ttfa_last
            if target is None:
                continue
            target.prompt_tokens = data.value.prompt_tokens
            target.cached_tokens = data.value.cache_read_input_tokens
            self._ttfa_usage_pending = False


@dataclass
class TTFAAnnotationFrame(SystemFrame):
    """Lever accounting for the turn being measured; :class:`TTFAObserver` merges it in.

    Levers push it (any direction) when they know what they did for a turn, e.g. how many
    speculative prefills they sent. A system frame, so interruptions never drop it.

    Parameters:
        fields: JSON-serializable values merged into the turn's ``extra``.
    """

    fields: dict[str, Any] = field(default_factory=dict)
