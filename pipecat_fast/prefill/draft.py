"""Draft-and-hold: start the real reply before the turn is confirmed, speak it only after.

:class:`DraftAndHoldUserTurnStopStrategy` wraps any user turn stop strategy (by default
Pipecat's own: Smart Turn v3 via ``TurnAnalyzerUserTurnStopStrategy``) and leaves the end-of-turn
decision to it. When the VAD reports the caller silent and the caller's words are known (the
final transcript so far, or the stabiliser's stable words), it starts a speculative inference
through Pipecat's own speculation path: ``UserTurnSpeculation`` makes the user aggregator send
``LLMContextFrame(speculation=True)`` against a provisional copy of the context, and the LLM
service's ``SpeculationGate`` holds every frame of the reply.

When the wrapped strategy confirms the turn, the draft is released if the final transcript says
the drafted words under :class:`TranscriptMatch` (``yes i want to book it`` matches
``Yes, I want to book it.``: case, punctuation and spacing aside); otherwise it is withdrawn
(``EagerEndOfTurnCancelFrame``) and the normal request runs. If the caller speaks again the draft
is withdrawn. No draft token is spoken before confirmation (the gate holds them), no draft tool
call runs (the LLM service withdraws a speculation that wants one), and the context only ever
gets the final transcript.

Drafting earlier: given the VAD's :class:`~pipecat_fast.endofturn.PauseTap` and an
``early_silence_s``, the draft starts at a pause of that much silence inside the VAD's stop
window — from the VAD's own per-frame confidence — when the caller's words are in hand (the
finals with no interim after them, or stable words covering the latest interim), or when the
final arrives during the pause; the next speech frame withdraws it. With ``pause_stable_s``
(off by default) the silence itself counts as the latest interim's second update: after that
much silence with no new interim, the draft starts on the interim's words, and a final that
differs withdraws it (and redrafts on the final) as any differing final does.

A released draft was generated from the drafted words, which equal the final transcript only
*under the normaliser*: ``I'd like Tuesday`` drafted, ``I'd like Tuesday.`` final. The reply
can differ from what the final transcript's exact characters would have produced as much as a
model's reply to ``Tuesday`` differs from its reply to ``Tuesday.``; pass
``match_policy=ExactMatch()`` (Pipecat's) to release only on identical text.

The decisions are :class:`~pipecat_fast.prefill.draft_core.DraftHold`'s (pure, tested without
a pipeline); this class only turns Pipecat's frames and the wrapped strategy's events into its
events, and its decisions into Pipecat's public strategy triggers.

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
    InputAudioRawFrame,
    InterimTranscriptionFrame,
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
from pipecat.turns.user_stop.eager_match_policy import EagerMatchPolicy

from pipecat_fast._strategy import WrappingUserTurnStopStrategy
from pipecat_fast.frames import (
    DraftWithdrawalRequestFrame,
    StableTranscriptFrame,
    TTFAAnnotationFrame,
)
from pipecat_fast.load import EngineLoad, Kind, YieldConfig
from pipecat_fast.prefill.draft_core import (
    Confirm,
    Decision,
    DraftHold,
    PassInference,
    PassWithdrawal,
    Settled,
    StartDraft,
    Withdraw,
)
from pipecat_fast.textnorm import same_words


class TranscriptMatch(EagerMatchPolicy):
    """Pipecat's ``EagerMatchPolicy`` with the project's one normaliser.

    :func:`pipecat_fast.textnorm.same_words`: the rule of Pipecat's ``NormalizedMatch``, with
    every script's words kept whole (see :mod:`pipecat_fast.textnorm`). The stabiliser keys its
    words with the same normaliser, so the two cannot drift apart.
    """

    def matches(self, eager: str, final: str) -> bool:
        """Whether the final transcript says the eager transcript's words."""
        return same_words(eager, final)


def _check_pause_stable(pauses: Any, early_silence_s: Any, pause_stable_s: Any) -> None:
    if pause_stable_s is None:
        return
    if pauses is None or early_silence_s is None:
        raise ValueError(
            "pause_stable_s= drafts on the interim at a pause: it needs pauses= (the PauseTap) "
            "and early_silence_s= too"
        )
    bad = isinstance(pause_stable_s, bool) or not isinstance(pause_stable_s, int | float)
    if bad or not 0 < pause_stable_s < pauses.params.stop_secs:
        raise ValueError(
            f"pause_stable_s must be a number of seconds in (0, the VAD's stop_secs="
            f"{pauses.params.stop_secs}), got {pause_stable_s!r}"
        )


