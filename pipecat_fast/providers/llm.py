"""LLM prompt-cache facts per provider, read from ``llm_cache.json``.

One home for what the levers need to know about a provider's prompt cache: the minimum
cacheable prefix and its granularity per model, how long an entry lives, whether usage counts
cached tokens inside ``prompt_tokens``, and how to recognise the provider from what a Pipecat
service carries (its class's module, its base URL, its model id). The numbers are
configuration, not code: they changed between versions of the providers' docs
(../shared/reference/prompt_caching_rules.md), and the JSON names the source of each. Pass
your own table to :func:`load_table` to override them.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from pipecat_fast.providers import _table


@dataclass(frozen=True)
class PrefixMinimum:
    """The cacheable-prefix floor that applies to one provider/model.

    Attributes:
        provider: Canonical provider name from the table (``"openai"``...).
        model: The model asked about, or ``None``.
        tokens: Minimum prefix length in tokens; 0 means no floor.
        granularity: Cache hits come in multiples of this many tokens (1 = any length).
        source: Where the number comes from.
        note: Caveat recorded with the number, if any.
    """

    provider: str
    model: str | None
    tokens: int
    granularity: int
    source: str
    note: str = ""

    def cacheable(self, prefix_tokens: int) -> int:
        """Tokens of a ``prefix_tokens``-long identical prefix the provider can serve from cache."""
        if prefix_tokens < max(self.tokens, 1):
            return 0
        step = max(self.granularity, 1)
        return prefix_tokens - prefix_tokens % step


def _default_table() -> dict:
    return _table.bundled("llm_cache.json")


def load_table(path: str | Path | None = None) -> dict:
    """Load a minimum-prefix table.

    Args:
        path: A JSON file with the same shape as the bundled ``llm_cache.json``; ``None``
            for the bundled table.

    Raises:
        ValueError: If the file is not a table of that shape.
    """
    return _table.load(path, filename="llm_cache.json", what="minimum-prefix table")


def providers(table: dict | None = None) -> list[str]:
    """Canonical provider names in the table."""
    return _table.names(table or _default_table())


def prefix_minimum(
    provider: str | None, model: str | None = None, table: dict | None = None
) -> PrefixMinimum | None:
    """Look up the cacheable-prefix floor for a provider and model.

    Args:
        provider: Provider name or alias (``"openai"``, ``"anthropic"``, ``"google"``...);
            ``None`` returns ``None`` (no floor checked).
        model: Model id (``"gpt-4o"``, ``"claude-sonnet-4-5-20250929"``); matched against
            the table's patterns, case-insensitively.
        table: A table from :func:`load_table`; the bundled one by default.

    Returns:
        The floor, or ``None`` when no provider is given.

    Raises:
        ValueError: If the provider is not in the table.
    """
    if not provider:
        return None
    table = table or _default_table()
    name = _table.canonical(provider, table)
    if name is None:
        known = ", ".join(providers(table))
        raise ValueError(f"unknown provider {provider!r}; known: {known}")
    entry = table["providers"][name]
    granularity = int(entry.get("granularity", 1))
    if model:
        m = model.strip().lower()
        # Provider-qualified ids such as "models/gemini-2.5-flash" or "openai/gpt-4o".
        m = m.rsplit("/", 1)[-1]
        for rule in entry.get("models", []):
            if fnmatchcase(m, rule["match"].lower()):
                return PrefixMinimum(
                    provider=name,
                    model=model,
                    tokens=int(rule["tokens"]),
                    granularity=int(rule.get("granularity", granularity)),
                    source=rule.get("source", entry.get("source", "")),
                    note=rule.get("note", ""),
                )
    return PrefixMinimum(
        provider=name,
        model=model,
        tokens=int(entry["default"]),
        granularity=granularity,
        source=entry.get("source", ""),
    )


@dataclass(frozen=True)
class CacheFacts:
    """What one provider's prompt cache does, beyond the per-model minimum.

    Attributes:
        provider: Canonical provider name.
        hosted: A hosted API (``True``) or a self-hosted engine (``False``).
        ttl_s: How long an unused entry is expected to survive, in seconds (the lower bound
            the provider documents); ``None`` when no time limit is documented (self-hosted
            engines evict by memory pressure only).
        net_of_cache: ``True`` when the provider's prompt-token count excludes cached tokens
            (Anthropic: ``input_tokens`` excludes cache reads and writes).
        explicit_breakpoints: Caching happens only at marked breakpoints (Anthropic).
        source: Where the lifetime figure comes from.
        reuses_unfinished: Whether a request can read the prompt a request still running is
            computing (``False``: a slotted engine computes it again in another slot);
            ``None`` when not documented.
        reuses_unfinished_source: Where that fact comes from.
    """

    provider: str
    hosted: bool
    ttl_s: float | None
    net_of_cache: bool
    explicit_breakpoints: bool
    source: str
    reuses_unfinished: bool | None = None
    reuses_unfinished_source: str = ""


def cache_facts(provider: str, table: dict | None = None) -> CacheFacts:
    """The cache lifetime and usage conventions of a provider.

    Raises:
        ValueError: If the provider is not in the table.
    """
    table = table or _default_table()
    name = _table.canonical(provider, table)
    if name is None:
        raise ValueError(f"unknown provider {provider!r}; known: {', '.join(providers(table))}")
    entry = table["providers"][name]
    ttl = entry.get("ttl_s")
    return CacheFacts(
        provider=name,
        hosted=bool(entry.get("hosted", False)),
        ttl_s=float(ttl) if ttl is not None else None,
        net_of_cache=bool(entry.get("net_of_cache", False)),
        explicit_breakpoints=bool(entry.get("explicit_breakpoints", False)),
        source=entry.get("ttl_source", ""),
        reuses_unfinished=entry.get("reuses_unfinished_prefill"),
        reuses_unfinished_source=entry.get("reuses_unfinished_source", ""),
    )


def identify_provider(
    modules: list[str] | tuple[str, ...] = (),
    base_url: str | None = None,
    model: str | None = None,
    table: dict | None = None,
) -> str | None:
    """Recognise the LLM provider behind a service from plain facts about it.

    The one place provider detection happens (pure: the Pipecat side is
    :func:`pipecat_fast._pipecat.llm_identity`). In order: the base URL's host when it is a
    known provider's; the module of a provider-specific Pipecat service class (Anthropic,
    Google, Azure...); the model id's family (``gpt-*`` is OpenAI's, ``claude-*``
    Anthropic's) — so an OpenAI model behind a proxy or an emulator keeps OpenAI's minimum,
    while an OpenAI-compatible service pointed at a self-hosted URL with another model is
    ``None`` (unknown engine: no floor assumed; pass the provider explicitly).

    Args:
        modules: Module names of the service class and its bases (most derived first).
        base_url: The service's base URL, if any.
        model: The model id the service sends.
        table: A table from :func:`load_table`; the bundled one by default.

    Returns:
        A canonical provider name, or ``None`` when nothing identifies one.
    """
    table = table or _default_table()
    entries = table["providers"]
    url = (base_url or "").lower()
    if url:
        for name, entry in entries.items():
            if any(host in url for host in entry.get("base_url_hosts", [])):
                return name
    for module in modules:
        for name, entry in entries.items():
            if _table.module_matches(module, entry.get("pipecat_modules", [])):
                return name
    if model:
        m = model.strip().lower().rsplit("/", 1)[-1]
        for name, entry in entries.items():
            if any(fnmatchcase(m, pat) for pat in entry.get("model_patterns", [])):
                return name
    return None
