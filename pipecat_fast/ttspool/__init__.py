"""Provider-aware TTS warm-pool: the TTS socket opened while the phone rings, adopted at setup.

``core`` is the pure lifecycle (events in, actions out), ``policy`` the prewarm policy (which
calls get a warm socket or a spare, and why), ``pool`` the I/O (:class:`TTSWarmPool`).
"""

from pipecat_fast.ttspool.core import (
    AcquireRecord,
    CallStats,
    LanePlan,
    PoolConfig,
    PoolCore,
)
from pipecat_fast.ttspool.policy import PoolReason, PoolTarget, TTSPrewarmPolicy
from pipecat_fast.ttspool.pool import CallLease, TTSWarmPool

__all__ = [
    "AcquireRecord",
    "CallLease",
    "CallStats",
    "LanePlan",
    "PoolConfig",
    "PoolCore",
    "PoolReason",
    "PoolTarget",
    "TTSPrewarmPolicy",
    "TTSWarmPool",
]
