"""Preemptive TTS: the held draft's first audio synthesized before confirmation, held, released.

See docs/endofturn.md.
"""

from pipecat_fast.preemptive.core import FeedCore, FeedStats, HoldCore
from pipecat_fast.preemptive.processor import HeldAudioGate, PreemptiveTTS

__all__ = ["FeedCore", "FeedStats", "HeldAudioGate", "HoldCore", "PreemptiveTTS"]
