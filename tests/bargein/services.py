"""Pipecat's real TTS services against the loopback emulators, for the barge-in tests and the
accuracy table: each kind of TTS, its ground-truth word times, and a cut at a chosen time."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import aiohttp
from pipecat.frames.frames import LLMFullResponseEndFrame, LLMFullResponseStartFrame, LLMTextFrame
from pipecat.services.cartesia.tts import CartesiaTTSService
from pipecat.services.deepgram.tts import DeepgramHttpTTSService, DeepgramTTSService
from pipecat.services.tts_service import TextAggregationMode

from pipecat_fast.testing.cartesia_server import CartesiaEmulator
from pipecat_fast.testing.deepgram_tts_server import DeepgramTTSEmulator
from pipecat_fast.testing.profiles import LatencyProfile
from pipecat_fast.testing.synth import plan_speech

FAST = LatencyProfile("test", 0, 0, 100, 0, 0.0, 0, 10_000, 0)

KINDS = ("cartesia", "deepgram-ws", "deepgram-http")
"""Word-timestamp WebSocket, sentence-level WebSocket without timestamps, HTTP."""


@dataclass
class Emulators:
    cartesia: CartesiaEmulator
    deepgram: DeepgramTTSEmulator
    http: aiohttp.ClientSession

    def service(self, kind: str, mode: TextAggregationMode = TextAggregationMode.SENTENCE):
        """A fresh Pipecat TTS service of ``kind`` pointed at its emulator."""
        if kind == "cartesia":
            return CartesiaTTSService(
                api_key="test-key",
                url=self.cartesia.url,
                settings=CartesiaTTSService.Settings(voice="test-voice"),
                text_aggregation_mode=mode,
            )
        if kind == "deepgram-ws":
            return DeepgramTTSService(
                api_key="test-key", base_url=self.deepgram.ws_url, text_aggregation_mode=mode
            )
        if kind == "deepgram-http":
            return DeepgramHttpTTSService(
                api_key="test-key",
                base_url=self.deepgram.http_url,
                aiohttp_session=self.http,
                text_aggregation_mode=mode,
            )
        raise ValueError(kind)

    def spoken_words(self, kind: str) -> list[tuple[str, float, float]]:
        """Every word the emulator spoke for the last reply, timed in that reply's audio."""
        if kind == "cartesia":
            record = list(self.cartesia.contexts.values())[-1]
            words, offset = [], 0.0
            for piece in record.transcripts:
                timed, duration = plan_speech(piece)
                words += [(w.text, offset + w.start_s, offset + w.end_s) for w in timed]
                offset += duration
            return words
        wanted = "websocket" if kind == "deepgram-ws" else "http"
        streams = [s for s in self.deepgram.streams if s.kind == wanted]
        if kind == "deepgram-ws":
            stream = streams[-1]
            return [(w.text, w.start_s, w.end_s) for w in stream.words]
        # REST: one request per sentence, played one after another.
        words, offset = [], 0.0
        for stream in streams:
            words += [(w.text, offset + w.start_s, offset + w.end_s) for w in stream.words]
            offset += stream.audio_s
        return words

    def reset(self) -> None:
        self.cartesia.contexts.clear()
        self.deepgram.streams.clear()


@contextlib.asynccontextmanager
async def emulators() -> AsyncIterator[Emulators]:
    async with (
        CartesiaEmulator(FAST) as cartesia,
        DeepgramTTSEmulator(FAST) as deepgram,
        aiohttp.ClientSession() as http,
    ):
        yield Emulators(cartesia, deepgram, http)


def llm_reply(text: str, token_chars: int | None = None) -> list:
    """The LLM frames of ``text``: one frame per ~word (like a token stream)."""
    pieces = text.split(" ")
    tokens = [p + " " for p in pieces[:-1]] + [pieces[-1]]
    if token_chars:
        tokens = [text[i : i + token_chars] for i in range(0, len(text), token_chars)]
    return [LLMFullResponseStartFrame(), *map(LLMTextFrame, tokens), LLMFullResponseEndFrame()]


def heard_truth(words: list[tuple[str, float, float]], played_s: float) -> list[str]:
    """The words whose audio had ended by ``played_s``: what the caller heard."""
    return [w for w, _start, end in words if end <= played_s + 1e-6]


def word_diff(committed: list[str], heard: list[str]) -> tuple[int, int]:
    """``(kept but never heard, heard but lost)`` between two word lists of one reply."""
    norm: Callable[[str], str] = lambda w: w.strip(".,!?;:—").lower()  # noqa: E731
    a = [norm(w) for w in committed if norm(w)]
    b = [norm(w) for w in heard]
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    return len(a) - common, len(b) - common
