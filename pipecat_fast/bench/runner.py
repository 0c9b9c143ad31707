"""Run scripted calls through configured pipelines and collect TTFA per scripted turn.

:func:`run_call` runs one call at real-time pace and never raises for a pipeline failure: the
error is recorded in the :class:`CallResult` and the next call can go on. Each of its turns is
tied to the scripted utterance it answers (:func:`pipecat_fast.bench.pairing.match_turns`), so
``turn`` in a result is the utterance's index in the call script, whatever the pipeline did in
between. :func:`run_interleaved` runs the same calls through several configurations,
alternating configuration call by call (A B A B ...) so that slow drifts of a shared, noisy
machine hit every configuration alike. :func:`build_report` compares configurations over the
turns they all answered (:func:`pipecat_fast.bench.pairing.paired_summary`).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from loguru import logger
from pipecat.frames.frames import EndFrame, TTSSpeakFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.workers.runner import WorkerRunner

from pipecat_fast.bench.configs import BenchConfig
from pipecat_fast.bench.pairing import TurnOutcome, UtteranceSpan, match_turns, paired_summary
from pipecat_fast.bench.pipeline import BenchCall, Endpoints, PipelineSpec, assemble, build_spec
from pipecat_fast.bench.words import user_texts, words_lost
from pipecat_fast.testing.caller_transport import CallerTimeline, CallerTransport
from pipecat_fast.ttfa import TTFAObserver, TurnRecord, summarize

OUTPUT_SAMPLE_RATE = 16000


@dataclass
class CallResult:
    """One call through one configuration.

    Parameters:
        config: Configuration name.
        call: Call id.
        repeat: Which repetition of the call this is (0-based).
        turns: Answered turns with their TTFA records; ``turn`` is the scripted utterance.
        unanswered: Scripted utterances that got no reply after the caller's end of speech.
        error: What went wrong, if anything (the run goes on).
        wall_s: Wall-clock length of the call (s).
        llm_requests: The LLM's accounting of every request of the call (``prompt_tokens``,
            ``cached_tokens``, ``speculative``), when the bench could read it.
        slot: The call's position in the run's set of calls (a script may come twice).
        outcomes: One per scripted utterance: its answer, false cut-offs, talk-overs.
        bargein: Per reply the caller talked over: the words it had played and the words the
            assistant context kept (see :func:`pipecat_fast.bench.evals.bargein.barge_in_turns`).
        greeting_ms: For a call whose bot speaks first, from the answer (the pipeline starting)
            to the greeting's first audio; None otherwise.
        session: The TTFA meter's session-wide lever accounting (``TTFAObserver.session``).
        words_scripted: Words the caller said over the call's utterances.
        words_lost: The caller's words that never reached the LLM context
            (:func:`pipecat_fast.bench.words.words_lost`).
        tts_chars: Characters the TTS service was asked to synthesize (``on_tts_request``).
    """

    config: str
    call: str
    repeat: int
    turns: list[TurnRecord] = field(default_factory=list)
    unanswered: int = 0
    error: str | None = None
    wall_s: float = 0.0
    llm_requests: list[dict[str, Any]] = field(default_factory=list)
    slot: int = 0
    outcomes: list[TurnOutcome] = field(default_factory=list)
    bargein: list[dict[str, Any]] = field(default_factory=list)
    greeting_ms: float | None = None
    session: dict[str, Any] = field(default_factory=dict)
    words_scripted: int = 0
    words_lost: list[str] = field(default_factory=list)
    tts_chars: int = 0


def caller_spans(call: BenchCall, timeline: CallerTimeline) -> list[UtteranceSpan]:
    """The caller's utterances as played, with the script's speech end and pauses placed."""
    spans = []
    started = timeline.utterance_started
    for i, at in enumerate(started):
        end_ms = call.speech_end_ms[i] if i < len(call.speech_end_ms) else 0
        pauses = call.pauses_ms[i] if i < len(call.pauses_ms) else ()
        spans.append(
            UtteranceSpan(
                index=i,
                started=at,
                speech_end=at + end_ms / 1000.0,
                pauses=tuple((at + a / 1000.0, at + b / 1000.0) for a, b in pauses),
                next_started=started[i + 1] if i + 1 < len(started) else None,
            )
        )
    return spans


async def run_call(
    call: BenchCall,
    config: BenchConfig,
    endpoints: Endpoints,
    *,
    repeat: int = 0,
    slot: int = 0,
    timeout_s: float | None = None,
    ring_s: float = 0.0,
) -> CallResult:
    """Run one call at real-time pace through ``config``'s pipeline.

    Args:
        call: The scripted call.
        config: The pipeline configuration.
        endpoints: Where the providers listen.
        repeat: Repetition index, recorded in the result.
        slot: The call's position in the run's set of calls, recorded in the result.
        timeout_s: Give up on the call after this long (s); defaults to a bound derived
            from the call's length and the caller's patience.
        ring_s: Ring-back before the call connects, for every configuration alike (s); a
            configuration may ask for a longer one (``PipelineSpec.ring_s``).

    Returns:
        The call's result; a pipeline error is recorded in it, not raised.
    """
    result = CallResult(config=config.name, call=call.id, repeat=repeat, slot=slot)
    audio_s = sum(len(u) for u in call.utterances) / 2 / call.sample_rate
    timeout_s = timeout_s or 30.0 + 4 * audio_s + 2 * call.patience_s * len(call.utterances)
    started = time.monotonic()
    ttfa = TTFAObserver()
    errors: list[str] = []
    transport = None
    spec = None
    answered_at: float | None = None
    try:
        spec = build_spec(call, endpoints)
        spec.ring_s = ring_s
        config.customize(spec)

        @spec.tts.event_handler("on_tts_request")
        async def _on_tts_request(_tts, _context_id, text):
            result.tts_chars += len(text)

        transport = CallerTransport(
            call.utterances,
            sample_rate=call.sample_rate,
            reply_timeout_s=call.patience_s,
            barge_in_after_s=spec.call.barge_in_after_s,
            await_greeting=spec.call.greeting is not None,
            pause_before_s=spec.call.pause_before_s,
        )
        await ring(spec)
        pipeline = assemble(spec, transport)
        worker = PipelineWorker(
            pipeline,
            params=PipelineParams(
                audio_in_sample_rate=call.sample_rate,
                audio_out_sample_rate=OUTPUT_SAMPLE_RATE,
                enable_metrics=True,
                enable_usage_metrics=True,
            ),
            observers=[ttfa, *spec.observers],
            enable_rtvi=False,
            idle_timeout_secs=None,
        )

        @worker.event_handler("on_pipeline_error")
        async def _on_error(_worker, frame):
            errors.append(frame.error)

        if spec.call.greeting is not None:
            greeting = spec.call.greeting

            @worker.event_handler("on_pipeline_started")
            async def _greet(_worker, _frame):
                await worker.queue_frame(TTSSpeakFrame(greeting))

        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(worker)

        answered_at = time.time()  # the callee picks up: the pipeline starts now
        running = asyncio.create_task(runner.run())
        caller_done = asyncio.create_task(transport.finished.wait())
        try:
            done, _ = await asyncio.wait(
                {running, caller_done}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
            if caller_done in done:
                await worker.queue_frame(EndFrame())
            elif running in done:
                errors.append("the pipeline stopped before the caller finished")
            else:
                errors.append(f"call did not finish within {timeout_s:.0f} s")
                await worker.cancel(reason="bench call timeout")
            await asyncio.wait_for(running, timeout=30)
        finally:
            caller_done.cancel()
            if not running.done():
                running.cancel()
            for hook in spec.on_hangup:
                await hook()
    except Exception as e:  # a broken call must not stop the bench
        logger.exception(f"bench call {call.id} ({config.name}) failed")
        errors.append(f"{type(e).__name__}: {e}")
    ttfa.close()
    result.session = dict(ttfa.session)
    timeline = transport.timeline if transport is not None else CallerTimeline()
    greets = spec is not None and spec.call.greeting is not None
    if greets and answered_at is not None and timeline.bot_started:
        first = timeline.bot_started[0]
        before_caller = not timeline.utterance_started or first < timeline.utterance_started[0]
        if before_caller:
            result.greeting_ms = (first - answered_at) * 1000.0
    outcomes = match_turns(caller_spans(call, timeline), ttfa.turns, timeline.bot_started)
    played = len(outcomes)
    outcomes += [TurnOutcome(i) for i in range(played, len(call.utterances))]
    for outcome in outcomes:
        outcome.deliberate_pause = _paused(call, outcome.index)
        if outcome.record is not None:
            outcome.record.extra.setdefault("label", f"{call.id} #{outcome.index}")
    result.outcomes = outcomes
    result.turns = [o.record for o in outcomes if o.record is not None]
    result.unanswered = sum(1 for o in outcomes if o.record is None)
    if spec is not None and transport is not None and spec.call.barge_in_after_s:
        from pipecat_fast.bench.evals.bargein import barge_in_turns

        result.bargein = barge_in_turns(spec.call, spec.context, transport.timeline)
    if spec is not None:
        lost = words_lost(
            [u.text for u in call.stt_script], user_texts(spec.context.get_messages())
        )
        result.words_scripted, result.words_lost = lost.scripted, list(lost.lost)
    result.error = "; ".join(dict.fromkeys(errors)) or None
    result.wall_s = time.monotonic() - started
    return result


def _paused(call: BenchCall, index: int) -> bool:
    """Whether the call's utterance ``index`` pauses mid-utterance on purpose."""
    return index < len(call.pauses_ms) and bool(call.pauses_ms[index])


