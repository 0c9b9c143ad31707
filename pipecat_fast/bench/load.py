"""``pipecat-fast bench load``: K concurrent callers sharing one LLM engine, per configuration.

Each *episode* runs K callers of one configuration at once, staggered ``--stagger-s`` apart,
against one shared engine: the real ``llama-server`` (continuous batching, ``--slots``) or the
OpenAI emulator as one engine with stated capacity (:mod:`pipecat_fast.testing.capacity`).
``--full`` of the K callers go through their own real Pipecat pipeline (caller audio at real
time, Silero VAD, Smart Turn v3, Deepgram STT and Cartesia TTS emulators; TTFA measured), the
others are background callers (:mod:`pipecat_fast.bench.load_callers`): the same scripts'
requests sent straight to the engine when the levers would send them, without the audio models
that would otherwise take the cores the engine needs. Episodes are interleaved: every round runs
every K and every configuration, the configurations' order rotating from round to round.

Every caller's system prompt opens with its own caller record, unique per episode, so no call
reads another's prefix (nor one left in the engine's cache by an earlier episode). A metering
proxy between the callers and the engine (:mod:`pipecat_fast.testing.metering_proxy`, its own
process) records every request; the levers' shared load probe reads the engine directly.

Per configuration and K the report gives TTFA p50/p95 of the full pipelines with paired ratios
to ``stock`` at the same K, every caller's first token after end of speech, the engine's queue
time, prompt tokens computed per answered turn, the speculative share of requests and tokens,
how often the levers yielded, and what saturated (the bench process's CPU and event-loop lag,
the engine's CPU and busy share).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import sys
import time
import zlib
from pathlib import Path
from typing import Any

from loguru import logger

from pipecat_fast import _signals
from pipecat_fast.bench.calls import CallScriptError
from pipecat_fast.bench.configs import BenchConfig
from pipecat_fast.bench.emulator_process import EmulatorProcess
from pipecat_fast.bench.load_callers import BackgroundCaller, Behaviour
from pipecat_fast.bench.load_report import BASELINE, goals, plot, summarize_load
from pipecat_fast.bench.material import bench_calls
from pipecat_fast.bench.output import console, quiet_logs
from pipecat_fast.bench.pipeline import BenchCall, Endpoints, PipelineSpec
from pipecat_fast.bench.runner import CallResult, run_call, turn_rows, warm_up
from pipecat_fast.load import EngineLoad, YieldConfig
from pipecat_fast.testing.capacity import EngineCapacity
from pipecat_fast.testing.metering_proxy import CALLER_HEADER, MeteringProxyProcess
from pipecat_fast.tokens import truncate_tokens
from pipecat_fast.ttfa import write_json
from pipecat_fast.ttfa.core import percentile

BEHAVIOURS: dict[str, Behaviour] = {
    "stock": Behaviour(),
    "prefill": Behaviour(prefill=True),
    "draft": Behaviour(prefill=True, draft=True),
    "prefill-greedy": Behaviour(prefill=True, yields=False),
    "draft-greedy": Behaviour(prefill=True, draft=True, yields=False),
}
DESCRIPTIONS = {
    "stock": "stock Pipecat 1.14 pipeline (the baseline)",
    "prefill": "stabiliser + speculative prefill, yielding to the engine's load",
    "draft": "prefill + draft-and-hold, both yielding to the engine's load",
    "prefill-greedy": "prefill that never yields (the lever as it was)",
    "draft-greedy": "prefill + draft-and-hold that never yield",
}
DEFAULT_CONFIGS = "stock,prefill,draft,prefill-greedy,draft-greedy"
NAMES = ("Ana Ruiz", "Ben Okafor", "Chen Wei", "Dara Kelly", "Eli Cohen", "Fatima Zahra")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``pipecat-fast bench load``."""
    parser.add_argument(
        "--engine",
        default="llama-server",
        choices=("llama-server", "emulator"),
        help="the shared engine: llama.cpp's llama-server (the engine extra) or the OpenAI "
        "emulator with a capacity model",
    )
    parser.add_argument("--k", default="1,2,4,8", help="concurrent callers per episode")
    parser.add_argument(
        "--configs", default=DEFAULT_CONFIGS, help=f"baseline first; known: {', '.join(BEHAVIOURS)}"
    )
    parser.add_argument("--rounds", type=int, default=2, help="times every (K, config) runs")
    parser.add_argument(
        "--full", type=int, default=2, help="callers per episode through a full pipeline"
    )
    parser.add_argument("--stagger-s", type=float, default=1.5, help="between callers' starts")
    parser.add_argument("--turns", type=int, default=3, help="utterances per call (from the start)")
    parser.add_argument("--slots", type=int, default=4, help="the engine's parallel sequences")
    parser.add_argument(
        "--threads", type=int, default=1, help="llama-server: CPU threads (the rest for callers)"
    )
    parser.add_argument("--engine-model", default="small", choices=("small", "bench"))
    parser.add_argument(
        "--engine-prompt-tokens",
        type=int,
        default=1000,
        help="llama-server: the system prompt cut to this many o200k tokens, tools dropped",
    )
    parser.add_argument(
        "--prefill-tokens-per-s",
        type=float,
        default=2000.0,
        help="emulator: the engine's prefill throughput, shared by every request",
    )
    parser.add_argument(
        "--reply-tokens", type=int, default=24, help="emulator: replies cut to this many tokens"
    )
    parser.add_argument("--out", type=Path, default=Path("reports/load.json"))
    parser.add_argument("--plot", type=Path, default=None, help="PNG (default: next to --out)")
    parser.add_argument("--verbose", action="store_true", help="show Pipecat's debug log")


