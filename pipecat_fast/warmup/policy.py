"""``PrewarmPolicy``: whether a warmup can pay for itself, decided per call with its reason.

Pure: plain facts in, a :class:`Decision` out; no frames, tasks or clocks (the time is a number
the caller passes). The provider facts it needs — the minimum cacheable prefix and how long a
cache entry lives — come from the provider registry (:mod:`pipecat_fast.providers`).

Seed 000 is why this exists: warming every call spent ~60 % of a fleet's LLM money on calls
nobody talked in (28 % ended before the agent spoke, 63 % after the greeting, a third were
retries of which 95 % were dead), so a warmup has to be skipped where it cannot pay.

The shape, for other levers (the TTS warm-pool reuses it)
---------------------------------------------------------
A lever's policy is one pure method, ``decide(target, now_s) -> Decision``:

- a frozen *target* dataclass with everything the rules read (here :class:`WarmupTarget`;
  a TTS pool passes its provider, whether the warmup holds a socket, the expected wait...);
- :class:`Decision` (``warm``, a stable ``reason`` code, a one-line ``detail`` with the
  numbers): report the code, log the detail. Reuse it as is and define your own codes;
- :class:`RecentWarmups` when a rule is "the same thing was warmed less than N s ago"
  (``record`` what was sent, ``last`` to ask);
- :class:`DecisionLog` to log decisions without flooding a busy server: each reason's first
  few decisions are logged, then counted and summarised.

Rules here, checked in this order (the first that applies wins):

1. ``never_stt`` — never warm an STT: a second socket opened while the phone rings never
   receives the caller's audio (seed 000).
2. ``retry`` — the call is a retry (the API caller says so): 95 % of seed 000's retries were
   dead calls.
3. ``below_minimum`` — the cacheable prefix is below the provider's minimum: the provider caches
   nothing, so the warmup only buys a connection.
4. ``wait_exceeds_ttl`` — the expected wait before the first turn is longer than the cache
   lifetime: the entry expires before the turn that would read it.
5. ``already_warm`` — a request with the same prefix hash was sent recently enough that its
   entry is still alive when the first turn arrives.
6. otherwise ``warm``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from pipecat_fast.providers import cache_facts, prefix_minimum


class Reason(StrEnum):
    """Why :class:`PrewarmPolicy` warmed or skipped a call (stable codes for reports)."""

    WARM = "warm"
    NEVER_STT = "never_stt"
    RETRY = "retry"
    BELOW_MINIMUM = "below_minimum"
    WAIT_EXCEEDS_TTL = "wait_exceeds_ttl"
    ALREADY_WARM = "already_warm"
    CACHING_OFF = "caching_off"


@dataclass(frozen=True)
class Decision:
    """One policy decision.

    Attributes:
        warm: Whether to send the warmup.
        reason: A stable code (``"warm"``, ``"retry"``...; each lever defines its own).
        detail: One line for the log, with the numbers that decided it.
    """

    warm: bool
    reason: str
    detail: str

    def __bool__(self) -> bool:
        return self.warm


@dataclass(frozen=True)
class WarmupTarget:
    """What the prewarm rules read about one call's warmup.

    Attributes:
        service: ``"llm"``, ``"stt"`` or ``"tts"``; an STT is never warmed.
        provider: The provider's registry name (``"openai"``, ``"anthropic"``, ``"vllm"``...),
            or ``None`` when unknown (no minimum, no lifetime assumed).
        model: The model id, for per-model minimums.
        prefix_tokens: Tokens of the cacheable prefix (system prompt and tools).
        prefix_hash: Hash of that prefix (:func:`pipecat_fast.warmup.core.prefix_hash`).
        is_retry: The call is a retry of an earlier attempt (the API caller says so).
        expected_wait_s: Expected time from the warmup to the first turn's request (rest of
            the ring, the greeting, the caller's first words), or ``None`` when unknown.
    """

    service: str = "llm"
    provider: str | None = None
    model: str | None = None
    prefix_tokens: int = 0
    prefix_hash: str = ""
    is_retry: bool = False
    expected_wait_s: float | None = None


class RecentWarmups:
    """When each key (a prefix hash, a socket's address) was last warmed. Pure: times passed in.

    Args:
        max_keys: Forget the oldest keys beyond this many (bounded memory on a busy server).
    """

    def __init__(self, max_keys: int = 10_000):
        self._recent_at: dict[str, float] = {}
        self._recent_max = max_keys

    def record(self, key: str, now_s: float) -> None:
        """Note that ``key`` was warmed (or a live request refreshed it) at ``now_s``."""
        self._recent_at.pop(key, None)
        self._recent_at[key] = now_s
        while len(self._recent_at) > self._recent_max:
            self._recent_at.pop(next(iter(self._recent_at)))

    def last(self, key: str) -> float | None:
        """When ``key`` was last recorded, or ``None``."""
        return self._recent_at.get(key)

    def __len__(self) -> int:
        return len(self._recent_at)


class DecisionLog:
    """Logs decisions without flooding: each reason's first ``first_n`` are logged in full.

    After that a reason is only counted; :meth:`summary` gives the counts, and every
    ``every``-th decision of a reason logs a one-line summary.

    Args:
        log: Where lines go (``loguru.logger.info`` by default).
        first_n: Decisions logged in full per reason.
        every: After those, one summary line per this many decisions of a reason.
    """

    def __init__(
        self, log: Callable[[str], None] | None = None, first_n: int = 5, every: int = 100
    ):
        if log is None:
            from loguru import logger

            log = logger.info
        self._dlog = log
        self._dlog_first = first_n
        self._dlog_every = every
        self.counts: Counter[str] = Counter()

    def __call__(self, decision: Decision, label: str = "warmup") -> None:
        """Count ``decision`` and log it if it is among the first of its reason."""
        self.counts[decision.reason] += 1
        n = self.counts[decision.reason]
        verb = "warm" if decision.warm else "skip"
        if n <= self._dlog_first:
            self._dlog(f"{label}: {verb} ({decision.reason}): {decision.detail}")
        elif n % self._dlog_every == 0:
            self._dlog(f"{label}: {n} decisions '{decision.reason}' so far; {self.summary()}")

    def summary(self) -> str:
        """Counts per reason, most frequent first."""
        return ", ".join(f"{reason} {n}" for reason, n in self.counts.most_common())


class PrewarmPolicy:
    """Decides per call whether an LLM warmup can pay, and why (see the module docstring).

    Args:
        skip_retries: Skip calls flagged as retries.
        min_prefix_tokens: Override the provider's minimum cacheable prefix (tokens).
        ttl_s: Override the provider's cache lifetime (s); the registry's ``ttl_s`` otherwise
            (``None`` there: a self-hosted engine with no time limit).
        engine_reuse_window_s: For providers with no documented lifetime (self-hosted
            engines), treat a prefix warmed this recently as still warm; ``None`` (default)
            never skips on that ground — an engine evicts by memory pressure, which no
            clock predicts.
        table: A provider table (:func:`pipecat_fast.providers.load_table`); bundled default.
    """

    def __init__(
        self,
        *,
        skip_retries: bool = True,
        min_prefix_tokens: int | None = None,
        ttl_s: float | None = None,
        engine_reuse_window_s: float | None = None,
        table: dict | None = None,
    ):
        self.skip_retries = skip_retries
        self.min_prefix_tokens = min_prefix_tokens
        self.ttl_s = ttl_s
        self.engine_reuse_window_s = engine_reuse_window_s
        self.table = table
        self.recent = RecentWarmups()
        self._policy_facts: dict[tuple[str, str | None], tuple[int, float | None]] = {}

    def _facts(self, target: WarmupTarget) -> tuple[int, float | None]:
        """The registry's (minimum, lifetime) for the target's provider and model, memoised."""
        if not target.provider:
            return 0, None
        key = (target.provider, target.model)
        facts = self._policy_facts.get(key)
        if facts is None:
            floor = prefix_minimum(target.provider, target.model, table=self.table).tokens
            facts = (floor, cache_facts(target.provider, table=self.table).ttl_s)
            self._policy_facts[key] = facts
        return facts

    def minimum(self, target: WarmupTarget) -> int:
        """The minimum cacheable prefix that applies to ``target`` (tokens; 0: no floor)."""
        if self.min_prefix_tokens is not None:
            return self.min_prefix_tokens
        return self._facts(target)[0]

    def lifetime_s(self, target: WarmupTarget) -> float | None:
        """How long a cache entry is expected to live for ``target``'s provider (s), or ``None``."""
        if self.ttl_s is not None:
            return self.ttl_s
        return self._facts(target)[1]

    def decide(self, target: WarmupTarget, now_s: float) -> Decision:
        """Whether to warm ``target`` now.

        Args:
            target: The call's facts.
            now_s: The current time (s, any clock the caller also uses for :meth:`record`).

        Raises:
            ValueError: If ``target.provider`` is not in the provider table.
        """
        if target.service == "stt":
            return Decision(
                False,
                Reason.NEVER_STT,
                "an STT warm socket never hears the caller: the call opens its own (seed 000)",
            )
        if target.is_retry and self.skip_retries:
            return Decision(
                False, Reason.RETRY, "a retry: 95 % of retries are dead calls (seed 000)"
            )
        minimum = self.minimum(target)
        if target.prefix_tokens < minimum:
            return Decision(
                False,
                Reason.BELOW_MINIMUM,
                f"prefix {target.prefix_tokens} tokens < {minimum}, the minimum "
                f"{target.provider or 'the provider'} caches: nothing would be cached",
            )
        ttl = self.lifetime_s(target)
        wait = target.expected_wait_s
        if ttl is not None and wait is not None and wait > ttl:
            return Decision(
                False,
                Reason.WAIT_EXCEEDS_TTL,
                f"expected wait {wait:.0f} s before the first turn > cache lifetime {ttl:.0f} s",
            )
        window = ttl if ttl is not None else self.engine_reuse_window_s
        last = self.recent.last(target.prefix_hash) if target.prefix_hash else None
        if window is not None and last is not None:
            age = now_s - last
            if age + (wait or 0.0) < window:
                return Decision(
                    False,
                    Reason.ALREADY_WARM,
                    f"the same prefix ({target.prefix_hash[:12]}) was sent {age:.0f} s ago; "
                    f"still alive at the first turn (lifetime {window:.0f} s)",
                )
        return Decision(
            True,
            Reason.WARM,
            f"prefix {target.prefix_tokens} tokens >= minimum {minimum}"
            + (f", lifetime {ttl:.0f} s" if ttl is not None else ", no lifetime limit"),
        )

    def record(self, prefix_hash: str, now_s: float) -> None:
        """Note a request carrying ``prefix_hash`` (a warmup sent, or a live turn) at ``now_s``."""
        if prefix_hash:
            self.recent.record(prefix_hash, now_s)
