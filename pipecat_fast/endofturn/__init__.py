"""End-of-turn confirmation on a complete transcript, early pauses, and the patience dial.

See docs/endofturn.md.
"""

from pipecat_fast.endofturn.core import (
    ClockUnreliable,
    Confirm,
    EarlyConfirm,
    LateFinal,
    PauseTracker,
    STTResult,
)
from pipecat_fast.endofturn.dial import (
    PRESETS,
    Patience,
    patience,
    patience_stop_strategy,
    patience_user_params,
    patience_vad,
)
from pipecat_fast.endofturn.finalize import report_finalize_answers
from pipecat_fast.endofturn.readers import read_frame, read_result
from pipecat_fast.endofturn.strategy import (
    CompleteTranscriptUserTurnStopStrategy,
    default_turn_analyzer_strategy,
)
from pipecat_fast.endofturn.vad import PauseTap

__all__ = [
    "PRESETS",
    "Patience",
    "ClockUnreliable",
    "CompleteTranscriptUserTurnStopStrategy",
    "Confirm",
    "EarlyConfirm",
    "LateFinal",
    "PauseTap",
    "PauseTracker",
    "STTResult",
    "default_turn_analyzer_strategy",
    "patience",
    "patience_stop_strategy",
    "patience_user_params",
    "patience_vad",
    "read_frame",
    "read_result",
    "report_finalize_answers",
]
