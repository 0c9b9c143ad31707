"""Deterministic stand-in speech for the TTS emulator: words in, timed PCM out.

Not a voice: each word is a short voiced-like tone burst so that audio is audible, has
word-shaped energy, and lasts as long as speech of that text would. Pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import regex

# Speaking rate: ~15 characters/s is ~165 words/min of English (conversational 150-170 wpm);
# a CJK character or kana carries about a syllable, ~6 per second. Our assumptions.
SECONDS_PER_CHAR = 1.0 / 15.0
SECONDS_PER_CJK_CHAR = 1.0 / 6.0
PAUSE_AFTER_PUNCT_S = 0.15
GAP_BETWEEN_WORDS_S = 0.04

_CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")
_WORDS = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}]\p{P}*|\S+")
_TERMINAL_PUNCT = regex.compile(r"[.!?;:,。！？、，।॥؟]$")


@dataclass(frozen=True)
class TimedWord:
    """A word and where it sits in the synthesized audio (s from the start)."""

    text: str
    start_s: float
    end_s: float


def plan_speech(text: str) -> tuple[list[TimedWord], float]:
    """Word timings for ``text`` at a conversational speaking rate.

    CJK text without spaces is timed one character at a time, as Cartesia reports it.

    Returns:
        The timed words and the total duration (s), including trailing pauses.
    """
    words: list[TimedWord] = []
    t = 0.0
    for match in _WORDS.finditer(text):
        word = match.group()
        length = sum(SECONDS_PER_CJK_CHAR if _CJK.match(c) else SECONDS_PER_CHAR for c in word)
        words.append(TimedWord(word, t, t + length))
        t += length + GAP_BETWEEN_WORDS_S
        if _TERMINAL_PUNCT.search(word):
            t += PAUSE_AFTER_PUNCT_S
    return words, t


def render_pcm(words: list[TimedWord], duration_s: float, sample_rate: int) -> bytes:
    """16-bit little-endian mono PCM of tone bursts at the words' times.

    Args:
        words: From :func:`plan_speech`.
        duration_s: Total length (s).
        sample_rate: Output rate (Hz).
    """
    n = max(1, int(round(duration_s * sample_rate)))
    return b"".join(render_pcm_chunks(words, duration_s, sample_rate, n))


def render_pcm_chunks(
    words: list[TimedWord], duration_s: float, sample_rate: int, chunk_samples: int
) -> Iterator[bytes]:
    """The audio of :func:`render_pcm`, generated ``chunk_samples`` samples at a time.

    Memory is bounded by one chunk, however long the speech: a streaming server renders each
    chunk just before it sends it. The chunks concatenate to :func:`render_pcm`'s bytes; the
    last one may be shorter.

    Raises:
        ValueError: If ``sample_rate`` or ``chunk_samples`` is not positive.
    """
    if sample_rate <= 0 or chunk_samples <= 0:
        raise ValueError("sample_rate and chunk_samples must be positive")
    n = max(1, int(round(duration_s * sample_rate)))
    # Each word's sample span [a, b); words are in time order and do not overlap.
    spans = [(int(w.start_s * sample_rate), min(n, int(w.end_s * sample_rate))) for w in words]
    first = 0  # first word that may still reach into the current chunk
    for lo in range(0, n, chunk_samples):
        hi = min(n, lo + chunk_samples)
        audio = np.zeros(hi - lo, dtype=np.float32)
        while first < len(spans) and spans[first][1] <= lo:
            first += 1
        for i in range(first, len(spans)):
            a, b = spans[i]
            if a >= hi:
                break
            if b <= a or b <= lo:
                continue
            x0, x1 = max(a, lo), min(b, hi)  # the part of the word in this chunk
            k = np.arange(x0 - a, x1 - a, dtype=np.float32)  # sample index within the word
            t = k / sample_rate
            pitch = 140.0 + 20.0 * math.sin(i)  # a little prosody
            tone = np.sin(2 * np.pi * pitch * t) + 0.4 * np.sin(2 * np.pi * 2 * pitch * t)
            envelope = np.sin(np.pi * k / (b - a)) ** 0.5
            audio[x0 - lo : x1 - lo] = 0.25 * tone * envelope
        yield (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2").tobytes()