async def ring(spec: PipelineSpec) -> None:
    """The phone rings: call each ``spec.ringing`` hook, then wait ``spec.ring_s`` seconds.

    A hook may start background work (a session warmup) or return an awaitable, which is
    awaited before the ring time starts counting. The bench rings every configuration for
    ``--ring-s`` (default 0); a configuration that needs a ring asks for one.
    """
    for hook in spec.ringing:
        result = hook()
        if inspect.isawaitable(result):
            await result
    if spec.ring_s > 0:
        await asyncio.sleep(spec.ring_s)


BetweenCalls = Callable[[BenchConfig, BenchCall, int], Awaitable[None]]


async def run_interleaved(
    calls: Sequence[BenchCall],
    configs: Sequence[BenchConfig],
    endpoints: Endpoints,
    *,
    repeats: int = 1,
    ring_s: float = 0.0,
    before_call: BetweenCalls | None = None,
    after_call: Callable[[CallResult], Awaitable[None]] | None = None,
    on_result: Callable[[CallResult], None] | None = None,
) -> list[CallResult]:
    """Run every call through every configuration, interleaved call by call (A B A B ...).

    Args:
        calls: The scripted calls.
        configs: Configurations to compare; the first is the baseline.
        endpoints: Where the providers listen.
        repeats: How many times to run the whole set of calls.
        ring_s: Ring-back before every call (s), for every configuration alike.
        before_call: Awaited before each call (e.g. to reset the emulator's cache).
        after_call: Awaited with each result before it is reported (e.g. to attach the
            emulator's request accounting).
        on_result: Called with each call's result as it finishes (progress output).

    Returns:
        The results in the order they ran.
    """
    results = []
    for repeat in range(repeats):
        for slot, call in enumerate(calls):
            for config in configs:
                if before_call is not None:
                    await before_call(config, call, repeat)
                result = await run_call(
                    call, config, endpoints, repeat=repeat, slot=slot, ring_s=ring_s
                )
                if after_call is not None:
                    await after_call(result)
                results.append(result)
                if on_result is not None:
                    on_result(result)
    return results


