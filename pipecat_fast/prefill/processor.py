"""``SpeculativePrefill``: warm the LLM provider's prefix cache while the caller is talking.

Place it between the user context aggregator and the LLM service, after a
:class:`~pipecat_fast.stabilizer.TwoUpdateStabilizer` placed between the STT and the
aggregator::

    transport.input(), stt, TwoUpdateStabilizer(), user_aggregator,
    SpeculativePrefill(llm, context=context), llm, tts, transport.output(), assistant_aggregator

It only reacts to the stabiliser's ``StableTranscriptFrame``s: without the stabiliser before the
user aggregator (which consumes transcripts) it can do nothing, and says so once, at the first
turn the caller spoke.

Every frame passes through unchanged: prefills run in their own task, and sizing a prefill
renders the context once per context state. Nothing speculative is spoken (a prefill asks for
one token and its reply is discarded) and nothing enters the conversation context. Failures are
logged (rate-limited) and backed off; the real request always runs as stock Pipecat sends it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    Frame,
    InterruptionFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    MetricsFrame,
    StartFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.metrics.metrics import LLMUsageMetricsData, TTFBMetricsData
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.llm_service import LLMService

from pipecat_fast._logging import RateLimitedLog
from pipecat_fast._pipecat import add_inline_frame_hooks, remove_inline_frame_hooks
from pipecat_fast.frames import StableTranscriptFrame, TTFAAnnotationFrame
from pipecat_fast.load import (
    CancelReason,
    CancelVerdict,
    EngineLoad,
    Kind,
    Verdict,
    YieldConfig,
    reuses_unfinished,
)
from pipecat_fast.prefill.backends import PrefillBackend, backend_for
from pipecat_fast.prefill.core import (
    CallerTurns,
    PrefillConfig,
    PrefillPlanner,
    ProviderSpeed,
    Skip,
    TurnAccount,
)
from pipecat_fast.providers import cache_facts
from pipecat_fast.tokens import count_tokens

_SPEEDS: dict[tuple[Any, ...], ProviderSpeed] = {}
_CALLER_TURNS = CallerTurns()

PREFIX_USER_TEXT = "..."
"""The user message of a speech-start prefix prefill (the caller's words are not known yet;
some providers refuse an empty message). What the cache keeps is the prompt before it."""

STABILISER_CHECK_WORDS = 3
"""A caller turn of this many words yields interim transcripts on any streaming STT, so a
stabiliser upstream would have sent stable words for it."""


def _provider_key(backend: PrefillBackend) -> tuple[Any, ...]:
    ident = getattr(backend, "identity", None)
    llm = getattr(backend, "llm", None)
    model = getattr(getattr(llm, "settings", None), "model", None)
    return (
        getattr(backend, "provider", None),
        getattr(ident, "base_url", None),
        model if isinstance(model, str) else None,
        type(backend).__name__,
    )


def provider_speed(backend: PrefillBackend) -> ProviderSpeed:
    """The measured speed shared by every session on the same provider, URL and model.

    A provider's prefill rate is a property of the provider, not of one call: sessions in one
    process pool what they measure, so a new call's first (cold) prefill is judged with what
    earlier calls saw.
    """
    return _SPEEDS.setdefault(_provider_key(backend), ProviderSpeed())


def caller_turns() -> CallerTurns:
    """The callers' turn lengths pooled by every session of this process.

    A new session's first (cold) prefill is judged against how long the callers before it
    spoke, not a fixed guess.
    """
    return _CALLER_TURNS


def measured_load(backend: PrefillBackend) -> EngineLoad:
    """The probe-less :class:`~pipecat_fast.load.EngineLoad` shared per provider, URL and model.

    It knows only the queueing measured on the sessions' own requests; pass
    ``load=EngineLoad.shared(engine_url)`` to read the engine's own load endpoint as well.
    """
    return EngineLoad.shared(None, key=_provider_key(backend))


class SpeculativePrefill(FrameProcessor):
    """Sends prefill-only requests carrying the caller's stable words while they speak.

    Args:
        llm: The pipeline's LLM service; its adapter, settings and client shape the requests
            (an OpenAI-compatible service or ``AnthropicLLMService``, unless ``backend`` is
            given). Its usage and time-to-first-token metrics tell the prefill how fast the
            provider is.
        context: The ``LLMContext`` the user aggregator writes (the same object).
        backend: How to send prefills; defaults to :func:`backend_for` ``(llm)``.
        config: The bet's rules (see :class:`~pipecat_fast.prefill.core.PrefillConfig`).
            ``min_prompt_tokens`` / ``block_tokens`` left ``None`` come from the provider.
        provider: The provider's registry name when the service and model do not identify it
            (``"vllm"``, ``"sglang"``, ``"llama.cpp"``, ``"openai"``...).
        timeout_s: Give up on a prefill after this long (s); counts as a failure.
        speed: The provider's measured speed; by default shared by every session on the same
            provider, base URL and model in this process.
        load: The engine's load as this process sees it (:class:`~pipecat_fast.load.EngineLoad`,
            one per engine: ``EngineLoad.shared(url)`` polls the engine's ``/metrics`` or
            ``/slots``); by default the queueing measured on the sessions' own requests,
            shared per provider, base URL and model.
        yield_config: When prefills back off under load
            (:class:`~pipecat_fast.load.YieldConfig`; ``YieldConfig(enabled=False)`` never
            yields).
        warmup: The session's :class:`~pipecat_fast.warmup.SessionWarmup`, if it has one:
            the speech-start prefix prefill does not go while the warmup still runs (it
            computes the same prefix) or once it committed the prefix to the cache.
        **kwargs: Passed to ``FrameProcessor``.

    Attributes:
        turns: Per-turn accounts of closed turns (requests, tokens, skip reasons), in order.

    Raises:
        TypeError: If ``context`` is not an ``LLMContext`` or ``llm`` is not a supported LLM
            service.
        ValueError: If neither ``llm`` nor ``backend`` is given, or ``provider`` is unknown.
    """

    def __init__(
        self,
        llm: LLMService | None = None,
        *,
        context: LLMContext,
        backend: PrefillBackend | None = None,
        config: PrefillConfig | None = None,
        provider: str | None = None,
        timeout_s: float = 10.0,
        speed: ProviderSpeed | None = None,
        load: EngineLoad | None = None,
        yield_config: YieldConfig | None = None,
        warmup: Any = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if load is not None and not isinstance(load, EngineLoad):
            raise TypeError(
                f"SpeculativePrefill(load=...) takes an EngineLoad (EngineLoad.shared(url)), "
                f"got {type(load).__name__}"
            )
        if yield_config is not None and not isinstance(yield_config, YieldConfig):
            raise TypeError(
                f"SpeculativePrefill(yield_config=...) takes a YieldConfig, "
                f"got {type(yield_config).__name__}"
            )
        if not isinstance(context, LLMContext):
            raise TypeError(
                f"SpeculativePrefill(context=...) must be the LLMContext the user aggregator "
                f"writes (LLMContextAggregatorPair(context)), got {type(context).__name__}; "
                "wrap a message list as LLMContext(messages=[...])"
            )
        if llm is not None and not isinstance(llm, LLMService):
            raise TypeError(
                f"SpeculativePrefill's first argument must be the pipeline's LLM service, "
                f"got {type(llm).__name__}"
            )
        if backend is None:
            if llm is None:
                raise ValueError("SpeculativePrefill needs an llm service or a backend")
            backend = backend_for(llm, provider=provider)
        config = config or PrefillConfig()
        resolved = {}
        if config.min_prompt_tokens is None:
            resolved["min_prompt_tokens"] = getattr(backend, "min_prompt_tokens", 0)
        if config.block_tokens is None:
            resolved["block_tokens"] = getattr(backend, "block_tokens", 1)
        config = dataclasses.replace(config, **resolved) if resolved else config
        self._prefill_llm = llm
        self._prefill_backend = backend
        self._prefill_context = context
        self._prefill_planner = PrefillPlanner(
            config, speed or provider_speed(backend), caller_turns()
        )
        self._prefill_timeout_s = timeout_s
        self._prefill_task: asyncio.Task | None = None
        self._prefill_turn: int | None = None
        self._prefill_static: tuple[Any, ...] | None = None
        self._prefill_static_tokens = 0
        self._prefill_log = RateLimitedLog(str(self))
        self._prefill_warned: set[str] = set()
        self._prefill_saw_stable = False
        self._prefill_user_turn_ended = False
        self._prefill_ttfb: float | None = None
        self._prefill_sent_real_at = 0.0
        self._prefill_hooked = False
        self._prefill_startup_task: asyncio.Task | None = None
        self._prefill_load = load if load is not None else measured_load(backend)
        self._prefill_yield = yield_config or YieldConfig()
        self._prefill_load_held = False
        self._prefill_handle: int | None = None
        self._prefill_cancel_reason: CancelReason | None = None
        self._prefill_warmup = warmup
        self._prefill_prefix_seen: tuple[Any, list[str]] | None = None
        self.turns: list[TurnAccount] = []
        self._prefill_explain_provider()
        if llm is not None:
            try:
                add_inline_frame_hooks(llm, before_push=self._prefill_on_llm_push)
                self._prefill_hooked = True
            except RuntimeError as e:  # fail open: no real-request timings, prefills still go
                logger.debug(f"{self}: cannot watch the LLM's metrics ({e})")

    @property
    def in_flight(self) -> bool:
        """Whether a prefill request is outstanding."""
        return self._prefill_task is not None

    @property
    def load(self) -> EngineLoad:
        """The engine load this prefill yields to."""
        return self._prefill_load

    @property
    def config(self) -> PrefillConfig:
        """The rules in force (the provider's minimum and block filled in)."""
        return self._prefill_planner.config

    def _prefill_explain_provider(self) -> None:
        backend = self._prefill_backend
        if getattr(backend, "provider", "unknown") is None:
            ident = getattr(backend, "identity", None)
            logger.info(
                f"{self}: the LLM service's base URL ({getattr(ident, 'base_url', None)}) and "
                f"model ({getattr(ident, 'model', None)}) name no provider the registry knows, "
                "so no minimum cacheable prefix is assumed (a self-hosted engine). If it has "
                "one, pass SpeculativePrefill(..., provider='vllm' / 'openai' / ...) or "
                "config=PrefillConfig(min_prompt_tokens=N)"
            )

    async def process_frame(self, frame: Frame, direction: FrameDirection):
        """Watch the caller's turn; never holds a frame back."""
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        planner = self._prefill_planner
        now = time.monotonic()
        if isinstance(frame, StartFrame):
            if not self._prefill_load_held:
                self._prefill_load_held = True
                await self._prefill_load.acquire()
            self._prefill_startup_task = self.create_task(self._check_startup(), "prefill-check")
        elif isinstance(frame, StableTranscriptFrame):
            self._prefill_saw_stable = True
            await self._on_stable(frame)
        elif isinstance(frame, VADUserStoppedSpeakingFrame):
            planner.caller_silent(now, frame.stop_secs)
        elif isinstance(frame, VADUserStartedSpeakingFrame):
            planner.caller_speaking(now)
            if self._prefill_user_turn_ended:  # the last turn was answered by a held draft
                self._prefill_user_turn_ended = False
                self._check_stabiliser(self._prefill_context)
            await self._on_speech_start(now)
        elif isinstance(frame, InterruptionFrame):
            # A barge-in cancels the LLM's reply in flight: the prefix may go now.
            if planner.real_pending:
                planner.real_request_ended()
                if planner.caller_is_speaking:
                    await self._on_speech_start(now)
        elif isinstance(frame, UserStoppedSpeakingFrame) and direction == FrameDirection.DOWNSTREAM:
            # The turn is confirmed: the real request (or a held draft) answers it now.
            planner.stop_turn()
            self._prefill_user_turn_ended = True
            await self._annotate(planner.turn)
        elif isinstance(frame, LLMContextFrame) and direction == FrameDirection.DOWNSTREAM:
            self._prefill_sent_real_at = now
            self._check_prefix(frame.context)
            self._prefill_prefix_seen = None
            planner.request_dispatched(now, self._prefill_load.requests_now(self._prefill_yield))
            await self._prefill_dispatched()
            if self._prefill_user_turn_ended:
                self._prefill_user_turn_ended = False
                self._check_stabiliser(frame.context)
        elif isinstance(frame, (EndFrame, CancelFrame)):
            await self._cancel_prefill()

    async def cleanup(self):
        """Cancel a prefill still in flight (no leaked task); close the last turn's account."""
        await super().cleanup()
        await self._cancel_prefill()
        startup, self._prefill_startup_task = self._prefill_startup_task, None
        if startup is not None and not startup.done():
            await self.cancel_task(startup)
        if self._prefill_hooked and self._prefill_llm is not None:
            remove_inline_frame_hooks(self._prefill_llm, before_push=self._prefill_on_llm_push)
            self._prefill_hooked = False
        planner = self._prefill_planner
        planner.session_ended()  # a prefix prefill no real request followed is counted
        if self._prefill_turn is not None or planner.turn.prefills:
            self.turns.append(planner.end_turn())
            self._prefill_turn = None
        if self._prefill_user_turn_ended:  # the call ended on a turn a held draft answered
            self._prefill_user_turn_ended = False
            self._check_stabiliser(self._prefill_context)
        if self._prefill_load_held:
            self._prefill_load_held = False
            await self._prefill_load.release()
        self._prefill_log.flush()

    # -- warnings (each at most once per session) ----------------------------------------

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._prefill_warned:
            self._prefill_warned.add(key)
            logger.warning(f"{self}: {message}")

    async def _check_startup(self) -> None:
        """At start-up: say at once if the prompt is too small for any prefill to be cached."""
        try:
            tokens = await self._estimate_tokens("")
        except Exception as e:  # fail open: the first stable update tries again
            logger.debug(f"{self}: could not size the prompt at start-up ({e})")
            return
        finally:
            self._prefill_startup_task = None
        if self.config.cacheable(tokens) == 0:
            self._explain_skip(Skip.BELOW_MINIMUM, tokens)

    def _check_stabiliser(self, context: LLMContext) -> None:
        if self._prefill_saw_stable or "no-stabiliser" in self._prefill_warned:
            return
        messages = context.get_messages() if isinstance(context, LLMContext) else []
        # The caller's last turn: the last user message, also when the turn's reply is already
        # in the context (a held draft answered it; the check runs when the caller speaks again).
        last = next(
            (m for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"),
            None,
        )
        text = last.get("content") if last is not None else ""
        words = len(text.split()) if isinstance(text, str) else 0
        if words >= STABILISER_CHECK_WORDS:
            self._warn_once(
                "no-stabiliser",
                f"the caller spoke a {words}-word turn and no StableTranscriptFrame reached "
                "this processor, so it sent no prefill of the caller's words (only the cold prefix "
                "as they started speaking). Put TwoUpdateStabilizer() between the "
                "STT and the user aggregator, which consumes transcripts: [transport.input(), "
                "stt, TwoUpdateStabilizer(), pair.user(), SpeculativePrefill(llm, "
                "context=context), llm, ...]",
            )

    def _explain_skip(self, reason: Skip, tokens: int | None) -> None:
        config = self.config
        provider = getattr(self._prefill_backend, "provider", None) or "the provider"
        if reason is Skip.BELOW_MINIMUM:
            floor = max(config.min_prompt_tokens or 0, config.block_tokens or 1)
            self._warn_once(
                "below-minimum",
                f"the prompt the LLM is sent is ~{tokens} tokens, below {provider}'s minimum "
                f"cacheable prefix ({floor} tokens), so no prefill is sent until it grows past "
                "that: a shorter prompt cannot be cached. If your provider caches shorter "
                "prompts, set config=PrefillConfig(min_prompt_tokens=N).",
            )
        elif reason is Skip.NOT_CACHING:
            self._warn_once(
                "not-caching",
                f"{provider} cached nothing of {config.uncached_alarm} prefills in a row that "
                f"repeated a prefix it had just been sent (~{tokens} tokens), so prefills of "
                "this size stop: its prompt cache is not keeping them (a minimum cacheable "
                "prefix above that, or caching off). Set config=PrefillConfig("
                "min_prompt_tokens=N) or provider=... to say what the provider caches.",
            )
        elif reason is Skip.CANNOT_FINISH and "cannot-finish" not in self._prefill_warned:
            self._prefill_warned.add("cannot-finish")
            logger.info(
                f"{self}: skipping a prefill of ~{tokens} tokens that {provider} cannot finish "
                "before the caller is likely done (measured speed), so the real request would "
                "compute it again"
            )

    # -- the bet -------------------------------------------------------------------------

    async def _on_stable(self, frame: StableTranscriptFrame) -> None:
        planner = self._prefill_planner
        if frame.turn != self._prefill_turn:
            if self._prefill_turn is not None:
                self.turns.append(planner.end_turn())
            self._prefill_turn = frame.turn
        if not frame.text.strip() or frame.word_count <= 0:
            return
        self._check_prefix(self._prefill_context)
        now = time.monotonic()
        if planner.blocked(frame.word_count, now) is not None:
            planner.decide(frame.word_count, None, now)  # counts it
            return
        try:
            tokens = await self._estimate_tokens(frame.text)
        except Exception as e:  # fail open: no prefill this time, the stock path runs
            self._prefill_log.warning(
                f"could not size the prefill ({type(e).__name__}: {e})", key="size-failed"
            )
            return
        load = self._prefill_load
        reason = planner.decide(
            frame.word_count,
            tokens,
            now,
            engine_busy=self._engine_busy,
            load_now=load.requests_now(self._prefill_yield),
            queue_s=load.queue_now(),
            cancels_unfinished=self._cancels_unfinished(),
        )
        if planner.not_caching_raised:
            planner.not_caching_raised = False
            self._explain_skip(Skip.NOT_CACHING, tokens)
        if reason is not None:
            self._explain_skip(reason, tokens)
            return
        account = planner.turn
        self._prefill_task = self.create_task(
            self._run_prefill(frame.text, account), f"prefill-turn{frame.turn}"
        )

    async def _on_speech_start(self, now: float) -> None:
        """The caller started speaking: the turn's cold prefix may go now, before any word."""
        planner = self._prefill_planner
        if not self.config.prefix_on_speech or self._prefill_task is not None:
            return
        try:
            tokens = await self._estimate_tokens(PREFIX_USER_TEXT)
        except Exception as e:  # fail open: the first stable word's prefill carries it
            self._prefill_log.warning(
                f"could not size the prefix ({type(e).__name__}: {e})", key="size-failed"
            )
            return
        warmup = self._prefill_warmup
        warming = bool(getattr(warmup, "running", False))
        if getattr(getattr(warmup, "report", None), "prefix_committed", False):
            planner.prefix_cached(tokens)
        if planner.turn_over:
            # The last turn was confirmed and its account is closed only at the next stable
            # word: a cold prefix here opens the next turn (a context reset, or a long tool
            # result), so close it now; a warm one (every ordinary turn) changes nothing.
            if planner.prefix_blocked(tokens, now, warming=warming, next_turn=True) is not None:
                return
            if self._prefill_turn is not None:
                self.turns.append(planner.end_turn())
            else:
                planner.end_turn()
            self._prefill_turn = None
        load = self._prefill_load
        reason = planner.decide_prefix(
            tokens,
            now,
            engine_busy=self._engine_busy,
            load_now=load.requests_now(self._prefill_yield),
            queue_s=load.queue_now(),
            cancels_unfinished=self._cancels_unfinished(),
            warming=warming,
        )
        if reason is not None:
            if reason is Skip.CANNOT_FINISH:
                self._explain_skip(reason, tokens)
            return
        context = self._prefill_context
        self._prefill_prefix_seen = (id(context.tools), [repr(m) for m in context.get_messages()])
        self._prefill_task = self.create_task(
            self._run_prefill(PREFIX_USER_TEXT, planner.turn), "prefill-prefix"
        )

    def _check_prefix(self, context: Any) -> None:
        """Whether the context still starts with what the speech-start prefix carried."""
        seen = self._prefill_prefix_seen
        if seen is None or not isinstance(context, LLMContext):
            return
        tools, messages = seen
        now = [repr(m) for m in context.get_messages()[: len(messages)]]
        if tools != id(context.tools) or now != messages:
            self._prefill_prefix_seen = None
            self._prefill_planner.prefix_changed()

    def _engine_busy(
        self, work_tokens: int, idle_s: float | None = None, time_left_s: float | None = None
    ) -> Verdict:
        """The engine-load verdict on a prefill (asked last): its reason goes in the account."""
        return self._prefill_load.verdict(
            Kind.PREFILL,
            self._prefill_yield,
            work_tokens=work_tokens,
            idle_s=idle_s,
            time_left_s=time_left_s,
        )

    def _cancels_unfinished(self) -> bool:
        """Whether a prefill still computing at the real request will be cancelled then."""
        config = self._prefill_yield
        if not (config.enabled and config.cancel_on_dispatch):
            return False
        measured = self._prefill_planner.speed.reuses_unfinished
        source = self._prefill_load.engine_source
        return reuses_unfinished(measured, self._reuse_fact(), source) is False

    async def _estimate_tokens(self, user_text: str) -> int:
        """Prompt size of a prefill: the context's part is rendered once per context state."""
        context = self._prefill_context
        key = (len(context.get_messages()), id(context.tools), id(context.tool_choice))
        if self._prefill_static != key:
            base = await self._prefill_backend.estimate_tokens(context, "")
            self._prefill_static = key
            self._prefill_static_tokens = base
        return self._prefill_static_tokens + count_tokens(user_text)

    def _reuse_fact(self) -> bool | None:
        """The configured, else the registry's, word on reading an unfinished prefill."""
        if self._prefill_yield.reuses_unfinished is not None:
            return self._prefill_yield.reuses_unfinished
        provider = getattr(self._prefill_backend, "provider", None)
        if not provider:
            return None
        try:
            return cache_facts(provider).reuses_unfinished
        except ValueError:
            return None

    async def _prefill_dispatched(self) -> None:
        """The real request left: cancel the prefill if the engine will not read it unfinished."""
        task = self._prefill_task
        if task is None or task.done():
            return
        verdict = self._prefill_load.dispatched(
            self._prefill_handle, self._prefill_planner.speed.reuses_unfinished, self._reuse_fact()
        )
        if verdict:
            self._prefill_cancel_reason = verdict.reason
            await self._cancel_prefill()
            if self._prefill_planner.turn_over:  # the turn's account was already reported
                await self._annotate(self._prefill_planner.turn)

    def _prefill_on_cancel(self, verdict: CancelVerdict) -> None:
        """From the load probe: another caller's request contends with the prefill in flight."""
        task = self._prefill_task
        if task is not None and not task.done() and self._prefill_cancel_reason is None:
            self._prefill_cancel_reason = verdict.reason
            task.cancel()

    async def _run_prefill(self, text: str, account: TurnAccount) -> None:
        planner = self._prefill_planner
        load = self._prefill_load
        handle = self._prefill_handle = load.sent(
            Kind.PREFILL,
            work_tokens=planner.in_flight_work_tokens,
            on_cancel=self._prefill_on_cancel,
            config=self._prefill_yield,
        )
        self._prefill_cancel_reason = None
        sent_at = time.monotonic()
        try:
            result = await asyncio.wait_for(
                self._prefill_backend.prefill(self._prefill_context, text), self._prefill_timeout_s
            )
        except asyncio.CancelledError:
            # The session ended with it in flight, or the engine-load rules cancelled it
            # (counted by reason, no backoff).
            reason = self._prefill_cancel_reason or CancelReason.ENDED
            self._prefill_cancel_reason = None
            planner.cancelled(str(reason))
            load.done(handle)
            self._prefill_handle = None
            self._prefill_task = None
            raise  # the engine-load cancels are logged (rate-limited) by the EngineLoad
        except Exception as e:  # fail open: the stock request is unaffected
            planner.finished(False, time.monotonic())
            self._prefill_log.warning(
                f"speculative prefill failed ({type(e).__name__}: {e}); backing off",
                key="prefill-failed",
            )
        else:
            now = time.monotonic()
            after = load.others_now(sent_at, speculative=True, config=self._prefill_yield)
            planner.finished(True, now, result.prompt_tokens, result.cached_tokens, after)
            computed = max(0, result.prompt_tokens - result.cached_tokens)
            load.measured(computed, now - sent_at)
        finally:
            load.done(handle)
            self._prefill_handle = None
            self._prefill_task = None
        if planner.turn_over or account is not planner.turn:
            # The turn was already confirmed: bring its accounting up to date.
            await self._annotate(account)

    def _prefill_on_llm_push(self, service: Any, frame: Frame) -> None:
        """Inline in the LLM's task: its TTFB and usage metrics, for the provider's speed."""
        if isinstance(frame, LLMFullResponseEndFrame):
            self._prefill_planner.real_request_ended()
            return
        if not isinstance(frame, MetricsFrame):
            return
        for item in frame.data:
            if isinstance(item, TTFBMetricsData):
                self._prefill_ttfb = item.value
            elif isinstance(item, LLMUsageMetricsData):
                usage = item.value
                read = usage.cache_read_input_tokens  # None: the provider did not say
                prompt = usage.prompt_tokens
                provider = getattr(self._prefill_backend, "provider", None)
                if provider and cache_facts(provider).net_of_cache:
                    prompt += (read or 0) + (usage.cache_creation_input_tokens or 0)
                ttfb = self._prefill_ttfb
                after = self._prefill_load.others_now(
                    self._prefill_sent_real_at, speculative=False, config=self._prefill_yield
                )
                clean = self._prefill_planner.real_request(prompt, read, ttfb, after)
                if clean and ttfb is not None and read is not None:
                    self._prefill_load.measured(max(0, prompt - read), ttfb)
                self._prefill_ttfb = None

    async def _annotate(self, account: TurnAccount) -> None:
        await self.push_frame(TTFAAnnotationFrame(fields=account.to_dict()))

    async def _cancel_prefill(self) -> None:
        task, self._prefill_task = self._prefill_task, None
        if task is not None and not task.done():
            await self.cancel_task(task)
