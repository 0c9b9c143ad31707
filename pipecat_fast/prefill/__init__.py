"""Speculative prefill of the LLM's prefix cache while the caller talks, and draft-and-hold."""

from pipecat_fast.prefill.backends import (
    AnthropicPrefill,
    OpenAIPrefill,
    PrefillBackend,
    PrefillResult,
    backend_for,
)
from pipecat_fast.prefill.core import (
    CallerTurns,
    PrefillConfig,
    PrefillPlanner,
    ProviderSpeed,
    Skip,
    TurnAccount,
)
from pipecat_fast.prefill.draft import DraftAndHoldUserTurnStopStrategy, TranscriptMatch
from pipecat_fast.prefill.draft_core import DraftHold
from pipecat_fast.prefill.processor import SpeculativePrefill

__all__ = [
    "AnthropicPrefill",
    "backend_for",
    "CallerTurns",
    "DraftAndHoldUserTurnStopStrategy",
    "DraftHold",
    "OpenAIPrefill",
    "PrefillBackend",
    "PrefillConfig",
    "PrefillPlanner",
    "PrefillResult",
    "ProviderSpeed",
    "Skip",
    "SpeculativePrefill",
    "TranscriptMatch",
    "TurnAccount",
]