def parse_ks(text: str) -> list[int]:
    """``"1,2,4"`` as ``[1, 2, 4]``.

    Raises:
        ValueError: For a K below 1 or not a number.
    """
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"--k takes comma-separated caller counts, got {text!r}") from None
    if not ks or ks[0] < 1:
        raise ValueError(f"--k needs caller counts >= 1, got {text!r}")
    return ks


def full_positions(k: int, full: int) -> list[int]:
    """Which of K staggered callers run a full pipeline: spread out, the last one included."""
    full = max(1, min(full, k))
    step = k / full
    return sorted({k - 1 - int(j * step) for j in range(full)})


def caller_call(call: BenchCall, label: str) -> BenchCall:
    """``call`` with this caller's own record opening its system prompt (a unique prefix)."""
    account = zlib.crc32(label.encode()) % 1_000_000
    name = NAMES[account % len(NAMES)]
    record = (
        f"Caller record: {name}, patient account {account:06d}, reference {label}. "
        "Greet the caller by name when it fits.\n\n"
    )
    return dataclasses.replace(call, system_prompt=record + call.system_prompt)


def caller_endpoints(endpoints: Endpoints, label: str) -> Endpoints:
    """The endpoints with this caller's ``X-PF-Caller`` header on every LLM request."""
    settings = dict(endpoints.llm_settings)
    extra = dict(settings.get("extra") or {})
    extra["extra_headers"] = {**(extra.get("extra_headers") or {}), CALLER_HEADER: label}
    settings["extra"] = extra
    return dataclasses.replace(endpoints, llm_settings=settings)


