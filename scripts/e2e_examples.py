"""The example bots end to end, as a caller meets them: stock vs every lever, TTFA at the client.

Starts ``examples/twilio_bot.py`` or ``examples/webrtc_bot.py`` with ``--offline`` (Pipecat's
real services against pipecat-fast's loopback emulators, in their own process) and calls it
from another process over loopback: Twilio's Media Streams protocol
(:mod:`pipecat_fast.testing.twilio_caller`), or an aiortc WebRTC peer
(:mod:`pipecat_fast.testing.webrtc_caller`). Every call runs once per configuration,
interleaved call by call (stock, all, stock, all...), on one server; each call asks for its
levers itself (``?levers=`` / ``request_data.levers``). Prints the client-side TTFA per turn
beside the server's own meter, and the p50/p95 ratio of ``all`` to ``stock`` over the turns
both answered.

    flock /tmp/pf-bench.lock python scripts/e2e_examples.py twilio --calls 3 --ring-s 2
    flock /tmp/pf-bench.lock python scripts/e2e_examples.py webrtc --calls 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CALL_ORDER = ("book_cleaning", "ask_prices", "cancel_spanish", "reschedule", "family_languages")


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ExampleServer:
    """``examples/<name>.py --offline`` in a child process, on a free loopback port."""

    def __init__(self, name: str, *, report_dir: Path, levers: str = "all"):
        self.name = name
        self.port = free_port()
        self.report_dir = report_dir
        self.levers = levers
        self.url = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen | None = None
        self._log = tempfile.NamedTemporaryFile(prefix=f"pf-{name}-", suffix=".log", delete=False)

    async def __aenter__(self) -> ExampleServer:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        for key in ("DEEPGRAM_API_KEY", "OPENAI_API_KEY", "CARTESIA_API_KEY"):
            env.pop(key, None)  # offline: never a real provider
        self._proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "examples" / f"{self.name}.py"),
                "--offline",
                "--port",
                str(self.port),
                "--levers",
                self.levers,
                "--report-dir",
                str(self.report_dir),
            ],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120.0
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self._proc.returncode}: {self.log()}")
            if b"levers" in Path(self._log.name).read_bytes():  # the lifespan's ready line
                with contextlib.suppress(OSError):
                    socket.create_connection(("127.0.0.1", self.port), 1.0).close()
                    return self
            await asyncio.sleep(0.25)
        raise RuntimeError(f"{self.name} did not start within 120 s: {self.log()}")

    def log(self, tail: int = 4000) -> str:
        """The server's log (its tail)."""
        return Path(self._log.name).read_text("utf-8", errors="replace")[-tail:]

    async def __aexit__(self, *exc: object) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
            try:
                await asyncio.to_thread(self._proc.wait, 20)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                await asyncio.to_thread(self._proc.wait)
        self._log.close()


async def server_report(report_dir: Path, call_id: str, wait_s: float = 15.0) -> dict[str, Any]:
    """The example's own report of a call (written when the call ends), or {}."""
    path = report_dir / f"{call_id}.json"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if path.exists():
            with contextlib.suppress(ValueError):
                return json.loads(path.read_text("utf-8"))
        await asyncio.sleep(0.2)
    return {}


async def one_call(
    transport: str, server: ExampleServer, call, config: str, chrome=None, ring_s: float = 0.0
) -> dict:
    """One call through ``config``: the caller's result and the server's report.

    A Twilio call with ``ring_s`` is an outbound one: the status callback says it is ringing
    (the example starts the call's levers then), and the voice webhook comes ``ring_s`` later.
    """
    script = call.id
    if transport == "twilio":
        from pipecat_fast.testing.twilio_caller import TwilioCaller

        query = f"script={script}&levers={config}"
        caller = TwilioCaller(
            f"{server.url}/twilio?{query}",
            call.utterances,
            call.speech_end_ms,
            sample_rate=call.sample_rate,
            status_url=f"{server.url}/twilio/status?{query}",
            ring_s=ring_s,
        )
        result = await caller.run()
        call_id = caller.call_sid
        client = result.to_dict()
    elif transport == "webrtc":
        from pipecat_fast.testing.webrtc_caller import WebRTCCaller

        call_id = f"e2e-{os.urandom(6).hex()}"
        caller = WebRTCCaller(
            f"{server.url}/api/offer",
            call.utterances,
            call.speech_end_ms,
            sample_rate=call.sample_rate,
            request_data={"levers": config, "script": script, "session_id": call_id},
        )
        client = (await caller.run()).to_dict()
    else:
        raise ValueError(f"unknown transport {transport!r}")
    report = await server_report(server.report_dir, call_id)
    server_turns = {t["turn"]: t.get("ttfa_ms") for t in report.get("turns", [])}
    return {
        "config": config,
        "call": call.id,
        "call_id": call_id,
        "client": client,
        "server": {
            "ttfa": report.get("ttfa"),
            "turns": server_turns,
            "levers": report.get("levers"),
            "tts_pool_reused": (report.get("tts_pool") or {}).get("reused"),
            "warmup_prompt_tokens": (report.get("warmup") or {}).get("prompt_tokens"),
        },
    }


