"""Run scripted calls through configured pipelines and collect TTFA per turn.

:func:`run_call` runs one call at real-time pace and never raises for a pipeline failure: the
error is recorded in the :class:`CallResult` and the next call can go on.
:func:`run_interleaved` runs the same calls through several configurations, alternating
configuration call by call (A B A B ...) so that slow drifts of a shared, noisy machine hit
every configuration alike.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from loguru import logger
from pipecat.frames.frames import EndFrame
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.workers.runner import WorkerRunner

from pipecat_fast.bench.configs import BenchConfig
from pipecat_fast.bench.pipeline import BenchCall, Endpoints, assemble, build_spec
from pipecat_fast.testing.caller_transport import CallerTransport
from pipecat_fast.ttfa import TTFAObserver, TurnRecord, summarize

OUTPUT_SAMPLE_RATE = 16000


@dataclass
class CallResult:
    """One call through one configuration.

    Parameters:
        config: Configuration name.
        call: Call id.
        repeat: Which repetition of the call this is (0-based).
        turns: Answered turns with their TTFA records.
        unanswered: Caller turns that got no bot audio.
        error: What went wrong, if anything (the run goes on).
        wall_s: Wall-clock length of the call (s).
        llm_requests: The LLM emulator's accounting of every request of the call (prompt,
            cached and uncached tokens, ``max_tokens``), when the bench could read it.
    """

    config: str
    call: str
    repeat: int
    turns: list[TurnRecord] = field(default_factory=list)
    unanswered: int = 0
    error: str | None = None
    wall_s: float = 0.0
    llm_requests: list[dict[str, Any]] = field(default_factory=list)


async def run_call(
    call: BenchCall,
    config: BenchConfig,
    endpoints: Endpoints,
    *,
    repeat: int = 0,
    timeout_s: float | None = None,
) -> CallResult:
    """Run one call at real-time pace through ``config``'s pipeline.

    Args:
        call: The scripted call.
        config: The pipeline configuration.
        endpoints: Where the providers listen.
        repeat: Repetition index, recorded in the result.
        timeout_s: Give up on the call after this long (s); defaults to a bound derived
            from the call's length.

    Returns:
        The call's result; a pipeline error is recorded in it, not raised.
    """
    result = CallResult(config=config.name, call=call.id, repeat=repeat)
    audio_s = sum(len(u) for u in call.utterances) / 2 / call.sample_rate
    timeout_s = timeout_s or 30.0 + 4 * audio_s + 15.0 * len(call.utterances)
    started = time.monotonic()
    ttfa = TTFAObserver()
    errors: list[str] = []
    try:
        transport = CallerTransport(call.utterances, sample_rate=call.sample_rate)
        spec = build_spec(call, endpoints)
        config.customize(spec)
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

        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(worker)

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
    except Exception as e:  # a broken call must not stop the bench
        logger.exception(f"bench call {call.id} ({config.name}) failed")
        errors.append(f"{type(e).__name__}: {e}")
    ttfa.close()
    for turn in ttfa.turns:
        turn.extra.setdefault("label", f"{call.id} #{turn.turn}")
    result.turns = ttfa.turns
    result.unanswered = len(ttfa.unanswered)
    result.error = "; ".join(dict.fromkeys(errors)) or None
    result.wall_s = time.monotonic() - started
    return result


BetweenCalls = Callable[[BenchConfig, BenchCall, int], Awaitable[None]]


async def run_interleaved(
    calls: Sequence[BenchCall],
    configs: Sequence[BenchConfig],
    endpoints: Endpoints,
    *,
    repeats: int = 1,
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
        before_call: Awaited before each call (e.g. to reset the emulator's cache).
        after_call: Awaited with each result before it is reported (e.g. to attach the
            emulator's request accounting).
        on_result: Called with each call's result as it finishes (progress output).

    Returns:
        The results in the order they ran.
    """
    results = []
    for repeat in range(repeats):
        for call in calls:
            for config in configs:
                if before_call is not None:
                    await before_call(config, call, repeat)
                result = await run_call(call, config, endpoints, repeat=repeat)
                if after_call is not None:
                    await after_call(result)
                results.append(result)
                if on_result is not None:
                    on_result(result)
    return results


