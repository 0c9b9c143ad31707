#!/usr/bin/env python3
"""How far Smart Turn v3's verdicts on the bench's caller audio move when the kernels change.

Smart Turn v3 is an int8 ONNX model; int8 kernels differ by CPU instruction set, so its
probabilities differ between machines. This asks the model about every bench turn (at its real
end, 200 ms into the silence, as the pipeline asks; and 200 ms into each deliberate pause) with
onnxruntime built several ways on this CPU (:data:`pipecat_fast.bench.smart_turn.VARIANTS`:
graph optimisations off, 1 or 2 intra-op threads), and, with ``--emulate CPU``, again under
``qemu-x86_64 -cpu CPU`` (``apt-get install -y qemu-user``), which hides the instructions that CPU
lacks: ``Haswell`` has AVX2 and no AVX-512, so onnxruntime takes the AVX2 int8 kernels of a machine
like the 2-vCPU AMD EPYC of issue 9 (emulated: ~45 s per prediction). It writes every probability
and the spread to a JSON file and exits 1 if any complete turn's verdict flips (p < 0.5) under any
variant, or is below ``FIXTURE_MIN_P`` on this machine with Pipecat's own settings.

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
    SILENCE_MS,
    VARIANTS,
    VERDICT_P,
    SmartTurnProbe,
    SmartTurnUnavailable,
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


def probe_points() -> list[tuple[str, bool, bytes]]:
    """``(key, complete, pcm)``: each turn at its end, and each turn cut at each pause."""
    points = []
    for call in load_calls():
        for turn in call.turns:
            pcm, _ = read_pcm(turn.audio_path)
            points.append((f"{call.id}-{turn.index}", True, pcm))
            for j, pause in enumerate(turn.pauses):
                cut = pcm[: pause.start_ms * 16 * 2]
                points.append((f"{call.id}-{turn.index}-pause{j}", False, cut))
    return points


def measure(variants: list[str]) -> dict[str, dict[str, float]]:
    points = probe_points()
    out: dict[str, dict[str, float]] = {key: {} for key, _, _ in points}
    for name in variants:
        started = time.monotonic()
        probe = SmartTurnProbe(name)
        for key, _complete, pcm in points:
            out[key][name] = round(probe.p_complete_sync(pcm, SILENCE_MS), 4)
        took = time.monotonic() - started
        print(f"{name}: {len(points)} predictions in {took:.0f} s", file=sys.stderr)
    return out


def emulated(cpu: str) -> dict[str, dict[str, float]]:
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        raise SystemExit("--emulate needs qemu-x86_64: apt-get install -y qemu-user")
    cmd = [qemu, "-cpu", cpu, sys.executable, __file__, "--variants", "pipecat-default", "--raw"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"emulated run failed:\n{done.stderr[-2000:]}")
    raw = json.loads(done.stdout)
    return {key: {f"qemu-{cpu}": p["pipecat-default"]} for key, p in raw.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    parser.add_argument("--emulate", default="", help="qemu CPU models, comma-separated")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here")
    parser.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        probs = measure([v for v in args.variants.split(",") if v])
    except SmartTurnUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.raw:
        print(json.dumps(probs))
        return 0
    for cpu in [c for c in args.emulate.split(",") if c]:
        for key, values in emulated(cpu).items():
            probs[key].update(values)
    complete = {k for k, _c, _p in probe_points() if _c}
    names = list(next(iter(probs.values())))
    spread = {}
    for key, values in probs.items():
        base = values["pipecat-default"]
        spread[key] = round(max(abs(v - base) for v in values.values()), 4)
    flips = [
        f"{key} {name} {p:.3f}"
        for key in sorted(complete)
        for name, p in probs[key].items()
        if p < VERDICT_P
    ]
    low = [k for k in sorted(complete) if probs[k]["pipecat-default"] < FIXTURE_MIN_P]
    report = {
        "machine": {"cpu": cpu_name(), "flags": cpu_flags(), "python": platform.python_version()},
        "onnxruntime": __import__("onnxruntime").__version__,
        "silence_ms": SILENCE_MS,
        "variants": names,
        "command": "PYTHONPATH=. python scripts/smart_turn_spread.py"
        + (f" --emulate {args.emulate}" if args.emulate else ""),
        "complete_turns": {k: probs[k] for k in sorted(complete)},
        "pauses": {k: probs[k] for k in sorted(probs) if k not in complete},
        "max_delta_from_pipecat_default": {
            "complete_turns": max(spread[k] for k in complete),
            "pauses": max((spread[k] for k in probs if k not in complete), default=None),
        },
        "min_p_complete": {n: min(probs[k][n] for k in complete) for n in names},
        "flips": flips,
        "below_fixture_min": low,
    }
    text = json.dumps(report, indent=2) + "\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    width = max(len(k) for k in probs)
    print(f"{'turn':<{width}}  " + "  ".join(f"{n:>14}" for n in names))
    for key in probs:
        mark = "" if key in complete else "  (pause)"
        row = "  ".join(f"{probs[key][n]:>14.3f}" for n in names)
        print(f"{key:<{width}}  {row}{mark}")
    print(f"min P(complete) per variant: {report['min_p_complete']}")
    print(f"largest move from Pipecat's default: {report['max_delta_from_pipecat_default']}")
    if flips or low:
        print(f"verdict flips: {flips}; below {FIXTURE_MIN_P} here: {low}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
