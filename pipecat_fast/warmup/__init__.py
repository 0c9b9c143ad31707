"""Session warmup with a prewarm policy: warm the LLM prompt cache only where it can pay."""

from pipecat_fast.warmup.affinity import SMG_ROUTING_KEY, affinity_extra, slot_for
from pipecat_fast.warmup.core import RequestUsage, WarmupReport, prefix_hash, prefix_parts
from pipecat_fast.warmup.policy import (
    Decision,
    DecisionLog,
    PrewarmPolicy,
    Reason,
    RecentWarmups,
    WarmupTarget,
)
from pipecat_fast.warmup.session import DEFAULT_USER_MESSAGE, SessionWarmup, WarmupCheck

__all__ = [
    "DEFAULT_USER_MESSAGE",
    "Decision",
    "DecisionLog",
    "PrewarmPolicy",
    "Reason",
    "RecentWarmups",
    "RequestUsage",
    "SMG_ROUTING_KEY",
    "SessionWarmup",
    "WarmupCheck",
    "WarmupReport",
    "WarmupTarget",
    "affinity_extra",
    "prefix_hash",
    "prefix_parts",
    "slot_for",
]
