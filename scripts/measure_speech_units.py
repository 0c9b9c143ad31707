#!/usr/bin/env python3
"""Characters or syllables? Measure the barge-in estimate's word error on real TTS timing.

The estimate maps a played position inside a text's audio to words by *speech units*. This
script synthesizes texts with espeak-ng (a real rule-based TTS, which expands numbers and
symbols as it speaks them) and takes each word's start and end from espeak's own WORD events
and the voiced frames (``scripts/make_audio_fixtures.py``'s method). At every 50 ms of each
text's speech it compares the words the estimate says were heard with the words whose audio
had ended, for each unit. Texts: the bench's scripted replies (``dev``) and English
multi-sentence texts from pySBD's golden rules (``held-out``, ``../shared/data/sbd``); texts
espeak-ng gives no word event for (ellipses, stray punctuation) are left out, and said so.

Needs ``apt-get install -y espeak-ng sox``. Usage::

    PYTHONPATH=. python scripts/measure_speech_units.py [--voice en-us] [--rate 175]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_audio_fixtures import make_utterance  # noqa: E402

from pipecat_fast.bargein import core  # noqa: E402
from pipecat_fast.bench.evals.bargein import dev_replies, held_out_replies  # noqa: E402

STEP_S = 0.05


def errors(text: str, words: list[dict], start_ms: int, end_ms: int, unit: str, pauses: bool):
    """Estimated minus true heard words at every STEP_S of the speech."""
    audio_s = (end_ms - start_ms) / 1000.0
    saved = dict(core.PAUSE_UNITS)
    if not pauses:
        core.PAUSE_UNITS.update({k: 0.0 for k in core.PAUSE_UNITS})
    try:
        out = []
        t = 0.0
        while t <= audio_s:
            true = sum(1 for w in words if (w["end_ms"] - start_ms) / 1000.0 <= t + 1e-9)
            est = core.heard_prefix(text, t, audio_s=audio_s, unit=unit).words
            out.append(est - true)
            t += STEP_S
        return out
    finally:
        core.PAUSE_UNITS.update(saved)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--voice", default="en-us")
    parser.add_argument("--rate", type=int, default=175)
    parser.add_argument("--limit", type=int, default=20)
    args = parser.parse_args(argv)
    # The voice reads English: the bench's replies in Spanish, Hindi and Japanese are left out.
    english = [t for t in dev_replies() if sum(c.isascii() for c in t) > 0.95 * len(t)]
    sets = {"dev": english[: args.limit], "held-out": held_out_replies()[: args.limit]}
    print(f"espeak-ng voice {args.voice}, rate {args.rate} wpm; error = estimated - heard words")
    print("| set | unit | pauses | texts | points | exact % | mean abs err | kept unheard % "
          "| heard lost % |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for name, texts in sets.items():
        utterances = []
        for text in texts:
            try:
                u = make_utterance(text, args.voice, args.rate)
            except Exception as e:  # a text espeak cannot time is left out, and said so
                print(f"skipped {text[:40]!r}: {e}", file=sys.stderr)
                continue
            utterances.append((text, u))
        for unit in ("chars", "syllables"):
            for pauses in (True, False):
                errs = [
                    e
                    for text, u in utterances
                    for e in errors(text, u.words, u.speech_start_ms, u.speech_end_ms, unit, pauses)
                ]
                n = len(errs)
                print(
                    f"| {name} | {unit} | {'yes' if pauses else 'no'} | {len(utterances)} | {n} "
                    f"| {100 * sum(e == 0 for e in errs) / n:.1f} "
                    f"| {statistics.fmean(abs(e) for e in errs):.2f} "
                    f"| {100 * sum(e > 0 for e in errs) / n:.1f} "
                    f"| {100 * sum(e < 0 for e in errs) / n:.1f} |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
