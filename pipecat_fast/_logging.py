"""Rate-limited logging: a failure repeated on every frame is counted and summarised, not spammed.

Every lever fails open with a log line; a failure that repeats (a provider that is down, a
misconfigured service that fails on every frame) must not bury the log. :class:`LogLimiter`
is the pure rule — at most ``burst`` lines per key in any ``period_s`` seconds, the rest
counted — and :class:`RateLimitedLog` writes through loguru with it: the next line that is let
through says how many like it were held back, and :meth:`RateLimitedLog.flush` (call it at
cleanup) reports what is still pending::

    self._pf_log = RateLimitedLog(f"{self}")
    ...
    self._pf_log.warning(f"prefill failed ({e})", key="prefill-failed")
    ...
    self._pf_log.flush()
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from loguru import logger


@dataclass
class _KeyState:
    shown: deque[float] = field(default_factory=deque)
    held: int = 0
    held_total: int = 0


class LogLimiter:
    """Decides, message by message, whether a line is logged (pure: time is passed in).

    Args:
        burst: Lines of one key logged in any window of ``period_s`` seconds.
        period_s: The window (s).

    Raises:
        ValueError: If ``burst`` < 1 or ``period_s`` <= 0.
    """

    def __init__(self, *, burst: int = 3, period_s: float = 1.0):
        if burst < 1:
            raise ValueError(f"burst must be >= 1, got {burst}")
        if not period_s > 0:
            raise ValueError(f"period_s must be > 0, got {period_s}")
        self.burst = burst
        self.period_s = period_s
        self._keys: dict[str, _KeyState] = {}

    def admit(self, key: str, now: float) -> tuple[bool, int]:
        """One more message of ``key`` at time ``now``.

        Returns:
            ``(log_it, held_before)``: whether to log this one, and when it is logged, how
            many of the same key were held back since the last one logged (0 otherwise).
        """
        state = self._keys.setdefault(key, _KeyState())
        while state.shown and state.shown[0] <= now - self.period_s:
            state.shown.popleft()
        if len(state.shown) >= self.burst:
            state.held += 1
            state.held_total += 1
            return False, 0
        state.shown.append(now)
        held, state.held = state.held, 0
        return True, held

    def take_pending(self) -> dict[str, int]:
        """Messages held back and not yet reported, by key; resets them to zero."""
        pending = {k: s.held for k, s in self._keys.items() if s.held}
        for key in pending:
            self._keys[key].held = 0
        return pending

    def held_total(self, key: str) -> int:
        """Messages of ``key`` held back so far (reported or not)."""
        state = self._keys.get(key)
        return state.held_total if state else 0


class RateLimitedLog:
    """Loguru lines through a :class:`LogLimiter`, with counts of what was held back.

    Args:
        owner: Prefix of every line (usually the processor's name).
        burst: Lines per key in any ``period_s`` window.
        period_s: The window (s).
        clock: Monotonic clock (s); injectable for tests.
    """

    def __init__(
        self,
        owner: str = "",
        *,
        burst: int = 3,
        period_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.owner = owner
        self.limiter = LogLimiter(burst=burst, period_s=period_s)
        self._clock = clock
        self._texts: dict[str, str] = {}

    def _log(self, level: str, message: str, key: str | None) -> bool:
        key = key or message
        self._texts[key] = message
        ok, held = self.limiter.admit(key, self._clock())
        if not ok:
            return False
        prefix = f"{self.owner}: " if self.owner else ""
        suffix = f" ({held} more like this were not logged)" if held else ""
        logger.opt(depth=2).log(level, f"{prefix}{message}{suffix}")
        return True

    def error(self, message: str, *, key: str | None = None) -> bool:
        """Log at ERROR unless ``key`` (default: the message) is over its rate; True if logged."""
        return self._log("ERROR", message, key)

    def warning(self, message: str, *, key: str | None = None) -> bool:
        """Log at WARNING unless over the rate; True if logged."""
        return self._log("WARNING", message, key)

    def info(self, message: str, *, key: str | None = None) -> bool:
        """Log at INFO unless over the rate; True if logged."""
        return self._log("INFO", message, key)

    def flush(self, level: str = "WARNING") -> None:
        """Report each key's held-back messages not yet reported (one line per key)."""
        prefix = f"{self.owner}: " if self.owner else ""
        for key, count in self.limiter.take_pending().items():
            last = self._texts.get(key, key)
            logger.opt(depth=1).log(
                level, f"{prefix}{count} more like this were not logged; the last: {last}"
            )
