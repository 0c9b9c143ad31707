"""Fake TTS frame streams with known audio durations, for the barge-in processor tests.

They run through :func:`pipecat_fast.bench.evals.bargein.run_reply`: a real output transport
that holds its audio once the caller barges in (the test then sends the interruption, and the
transport goes on once the assistant aggregator has handled it). Everything is ordered by
Pipecat's own queues and events; nothing waits on a timer.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipecat.frames.frames import (
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)

from pipecat_fast.testing.synth import plan_speech

RATE = 16_000
FRAME_S = 0.02


def audio_frames(seconds: float, context_id: str | None = None) -> list[TTSAudioRawFrame]:
    """Silence-free stand-in audio of ``seconds``, in 20 ms frames."""
    n = round(seconds / FRAME_S)
    samples = int(RATE * FRAME_S)
    pcm = b"\x01\x00" * samples
    return [TTSAudioRawFrame(pcm, RATE, 1, context_id=context_id) for _ in range(n)]


def speech_seconds(text: str) -> float:
    """How long the emulated TTS takes to say ``text`` (s), rounded to whole 20 ms frames."""
    return round(plan_speech(text)[1] / FRAME_S) * FRAME_S


def word_end(text: str, index: int) -> float:
    """Where word ``index`` of ``text`` ends in the emulated TTS's audio (s)."""
    return plan_speech(text)[0][index].end_s


def ws_reply(sentences: Sequence[str], context_id: str = "ctx-1") -> list[Frame]:
    """What a WebSocket TTS without word timestamps pushes for a reply: text ahead, audio after."""
    frames: list[Frame] = [LLMFullResponseStartFrame(), TTSStartedFrame(context_id=context_id)]
    for s in sentences:
        text = TTSTextFrame(s, text_type="sentence", context_id=context_id)
        frames.append(text)
    for s in sentences:
        frames += audio_frames(speech_seconds(s), context_id)
    frames += [TTSStoppedFrame(context_id=context_id), LLMFullResponseEndFrame()]
    return frames
