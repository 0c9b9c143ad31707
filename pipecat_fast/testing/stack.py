"""All provider emulators together: STT, LLM and TTS (Cartesia, Deepgram, Sarvam)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pipecat_fast.testing.capacity import EngineCapacity
from pipecat_fast.testing.cartesia_server import CartesiaEmulator
from pipecat_fast.testing.deepgram_server import DeepgramEmulator, ScriptedUtterance
from pipecat_fast.testing.deepgram_tts_server import DeepgramTTSEmulator
from pipecat_fast.testing.openai_server import OpenAIEmulator
from pipecat_fast.testing.profiles import SAME_REGION, LatencyProfile
from pipecat_fast.testing.sarvam_server import SarvamEmulator

SARVAM_IDLE_CLOSE_S = 15.0
"""The stack's Sarvam emulator closes a socket idle this long. Our assumption (Sarvam documents
no TTS limit, providers/tts.json): Cartesia's documented 5 minutes scaled down so a bench call's
idle gap can pass it while no ordinary turn does."""


class EmulatorStack:
    """Start and stop the three loopback emulators as one, on one latency profile.

    Args:
        profile: Latency model shared by the three.
        stt_scripts: Call id (Deepgram ``tag``) to the caller's utterances.
        replies: ``(user text, reply)`` pairs the LLM streams.
        llm_capacity: The LLM as one shared engine (slots, prefill throughput); ``None``:
            every request answered as if alone.

    Attributes:
        stt: The Deepgram emulator. llm: the OpenAI one. tts: the Cartesia one.
        deepgram_tts: Deepgram's TTS (WebSocket and REST), for configurations that use it.
        sarvam_tts: Sarvam's streaming TTS (a service that redials on every interruption),
            closing idle sockets after :data:`SARVAM_IDLE_CLOSE_S`.
    """

    def __init__(
        self,
        profile: LatencyProfile = SAME_REGION,
        *,
        stt_scripts: Mapping[str, Sequence[ScriptedUtterance]] | None = None,
        replies: Sequence[tuple[str, str]] = (),
        llm_capacity: EngineCapacity | None = None,
    ):
        self.profile = profile
        self.stt = DeepgramEmulator(profile, scripts=stt_scripts)
        self.llm = OpenAIEmulator(profile, replies=replies, capacity=llm_capacity)
        self.tts = CartesiaEmulator(profile)
        self.deepgram_tts = DeepgramTTSEmulator(profile)
        self.sarvam_tts = SarvamEmulator(profile, idle_close_s=SARVAM_IDLE_CLOSE_S)

    def urls(self) -> dict[str, str]:
        """``{"llm_base_url", "tts_url", "stt_base_url", "deepgram_tts_url", "sarvam_tts_url"}``."""
        return {
            "llm_base_url": self.llm.base_url,
            "tts_url": self.tts.url,
            "stt_base_url": self.stt.base_url,
            "deepgram_tts_url": self.deepgram_tts.ws_url,
            "sarvam_tts_url": self.sarvam_tts.url,
        }

    async def start(self) -> None:
        """Start all three."""
        await self.stt.start()
        await self.llm.start()
        await self.tts.start()
        await self.deepgram_tts.start()
        await self.sarvam_tts.start()

    async def stop(self) -> None:
        """Stop all of them."""
        await self.sarvam_tts.stop()
        await self.deepgram_tts.stop()
        await self.tts.stop()
        await self.llm.stop()
        await self.stt.stop()

    async def __aenter__(self) -> EmulatorStack:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
