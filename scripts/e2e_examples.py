"""The example bots end to end, as a caller meets them: stock vs every lever, TTFA at the client.

Starts ``examples/twilio_bot.py`` or ``examples/webrtc_bot.py`` with ``--offline`` (Pipecat's
real services against pipecat-fast's loopback emulators, in their own process) and calls it
from another process over loopback: Twilio's Media Streams protocol
(:mod:`pipecat_fast.testing.twilio_caller`), an aiortc WebRTC peer
(:mod:`pipecat_fast.testing.webrtc_caller`) or headless Chromium with a fake microphone on the
WebRTC example's own page (:class:`ChromiumCaller`). Every call runs once per configuration,
interleaved call by call (stock, all, stock, all...), on one server; each call asks for its
levers itself (``?levers=`` / ``request_data.levers``). Prints the client-side TTFA per turn
beside the server's own meter, and the p50/p95 ratio of ``all`` to ``stock`` over the turns
both answered.

    python scripts/e2e_examples.py twilio --calls 3 --ring-s 2
    python scripts/e2e_examples.py webrtc --calls 3
    python scripts/e2e_examples.py chromium --calls 3 --turns 2
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


class ChromiumCaller:
    """Headless Chromium (Debian's ``chromium`` + ``chromium-driver``) as the WebRTC caller.

    The browser opens the WebRTC example's own page (``examples/webrtc_client.html``) with a fake
    microphone that plays a WAV of the call's utterances (a lead silence for the connection and
    the greeting, then each utterance followed by a silence long enough for the reply), and the
    page times its microphone track against the bot's track by their audio levels
    (``window.pfMetrics``). A fake capture file plays on a fixed timeline, so the caller does not
    wait for replies as the other callers do; the gaps are sized so it never talks over one.
    Driven over the W3C WebDriver protocol with aiohttp (no Selenium needed).
    """

    LEAD_S = 8.0
    GAP_S = 12.0
    UTTERANCE_GAP_S = 2.0
    """Silence between two stretches of the caller's own speech longer than this starts a new
    utterance (espeak-ng pauses inside one are well under it)."""

    FLAGS = (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream",
        "--autoplay-policy=no-user-gesture-required",
    )

    def __init__(self, chromium: str = "chromium", driver: str = "chromedriver"):
        import shutil

        self.chromium = shutil.which(chromium)
        self.driver = shutil.which(driver)
        if not self.chromium or not self.driver:
            raise RuntimeError(f"needs {chromium} and {driver} on PATH (Debian: chromium-driver)")
        self.port = free_port()
        self._proc: subprocess.Popen | None = None
        self._dir = Path(tempfile.mkdtemp(prefix="pf-chromium-"))
        self._http: Any = None

    async def __aenter__(self) -> ChromiumCaller:
        import aiohttp

        self._proc = subprocess.Popen(
            [self.driver, f"--port={self.port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._http = aiohttp.ClientSession()
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, aiohttp.ClientError):
                async with self._http.get(f"{self._url}/status") as r:
                    if (await r.json())["value"]["ready"]:
                        return self
            await asyncio.sleep(0.2)
        raise RuntimeError("chromedriver did not start within 30 s")

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            await self._http.close()
        if self._proc is not None:
            self._proc.terminate()
            await asyncio.to_thread(self._proc.wait, 10)

    @property
    def _url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _post(self, path: str, body: dict) -> Any:
        async with self._http.post(f"{self._url}{path}", json=body) as r:
            value = (await r.json())["value"]
            if r.status >= 400:
                raise RuntimeError(f"webdriver {path}: {value}")
            return value

    def _wav(self, call) -> tuple[Path, float]:
        import wave

        rate = call.sample_rate
        path = self._dir / f"{call.id}.wav"
        gap = b"\x00\x00" * int(rate * self.GAP_S)
        with wave.open(str(path), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(rate)
            w.writeframes(b"\x00\x00" * int(rate * self.LEAD_S))
            for pcm in call.utterances:
                w.writeframes(pcm + gap)
        seconds = self.LEAD_S + sum(len(u) / 2 / rate + self.GAP_S for u in call.utterances)
        return path, seconds

    async def call(self, server_url: str, call, config: str, call_id: str) -> dict[str, Any]:
        """One session; the client-side result in the shape the other callers report."""
        from pipecat_fast.ttfa.core import summarize

        wav, seconds = self._wav(call)
        profile = tempfile.mkdtemp(prefix="profile-", dir=self._dir)
        flags = [
            *self.FLAGS,
            f"--user-data-dir={profile}",
            f"--use-file-for-fake-audio-capture={wav}",
        ]
        options = {"args": flags, "binary": self.chromium}
        caps = {"browserName": "chrome", "goog:chromeOptions": options}
        session = await self._post("/session", {"capabilities": {"alwaysMatch": caps}})
        sid = session["sessionId"]
        error = None
        metrics: dict[str, Any] = {}
        try:
            url = f"{server_url}/?auto=1&levers={config}&script={call.id}&session_id={call_id}"
            await self._post(f"/session/{sid}/url", {"url": url})
            deadline = time.monotonic() + seconds - 1.0  # before the fake file loops
            read = {"script": "return JSON.stringify(window.pfMetrics)", "args": []}
            while time.monotonic() < deadline:
                metrics = json.loads(await self._post(f"/session/{sid}/execute/sync", read))
                if metrics.get("error"):
                    break
                await asyncio.sleep(1.0)
            error = metrics.get("error")
        except Exception as e:  # the run's report says what failed
            error = f"{type(e).__name__}: {e}"
        finally:
            with contextlib.suppress(Exception):  # hang up as the page's button does
                hang_up = {"script": "if (pc) pc.close(); return true", "args": []}
                await self._post(f"/session/{sid}/execute/sync", hang_up)
                await asyncio.sleep(1.0)
            with contextlib.suppress(Exception):
                async with self._http.delete(f"{self._url}/session/{sid}"):
                    pass
        turns = page_turns(
            metrics.get("local", []), metrics.get("remote", []), self.UTTERANCE_GAP_S
        )
        if error is None and len(turns) != len(call.utterances):
            error = f"heard {len(turns)} caller utterances in the page, sent {len(call.utterances)}"
        connected = metrics.get("connectedAt")
        remote = metrics.get("remote", [])
        greeting = None
        if connected is not None and remote:
            greeting = round(remote[0][0] - connected, 1)
        return {
            "turns": [{"turn": i, "ttfa_ms": t} for i, t in enumerate(turns)],
            "summary": summarize(turns),
            "greeting_ms": greeting,
            "error": error,
        }


def page_turns(local: list, remote: list, utterance_gap_s: float) -> list[float | None]:
    """TTFA per utterance from the page's level meters (ms, page clock).

    ``local`` / ``remote``: ``[start, end]`` stretches of the microphone's and the bot's audio.
    Stretches of the caller's closer than ``utterance_gap_s`` are one utterance; its TTFA runs
    from its last stretch's end to the first bot stretch starting after it and before the next
    utterance.
    """
    utterances: list[list[float]] = []
    for start, end in local:
        if utterances and start - utterances[-1][1] < utterance_gap_s * 1000.0:
            utterances[-1][1] = end
        else:
            utterances.append([start, end])
    out: list[float | None] = []
    for i, (_, end) in enumerate(utterances):
        following = utterances[i + 1][0] if i + 1 < len(utterances) else float("inf")
        heard = next((s for s, _ in remote if end <= s < following), None)
        out.append(None if heard is None else round(heard - end, 1))
    return out


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
    elif transport == "chromium":
        call_id = f"e2e-{os.urandom(6).hex()}"
        client = await chrome.call(server.url, call, config, call_id)
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
            # The pooled socket the call's setup took: open already ("reused"), or still
            # dialling and awaited ("waited": the connection came up before the dial did).
            "tts_pool_first": _first_acquire(report.get("tts_pool")),
            "warmup_prompt_tokens": (report.get("warmup") or {}).get("prompt_tokens"),
        },
    }


def _first_acquire(pool: dict | None) -> str | None:
    """How the call's first TTS connection was served: ``reused``, ``waited`` or ``dialled``."""
    log = (pool or {}).get("acquire_log") or []
    return log[0]["kind"] if log else None


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
        if args.transport == "chromium":
            chrome = await stack.enter_async_context(ChromiumCaller())
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
    parser.add_argument("transport", choices=("twilio", "webrtc", "chromium"))
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
