"""First-audio time with and without the TTS warm-pool, over a real network path with delay.

The TTS emulators (Cartesia, and Sarvam: a provider whose Pipecat service reconnects on every
interruption) serve TLS with a self-signed certificate made here, from their own network
namespace; the bot side runs the real Pipecat services in the root namespace. The link adds
half the RTT in each direction to every packet, so TCP, TLS 1.3 and the WebSocket upgrade
cost what they cost on such a path. The link is ``tc netem`` on a veth pair where the kernel
has it, else a userspace delay line on a pair of TUN devices (same per-packet delay, TCP
handshake included; this kernel lacks ``sch_netem``). Needs root; without it, or without
``ip``/``openssl``, it says why and exits 0.

Scenarios, each run stock then with the pool, interleaved:

- ``greeting``: the call's first sentence; answer (pipeline starts) -> first audio. Stock
  dials at setup; the pool dialled while the phone rang.
- ``after_idle_close``: a sentence after the provider closed the idle socket (the emulator's
  idle limit scaled down to 2 s); text -> first audio.
- ``after_barge_in``: the first sentence after a barge-in on the reconnecting provider
  (Sarvam), sent right behind the interruption; interruption -> first audio.

Usage (the figures in docs/ttspool.md)::

    python scripts/measure_tts_pool.py --rtt 20,100 --runs 8
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

NS = os.environ.get("PF_TTSPOOL_NS") or f"pf-ttspool-{os.getpid()}"
os.environ["PF_TTSPOOL_NS"] = NS  # the helper processes (delay line, server) share it
BOT_IP, TTS_IP = "10.77.0.1", "10.77.0.2"
CARTESIA_PORT, SARVAM_PORT = 8443, 8444
IDLE_CLOSE_S = 2.0
GREETING = "Hello, thanks for calling. How can I help you today?"
SENTENCE = "Sure, I can help with that."


def sh(cmd: str, *, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, shell=True, check=check, capture_output=True, text=True)


def why_not() -> str | None:
    """Why the measurement cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "openssl"):
        if shutil.which(tool) is None:
            return f"needs the {tool!r} command"
    probe = sh(f"ip netns add {NS}-probe", check=False)
    if probe.returncode != 0:
        return f"cannot create a network namespace: {probe.stderr.strip()}"
    sh(f"ip netns del {NS}-probe", check=False)
    return None


# -- the link ------------------------------------------------------------------------------


def netem_link(rtt_ms: float) -> bool:
    """veth + tc netem (half the RTT each way); False if the kernel has no netem."""
    sh("ip link add pft0 type veth peer name pft1")
    sh(f"ip link set pft1 netns {NS}")
    sh(f"ip addr add {BOT_IP}/24 dev pft0 && ip link set pft0 up")
    sh(f"ip netns exec {NS} ip addr add {TTS_IP}/24 dev pft1")
    sh(f"ip netns exec {NS} ip link set pft1 up")
    half = rtt_ms / 2
    ok = sh(f"tc qdisc add dev pft0 root netem delay {half}ms", check=False).returncode == 0
    if ok:
        sh(f"ip netns exec {NS} tc qdisc add dev pft1 root netem delay {half}ms")
        return True
    sh("ip link del pft0", check=False)
    return False


TUNSETIFF, IFF_TUN, IFF_NO_PI = 0x400454CA, 0x0001, 0x1000


def delay_line(rtt_ms: float) -> None:
    """The userspace link: two TUN devices, every packet held half the RTT (runs until EOF)."""

    def tun(name: str) -> int:
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
        return fd

    bot, tts = tun("pft0"), tun("pft1")
    sh(f"ip link set pft1 netns {NS}")
    sh(f"ip addr add {BOT_IP} peer {TTS_IP} dev pft0 && ip link set pft0 up")
    sh(f"ip netns exec {NS} ip addr add {TTS_IP} peer {BOT_IP} dev pft1")
    sh(f"ip netns exec {NS} ip link set pft1 up")
    half = rtt_ms / 2000.0

    async def run() -> None:
        loop = asyncio.get_running_loop()

        def forward(src: int, dst: int) -> None:
            while True:
                try:
                    packet = os.read(src, 65536)
                except BlockingIOError:
                    return
                loop.call_at(loop.time() + half, _write, dst, packet)

        loop.add_reader(bot, forward, bot, tts)
        loop.add_reader(tts, forward, tts, bot)
        print("ready", flush=True)
        await loop.run_in_executor(None, sys.stdin.read)

    asyncio.run(run())


