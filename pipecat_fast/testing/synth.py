"""Deterministic stand-in speech for the TTS emulator: words in, timed PCM out.

Not a voice: each word is a short voiced-like tone burst so that audio is audible, has
word-shaped energy, and lasts as long as speech of that text would. Pure functions.
"""

from __future__ import annotations

import math
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
    audio = np.zeros(n, dtype=np.float32)
    for i, word in enumerate(words):
        a, b = int(word.start_s * sample_rate), min(n, int(word.end_s * sample_rate))
        if b <= a:
            continue
        t = np.arange(b - a, dtype=np.float32) / sample_rate
        pitch = 140.0 + 20.0 * math.sin(i)  # a little prosody
        tone = np.sin(2 * np.pi * pitch * t) + 0.4 * np.sin(2 * np.pi * 2 * pitch * t)
        envelope = np.sin(np.pi * np.arange(b - a, dtype=np.float32) / (b - a)) ** 0.5
        audio[a:b] = 0.25 * tone * envelope
    return (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2").tobytes()
