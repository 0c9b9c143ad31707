"""One call's levers, from the phone ringing to the hang-up, and the calls still ringing.

:class:`FastCall` builds the processors, observers and user-turn parameters a
:class:`~pipecat_fast.compose.levers.Levers` value names, for the services of one call, and
runs the ring-time work (session warmup, TTS warm-pool) before the pipeline exists. It adds
nothing of its own: every piece is the lever's public API, placed where its docs say.

Frames flow through the slots in this order (each slot a list, empty when its lever is off)::

    transport.input(), stt, *call.after_stt, pair.user(), *call.before_llm, llm,
    *call.between_llm_tts, tts, *call.after_tts, *call.before_output, transport.output(),
    *call.after_output, pair.assistant()

:class:`CallBook` keeps the calls between the telephony webhook (ringing) and the media stream
(answered), so a bot server can start a call's warmup in one request and pick the same
services up in another; a call never answered is closed after ``max_ring_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Sequence
from typing import Any

from loguru import logger
from pipecat.observers.base_observer import BaseObserver
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMUserAggregatorParams
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.services.llm_service import LLMService
from pipecat.services.tts_service import TTSService
from pipecat.turns.user_turn_strategies import UserTurnStrategies

from pipecat_fast.compose.levers import Levers
from pipecat_fast.ttfa import TTFAObserver


class FastCall:
    """The levers of one call around its own LLM and TTS services.

    Args:
        call_id: The call's id (a Twilio CallSid, a WebRTC session id): the TTS pool's key.
        llm: The call's LLM service, configured as its pipeline uses it (the warmup and the
            prefill render its own requests).
        tts: The call's TTS service (the pool adopts a socket into it).
        context: The call's ``LLMContext`` (the one its aggregator pair writes).
        stt: The call's STT service, kept with the others so a :class:`CallBook` holds all
            of them between ring and answer (no lever touches it).
        levers: Which levers run (default: all of them).
        pool: The process's ``TTSWarmPool``; None makes one for this call alone.
        is_retry: The call is a retry of an earlier attempt (warmup and pool skip retries).
        audio_out_sample_rate: The pipeline's output rate (some TTS URLs carry it).
        provider: The LLM provider's registry name when the service does not say
            (``"vllm"``, ``"llama.cpp"``); also the cache-bust guard's provider.
        model: The LLM model, for the guard's minimum-prefix rule.
        load: The engine's load (``EngineLoad.shared(url)``: one per self-hosted engine per
            process, every call passes the same), so the prefill and draft-and-hold yield when
            many callers share the engine (docs/load.md); None: the prefill still backs off on
            the queueing it measures on its own requests, drafts never yield.
        yield_config: When they yield (``YieldConfig``; None: the defaults).

    Attributes:
        ttfa: The TTFA meter (every call has one, stock calls too).
        warmup: The ``SessionWarmup``, or None.
        lease: The TTS pool's ``CallLease`` once :meth:`ring` ran, or None.
        truncator: The ``BargeInTruncator``, or None.
        guard: The ``CacheBustGuard``, or None.
        prefill: The ``SpeculativePrefill``, or None.
        preemptive: The ``PreemptiveTTS``, or None.
    """

    def __init__(
        self,
        call_id: str,
        *,
        llm: LLMService,
        tts: TTSService,
        context: LLMContext,
        stt: Any = None,
        levers: Levers | None = None,
        pool: Any = None,
        is_retry: bool = False,
        audio_out_sample_rate: int | None = None,
        provider: str | None = None,
        model: str | None = None,
        load: Any = None,
        yield_config: Any = None,
    ):
        if not isinstance(context, LLMContext):
            raise TypeError(f"context must be the call's LLMContext, got {type(context).__name__}")
        self.call_id = call_id
        self.llm = llm
        self.tts = tts
        self.context = context
        self.stt = stt
        self.levers = levers if levers is not None else Levers.all()
        self.is_retry = is_retry
        self.audio_out_sample_rate = audio_out_sample_rate
        self._fc_pool = pool
        self._fc_own_pool = False
        self._fc_rang = False
        self._fc_closed: dict[str, Any] | None = None
        self._fc_yield = {
            k: v for k, v in (("load", load), ("yield_config", yield_config)) if v is not None
        }
        on = self.levers

        self.ttfa = TTFAObserver()
        self.warmup = None
        self.lease = None
        self.truncator = None
        self.guard = None
        self.prefill = None
        self.preemptive = None
        self.after_stt: list[FrameProcessor] = []
        self.before_llm: list[FrameProcessor] = []
        self.between_llm_tts: list[FrameProcessor] = []
        self.after_tts: list[FrameProcessor] = []
        self.before_output: list[FrameProcessor] = []
        self.after_output: list[FrameProcessor] = []
        self.observers: list[BaseObserver] = [self.ttfa]

        if on.stabilizer:
            from pipecat_fast.stabilizer import TwoUpdateStabilizer

            self.after_stt.append(TwoUpdateStabilizer())
        if on.prefill:
            from pipecat_fast.prefill import SpeculativePrefill

            self.prefill = SpeculativePrefill(
                llm, context=context, provider=provider, **self._fc_yield
            )
            self.before_llm.append(self.prefill)
        if on.warmup:
            from pipecat_fast.warmup import SessionWarmup

            self.warmup = SessionWarmup(llm, context, is_retry=is_retry, provider=provider)
            self.before_llm.append(self.warmup.checker())
        if on.endofturn:
            from pipecat_fast.endofturn import patience

            patience(on.patience)  # an unknown preset fails here, with the known ones
            if stt is not None:
                self._fc_report_finalize_answers(stt)
        if on.preemptive:
            from pipecat_fast.preemptive import PreemptiveTTS

            self.preemptive = PreemptiveTTS(llm, tts)
            self.between_llm_tts.append(self.preemptive)  # right after the LLM
            self.after_tts.append(self.preemptive.hold)  # right after the TTS
        if on.aggregator:
            from pipecat_fast.aggregator import make_text_processor

            self.between_llm_tts.append(make_text_processor())
        if on.bargein:
            from pipecat_fast.bargein import BargeInTruncator

            self.truncator = BargeInTruncator(playout_delay_s=on.playout_delay_s)
            self.before_output.append(self.truncator.before_output())
            self.after_output.append(self.truncator.after_output())
        if on.guard:
            from pipecat_fast.lint import CacheBustGuard

            self.guard = CacheBustGuard(provider=provider, model=model, llm=llm)
            self.observers.append(self.guard)

    def _fc_report_finalize_answers(self, stt: Any) -> None:
        """Deepgram's empty finalize answers as frames (the confirmation's proof).

        Other STT services already mark their finalized transcripts.
        """
        from pipecat.services.deepgram.stt import DeepgramSTTService

        from pipecat_fast.endofturn import report_finalize_answers

        if not isinstance(stt, DeepgramSTTService):
            return
        try:
            report_finalize_answers(stt)
        except Exception as e:  # fail open: the confirmation falls back to the stock wait
            logger.warning(f"call {self.call_id}: finalize answers not reported: {e}")

    # -- the pipeline's pieces ----------------------------------------------------------------

    def user_params(self, *, stop_strategy: Any = None, **kwargs: Any) -> LLMUserAggregatorParams:
        """``LLMUserAggregatorParams`` for the call's user aggregator.

        Args:
            stop_strategy: The end-of-turn stop strategy; None is Pipecat's default (Smart
                Turn v3). With draft-and-hold on it is the strategy draft-and-hold wraps.
                With ``endofturn`` on the patience dial builds it (give none).
            **kwargs: Passed on (``vad_analyzer=SileroVADAnalyzer()``, ...); with
                draft-and-hold on, ``user_turn_strategies`` is the call's to set. With
                ``endofturn`` on, ``vad_analyzer`` is the VAD the dial's ``PauseTap`` wraps
                (Silero by default), its stop window set by the preset.

        Raises:
            ValueError: If draft-and-hold is on and ``user_turn_strategies`` is given too,
                or ``endofturn`` is on and a ``stop_strategy`` is given.
        """
        if self.levers.endofturn:
            if stop_strategy is not None or "user_turn_strategies" in kwargs:
                raise ValueError(
                    "endofturn builds the stop strategy from the patience dial (Smart Turn at "
                    "the preset's threshold): pick the preset with Levers(patience=...), or "
                    "turn endofturn off to pass your own"
                )
            from pipecat_fast.endofturn import patience_stop_strategy, patience_vad

            vad = patience_vad(self.levers.patience, kwargs.pop("vad_analyzer", None))
            kwargs["vad_analyzer"] = vad
            kwargs["user_turn_strategies"] = UserTurnStrategies(
                stop=[patience_stop_strategy(self.levers.patience, vad, **self._fc_yield)]
            )
            return LLMUserAggregatorParams(**kwargs)
        if self.levers.draft_and_hold:
            if "user_turn_strategies" in kwargs:
                raise ValueError(
                    "draft-and-hold sets user_turn_strategies; pass your stop strategy as "
                    "stop_strategy= and it wraps it"
                )
            from pipecat_fast.prefill import DraftAndHoldUserTurnStopStrategy

            kwargs["user_turn_strategies"] = UserTurnStrategies(
                stop=[DraftAndHoldUserTurnStopStrategy(stop_strategy, **self._fc_yield)]
            )
        elif stop_strategy is not None:
            kwargs.setdefault("user_turn_strategies", UserTurnStrategies(stop=[stop_strategy]))
        return LLMUserAggregatorParams(**kwargs)

    def slots(self) -> dict[str, list[FrameProcessor]]:
        """Every slot's processors by name, in the order frames flow."""
        return {
            "after_stt": self.after_stt,
            "before_llm": self.before_llm,
            "between_llm_tts": self.between_llm_tts,
            "after_tts": self.after_tts,
            "before_output": self.before_output,
            "after_output": self.after_output,
        }

    # -- ring, answer, hang up -----------------------------------------------------------------

    def ring(self) -> None:
        """The phone rings: start the session warmup and dial the TTS socket (returns at once).

        Call it from the event loop that will run the pipeline (the webhook's). Idempotent;
        fails open: a lever that cannot start logs a warning and the call goes on without it.
        """
        if self._fc_rang:
            return
        self._fc_rang = True
        if self.warmup is not None:
            try:
                self.warmup.start()
            except Exception as e:  # fail open: the first turn runs cold
                logger.warning(f"call {self.call_id}: session warmup did not start: {e}")
        if self.levers.tts_pool:
            try:
                if self._fc_pool is None:
                    from pipecat_fast.ttspool import TTSWarmPool

                    self._fc_pool = TTSWarmPool()
                    self._fc_own_pool = True
                self.lease = self._fc_pool.prewarm(
                    self.tts,
                    call_id=self.call_id,
                    is_retry=self.is_retry,
                    sample_rate=self.audio_out_sample_rate,
                )
            except Exception as e:  # fail open: the service dials for itself
                logger.warning(f"call {self.call_id}: TTS pool did not take the call: {e}")

    async def hang_up(self) -> dict[str, Any]:
        """The call ended (or was never answered): stop what is in flight, close what is held.

        Returns:
            The call's report (idempotent: a second call returns the same): ``call_id``,
            ``levers``, ``ttfa`` (p50/p95), ``turns`` (``TurnRecord.to_dict()`` each),
            ``session`` (the meter's session accounting) and, per lever that ran,
            ``warmup``, ``tts_pool``, ``guard_warnings``, ``truncations``.
        """
        if self._fc_closed is not None:
            return self._fc_closed
        report: dict[str, Any] = {"call_id": self.call_id, "levers": self.levers.describe()}
        if self.warmup is not None:
            with contextlib.suppress(Exception):
                await self.warmup.cancel()
            report["warmup"] = self.warmup.report.to_dict()
        if self.lease is not None:
            try:
                await self.lease.close()
                report["tts_pool"] = self.lease.report()
            except Exception as e:  # never lose the rest of the report
                logger.warning(f"call {self.call_id}: closing the TTS pool lease failed: {e}")
        if self._fc_own_pool and self._fc_pool is not None:
            with contextlib.suppress(Exception):
                await self._fc_pool.aclose()
        self.ttfa.close()
        report["ttfa"] = self.ttfa.summary()
        report["turns"] = [t.to_dict() for t in self.ttfa.turns]
        report["session"] = dict(self.ttfa.session)
        if self.guard is not None:
            report["guard_warnings"] = [w.kind for w in self.guard.warnings]
        if self.truncator is not None:
            report["truncations"] = len(self.truncator.truncations)
        if self.preemptive is not None:
            report["preemptive"] = dataclasses.asdict(self.preemptive.stats)
        self._fc_closed = report
        return report