def full_config(name: str, behaviour: Behaviour, load: EngineLoad) -> BenchConfig:
    """The Pipecat pipeline configuration of ``behaviour``, yielding to ``load``."""
    yield_config = YieldConfig(
        enabled=behaviour.yields, reuses_unfinished=behaviour.reuses_unfinished
    )

    def customize(spec: PipelineSpec) -> None:
        if behaviour.prefill:
            from pipecat_fast.prefill import SpeculativePrefill
            from pipecat_fast.stabilizer import TwoUpdateStabilizer

            spec.after_stt.append(TwoUpdateStabilizer())
            spec.before_llm.append(
                SpeculativePrefill(
                    spec.llm, context=spec.context, load=load, yield_config=yield_config
                )
            )
        if behaviour.draft:
            from pipecat.turns.user_turn_strategies import UserTurnStrategies

            from pipecat_fast.prefill import DraftAndHoldUserTurnStopStrategy

            spec.user_params.user_turn_strategies = UserTurnStrategies(
                stop=[DraftAndHoldUserTurnStopStrategy(load=load, yield_config=yield_config)]
            )

    return BenchConfig(name, DESCRIPTIONS.get(name, name), customize)


class Monitor:
    """Samples the engine's load, the event loop's lag and the processes' CPU during an episode.

    Args:
        load: The shared engine load (its probe's readings).
        pids: Other processes whose CPU counts (``{"engine": pid, ...}``).
        interval_s: Sampling interval (s).
    """

    def __init__(self, load: EngineLoad, pids: dict[str, int | None], interval_s: float = 0.1):
        self.load = load
        self.pids = {k: v for k, v in pids.items() if v}
        self.interval_s = interval_s
        self.running: list[int] = []
        self.waiting: list[int] = []
        self.lags: list[float] = []
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        """Start sampling."""
        self._wall = time.monotonic()
        self._cpu = time.process_time()
        self._proc_cpu = {k: _proc_cpu_s(p) for k, p in self.pids.items()}
        self._task = asyncio.create_task(self._sample())

    async def _sample(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(self.interval_s)
            self.lags.append(max(0.0, time.monotonic() - before - self.interval_s) * 1000.0)
            reading = self.load.reading
            if reading is not None and time.monotonic() - reading.at_s < 2.0:
                self.running.append(reading.running or 0)
                self.waiting.append(reading.waiting or 0)

    async def stop(self) -> dict[str, Any]:
        """Stop; the episode's figures."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        wall = max(1e-6, time.monotonic() - self._wall)
        out: dict[str, Any] = {
            "wall_s": round(wall, 1),
            "bench_cpu": round((time.process_time() - self._cpu) / wall, 3),
            "loop_lag_p95_ms": round(percentile(self.lags, 95), 1) if self.lags else None,
            "engine_busy": round(sum(1 for r in self.running if r) / len(self.running), 3)
            if self.running
            else None,
            "running_mean": round(sum(self.running) / len(self.running), 2)
            if self.running
            else None,
            "waiting_mean": round(sum(self.waiting) / len(self.waiting), 2)
            if self.waiting
            else None,
            "waiting_max": max(self.waiting) if self.waiting else None,
            "loadavg_1m": round(os.getloadavg()[0], 2),
        }
        for name, pid in self.pids.items():
            before, after = self._proc_cpu.get(name), _proc_cpu_s(pid)
            out[f"{name}_cpu"] = (
                round((after - before) / wall, 3)
                if before is not None and after is not None
                else None
            )
        return out


def _proc_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a process (``/proc/<pid>/stat``), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


@dataclasses.dataclass
class Setup:
    """What every episode shares."""

    calls: list[BenchCall]
    endpoints: Endpoints
    load: EngineLoad
    proxy: MeteringProxyProcess
    emulators: EmulatorProcess
    pids: dict[str, int | None]
    full: int
    stagger_s: float
    interval_s: float
    reset_llm: bool
    reuses_unfinished: bool | None = None
    """Told to the levers: the emulator's engine never lets a request read a running prefill
    (its prefix cache takes a prompt once computed, a cancelled one leaves nothing); for
    llama-server the registry says so."""


async def run_episode(setup: Setup, k: int, config: str, round_: int) -> dict[str, Any]:
    """K callers of ``config`` at once; returns the episode's rows and figures."""
    behaviour = dataclasses.replace(BEHAVIOURS[config], reuses_unfinished=setup.reuses_unfinished)
    await setup.proxy.reset()
    if setup.reset_llm:
        await setup.emulators.reset_llm()
    full = set(full_positions(k, setup.full))
    bench_config = full_config(config, behaviour, setup.load)
    await setup.load.acquire()  # the probe reads the engine in every configuration alike
    monitor = Monitor(setup.load, setup.pids)
    monitor.start()

    async def caller(position: int):
        label = f"r{round_}-k{k}-{config}-p{position}-{'full' if position in full else 'bg'}"
        call = caller_call(setup.calls[(position + round_) % len(setup.calls)], label)
        endpoints = caller_endpoints(setup.endpoints, label)
        await asyncio.sleep(position * setup.stagger_s)
        if position in full:
            return await run_call(call, bench_config, endpoints, repeat=round_, slot=position)
        speculates = behaviour.prefill or behaviour.draft
        return await BackgroundCaller(
            call,
            endpoints,
            behaviour,
            load=setup.load if speculates else None,
            label=label,
            interval_s=setup.interval_s,
        ).run()

    try:
        results = await asyncio.gather(*(caller(p) for p in range(k)), return_exceptions=True)
    finally:
        figures = await monitor.stop()
        await setup.load.release()
    records = await setup.proxy.records()
    errors = []
    full_results: list[CallResult] = []
    background = []
    for position, result in enumerate(results):
        if isinstance(result, BaseException):
            errors.append(f"caller {position}: {type(result).__name__}: {result}")
        elif isinstance(result, CallResult):
            full_results.append(result)
            if result.error:
                errors.append(f"caller {position} ({result.call}): {result.error}")
        else:
            background.append(result)
            errors += [f"caller {position} ({result.call}): {e}" for e in result.errors]
    tag = {"config": config, "k": k, "round": round_}
    turns = [{**row, **tag} for row in turn_rows(full_results)]
    bg_rows = [
        {**tag, "caller": b.caller, "call": b.call, **dataclasses.asdict(t)}
        for b in background
        for t in b.turns
    ]
    return {
        "turns": turns,
        "background": bg_rows,
        "requests": [{**r, **tag} for r in records],
        "episode": {**tag, **figures, "errors": errors},
    }


@contextlib.asynccontextmanager
async def _engine(args: argparse.Namespace, emulators: EmulatorProcess):
    """``(root URL, pid, model name, request settings)`` of the shared engine."""
    if args.engine == "emulator":
        root = emulators.urls["llm_base_url"].removesuffix("/v1")
        proc = emulators._proc
        yield (
            root,
            proc.pid if proc is not None else None,
            "gpt-4.1-mini",
            {"max_tokens": args.reply_tokens},
        )
        return
    from pipecat_fast.testing.llama_cpp_server import LlamaServer

    async with LlamaServer(
        size=args.engine_model, slots=args.slots, n_threads=args.threads
    ) as server:
        settings = server.request_settings().openai_settings_fields()
        yield server.root_url, server.pid, server.model_name, settings


async def _bench(args: argparse.Namespace) -> int:
    ks = parse_ks(args.k)
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in configs if c not in BEHAVIOURS]
    if unknown:
        raise ValueError(
            f"unknown load configuration(s) {', '.join(unknown)}; known: {', '.join(BEHAVIOURS)}"
        )
    if not configs or configs[0] != BASELINE:
        configs = [BASELINE, *[c for c in configs if c != BASELINE]]
    if args.rounds < 1 or args.full < 1 or args.turns < 1 or args.slots < 1:
        raise ValueError("--rounds, --full, --turns and --slots must be at least 1")
    interval_s = 0.25  # same-region's interim interval (profiles.SAME_REGION)
    calls = [
        c.only(range(min(args.turns, len(c.utterances))))
        for c in bench_calls(None, revisions_interval_s=interval_s)
    ]
    if args.engine == "llama-server":
        for call in calls:
            call.system_prompt = truncate_tokens(call.system_prompt, args.engine_prompt_tokens)
            call.tools = []
    capacity = (
        EngineCapacity(args.slots, args.prefill_tokens_per_s) if args.engine == "emulator" else None
    )
    started = time.time()
    episodes_total = args.rounds * len(ks) * len(configs)
    console.print(
        f"[bold]pipecat-fast bench load[/bold]: {args.engine} ({args.slots} slots), K "
        f"{','.join(map(str, ks))}, {', '.join(configs)}, {args.rounds} rounds, "
        f"{args.full} full pipelines per episode ({episodes_total} episodes)"
    )
    out: dict[str, list] = {"turns": [], "background": [], "requests": [], "episodes": []}
    async with contextlib.AsyncExitStack() as stack:
        emulators = await stack.enter_async_context(
            EmulatorProcess("same-region", calls, llm_capacity=capacity)
        )
        root, engine_pid, model, settings = await stack.enter_async_context(
            _engine(args, emulators)
        )
        proxy = await stack.enter_async_context(MeteringProxyProcess(root))
        urls = dict(emulators.urls)
        urls["llm_base_url"] = proxy.url + "/v1"
        endpoints = Endpoints(**urls, llm_model=model, llm_settings=settings)
        load = EngineLoad.shared(root)
        await warm_up(endpoints)
        pids = {"engine": engine_pid, "proxy": proxy.pid}
        if args.engine == "llama-server":
            pids["emulators"] = emulators._proc.pid if emulators._proc else None
        setup = Setup(
            calls,
            endpoints,
            load,
            proxy,
            emulators,
            pids,
            args.full,
            args.stagger_s,
            interval_s,
            reset_llm=args.engine == "emulator",
            reuses_unfinished=False if args.engine == "emulator" else None,
        )
        done = 0
        for round_ in range(args.rounds):
            for k in ks:
                shift = (round_ + k) % len(configs)
                for config in configs[shift:] + configs[:shift]:
                    episode = await run_episode(setup, k, config, round_)
                    for key in out:
                        value = episode[key[:-1]] if key == "episodes" else episode[key]
                        out[key] += [value] if key == "episodes" else value
                    done += 1
                    figures = episode["episode"]
                    ttfa = [t["ttfa_ms"] for t in episode["turns"] if t.get("ttfa_ms")]
                    console.print(
                        f"[{done}/{episodes_total}] round {round_} K={k} {config}: TTFA "
                        f"{', '.join(f'{v:.0f}' for v in ttfa) or '-'} ms; engine busy "
                        f"{figures.get('engine_busy')}, waiting max {figures.get('waiting_max')}, "
                        f"bench CPU {figures['bench_cpu']:.0%}, loop lag p95 "
                        f"{figures['loop_lag_p95_ms']} ms, engine CPU {figures.get('engine_cpu')}"
                        + (
                            f"; [red]{len(figures['errors'])} errors[/red]"
                            if figures["errors"]
                            else ""
                        )
                    )
        probe = load.summary()
    table = summarize_load(
        out["turns"], out["background"], out["requests"], out["episodes"], configs, ks
    )
    report = {
        "engine": args.engine if args.engine == "emulator" else f"llama-server/{args.engine_model}",
        "slots": args.slots,
        "k": ks,
        "configs": configs,
        "baseline": BASELINE,
        "rounds": args.rounds,
        "full_pipelines": args.full,
        "stagger_s": args.stagger_s,
        "turns_per_call": args.turns,
        "capacity": dataclasses.asdict(capacity) if capacity else None,
        "threads": args.threads if args.engine == "llama-server" else None,
        "engine_prompt_tokens": args.engine_prompt_tokens
        if args.engine == "llama-server"
        else None,
        "command": "pipecat-fast bench load "
        + " ".join(sys.argv[3:] if sys.argv[1:3] == ["bench", "load"] else sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "wall_s": round(time.time() - started)},
        "table": table,
        "goals": goals(table, ks),
        "probe": probe,
        **out,
        "errors": [e for ep in out["episodes"] for e in ep["errors"]],
    }
    write_json(args.out, report)
    png = args.plot or args.out.with_suffix(".png")
    plot(report, png)
    console.print(load_table(report))
    console.print(f"wrote {args.out} and {png}")
    return 0


