"""Provider facts: one registry, each fact with its source.

Everything a lever needs to know about a provider lives here and nowhere else: prompt-cache
minimums, granularity and lifetimes (``llm_cache.json``), TTS connection facts (``tts.json``:
which warmup holds a socket, keepalives, idle closes, what "warm" means over HTTP), and STT
end-of-turn facts (``stt.json``: finalize markers, which result fields carry the audio range a
result covers). Pure: plain values in, facts out; recognising the provider behind a Pipecat
service object is :mod:`pipecat_fast._pipecat`'s job.
"""

from pipecat_fast.providers.llm import (
    CacheFacts,
    PrefixMinimum,
    cache_facts,
    identify_provider,
    load_table,
    prefix_minimum,
    providers,
)
from pipecat_fast.providers.stt import (
    STTFacts,
    identify_stt_result,
    load_stt_table,
    stt_facts,
    stt_providers,
)
from pipecat_fast.providers.tts import (
    Keepalive,
    TTSFacts,
    http_keepalive_expiry_s,
    identify_tts_provider,
    load_tts_table,
    tts_facts,
    tts_providers,
)

__all__ = [
    "CacheFacts",
    "Keepalive",
    "PrefixMinimum",
    "STTFacts",
    "TTSFacts",
    "cache_facts",
    "http_keepalive_expiry_s",
    "identify_provider",
    "identify_stt_result",
    "identify_tts_provider",
    "load_stt_table",
    "load_table",
    "load_tts_table",
    "prefix_minimum",
    "providers",
    "stt_facts",
    "stt_providers",
    "tts_facts",
    "tts_providers",
]