def _check_pauses(pauses: Any, early_silence_s: Any) -> None:
    if pauses is None and early_silence_s is None:
        return
    from pipecat_fast.endofturn.vad import PauseTap

    if pauses is None or early_silence_s is None:
        raise ValueError(
            "draft at pauses with both pauses= (the PauseTap given to the user aggregator as "
            "its vad_analyzer) and early_silence_s= (the silence, s, worth a draft)"
        )
    if not isinstance(pauses, PauseTap):
        raise TypeError(
            "pauses must be the PauseTap the user aggregator runs as its VAD analyzer, got "
            f"{type(pauses).__name__}"
        )
    bad = isinstance(early_silence_s, bool) or not isinstance(early_silence_s, int | float)
    if bad or early_silence_s <= 0:
        raise ValueError(
            f"early_silence_s must be a number of seconds > 0, not {early_silence_s!r}"
        )
    if early_silence_s >= pauses.params.stop_secs:
        raise ValueError(
            f"early_silence_s ({early_silence_s}) must be under the VAD's stop_secs "
            f"({pauses.params.stop_secs}): at stop_secs the VAD itself reports the stop"
        )


def _check_inner(inner: Any) -> None:
    if inner is None or isinstance(inner, BaseUserTurnStopStrategy):
        return
    raise TypeError(
        "DraftAndHoldUserTurnStopStrategy(inner) takes the user turn stop strategy that decides "
        "the end of turn (for example TurnAnalyzerUserTurnStopStrategy(turn_analyzer="
        f"LocalSmartTurnAnalyzerV3()), or nothing for that default), got "
        f"{type(inner).__name__} {inner}. The draft "
        "runs through the LLM service already in your pipeline: do not pass the service here."
    )


