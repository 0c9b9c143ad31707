"""Barge-in truncation: the assistant context keeps only what the caller heard."""

from pipecat_fast.bargein.core import Heard, PlaybackLedger, heard_prefix, speech_units, word_spans
from pipecat_fast.bargein.processor import (
    DEFAULT_MARKER,
    DEFAULT_PLAYOUT_DELAY_S,
    BargeInTruncator,
    TruncatedReply,
)

__all__ = [
    "DEFAULT_MARKER",
    "DEFAULT_PLAYOUT_DELAY_S",
    "BargeInTruncator",
    "Heard",
    "PlaybackLedger",
    "TruncatedReply",
    "heard_prefix",
    "speech_units",
    "word_spans",
]
