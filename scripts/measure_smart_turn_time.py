#!/usr/bin/env python3
"""Where Smart Turn v3's time goes on this CPU, on the bench's caller audio.

Pipecat 1.14's ``LocalSmartTurnAnalyzerV3._predict_endpoint`` pads or cuts the audio it is
given to the last 8 s, computes Whisper log-mel features (numpy) and runs one ONNX session
(``intra_op_num_threads=cpu_count``, 1 by default). This times each part separately, for each
bench turn's audio up to its end of speech plus a stop window of silence:

- ``features_ms`` / ``onnx_ms``: feature extraction and the ONNX run, steady state, 1 thread;
- ``first_ms``: the first prediction of a freshly built analyzer (what the first turn of a call
  pays: every bench call builds its own), against the steady state;
- ``threads2_ms``: the ONNX run with 2 intra-op threads;
- ``pair_ms``: two analyzers predicting at once in two threads, as the early verdict and the
  wrapped analyzer's verdict at the VAD's stop do when they overlap;
- ``p_at_silence``: P(complete) with 32, 64, 96, 128 and 200 ms of silence after the VAD's
  silence begins (the VAD reports silence ~60 ms after the last voiced sample: the bench's
  measured stop is ~260 ms after it), for complete turns and deliberate pauses.

Usage (from the repository root; CPU-bound, so under the bench lock)::

    PYTHONPATH=$PWD python scripts/measure_smart_turn_time.py \\
        --out docs/results/smart_turn_time.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipecat_fast.bench.calls import load_calls, read_pcm  # noqa: E402

RATE = 16_000
VAD_LAG_MS = 60  # the VAD's silence starts this long after the last voiced sample (measured)
SILENCES_MS = (32, 64, 96, 128, 200)


def _analyzer(threads: int = 1):
    from loguru import logger
    from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import LocalSmartTurnAnalyzerV3

    logger.disable("pipecat.audio.turn")
    a = LocalSmartTurnAnalyzerV3(sample_rate=RATE, cpu_count=threads)
    a.set_sample_rate(RATE)
    return a


def _split(analyzer, audio: np.ndarray) -> tuple[float, float, float]:
    """(features ms, onnx ms, probability), the steps of ``_predict_endpoint``."""
    from pipecat.audio.turn.smart_turn._whisper_features import compute_whisper_log_mel_features

    t0 = time.perf_counter()
    x = audio[-8 * RATE :]
    if len(x) < 8 * RATE:
        x = np.pad(x, (8 * RATE - len(x), 0))
    feats = np.expand_dims(compute_whisper_log_mel_features(x, do_normalize=True), 0)
    t1 = time.perf_counter()
    out = analyzer._session.run(None, {"input_features": feats})
    t2 = time.perf_counter()
    return (t1 - t0) * 1000, (t2 - t1) * 1000, float(out[0][0].item())


def _cut(x: np.ndarray, start_ms_in_file: int, offset_samples: int, silence_ms: int) -> np.ndarray:
    end = (start_ms_in_file + silence_ms) * RATE // 1000 - offset_samples
    end = -(-end // 320) * 320  # a 20 ms transport chunk boundary
    return x[: max(1, end)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    segs = []
    for call in load_calls():
        for turn in call.turns:
            pcm, _ = read_pcm(turn.audio_path)
            x = np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0
            x = np.concatenate([x, np.zeros(RATE, dtype=np.float32)])
            off = max(0, turn.speech_start_ms - 500) * RATE // 1000
            for j, q in enumerate(turn.pauses):
                segs.append((f"{call.id}-{turn.index}-pause{j}", x[off:], off, q.start_ms, False))
            segs.append((f"{call.id}-{turn.index}", x[off:], off, turn.speech_end_ms, True))

    # first call of a fresh analyzer vs steady state
    firsts, builds = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        a = _analyzer(1)
        t1 = time.perf_counter()
        _key, x, off, at, _c = segs[0]
        audio = _cut(x, at + VAD_LAG_MS, off, 200)
        t2 = time.perf_counter()
        a._predict_endpoint(audio)
        t3 = time.perf_counter()
        builds.append((t1 - t0) * 1000)
        firsts.append((t3 - t2) * 1000)

    one, two = _analyzer(1), _analyzer(2)
    other = _analyzer(1)
    for a in (one, two, other):  # warm
        a._predict_endpoint(np.zeros(RATE, dtype=np.float32))
    rows = []
    for key, x, off, at, complete in segs:
        audio = _cut(x, at + VAD_LAG_MS, off, 200)
        f1, o1, p = zip(*[_split(one, audio) for _ in range(args.repeats)], strict=True)
        _f2, o2, _p2 = zip(*[_split(two, audio) for _ in range(args.repeats)], strict=True)
        # two at once (the early verdict and the wrapped analyzer's)
        pair = []
        for _ in range(args.repeats):
            took = {}

            def run(name, analyzer, took=took, audio=audio):
                t = time.perf_counter()
                analyzer._predict_endpoint(audio)
                took[name] = (time.perf_counter() - t) * 1000

            ts = [threading.Thread(target=run, args=(n, a)) for n, a in (("a", one), ("b", other))]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            pair.append(max(took.values()))
        ps = {}
        for s in SILENCES_MS:
            ps[s] = round(_split(one, _cut(x, at + VAD_LAG_MS, off, s))[2], 3)
        rows.append(
            {
                "turn": key,
                "complete": complete,
                "audio_s": round(len(audio) / RATE, 2),
                "features_ms": round(statistics.median(f1), 1),
                "onnx_ms": round(statistics.median(o1), 1),
                "threads2_onnx_ms": round(statistics.median(o2), 1),
                "pair_ms": round(statistics.median(pair), 1),
                "p_at_silence": ps,
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr)

    def med(k):
        return round(statistics.median(r[k] for r in rows), 1)

    summary = {
        "turns": len(rows),
        "build_ms": [round(v, 1) for v in builds],
        "first_predict_ms": [round(v, 1) for v in firsts],
        "features_ms": med("features_ms"),
        "onnx_ms": med("onnx_ms"),
        "threads2_onnx_ms": med("threads2_onnx_ms"),
        "pair_ms": med("pair_ms"),
        "audio_s": [min(r["audio_s"] for r in rows), max(r["audio_s"] for r in rows)],
    }
    for s in SILENCES_MS:
        comp = [r["p_at_silence"][s] for r in rows if r["complete"]]
        paus = [r["p_at_silence"][s] for r in rows if not r["complete"]]
        summary[f"silence_{s}ms"] = {
            "complete_turns_p_min": min(comp),
            "complete_turns_below_0.5": sum(p <= 0.5 for p in comp),
            "pauses_p_max": max(paus) if paus else None,
            "pauses_above_0.5": sum(p > 0.5 for p in paus),
            "n_complete": len(comp),
            "n_pauses": len(paus),
        }
    import onnxruntime

    report = {
        "command": "PYTHONPATH=$PWD python scripts/measure_smart_turn_time.py",
        "onnxruntime": onnxruntime.__version__,
        "cpus": __import__("os").cpu_count(),
        "loadavg_start": Path("/proc/loadavg").read_text().split()[:3],
        "summary": summary,
        "rows": rows,
    }
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
