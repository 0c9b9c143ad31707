"""Draft-and-hold: start the real reply before the turn is confirmed, speak it only after.

:class:`DraftAndHoldUserTurnStopStrategy` wraps any user turn stop strategy (by default
Pipecat's own: Smart Turn v3 via ``TurnAnalyzerUserTurnStopStrategy``) and leaves the end-of-turn
decision to it. When the VAD reports the caller silent and the caller's words are known (the
final transcript so far, or the stabiliser's stable words), it starts a speculative inference
through Pipecat's own speculation path: ``UserTurnSpeculation`` makes the user aggregator send
``LLMContextFrame(speculation=True)`` against a provisional copy of the context, and the LLM
service's ``SpeculationGate`` holds every frame of the reply.

When the wrapped strategy confirms the turn, the draft is released if the final transcript
matches the drafted one under Pipecat's ``NormalizedMatch`` (``yes i want to book it`` matches
``Yes, I want to book it.``); otherwise it is withdrawn (``EagerEndOfTurnCancelFrame``) and the
normal request runs. If the caller speaks again the draft is withdrawn. No draft token is
spoken before confirmation (the gate holds them), no draft tool call runs (the LLM service
withdraws a speculation that wants one), and the context only ever gets the final transcript.

The bet: the LLM's time to first token overlaps the end-of-turn decision (Smart Turn, or
waiting for the STT's p99). Who pays when it loses: the provider computes a reply that is
thrown away when the caller goes on talking or the final transcript differs.
"""

from __future__ import annotations

from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    EagerEndOfTurnCancelFrame,
    Frame,
    TranscriptionFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.processors.frame_processor import FrameProcessorSetup
from pipecat.turns.types import ProcessFrameResult, UserTurnSpeculation
from pipecat.turns.user_stop.base_user_turn_stop_strategy import (
    BaseUserTurnStopStrategy,
    UserTurnStoppedParams,
)
from pipecat.turns.user_stop.eager_match_policy import EagerMatchPolicy, NormalizedMatch
from pipecat.turns.user_stop.turn_analyzer_user_turn_stop_strategy import (
    TurnAnalyzerUserTurnStopStrategy,
)

from pipecat_fast.frames import StableTranscriptFrame, TTFAAnnotationFrame

# Turn events the wrapper decides on (or emits itself); frame-side events (on_push_frame,
# on_broadcast_frame) go straight from the wrapped strategy to the listeners.
_INTERCEPTED = (
    "on_user_turn_inference_triggered",
    "on_user_turn_stopped",
    "on_user_turn_speculation_cancelled",
)


