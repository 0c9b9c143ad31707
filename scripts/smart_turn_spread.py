#!/usr/bin/env python3
"""How far Smart Turn v3's verdicts on the bench's caller audio move when the kernels change.

Smart Turn v3 is an int8 ONNX model; int8 kernels differ by CPU instruction set, so its
probabilities differ between machines. This asks the model about every bench turn as the
pipeline asks (:func:`pipecat_fast.bench.smart_turn.verdicts`: at every 20 ms chunk boundary where
the VAD stop can fall after the real end of speech, and after each deliberate pause begins),
recording the lowest and highest probability, with onnxruntime built several ways on this CPU
(:data:`pipecat_fast.bench.smart_turn.VARIANTS`: graph optimisations off, 1 or 2 intra-op
threads), and, with ``--emulate CPU``, again under
``qemu-x86_64 -cpu CPU`` (``apt-get install -y qemu-user``), which hides the instructions that CPU
lacks: ``Haswell`` has AVX2 and no AVX-512, so onnxruntime takes the AVX2 int8 kernels of a machine
like the 2-vCPU AMD EPYC of issue 9 (emulated: ~45 s per prediction, so emulated runs ask only
near the measured stop, ``--emulate-window``). It writes every probability and the spread to a
JSON file and exits 1 if any complete turn's verdict flips (p < 0.5) under any variant, a pause
reads both ways, or a complete turn is below ``FIXTURE_MIN_P`` here with Pipecat's settings.

Usage (from the repository root)::

    PYTHONPATH=. python scripts/smart_turn_spread.py                      # this CPU, all variants
    PYTHONPATH=. python scripts/smart_turn_spread.py --emulate Haswell \\
        --out docs/results/smart_turn_spread.json                         # + emulated AVX2
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipecat_fast.bench.calls import load_calls, read_pcm  # noqa: E402
from pipecat_fast.bench.smart_turn import (  # noqa: E402
    FIXTURE_MIN_P,
    STOP_WINDOW_MS,
    VARIANTS,
    VERDICT_P,
    SmartTurnProbe,
    SmartTurnUnavailable,
    verdicts,
)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")
                return [f for f in line.split(":", 1)[1].split() if f in wanted]
    except OSError:
        pass
    return []


def measure(variants: list[str], window: tuple[int, int]) -> dict[str, dict[str, list[float]]]:
    """``{turn key: {variant: [min, max]}}`` over the VAD stop window, ends and pauses."""
    import asyncio

    calls = load_calls()
    out: dict[str, dict[str, list[float]]] = {}
    for name in variants:
        started = time.monotonic()
        probe = SmartTurnProbe(name)
        for call in calls:
            for turn in call.turns:
                pcm, _ = read_pcm(turn.audio_path)
                spans = [(q.start_ms, q.end_ms) for q in turn.pauses]
                found = asyncio.run(verdicts(probe, pcm, turn.speech_end_ms, spans, window))
                key = f"{call.id}-{turn.index}"
                out.setdefault(key, {})[name] = [round(min(found.end), 4), round(max(found.end), 4)]
                for j, ps in enumerate(found.pauses):
                    pause = out.setdefault(f"{key}-pause{j}", {})
                    pause[name] = [round(min(ps), 4), round(max(ps), 4)]
        took = time.monotonic() - started
        print(f"{name}: {took:.0f} s", file=sys.stderr)
    return out


def emulated(cpu: str, window: tuple[int, int]) -> dict[str, dict[str, list[float]]]:
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        raise SystemExit("--emulate needs qemu-x86_64: apt-get install -y qemu-user")
    cmd = [qemu, "-cpu", cpu, sys.executable, __file__, "--variants", "pipecat-default"]
    cmd += ["--window", f"{window[0]},{window[1]}", "--raw"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"emulated run failed:\n{done.stderr[-2000:]}")
    raw = json.loads(done.stdout)
    return {key: {f"qemu-{cpu}": p["pipecat-default"]} for key, p in raw.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    parser.add_argument("--emulate", default="", help="qemu CPU models, comma-separated")
    parser.add_argument(
        "--window",
        default=f"{STOP_WINDOW_MS[0]},{STOP_WINDOW_MS[1]}",
        help="ms after the speech where the VAD stop may fall (default: the full window)",
    )
    parser.add_argument(
        "--emulate-window",
        default="250,290",
        help="the same for emulated CPUs (default: around the measured 260 ms; ~45 s a query)",
    )
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here")
    parser.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    window = tuple(int(v) for v in args.window.split(","))
    emulate_window = tuple(int(v) for v in args.emulate_window.split(","))
    try:
        probs = measure([v for v in args.variants.split(",") if v], window)
    except SmartTurnUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.raw:
        print(json.dumps(probs))
        return 0
    for cpu in [c for c in args.emulate.split(",") if c]:
        for key, values in emulated(cpu, emulate_window).items():
            probs[key].update(values)
    complete = {k for k in probs if "-pause" not in k}
    names = list(next(iter(probs.values())))
    flips = [
        f"{key} {name} {lo:.3f}"
        for key in sorted(complete)
        for name, (lo, _hi) in probs[key].items()
        if lo < VERDICT_P
    ]
    for key in sorted(set(probs) - complete):  # a pause must read the same way everywhere
        sides = {lo >= VERDICT_P for lo, _ in probs[key].values()}
        sides |= {hi >= VERDICT_P for _, hi in probs[key].values()}
        if len(sides) > 1:
            flips.append(f"{key} reads both ways: {probs[key]}")
    low = [k for k in sorted(complete) if probs[k]["pipecat-default"][0] < FIXTURE_MIN_P]
    moved = {
        k: max(abs(lo - probs[k]["pipecat-default"][0]) for lo, _ in probs[k].values())
        for k in probs
    }
    report = {
        "machine": {"cpu": cpu_name(), "flags": cpu_flags(), "python": platform.python_version()},
        "onnxruntime": __import__("onnxruntime").__version__,
        "window_ms": list(window),
        "emulated_window_ms": list(emulate_window) if args.emulate else None,
        "variants": names,
        "command": "PYTHONPATH=. python scripts/smart_turn_spread.py"
        + (f" --emulate {args.emulate}" if args.emulate else ""),
        "complete_turns": {k: probs[k] for k in sorted(complete)},
        "pauses": {k: probs[k] for k in sorted(probs) if k not in complete},
        "largest_move_of_min_from_pipecat_default": {
            "complete_turns": round(max(moved[k] for k in complete), 4),
            "pauses": round(max((moved[k] for k in probs if k not in complete), default=0), 4),
        },
        "min_p_complete": {n: min(probs[k][n][0] for k in complete) for n in names},
        "flips": flips,
        "below_fixture_min": low,
    }
    text = json.dumps(report, indent=2) + "\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    width = max(len(k) for k in probs)
    print(f"{'turn (min-max)':<{width}}  " + "  ".join(f"{n:>24}" for n in names))
    for key in probs:
        row = "  ".join(f"{lo:>14.3f}-{hi:.3f}" for lo, hi in (probs[key][n] for n in names))
        print(f"{key:<{width}}  {row}")
    print(f"min P(complete) per variant: {report['min_p_complete']}")
    print(f"largest move: {report['largest_move_of_min_from_pipecat_default']}")
    if flips or low:
        print(f"verdict flips: {flips}; below {FIXTURE_MIN_P} here: {low}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