class DraftAndHoldUserTurnStopStrategy(WrappingUserTurnStopStrategy):
    """Speculate at end of speech, hold until the wrapped strategy confirms the turn.

    Put it where Pipecat's stop strategy goes:
    ``LLMUserAggregatorParams(user_turn_strategies=UserTurnStrategies(stop=[
    DraftAndHoldUserTurnStopStrategy()]))``.

    Args:
        inner: The stop strategy that decides the end of turn; defaults to Pipecat's default
            (``TurnAnalyzerUserTurnStopStrategy`` with ``LocalSmartTurnAnalyzerV3``).
        match_policy: Whether the final transcript still says the drafted words; defaults to
            :class:`TranscriptMatch` (case, punctuation and spacing ignored). Any Pipecat
            ``EagerMatchPolicy`` (``ExactMatch()``...) works.
        max_drafts_per_turn: Drafts one turn may start, early ones included (a later final
            transcript that no longer matches withdraws the draft and may start another): the
            turn's speculation budget.
        use_stable_words: Draft from the stabiliser's stable words when no final transcript
            has arrived yet at end of speech.
        pauses: The VAD analyzer's :class:`~pipecat_fast.endofturn.PauseTap` (the same object
            given to ``LLMUserAggregatorParams(vad_analyzer=...)``), to draft at a pause
            inside the VAD's stop window.
        early_silence_s: The silence (s) that makes a pause worth a draft; ``None`` (the
            default) drafts only at the VAD's stop. Must be under the VAD's ``stop_secs``.
        pause_stable_s: An experiment, off (``None``) by default: after this much silence
            (s) with no new interim, the latest interim's words are in hand for the early
            draft (silence as the second update; never for confirmation or the context). Needs
            ``pauses`` and ``early_silence_s``; under the VAD's ``stop_secs``. A draft on the
            interim never takes the turn's last draft (kept for the final's words), so it
            needs ``max_drafts_per_turn`` >= 2.
        load: The engine's load (:class:`~pipecat_fast.load.EngineLoad`, e.g.
            ``EngineLoad.shared(url)``, the same object the prefill yields to): while it says
            a draft would queue with other callers' turns, the turn runs the normal request.
            ``None`` (the default): drafts never yield.
        yield_config: When drafts back off (:class:`~pipecat_fast.load.YieldConfig`).
        **kwargs: Passed to ``BaseUserTurnStopStrategy``.

    Attributes:
        outcomes: Per confirmed turn: ``"none"``, ``"reused"`` or ``"discarded"``.

    Raises:
        TypeError: If ``inner`` is not a user turn stop strategy (an LLM service passed where
            the strategy goes, for one), ``match_policy`` is not an ``EagerMatchPolicy``, or
            ``pauses`` is not a ``PauseTap``.
        ValueError: If ``max_drafts_per_turn`` < 1, ``early_silence_s`` (or
            ``pause_stable_s``) is not a positive number under the VAD's ``stop_secs``, only
            one of ``pauses`` and ``early_silence_s`` is given, or ``pause_stable_s`` is given
            without both.
    """

    def __init__(
        self,
        inner: BaseUserTurnStopStrategy | None = None,
        *,
        match_policy: EagerMatchPolicy | None = None,
        max_drafts_per_turn: int = 2,
        use_stable_words: bool = True,
        pauses: Any = None,
        early_silence_s: float | None = None,
        pause_stable_s: float | None = None,
        load: EngineLoad | None = None,
        yield_config: YieldConfig | None = None,
        **kwargs: Any,
    ):
        _check_inner(inner)
        if load is not None and not isinstance(load, EngineLoad):
            raise TypeError(
                f"load must be an EngineLoad (EngineLoad.shared(url)), got {type(load).__name__}"
            )
        if match_policy is not None and not isinstance(match_policy, EagerMatchPolicy):
            raise TypeError(
                f"match_policy must be a Pipecat EagerMatchPolicy (TranscriptMatch(), "
                f"ExactMatch()...), got {match_policy!r}"
            )
        _check_pauses(pauses, early_silence_s)
        _check_pause_stable(pauses, early_silence_s, pause_stable_s)
        if pause_stable_s is not None and max_drafts_per_turn == 1:
            raise ValueError(
                "pause_stable_s needs max_drafts_per_turn >= 2: a draft on the interim never "
                "takes the turn's last draft (it is kept for the final's words)"
            )
        policy = match_policy or TranscriptMatch()
        core = DraftHold(
            match=policy.matches,
            max_drafts=max_drafts_per_turn,
            use_stable_words=use_stable_words,
            engine_busy=self._draft_busy if load is not None else None,
            pause_stable_s=pause_stable_s,
        )
        if inner is None:
            from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import LocalSmartTurnAnalyzerV3
            from pipecat.turns.user_stop.turn_analyzer_user_turn_stop_strategy import (
                TurnAnalyzerUserTurnStopStrategy,
            )

            inner = TurnAnalyzerUserTurnStopStrategy(turn_analyzer=LocalSmartTurnAnalyzerV3())
        super().__init__(inner, **kwargs)
        self._draft_core = core
        self._draft_pauses = pauses
        self._draft_early_s = early_silence_s
        self._draft_vad_speaking = False  # the VAD heard the caller and has not stopped
        self._draft_paused = False  # a pause inside the stop window was reported
        self._draft_load = load
        self._draft_yield = yield_config or YieldConfig()
        self._draft_load_held = False
        self._draft_handle: int | None = None

    @property
    def outcomes(self) -> list[str]:
        """Per confirmed turn: ``"none"``, ``"reused"`` or ``"discarded"``."""
        return self._draft_core.outcomes

    @property
    def held_draft(self) -> str | None:
        """The words of the draft held now (its reply not yet released), or ``None``."""
        return self._draft_core.held

    async def setup(self, setup: FrameProcessorSetup):
        """Set up the wrapped strategy; hold the shared engine-load probe."""
        await super().setup(setup)
        if self._draft_load is not None and not self._draft_load_held:
            self._draft_load_held = True
            await self._draft_load.acquire()

    async def cleanup(self):
        """Clean up the wrapped strategy; let go of the engine-load probe."""
        await super().cleanup()
        self._draft_sent_done()
        if self._draft_load is not None and self._draft_load_held:
            self._draft_load_held = False
            await self._draft_load.release()

    def _draft_busy(self) -> str | None:
        """The engine-load rule holding a draft back, or ``None``."""
        assert self._draft_load is not None
        verdict = self._draft_load.verdict(Kind.DRAFT, self._draft_yield)
        return None if verdict.allow else str(verdict.reason)

    def _draft_sent_done(self) -> None:
        handle, self._draft_handle = self._draft_handle, None
        if handle is not None and self._draft_load is not None:
            self._draft_load.done(handle)

    async def handle_user_turn_started(self):
        """A new turn: a draft still held belongs to the last one and is withdrawn."""
        await self._apply(self._draft_core.turn_started())
        await super().handle_user_turn_started()

    async def handle_user_turn_stopped(self):
        """The turn ended (by any strategy or the watchdog).

        A draft still held here was never confirmed by the wrapped strategy: it is withdrawn
        before the turn-end broadcast can release it, and the normal request answers the turn.
        """
        await self._apply(self._draft_core.turn_stopped())
        await super().handle_user_turn_stopped()

    async def process_frame(self, frame: Frame) -> ProcessFrameResult | None:
        """Feed the caller's words and silence to the core; the wrapped strategy decides."""
        core = self._draft_core
        if isinstance(frame, InputAudioRawFrame):
            await self._watch_pause()
        elif isinstance(frame, TranscriptionFrame):
            await self._apply(core.final_transcript(frame.text))
        elif isinstance(frame, InterimTranscriptionFrame):
            await self._apply(core.interim_transcript(frame.text))
        elif isinstance(frame, StableTranscriptFrame):
            await self._apply(core.stable_words(frame.text))
        elif isinstance(frame, VADUserStartedSpeakingFrame):
            self._draft_vad_speaking = True
            self._draft_paused = False
            await self._apply(core.caller_speaking())
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            self._draft_vad_speaking = False
            self._draft_paused = False
            # Draft before the wrapped strategy runs its end-of-turn model on this frame
            # (Smart Turn inference takes tens of ms): the draft's TTFT overlaps it too.
            await self._apply(core.caller_silent())
        elif isinstance(frame, EagerEndOfTurnCancelFrame):
            await self._apply(core.withdrawn_elsewhere())
        elif isinstance(frame, DraftWithdrawalRequestFrame):
            await self._apply(core.withdrawal_requested(frame.reason or "a lever asked"))
        return await super().process_frame(frame)

    async def _watch_pause(self) -> None:
        """Act on the VAD's silence building up inside its stop window.

        The user aggregator runs its VAD on an audio frame before the strategies see it, so
        the tap's silence already includes this frame.
        """
        pauses, early = self._draft_pauses, self._draft_early_s
        if pauses is None or early is None or not self._draft_vad_speaking:
            return
        silence = pauses.silence_s
        if self._draft_core.pause_stable_s is not None:
            # First the silence (it may make the latest interim the second update), then the
            # pause: at the same frame the pause's draft then sees the interim in hand.
            await self._apply(self._draft_core.caller_silence(silence))
        if not self._draft_paused and silence >= early:
            self._draft_paused = True
            await self._apply(self._draft_core.caller_paused())
        elif self._draft_paused and silence == 0.0:
            self._draft_paused = False
            await self._apply(self._draft_core.caller_resumed())

    # -- the wrapped strategy's events -----------------------------------------------------

    async def _on_inner_inference(self, _inner, speculation: UserTurnSpeculation | None = None):
        await self._apply(
            self._draft_core.inner_inference(speculation.text if speculation else None)
        )

    async def _on_inner_withdrawal(self, _inner):
        await self._apply(self._draft_core.inner_withdrawal())

    async def _on_inner_stopped(self, _inner, params: UserTurnStoppedParams):
        await self._apply(
            self._draft_core.inner_confirmed(
                enable_user_speaking_frames=params.enable_user_speaking_frames,
                confirms_speculation=params.confirms_speculation,
            )
        )

    # -- carrying out the core's decisions -------------------------------------------------

    async def _apply(self, decisions: list[Decision]) -> None:
        for decision in decisions:
            if isinstance(decision, StartDraft):
                logger.debug(f"{self}: drafting a reply to [{decision.text}] before confirmation")
                if self._draft_load is not None:
                    self._draft_sent_done()
                    self._draft_handle = self._draft_load.sent(Kind.DRAFT)
                await self.trigger_user_turn_inference_triggered(
                    speculation=UserTurnSpeculation(text=decision.text)
                )
            elif isinstance(decision, Withdraw):
                logger.debug(f"{self}: withdrawing the draft ({decision.reason})")
                self._draft_sent_done()
                await self.trigger_user_turn_speculation_cancelled()
            elif isinstance(decision, PassInference):
                speculation = decision.speculation
                await self.trigger_user_turn_inference_triggered(
                    speculation=UserTurnSpeculation(text=speculation)
                    if speculation is not None
                    else None
                )
            elif isinstance(decision, PassWithdrawal):
                await self.trigger_user_turn_speculation_cancelled()
            elif isinstance(decision, Confirm):
                self._draft_sent_done()  # released or not, it is no longer a bet
                await self.trigger_user_turn_finalized(
                    enable_user_speaking_frames=decision.enable_user_speaking_frames,
                    confirms_speculation=decision.confirms_speculation,
                )
            elif isinstance(decision, Settled):
                await self.push_frame(TTFAAnnotationFrame(fields=decision.fields()))