def load_table(report: dict[str, Any]):
    """The rich table: one row per configuration and K."""
    from rich.table import Table

    table = Table(
        title=f"bench load: {report['engine']}, {report['slots']} slots", title_justify="left"
    )
    for column in (
        "config",
        "K",
        "TTFA p50",
        "p95",
        "ratio p50",
        "p95",
        "p50 first / later",
        "reply p95",
        "queue p95",
        "tokens/turn",
        "spec share",
        "yielded",
        "cancelled d/c",
        "first-turn prefill (not sent by)",
        "prefill decisions",
        "engine busy",
        "bench CPU",
    ):
        table.add_column(column, justify="right")

    def ms(v):
        return "-" if v is None else f"{v:.0f}"

    def r(v):
        return "-" if v is None else f"{v:.3f}"

    for config in report["configs"]:
        for k in report["k"]:
            f = report["table"][config].get(str(k), {})
            asked = (f.get("prefills") or 0) + (f.get("prefills_yielded") or 0)
            yielded = f"{f.get('prefills_yielded', 0)}/{asked}" if asked else "-"
            table.add_row(
                config,
                str(k),
                ms(f.get("ttfa_p50_ms")),
                ms(f.get("ttfa_p95_ms")),
                r(f.get("ratio_p50")),
                r(f.get("ratio_p95")),
                kinds_text(f.get("by_turn")),
                ms(f.get("reply_p95_ms")),
                ms(f.get("queue_p95_ms")),
                ms(f.get("computed_per_turn")),
                r(f.get("speculative_share")),
                yielded,
                f"{f.get('prefills_cancelled_dispatched', 0)}/"
                f"{f.get('prefills_cancelled_contended', 0)}",
                first_turn_text(f.get("first_turn_prefill")),
                counts_text(f.get("prefill_decisions")),
                r(f.get("engine_busy")),
                r(f.get("bench_cpu")),
            )
    return table


