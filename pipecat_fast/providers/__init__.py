"""Provider facts: one registry, each fact with its source.

Everything a lever needs to know about a provider lives here and nowhere else: prompt-cache
minimums, granularity and lifetimes (``llm_cache.json``), and — as the levers that need them
land — TTS connection facts (which warmup holds a socket, keepalives, idle closes). Pure:
plain values in, facts out; recognising the provider behind a Pipecat service object is
:mod:`pipecat_fast._pipecat`'s job.
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

__all__ = [
    "CacheFacts",
    "PrefixMinimum",
    "cache_facts",
    "identify_provider",
    "load_table",
    "prefix_minimum",
    "providers",
]
