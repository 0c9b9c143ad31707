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

from pipecat_fast.bench.configs import CONFIGS, get_configs
from pipecat_fast.bench.emulator_process import EmulatorProcess
from pipecat_fast.bench.material import bench_calls
from pipecat_fast.bench.output import (
    console,
    progress_line,
    quiet_logs,
    stage_medians,
    summary_table,
)
from pipecat_fast.bench.pipeline import Endpoints
from pipecat_fast.bench.runner import build_report, run_interleaved, warm_up
from pipecat_fast.testing.profiles import PROFILES, get_profile
from pipecat_fast.ttfa import write_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``pipecat-fast bench [pipeline]``."""
    parser.add_argument(
        "--configs",
        default="stock,stock-again",
        help=f"comma-separated, baseline first (known: {', '.join(CONFIGS)})",
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
        "--llm-cache",
        default="cold",
        choices=("cold", "shared"),
        help="emulated LLM prefix cache: emptied before every call (cold), or kept across "
        "calls (shared, as with steady traffic on one prompt)",
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
        if args.engine == "llama-cpp":
            endpoints = await stack.enter_async_context(_llama_engine(endpoints))
        await warm_up(endpoints)

        async def before_call(config, call, repeat):
            if args.engine == "emulator" and args.llm_cache == "cold":
                await emulators.reset_llm()

        seen = 0

        async def after_call(result):
            nonlocal seen
            if args.engine == "emulator":
                records = await emulators.llm_requests()
                if args.llm_cache == "cold":
                    seen = 0  # reset before every call
                result.llm_requests, seen = records[seen:], len(records)

        results = await run_interleaved(
            calls,
            configs,
            endpoints,
            repeats=args.repeats,
            before_call=before_call,
            after_call=after_call,
            on_result=on_result,
        )
    report = build_report(
        results,
        configs[0].name,
        profile=profile.name,
        engine=args.engine,
        llm_cache=args.llm_cache,
        order="interleaved call by call",
        stage_medians_ms={
            c.name: stage_medians([r for r in results if r.config == c.name]) for c in configs
        },
    )
    console.print(summary_table(report, f"TTFA, {profile.name}, {args.engine}"))
    write_json(args.out, report)
    console.print(f"wrote {args.out}")
    return 1 if report["errors"] else 0


@contextlib.asynccontextmanager
async def _llama_engine(endpoints: Endpoints):
    """Swap the LLM for the real llama.cpp engine (bench-size model)."""
    from pipecat_fast.testing.gguf_model import ensure_model
    from pipecat_fast.testing.llama_server import LlamaCppServer, engine_llm_settings

    async with LlamaCppServer(ensure_model("bench")) as server:
        yield Endpoints(
            llm_base_url=server.base_url,
            tts_url=endpoints.tts_url,
            stt_base_url=endpoints.stt_base_url,
            llm_model=server.model_name,
            llm_settings=engine_llm_settings(server),
        )


def run(args: argparse.Namespace) -> int:
    """Run the pipeline bench."""
    quiet_logs(args.verbose)
    return asyncio.run(_bench(args))
