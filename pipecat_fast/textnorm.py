r"""Transcript normalisation shared by the levers: case- and punctuation-insensitive words.

The one normaliser of the project: the stabiliser keys its words with it, and draft-and-hold
compares a draft with the final transcript with it (:func:`same_words`, through
:class:`pipecat_fast.prefill.TranscriptMatch`, Pipecat's ``EagerMatchPolicy`` interface), so the
two can never disagree about whether two transcripts say the same words.

The rule is Pipecat's ``NormalizedMatch`` rule — Unicode NFKC, case folded, apostrophes dropped
(``don't`` -> ``dont``, so an STT that drops them still matches), every other punctuation mark
or symbol a word break, whitespace collapsed — written for every script:

- letters *and combining marks* are word characters, so Thai, Devanagari, Myanmar or Tamil words
  stay whole (Pipecat's pattern ``[^\w\s]`` counts a vowel sign or virama as punctuation and splits
  the word there);
- invisible format characters (left-to-right marks, bidi embeddings, zero-width joiners) are
  dropped, so a mark an STT or editor left in does not make two transcripts differ;
- a mark left without a letter (NFKC turns a spacing accent ``´`` into a space and a combining
  accent) is dropped;
- the underscore is punctuation (a word break), as Unicode classes it.

``tests/test_textnorm.py`` checks that it agrees with Pipecat's ``NormalizedMatch`` on its
documented cases and on real transcripts, and that they differ only in the ways listed here.
"""

from __future__ import annotations

import unicodedata

import regex

_APOSTROPHES = regex.compile(r"['\u2019\u02bc]")
_FORMAT = regex.compile(r"\p{Cf}+")
_BREAKS = regex.compile(r"[\p{P}\p{S}]+")
_STRAY_MARKS = regex.compile(r"(?<!\S)\p{M}+")


def normalize(text: str) -> str:
    """``"Yes, I want to book it."`` and ``"yes i want to book it"`` both give the latter."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _FORMAT.sub("", text)
    text = _APOSTROPHES.sub("", text)
    text = _BREAKS.sub(" ", text)
    text = _STRAY_MARKS.sub("", text)
    return " ".join(text.split())


def normalize_words(text: str) -> list[str]:
    """The words of :func:`normalize`."""
    return normalize(text).split()


def same_words(a: str, b: str) -> bool:
    """Whether two transcripts say the same words (case, punctuation and spacing aside)."""
    return normalize(a) == normalize(b)
