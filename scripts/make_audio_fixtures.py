#!/usr/bin/env python3
"""Synthesize the bench's caller audio with espeak-ng and measure its timings.

For every call script in ``pipecat_fast/bench/data/calls/*.json`` this reads each turn's
``user.text`` and the call's ``espeak.voice`` / ``espeak.rate``, synthesizes the utterance with
espeak-ng, and writes ``user.audio`` (16 kHz, mono, signed 16-bit WAV) plus these measured fields
back into the JSON:

- ``speech_start_ms`` / ``speech_end_ms``: the first and last voiced 10 ms frame (energy-based, see
  below), in ms from the start of the WAV file.
- ``words``: ``[{"text", "start_ms", "end_ms"}]``, one per whitespace-separated token of the text
  (punctuation kept, so ``" ".join(w["text"] for w in words) == text``).
- ``espeak.version`` and ``espeak.sox_version``: the tools that made the audio.
- ``pauses[j].start_ms`` / ``end_ms`` for each deliberate pause written by hand as
  ``{"after_word", "ms"}``: the silence is cut into the synthesis of the whole sentence (never
  synthesized as two sentences), in the middle of the gap after word ``after_word``, so the words
  before it keep the intonation of a phrase that goes on.
- ``smart_turn_v3``: ``{"min", "max"}``, how sure Pipecat's default end-of-turn model, Smart Turn v3
  (``LocalSmartTurnAnalyzerV3`` with the ``smart-turn-v3.2-cpu.onnx`` bundled in pipecat-ai), is
  that the caller's turn is complete, asked as the pipeline asks it: at every 20 ms chunk boundary
  where the VAD stop can fall, 170-450 ms after the last voiced audio (the model's answer moves with
  where its input ends; see ``pipecat_fast.bench.smart_turn``). The same for each pause. Below 0.5
  the stock pipeline waits up to 3 s (``SmartTurnParams.stop_secs``) of silence before it answers,
  so every turn is worded and voiced to keep ``min >= 0.8`` and each pause kept clear of 0.5 either
  way; anything else is reported as a warning. Check the margin on other kernels with
  ``scripts/smart_turn_spread.py``.

Pipeline per utterance:

1. espeak-ng synthesizes at its native 22,050 Hz through its C library (``libespeak-ng.so.1``,
   called with ctypes in synchronous mode), which also reports a WORD event for every source word
   with the sample index where that word's speech starts. Each utterance is synthesized in a fresh
   process, because the library keeps wave-generator state between calls (a second call in one
   process gives slightly different samples); a fresh process gives exactly the samples of
   ``espeak-ng -v VOICE -s RATE "text"`` (which only appends trailing silence).
2. sox resamples to 16 kHz (``-D``: no dither, so the output is bit-exact run to run).
3. Energy: RMS of 10 ms frames; a frame is voiced when it is within 40 dB of the loudest frame
   and above -60 dBFS. Leading and trailing silence are cut or zero-padded to exactly ``PAD_MS``
   (150 ms) before the first and after the last voiced frame, then the span is measured again on
   the final file.
4. Word timings (method): each token's window runs from its espeak WORD event to the next token's
   event (the last token's window ends at the speech end). Inside that window the word starts at the
   first voiced frame and ends at the last voiced frame, so the pause after a comma or a sentence
   belongs to neither word. This uses espeak-ng's own knowledge of where each word begins, which is
   exact, instead of guessing from syllable counts or re-synthesizing prefixes (a prefix ends with a
   sentence-final lengthening that the full utterance does not have). A token without a voiced frame
   in its window (rare) keeps its raw window. Resolution: 10 ms.

Output is deterministic for a given espeak-ng and sox version (both recorded in each call's JSON)
and Smart Turn model. Needed only to regenerate the fixtures, never by the tests or the bench:
``apt-get install -y espeak-ng sox`` (Debian 12: espeak-ng 1.51, SoX 14.4.2) and pipecat-ai with
its local Smart Turn v3 (onnxruntime).

Usage::

    python scripts/make_audio_fixtures.py            # regenerate WAVs and timings in place
    python scripts/make_audio_fixtures.py --check    # in memory; exit 1 if any file differs
    python scripts/make_audio_fixtures.py --only book_cleaning
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import ctypes
import io
import json
import multiprocessing
import re
import subprocess
import sys
import wave
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA_DIR = Path(__file__).resolve().parent.parent / "pipecat_fast" / "bench" / "data"
SAMPLE_RATE = 16_000
FRAME_MS = 10
PAD_MS = 150
REL_THRESHOLD_DB = -40.0
ABS_THRESHOLD_DBFS = -60.0
SMART_TURN_MODEL = "smart-turn-v3.2-cpu.onnx"
FIXTURE_MIN_P = 0.8  # pipecat_fast.bench.smart_turn.FIXTURE_MIN_P: a margin no CPU crosses

# espeak-ng's C API (speak_lib.h).
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INIT_DONT_EXIT = 0x8000
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_PARAM_RATE = 1
_EVENT_LIST_TERMINATED = 0
_EVENT_WORD = 1


class _EventId(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),  # 1-based character index into the input text
        ("length", ctypes.c_int),  # characters
        ("audio_position", ctypes.c_int),  # ms
        ("sample", ctypes.c_int),  # sample index at the native rate
        ("user_data", ctypes.c_void_p),
        ("id", _EventId),
    ]


class FixtureError(RuntimeError):
    """espeak-ng or sox is missing or failed, or an utterance cannot be timed."""


_SynthCallback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event)
)


class Espeak:
    """espeak-ng's library in synchronous mode: text in, native-rate samples and word events out."""

    def __init__(self) -> None:
        try:
            self._lib = ctypes.CDLL("libespeak-ng.so.1")
        except OSError as e:
            raise FixtureError(
                f"libespeak-ng.so.1 not found ({e}); install it: apt-get install -y espeak-ng"
            ) from e
        self.sample_rate = self._lib.espeak_Initialize(
            _AUDIO_OUTPUT_SYNCHRONOUS, 0, None, _INIT_DONT_EXIT
        )
        if self.sample_rate <= 0:
            raise FixtureError("espeak_Initialize failed")
        self._lib.espeak_Info.restype = ctypes.c_char_p
        self.version = self._lib.espeak_Info(None).decode()
        self._samples: list[int] = []
        self._events: list[tuple[int, int, int]] = []
        self._callback = _SynthCallback(self._on_audio)  # keep a reference: C holds the pointer
        self._lib.espeak_SetSynthCallback(self._callback)

    def _on_audio(self, wav, n, events) -> int:
        if wav and n > 0:
            self._samples.extend(wav[:n])
        i = 0
        while events[i].type != _EVENT_LIST_TERMINATED:
            ev = events[i]
            if ev.type == _EVENT_WORD and ev.length > 0:
                self._events.append((ev.text_position - 1, ev.length, ev.sample))
            i += 1
        return 0

    def synth(self, text: str, voice: str, rate: int) -> tuple[np.ndarray, list]:
        """Samples (int16, native rate) and WORD events ``(char_offset, length, sample)``."""
        if self._lib.espeak_SetVoiceByName(voice.encode()) != 0:
            raise FixtureError(f"espeak-ng has no voice {voice!r} (see `espeak-ng --voices`)")
        self._lib.espeak_SetParameter(_PARAM_RATE, int(rate), 0)
        self._samples, self._events = [], []
        data = text.encode("utf-8")
        err = self._lib.espeak_Synth(
            data, len(data) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None
        )
        if err != 0:
            raise FixtureError(f"espeak_Synth failed ({err}) for {text!r}")
        return np.asarray(self._samples, dtype=np.int16), list(self._events)