def build_report(results: Sequence[CallResult], baseline: str, **meta: Any) -> dict[str, Any]:
    """The bench's JSON report.

    Returns:
        ``{"baseline", "configs", "turns": [{"config", "call", "turn", "ttfa_ms",
        "stages_ms", "prompt_tokens", "cached_tokens", ...}], "summary": {config:
        {"ttfa_p50_ms", "ttfa_p95_ms", "n_turns", "n_unanswered"}}, "ratios": {config:
        {"p50", "p95"}}, "errors": [...], **meta}``.
    """
    configs = list(dict.fromkeys(r.config for r in results))
    turns = [
        {"config": r.config, "call": r.call, "repeat": r.repeat, **t.to_dict()}
        for r in results
        for t in r.turns
    ]
    summary = {}
    for config in configs:
        mine = [r for r in results if r.config == config]
        values: list[float | None] = [t.ttfa_ms for r in mine for t in r.turns]
        values += [None] * sum(r.unanswered for r in mine)
        summary[config] = summarize(values)
    ratios = {}
    base = summary.get(baseline, {})
    for config, s in summary.items():
        ratios[config] = {
            q: (
                round(s[f"ttfa_{q}_ms"] / base[f"ttfa_{q}_ms"], 3)
                if s.get(f"ttfa_{q}_ms") and base.get(f"ttfa_{q}_ms")
                else None
            )
            for q in ("p50", "p95")
        }
    errors = [
        {"config": r.config, "call": r.call, "repeat": r.repeat, "error": r.error}
        for r in results
        if r.error
    ]
    compute = prefill_compute(results, baseline)
    return {
        "baseline": baseline,
        "configs": configs,
        **meta,
        "turns": turns,
        "summary": summary,
        "ratios": ratios,
        "prefill_compute": compute,
        "errors": errors,
    }


def prefill_compute(results: Sequence[CallResult], baseline: str) -> dict[str, Any]:
    """What each configuration made the LLM provider prefill, from the emulator's records.

    Returns:
        Per configuration: ``requests``, ``speculative_requests`` (``max_tokens=1`` prefills),
        ``prompt_tokens``, ``computed_tokens`` (prompt tokens not served from the cache, i.e.
        prefill work), and ``extra_compute_pct`` relative to the baseline's computed tokens
        over the same calls. Empty when no records were collected.
    """
    out: dict[str, Any] = {}
    for config in dict.fromkeys(r.config for r in results):
        records = [q for r in results if r.config == config for q in r.llm_requests]
        if not records:
            continue
        out[config] = {
            "requests": len(records),
            "speculative_requests": sum(1 for q in records if q.get("max_tokens") == 1),
            "prompt_tokens": sum(q["prompt_tokens"] for q in records),
            "computed_tokens": sum(q["prompt_tokens"] - q["cached_tokens"] for q in records),
        }
    base = out.get(baseline, {}).get("computed_tokens")
    for stats in out.values():
        stats["extra_compute_pct"] = (
            round(100.0 * (stats["computed_tokens"] - base) / base, 1) if base else None
        )
    return out


async def warm_up(endpoints: Endpoints) -> None:
    """One small completion through the real LLM service before anything is measured.

    A fresh process pays one-off costs on its first request (client construction, lazy
    imports and model building in the SDK): ~0.2 s of LLM TTFT on this project's bench
    machine. Without this, the first configuration's first turn would carry it alone.
    """
    from pipecat.frames.frames import LLMContextFrame
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.services.openai.llm import OpenAILLMService
    from pipecat.tests.utils import run_test

    llm = OpenAILLMService(
        api_key=endpoints.llm_api_key,
        base_url=endpoints.llm_base_url,
        settings=OpenAILLMService.Settings(model=endpoints.llm_model, **endpoints.llm_settings),
    )
    context = LLMContext(messages=[{"role": "user", "content": "warm up"}])
    try:
        await run_test(llm, frames_to_send=[LLMContextFrame(context)])
    except Exception as e:  # a failed warm-up only costs accuracy, never the run
        logger.warning(f"bench warm-up failed: {e}")
