"""Speculation that yields: the levers' speculative requests back off as the engine fills up."""

from pipecat_fast.load.core import (
    Kind,
    LoadReading,
    ProbeState,
    QueueEstimator,
    Reason,
    Verdict,
    YieldConfig,
    decide,
)
from pipecat_fast.load.probe import EngineLoad, parse_metrics, parse_slots

__all__ = [
    "decide",
    "EngineLoad",
    "Kind",
    "LoadReading",
    "parse_metrics",
    "parse_slots",
    "ProbeState",
    "QueueEstimator",
    "Reason",
    "Verdict",
    "YieldConfig",
]
