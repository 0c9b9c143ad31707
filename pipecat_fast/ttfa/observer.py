"""``TTFAObserver``: a Pipecat observer that measures time to first audio per user turn.

It only watches frames; it never changes the pipeline. It translates pushed frames into the
events of :class:`~pipecat_fast.ttfa.core.TurnTracker` (the state machine that makes the turn
records):

===================  ==========================================================================
event / mark         frame
===================  ==========================================================================
user stopped         ``VADUserStoppedSpeakingFrame`` pushed, minus its ``stop_secs`` (the turn's
                     zero)
vad_stopped          ``VADUserStoppedSpeakingFrame``
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
user started         ``VADUserStartedSpeakingFrame`` (ends a pause, or leaves a turn unanswered)
===================  ==========================================================================

**Every time is the frame's push time** (``FramePushed.timestamp``, the pipeline clock), never
the time the observer gets to see it: Pipecat queues observer callbacks in a task of their own,
and on a loaded machine they run late by an amount that grows and differs between
configurations. The pipeline clock is mapped onto the epoch once per session (both clocks read
at the same instant), so records carry epoch seconds and every duration is a difference of push
times.

Prompt and cached token counts come from the ``LLMUsageMetricsData`` (Pipecat's
``LLMTokenUsage``) of the request that answered the turn; enable them with
``PipelineParams(enable_metrics=True, enable_usage_metrics=True)``. Levers add their own
accounting with a :class:`~pipecat_fast.frames.TTFAAnnotationFrame`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    AggregatedTextFrame,
    BotStartedSpeakingFrame,
    LLMContextFrame,
    LLMTextFrame,
    MetricsFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSTextFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.metrics.metrics import LLMUsageMetricsData, TurnMetricsData
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import LLMService
from pipecat.services.tts_service import TTSService

from pipecat_fast.frames import TTFAAnnotationFrame
from pipecat_fast.ttfa.core import TurnRecord, TurnTracker, summarize

__all__ = ["TTFAAnnotationFrame", "TTFAObserver"]  # the frame: re-exported, old import path

_DOWN = FrameDirection.DOWNSTREAM


class TTFAObserver(BaseObserver):
    """Measures TTFA and its blocking stages for every user turn of a session.

    Keep a handle to read the results::

        ttfa = TTFAObserver()
        worker = PipelineWorker(pipeline, observers=[ttfa], ...)

    Events:
        on_turn_measured(observer, record): A turn got its first bot audio; ``record`` is a
            :class:`~pipecat_fast.ttfa.core.TurnRecord` (late accounting, such as the token
            usage that follows the first audio, is still added to it afterwards).

    Attributes:
        turns: Every answered turn, in order, as :class:`TurnRecord` (times in s, epoch).
        unanswered: Turns whose caller stopped speaking but got no bot audio before the caller
            spoke again or the session ended.
        session: Session-wide lever accounting (``TTFAAnnotationFrame(target="session")``).
    """

    def __init__(self, *, time_source: Callable[[], float] = time.time, **kwargs: Any):
        """Initialize the observer.

        Args:
            time_source: Returns the current time in s since the epoch; read once, with the
                pipeline clock, to map push times onto the epoch (it never times a mark).
            **kwargs: Passed to ``BaseObserver``.
        """
        super().__init__(**kwargs)
        self._ttfa_now = time_source
        self._ttfa_tracker = TurnTracker()
        self._ttfa_offset: float | None = None  # epoch s minus pipeline-clock s
        self._ttfa_bad_annotations = 0
        self._register_event_handler("on_turn_measured")

    # -- results ---------------------------------------------------------------------------

    @property
    def tracker(self) -> TurnTracker:
        """The state machine this observer feeds."""
        return self._ttfa_tracker

    @property
    def turns(self) -> list[TurnRecord]:
        """Every answered turn, in order."""
        return self._ttfa_tracker.turns

    @property
    def unanswered(self) -> list[TurnRecord]:
        """Turns whose caller stopped speaking but got no bot audio."""
        return self._ttfa_tracker.unanswered

    @property
    def session(self) -> dict[str, Any]:
        """Session-wide lever accounting."""
        return self._ttfa_tracker.session

    def summary(self) -> dict[str, float | int | None]:
        """p50/p95 TTFA in ms over answered turns (see :func:`pipecat_fast.ttfa.summarize`)."""
        return summarize([t.ttfa_ms for t in self.turns] + [None for _ in self.unanswered])

    def annotate(self, **fields: Any) -> None:
        """Attach lever accounting to the turn being measured (or the last closed one).

        A lever inside the pipeline pushes a :class:`TTFAAnnotationFrame` instead: the frame
        lands on the turn that was open when it was pushed, while this call lands on the turn
        the observer has reached, which may lag behind the pipeline.

        Args:
            **fields: JSON-serializable values, merged into the turn's ``extra``.
        """
        self._ttfa_tracker.annotate(fields)

    def close(self) -> None:
        """Record a still-open turn as unanswered; call when the session ends."""
        self._ttfa_tracker.close()
        if self._ttfa_bad_annotations > 1:
            logger.warning(f"{self}: {self._ttfa_bad_annotations} malformed annotations ignored")

    # -- frames ----------------------------------------------------------------------------

    async def on_push_frame(self, data: FramePushed):
        """Translate a pushed frame into a tracker event, timed at its push."""
        cls = type(data.frame)
        try:
            handler = _HANDLERS[cls]
        except KeyError:
            handler = _HANDLERS[cls] = _handler_for(cls)
        if handler is None:
            return
        record = handler(self, data)
        if record is not None:
            # Handlers run in their own tasks (Pipecat's default), so a slow one never delays
            # frame observation.
            await self._call_event_handler("on_turn_measured", record)

    def _ttfa_at(self, data: FramePushed) -> float:
        """The push time of ``data`` in epoch seconds."""
        offset = self._ttfa_offset
        if offset is None:
            # Read the pipeline clock and the epoch together: their difference is the same
            # whenever it is read, however late this callback runs.
            try:
                clock_s = data.source.get_clock().get_time() / 1e9
            except Exception:  # a source that was never set up (hand-made FramePushed)
                clock_s = data.timestamp / 1e9
            offset = self._ttfa_offset = self._ttfa_now() - clock_s
        return data.timestamp / 1e9 + offset

    def _ttfa_bad_annotation(self, frame: TTFAAnnotationFrame, error: Exception) -> None:
        self._ttfa_bad_annotations += 1
        if self._ttfa_bad_annotations == 1:
            logger.warning(f"{self}: malformed annotation ignored ({error}): {frame}")


# -- frame class -> handler -------------------------------------------------------------------
# A handler takes (observer, pushed) and returns the TurnRecord a BotStartedSpeakingFrame
# answered, or None. Looked up by the frame's exact class, so the common frames (audio) cost
# one dict lookup.

_Handler = Callable[[TTFAObserver, FramePushed], TurnRecord | None]


def _on_metrics(obs: TTFAObserver, data: FramePushed) -> None:
    if data.first_push:
        for item in data.frame.data:
            if isinstance(item, LLMUsageMetricsData):
                usage = item.value
                obs._ttfa_tracker.llm_usage(
                    usage.prompt_tokens,
                    usage.cache_read_input_tokens,
                    usage.cache_creation_input_tokens,
                )
            elif isinstance(item, TurnMetricsData):
                # The end-of-turn model's own inference time (Smart Turn), for the turn it
                # judged: what turn detection costs when nothing else is waited for.
                obs._ttfa_tracker.annotate(
                    fields={"turn_model_ms": round(float(item.e2e_processing_time_ms), 1)}
                )


def _on_annotation(obs: TTFAObserver, data: FramePushed) -> None:
    if data.first_push:
        frame = data.frame
        try:
            obs._ttfa_tracker.annotate(frame.fields, frame.add, frame.target)
        except (TypeError, ValueError) as e:  # changed after construction: ignore, say so
            obs._ttfa_bad_annotation(frame, e)


def _on_vad_started(obs: TTFAObserver, data: FramePushed) -> None:
    if data.first_push and data.direction == _DOWN:
        obs._ttfa_tracker.user_started()


def _on_vad_stopped(obs: TTFAObserver, data: FramePushed) -> None:
    if data.first_push and data.direction == _DOWN:
        obs._ttfa_tracker.user_stopped(obs._ttfa_at(data), data.frame.stop_secs)


def _on_final(obs: TTFAObserver, data: FramePushed) -> None:
    if data.first_push and data.direction == _DOWN:
        obs._ttfa_tracker.final_transcript(obs._ttfa_at(data))


def _on_user_stopped(obs: TTFAObserver, data: FramePushed) -> None:
    if data.first_push and data.direction == _DOWN:
        obs._ttfa_tracker.turn_confirmed(obs._ttfa_at(data))


def _on_context(obs: TTFAObserver, data: FramePushed) -> None:
    # Every hop is observed; only the one into the LLM service is the request.
    if data.direction == _DOWN and isinstance(data.destination, LLMService):
        obs._ttfa_tracker.llm_request(obs._ttfa_at(data))


def _on_llm_text(obs: TTFAObserver, data: FramePushed) -> None:
    if data.first_push and data.direction == _DOWN and isinstance(data.source, LLMService):
        obs._ttfa_tracker.llm_first_token(obs._ttfa_at(data))


def _on_aggregated_text(obs: TTFAObserver, data: FramePushed) -> None:
    # Either a text processor hands the TTS a chunk, or the TTS announces the chunk it is about
    # to synthesize (pushed just ahead of its audio context).
    if data.direction != _DOWN:
        return
    into_tts = isinstance(data.destination, TTSService)
    if into_tts or (data.first_push and isinstance(data.source, TTSService)):
        obs._ttfa_tracker.tts_text(obs._ttfa_at(data))


def _on_tts_started(obs: TTFAObserver, data: FramePushed) -> None:
    if data.first_push and data.direction == _DOWN and isinstance(data.source, TTSService):
        obs._ttfa_tracker.tts_text(obs._ttfa_at(data))


def _on_tts_audio(obs: TTFAObserver, data: FramePushed) -> None:
    if data.first_push and data.direction == _DOWN and isinstance(data.source, TTSService):
        obs._ttfa_tracker.tts_first_byte(obs._ttfa_at(data))


def _on_bot_started(obs: TTFAObserver, data: FramePushed) -> TurnRecord | None:
    if data.first_push and data.direction == _DOWN:
        return obs._ttfa_tracker.first_audio_out(obs._ttfa_at(data))
    return None


# First match wins (a subclass listed before its base).
_RULES: tuple[tuple[type, _Handler | None], ...] = (
    (MetricsFrame, _on_metrics),
    (TTFAAnnotationFrame, _on_annotation),
    (VADUserStartedSpeakingFrame, _on_vad_started),
    (VADUserStoppedSpeakingFrame, _on_vad_stopped),
    (TranscriptionFrame, _on_final),
    (UserStoppedSpeakingFrame, _on_user_stopped),
    (LLMContextFrame, _on_context),
    (LLMTextFrame, _on_llm_text),
    (TTSTextFrame, None),  # the TTS's own record of what it spoke, not a chunk handed to it
    (AggregatedTextFrame, _on_aggregated_text),
    (TTSStartedFrame, _on_tts_started),
    (TTSAudioRawFrame, _on_tts_audio),
    (BotStartedSpeakingFrame, _on_bot_started),
)

_HANDLERS: dict[type, _Handler | None] = {}


def _handler_for(cls: type) -> _Handler | None:
    for base, handler in _RULES:
        if issubclass(cls, base):
            return handler
    return None
