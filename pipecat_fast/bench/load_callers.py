"""Background callers for the load bench: other callers' real-shaped requests, no audio.

On a 2-core machine the callers' own VAD, Smart Turn and audio pacing compete with the engine
they share, so the load bench runs a few callers through full Pipecat pipelines and the rest
as :class:`BackgroundCaller`: the same call scripts, the same requests, sent when the levers
would send them, but with no audio, VAD model or TTS:

- the **requests** are rendered by a real ``OpenAILLMService`` through the prefill backend's
  renderer (the service's own adapter and settings: system prompt, tools, history, ``extra``),
  so the engine sees the bytes a pipeline would send; prefills go through the backend's own
  :meth:`~pipecat_fast.prefill.OpenAIPrefill.prefill`;
- the **decisions** are the levers' own cores: ``PartialStabilizer`` on the STT emulator's
  interim schedule (``interim_events``), ``PrefillPlanner`` for prefills, ``DraftHold`` for
  drafts, and the shared :class:`~pipecat_fast.load.EngineLoad` for yielding;
- the **timeline** is the stock pipeline's, measured on the bench (``docs/bench.md``): the STT
  final 125 ms after the last word (Deepgram emulator: 105 ms + RTT), the VAD stop 200 ms after
  it, the turn confirmed 350 ms after it (``PrefillConfig.dispatch_s``); the caller waits for
  the reply to stream and "play" (its text at the TTS emulator's speaking rate,
  :func:`~pipecat_fast.testing.synth.plan_speech`), then 0.6 s, then speaks again.

Each turn's latency is the first token after the caller's end of speech (``ttft_ms`` from the
confirmation, ``reply_ms`` from the end of speech), what the engine adds to a turn.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from loguru import logger
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.utils.types import NOT_GIVEN

from pipecat_fast._pipecat import llm_client
from pipecat_fast.bench.calls import tools_schema
from pipecat_fast.bench.pipeline import BenchCall, Endpoints
from pipecat_fast.load import (
    CancelReason,
    CancelVerdict,
    EngineLoad,
    Kind,
    YieldConfig,
    reuses_unfinished,
)
from pipecat_fast.prefill import DraftHold, OpenAIPrefill, PrefillConfig, PrefillPlanner
from pipecat_fast.prefill.draft_core import Settled, StartDraft, Withdraw
from pipecat_fast.prefill.processor import PREFIX_USER_TEXT, caller_turns, provider_speed
from pipecat_fast.providers import cache_facts
from pipecat_fast.stabilizer.core import PartialStabilizer
from pipecat_fast.testing.deepgram_server import interim_events
from pipecat_fast.testing.synth import plan_speech
from pipecat_fast.tokens import count_tokens

STT_FINAL_S = 0.125
VAD_STOP_S = 0.2
CONFIRM_S = 0.35
TTS_FIRST_AUDIO_S = 0.06
REPLY_GAP_S = 0.6


@dataclass(frozen=True)
class Behaviour:
    """What a configuration does, for a background caller.

    Parameters:
        prefill: Speculative prefill while the caller talks.
        draft: Draft-and-hold at end of speech.
        yields: Speculation yields to the engine's load; ``False`` never yields.
        reuses_unfinished: Whether the engine lets a request read an unfinished prefill, as
            the levers are told (``None``: they learn it).
    """

    prefill: bool = False
    draft: bool = False
    yields: bool = True
    reuses_unfinished: bool | None = None
    """What the levers are told about the engine (``YieldConfig.reuses_unfinished``)."""


@dataclass
class BackgroundTurn:
    """One answered turn of a background caller (ms)."""

    turn: int
    ttft_ms: float
    reply_ms: float
    prefills: int = 0
    prefills_yielded: int = 0
    drafts: int = 0
    drafts_yielded: int = 0
    drafts_discarded: int = 0
    prefills_cancelled: dict[str, int] = field(default_factory=dict)
    """Prefills cancelled in flight, by reason (``dispatched``, ``contended``)."""
    accounting: dict[str, Any] = field(default_factory=dict)
    """The levers' own per-turn accounting, as a pipeline's TTFA record carries it
    (``TurnAccount.to_dict()`` and ``Settled.fields()``: every decision with its reason)."""


@dataclass
class BackgroundResult:
    """What one background caller did."""

    caller: str
    call: str
    turns: list[BackgroundTurn] = field(default_factory=list)
    unanswered: int = 0
    errors: list[str] = field(default_factory=list)
    prefills_cancelled: int = 0


class BackgroundCaller:
    """Plays one call script against the engine as the configuration's levers would.

    Args:
        call: The scripted call (its system prompt as this caller's).
        endpoints: Where the LLM listens and with which settings.
        behaviour: Which levers, and whether they yield.
        load: The engine's shared load (held for the call); ``None`` never yields.
        label: The caller's name in reports and the ``X-PF-Caller`` header.
        interval_s: The STT emulator's interim interval (s).
        patience_s: Longest wait for a reply before the caller gives up on the turn (s).
    """

    def __init__(
        self,
        call: BenchCall,
        endpoints: Endpoints,
        behaviour: Behaviour,
        *,
        load: EngineLoad | None,
        label: str,
        interval_s: float = 0.25,
        patience_s: float = 30.0,
    ):
        self.call = call
        self.behaviour = behaviour
        self.load = load
        self.label = label
        self.interval_s = interval_s
        self.patience_s = patience_s
        self.llm = OpenAILLMService(
            api_key=endpoints.llm_api_key,
            base_url=endpoints.llm_base_url,
            settings=OpenAILLMService.Settings(
                model=endpoints.llm_model,
                system_instruction=call.system_prompt,
                **endpoints.llm_settings,
            ),
        )
        self.backend = OpenAIPrefill(self.llm)
        self.context = LLMContext(tools=tools_schema(call.tools) if call.tools else NOT_GIVEN)
        self.yield_config = YieldConfig(
            enabled=behaviour.yields, reuses_unfinished=behaviour.reuses_unfinished
        )
        config = PrefillConfig(min_prompt_tokens=self.backend.min_prompt_tokens)
        # The speed (and whether the engine reads an unfinished prefill) pooled with every
        # session on this provider, URL and model in the process, and the callers' turn
        # lengths pooled with every session, as the pipelines' prefills do.
        self.planner = PrefillPlanner(config, provider_speed(self.backend), caller_turns())
        self._cancel_reason: CancelReason | None = None
        self.result = BackgroundResult(caller=label, call=call.id)
        self._static: tuple[int, int] | None = None
        self._prefill_task: asyncio.Task | None = None
        self._prefill_handle: int | None = None
        self._draft_task: asyncio.Task | None = None
        self._draft_handle: int | None = None

    # -- the call ---------------------------------------------------------------------------

    async def run(self) -> BackgroundResult:
        """Play every utterance; a failed turn is recorded and the call goes on."""
        if self.load is not None:
            await self.load.acquire()
        try:
            for index in range(len(self.call.utterances)):
                try:
                    await self._turn(index)
                except Exception as e:  # one broken turn must not end the bench
                    self.result.unanswered += 1
                    self.result.errors.append(f"turn {index}: {type(e).__name__}: {e}")
                    logger.debug(f"{self.label}: turn {index} failed: {e!r}")
        finally:
            await self._cancel(self._prefill_task)
            await self._cancel(self._draft_task)
            if self.load is not None:
                await self.load.release()
            client = llm_client(self.llm)
            if client is not None:
                await client.close()
        return self.result

    async def _cancel(self, task: asyncio.Task | None) -> None:
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

    async def _turn(self, index: int) -> None:
        call = self.call
        start = time.monotonic()
        audio_s = len(call.utterances[index]) / 2 / call.sample_rate
        script = call.stt_script[index]
        # The script's word times count from the speech onset; the WAV's speech end places it.
        end_s = call.speech_end_ms[index] / 1000.0 if call.speech_end_ms else audio_s
        onset_s = max(0.0, end_s - script.duration_s)
        events: list[tuple[float, str, Any]] = [(onset_s, "speaking", None)]
        for t, text in interim_events(script, self.interval_s):
            events.append((onset_s + t, "interim", text))
        pauses = call.pauses_ms[index] if index < len(call.pauses_ms) else ()
        for a, b in pauses:
            if (b - a) / 1000.0 > VAD_STOP_S:
                events.append((a / 1000.0 + VAD_STOP_S, "silent", None))
                events.append((b / 1000.0, "speaking", None))
        events += [
            (end_s + STT_FINAL_S, "final", script.text),
            (end_s + VAD_STOP_S, "silent", None),
            (end_s + CONFIRM_S, "confirm", None),
        ]
        events.sort(key=lambda e: e[0])
        stab = PartialStabilizer()
        draft = DraftHold(engine_busy=self._busy(Kind.DRAFT)) if self.behaviour.draft else None
        answer: asyncio.Task | None = None
        confirmed_at = speech_end = start + end_s
        settled: Settled | None = None
        for at, kind, payload in events:
            delay = start + at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            now = time.monotonic()
            decisions: list[Any] = []
            if kind == "speaking":
                self.planner.caller_speaking(now)
                if self.behaviour.prefill and self._prefill_idle():
                    await self._maybe_prefix(now)
                if draft is not None:
                    decisions = draft.caller_speaking()
            elif kind == "silent":
                self.planner.caller_silent(now, VAD_STOP_S)
                if draft is not None:
                    decisions = draft.caller_silent()
            elif kind == "interim":
                update = stab.feed(payload, at=now)
                if self.behaviour.prefill and update.word_count and update.text:
                    await self._maybe_prefill(update.text, update.word_count, now)
                if draft is not None:
                    draft.stable_words(update.text)
            elif kind == "final":
                stab.feed(payload, final=True, at=now)
                if draft is not None:
                    decisions = draft.final_transcript(payload)
            elif kind == "confirm":
                confirmed_at = now
                self.planner.stop_turn()
                self.planner.request_dispatched(now, self._load_now())
                await self._dispatched()
                if draft is not None:
                    decisions = draft.inner_confirmed()
            for decision in decisions:
                if isinstance(decision, StartDraft):
                    # The draft is the turn's request sent early (the pipeline's prefill sees
                    # its context frame as the request leaving).
                    self.planner.request_dispatched(now, self._load_now())
                    await self._dispatched()
                    self._start_draft(decision.text)
                elif isinstance(decision, Withdraw):
                    await self._withdraw()
                elif isinstance(decision, Settled):
                    settled = decision
            if kind == "confirm":
                if settled is not None and settled.outcome == "reused" and self._draft_task:
                    answer, self._draft_task = self._draft_task, None
                    self._draft_done()
                else:
                    await self._withdraw()
                    answer = asyncio.create_task(self._stream(script.text))
        account = self.planner.end_turn()
        if draft is not None and settled is None:
            for decision in draft.turn_stopped():
                if isinstance(decision, Settled):
                    settled = decision
        assert answer is not None
        try:
            first, text, usage = await asyncio.wait_for(answer, self.patience_s)
        except TimeoutError:
            self.planner.real_request_ended()
            self.result.unanswered += 1
            self.result.errors.append(f"turn {index}: no reply within {self.patience_s:.0f} s")
            return
        if usage is not None:
            prompt, cached = usage
            ttft = max(0.0, first - confirmed_at)
            after = (
                self.load.others_now(confirmed_at, speculative=False, config=self.yield_config)
                if self.load is not None
                else None
            )
            if self.planner.real_request(prompt, cached, ttft, after) and self.load is not None:
                self.load.measured(max(0, prompt - cached), ttft)
        else:
            self.planner.real_request_ended()
        self.context.add_message({"role": "user", "content": script.text})
        self.context.add_message({"role": "assistant", "content": text})
        self.result.turns.append(
            BackgroundTurn(
                turn=index,
                ttft_ms=max(0.0, first - confirmed_at) * 1000.0,
                reply_ms=max(0.0, first - speech_end) * 1000.0,
                prefills=account.prefills,
                prefills_yielded=sum(account.yielded.values()),
                drafts=settled.drafts if settled else 0,
                drafts_yielded=settled.drafts_yielded if settled else 0,
                drafts_discarded=settled.drafts_discarded if settled else 0,
                prefills_cancelled=dict(account.cancelled),
                accounting={
                    **(account.to_dict() if self.behaviour.prefill else {}),
                    **(settled.fields() if settled else {}),
                },
            )
        )
        # The caller hears the reply, then speaks again after a short gap.
        _, audio = plan_speech(text)
        wait = first + TTS_FIRST_AUDIO_S + audio + REPLY_GAP_S - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)

    # -- the levers' requests ---------------------------------------------------------------

    def _load_now(self) -> int | None:
        """Other requests on the engine now, as the prefill tags its timings with."""
        return self.load.requests_now(self.yield_config) if self.load is not None else None

    def _prefill_load_args(self) -> dict[str, Any]:
        """What the planner's prefill decisions read of the engine's load, at this moment."""
        return {
            "engine_busy": self._busy(Kind.PREFILL),
            "load_now": self._load_now(),
            "queue_s": self.load.queue_now() if self.load is not None else None,
            "cancels_unfinished": self._cancels_unfinished(),
        }

    def _busy(self, kind: Kind):
        if self.load is None:
            return None

        def engine_busy(
            work_tokens: int | None = None,
            idle_s: float | None = None,
            time_left_s: float | None = None,
        ):
            verdict = self.load.verdict(
                kind,
                self.yield_config,
                work_tokens=work_tokens,
                idle_s=idle_s,
                time_left_s=time_left_s,
            )
            if kind is Kind.PREFILL:
                return verdict  # the planner keeps its reason and detail
            return None if verdict.allow else str(verdict.reason)

        return engine_busy

    async def _maybe_prefill(self, text: str, words: int, now: float) -> None:
        planner = self.planner
        if planner.blocked(words, now) is not None:
            planner.decide(words, None, now)
            return
        tokens = await self._estimate(text)
        decision = planner.decide(words, tokens, now, **self._prefill_load_args())
        if decision is None:
            self._send_prefill(text)

    def _prefill_idle(self) -> bool:
        return self._prefill_task is None or self._prefill_task.done()

    async def _maybe_prefix(self, now: float) -> None:
        """As the pipeline's prefill at the VAD's speech start: the turn's cold prefix."""
        tokens = await self._estimate(PREFIX_USER_TEXT)
        decision = self.planner.decide_prefix(tokens, now, **self._prefill_load_args())
        if decision is None:
            self._send_prefill(PREFIX_USER_TEXT)

    def _send_prefill(self, text: str) -> None:
        planner = self.planner
        self._cancel_reason = None
        self._prefill_handle = (
            self.load.sent(
                Kind.PREFILL,
                work_tokens=planner.in_flight_work_tokens,
                on_cancel=self._on_cancel,
                config=self.yield_config,
            )
            if self.load is not None
            else None
        )
        self._prefill_task = asyncio.create_task(self._prefill(text))

    def _on_cancel(self, verdict: CancelVerdict) -> None:
        """From the load probe: another caller's request contends with the prefill."""
        task = self._prefill_task
        if task is not None and not task.done() and self._cancel_reason is None:
            self._cancel_reason = verdict.reason
            task.cancel()

    def _reuse_fact(self) -> bool | None:
        if self.yield_config.reuses_unfinished is not None:
            return self.yield_config.reuses_unfinished
        provider = getattr(self.backend, "provider", None)
        try:
            return cache_facts(provider).reuses_unfinished if provider else None
        except ValueError:
            return None

    def _cancels_unfinished(self) -> bool:
        """As the pipeline's prefill: will a prefill unfinished at the real request be cancelled?"""
        config = self.yield_config
        if self.load is None or not (config.enabled and config.cancel_on_dispatch):
            return False
        measured = self.planner.speed.reuses_unfinished
        return reuses_unfinished(measured, self._reuse_fact(), self.load.engine_source) is False

    async def _dispatched(self) -> None:
        """The turn's request leaves: cancel the prefill where the engine will not read it."""
        task = self._prefill_task
        if self.load is None or task is None or task.done():
            return
        verdict = self.load.dispatched(
            self._prefill_handle, self.planner.speed.reuses_unfinished, self._reuse_fact()
        )
        if verdict:
            self._cancel_reason = verdict.reason
            await self._cancel(task)

    async def _estimate(self, text: str) -> int:
        key = len(self.context.get_messages())
        if self._static is None or self._static[0] != key:
            self._static = (key, await self.backend.estimate_tokens(self.context, ""))
        return self._static[1] + count_tokens(text)

    async def _prefill(self, text: str) -> None:
        sent = time.monotonic()
        try:
            result = await asyncio.wait_for(self.backend.prefill(self.context, text), 10.0)
        except asyncio.CancelledError:
            reason = self._cancel_reason or CancelReason.ENDED
            self._cancel_reason = None
            self.planner.cancelled(str(reason))
            self.result.prefills_cancelled += 1
            raise
        except Exception as e:  # fail open, as the processor does
            self.planner.finished(False, time.monotonic())
            logger.debug(f"{self.label}: prefill failed: {e!r}")
        else:
            now = time.monotonic()
            after = (
                self.load.others_now(sent, speculative=True, config=self.yield_config)
                if self.load is not None
                else None
            )
            self.planner.finished(True, now, result.prompt_tokens, result.cached_tokens, after)
            if self.load is not None:
                self.load.measured(max(0, result.prompt_tokens - result.cached_tokens), now - sent)
        finally:
            if self.load is not None and self._prefill_handle is not None:
                self.load.done(self._prefill_handle)
                self._prefill_handle = None

    def _start_draft(self, text: str) -> None:
        if self.load is not None:
            self._draft_handle = self.load.sent(Kind.DRAFT)
        self._draft_task = asyncio.create_task(self._stream(text))

    def _draft_done(self) -> None:
        if self.load is not None and self._draft_handle is not None:
            self.load.done(self._draft_handle)
        self._draft_handle = None

    async def _withdraw(self) -> None:
        task, self._draft_task = self._draft_task, None
        self._draft_done()
        await self._cancel(task)

    async def _stream(self, user_text: str) -> tuple[float, str, tuple[int, int] | None]:
        """The real request (or a draft of it), streamed to its end.

        Returns:
            When the first token came, the reply's text, and the engine's ``(prompt tokens,
            cached tokens)`` when it reported usage.
        """
        params = await self.backend.render(self.context, user_text)
        client = llm_client(self.llm)
        first: float | None = None
        pieces: list[str] = []
        usage = None
        stream = await client.chat.completions.create(**params)
        try:
            async for chunk in stream:
                for choice in chunk.choices or ():
                    content = getattr(choice.delta, "content", None)
                    if content:
                        if first is None:
                            first = time.monotonic()
                        pieces.append(content)
                if getattr(chunk, "usage", None) is not None:
                    details = getattr(chunk.usage, "prompt_tokens_details", None)
                    cached = getattr(details, "cached_tokens", None) or 0
                    usage = (chunk.usage.prompt_tokens, cached)
        finally:
            await stream.close()
        return (first if first is not None else time.monotonic()), "".join(pieces), usage
