"""Every pipecat-fast lever around one call's services, from ring to hang-up.

``Levers`` (pure) says which levers run; ``FastCall`` builds them for a call's own LLM and
TTS services and places them in slots that read in the order frames flow; ``CallBook`` keeps
calls between the telephony webhook (ringing) and the media stream (answered). See
``examples/twilio_bot.py`` and ``docs/quickstart.md``. The Pipecat-facing names load on first
use, so ``Levers`` imports without Pipecat's service stack.
"""

from importlib import import_module
from typing import Any

from pipecat_fast.compose.levers import (
    TELEPHONY_PLAYOUT_DELAY_S,
    WEBRTC_PLAYOUT_DELAY_S,
    Levers,
)

_LAZY = {
    "CallBook": "pipecat_fast.compose.call",
    "FastCall": "pipecat_fast.compose.call",
    "lever_classes": "pipecat_fast.compose.call",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CallBook",
    "FastCall",
    "Levers",
    "TELEPHONY_PLAYOUT_DELAY_S",
    "WEBRTC_PLAYOUT_DELAY_S",
    "lever_classes",
]