def _synth_fresh(text: str, voice: str, rate: int) -> tuple[str, int, bytes, list]:
    """Run in a fresh worker process (see the module docstring, step 1)."""
    engine = Espeak()
    samples, events = engine.synth(text, voice, rate)
    return engine.version, engine.sample_rate, samples.tobytes(), events


def synth_fresh(text: str, voice: str, rate: int) -> tuple[str, int, np.ndarray, list]:
    """Synthesize in a new process: ``(espeak version, native rate, int16 samples, events)``."""
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        version, rate_in, data, events = pool.submit(_synth_fresh, text, voice, rate).result()
    return version, rate_in, np.frombuffer(data, dtype=np.int16), events


def espeak_version() -> str:
    return synth_fresh("a", "en-us", 175)[0]


def _sox(args: list[str], stdin: bytes = b"") -> bytes:
    try:
        out = subprocess.run(["sox", *args], input=stdin, capture_output=True, check=True)
    except FileNotFoundError as e:
        raise FixtureError("sox not found; install it: apt-get install -y sox") from e
    except subprocess.CalledProcessError as e:
        err = e.stderr.decode(errors="replace")
        raise FixtureError(f"sox {' '.join(args)} failed: {err}") from e
    return out.stdout


def sox_version() -> str:
    return _sox(["--version"]).decode().split("SoX v")[-1].strip()


