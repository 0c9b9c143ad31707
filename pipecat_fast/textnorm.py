"""Transcript normalisation shared by the levers: case- and punctuation-insensitive words."""

from __future__ import annotations

import regex

_PUNCT = regex.compile(r"[\p{P}\p{S}]+")


def normalize_words(text: str) -> list[str]:
    """Words of ``text`` with case folded and punctuation and symbols removed.

    ``"Yes, I want to book it."`` and ``"yes i want to book it"`` give the same list.
    Punctuation inside a word joins its parts (``"don't"`` -> ``"dont"``), so an STT that
    drops apostrophes still matches.
    """
    return [w for w in (_PUNCT.sub("", w) for w in text.casefold().split()) if w]


def normalize(text: str) -> str:
    """``normalize_words`` joined by single spaces."""
    return " ".join(normalize_words(text))
