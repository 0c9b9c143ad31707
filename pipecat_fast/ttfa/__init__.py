"""TTFA meter: time to first audio per user turn, with blocking stage times.

The pure parts (``core``: the turn state machine and the arithmetic; ``report``) load without
Pipecat; the observer and the annotation frame are imported on first use, so
``import pipecat_fast.ttfa.core`` needs no Pipecat service stack.
"""

from importlib import import_module
from typing import Any

from pipecat_fast.ttfa.core import (
    ANNOTATION_TARGETS,
    MARKS,
    STAGE_NAMES,
    TurnRecord,
    TurnTracker,
    blocking_stages_ms,
    percentile,
    summarize,
)
from pipecat_fast.ttfa.report import turns_report, waterfall_png, write_json

_LAZY = {
    "TTFAAnnotationFrame": "pipecat_fast.frames",
    "TTFAObserver": "pipecat_fast.ttfa.observer",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ANNOTATION_TARGETS",
    "MARKS",
    "STAGE_NAMES",
    "TTFAAnnotationFrame",
    "TTFAObserver",
    "TurnRecord",
    "TurnTracker",
    "blocking_stages_ms",
    "percentile",
    "summarize",
    "turns_report",
    "waterfall_png",
    "write_json",
]