def resample(samples: np.ndarray, rate_in: int) -> np.ndarray:
    """Resample int16 mono to ``SAMPLE_RATE`` with sox, no dither (bit-exact)."""
    raw = ["-t", "raw", "-e", "signed-integer", "-b", "16", "-c", "1", "-L"]
    args = ["-D", "-V1", *raw, "-r", str(rate_in), "-", *raw, "-r", str(SAMPLE_RATE), "-"]
    out = _sox(args, samples.astype("<i2").tobytes())
    return np.frombuffer(out, dtype="<i2").astype(np.int16)


def voiced_frames(pcm: np.ndarray) -> np.ndarray:
    """Boolean per 10 ms frame: within 40 dB of the loudest frame and above -60 dBFS."""
    n = SAMPLE_RATE * FRAME_MS // 1000
    frames = pcm[: len(pcm) // n * n].astype(np.float64).reshape(-1, n) / 32768.0
    db = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)
    return db > max(db.max() + REL_THRESHOLD_DB, ABS_THRESHOLD_DBFS)


def speech_span_ms(voiced: np.ndarray, lo_ms: int = 0, hi_ms: int | None = None) -> tuple[int, int]:
    """Start of the first and end of the last voiced frame in ``[lo_ms, hi_ms)``, or ``(-1, -1)``.

    The window takes the frame holding ``lo_ms`` and the frames that end by ``hi_ms``.
    """
    lo = lo_ms // FRAME_MS
    hi = len(voiced) if hi_ms is None else min(len(voiced), hi_ms // FRAME_MS)
    idx = np.flatnonzero(voiced[lo:hi])
    if idx.size == 0:
        return -1, -1
    return (lo + int(idx[0])) * FRAME_MS, (lo + int(idx[-1]) + 1) * FRAME_MS


@dataclass
class Utterance:
    pcm: np.ndarray
    speech_start_ms: int
    speech_end_ms: int
    words: list[dict]


def tokens_with_offsets(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", text)]


def make_utterance(
    text: str, voice: str, rate: int, pauses: Sequence[tuple[int, int]] = ()
) -> Utterance:
    """Synthesize ``text``; ``pauses`` inserts ``(after_word, ms)`` of silence mid-utterance.

    A pause is cut into the synthesis of the whole utterance (never synthesized as two
    utterances), so the words before it keep the intonation of a phrase that goes on, as a
    caller's voice does when they stop to recall a date: the silence goes in the middle of
    the gap between the two words.
    """
    _version, native_rate, raw, events = synth_fresh(text, voice, rate)
    pcm = resample(raw, native_rate)
    ms = SAMPLE_RATE // 1000
    tokens = tokens_with_offsets(text)
    starts = _word_starts(tokens, events, native_rate, text)  # ms in pcm
    for after, pause_ms in sorted(pauses, reverse=True):
        if not 0 <= after < len(tokens) - 1:
            raise FixtureError(f"pause after word {after} of {text!r}: no word follows it")
        voiced = voiced_frames(pcm)
        _a, end_of_word = speech_span_ms(voiced, starts[after], starts[after + 1])
        if end_of_word < 0:
            end_of_word = starts[after + 1]
        at = (end_of_word + starts[after + 1]) // 2 // FRAME_MS * FRAME_MS
        pcm = np.concatenate([pcm[: at * ms], np.zeros(pause_ms * ms, np.int16), pcm[at * ms :]])
        starts = [s if i <= after else s + pause_ms for i, s in enumerate(starts)]
    start, end = speech_span_ms(voiced_frames(pcm))
    if start < 0:
        raise FixtureError(f"no speech found in the synthesis of {text!r}")
    # Cut/pad to PAD_MS of silence on both sides.
    lead = np.zeros(max(0, PAD_MS - start) * ms, dtype=np.int16)
    tail = np.zeros(max(0, end + PAD_MS - len(pcm) // ms) * ms, dtype=np.int16)
    cut_ms = max(0, start - PAD_MS)
    body = pcm[cut_ms * ms : (end + PAD_MS) * ms]
    pcm = np.concatenate([lead, body, tail])
    shift_ms = len(lead) // ms - cut_ms  # old time + shift = new time
    starts = [s + shift_ms for s in starts]

    voiced = voiced_frames(pcm)
    speech_start, speech_end = speech_span_ms(voiced)
    words = []
    prev_end = speech_start
    for i, (tok, _a, _b) in enumerate(tokens):
        lo = max(starts[i], prev_end)
        hi = starts[i + 1] if i + 1 < len(tokens) else speech_end
        hi = max(hi, lo)
        w_start, w_end = speech_span_ms(voiced, lo, hi)
        if w_start < 0:
            w_start, w_end = lo, hi
        w_start = min(max(w_start, speech_start), speech_end)
        w_end = min(max(w_end, w_start), speech_end)
        words.append({"text": tok, "start_ms": w_start, "end_ms": w_end})
        prev_end = w_end
    return Utterance(pcm, speech_start, speech_end, words)


def _word_starts(tokens, events, native_rate: int, text: str) -> list[int]:
    """Each token's start (ms) from espeak-ng's WORD events."""
    starts: list[int | None] = [None] * len(tokens)
    for offset, _length, sample in events:
        for i, (_tok, a, b) in enumerate(tokens):
            if a <= offset < b or (offset < a and (i == 0 or offset >= tokens[i - 1][2])):
                if starts[i] is None:
                    starts[i] = round(sample * 1000 / native_rate)
                break
    missing = [tokens[i][0] for i, s in enumerate(starts) if s is None]
    if missing:
        raise FixtureError(f"espeak-ng gave no word event for {missing} in {text!r}")
    return [int(s) for s in starts]


class SmartTurn:
    """Smart Turn v3 as the pipeline asks it (``pipecat_fast.bench.smart_turn``)."""

    def __init__(self) -> None:
        try:
            from pipecat_fast.bench import smart_turn
        except ImportError as e:
            raise FixtureError(f"run from the repository root with PYTHONPATH=. ({e})") from e
        try:
            self._probe = smart_turn.SmartTurnProbe()
        except smart_turn.SmartTurnUnavailable as e:
            raise FixtureError(str(e)) from e
        self._verdicts = smart_turn.verdicts
        self.model = SMART_TURN_MODEL
        self.window_ms = list(smart_turn.STOP_WINDOW_MS)

    def verdicts(self, utt: Utterance, pauses: list[tuple[int, int]]):
        """``(end, [pause, ...])``, each ``{"min", "max"}`` over the VAD stop window."""
        pcm = utt.pcm.astype("<i2").tobytes()
        found = asyncio.run(self._verdicts(self._probe, pcm, utt.speech_end_ms, pauses))

        def span(ps: list[float]) -> dict[str, float]:
            return {"min": round(min(ps), 3), "max": round(max(ps), 3)}

        return span(found.end), [span(ps) for ps in found.pauses]

    def close(self) -> None:
        asyncio.run(self._probe.close())


def wav_bytes(pcm: np.ndarray) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(pcm.astype("<i2").tobytes())
    return buf.getvalue()


def dump_call(call: dict) -> str:
    """JSON with 2-space indent, one line per word and per Smart Turn verdict."""
    text = json.dumps(call, ensure_ascii=False, indent=2)
    word = r'\{\s+"text": ("(?:[^"\\]|\\.)*"),\s+"start_ms": (\d+),\s+"end_ms": (\d+)\s+\}'
    text = re.sub(word, r'{"text": \1, "start_ms": \2, "end_ms": \3}', text)
    verdict = r'\{\s+"min": ([\d.]+),\s+"max": ([\d.]+)\s+\}'
    text = re.sub(verdict, r'{"min": \1, "max": \2}', text)
    window = r'"window_ms": \[\s+(\d+),\s+(\d+)\s+\]'
    return re.sub(window, r'"window_ms": [\1, \2]', text) + "\n"


def process_call(
    espeak: str, sox: str, smart_turn: SmartTurn, path: Path, data_dir: Path
) -> dict[Path, bytes]:
    """Return the files (call JSON and its WAVs) this call should have, as bytes."""
    call = json.loads(path.read_text(encoding="utf-8"))
    voice, rate = call["espeak"]["voice"], call["espeak"]["rate"]
    call["espeak"] = {"version": espeak, "voice": voice, "rate": rate, "sox_version": sox}
    call.pop("smart_turn_v3", None)
    at = list(call).index("espeak") + 1  # keep the tool record together, after "espeak"
    items = list(call.items())
    smart = ("smart_turn_v3", {"model": smart_turn.model, "window_ms": smart_turn.window_ms})
    call = dict(items[:at] + [smart] + items[at:])
    files: dict[Path, bytes] = {}
    for n, turn in enumerate(call["turns"], start=1):
        user = turn["user"]
        scripted = [(int(q["after_word"]), int(q["ms"])) for q in user.get("pauses", [])]
        utt = make_utterance(user["text"], voice, rate, scripted)
        audio = user.get("audio") or f"audio/{call['id']}_{n}.wav"
        files[data_dir / audio] = wav_bytes(utt.pcm)
        spans = [
            (utt.words[after]["end_ms"], utt.words[after + 1]["start_ms"]) for after, _ in scripted
        ]
        at_end, at_pauses = smart_turn.verdicts(utt, spans)
        pauses = [
            {"after_word": after, "ms": pause_ms, "start_ms": a, "end_ms": b, "smart_turn_v3": v}
            for (after, pause_ms), (a, b), v in zip(scripted, spans, at_pauses, strict=True)
        ]
        turn["user"] = {
            "text": user["text"],
            "audio": audio,
            "speech_start_ms": utt.speech_start_ms,
            "speech_end_ms": utt.speech_end_ms,
            "words": utt.words,
            **({"pauses": pauses} if pauses else {}),
            "smart_turn_v3": at_end,
        }
        # Fields the generator does not know (a lever's scripted events) are kept.
        turn["user"].update({k: v for k, v in user.items() if k not in turn["user"]})
        dur = len(utt.pcm) / SAMPLE_RATE
        warn = ""
        if at_end["min"] < FIXTURE_MIN_P:
            warn = f"  WARNING: below {FIXTURE_MIN_P} (re-word or re-voice it)"
        for q in pauses:
            v = q["smart_turn_v3"]
            if v["min"] < FIXTURE_MIN_P and v["max"] > 1 - FIXTURE_MIN_P:
                warn += f"  WARNING: pause after word {q['after_word']} is a coin flip"
        print(
            f"  {audio}: {dur:.2f} s, speech {utt.speech_start_ms}-{utt.speech_end_ms} ms, "
            f"Smart Turn v3 P(complete) {at_end['min']:.3f}-{at_end['max']:.3f}"
            + "".join(
                f"; pause {q['start_ms']}-{q['end_ms']} ms P "
                f"{q['smart_turn_v3']['min']:.3f}-{q['smart_turn_v3']['max']:.3f}"
                for q in pauses
            )
            + warn
        )
    files[path] = dump_call(call).encode("utf-8")
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--only", nargs="*", help="call ids to regenerate (default: all)")
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)

    try:
        return _run(args)
    except FixtureError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    espeak, sox = espeak_version(), sox_version()
    print(f"espeak-ng {espeak}, SoX {sox}")
    paths = sorted((args.data_dir / "calls").glob("*.json"))
    if args.only:
        paths = [p for p in paths if p.stem in set(args.only)]
    smart_turn = SmartTurn()
    differ = []
    for path in paths:
        print(path.name)
        for out, data in process_call(espeak, sox, smart_turn, path, args.data_dir).items():
            if out.exists() and out.read_bytes() == data:
                continue
            differ.append(out)
            if not args.check:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(data)
    smart_turn.close()
    verb = "differ" if args.check else "written"
    print(f"{len(differ)} file(s) {verb}" + "".join(f"\n  {p}" for p in differ))
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
