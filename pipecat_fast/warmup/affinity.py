"""Session affinity: a stable per-call key, sent the way each router or engine routes on it.

When one engine no longer carries the traffic, replicas sit behind a router, and a call's
second turn is fast only if it reaches the replica whose KV cache holds its first turn (and
its warmup). Each layer routes on a different field:

- OpenAI (and OpenAI-compatible gateways): the ``prompt_cache_key`` body field; OpenAI routes
  on a hash of the prompt's first ~256 tokens combined with it (``prompt_caching_rules.md``).
- A cache-aware HTTP router: a header; ``sglang-router``'s ``consistent_hashing`` and
  ``manual`` policies read ``X-SMG-Routing-Key`` (other gateways take a configurable header).
- One llama.cpp ``llama-server`` with several slots: ``id_slot`` in the body pins the slot
  whose prompt cache holds the call.

:func:`affinity_extra` returns the ``OpenAILLMService.Settings(extra=...)`` fields for a call;
Pipecat merges ``extra`` into every request of the service, so every turn — and the session
warmup and speculative prefills, which render the service's own request — carries the key.
Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from typing import Any

SMG_ROUTING_KEY = "X-SMG-Routing-Key"
"""``sglang-router``'s routing-key header (``consistent_hashing`` and ``manual`` policies)."""


def slot_for(call_id: str, slots: int) -> int:
    """A stable slot index in ``[0, slots)`` for ``call_id`` (SHA-256, not Python's hash).

    Raises:
        ValueError: If ``slots`` < 1.
    """
    if slots < 1:
        raise ValueError(f"slots must be >= 1, got {slots}")
    digest = hashlib.sha256(call_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % slots


def affinity_extra(
    call_id: str,
    *,
    prompt_cache_key: bool = True,
    header: str | None = SMG_ROUTING_KEY,
    llama_slots: int | None = None,
) -> dict[str, Any]:
    """``Settings.extra`` fields that keep every request of a call on one cache.

    Args:
        call_id: A stable id of the call (the telephony call SID, a session id). Never a
            secret: it travels in headers and logs.
        prompt_cache_key: Send it as OpenAI's ``prompt_cache_key``.
        header: Also send it in this HTTP header (``None``: no header).
        llama_slots: The number of slots of a single llama.cpp server: also pin the call to
            ``slot_for(call_id, llama_slots)`` with ``id_slot`` (``None``: let the server
            choose by prompt similarity).

    Returns:
        ``prompt_cache_key``, ``extra_headers`` and ``extra_body`` as asked; merge them into
        ``OpenAILLMService.Settings(extra=...)``.

    Raises:
        ValueError: If ``call_id`` is empty.
    """
    if not call_id:
        raise ValueError("call_id must be a non-empty string")
    extra: dict[str, Any] = {}
    if prompt_cache_key:
        extra["prompt_cache_key"] = call_id
    if header:
        extra["extra_headers"] = {header: call_id}
    if llama_slots is not None:
        extra["extra_body"] = {"id_slot": slot_for(call_id, llama_slots)}
    return extra
