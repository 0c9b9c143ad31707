"""End-of-turn facts of streaming STT providers, read from ``stt.json``.

One home for what the end-of-turn confirmation needs to know about an STT: which finalize or
end-of-turn marker the provider sends, whether Pipecat's service turns it into a ``finalized``
transcript, and which fields of the provider's result object (``TranscriptionFrame.result``)
carry the audio range a result covers. Each entry names its sources. Pure: plain values in,
facts out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pipecat_fast.providers import _table

RESULT_FIELDS = ("start", "duration", "is_final", "speech_final", "finalize_answer")
"""The roles a provider's result field can play (the keys of ``result_fields``)."""


@dataclass(frozen=True)
class STTFacts:
    """What one STT provider sends at the end of speech, and what Pipecat does with it.

    Attributes:
        provider: Canonical provider name.
        pipecat_service: The Pipecat 1.14 service class that talks to it.
        result_modules: Module prefixes of the provider SDK's result class (how a
            ``TranscriptionFrame.result`` is recognised).
        marker: The finalize / end-of-turn marker the provider documents.
        pipecat_finalized: When Pipecat's service marks a transcript ``finalized``.
        result_fields: Role (:data:`RESULT_FIELDS`) to the attribute of the result object.
        sources: Where the facts come from.
    """

    provider: str
    pipecat_service: str
    result_modules: tuple[str, ...]
    marker: str
    pipecat_finalized: str
    result_fields: dict[str, str] = field(default_factory=dict)
    sources: tuple[str, ...] = ()

    @property
    def reports_range(self) -> bool:
        """Whether its results say which audio they cover (start and duration)."""
        return "start" in self.result_fields and "duration" in self.result_fields


def _default_table() -> dict:
    return _table.bundled("stt.json")


def load_stt_table(path: str | Path | None = None) -> dict:
    """Load an STT facts table (``None``: the bundled ``stt.json``).

    Raises:
        ValueError: If the file cannot be read or is not a table of that shape.
    """
    return _table.load(path, filename="stt.json", what="STT facts table")


def stt_providers(table: dict | None = None) -> list[str]:
    """Canonical STT provider names in the table."""
    return _table.names(table or _default_table())


def stt_facts(provider: str, table: dict | None = None) -> STTFacts:
    """The end-of-turn facts of an STT provider.

    Raises:
        ValueError: If the provider is not in the table, or its entry is malformed.
    """
    table = table or _default_table()
    name = _table.canonical(provider, table)
    entry = table["providers"].get(name) if name else None
    if entry is None:
        raise ValueError(
            f"unknown STT provider {provider!r}; known: {', '.join(stt_providers(table))}"
        )
    try:
        fields = {str(k): str(v) for k, v in entry.get("result_fields", {}).items()}
        unknown = sorted(set(fields) - set(RESULT_FIELDS))
        if unknown:
            raise ValueError(f"unknown result_fields roles {unknown}; known: {RESULT_FIELDS}")
        return STTFacts(
            provider=name,
            pipecat_service=str(entry["pipecat_service"]),
            result_modules=tuple(str(m) for m in entry.get("result_modules", [])),
            marker=str(entry.get("marker", "")),
            pipecat_finalized=str(entry.get("pipecat_finalized", "")),
            result_fields=fields,
            sources=tuple(str(s) for s in entry.get("sources", [])),
        )
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"STT facts for {name!r} are malformed: {e}") from e


def identify_stt_result(module: str, table: dict | None = None) -> str | None:
    """The provider whose SDK defines a result class in ``module``, or ``None``."""
    table = table or _default_table()
    for name, entry in table["providers"].items():
        if _table.module_matches(module, entry.get("result_modules", [])):
            return name
    return None