class CallBook:
    """Calls that rang but were not answered yet, by call id.

    The webhook that announces a call makes its :class:`FastCall` and :meth:`ring` s it; the
    media stream that arrives when it is answered :meth:`answer` s it by the same id. A call
    never answered (or announced twice) is hung up after ``max_ring_s``.

    Args:
        max_ring_s: How long a call may ring before it is given up (s).
    """

    def __init__(self, *, max_ring_s: float = 120.0):
        if not max_ring_s > 0:
            raise ValueError(f"max_ring_s must be > 0, got {max_ring_s!r}")
        self.max_ring_s = max_ring_s
        self._book_calls: dict[str, FastCall] = {}
        self._book_timers: dict[str, asyncio.TimerHandle] = {}
        self._book_tasks: set[asyncio.Task] = set()

    def __contains__(self, call_id: object) -> bool:
        return call_id in self._book_calls

    def __len__(self) -> int:
        return len(self._book_calls)

    def ring(self, call: FastCall) -> FastCall:
        """Keep ``call`` until it is answered, and start its ring-time work.

        A second webhook for a call already ringing (Twilio retries a slow webhook) keeps the
        first one and returns it.
        """
        held = self._book_calls.get(call.call_id)
        if held is not None:
            return held
        self._book_calls[call.call_id] = call
        call.ring()
        loop = asyncio.get_running_loop()
        self._book_timers[call.call_id] = loop.call_later(
            self.max_ring_s, self._give_up, call.call_id
        )
        return call

    def answer(self, call_id: str) -> FastCall | None:
        """The call was answered: hand its :class:`FastCall` over (None if it never rang)."""
        timer = self._book_timers.pop(call_id, None)
        if timer is not None:
            timer.cancel()
        return self._book_calls.pop(call_id, None)

    async def hang_up(self, call_id: str) -> dict[str, Any] | None:
        """The call ended before it was answered (busy, no answer, cancelled)."""
        call = self.answer(call_id)
        return await call.hang_up() if call is not None else None

    def _give_up(self, call_id: str) -> None:
        logger.info(f"call {call_id} rang for {self.max_ring_s:.0f} s unanswered: given up")
        task = asyncio.get_running_loop().create_task(self.hang_up(call_id))
        self._book_tasks.add(task)
        task.add_done_callback(self._book_tasks.discard)

    async def aclose(self) -> None:
        """Hang up every call still ringing (at shutdown)."""
        for call_id in list(self._book_calls):
            await self.hang_up(call_id)
        if self._book_tasks:
            await asyncio.gather(*self._book_tasks, return_exceptions=True)


def lever_classes(call: FastCall) -> Sequence[str]:
    """The class names of everything ``call`` adds (processors, observers, turn strategy)."""
    names = [type(p).__name__ for slot in call.slots().values() for p in slot]
    names += [type(o).__name__ for o in call.observers]
    if call.levers.draft_and_hold:
        names.append("DraftAndHoldUserTurnStopStrategy")
    return names
