"""Surface the STT's empty answer to a finalize request as a frame.

Deepgram answers the ``Finalize`` Pipecat sends at the VAD's stop with a ``from_finalize``
result; when Deepgram's own endpointing final already covered the speech, the answer is
empty and Pipecat 1.14's service pushes nothing (it only stops its TTFB metric). With
:func:`report_finalize_answers` it pushes an :class:`~pipecat_fast.frames.STTFinalizeAnswerFrame`
carrying the result, so :class:`~pipecat_fast.endofturn.CompleteTranscriptUserTurnStopStrategy`
can read how far the STT finalized (its ``start`` + ``duration``). Deepgram documents that the
answer "is not guaranteed if there is no significant amount of audio data to process"
(developers.deepgram.com/docs/finalize): its absence proves nothing, and the strategy does not
wait for it.
"""

from __future__ import annotations

from typing import Any

from pipecat_fast._pipecat import install_stt_message_hook
from pipecat_fast.frames import STTFinalizeAnswerFrame


def _empty_finalize_answer(message: Any) -> bool:
    if getattr(message, "from_finalize", None) is not True:
        return False
    if not getattr(message, "is_final", False):
        return False
    channel = getattr(message, "channel", None)
    alternatives = getattr(channel, "alternatives", None) or []
    return bool(alternatives) and not (getattr(alternatives[0], "transcript", "") or "")


def report_finalize_answers(stt: Any) -> Any:
    """Make a ``DeepgramSTTService`` push its empty finalize answers as frames.

    Call it before the pipeline starts (it follows every connection the service opens).

    Args:
        stt: A Pipecat ``DeepgramSTTService``.

    Returns:
        The same service.

    Raises:
        TypeError: If ``stt`` is not a ``DeepgramSTTService``.
    """
    from pipecat.services.deepgram.stt import DeepgramSTTService

    if not isinstance(stt, DeepgramSTTService):
        raise TypeError(
            f"report_finalize_answers takes a DeepgramSTTService, got {type(stt).__name__}: "
            "other Pipecat STT services already mark their finalized transcripts"
        )

    async def after(message: Any) -> None:
        if _empty_finalize_answer(message):
            await stt.push_frame(STTFinalizeAnswerFrame(result=message))

    install_stt_message_hook(stt, after)
    return stt
