"""Warmup arithmetic: the cacheable prefix's hash, and what a warmup reports. Pure.

The *cacheable prefix* of a request is what every turn of a session repeats byte for byte
and a provider caches: the model, the tools (in order), the system prompt (OpenAI: the leading
``system``/``developer`` messages; Anthropic: the ``system`` blocks) and the per-call routing
key (``prompt_cache_key``, a routing header) that decides which cache machine serves it. Its
hash says whether two requests can share a cache entry: the warmup and the first live turn
(a changed prompt or tool list means the warmup was wasted), or two calls (a warmup another
call just sent already did the work).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

_SYSTEM_ROLES = ("system", "developer")
_ROUTING_FIELDS = ("prompt_cache_key", "id_slot", "extra_headers", "extra_body")


def prefix_parts(params: Mapping[str, Any]) -> dict[str, Any]:
    """The cacheable-prefix parts of a rendered request (OpenAI or Anthropic shape).

    Args:
        params: The request as the service's adapter rendered it (``model``, ``messages``,
            ``tools``, and for Anthropic ``system``).

    Returns:
        ``model``, ``tools``, ``system`` and the routing fields present, as plain JSON values.
    """
    system: Any = params.get("system")
    if system is None:
        leading = []
        for message in params.get("messages") or []:
            if not isinstance(message, Mapping) or message.get("role") not in _SYSTEM_ROLES:
                break
            leading.append(message)
        system = leading
    parts: dict[str, Any] = {
        "model": params.get("model"),
        "tools": params.get("tools"),
        "system": system,
    }
    for name in _ROUTING_FIELDS:
        value = params.get(name)
        if value:
            parts[name] = value
    return parts


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prefix_hash(params: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of :func:`prefix_parts`, canonical JSON (sorted keys, exact text)."""
    return _digest(prefix_parts(params))


def part_hashes(params: Mapping[str, Any]) -> dict[str, str]:
    """SHA-256 of each part of :func:`prefix_parts`, to say which one changed."""
    return {name: _digest(value) for name, value in prefix_parts(params).items()}


def changed_parts(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """The prefix parts (``model``, ``tools``, ``system``, routing fields) that differ."""
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


@dataclass
class RequestUsage:
    """What the provider reported for one warmup request.

    Attributes:
        prompt_tokens: Prompt tokens the provider counted, cached ones included (Anthropic:
            ``input_tokens`` + cache reads + cache writes), or ``None`` if not reported.
        cached_tokens: Prompt tokens read from the provider's cache.
        cache_write_tokens: Prompt tokens written to the cache (Anthropic
            ``cache_creation_input_tokens``; OpenAI >= GPT-5.6 ``cache_write_tokens``).
        output_tokens: Tokens generated (capped by the warmup's ``max_tokens``).
        tool_calls: Tool calls the answer asked for — drained, never executed.
        elapsed_s: From sending the request to the end of its stream.
        error: What went wrong (HTTP status, timeout...), ``None`` when it completed.
    """

    prompt_tokens: int | None = None
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    elapsed_s: float = 0.0
    error: str | None = None


@dataclass
class WarmupReport:
    """What one session's warmup did (JSON-ready with :meth:`to_dict`).

    Attributes:
        warmed: Whether any request was sent.
        reason: The policy's reason code (``"warm"``, ``"retry"``, ``"below_minimum"``...).
        detail: The policy's one-line explanation.
        provider: Provider registry name, or ``None``.
        prefix_hash: Hash of the cacheable prefix warmed (:func:`prefix_hash`).
        part_hashes: Hash of each prefix part (:func:`part_hashes`).
        prefix_tokens: Estimated tokens of the request (o200k), as the policy saw it.
        requests: Per request sent, what the provider reported.
        elapsed_s: From the first request sent to the last stream drained (or abandoned).
        deadline_hit: The shared deadline ran out before every request finished.
        cancelled: The warmup was cancelled (the caller hung up).
        error: The first error; no request is sent after it (no retries).
    """

    warmed: bool = False
    reason: str = ""
    detail: str = ""
    provider: str | None = None
    prefix_hash: str = ""
    part_hashes: dict[str, str] = field(default_factory=dict)
    prefix_tokens: int = 0
    requests: list[RequestUsage] = field(default_factory=list)
    elapsed_s: float = 0.0
    deadline_hit: bool = False
    cancelled: bool = False
    error: str | None = None

    @property
    def completed(self) -> int:
        """Requests whose streams were drained to the end."""
        return sum(1 for r in self.requests if r.error is None)

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens the provider reported for all requests (the warmup's token cost)."""
        return sum(r.prompt_tokens or 0 for r in self.requests)

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens the provider served from its cache, over all requests."""
        return sum(r.cached_tokens for r in self.requests)

    @property
    def cache_write_tokens(self) -> int:
        """Prompt tokens written to the cache, over all requests."""
        return sum(r.cache_write_tokens for r in self.requests)

    @property
    def tool_calls(self) -> int:
        """Tool calls the answers asked for (drained, never executed)."""
        return sum(r.tool_calls for r in self.requests)

    @property
    def prefix_committed(self) -> bool:
        """A later request read the prefix from the cache: the warmup verifiably took."""
        return any(r.cached_tokens > 0 for r in self.requests)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary, with the per-request usage."""
        return {
            "warmed": self.warmed,
            "reason": self.reason,
            "detail": self.detail,
            "provider": self.provider,
            "prefix_hash": self.prefix_hash,
            "prefix_tokens": self.prefix_tokens,
            "requests_sent": len(self.requests),
            "requests_completed": self.completed,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "tool_calls_drained": self.tool_calls,
            "elapsed_s": round(self.elapsed_s, 3),
            "deadline_hit": self.deadline_hit,
            "cancelled": self.cancelled,
            "error": self.error,
            "per_request": [asdict(r) for r in self.requests],
        }