def turn_rows(results: Sequence[CallResult]) -> list[dict[str, Any]]:
    """One JSON row per scripted utterance per call: its answer (if any) and its pauses.

    Rows of unanswered turns carry ``ttfa_ms: None``; ``turn`` is the scripted utterance.
    """
    rows = []
    for r in results:
        for o in r.outcomes:
            row: dict[str, Any] = {
                "config": r.config,
                "call": r.call,
                "slot": r.slot,
                "repeat": r.repeat,
            }
            if o.record is not None:
                row.update(o.record.to_dict())
            else:
                row.update({"turn": o.index, "ttfa_ms": None, "stages_ms": {}})
            row.update(
                turn=o.index,
                answered=o.answered,
                deliberate_pause=o.deliberate_pause,
                false_cutoffs=o.false_cutoffs,
                talked_over=o.talked_over,
            )
            rows.append(row)
    return rows


def build_report(results: Sequence[CallResult], baseline: str, **meta: Any) -> dict[str, Any]:
    """The bench's JSON report.

    Returns:
        ``{"baseline", "configs", "turns": [one row per scripted turn per configuration:
        {"config", "call", "slot", "repeat", "turn", "answered", "ttfa_ms", "stages_ms",
        "prompt_tokens", "cached_tokens", "deliberate_pause", "false_cutoffs",
        "talked_over", ...}], "paired": <paired_summary>, "ratios": {config: {"p50",
        "p95"}} (over the turns every configuration answered), "summary": {config:
        {"ttfa_p50_ms", "ttfa_p95_ms", "n_turns", "n_unanswered"}} (each configuration's own
        answered turns without a deliberate pause, for reference), "false_cutoffs":
        {config: n}, "talked_over": {config: n}, "prefill_compute", "errors", **meta}``.
    """
    configs = list(dict.fromkeys(r.config for r in results))
    rows = turn_rows(results)
    paired = paired_summary(rows, configs, baseline)
    summary = {}
    for config in configs:
        mine = [t for t in rows if t["config"] == config and not t["deliberate_pause"]]
        summary[config] = summarize([t["ttfa_ms"] for t in mine])
    errors = [
        {"config": r.config, "call": r.call, "repeat": r.repeat, "error": r.error}
        for r in results
        if r.error
    ]
    compute = prefill_compute(results, baseline)
    levers = lever_accounting(results, rows, baseline)
    extra = {}
    if any(r.bargein for r in results):
        from pipecat_fast.bench.evals.bargein import barge_in_summary

        extra["bargein"] = barge_in_summary(results)
        extra["bargein_replies"] = [
            {"config": r.config, "call": r.call, "repeat": r.repeat, **t}
            for r in results
            for t in r.bargein
        ]
    pooled = any(k.startswith("pool_") for r in results for k in r.session)
    if pooled or any(r.greeting_ms is not None for r in results):
        from pipecat_fast.bench.evals.pool import greeting_summary, pool_summary

        extra["greeting"] = greeting_summary(results, baseline)
        extra["greeting_calls"] = [
            {"config": r.config, "call": r.call, "repeat": r.repeat, "greeting_ms": r.greeting_ms}
            for r in results
        ]
        extra["pool"] = pool_summary(results)
    return {
        "baseline": baseline,
        "configs": configs,
        **meta,
        "turns": rows,
        "paired": paired,
        "ratios": paired["ratios"],
        "summary": summary,
        "false_cutoffs": paired["paused"]["false_cutoffs"],
        "talked_over": {
            c: sum(t["talked_over"] for t in rows if t["config"] == c) for c in configs
        },
        "first_turn": first_turn_summary(results, baseline),
        "prefill_compute": compute,
        "levers": levers,
        **extra,
        "errors": errors,
    }


