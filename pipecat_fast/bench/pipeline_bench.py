"""``pipecat-fast bench``: named pipeline configurations side by side, TTFA p50/p95 and ratios.

Every call runs through every configuration, alternating configuration call by call
(A B A B ...), on the same emulated providers (or the real llama.cpp engine with
``--engine llama-cpp``). Ratios are each configuration's p50/p95 TTFA over the baseline's
(the first configuration), measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from pathlib import Path

import aiohttp
from loguru import logger

from pipecat_fast.bench.calls import CallScriptError
from pipecat_fast.bench.configs import CONFIGS, get_configs
from pipecat_fast.bench.emulator_process import EmulatorProcess
from pipecat_fast.bench.material import bench_calls
from pipecat_fast.bench.output import (
    compute_table,
    console,
    first_turn_line,
    progress_line,
    quiet_logs,
    stage_medians,
    stages_table,
    summary_table,
)
from pipecat_fast.bench.pipeline import Endpoints
from pipecat_fast.bench.runner import build_report, run_interleaved, warm_up
from pipecat_fast.testing.profiles import PROFILES, get_profile
from pipecat_fast.tokens import truncate_tokens
from pipecat_fast.ttfa import write_json

DEFAULT_CONFIGS = "stock,stock-again,prefill,draft,aggregator"
"""Stock Pipecat, its noise floor, and every lever (the sweeps' variants are opt-in)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``pipecat-fast bench [pipeline]``."""
    parser.add_argument(
        "--configs",
        default=DEFAULT_CONFIGS,
        help=f"comma-separated, baseline first (default {DEFAULT_CONFIGS}; known: "
        f"{', '.join(CONFIGS)})",
    )
    parser.add_argument("--calls", type=int, default=3, help="calls per configuration")
    parser.add_argument("--repeats", type=int, default=1, help="run the set of calls N times")
    parser.add_argument("--profile", default="same-region", choices=sorted(PROFILES))
    parser.add_argument(
        "--engine",
        default="emulator",
        choices=("emulator", "llama-cpp"),
        help="LLM: the OpenAI emulator, or the real llama.cpp engine (prefix-cache behaviour)",
    )
    parser.add_argument(
        "--engine-model",
        default="bench",
        choices=("bench", "small"),
        help="llama-cpp: the generated model (bench: 88M params; small: 19M, ~4x faster prefill)",
    )
    parser.add_argument(
        "--engine-prompt-tokens",
        type=int,
        default=1900,
        help="llama-cpp: cut the system prompt to this many o200k tokens and drop the tools "
        "(default 1,900: ~3.2k tokens of the engine's own vocabulary, which is ~1.7x o200k)",
    )
    parser.add_argument(
        "--ring-s",
        type=float,
        default=0.0,
        help="ring-back before every call, for every configuration alike (s; the 'warmup' "
        "configuration rings at least 6 s: give --ring-s 6 to compare it fairly)",
    )
    parser.add_argument(
        "--prompt-tokens",
        type=int,
        default=None,
        help="cut every call's system prompt to this many o200k tokens and drop the tools "
        "(e.g. 700: a prompt below OpenAI's 1,024-token cache minimum)",
    )
    parser.add_argument(
        "--llm-cache",
        default="cold",
        choices=("cold", "shared"),
        help="LLM prefix cache at the start of each call: cold (the emulator's cache is "
        "emptied; the engine serves another caller's request first) or shared (kept across "
        "calls, as with steady traffic on one prompt)",
    )
    parser.add_argument(
        "--no-stt-revisions",
        action="store_true",
        help="word-by-word interims instead of revising ones with real ASR revision structure",
    )
    parser.add_argument("--out", type=Path, default=Path("reports/bench.json"))
    parser.add_argument("--verbose", action="store_true", help="show Pipecat's debug log")


async def _bench(args: argparse.Namespace) -> int:
    profile = get_profile(args.profile)
    configs = get_configs([c.strip() for c in args.configs.split(",") if c.strip()])
    calls = bench_calls(
        args.calls,
        large_prompt=profile.prompt == "large",
        revisions_interval_s=None
        if args.no_stt_revisions
        else profile.stt_interim_interval_ms / 1000.0,
    )
    cut = args.prompt_tokens or (args.engine_prompt_tokens if args.engine == "llama-cpp" else None)
    if cut is not None:
        for call in calls:
            call.system_prompt = truncate_tokens(call.system_prompt, cut)
            call.tools = []
    total = len(calls) * len(configs) * args.repeats
    console.print(
        f"[bold]pipecat-fast bench[/bold]: {', '.join(c.name for c in configs)} x {len(calls)} "
        f"calls x {args.repeats}, profile {profile.name}, engine {args.engine}, "
        f"LLM cache {args.llm_cache}"
    )
    done = 0

    def on_result(result):
        nonlocal done
        done += 1
        console.print(progress_line(result, done, total))

    async with contextlib.AsyncExitStack() as stack:
        emulators = await stack.enter_async_context(EmulatorProcess(profile.name, calls))
        endpoints = Endpoints(**emulators.urls)
        engine = None
        if args.engine == "llama-cpp":
            engine = await stack.enter_async_context(_llama_engine(args.engine_model))
            endpoints = engine_endpoints(engine, endpoints)
            tokens = await engine_token_count(engine, calls[0].system_prompt)
            console.print(f"engine prompt: {tokens} engine tokens ({engine.model_name})")
        await warm_up(endpoints)
        seen = 0

        async def before_call(config, call, repeat):
            nonlocal seen
            if args.llm_cache == "cold":
                if engine is not None:
                    await other_caller(engine)
                    seen = len(engine.engine_log().timings)
                else:
                    await emulators.reset_llm()

        async def after_call(result):
            nonlocal seen
            if engine is not None:
                # The engine reports no usage: its own log says what it prefilled.
                timings = engine.engine_log().timings
                result.llm_requests = [
                    {
                        "prompt_tokens": t.prompt_eval_tokens,
                        "cached_tokens": 0,
                        "decoded_tokens": t.eval_runs,
                    }
                    for t in timings[seen:]
                ]
                seen = len(timings)
                return
            records = await emulators.llm_requests()
            if args.llm_cache == "cold":
                seen = 0  # reset before every call
            result.llm_requests, seen = records[seen:], len(records)

        results = await run_interleaved(
            calls,
            configs,
            endpoints,
            repeats=args.repeats,
            ring_s=args.ring_s,
            before_call=before_call,
            after_call=after_call,
            on_result=on_result,
        )
    report = build_report(
        results,
        configs[0].name,
        profile=profile.name,
        engine=args.engine if args.engine == "emulator" else f"llama-cpp/{args.engine_model}",
        llm_cache=args.llm_cache,
        ring_s=args.ring_s,
        order="interleaved call by call",
        stage_medians_ms={
            c.name: stage_medians([r for r in results if r.config == c.name]) for c in configs
        },
    )
    console.print(summary_table(report, f"TTFA, {profile.name}, {args.engine}"))
    for table in (
        compute_table(report, "what the bets cost, and words lost"),
        stages_table(report, "median blocking time per stage, ms"),
    ):
        if table is not None:
            console.print(table)
    for name, stats in report.get("bargein", {}).items():
        console.print(
            f"barge-in {name}: {stats['interrupted_turns']} replies talked over, "
            f"{stats['words_played']} words played, {stats['words_committed']} committed, "
            f"{stats['kept_unheard']} kept unheard, {stats['heard_lost']} heard but lost"
        )
    console.print(first_turn_line(report))
    for name, stats in report.get("greeting", {}).items():
        console.print(
            f"greeting {name}: answer -> first audio p50 {stats['greeting_p50_ms']} ms, "
            f"p95 {stats['greeting_p95_ms']} ms over {stats['n']} calls "
            f"(ratio {stats['p50']} / {stats['p95']})"
        )
    for name, stats in report.get("pool", {}).items():
        console.print(
            f"TTS pool {name}: first connection pooled in {stats['first_reused']}/"
            f"{stats['calls']} calls, {stats['acquires']} connections asked for, "
            f"{stats['service_handshakes']} handshakes paid by the service"
        )
    write_json(args.out, report)
    console.print(f"wrote {args.out}")
    return 1 if report["errors"] else 0


@contextlib.asynccontextmanager
async def _llama_engine(size: str):
    """The real llama.cpp engine on a generated model (see docs/engine.md)."""
    from pipecat_fast.testing.gguf_model import ensure_model
    from pipecat_fast.testing.llama_server import LlamaCppServer

    async with LlamaCppServer(ensure_model(size)) as server:
        yield server


def engine_endpoints(server, endpoints: Endpoints) -> Endpoints:
    """The bench's endpoints with the LLM swapped for the engine (STT and TTS stay emulated)."""
    from pipecat_fast.testing.llama_server import engine_llm_settings

    return Endpoints(
        llm_base_url=server.base_url,
        tts_url=endpoints.tts_url,
        stt_base_url=endpoints.stt_base_url,
        deepgram_tts_url=endpoints.deepgram_tts_url,
        sarvam_tts_url=endpoints.sarvam_tts_url,
        llm_model=server.model_name,
        llm_settings=engine_llm_settings(server),
    )


async def engine_token_count(server, text: str) -> int | None:
    """The engine's own token count of ``text`` (llama-cpp-python's ``/extras/tokenize``)."""
    url = server.base_url.removesuffix("/v1") + "/extras/tokenize"
    try:
        async with aiohttp.ClientSession() as http:
            async with http.post(url, json={"input": text}) as response:
                return len((await response.json())["tokens"])
    except Exception as e:  # informational only
        logger.warning(f"could not count engine tokens: {e}")
        return None


async def other_caller(server) -> None:
    """Send another caller's short request, so the next call starts cold.

    The engine keeps only the previous request's prefix, as a busy shared engine would.
    """
    url = server.base_url + "/chat/completions"
    body = {
        "model": server.model_name,
        "messages": [{"role": "user", "content": "Another caller, another prompt entirely."}],
        **engine_request_body(server),
    }
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json=body) as response:
            await response.read()


def engine_request_body(server) -> dict:
    """The engine's request fields (``max_tokens``, ``seed``, ``logit_bias``), as JSON."""
    return server.request_settings(max_tokens=1).request_params()


def run(args: argparse.Namespace) -> int:
    """Run the pipeline bench; bad call material or arguments are a one-line error (exit 2)."""
    quiet_logs(args.verbose)
    try:
        return asyncio.run(_bench(args))
    except (CallScriptError, ValueError) as e:
        console.print(f"[red]error:[/red] {e}")
        return 2
