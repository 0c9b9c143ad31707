"""``pipecat-fast demo``: stock Pipecat and pipecat-fast side by side on the same calls.

The caller's utterances (synthesized with espeak-ng, shipped as fixtures) play at real-time pace
through Silero VAD and Smart Turn v3, ``DeepgramSTTService``, ``OpenAILLMService`` and
``CartesiaTTSService`` — the real Pipecat services — talking to loopback emulators of those
providers (no network, no keys). Each call runs twice, first through the stock pipeline, then
through ``all``, the best composition of levers (:mod:`pipecat_fast.bench.configs`). The demo
prints TTFA per turn for both, the p50/p95 ratio over the turns both answered, and draws both
in one waterfall. ``--real`` runs the same against the real providers with the keys in the
environment.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pipecat_fast import _signals
from pipecat_fast.bench.calls import CallScriptError, call_ids
from pipecat_fast.bench.configs import ALL, CONFIGS, get_configs
from pipecat_fast.bench.emulator_process import EmulatorProcess
from pipecat_fast.bench.material import bench_calls
from pipecat_fast.bench.output import (
    console,
    paired_turns_table,
    print_problem,
    progress_line,
    quiet_logs,
    summary_table,
)
from pipecat_fast.bench.pipeline import Endpoints
from pipecat_fast.bench.runner import build_report, run_interleaved, warm_up
from pipecat_fast.testing.profiles import PROFILES, get_profile
from pipecat_fast.ttfa import waterfall_png, write_json

REAL_KEYS = ("DEEPGRAM_API_KEY", "OPENAI_API_KEY", "CARTESIA_API_KEY")

DEMO_CALLS = ("reschedule", "family_languages", "book_cleaning", "ask_prices", "cancel_spanish")
"""The demo's call order: ``reschedule`` first (a caller who pauses mid-utterance), then
``family_languages`` (replies in Hindi and Japanese for the aggregator)."""

DEFAULT_CONFIGS = "stock,all"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``pipecat-fast demo``."""
    parser.add_argument(
        "--calls", type=int, default=2, help="number of calls (default 2: about 2.5 minutes)"
    )
    parser.add_argument(
        "--configs",
        default=DEFAULT_CONFIGS,
        help=f"comma-separated, baseline first (default {DEFAULT_CONFIGS}; known: "
        f"{', '.join(CONFIGS)})",
    )
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


def demo_call_ids(n: int) -> list[str]:
    """The first ``n`` calls of :data:`DEMO_CALLS` (cycling), among the shipped ones."""
    if n < 1:
        raise ValueError("the number of calls must be at least 1")
    shipped = set(call_ids())
    order = [c for c in DEMO_CALLS if c in shipped] + sorted(shipped - set(DEMO_CALLS))
    return [order[i % len(order)] for i in range(n)]


async def _demo(args: argparse.Namespace) -> int:
    profile = get_profile(args.profile)
    configs = get_configs([c.strip() for c in args.configs.split(",") if c.strip()])
    calls = bench_calls(
        ids=demo_call_ids(args.calls),
        large_prompt=profile.prompt == "large",
        revisions_interval_s=profile.stt_interim_interval_ms / 1000.0,
    )
    where = "real providers" if args.real else f"emulated providers ({profile.name})"
    members = f" (all = {' + '.join(ALL)})" if "all" in [c.name for c in configs] else ""
    console.print(
        f"[bold]pipecat-fast demo[/bold]: {len(calls)} calls through "
        f"{' and '.join(c.name for c in configs)}{members}, {where}"
    )
    total = len(calls) * len(configs)
    done = 0

    def on_result(result):
        nonlocal done
        done += 1
        console.print(progress_line(result, done, total))

    if args.real:
        results = await run_interleaved(calls, configs, real_endpoints(), on_result=on_result)
    else:
        async with EmulatorProcess(profile.name, calls) as emulators:
            endpoints = Endpoints(**emulators.urls)
            await warm_up(endpoints)

            async def before_call(config, call, repeat):
                await emulators.reset_llm()

            results = await run_interleaved(
                calls, configs, endpoints, before_call=before_call, on_result=on_result
            )
    names = [c.name for c in configs]
    for slot, call in enumerate(calls):
        mine = [r for r in results if r.slot == slot]
        console.print(paired_turns_table(mine, names, f"{call.id}: TTFA per turn, ms"))
    report = build_report(results, names[0], profile=profile.name, real=args.real)
    console.print(summary_table(report, f"TTFA, {' vs '.join(names)}"))
    write_json(args.out, report)
    png = _waterfall(args.png, results, names, profile.name)
    console.print(f"wrote {args.out}" + (f" and {png}" if png else ""))
    return 1 if any(r.error for r in results) else 0


def _waterfall(path: Path, results, names: list[str], profile: str) -> Path | None:
    """Both configurations' turns, each stock bar right above its pipecat-fast bar."""
    rows = []
    for slot in sorted({r.slot for r in results}):
        by_config = {r.config: r for r in results if r.slot == slot}
        turns = max((len(r.outcomes) for r in by_config.values()), default=0)
        for index in range(turns):
            for name in names:
                result = by_config.get(name)
                if result is None or index >= len(result.outcomes):
                    continue
                record = result.outcomes[index].record
                if record is not None:
                    record.extra["label"] = f"{result.call} #{index} {name}"
                    rows.append(record)
    try:
        return waterfall_png(path, rows, title=f"{' vs '.join(names)}, {profile}: TTFA per turn")
    except ImportError as e:
        print_problem("no waterfall PNG", e, style="yellow")
        return None


def run(args: argparse.Namespace) -> int:
    """Run the demo; a broken call script or a bad option is a one-line error (exit 2)."""
    quiet_logs(args.verbose)
    try:
        return _signals.run(_demo(args))
    except (CallScriptError, ValueError) as e:
        print_problem("error", e)
        return 2
