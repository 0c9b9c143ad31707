"""Whether a speculative request may go now, given the engine's load: pure logic, no I/O.

Every speculative request (a prefill while the caller talks, a draft reply before the turn is
confirmed) is a bet paid in engine time. With one caller the engine is idle while they talk and
a lost bet is free; with many callers on one engine it is time taken from someone else's real
turn (seed 003: "with a hundred, it's time taken from someone else"). So the levers ask
:func:`decide` before each speculative request, with what the engine last said about its load
(:class:`LoadReading`, from its ``/metrics`` or ``/slots``) and the queueing measured on this
process's own requests (:class:`QueueEstimator`), and back off as the load rises:

- ``queue``: requests are waiting for a slot (llama.cpp ``requests_deferred``, vLLM
  ``num_requests_waiting``, SGLang ``num_queue_reqs``): a speculative request would queue with
  other callers' real turns, or take the slot one of them is waiting for;
- ``busy``: the engine runs at least ``prefill_busy`` (prefills) or ``draft_busy`` (drafts) of
  its slots, counting the speculative requests this process sent since the reading; and a
  *cold* prefill (``cold_tokens`` or more to compute) goes only while nothing else runs: the
  engine's compute is shared by the requests it runs at once (continuous batching), so a big
  prefill slows every other caller's turn, and one that cannot finish before its own turn ends
  is computed again by the real request;
- ``slow``: this process's own requests measured queueing longer than ``max_queue_s`` (the only
  signal where the engine reports nothing, e.g. a hosted API);
- ``stale`` / ``down``: the engine has not answered the load probe for ``stale_s`` (a long batch
  holds llama.cpp's metrics task) or the probe fails: the engine is busy or gone, and the stock
  path (no speculation) is the safe one.

Otherwise the request may go (``idle``; ``unknown`` when nothing is known at all, which keeps the
lever's one-caller behaviour; ``off`` when yielding is disabled). Drafts yield later than
prefills by default: a draft that the turn confirms *is* the real request sent early, while a
prefill is extra work whatever happens.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from statistics import median


class Kind(StrEnum):
    """What kind of speculative request asks."""

    PREFILL = "prefill"
    DRAFT = "draft"


class Reason(StrEnum):
    """Why a speculative request may or may not go."""

    OFF = "off"
    UNKNOWN = "unknown"
    IDLE = "idle"
    QUEUE = "queue"
    BUSY = "busy"
    SLOW = "slow"
    STALE = "stale"
    DOWN = "down"


ALLOWING = frozenset({Reason.OFF, Reason.UNKNOWN, Reason.IDLE})


@dataclass(frozen=True)
class LoadReading:
    """One look at the engine's load.

    Parameters:
        at_s: When the engine answered (s, the caller's monotonic clock).
        running: Requests the engine is processing (busy slots); ``None`` if not reported.
        waiting: Requests waiting for a slot; ``None`` if not reported.
        capacity: Requests it runs at once (slots), when known.
        source: Where it came from (``"llama.cpp"``, ``"vllm"``, ``"sglang"``, ...).
    """

    at_s: float
    running: int | None = None
    waiting: int | None = None
    capacity: int | None = None
    source: str = ""


@dataclass(frozen=True)
class ProbeState:
    """What the load probe can say at a moment (plain values, for :func:`decide`).

    Parameters:
        reading: The latest reading, or ``None`` before the first.
        failing: The probe's last attempts failed (the engine refused or did not answer).
        waiting_since_s: When the probe request now in flight was sent (s), or ``None``.
        sent_since_reading: Speculative requests this process sent after ``reading`` was
            taken and still in flight: the reading cannot count them yet.
    """

    reading: LoadReading | None = None
    failing: bool = False
    waiting_since_s: float | None = None
    sent_since_reading: int = 0


@dataclass(frozen=True)
class YieldConfig:
    """When speculative requests back off.

    Parameters:
        enabled: ``False`` sends every speculative request the lever wants (reason ``off``).
        prefill_busy: Prefills stop once this share of the engine's slots is running
            (default 0.5: with 4 slots, a prefill goes while at most one request runs).
        draft_busy: Drafts stop once this share is running (default 1.0: a draft goes while a
            slot is free, so it never queues).
        max_waiting: Speculative requests stop while more requests than this wait for a slot.
        running_limit: For engines that report no capacity (vLLM, SGLang without their
            capacity gauge): the running requests that count as a full engine; ``None``
            applies only the queue rule to them.
        max_queue_s: Speculative requests stop while this process's own requests measure more
            queueing than this (s), see :class:`QueueEstimator`.
        stale_s: A reading older than this, with the probe still waiting for the engine, means
            the engine is too busy to answer (or gone): speculative requests stop (s).
        cold_tokens: A prefill with at least this many prompt tokens to compute goes only
            while the engine runs nothing else (small increments go while it has room).

    Raises:
        ValueError: For a share outside (0, 1], a negative count or time.
    """

    enabled: bool = True
    prefill_busy: float = 0.5
    draft_busy: float = 1.0
    max_waiting: int = 0
    running_limit: int | None = None
    max_queue_s: float = 0.25
    stale_s: float = 1.0
    cold_tokens: int = 256

    def __post_init__(self):
        for name in ("prefill_busy", "draft_busy"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
                raise ValueError(f"YieldConfig.{name} must be a share in (0, 1], got {value!r}")
        for name in ("max_waiting", "running_limit", "cold_tokens"):
            value = getattr(self, name)
            if value is None and name == "running_limit":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"YieldConfig.{name} must be an integer >= 0, got {value!r}")
        for name in ("max_queue_s", "stale_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise ValueError(f"YieldConfig.{name} must be a number >= 0, got {value!r}")

    def busy_share(self, kind: Kind) -> float:
        """The share of the slots at which ``kind`` stops."""
        return self.prefill_busy if kind is Kind.PREFILL else self.draft_busy


@dataclass(frozen=True)
class Verdict:
    """The answer: may the speculative request go, and why."""

    allow: bool
    reason: Reason
    detail: str = ""

    def __bool__(self) -> bool:
        return self.allow


def decide(
    kind: Kind | str,
    probe: ProbeState | None,
    queue_s: float | None,
    now: float,
    config: YieldConfig | None = None,
    *,
    work_tokens: int | None = None,
) -> Verdict:
    """Whether a speculative request of ``kind`` may go now.

    Args:
        kind: ``"prefill"`` or ``"draft"``.
        probe: What the engine's load probe can say; ``None`` when there is no probe (only
            the measured queueing counts then).
        queue_s: Queueing measured on this process's own recent requests (s), ``None`` when
            too few were measured.
        now: The current time on the probe's clock (s).
        config: The thresholds; the defaults when ``None``.
        work_tokens: Prompt tokens the request would have the engine compute (a prefill's
            uncached tokens, estimated), when known.

    Returns:
        The verdict; its ``reason`` says which rule decided.
    """
    kind = Kind(kind)
    config = config or YieldConfig()
    if not config.enabled:
        return Verdict(True, Reason.OFF)
    if probe is not None:
        verdict = _from_probe(kind, probe, now, config, work_tokens)
        if verdict is not None:
            return verdict
    if queue_s is not None and queue_s > config.max_queue_s:
        return Verdict(
            False,
            Reason.SLOW,
            f"own requests queued {queue_s * 1000:.0f} ms (limit {config.max_queue_s * 1000:.0f})",
        )
    reading = probe.reading if probe is not None else None
    if reading is None and queue_s is None:
        return Verdict(True, Reason.UNKNOWN)
    return Verdict(True, Reason.IDLE, _describe(reading, probe))


def _from_probe(
    kind: Kind, probe: ProbeState, now: float, config: YieldConfig, work_tokens: int | None
) -> Verdict | None:
    if probe.failing:
        return Verdict(False, Reason.DOWN, "the engine's load probe is failing")
    reading = probe.reading
    if reading is None or now - reading.at_s > config.stale_s:
        if probe.waiting_since_s is not None:
            waited = now - probe.waiting_since_s
            return Verdict(
                False,
                Reason.STALE,
                f"no load reading for {config.stale_s:.1f} s: the engine has not answered the "
                f"probe sent {waited:.1f} s ago",
            )
        return None  # nothing current and nothing asked: the probe is not running
    if reading.waiting is not None and reading.waiting > config.max_waiting:
        return Verdict(False, Reason.QUEUE, f"{reading.waiting} requests waiting for a slot")
    running = reading.running
    if running is None:
        return None
    projected = running + max(0, probe.sent_since_reading)
    capacity = reading.capacity or config.running_limit
    if capacity:
        share = config.busy_share(kind)
        if projected >= share * capacity:
            return Verdict(
                False,
                Reason.BUSY,
                f"{projected} of {capacity} slots running ({kind.value}s stop at {share:.0%})",
            )
    cold = kind is Kind.PREFILL and work_tokens is not None and work_tokens >= config.cold_tokens
    if cold and projected >= 1:
        return Verdict(
            False,
            Reason.BUSY,
            f"a cold prefill of ~{work_tokens} tokens would share the engine with {projected} "
            "running requests",
        )
    return None


def _describe(reading: LoadReading | None, probe: ProbeState | None) -> str:
    if reading is None:
        return ""
    sent = probe.sent_since_reading if probe is not None else 0
    return (
        f"{reading.source}: running {reading.running}, waiting {reading.waiting}, "
        f"capacity {reading.capacity}, sent since {sent}"
    )


class QueueEstimator:
    """Queueing measured on this process's own requests to one engine.

    Fed each request's time to first token (or a prefill's round trip) with the prompt tokens
    the engine had to compute. Only *warm* requests count (fewer than ``warm_tokens``
    uncached): their time is the engine's base latency plus any queueing. The base is the
    fastest warm request of the last ``history`` ones; the queueing now is the median excess
    over it of the warm requests of the last ``window_s`` seconds (``None`` with fewer than
    ``min_samples`` of them). Bounded memory: at most ``history`` samples are kept.

    Args:
        warm_tokens: Requests with fewer uncached tokens count.
        window_s: How far back "now" reaches (s).
        history: Samples kept (the base is their minimum).
        min_samples: Recent samples needed for an estimate.
    """

    def __init__(
        self,
        *,
        warm_tokens: int = 256,
        window_s: float = 10.0,
        history: int = 64,
        min_samples: int = 2,
    ):
        self.warm_tokens = warm_tokens
        self.window_s = window_s
        self.min_samples = min_samples
        self._samples: deque[tuple[float, float]] = deque(maxlen=history)

    def add(self, uncached_tokens: int, seconds: float, now: float) -> None:
        """One request: ``uncached_tokens`` computed, first token after ``seconds``, at ``now``."""
        if 0 <= uncached_tokens < self.warm_tokens and seconds >= 0:
            self._samples.append((now, float(seconds)))

    def __len__(self) -> int:
        return len(self._samples)

    def queue_s(self, now: float) -> float | None:
        """The median queueing of the recent warm requests (s), or ``None``."""
        if not self._samples:
            return None
        base = min(s for _, s in self._samples)
        recent = [s - base for at, s in self._samples if now - at <= self.window_s]
        if len(recent) < self.min_samples:
            return None
        return max(0.0, median(recent))
