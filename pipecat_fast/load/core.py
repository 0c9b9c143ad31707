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
  *cold* prefill (``cold_tokens`` or more to compute) beside other requests goes only if it
  still finishes before its real request sharing the engine with them
  (:func:`shared_prefill_s`; it moves compute the real request would do, and what can cost
  others is the part lost when it does not finish), and only while nothing else runs when its
  time is not known: the engine's compute is shared by the requests it runs at once
  (continuous batching);
- ``slow``: this process's own requests measured queueing longer than ``max_queue_s`` (the only
  signal where the engine reports nothing, e.g. a hosted API);
- ``stale`` / ``down``: the engine has not answered the load probe for ``stale_s`` (a long batch
  holds llama.cpp's metrics task) or the probe fails: the engine is busy or gone, and the stock
  path (no speculation) is the safe one.

- ``busy`` also when this process's own speculative prefills still have ``cold_tokens`` or more
  to compute (their remaining tokens, estimated from the compute rate measured on finished
  ones): the reading shows a running prefill as one request, whatever work it has left.

Otherwise the request may go (``idle``; ``unknown`` when nothing is known at all, which keeps the
lever's one-caller behaviour; ``off`` when yielding is disabled). Drafts yield later than
prefills by default: a draft that the turn confirms *is* the real request sent early, while a
prefill is extra work whatever happens.

A prefill that was allowed can stop paying off while it computes, and :func:`cancel_on_dispatch`
and :func:`contended` say when to cancel it (:class:`CancelReason`):

- ``dispatched``: the session's own real request left while the prefill still runs, and the
  engine is known not to let a request read an unfinished prefill (a slotted engine such as
  llama.cpp's server runs the real request in another slot and computes the prompt again, so
  the two only slow each other down);
- ``contended``: another caller's request started on the shared engine while the prefill still
  has ``cold_tokens`` or more to compute: the engine's compute is shared by the requests it runs
  at once, so the bet now costs that caller's turn (the compute is contended before the slots
  are).
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


class CancelReason(StrEnum):
    """Why a speculative prefill in flight was cancelled."""

    ENDED = "ended"
    """The session ended (hang-up, end of call) with it in flight."""
    DISPATCHED = "dispatched"
    """The session's real request left and the engine will not read the unfinished prefill."""
    CONTENDED = "contended"
    """Another caller's request started on the shared engine while it still computed."""


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
        prefill_tokens_in_flight: Prompt tokens this process's speculative prefills in flight
            still have to compute (estimated).
    """

    reading: LoadReading | None = None
    failing: bool = False
    waiting_since_s: float | None = None
    sent_since_reading: int = 0
    prefill_tokens_in_flight: int = 0


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
            while the engine runs nothing else (small increments go while it has room); no
            prefill goes while this process's prefills in flight have this many left to
            compute; and a prefill in flight with this many left is cancelled when another
            caller's request starts (``cancel_contended``).
        cancel_contended: Cancel a prefill still computing when another caller's request
            starts on the engine (``contended``).
        cancel_on_dispatch: Cancel the session's prefill when its real request leaves while
            the prefill runs on an engine that does not reuse an unfinished prefill
            (``dispatched``).
        reuses_unfinished: What you know about your engine: ``False``, a request cannot read
            what a prefill still running has computed (a slotted engine; the bench's emulator);
            ``True``, it can; ``None`` (default): the provider registry's fact, else learnt
            from the first overlap (:func:`reuses_unfinished`). Measured beats it.

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
    cancel_contended: bool = True
    cancel_on_dispatch: bool = True
    reuses_unfinished: bool | None = None

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
    idle_s: float | None = None,
    time_left_s: float | None = None,
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
        idle_s: How long a prefill of ``work_tokens`` takes the engine alone (its idle speed
            plus the queueing measured now), when known.
        time_left_s: Until the session's real request is likely to leave (s), when known.
            With ``idle_s``, a cold prefill may share the engine (:func:`shared_prefill_s`).

    Returns:
        The verdict; its ``reason`` says which rule decided.
    """
    kind = Kind(kind)
    config = config or YieldConfig()
    if not config.enabled:
        return Verdict(True, Reason.OFF)
    if probe is not None:
        verdict = _from_probe(kind, probe, now, config, work_tokens, idle_s, time_left_s)
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
    kind: Kind,
    probe: ProbeState,
    now: float,
    config: YieldConfig,
    work_tokens: int | None,
    idle_s: float | None = None,
    time_left_s: float | None = None,
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
    timed = cold and idle_s is not None and time_left_s is not None
    pending = max(0, probe.prefill_tokens_in_flight)
    if kind is Kind.PREFILL and pending >= config.cold_tokens and not timed:
        return Verdict(
            False,
            Reason.BUSY,
            f"prefills in flight still have ~{pending} tokens to compute",
        )
    if timed:
        assert idle_s is not None and time_left_s is not None
        shared = shared_prefill_s(idle_s, projected)
        if shared > time_left_s:
            return Verdict(
                False,
                Reason.BUSY,
                f"a cold prefill of ~{work_tokens} tokens sharing the engine with {projected} "
                f"requests would take ~{shared:.2f} s, the caller is done in ~{time_left_s:.2f} s",
            )
    elif cold and projected >= 1:
        return Verdict(
            False,
            Reason.BUSY,
            f"a cold prefill of ~{work_tokens} tokens would share the engine with {projected} "
            "running requests",
        )
    return None


def shared_prefill_s(idle_s: float, sharing: int) -> float:
    """How long a cold prefill takes sharing the engine: it may go if that is within time left.

    A cold prefill of the turn's prefix (system prompt, tools, history: what the real request
    will send whatever the caller says) does not add compute, it moves it earlier: the real
    request would compute the same tokens a moment later. What it can cost others is work
    wasted or done twice, and that happens when it is still computing as the real request
    leaves (an engine that cannot read an unfinished prefill computes the prompt again; the
    ``dispatched`` rule then cancels it and what it computed is lost). So it may go while
    other requests run, if it finishes in time *sharing* the engine with them: the engine's
    compute is split between the requests it runs at once (continuous batching), and every
    request on it counts as one with as much prefill left as this one (their work is unknown:
    the cautious side), so it takes ``idle_s × (1 + sharing)``.

    Args:
        idle_s: The prefill's time alone on the engine (s).
        sharing: Other requests on the engine (running, and sent since the reading).

    Returns:
        Its estimated time sharing the engine (s).
    """
    return max(0.0, idle_s) * (1 + max(0, sharing))


def requests_on_engine(
    probe: ProbeState | None, now: float, config: YieldConfig | None = None
) -> int | None:
    """How many requests the engine has besides one sent now, or ``None`` when unknown.

    The latest reading's running and waiting requests plus this process's speculative
    requests sent since it was taken (a reading cannot count them yet). A request's timing
    is tagged with it (:class:`pipecat_fast.prefill.ProviderSpeed`): ``0`` says the engine
    was idle when it left, so its time measures the engine's own speed, not other callers'
    queueing and shared compute.

    Args:
        probe: What the load probe can say; ``None`` without a probe.
        now: The probe's clock (s).
        config: ``stale_s``: a reading older than this says nothing about now.

    Returns:
        The count, or ``None`` without a probe, while it fails, before its first reading,
        with a reading older than ``stale_s``, or when the engine reports neither gauge.
    """
    config = config or YieldConfig()
    if probe is None or probe.failing or probe.reading is None:
        return None
    reading = probe.reading
    if now - reading.at_s > config.stale_s:
        return None
    if reading.running is None and reading.waiting is None:
        return None
    return (
        max(0, reading.running or 0)
        + max(0, reading.waiting or 0)
        + max(0, probe.sent_since_reading)
    )


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


@dataclass(frozen=True)
class InFlightPrefill:
    """A speculative prefill this process has in flight (plain values).

    Parameters:
        sent_at_s: When it left (s, the probe's clock).
        work_tokens: Prompt tokens it asked the engine to compute (beyond what the engine was
            known to hold), estimated; ``None`` if unknown.
        tokens_per_s: The engine's prompt compute rate measured on finished prefills, or
            ``None``.
        dispatched: The session's own real request has left since (the prefill now serves it,
            or :func:`cancel_on_dispatch` already decided).
        others_at_send: Other callers' requests on the engine (running or waiting) when it
            left: a cold prefill admitted alongside them was judged to finish sharing the
            engine with them (:func:`shared_prefill_s`), so only requests beyond these
            contend with it (:func:`contended`).
    """

    sent_at_s: float
    work_tokens: int | None = None
    tokens_per_s: float | None = None
    dispatched: bool = False
    others_at_send: int = 0

    def remaining(self, now: float) -> int | None:
        """Tokens it still has to compute at ``now``: all of them without a measured rate."""
        if self.work_tokens is None:
            return None
        if not self.tokens_per_s or self.tokens_per_s <= 0:
            return self.work_tokens
        done = max(0.0, now - self.sent_at_s) * self.tokens_per_s
        return max(0, int(self.work_tokens - done))


@dataclass(frozen=True)
class CancelVerdict:
    """Whether to cancel a speculative prefill in flight, and why."""

    cancel: bool
    reason: CancelReason | None = None
    detail: str = ""

    def __bool__(self) -> bool:
        return self.cancel


KEEP = CancelVerdict(False)


def reuses_unfinished(
    measured: bool | None, provider: bool | None, engine_source: str | None
) -> bool | None:
    """Whether a real request reads what a prefill still running has computed.

    Args:
        measured: What this process saw (a real request that left while a prefill ran, and
            what its usage said was cached), ``None`` before any.
        provider: The provider registry's fact (``reuses_unfinished_prefill``), if any.
        engine_source: The load probe's dialect (``"llama.cpp"``, ``"llama.cpp /slots"``...):
            llama.cpp's server is slotted (each request its own slot and KV cache).

    Returns:
        What was measured, else the registry's fact, else ``False`` for a slotted engine the
        probe recognised, else ``None`` (unknown).
    """
    if measured is not None:
        return measured
    if provider is not None:
        return provider
    if engine_source and engine_source.startswith("llama.cpp"):
        return False
    return None


def cancel_on_dispatch(
    prefill: InFlightPrefill | None, reuses: bool | None, config: YieldConfig | None = None
) -> CancelVerdict:
    """At the session's real request: cancel its own prefill still in flight?

    Only where the engine is known not to reuse an unfinished prefill (``reuses`` False): the
    real request computes the prompt again beside it, and the two share the engine's compute.
    Unknown (``None``) keeps the prefill (the one-caller behaviour, and the only way to learn
    the answer); ``True`` keeps it (the real request reads it).
    """
    config = config or YieldConfig()
    if prefill is None or not config.enabled or not config.cancel_on_dispatch:
        return KEEP
    if reuses is not False:
        return KEEP
    return CancelVerdict(
        True,
        CancelReason.DISPATCHED,
        "the real request left and this engine does not read an unfinished prefill",
    )


def contended(
    prefill: InFlightPrefill,
    reading: LoadReading | None,
    prefills_running: int,
    now: float,
    config: YieldConfig | None = None,
) -> CancelVerdict:
    """On a new load reading: cancel a prefill still computing because others now need the engine?

    Args:
        prefill: The prefill in flight.
        reading: The probe's newest reading.
        prefills_running: This process's speculative prefills in flight that the reading can
            count (sent before it was taken), this one included: the rest of ``running`` is
            other callers' requests (real turns, drafts, other processes' bets).
        now: The probe's clock (s).
        config: The thresholds.

    Returns:
        ``contended`` when the reading (taken after the prefill left) shows more other
        requests running or waiting than when it left (``others_at_send``) and the prefill
        still has ``cold_tokens`` or more to compute;
        otherwise keep it (a prefill about to finish costs little more, and cancelling it
        throws away what it computed).
    """
    config = config or YieldConfig()
    if not config.enabled or not config.cancel_contended or prefill.dispatched:
        return KEEP
    if reading is None or reading.at_s < prefill.sent_at_s:
        return KEEP
    others = max(0, (reading.running or 0) - max(0, prefills_running))
    waiting = max(0, reading.waiting or 0)
    if others + waiting <= max(0, prefill.others_at_send):
        return KEEP
    left = prefill.remaining(now)
    if left is None or left < config.cold_tokens:
        return KEEP
    return CancelVerdict(
        True,
        CancelReason.CONTENDED,
        f"{others} other requests running and {waiting} waiting while ~{left} prefill tokens "
        "are left to compute",
    )


class ComputeRate:
    """The engine's prompt compute rate, from finished cold prefills (bounded memory).

    Each sample is a prefill's computed tokens over its round trip, so queueing and latency
    make the rate an underestimate: remaining work is overestimated (the cautious side).

    Args:
        min_tokens: Prefills computing fewer tokens than this are not samples (their time is
            mostly latency).
        keep: Samples kept; the rate is their median.
    """

    def __init__(self, *, min_tokens: int = 256, keep: int = 16):
        self.min_tokens = min_tokens
        self._samples: deque[float] = deque(maxlen=keep)

    def add(self, computed_tokens: int, seconds: float) -> None:
        """One finished prefill."""
        if computed_tokens >= self.min_tokens and seconds > 0:
            self._samples.append(computed_tokens / seconds)

    def tokens_per_s(self) -> float | None:
        """The median rate, or ``None`` before any sample."""
        return median(self._samples) if self._samples else None
