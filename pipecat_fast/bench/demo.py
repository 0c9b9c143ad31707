"""``pipecat-fast demo``: real caller audio through a real Pipecat pipeline, TTFA per turn.

The caller's utterances (espeak-ng recordings shipped as fixtures) play at real-time pace
through Silero VAD and Smart Turn v3, ``DeepgramSTTService``, ``OpenAILLMService`` and
``CartesiaTTSService`` — the real Pipecat services — talking to loopback emulators of those
providers (no network, no keys). ``--real`` runs the same pipeline against the real providers
with the keys in the environment.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from pipecat_fast.bench.calls import CallScriptError
from pipecat_fast.bench.configs import CONFIGS
from pipecat_fast.bench.emulator_process import EmulatorProcess
from pipecat_fast.bench.material import bench_calls
from pipecat_fast.bench.output import console, progress_line, quiet_logs, summary_table, turns_table
from pipecat_fast.bench.pipeline import Endpoints
from pipecat_fast.bench.runner import build_report, run_call, warm_up
from pipecat_fast.testing.profiles import PROFILES, get_profile
from pipecat_fast.ttfa import waterfall_png, write_json

REAL_KEYS = ("DEEPGRAM_API_KEY", "OPENAI_API_KEY", "CARTESIA_API_KEY")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``pipecat-fast demo``."""
    parser.add_argument("--calls", type=int, default=3, help="number of calls (default 3)")
    parser.add_argument("--profile", default="same-region", choices=sorted(PROFILES))
    parser.add_argument("--out", type=Path, default=Path("reports/demo.json"))
    parser.add_argument("--png", type=Path, default=Path("reports/demo_waterfall.png"))
    parser.add_argument(
        "--real",
        action="store_true",
        help=f"use the real providers ({', '.join(REAL_KEYS)} must be set; "
        "CARTESIA_VOICE_ID optional)",
    )
    parser.add_argument("--verbose", action="store_true", help="show Pipecat's debug log")


def real_endpoints() -> Endpoints:
    """Endpoints of the real providers, keys from the environment (never printed).

    Raises:
        SystemExit: If a key is missing (the message names it, not its value).
    """
    missing = [k for k in REAL_KEYS if not os.environ.get(k)]
    if missing:
        raise SystemExit(f"--real needs these environment variables: {', '.join(missing)}")
    return Endpoints.real(
        stt_api_key=os.environ["DEEPGRAM_API_KEY"],
        llm_api_key=os.environ["OPENAI_API_KEY"],
        tts_api_key=os.environ["CARTESIA_API_KEY"],
        tts_voice=os.environ.get("CARTESIA_VOICE_ID"),
    )


async def _demo(args: argparse.Namespace) -> int:
    profile = get_profile(args.profile)
    calls = bench_calls(
        args.calls,
        large_prompt=profile.prompt == "large",
        revisions_interval_s=profile.stt_interim_interval_ms / 1000.0,
    )
    config = CONFIGS["stock"]
    results = []
    console.print(
        f"[bold]pipecat-fast demo[/bold]: {len(calls)} calls, stock Pipecat pipeline, "
        f"{'real providers' if args.real else f'emulated providers ({profile.name})'}"
    )
    if args.real:
        endpoints = real_endpoints()
        for i, call in enumerate(calls, 1):
            results.append(await run_call(call, config, endpoints))
            console.print(progress_line(results[-1], i, len(calls)))
    else:
        async with EmulatorProcess(profile.name, calls) as emulators:
            endpoints = Endpoints(**emulators.urls)
            await warm_up(endpoints)
            for i, call in enumerate(calls, 1):
                await emulators.reset_llm()
                results.append(await run_call(call, config, endpoints))
                console.print(progress_line(results[-1], i, len(calls)))
    for result in results:
        console.print(turns_table(result, f"{result.call}: blocking time per stage, ms"))
    report = build_report(results, "stock", profile=profile.name, real=args.real)
    console.print(summary_table(report, "TTFA over all turns"))
    write_json(args.out, report)
    turns = [t for r in results for t in r.turns]
    waterfall_png(args.png, turns, title=f"Stock Pipecat, {profile.name}: TTFA per turn")
    console.print(f"wrote {args.out} and {args.png}")
    return 1 if any(r.error for r in results) else 0


def run(args: argparse.Namespace) -> int:
    """Run the demo; a broken call script or audio file is a one-line error (exit 2)."""
    quiet_logs(args.verbose)
    try:
        return asyncio.run(_demo(args))
    except CallScriptError as e:
        console.print(f"[red]call material error:[/red] {e}")
        return 2