def first_turn_summary(results: Sequence[CallResult], baseline: str) -> dict[str, Any]:
    """Each configuration's TTFA on the first turn of every call (the cold one), and its cost.

    Returns:
        Per configuration: ``ttfa_p50_ms``, ``ttfa_p95_ms``, ``n_turns``, ``n_unanswered``,
        ``p50``/``p95`` ratios to the baseline's first turns, and ``warmup_prompt_tokens``
        (summed from the turns' ``warmup_prompt_tokens`` accounting, 0 without a warmup)
        beside ``live_prompt_tokens`` and ``live_cached_tokens`` (every answered turn's
        request, as the provider reported it).
    """
    out: dict[str, Any] = {}
    for config in dict.fromkeys(r.config for r in results):
        mine = [r for r in results if r.config == config]
        firsts = [r.turns[0] for r in mine if r.turns and r.turns[0].turn == 0]
        missing = len(mine) - len(firsts)
        out[config] = {
            **summarize([t.ttfa_ms for t in firsts] + [None] * missing),
            "warmup_prompt_tokens": sum(
                int(t.extra.get("warmup_prompt_tokens") or 0) for t in firsts
            ),
            "live_prompt_tokens": sum(t.prompt_tokens or 0 for r in mine for t in r.turns),
            "live_cached_tokens": sum(t.cached_tokens or 0 for r in mine for t in r.turns),
        }
    base = out.get(baseline, {})
    for stats in out.values():
        for q in ("p50", "p95"):
            b, v = base.get(f"ttfa_{q}_ms"), stats.get(f"ttfa_{q}_ms")
            stats[q] = round(v / b, 3) if v and b else None
    return out


