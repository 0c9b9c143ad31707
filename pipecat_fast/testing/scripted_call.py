"""A scripted caller for benching your own bot: audio, what the STT hears, what the LLM answers.

:class:`ScriptedCall` gathers what the emulators and :class:`CallerTransport` need for one call:

- ``ScriptedCall.shipped("book_cleaning")``: one of the package's recorded calls (espeak-ng
  speech with its measured word timings and scripted replies);
- ``ScriptedCall.espeak("my-call", ["Hi, I'd like a table for two.", ...])``: your own lines,
  synthesized with the ``espeak-ng`` program;
- ``ScriptedCall.from_wavs("my-call", [("Hi, I'd like a table for two.", "hi.wav"), ...])``:
  your own recordings (any PCM WAV of 16-bit samples; stereo is mixed down and the rate
  converted to 16 kHz).

Then ``EmulatorStack(stt_scripts=call.stt_scripts, replies=call.replies)`` serves it, the STT
service says which call it is with ``DeepgramSTTService(tag=call.id)``, and ``call.transport()``
is the caller. See ``docs/bench-your-bot.md``.

For your own audio the word timings are estimated (:func:`words_from_audio`): the STT emulator
finds the utterance's onset by its energy, as it will on the live stream, and the words share the
voiced audio after it in proportion to their letters, so the final transcript comes at the real
end of speech and interims grow through the utterance.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import wave
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pipecat_fast.testing.caller_transport import CallerTransport
from pipecat_fast.testing.deepgram_server import (
    FRAME_S,
    ONSET_FRAMES,
    ONSET_RMS,
    OnsetDetector,
    ScriptedUtterance,
    utterance_from_words,
)

SAMPLE_RATE = 16_000
"""The rate every :class:`ScriptedCall` plays at (Hz, mono, signed 16-bit)."""


@dataclass(frozen=True)
class CallerLine:
    """One thing the caller says.

    Attributes:
        text: What the caller says: the STT emulator's final transcript and the key the LLM
            emulator looks the reply up by.
        pcm: The utterance, 16-bit mono little-endian PCM at :data:`SAMPLE_RATE`.
        utterance: What the STT emulator transcribes, word times in s after the speech onset.
        reply: What the LLM emulator answers to it; None: the emulator's stable fallback reply.
    """

    text: str
    pcm: bytes = field(repr=False)
    utterance: ScriptedUtterance = field(repr=False)
    reply: str | None = None

    @property
    def duration_s(self) -> float:
        """Length of the audio (s)."""
        return len(self.pcm) / 2 / SAMPLE_RATE


@dataclass(frozen=True)
class ScriptedCall:
    """A caller's lines, ready for :class:`EmulatorStack` and :class:`CallerTransport`.

    Attributes:
        id: The call id: the STT service's ``tag`` (``DeepgramSTTService(tag=call.id)``), which
            selects this call's script in the STT emulator.
        lines: What the caller says, in order.
    """

    id: str
    lines: tuple[CallerLine, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "lines", tuple(self.lines))
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"a call id must be a non-empty string, got {self.id!r}")
        if not self.lines:
            raise ValueError(f"call {self.id!r} has no lines")

    # -- making one ------------------------------------------------------------------------

    @staticmethod
    def shipped_ids() -> list[str]:
        """Ids of the package's recorded calls."""
        from pipecat_fast.bench.calls import call_ids

        return call_ids()

    @classmethod
    def shipped(cls, call_id: str, *, turns: int | None = None) -> ScriptedCall:
        """One of the package's recorded calls (:meth:`shipped_ids`).

        Args:
            call_id: e.g. ``"book_cleaning"``.
            turns: Keep only the first ``turns`` utterances (a shorter call).

        Raises:
            ValueError: An unknown id (the message lists the known ones), or ``turns`` < 1.
        """
        from pipecat_fast.bench.calls import load_calls
        from pipecat_fast.bench.material import bench_call

        call = bench_call(load_calls([call_id])[0])
        lines = tuple(
            CallerLine(text=u.text, pcm=pcm, utterance=u, reply=reply)
            for pcm, u, (_, reply) in zip(
                call.utterances, call.stt_script, call.replies, strict=True
            )
        )
        return cls(call.id, lines).first(turns) if turns is not None else cls(call.id, lines)

    @classmethod
    def from_wavs(
        cls,
        call_id: str,
        lines: Sequence[tuple[str, str | Path]],
        *,
        replies: Sequence[str | None] = (),
    ) -> ScriptedCall:
        """Your own recordings: ``[(what is said, WAV path), ...]``, word timings estimated.

        Args:
            call_id: The call id (the STT service's ``tag``).
            lines: Per utterance, its text and a WAV of 16-bit PCM (any rate, mono or stereo).
            replies: Per utterance, what the LLM emulator answers (missing or None: its
                fallback reply).

        Raises:
            ValueError: A file that is not a 16-bit PCM WAV, holds no speech, or a line whose
                text has no words (the message names the file).
        """
        made = []
        for i, (text, path) in enumerate(lines):
            pcm = read_wav(path)
            utterance = words_from_audio(text, pcm, where=str(path))
            reply = replies[i] if i < len(replies) else None
            made.append(CallerLine(text, pcm, utterance, reply))
        return cls(call_id, tuple(made))

    @classmethod
    def espeak(
        cls,
        call_id: str,
        texts: Sequence[str],
        *,
        replies: Sequence[str | None] = (),
        voice: str = "en-us",
        rate: int = 175,
        save_to: str | Path | None = None,
    ) -> ScriptedCall:
        """Your own lines, synthesized with the ``espeak-ng`` program (word timings estimated).

        Args:
            call_id: The call id (the STT service's ``tag``).
            texts: What the caller says, one utterance each.
            replies: Per utterance, what the LLM emulator answers.
            voice: ``espeak-ng -v`` voice (``en-us``, ``es``, ``hi``...).
            rate: ``espeak-ng -s`` speed, words per minute.
            save_to: A folder to keep the WAVs in (``<call_id>_<n>.wav``, n from 1), e.g. to
                load them later with :meth:`from_wavs`.

        Raises:
            RuntimeError: ``espeak-ng`` is not installed, or fails (its message is kept).
        """
        exe = shutil.which("espeak-ng")
        if exe is None:
            raise RuntimeError(
                "espeak-ng is not installed (Debian/Ubuntu: apt-get install espeak-ng); "
                "or record the lines yourself and use ScriptedCall.from_wavs"
            )
        out_dir = Path(save_to) if save_to is not None else None
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
        pairs = []
        with tempfile.TemporaryDirectory(prefix="pipecat-fast-espeak-") as tmp:
            for i, text in enumerate(texts, start=1):
                folder = out_dir if out_dir is not None else Path(tmp)
                path = folder / f"{call_id}_{i}.wav"
                done = subprocess.run(
                    [exe, "-v", voice, "-s", str(rate), "-w", str(path), "--", text],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if done.returncode != 0 or not path.is_file():
                    raise RuntimeError(f"espeak-ng failed on {text!r}: {done.stderr.strip()}")
                if out_dir is not None:
                    write_wav(path, read_wav(path))  # keep them at 16 kHz
                pairs.append((text, path))
            return cls.from_wavs(call_id, pairs, replies=replies)

    # -- using one -------------------------------------------------------------------------

    def first(self, n: int) -> ScriptedCall:
        """The same call with only its first ``n`` utterances."""
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"a call needs at least one utterance, got turns={n!r}")
        return ScriptedCall(self.id, self.lines[:n])

    def with_id(self, call_id: str) -> ScriptedCall:
        """The same lines under another call id (e.g. one per configuration and repeat)."""
        return ScriptedCall(call_id, self.lines)

    @property
    def sample_rate(self) -> int:
        """The caller audio's rate (Hz)."""
        return SAMPLE_RATE

    @property
    def stt_scripts(self) -> dict[str, list[ScriptedUtterance]]:
        """``{call id: [utterance, ...]}``: ``EmulatorStack(stt_scripts=...)``."""
        return {self.id: [line.utterance for line in self.lines]}

    @property
    def replies(self) -> list[tuple[str, str]]:
        """``[(caller text, reply), ...]``: ``EmulatorStack(replies=...)``."""
        return [(line.text, line.reply) for line in self.lines if line.reply is not None]

    def transport(self, **kwargs: Any) -> CallerTransport:
        """A :class:`CallerTransport` that plays this call (keyword arguments go to it)."""
        return CallerTransport([line.pcm for line in self.lines], sample_rate=SAMPLE_RATE, **kwargs)


