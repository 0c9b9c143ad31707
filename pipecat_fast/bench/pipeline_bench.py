"""``pipecat-fast bench``: named pipeline configurations side by side, TTFA p50/p95 and ratios.

Every call runs through every configuration, alternating configuration call by call
(A B A B ...), on the same emulated providers (or the real llama.cpp engine with
``--engine llama-cpp``). Ratios are each configuration's p50/p95 TTFA over the baseline's
(the first configuration), measured in the same run over the turns every configuration
answered.

On the engine, the bench first measures the engine's prefill rate on the call's prompt and
sizes the caller's patience to it (:func:`size_to_engine`), so a slower CPU gives the same
turns, slower, rather than turns the caller talks over. What each configuration made the engine
compute comes from the engine's own log, one record per request it started, completed or
abandoned (:class:`pipecat_fast.testing.engine_log.EngineRequest`).
"""

from __future__ import annotations

import argparse
import contextlib
import math
from pathlib import Path

import aiohttp

from pipecat_fast import _signals
from pipecat_fast.bench.calls import CallScriptError
from pipecat_fast.bench.configs import CONFIGS, get_configs
from pipecat_fast.bench.emulator_process import EmulatorProcess
from pipecat_fast.bench.material import bench_calls
from pipecat_fast.bench.output import (
    compute_table,
    console,
    first_turn_line,
    print_problem,
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

DEFAULT_PATIENCE_S = 15.0
"""How long the bench's caller waits for a reply to start (``BenchCall.patience_s``)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``pipecat-fast bench [pipeline]``."""
    parser.add_argument(
        "--configs",
        default=DEFAULT_CONFIGS,
        help=f"comma-separated, baseline first (default {DEFAULT_CONFIGS}; known: "
        f"{', '.join(CONFIGS)})",
    )
    parser.add_argument(
        "--calls",
        type=int,
        default=None,
        help="calls per configuration (default 3; with --call-ids, one per id)",
    )
    parser.add_argument(
        "--call-ids",
        default=None,
        help="comma-separated call script ids to run, in this order (default: all, cycled)",
    )
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
    parser.add_argument(
        "--patience-s",
        type=float,
        default=None,
        help="how long the caller waits for a reply to start (default: 15 s; on the engine, "
        "sized to its measured prefill rate so the cold first turn is not talked over)",
    )
    parser.add_argument(
        "--engine-log",
        type=Path,
        default=None,
        help="llama-cpp: keep the engine's verbose log here (default: a temporary file)",
    )
    parser.add_argument("--out", type=Path, default=Path("reports/bench.json"))
    parser.add_argument("--verbose", action="store_true", help="show Pipecat's debug log")


def check_engine_installed() -> None:
    """Refuse ``--engine llama-cpp`` at once, in one line, when its extras are missing.

    Raises:
        ValueError: Naming what is missing and the pipecat-fast extra that installs it.
    """
    import importlib.util

    from pipecat_fast.testing.llama_server import llama_cpp_available

    if not llama_cpp_available():
        raise ValueError(
            "--engine llama-cpp needs llama-cpp-python[server]: pip install 'pipecat-fast[llama]'"
        )
    missing = [m for m in ("gguf", "tokenizers") if importlib.util.find_spec(m) is None]
    if missing:
        raise ValueError(
            f"--engine llama-cpp builds its model with {' and '.join(missing)}: "
            "pip install 'pipecat-fast[llama]'"
        )


async def _bench(args: argparse.Namespace) -> int:
    profile = get_profile(args.profile)
    if args.engine == "llama-cpp":
        check_engine_installed()
    configs = get_configs([c.strip() for c in args.configs.split(",") if c.strip()])
    ids = [i.strip() for i in (args.call_ids or "").split(",") if i.strip()] or None
    calls = bench_calls(
        args.calls if args.calls is not None else (None if ids else 3),
        ids=ids,
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
        sizing: dict = {}
        if args.engine == "llama-cpp":
            engine = await stack.enter_async_context(
                _llama_engine(args.engine_model, args.engine_log)
            )
            endpoints = engine_endpoints(engine, endpoints)
            sizing = await size_to_engine(engine, calls[0].system_prompt)
            if args.patience_s is not None:
                sizing["caller_patience_s"] = args.patience_s
                sizing["patience_given"] = True
            console.print(
                f"engine: {sizing['prompt_engine_tokens']}-token prompt ({engine.model_name}), "
                f"prefill {sizing['prefill_tokens_per_s']:.0f} tokens/s here, cold first turn "
                f"~{sizing['predicted_cold_ttft_s']:.1f} s: the caller waits up to "
                f"{sizing['caller_patience_s']:.0f} s for a reply"
            )
        patience = sizing.get("caller_patience_s", args.patience_s or DEFAULT_PATIENCE_S)
        for call in calls:
            call.patience_s = patience
        await warm_up(endpoints)
        seen = 0
        unattributed: list = []  # engine: results whose requests are not all logged yet

        def attribute_engine_requests(close_with_marker: bool) -> None:
            # Every request the engine started since the call began, completed or abandoned;
            # with the marker request (another caller's) last, which is not the call's.
            nonlocal seen
            log = engine.engine_log()
            end = len(log.requests) - (1 if close_with_marker else 0)
            for result in unattributed:
                result.llm_requests = [r.as_record() for r in log.requests[seen:end]]
            unattributed.clear()
            seen = len(log.requests)

        async def before_call(config, call, repeat):
            if args.llm_cache == "cold":
                if engine is not None:
                    # Queues behind whatever the last call left running, so every request of
                    # that call is logged by the time it returns.
                    await other_caller(engine)
                    attribute_engine_requests(close_with_marker=True)
                else:
                    await emulators.reset_llm()

        async def after_call(result):
            nonlocal seen
            if engine is not None:
                # The engine reports no usage: its own log says what it prefilled.
                unattributed.append(result)
                if args.llm_cache != "cold":
                    attribute_engine_requests(close_with_marker=False)
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
        if engine is not None and unattributed:
            await other_caller(engine)
            attribute_engine_requests(close_with_marker=True)
    report = build_report(
        results,
        configs[0].name,
        profile=profile.name,
        engine=args.engine if args.engine == "emulator" else f"llama-cpp/{args.engine_model}",
        llm_cache=args.llm_cache,
        ring_s=args.ring_s,
        order="interleaved call by call",
        **({"engine_sizing": sizing, "engine_accounting": ENGINE_ACCOUNTING} if sizing else {}),
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
async def _llama_engine(size: str, log_path: Path | None = None):
    """The real llama.cpp engine on a generated model (see docs/engine.md)."""
    from pipecat_fast.testing.gguf_model import ensure_model
    from pipecat_fast.testing.llama_server import LlamaCppServer

    async with LlamaCppServer(ensure_model(size), log_path=log_path) as server:
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


ENGINE_ACCOUNTING = (
    "from the engine's verbose log: one record per request it started, completed or abandoned "
    "mid-stream (an abandoned reply logs its prefill but no timing); cached_tokens are its "
    "prefix-match reuse; a request is speculative when it completed after generating at most "
    "one token (max_tokens=1)"
)


async def size_to_engine(server, system_prompt: str) -> dict:
    """Measure the engine's prefill rate on the call's prompt and size the caller's patience.

    One cold ``max_tokens=1`` request with the system prompt: the engine's log says how many
    tokens it prefilled and how long that took. The cold first turn of a call prefills about as
    much, so the caller waits at least twice that plus 5 s (and never less than
    :data:`DEFAULT_PATIENCE_S`): a slower CPU gives the same turns, slower.

    Returns:
        ``prompt_engine_tokens``, ``prefill_tokens_per_s``, ``predicted_cold_ttft_s``,
        ``caller_patience_s``.
    """
    await other_caller(server)  # whatever the engine holds, this prompt starts cold
    before = len(server.engine_log().timings)
    url = server.base_url + "/chat/completions"
    body = {
        "model": server.model_name,
        "messages": [
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": "Hello?"},
        ],
        **engine_request_body(server),
    }
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json=body) as response:
            await response.read()
    timings = server.engine_log().timings[before:]
    if not timings or timings[-1].prompt_eval_ms <= 0:
        raise RuntimeError("the engine logged no prefill timing for the sizing request")
    t = timings[-1]
    rate = t.prompt_eval_tokens / (t.prompt_eval_ms / 1000.0)
    cold_s = t.prompt_eval_tokens / rate
    patience = max(DEFAULT_PATIENCE_S, float(math.ceil(2 * cold_s + 5)))
    return {
        "prompt_engine_tokens": t.prompt_eval_tokens,
        "prefill_tokens_per_s": round(rate, 1),
        "predicted_cold_ttft_s": round(cold_s, 2),
        "caller_patience_s": patience,
    }


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
    from pipecat_fast.testing.llama_server import LlamaServerError

    try:
        return _signals.run(_bench(args))
    except (CallScriptError, ValueError) as e:
        print_problem("error", e)
        return 2
    except LlamaServerError as e:  # the engine would not start: say why in a few lines
        print_problem("error", f"the llama.cpp engine did not start: {e}")
        return 2
