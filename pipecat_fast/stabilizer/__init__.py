"""Two-update partial stabiliser: pass a word on only once it has settled.

The pure core (``core``) loads without Pipecat; the frame and the processor are imported on
first use, so ``pipecat-fast bench partials`` does not load the audio stack.
"""

from importlib import import_module
from typing import Any

from pipecat_fast.stabilizer.core import (
    PartialStabilizer,
    StabilizerCounters,
    StableUpdate,
    join_words,
    prefill_delta,
    split_words,
)

_LAZY = {
    "StableTranscriptFrame": "pipecat_fast.frames",
    "TwoUpdateStabilizer": "pipecat_fast.stabilizer.processor",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "PartialStabilizer",
    "StabilizerCounters",
    "StableTranscriptFrame",
    "StableUpdate",
    "TwoUpdateStabilizer",
    "join_words",
    "prefill_delta",
    "split_words",
]