def read_wav(path: str | Path) -> bytes:
    """A WAV file's 16-bit PCM as mono at :data:`SAMPLE_RATE` (stereo mixed, rate converted).

    Raises:
        ValueError: Missing file, not a PCM WAV, or samples that are not 16-bit.
    """
    path = Path(path)
    try:
        with wave.open(str(path), "rb") as w:
            width, channels, rate = w.getsampwidth(), w.getnchannels(), w.getframerate()
            raw = w.readframes(w.getnframes())
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except (wave.Error, EOFError) as e:
        raise ValueError(f"{path}: not a PCM WAV file ({e})") from None
    if width != 2:
        raise ValueError(f"{path}: {8 * width}-bit samples; 16-bit PCM is needed")
    samples = np.frombuffer(raw, dtype="<i2")
    if channels > 1:
        samples = samples[: len(samples) // channels * channels].reshape(-1, channels)
        samples = samples.astype(np.float32).mean(axis=1)
    if rate != SAMPLE_RATE:
        import soxr

        samples = soxr.resample(samples.astype(np.float32), rate, SAMPLE_RATE)
    return np.clip(np.rint(samples), -32768, 32767).astype("<i2").tobytes()


def write_wav(path: str | Path, pcm: bytes) -> None:
    """Write 16-bit mono PCM at :data:`SAMPLE_RATE` as a WAV file."""
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(pcm)


GAP_FRAMES = 8
"""A silence inside an utterance this many 20 ms frames long (160 ms) is taken to fall between
two words: a comma, a sentence end, a pause to think."""


def _spoken_weight(token: str) -> float:
    """How long a token takes to say, in letters: a digit reads out as a few letters' worth."""
    letters = sum(c.isalpha() for c in token)
    digits = sum(c.isdigit() for c in token)
    return float(max(1, letters + 4 * digits))


def _snap_to_gaps(bounds: np.ndarray, voiced: np.ndarray) -> np.ndarray:
    """Move the word boundary nearest each long silence onto it; stretch the others between.

    ``bounds`` are word boundaries in voiced frames (0 .. len(voiced)); a silence of
    :data:`GAP_FRAMES` or more between voiced frames k-1 and k sits at voiced position k.
    """
    n = len(bounds) - 1
    gaps = [k for k in range(1, len(voiced)) if voiced[k] - voiced[k - 1] > GAP_FRAMES]
    anchors = [(0, 0.0)]
    for k in gaps:
        after = anchors[-1][0]
        free = [j for j in range(after + 1, n)]
        if not free:
            break
        j = min(free, key=lambda j: abs(bounds[j] - k))
        anchors.append((j, float(k)))
    anchors.append((n, float(bounds[n])))
    out = bounds.copy()
    for (j0, v0), (j1, v1) in zip(anchors, anchors[1:], strict=False):
        span = bounds[j1] - bounds[j0]
        for j in range(j0, j1 + 1):
            frac = (bounds[j] - bounds[j0]) / span if span > 0 else 0.0
            out[j] = v0 + frac * (v1 - v0)
    return out


def words_from_audio(text: str, pcm: bytes, *, where: str = "the audio") -> ScriptedUtterance:
    """Estimate an utterance's word timings from its audio, as the STT emulator will hear it.

    The onset is where the STT emulator's detector finds it (``ONSET_FRAMES`` 20 ms frames
    above RMS ``ONSET_RMS`` of 32,767); the speech ends with the last such frame. The words of
    ``text`` (split on whitespace, punctuation kept) share the voiced frames in between in
    proportion to their letters and digits, so no word is placed in a pause.

    Args:
        text: What is said.
        pcm: 16-bit mono PCM at :data:`SAMPLE_RATE`.
        where: Names the audio in error messages.

    Raises:
        ValueError: ``text`` has no words, or the audio has no speech the emulator would hear.
    """
    tokens = text.split()
    if not tokens:
        raise ValueError(f"{where}: the line's text has no words")
    onsets = OnsetDetector(SAMPLE_RATE).feed(pcm)
    if not onsets:
        raise ValueError(
            f"{where}: no speech the STT emulator would hear (it needs {ONSET_FRAMES} frames "
            f"of 20 ms above RMS {ONSET_RMS:.0f} of 32767): too quiet, or silent?"
        )
    frame = int(SAMPLE_RATE * FRAME_S)
    samples = np.frombuffer(pcm[: len(pcm) // (2 * frame) * 2 * frame], dtype="<i2")
    rms = np.sqrt(np.mean(samples.astype(np.float32).reshape(-1, frame) ** 2, axis=1))
    first = int(round(onsets[0] / FRAME_S))
    loud = np.flatnonzero(rms > ONSET_RMS)
    voiced = loud[loud >= first] - first  # voiced frames, counted from the onset
    weights = np.array([_spoken_weight(t) for t in tokens], dtype=np.float64)
    bounds = np.concatenate([[0.0], np.cumsum(weights) / weights.sum() * len(voiced)])
    bounds = _snap_to_gaps(bounds, voiced)

    def start_at(x: float) -> float:  # voiced time x (frames) -> frames after the onset
        k = min(int(x), len(voiced) - 1)
        return float(voiced[k]) + (x - k)

    def end_at(x: float) -> float:
        k = max(0, int(np.ceil(x)) - 1)
        return float(voiced[k]) + (x - k)

    words = [
        (tok, round(start_at(bounds[i]) * FRAME_S, 3), round(end_at(bounds[i + 1]) * FRAME_S, 3))
        for i, tok in enumerate(tokens)
    ]
    return utterance_from_words(text, words)


__all__ = ["CallerLine", "SAMPLE_RATE", "ScriptedCall", "read_wav", "words_from_audio", "write_wav"]
