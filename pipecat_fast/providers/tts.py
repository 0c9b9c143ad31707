"""TTS connection facts per provider, read from ``tts.json``.

One home for what the TTS warm-pool needs to know about a provider's connection: whether a
connection opened before the call leaves anything the call uses, how to keep it alive (the
message, how often, and whether it may go before the session's first message), how long an
idle connection lives, what "warm" means for an HTTP service, and how to recognise the
provider from a Pipecat service (its class's module, its URL's host). Each fact in the JSON
names its source. Pass your own table to :func:`load_tts_table` to override them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pipecat_fast.providers import _table

WarmHolds = Literal["socket", "nothing"]


@dataclass(frozen=True)
class Keepalive:
    """A provider's application-level keepalive.

    Attributes:
        message: The text message to send (JSON text as the provider expects it).
        interval_s: How often to send it on an otherwise idle connection (s).
        before_session: Whether it may be sent before the service's first message on the
            socket (a held, not yet adopted socket); False where the provider wants a
            configuration message first (Sarvam).
        source: Where the facts come from.
    """

    message: str
    interval_s: float
    before_session: bool
    source: str


@dataclass(frozen=True)
class TTSFacts:
    """What one TTS provider's connection does.

    Attributes:
        provider: Canonical provider name.
        transport: ``"websocket"`` or ``"http"`` (what Pipecat's streaming service uses).
        warm_holds: ``"socket"`` when a connection opened before the call can be handed to
            the call; ``"nothing"`` when a warmup leaves nothing the call uses.
        warm_source: Where that comes from.
        keepalive: The provider's keepalive, or ``None`` when it documents none.
        idle_close_s: The provider closes a connection idle this long (s); ``None`` when
            not documented.
        idle_close_source: Where that comes from.
    """

    provider: str
    transport: str
    warm_holds: WarmHolds
    warm_source: str
    keepalive: Keepalive | None
    idle_close_s: float | None
    idle_close_source: str


def _default_table() -> dict:
    return _table.bundled("tts.json")


def load_tts_table(path: str | Path | None = None) -> dict:
    """Load a TTS facts table.

    Args:
        path: A JSON file shaped like the bundled ``tts.json``; ``None`` for the bundled one.

    Raises:
        ValueError: If the file cannot be read or is not a table of that shape.
    """
    return _table.load(path, filename="tts.json", what="TTS facts table")


def tts_providers(table: dict | None = None) -> list[str]:
    """Canonical TTS provider names in the table."""
    return _table.names(table or _default_table())


def tts_facts(provider: str, table: dict | None = None) -> TTSFacts:
    """The connection facts of a TTS provider.

    Args:
        provider: Name or alias (``"cartesia"``, ``"11labs"``...).
        table: A table from :func:`load_tts_table`; the bundled one by default.

    Raises:
        ValueError: If the provider is not in the table, or its entry is malformed.
    """
    table = table or _default_table()
    name = _table.canonical(provider, table)
    if name is None:
        known = ", ".join(tts_providers(table))
        raise ValueError(f"unknown TTS provider {provider!r}; known: {known}")
    entry = table["providers"][name]
    try:
        ka = entry.get("keepalive")
        keepalive = (
            Keepalive(
                message=str(ka["message"]),
                interval_s=float(ka["interval_s"]),
                before_session=bool(ka.get("before_session", False)),
                source=str(ka.get("source", "")),
            )
            if ka
            else None
        )
        idle = entry.get("idle_close_s")
        holds = entry["warm_holds"]
        if holds not in ("socket", "nothing"):
            raise ValueError(f"warm_holds must be 'socket' or 'nothing', got {holds!r}")
        return TTSFacts(
            provider=name,
            transport=str(entry["transport"]),
            warm_holds=holds,
            warm_source=str(entry.get("warm_source", "")),
            keepalive=keepalive,
            idle_close_s=float(idle) if idle is not None else None,
            idle_close_source=str(entry.get("idle_close_source", "")),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"TTS facts for {name!r} are malformed: {e}") from e


def http_keepalive_expiry_s(client: str, table: dict | None = None) -> float | None:
    """How long an HTTP client keeps an idle connection by default (s), or ``None`` if unknown.

    Args:
        client: ``"httpx"`` or ``"aiohttp"``.
        table: A table from :func:`load_tts_table`; the bundled one by default.
    """
    table = table or _default_table()
    entry = table.get("http", {}).get("clients", {}).get(client)
    return float(entry["keepalive_expiry_s"]) if entry else None


def identify_tts_provider(
    modules: list[str] | tuple[str, ...] = (),
    url: str | None = None,
    table: dict | None = None,
) -> str | None:
    """Recognise the TTS provider behind a service from plain facts about it.

    Pure; the Pipecat side is :func:`pipecat_fast._pipecat.tts_identity`. The URL's host wins
    when it is a known provider's; then the module of the Pipecat service class (most derived
    first), so a Cartesia service pointed at an emulator is still Cartesia.

    Args:
        modules: Module names of the service class and its bases, most derived first.
        url: The URL the service dials, if known.
        table: A table from :func:`load_tts_table`; the bundled one by default.

    Returns:
        A canonical provider name, or ``None`` when nothing identifies one.
    """
    table = table or _default_table()
    entries = table["providers"]
    lowered = (url or "").lower()
    if lowered:
        for name, entry in entries.items():
            if any(host in lowered for host in entry.get("url_hosts", [])):
                return name
    for module in modules:
        for name, entry in entries.items():
            if _table.module_matches(module, entry.get("pipecat_modules", [])):
                return name
    return None