def kinds_text(by_turn: dict[str, Any] | None) -> str:
    """The first and later turns' paired p50 ratios, ``"0.890 / 0.840"``."""
    if not by_turn:
        return "-"
    values = [(by_turn.get(kind) or {}).get("ratio_p50") for kind in ("first", "later")]
    return " / ".join("-" if v is None else f"{v:.3f}" for v in values)


def counts_text(counts: dict[str, int] | None) -> str:
    """``{"busy": 2, "sent": 5}`` as ``"sent 5, busy 2"`` (``sent`` first, then by count)."""
    if not counts:
        return "-"
    items = sorted(counts.items(), key=lambda kv: (kv[0] != "sent", -kv[1], kv[0]))
    return ", ".join(f"{k} {v}" for k, v in items)


def first_turn_text(first: dict[str, Any] | None) -> str:
    """The first-turn prefill column: ``"2 of 6 (cannot_finish 3, busy 1)"``."""
    if not first:
        return "-"
    text = f"{first['sent']} of {first['turns']}"
    if first.get("not_sent_by"):
        text += f" ({counts_text(first['not_sent_by'])})"
    return text


def run(args: argparse.Namespace) -> int:
    """Run the load bench; bad arguments or call material are a one-line error (exit 2)."""
    quiet_logs(args.verbose)
    try:
        return _signals.run(_bench(args))
    except (CallScriptError, ValueError) as e:
        console.print(f"[red]error:[/red] {e}")
        return 2
    except RuntimeError as e:  # an engine or helper process that would not start
        logger.debug(f"bench load: {e!r}")
        console.print(f"[red]error:[/red] {str(e).splitlines()[0]}")
        return 2
