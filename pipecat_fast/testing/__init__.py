"""Offline test doubles and a local engine for exercising Pipecat pipelines without network.

Provider emulators that Pipecat's real services talk to unchanged (Deepgram STT, OpenAI and
Anthropic LLMs with a prefix-cache latency model, Cartesia, Deepgram and Sarvam TTS), a
real-time scripted caller transport with the calls it plays (``ScriptedCall``: the shipped
recordings, espeak-ng or your own WAVs), and a real llama.cpp engine on a locally generated model.
Names load on first use, so importing one emulator does not pull in the others' dependencies.
"""

from importlib import import_module
from typing import Any

_LAZY = {
    "AnthropicEmulator": "pipecat_fast.testing.anthropic_server",
    "CallerTransport": "pipecat_fast.testing.caller_transport",
    "CartesiaEmulator": "pipecat_fast.testing.cartesia_server",
    "SarvamEmulator": "pipecat_fast.testing.sarvam_server",
    "TTSHarness": "pipecat_fast.testing.tts_harness",
    "DeepgramEmulator": "pipecat_fast.testing.deepgram_server",
    "DeepgramTTSEmulator": "pipecat_fast.testing.deepgram_tts_server",
    "ScriptedUtterance": "pipecat_fast.testing.deepgram_server",
    "utterance_from_words": "pipecat_fast.testing.deepgram_server",
    "EmulatorStack": "pipecat_fast.testing.stack",
    "OpenAIEmulator": "pipecat_fast.testing.openai_server",
    "PrefixCache": "pipecat_fast.testing.prefix_cache",
    "LatencyProfile": "pipecat_fast.testing.profiles",
    "PROFILES": "pipecat_fast.testing.profiles",
    "SAME_REGION": "pipecat_fast.testing.profiles",
    "CROSS_REGION": "pipecat_fast.testing.profiles",
    "LARGE_PROMPT": "pipecat_fast.testing.profiles",
    "with_revisions": "pipecat_fast.testing.revisions",
    "LlamaCppServer": "pipecat_fast.testing.llama_server",
    "LlamaServerError": "pipecat_fast.testing.llama_server",
    "engine_llm_settings": "pipecat_fast.testing.llama_server",
    "llama_cpp_available": "pipecat_fast.testing.llama_server",
    "EngineRequestSettings": "pipecat_fast.testing.engine_settings",
    "ensure_model": "pipecat_fast.testing.gguf_model",
    "MODEL_SPECS": "pipecat_fast.testing.gguf_model",
    "parse_engine_log": "pipecat_fast.testing.engine_log",
    "EngineLog": "pipecat_fast.testing.engine_log",
    "ScriptedCall": "pipecat_fast.testing.scripted_call",
    "CallerLine": "pipecat_fast.testing.scripted_call",
    "words_from_audio": "pipecat_fast.testing.scripted_call",
    "read_wav": "pipecat_fast.testing.scripted_call",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = sorted(_LAZY)
