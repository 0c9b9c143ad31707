"""A real token-prefix cache with TTL and LRU, as the provider emulators use it.

Pure: no I/O and no clock (``now`` is passed in, in seconds). A cache entry is a prefix of a
request's tokens ending at a *checkpoint*: every ``block_tokens`` tokens for OpenAI-style
automatic caching (hits "in increments of 128 tokens", from 1,024 tokens on), or the
``cache_control`` breakpoints for Anthropic-style caching. Entries are keyed by a hash of
the whole prefix, so two requests share an entry only when every token before the
checkpoint is identical, whatever checkpoints either request used. Sources:
``shared/reference/prompt_caching_rules.md``.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass
class CacheStats:
    """Counters since the cache was made or cleared (tokens, not requests)."""

    lookups: int = 0
    hits: int = 0
    cached_tokens: int = 0
    written_tokens: int = 0
    evictions: int = 0
    expirations: int = 0


class PrefixCache:
    """Token-prefix cache with a time-to-live per entry and least-recently-used eviction.

    Args:
        ttl_s: Seconds an entry lives after its last write or hit (OpenAI in-memory
            retention: "clears caches within 5 to 10 minutes of inactivity"; Anthropic:
            5 minutes, refreshed on each use).
        capacity: Maximum number of entries; the least recently used is evicted first.
        block_tokens: Checkpoint spacing for automatic caching (OpenAI: 128 tokens).
        min_tokens: Shortest prompt that is cached at all, and shortest hit reported
            (OpenAI: 1,024 tokens).

    Raises:
        ValueError: On a non-positive ``block_tokens``, ``capacity`` or ``ttl_s``.
    """

    def __init__(
        self,
        *,
        ttl_s: float = 300.0,
        capacity: int = 200_000,
        block_tokens: int = 128,
        min_tokens: int = 1024,
    ):
        if block_tokens <= 0 or capacity <= 0 or ttl_s <= 0:
            raise ValueError("block_tokens, capacity and ttl_s must be positive")
        self.ttl_s = ttl_s
        self.capacity = capacity
        self.block_tokens = block_tokens
        self.min_tokens = min_tokens
        self.stats = CacheStats()
        self._entries: OrderedDict[tuple[str, int, bytes], float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        self._entries.clear()
        self.stats = CacheStats()

    def block_checkpoints(self, n_tokens: int) -> list[int]:
        """Automatic-caching checkpoints of an ``n_tokens`` prompt (multiples of the block)."""
        return list(range(self.block_tokens, n_tokens + 1, self.block_tokens))

    def lookup(
        self,
        namespace: str,
        tokens: Sequence[int],
        now: float,
        checkpoints: Iterable[int] | None = None,
        *,
        contiguous: bool = True,
    ) -> int:
        """How many leading tokens of a request are served from the cache.

        Args:
            namespace: Cache partition, e.g. model plus ``prompt_cache_key``.
            tokens: The request's prompt tokens.
            now: Current time (s).
            checkpoints: Prefix lengths that may hit; defaults to every block boundary.
            contiguous: True for block caches, where a checkpoint counts only if every
                earlier one hits too (a missing block invalidates everything after it);
                False for breakpoint caches, where each checkpoint is its own entry.

        Returns:
            Cached prefix length in tokens; 0 below ``min_tokens``. Hits refresh the TTL.
        """
        self.stats.lookups += 1
        best = 0
        hits = []
        for position, key in self._keys(namespace, tokens, checkpoints):
            expires = self._entries.get(key)
            if expires is not None and expires <= now:
                del self._entries[key]
                self.stats.expirations += 1
                expires = None
            if expires is None:
                if contiguous:
                    break
                continue
            hits.append(key)
            best = position
        self._touch(hits, now)
        if best < self.min_tokens:
            return 0
        self.stats.hits += 1
        self.stats.cached_tokens += best
        return best

    def insert(
        self,
        namespace: str,
        tokens: Sequence[int],
        now: float,
        checkpoints: Iterable[int] | None = None,
    ) -> int:
        """Write a request's prefixes after its prefill completed.

        Args:
            namespace: Cache partition.
            tokens: The request's prompt tokens.
            now: Current time (s).
            checkpoints: Prefix lengths to write; defaults to every block boundary.

        Returns:
            Tokens newly written (checkpoints that were not already live), 0 when the
            prompt is shorter than ``min_tokens``.
        """
        if len(tokens) < self.min_tokens:
            return 0
        written = 0
        previous = 0
        keys = []
        for position, key in self._keys(namespace, tokens, checkpoints):
            if position < self.min_tokens and checkpoints is not None:
                previous = position
                continue
            if key not in self._entries or self._entries[key] <= now:
                written += position - previous
            keys.append(key)
            previous = position
        self._touch(keys, now)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
            self.stats.evictions += 1
        self.stats.written_tokens += written
        return written

    def _touch(self, keys: list[tuple[str, int, bytes]], now: float) -> None:
        """Refresh entries, deepest first, so a prefix's root is the most recently used.

        LRU then evicts the deepest checkpoints first, as serving engines evict leaves: a
        root evicted first would invalidate every deeper block while they kept their space.
        """
        for key in reversed(keys):
            self._entries[key] = now + self.ttl_s
            self._entries.move_to_end(key)

    def _keys(
        self, namespace: str, tokens: Sequence[int], checkpoints: Iterable[int] | None
    ) -> Iterable[tuple[int, tuple[str, int, bytes]]]:
        """(position, key) per checkpoint in ascending order.

        The key is a streaming hash of the whole prefix, so it depends only on its tokens,
        not on which checkpoints were hashed along the way.
        """
        positions = (
            self.block_checkpoints(len(tokens))
            if checkpoints is None
            else sorted({p for p in checkpoints if 0 < p <= len(tokens)})
        )
        digest = hashlib.blake2b(namespace.encode("utf-8"), digest_size=16)
        start = 0
        for position in positions:
            digest.update(array("q", tokens[start:position]).tobytes())
            start = position
            yield position, (namespace, position, digest.copy().digest())
