"""Session warmup with a prewarm policy: warm the LLM prompt cache only where it can pay."""

from pipecat_fast.warmup.core import RequestUsage, WarmupReport, prefix_hash, prefix_parts
from pipecat_fast.warmup.policy import (
    Decision,
    DecisionLog,
    PrewarmPolicy,
    Reason,
    RecentWarmups,
    WarmupTarget,
)

__all__ = [
    "Decision",
    "DecisionLog",
    "PrewarmPolicy",
    "Reason",
    "RecentWarmups",
    "RequestUsage",
    "WarmupReport",
    "WarmupTarget",
    "prefix_hash",
    "prefix_parts",
]