def _write(fd: int, packet: bytes) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, packet)


# -- the provider side (in the namespace) ----------------------------------------------------


def serve(cert: str, key: str) -> None:
    """Cartesia and Sarvam emulators on TLS; the network, not the emulator, charges the RTT."""
    import ssl

    from pipecat_fast.testing.cartesia_server import CartesiaEmulator
    from pipecat_fast.testing.profiles import SAME_REGION
    from pipecat_fast.testing.sarvam_server import SarvamEmulator

    profile = replace(SAME_REGION, name="netns", rtt_ms=0.0, tts_handshake_rtts=0)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    async def run() -> None:
        options = {"host": TTS_IP, "ssl": context, "idle_close_s": IDLE_CLOSE_S}
        async with (
            CartesiaEmulator(profile, port=CARTESIA_PORT, **options) as cartesia,
            SarvamEmulator(profile, port=SARVAM_PORT, **options) as sarvam,
        ):
            print(json.dumps({"cartesia": cartesia.url, "sarvam": sarvam.url}), flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

    asyncio.run(run())


def make_certificate(directory: Path) -> tuple[str, str]:
    cert, key = directory / "tts.pem", directory / "tts.key"
    sh(
        f"openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
        f"-subj /CN={TTS_IP} -addext subjectAltName=IP:{TTS_IP} -keyout {key} -out {cert}"
    )
    return str(cert), str(key)


@contextlib.contextmanager
def provider_side(rtt_ms: float, workdir: Path):
    """Namespace, link and emulators for one RTT; yields (urls, link kind)."""
    me = [sys.executable, str(Path(__file__).resolve())]
    cert, key = make_certificate(workdir)
    sh(f"ip netns add {NS}")
    procs: list[subprocess.Popen] = []
    try:
        sh(f"ip netns exec {NS} ip link set lo up")
        if netem_link(rtt_ms):
            link = "veth + tc netem"
        else:
            line = subprocess.Popen(
                [*me, "--delay-line", str(rtt_ms)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            procs.append(line)
            if line.stdout.readline().strip() != "ready":
                raise RuntimeError("the delay line did not start")
            link = "TUN delay line (no sch_netem in this kernel)"
        server = subprocess.Popen(
            ["ip", "netns", "exec", NS, *me, "--serve", cert, key],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        )
        procs.append(server)
        urls = json.loads(server.stdout.readline())
        os.environ["SSL_CERT_FILE"] = cert  # the bot trusts the test's certificate
        yield urls, link
    finally:
        for proc in reversed(procs):
            with contextlib.suppress(Exception):
                proc.stdin.close()
                proc.wait(5)
            if proc.poll() is None:
                proc.kill()
        sh("ip link del pft0", check=False)
        sh(f"ip netns del {NS}", check=False)


# -- the bot side ----------------------------------------------------------------------------


async def greeting(urls, pooled: bool) -> tuple[float, int]:
    from pipecat.services.cartesia.tts import CartesiaTTSService

    from pipecat_fast.testing.tts_harness import TTSHarness
    from pipecat_fast.ttspool import TTSWarmPool

    tts = CartesiaTTSService(
        api_key="k", url=urls["cartesia"], settings=CartesiaTTSService.Settings(voice="v")
    )
    pool = lease = None
    dials = [] if pooled else count_dials(tts)
    if pooled:
        pool = TTSWarmPool()
        lease = pool.prewarm(tts, sample_rate=16000)
        await until(lambda: pool.is_warm(lease.call_id))  # the phone rings meanwhile
    async with TTSHarness(tts) as run:
        ms = run.setup_ms + await run.speak(GREETING)
    dials = await finish(pool, lease, dials)
    return ms, dials


async def after_idle_close(urls, pooled: bool) -> tuple[float, int]:
    from pipecat.services.cartesia.tts import CartesiaTTSService

    from pipecat_fast.testing.tts_harness import TTSHarness
    from pipecat_fast.ttspool import TTSWarmPool

    tts = CartesiaTTSService(
        api_key="k", url=urls["cartesia"], settings=CartesiaTTSService.Settings(voice="v")
    )
    pool = lease = None
    dials = [] if pooled else count_dials(tts)
    if pooled:
        pool = TTSWarmPool()
        lease = pool.prewarm(tts, sample_rate=16000)
        await until(lambda: pool.is_warm(lease.call_id))
    async with TTSHarness(tts) as run:
        await run.speak(SENTENCE)
        await asyncio.sleep(IDLE_CLOSE_S + 1.5)  # the provider closes the idle socket
        ms = await run.speak(SENTENCE)
    return ms, await finish(pool, lease, dials)


async def after_barge_in(urls, pooled: bool) -> tuple[float, int]:
    from pipecat.services.sarvam.tts import SarvamTTSService

    from pipecat_fast.testing.tts_harness import TTSHarness
    from pipecat_fast.ttspool import TTSWarmPool

    tts = SarvamTTSService(api_key="k", url=urls["sarvam"])
    pool = lease = None
    dials = [] if pooled else count_dials(tts)
    if pooled:
        pool = TTSWarmPool()
        lease = pool.prewarm(tts)
        await until(lambda: pool.is_warm(lease.call_id))
    async with TTSHarness(tts, sample_rate=24000) as run:
        await run.speak(GREETING)
        if pool is not None:
            await until(lambda: pool.is_warm(lease.call_id))  # the spare
        await asyncio.sleep(0.3)  # the caller barges in while the bot speaks
        started = time.monotonic()
        await run.interrupt()
        await run.speak(SENTENCE)
        ms = (time.monotonic() - started) * 1000.0
    return ms, await finish(pool, lease, dials)


def count_dials(tts) -> list:
    """Count the sockets a stock service dials (through the same hook the pool uses)."""
    from pipecat_fast import _pipecat

    dials: list = []

    async def counting(uri, kwargs, dial):
        dials.append(uri)
        return await dial(uri, **kwargs)

    _pipecat.install_connect_hook(tts, counting)
    return dials


async def finish(pool, lease, dials: list) -> int:
    """Close the pool; the handshakes the service paid itself."""
    if pool is None:
        return len(dials)
    stats = await lease.close()
    await pool.aclose()
    return stats.service_dials


async def until(predicate, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def dial_parts(urls) -> dict:
    """One TLS WebSocket dial, taken apart: TCP connect, TLS handshake, HTTP upgrade (ms)."""
    import socket
    import ssl
    from urllib.parse import urlsplit

    from websockets.asyncio.client import connect

    parts = urlsplit(urls["cartesia"])
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    sock = socket.socket()
    sock.setblocking(False)
    await loop.sock_connect(sock, (parts.hostname, parts.port))
    tcp = time.monotonic()
    context = ssl.create_default_context()
    reader, writer = await asyncio.open_connection(
        sock=sock, ssl=context, server_hostname=parts.hostname
    )
    tls = time.monotonic()
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()
    begun = time.monotonic()
    async with connect(urls["cartesia"], additional_headers={"X-API-Key": "k"}) as ws:
        whole = time.monotonic() - begun
        assert ws.protocol.state.name == "OPEN"
    return {
        "tcp_ms": (tcp - started) * 1000.0,
        "tls_ms": (tls - tcp) * 1000.0,
        "dial_ms": whole * 1000.0,
    }


SCENARIOS = {
    "greeting": (greeting, "answer -> first audio of the first sentence (Cartesia)"),
    "after_idle_close": (after_idle_close, "text -> first audio after an idle close (Cartesia)"),
    "after_barge_in": (after_barge_in, "barge-in -> first audio of the next sentence (Sarvam)"),
}


async def measure(urls, runs: int, scenarios: list[str]) -> dict:
    out: dict = {}
    await dial_parts(urls)  # warm-up
    dials = [await dial_parts(urls) for _ in range(runs)]
    out["dial"] = {
        k: round(statistics.median(d[k] for d in dials), 1) for k in ("tcp_ms", "tls_ms", "dial_ms")
    }
    for name, (scenario, what) in SCENARIOS.items():
        if name not in scenarios:
            continue
        cells = {"stock": [], "pool": []}
        dials = {"stock": [], "pool": []}
        for config in ("stock", "pool"):  # one unrecorded run each: imports, first TLS
            await scenario(urls, config == "pool")
        for _ in range(runs):
            for config in ("stock", "pool"):
                ms, paid = await scenario(urls, config == "pool")
                cells[config].append(ms)
                dials[config].append(paid)
        out[name] = {
            "what": what,
            **{f"{c}_ms": [round(v, 1) for v in cells[c]] for c in cells},
            **{f"{c}_p50_ms": round(statistics.median(cells[c]), 1) for c in cells},
            **{f"{c}_handshakes_per_call": statistics.mean(dials[c]) for c in dials},
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt", default="20,100", help="RTTs to measure at, ms")
    parser.add_argument("--runs", type=int, default=8, help="runs per scenario and config")
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"comma-separated subset of {', '.join(SCENARIOS)} (the dial is always measured)",
    )
    parser.add_argument("--out", type=Path, default=Path("reports/ttspool_netns.json"))
    parser.add_argument("--serve", nargs=2, metavar=("CERT", "KEY"), help=argparse.SUPPRESS)
    parser.add_argument("--delay-line", type=float, metavar="RTT_MS", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(*args.serve)
        return 0
    if args.delay_line is not None:
        delay_line(args.delay_line)
        return 0
    reason = why_not()
    if reason:
        print(f"skipped: {reason}")
        return 0
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    report: dict = {"runs": args.runs, "idle_close_s": IDLE_CLOSE_S, "rtts": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for rtt in [float(r) for r in args.rtt.split(",")]:
            with provider_side(rtt, Path(tmp)) as (urls, link):
                report["link"] = link
                chosen = [x.strip() for x in args.scenarios.split(",") if x.strip()]
                results = asyncio.run(measure(urls, args.runs, chosen))
                dial = results.pop("dial")
                dial["dial_rtts"] = round(dial["dial_ms"] / rtt, 2)
                report.setdefault("dial", {})[f"{rtt:g}"] = dial
                for row in results.values():
                    saved = row["stock_p50_ms"] - row["pool_p50_ms"]
                    row["saved_ms"] = round(saved, 1)
                    row["saved_rtts"] = round(saved / rtt, 2)
                report["rtts"][f"{rtt:g}"] = results
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"link: {report['link']}; {args.runs} runs per cell; medians")
    print(
        f"{'RTT':>5}  {'scenario':<18} {'stock ms':>9} {'pool ms':>8} {'saved':>7} {'RTTs':>5}"
        f"  handshakes/call stock->pool"
    )
    for rtt, results in report["rtts"].items():
        for name, row in results.items():
            print(
                f"{rtt:>5}  {name:<18} {row['stock_p50_ms']:>9.1f} {row['pool_p50_ms']:>8.1f} "
                f"{row['saved_ms']:>7.1f} {row['saved_rtts']:>5.2f}  "
                f"{row['stock_handshakes_per_call']:g} -> {row['pool_handshakes_per_call']:g}"
            )
    for rtt, dial in report["dial"].items():
        print(
            f"RTT {rtt} ms: one TLS WebSocket dial {dial['dial_ms']:.1f} ms "
            f"({dial['dial_rtts']:.2f} RTT; TCP {dial['tcp_ms']:.1f}, TLS {dial['tls_ms']:.1f})"
        )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
