"""Transcript normalisation shared by the levers: case- and punctuation-insensitive words.

The same rule as Pipecat's ``NormalizedMatch`` (which draft-and-hold uses to compare a draft
with the final transcript): Unicode NFKC, case folded, apostrophes dropped (``don't`` ->
``dont``, so an STT that drops them still matches), every other punctuation mark or symbol a
word break, whitespace collapsed. Letters and marks of every script are kept.
"""

from __future__ import annotations

import unicodedata

import regex

_APOSTROPHES = regex.compile(r"['\u2019\u02bc]")
_BREAKS = regex.compile(r"[\p{P}\p{S}]+")


def normalize(text: str) -> str:
    """``"Yes, I want to book it."`` and ``"yes i want to book it"`` both give the latter."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _APOSTROPHES.sub("", text)
    return " ".join(_BREAKS.sub(" ", text).split())


def normalize_words(text: str) -> list[str]:
    """The words of :func:`normalize`."""
    return normalize(text).split()