def prefill_compute(results: Sequence[CallResult], baseline: str) -> dict[str, Any]:
    """What each configuration made the LLM prefill, from the provider's own records.

    Each record is one request as the provider (the emulator, or the engine's log) saw it:
    ``prompt_tokens``, ``cached_tokens`` (read from the prefix cache) and ``speculative``
    (a prefill-only request: ``max_tokens`` 1 on the emulator, one decoded token in the
    engine's log).

    Returns:
        Per configuration: ``requests``, ``speculative_requests``, ``abandoned_requests``
        (started, never completed: the caller talked over the reply) and the prompt tokens they
        computed (``abandoned_computed_tokens``: counting completed generations only misses
        them), ``warm_real_requests``
        (real requests with >= 90 % of the prompt cached), ``prompt_tokens``,
        ``cached_tokens``, ``computed_tokens`` (prompt tokens not served from the cache, i.e.
        prefill work), and ``extra_compute_pct`` relative to the baseline's computed tokens
        over the same calls; when the records say what was decoded (``decoded_tokens``: output
        tokens actually generated, a withdrawn draft's until it was cancelled),
        ``decoded_tokens`` and ``extra_decode_pct``, and ``extra_total_pct``: computed plus
        decoded tokens (each costs about one forward pass of the model's weights per token)
        against the baseline's. Empty when no records were collected.
    """
    out: dict[str, Any] = {}
    for config in dict.fromkeys(r.config for r in results):
        records = [q for r in results if r.config == config for q in r.llm_requests]
        if not records:
            continue
        prompt = sum(q["prompt_tokens"] for q in records)
        cached = sum(q["cached_tokens"] for q in records)
        real = [q for q in records if not is_speculative(q)]
        out[config] = {
            "requests": len(records),
            "speculative_requests": len(records) - len(real),
            # Started but never completed: a reply the caller talked over or hung up on.
            "abandoned_requests": sum(1 for q in records if q.get("completed") is False),
            "abandoned_computed_tokens": sum(
                q["prompt_tokens"] - q["cached_tokens"]
                for q in records
                if q.get("completed") is False
            ),
            # Real requests that found at least 90 % of their prompt in the cache: what a
            # prefill that finished in time (or the previous turn) left there.
            "warm_real_requests": sum(
                1
                for q in real
                if q["prompt_tokens"] and q["cached_tokens"] >= 0.9 * q["prompt_tokens"]
            ),
            "prompt_tokens": prompt,
            "cached_tokens": cached,
            "computed_tokens": prompt - cached,
        }
        if all("decoded_tokens" in q for q in records):
            out[config]["decoded_tokens"] = sum(q["decoded_tokens"] for q in records)

    def extra(value, base):
        return round(100.0 * (value - base) / base, 1) if base else None

    base = out.get(baseline, {})
    for stats in out.values():
        stats["extra_compute_pct"] = extra(stats["computed_tokens"], base.get("computed_tokens"))
        if "decoded_tokens" in stats and "decoded_tokens" in base:
            stats["extra_decode_pct"] = extra(stats["decoded_tokens"], base["decoded_tokens"])
            stats["extra_total_pct"] = extra(
                stats["computed_tokens"] + stats["decoded_tokens"],
                base["computed_tokens"] + base["decoded_tokens"],
            )
    return out


