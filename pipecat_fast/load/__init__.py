"""Speculation that yields: the levers' speculative requests back off as the engine fills up."""

from pipecat_fast.load.core import (
    CancelReason,
    CancelVerdict,
    ComputeRate,
    InFlightPrefill,
    Kind,
    LoadReading,
    ProbeState,
    QueueEstimator,
    Reason,
    Verdict,
    YieldConfig,
    cancel_on_dispatch,
    contended,
    decide,
    requests_on_engine,
    reuses_unfinished,
)
from pipecat_fast.load.probe import EngineLoad, parse_metrics, parse_slots

__all__ = [
    "cancel_on_dispatch",
    "CancelReason",
    "CancelVerdict",
    "ComputeRate",
    "contended",
    "decide",
    "EngineLoad",
    "InFlightPrefill",
    "Kind",
    "LoadReading",
    "parse_metrics",
    "parse_slots",
    "ProbeState",
    "QueueEstimator",
    "Reason",
    "requests_on_engine",
    "reuses_unfinished",
    "Verdict",
    "YieldConfig",
]
