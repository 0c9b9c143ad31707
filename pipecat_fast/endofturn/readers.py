"""What a transcription frame says about coverage, as :class:`~.core.STTResult` plain values.

Provider facts come from the registry (``pipecat_fast/providers/stt.json``): which SDK result
class belongs to which provider, and which of its fields carry the audio range and the markers.
A result the registry does not know gives no range (no timing proof; Pipecat's own
``finalized`` mark still counts).
"""

from __future__ import annotations

import math
from typing import Any

from pipecat.frames.frames import InterimTranscriptionFrame, TranscriptionFrame

from pipecat_fast.endofturn.core import STTResult
from pipecat_fast.frames import STTFinalizeAnswerFrame
from pipecat_fast.providers import identify_stt_result, stt_facts


def _field(result: Any, name: str | None) -> Any:
    if name is None:
        return None
    if isinstance(result, dict):
        return result.get(name)
    return getattr(result, name, None)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def _facts_for(result: Any):
    if result is None:
        return None
    provider = identify_stt_result(type(result).__module__)
    if provider is None:
        return None
    try:
        return stt_facts(provider)
    except ValueError:
        return None


def read_result(text: str, result: Any, *, is_final: bool, finalized: bool) -> STTResult:
    """Read a provider result object into plain values.

    Args:
        text: The transcript Pipecat pushed for it.
        result: The provider's result object (``TranscriptionFrame.result``), or ``None``.
        is_final: Whether Pipecat pushed it as a final.
        finalized: Pipecat's ``TranscriptionFrame.finalized``.
    """
    facts = _facts_for(result)
    if facts is None or not facts.reports_range:
        return STTResult(text=text, is_final=is_final, finalized=finalized)
    fields = facts.result_fields
    start = _number(_field(result, fields.get("start")))
    duration = _number(_field(result, fields.get("duration")))
    end = start + duration if start is not None and duration is not None else None
    return STTResult(
        text=text,
        is_final=is_final,
        end_s=end,
        speech_final=_field(result, fields.get("speech_final")) is True,
        finalize_answer=_field(result, fields.get("finalize_answer")) is True,
        finalized=finalized,
    )


def read_frame(frame: Any) -> STTResult | None:
    """The :class:`STTResult` of a transcription or finalize-answer frame, else ``None``."""
    if isinstance(frame, TranscriptionFrame):
        return read_result(
            frame.text or "",
            frame.result,
            is_final=True,
            finalized=bool(frame.finalized),
        )
    if isinstance(frame, InterimTranscriptionFrame):
        return read_result(frame.text or "", frame.result, is_final=False, finalized=False)
    if isinstance(frame, STTFinalizeAnswerFrame):
        read = read_result("", frame.result, is_final=True, finalized=False)
        return STTResult(text="", is_final=True, end_s=read.end_s, finalize_answer=True)
    return None