def lever_accounting(results: Sequence[CallResult], rows: Sequence[dict[str, Any]], baseline: str):
    """Per configuration: words lost, TTS characters, and what the end-of-turn levers did.

    Returns:
        ``{config: {"words_scripted", "words_lost", "lost" (the words), "tts_chars",
        "extra_tts_pct", "tts_chars_discarded" (characters of withdrawn drafts handed to the TTS
        before confirmation), "preempt_released", "preempt_discarded", "drafts",
        "drafts_discarded", "drafts_early", "drafts_interim" (drafted on the latest interim at a
        pause), "drafts_interim_differed" (of those, contradicted by the final), "eot_early"
        (turns confirmed on a complete transcript), "eot_late_finals"}}``.
    """
    out: dict[str, Any] = {}
    for config in dict.fromkeys(r.config for r in results):
        mine = [r for r in results if r.config == config]
        turns = [t for t in rows if t["config"] == config]

        def total(key: str, turns: Sequence[dict[str, Any]] = turns) -> float:
            return sum(t.get(key, 0) or 0 for t in turns)

        out[config] = {
            "words_scripted": sum(r.words_scripted for r in mine),
            "words_lost": sum(len(r.words_lost) for r in mine),
            "lost": [w for r in mine for w in r.words_lost],
            "tts_chars": sum(r.tts_chars for r in mine),
            "tts_chars_discarded": int(total("preempt_chars_discarded")),
            "preempt_released": sum(1 for t in turns if t.get("preempt") == "released"),
            "preempt_discarded": sum(1 for t in turns if t.get("preempt") == "discarded"),
            "drafts": int(total("drafts")),
            "drafts_discarded": int(total("drafts_discarded")),
            "drafts_early": int(total("drafts_early")),
            "drafts_interim": int(total("drafts_interim")),
            "drafts_interim_differed": int(total("drafts_interim_differed")),
            "eot_early": sum(1 for t in turns if t.get("eot_early")),
            "eot_late_finals": int(total("eot_late_finals")),
        }
    base = out.get(baseline, {}).get("tts_chars")
    for stats in out.values():
        stats["extra_tts_pct"] = (
            round(100.0 * (stats["tts_chars"] - base) / base, 1) if base else None
        )
    return out


def is_speculative(record: dict[str, Any]) -> bool:
    """Whether a provider record is a prefill-only request (see :func:`prefill_compute`)."""
    if "speculative" in record:
        return bool(record["speculative"])
    return record.get("max_tokens") == 1


async def warm_up(endpoints: Endpoints) -> None:
    """One small completion through the real LLM service before anything is measured.

    A fresh process pays one-off costs on its first request (client construction, lazy
    imports and model building in the SDK): ~0.2 s of LLM TTFT on this project's bench
    machine. Without this, the first configuration's first turn would carry it alone.
    """
    from pipecat.frames.frames import LLMContextFrame
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.services.openai.llm import OpenAILLMService

    llm = OpenAILLMService(
        api_key=endpoints.llm_api_key,
        base_url=endpoints.llm_base_url,
        settings=OpenAILLMService.Settings(model=endpoints.llm_model, **endpoints.llm_settings),
    )
    context = LLMContext(messages=[{"role": "user", "content": "warm up"}])
    # Not Pipecat's test helper `run_test`: its WorkerRunner installs a SIGINT handler that
    # outlives it, so a later Ctrl-C cancelled that finished runner instead of the bench.
    worker = PipelineWorker(Pipeline([llm]), cancel_on_idle_timeout=False)

    @worker.event_handler("on_pipeline_started")
    async def _ask(_worker, _frame):
        await worker.queue_frames([LLMContextFrame(context), EndFrame()])

    runner = WorkerRunner(handle_sigint=False)
    try:
        await runner.add_workers(worker)
        await asyncio.wait_for(runner.run(), 60)
    except Exception as e:  # a failed warm-up only costs accuracy, never the run
        logger.warning(f"bench warm-up failed: {e}")
