"""TTFA meter: time to first audio per user turn, with blocking stage times."""

from pipecat_fast.ttfa.core import (
    MARKS,
    STAGE_NAMES,
    TurnRecord,
    blocking_stages_ms,
    percentile,
    summarize,
)
from pipecat_fast.ttfa.observer import TTFAAnnotationFrame, TTFAObserver
from pipecat_fast.ttfa.report import turns_report, waterfall_png, write_json

__all__ = [
    "MARKS",
    "STAGE_NAMES",
    "TTFAAnnotationFrame",
    "TTFAObserver",
    "TurnRecord",
    "blocking_stages_ms",
    "percentile",
    "summarize",
    "turns_report",
    "waterfall_png",
    "write_json",
]
