"""The one module that touches Pipecat internals.

Pipecat's public API does not expose everything a lever needs (an OpenAI-compatible
service's client and base URL, for one). Every such access lives here, each behind a small
function with a plain return value, so a Pipecat upgrade that moves something breaks one
function — and ``tests/test_pipecat_adapter.py``, which checks each assumption by name and
says which Pipecat attribute went missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipecat_fast.providers import identify_provider


@dataclass(frozen=True)
class LLMIdentity:
    """Plain facts about a Pipecat LLM service, for provider lookups.

    Attributes:
        modules: Module names of the service class and its bases, most derived first.
        base_url: The client's base URL, or ``None`` when the service has no such client.
        model: The model id in the service's settings, or ``None``.
    """

    modules: tuple[str, ...]
    base_url: str | None
    model: str | None


def llm_client(service: Any) -> Any | None:
    """The SDK client a Pipecat LLM service sends with (``_client``), or ``None``."""
    return getattr(service, "_client", None)


def llm_identity(service: Any) -> LLMIdentity:
    """Module names, base URL and model of a Pipecat LLM service."""
    modules = tuple(cls.__module__ for cls in type(service).__mro__ if cls is not object)
    client = llm_client(service)
    base_url = getattr(client, "base_url", None) if client is not None else None
    settings = getattr(service, "settings", None)  # public in Pipecat 1.14
    model = getattr(settings, "model", None) if settings is not None else None
    return LLMIdentity(
        modules=modules,
        base_url=str(base_url) if base_url else None,
        model=str(model) if model else None,
    )


def llm_provider(service: Any, provider: str | None = None) -> str | None:
    """The canonical provider of a Pipecat LLM service (see ``identify_provider``).

    Args:
        service: The LLM service.
        provider: An explicit provider name, which wins (``ValueError`` if unknown).
    """
    if provider:
        from pipecat_fast.providers import cache_facts

        return cache_facts(provider).provider
    ident = llm_identity(service)
    return identify_provider(ident.modules, ident.base_url, ident.model)