class DraftAndHoldUserTurnStopStrategy(BaseUserTurnStopStrategy):
    """Speculate at end of speech, hold until the wrapped strategy confirms the turn.

    Args:
        inner: The stop strategy that decides the end of turn; defaults to Pipecat's default
            (``TurnAnalyzerUserTurnStopStrategy`` with ``LocalSmartTurnAnalyzerV3``).
        match_policy: Whether the final transcript still matches the draft; defaults to
            Pipecat's ``NormalizedMatch`` (case, punctuation and spacing ignored).
        max_drafts_per_turn: Drafts one turn may start (a later final transcript that no
            longer matches withdraws the draft and may start another).
        use_stable_words: Draft from the stabiliser's stable words when no final transcript
            has arrived yet at end of speech.
        **kwargs: Passed to ``BaseUserTurnStopStrategy``.

    Attributes:
        outcomes: Per confirmed turn: ``"none"``, ``"reused"`` or ``"discarded"``.
    """

    def __init__(
        self,
        inner: BaseUserTurnStopStrategy | None = None,
        *,
        match_policy: EagerMatchPolicy | None = None,
        max_drafts_per_turn: int = 2,
        use_stable_words: bool = True,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if inner is None:
            from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import LocalSmartTurnAnalyzerV3

            inner = TurnAnalyzerUserTurnStopStrategy(turn_analyzer=LocalSmartTurnAnalyzerV3())
        self._draft_inner = inner
        self._draft_match = match_policy or NormalizedMatch()
        self._draft_max = max_drafts_per_turn
        self._draft_use_stable = use_stable_words
        self._draft_finals: list[str] = []
        self._draft_stable = ""
        self._draft_text: str | None = None
        self._draft_count = 0
        self._draft_discarded = 0
        self._draft_silent = False
        self.outcomes: list[str] = []

    @property
    def inner(self) -> BaseUserTurnStopStrategy:
        """The strategy that decides the end of turn."""
        return self._draft_inner

    @property
    def resolves_proposed_turn_stop_frames(self) -> bool:
        """Whatever the wrapped strategy does with proposals."""
        return self._draft_inner.resolves_proposed_turn_stop_frames

    def add_event_handler(self, event_name: str, handler):
        """Listeners of frame-side events attach to the wrapped strategy directly."""
        if event_name in _INTERCEPTED:
            super().add_event_handler(event_name, handler)
        else:
            self._draft_inner.add_event_handler(event_name, handler)

    def remove_event_handler(self, event_name: str, handler):
        """Mirror of :meth:`add_event_handler`."""
        if event_name in _INTERCEPTED:
            super().remove_event_handler(event_name, handler)
        else:
            self._draft_inner.remove_event_handler(event_name, handler)

    async def setup(self, setup: FrameProcessorSetup):
        """Set up the wrapped strategy and listen to its verdicts."""
        await super().setup(setup)
        await self._draft_inner.setup(setup)
        self._draft_inner.add_event_handler(
            "on_user_turn_inference_triggered", self._on_inner_inference
        )
        self._draft_inner.add_event_handler("on_user_turn_stopped", self._on_inner_stopped)
        self._draft_inner.add_event_handler(
            "on_user_turn_speculation_cancelled", self._on_inner_cancelled
        )

    async def cleanup(self):
        """Clean up the wrapped strategy."""
        await super().cleanup()
        await self._draft_inner.cleanup()

    async def handle_user_turn_started(self):
        """A new turn: forget the last one (a draft still held is withdrawn)."""
        await self._withdraw("a new turn started")
        self._forget_turn()
        await self._draft_inner.handle_user_turn_started()

    async def handle_user_turn_stopped(self):
        """The turn ended (by any strategy or the watchdog).

        A draft still held here was never confirmed by the wrapped strategy (the turn ended
        by the controller's stop watchdog, another stop strategy, or the session ending):
        it is withdrawn before the turn-end broadcast can release it, and the normal request
        answers the turn.
        """
        if self._draft_text is not None:
            await self._withdraw("the turn ended without the wrapped strategy confirming it")
            await self._settle(reused=False)
        await self._draft_inner.handle_user_turn_stopped()
        self._forget_turn()

    async def process_frame(self, frame: Frame) -> ProcessFrameResult | None:
        """Track the caller's words and silence; the wrapped strategy decides the turn."""
        if isinstance(frame, TranscriptionFrame):
            self._draft_finals.append(frame.text)
            if self._draft_text is not None and not self._matches(self._draft_text):
                await self._withdraw("the final transcript moved on")
            if self._draft_silent:
                # A final that lands after the VAD stop (a slow STT) can still be drafted.
                await self._maybe_draft()
        elif isinstance(frame, StableTranscriptFrame):
            self._draft_stable = frame.text
        elif isinstance(frame, VADUserStartedSpeakingFrame):
            self._draft_silent = False
            await self._withdraw("the caller is speaking again")
        elif isinstance(frame, EagerEndOfTurnCancelFrame) and self._draft_text is not None:
            # Someone else withdrew the speculation (the LLM service does when a draft wants
            # a tool call): the confirmed turn must then run the normal request.
            logger.debug(f"{self}: the draft was withdrawn elsewhere")
            self._draft_text = None
            self._draft_discarded += 1
        if isinstance(frame, VADUserStoppedSpeakingFrame):
            # Draft before the wrapped strategy runs its end-of-turn model on this frame
            # (Smart Turn inference takes tens of ms): the draft's TTFT overlaps it too.
            self._draft_silent = True
            await self._maybe_draft()
        return await self._draft_inner.process_frame(frame)

    # -- drafting -------------------------------------------------------------------------

    def _caller_text(self) -> str:
        finals = " ".join(t.strip() for t in self._draft_finals if t.strip())
        if finals or not self._draft_use_stable:
            return finals
        return self._draft_stable.strip()

    def _matches(self, drafted: str) -> bool:
        return self._draft_match.matches(drafted, " ".join(self._draft_finals))

    async def _maybe_draft(self) -> None:
        text = self._caller_text()
        if self._draft_text is not None or not text or self._draft_count >= self._draft_max:
            return
        self._draft_text = text
        self._draft_count += 1
        logger.debug(f"{self}: drafting a reply to [{text}] before the turn is confirmed")
        await self.trigger_user_turn_inference_triggered(speculation=UserTurnSpeculation(text=text))

    async def _withdraw(self, why: str) -> None:
        if self._draft_text is None:
            return
        logger.debug(f"{self}: withdrawing the draft ({why})")
        self._draft_text = None
        self._draft_discarded += 1
        await self.trigger_user_turn_speculation_cancelled()

    def _forget_turn(self) -> None:
        self._draft_finals = []
        self._draft_stable = ""
        self._draft_text = None
        self._draft_count = 0
        self._draft_discarded = 0
        self._draft_silent = False

    # -- the wrapped strategy's verdicts --------------------------------------------------

    async def _on_inner_inference(self, _inner, speculation: UserTurnSpeculation | None = None):
        """The wrapped strategy wants inference: keep the draft if it still answers the turn."""
        if speculation is not None or self._draft_text is None:
            await self._call_event_handler("on_user_turn_inference_triggered", speculation)
            return
        if self._matches(self._draft_text):
            return  # the held draft answers this turn; confirmation releases it
        await self._withdraw("the final transcript differs")
        await self._call_event_handler("on_user_turn_inference_triggered", None)

    async def _on_inner_cancelled(self, _inner):
        """A speculation of the wrapped strategy's own was withdrawn: pass it on."""
        await self._call_event_handler("on_user_turn_speculation_cancelled")

    async def _on_inner_stopped(self, _inner, params: UserTurnStoppedParams):
        """The wrapped strategy confirmed the turn."""
        reused = self._draft_text is not None and self._matches(self._draft_text)
        await self._settle(reused)
        params.confirms_speculation = params.confirms_speculation or reused
        self._draft_text = None
        await self._call_event_handler("on_user_turn_stopped", params)

    async def _settle(self, reused: bool) -> None:
        """Record the turn's outcome and tell the TTFA meter."""
        outcome = "reused" if reused else ("discarded" if self._draft_count else "none")
        self.outcomes.append(outcome)
        # Frame-side listeners are attached to the wrapped strategy, so push through it.
        await self._draft_inner.push_frame(
            TTFAAnnotationFrame(
                fields={
                    "speculation": outcome,
                    "drafts": self._draft_count,
                    "drafts_discarded": self._draft_discarded,
                }
            )
        )