def paired(results: list[dict], configs: list[str]) -> dict[str, Any]:
    """Client-side TTFA per configuration over the (call, repeat, turn)s every one answered."""
    from pipecat_fast.ttfa.core import summarize

    by: dict[tuple, dict[str, float]] = {}
    for r in results:
        for t in r["client"]["turns"]:
            if t["ttfa_ms"] is not None:
                by.setdefault((r["slot"], t["turn"]), {})[r["config"]] = t["ttfa_ms"]
    both = [k for k, v in by.items() if all(c in v for c in configs)]
    out: dict[str, Any] = {"turns": len(both)}
    for c in configs:
        out[c] = summarize([by[k][c] for k in both])
    base = out[configs[0]]
    for c in configs[1:]:
        out[c]["p50"] = round(out[c]["ttfa_p50_ms"] / base["ttfa_p50_ms"], 3) if both else None
        out[c]["p95"] = round(out[c]["ttfa_p95_ms"] / base["ttfa_p95_ms"], 3) if both else None
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the example, run the calls interleaved, return the report."""
    from pipecat_fast.bench.material import bench_calls

    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    ids = [CALL_ORDER[i % len(CALL_ORDER)] for i in range(args.calls)]
    calls = bench_calls(ids=ids)
    if args.turns:
        calls = [c.only(range(min(args.turns, len(c.utterances)))) for c in calls]
    example = "twilio_bot" if args.transport == "twilio" else "webrtc_bot"
    report_dir = getattr(args, "report_dir", None) or Path(tempfile.mkdtemp(prefix="pf-e2e-"))
    if args.transport != "twilio":
        from pipecat_fast.testing.webrtc_caller import loopback_ice

        loopback_ice()
    results = []
    started = time.monotonic()
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(ExampleServer(example, report_dir=report_dir))
        chrome = None
        for repeat in range(args.repeats):
            for slot, call in enumerate(calls):
                for config in configs:
                    ring_s = getattr(args, "ring_s", 0.0)
                    r = await one_call(args.transport, server, call, config, chrome, ring_s)
                    r.update(slot=slot + repeat * len(calls), repeat=repeat)
                    results.append(r)
                    turns = [t["ttfa_ms"] for t in r["client"]["turns"]]
                    print(
                        f"{call.id} {config}: client TTFA {turns}, server "
                        f"{list(r['server']['turns'].values())}, greeting "
                        f"{r['client'].get('greeting_ms')} ms, error {r['client'].get('error')}",
                        flush=True,
                    )
        server_log = server.log(20000)
    return {
        "transport": args.transport,
        "configs": configs,
        "calls": ids,
        "turns_per_call": args.turns,
        "ring_s": getattr(args, "ring_s", 0.0),
        "wall_s": round(time.monotonic() - started, 1),
        "results": results,
        "client_ttfa": paired(results, configs),
        "server_log_tail": server_log[-3000:],
    }


def print_summary(report: dict[str, Any]) -> None:
    """The per-turn table and the ratios."""
    configs = report["configs"]
    print(f"\n{report['transport']}: client-side TTFA (ms), {report['wall_s']} s")
    summary = report["client_ttfa"]
    for c in configs:
        s = summary[c]
        ratio = f", ratio p50 {s.get('p50')} / p95 {s.get('p95')}" if c != configs[0] else ""
        print(f"  {c}: p50 {s['ttfa_p50_ms']} p95 {s['ttfa_p95_ms']} n {s['n_turns']}{ratio}")
    greetings = {
        c: [r["client"].get("greeting_ms") for r in report["results"] if r["config"] == c]
        for c in configs
    }
    print(f"  greeting (answer -> first audio at the client): {greetings}")


def main(argv: list[str] | None = None) -> int:
    """CLI."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("transport", choices=("twilio", "webrtc"))
    parser.add_argument("--calls", type=int, default=3, help="calls per configuration")
    parser.add_argument("--turns", type=int, default=None, help="first N turns of each call")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--ring-s",
        type=float,
        default=0.0,
        help="twilio: an outbound call that rings this long (the status callback starts the "
        "levers); 0: an inbound call (the voice webhook does)",
    )
    parser.add_argument("--configs", default="stock,all", help="baseline first")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON report here")
    parser.add_argument(
        "--report-dir", type=Path, default=None, help="the example's per-call reports (a temp dir)"
    )
    args = parser.parse_args(argv)
    report = asyncio.run(run(args))
    print_summary(report)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        report = {k: v for k, v in report.items() if k != "server_log_tail"}
        args.out.write_text(json.dumps(report, indent=1, default=str), "utf-8")
        print(f"wrote {args.out}")
    errors = [r for r in report["results"] if r["client"].get("error")]
    return 1 if errors else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
