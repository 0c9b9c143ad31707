"""The TTS warm-pool's lifecycle: events in, actions out.

Pure, in the style of ``websockets.protocol``: no sockets, tasks or clocks. The I/O layer
(:class:`~pipecat_fast.ttspool.pool.TTSWarmPool`) reports what happened — a call started
ringing, a dial finished or failed, a held socket closed or answered a probe, the service
asked for a connection, the call ended, time passed — each with the time it happened, and
carries out the actions returned: :class:`Dial`, :class:`SendKeepalive`, :class:`Probe`,
:class:`Close`, :class:`Note`.

Per call (a *lane*) the pool holds at most one socket of its own at a time — the *warm* one,
dialled while the phone rings for the service's first connection, then a *spare*, dialled
after the service took the warm one, for providers whose Pipecat service reconnects on every
interruption — plus, for a moment, the replacement of a held socket that is about to be
closed for idleness. Across calls, held sockets are bounded by ``max_held``. A socket handed
to the service is the service's: the pool no longer keeps it alive or closes it.

Lifecycle of a held socket::

    DIALING --dial_succeeded--> OPEN --acquire--> HANDED (the service's)
       |                          |
       +--dial_failed--> CLOSED <-+--closed / probe timeout / hangup / replaced

A held socket that dies before use (closed by the provider, no answer to a probe) is
replaced at once, up to ``max_redials`` times per call; one that would reach the provider's
idle limit while held (no keepalive) is replaced ahead of it. A failed dial is not retried: a
refusal would most likely repeat, and the service still dials for itself (fail open).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Role(StrEnum):
    """What a held socket is for."""

    WARM = "warm"  # dialled while the call rings: the service's first connection
    SPARE = "spare"  # dialled after the service took one: its next reconnect


class SlotState(StrEnum):
    """Where a pooled socket is in its life."""

    DIALING = "dialing"
    OPEN = "open"
    HANDED = "handed"
    CLOSED = "closed"


@dataclass(frozen=True)
class PoolConfig:
    """Bounds and timers of the pool (all times in seconds).

    Attributes:
        max_held: Sockets held across all calls (dialing or open, not yet handed over).
        probe_interval_s: How often a held socket is pinged to prove it is alive.
        probe_timeout_s: A held socket whose ping is not answered this long is replaced.
        idle_margin_s: Replace a held socket this long before the provider's idle limit
            (providers without a keepalive).
        max_redials: Replacements of held sockets that died young (open less than
            ``stable_after_s``) per call; after that the service dials for itself. A socket
            that lived longer was closed for idleness, and replacing it costs no budget.
        stable_after_s: How long a held socket must have been open for its close to count as
            an idle close rather than a failure.
        max_ring_s: A call neither answered nor closed after this long is given up: its held
            sockets are closed (a call the application forgot to close leaks nothing).
    """

    max_held: int = 64
    probe_interval_s: float = 10.0
    probe_timeout_s: float = 5.0
    idle_margin_s: float = 15.0
    max_redials: int = 3
    stable_after_s: float = 30.0
    max_ring_s: float = 300.0

    def __post_init__(self):
        if self.max_held < 0:
            raise ValueError(f"max_held must be >= 0, got {self.max_held}")
        for name in ("probe_interval_s", "probe_timeout_s", "max_ring_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.idle_margin_s < 0 or self.max_redials < 0:
            raise ValueError("idle_margin_s and max_redials must be >= 0")


@dataclass(frozen=True)
class LanePlan:
    """What the pool does for one call (decided by the policy and the service adapter).

    Attributes:
        prewarm: Dial a warm socket while the call rings.
        spare: Keep a spare socket once the service has taken one (its Pipecat service
            reconnects on every interruption).
        keepalive_s: Send the provider's keepalive to held sockets this often; ``None``
            when it has none usable before the session's first message.
        idle_close_s: The provider closes idle sockets after this long; ``None`` if unknown.
    """

    prewarm: bool = True
    spare: bool = False
    keepalive_s: float | None = None
    idle_close_s: float | None = None


@dataclass
class Slot:
    """One socket the pool dialled, and its timers (times in s, the caller's clock)."""

    id: int
    call_id: str
    role: Role
    state: SlotState
    dial_started_at: float
    opened_at: float | None = None
    keepalive_at: float | None = None
    probe_at: float | None = None
    probing_since: float | None = None
    replace_at: float | None = None
    replaces: int | None = None  # the held slot this one replaces once open


@dataclass
class AcquireRecord:
    """One time the service asked for a connection.

    Attributes:
        at: When it asked (s).
        kind: ``"reused"`` (an open pooled socket), ``"waited"`` (a pooled dial in flight,
            awaited), or ``"dialled"`` (no pooled socket: the service paid the handshake).
        wait_ms: How long the service waited for the pool (0 for ``"dialled"``; its own
            handshake is not the pool's to time).
        role: The role of the socket handed over, if any.
    """

    at: float
    kind: str
    wait_ms: float
    role: str | None = None


@dataclass
class CallStats:
    """What the pool did for one call.

    Attributes:
        acquires: Times the service asked for a connection.
        reused: Acquires served by an open pooled socket.
        waited: Acquires served by a pooled dial the service waited for.
        service_dials: Acquires with no pooled socket: the service paid the handshake itself
            (on its critical path: at setup, on a reconnect, before a sentence).
        pool_dials: Sockets the pool dialled (off the critical path).
        dial_failures: Pool dials that failed (refused, unreachable, timed out).
        replaced: Held sockets replaced (died, unanswered probe, ahead of an idle close).
        keepalives: Keepalive messages sent on held sockets.
        acquire_log: Every acquire, in order.
    """

    acquires: int = 0
    reused: int = 0
    waited: int = 0
    service_dials: int = 0
    pool_dials: int = 0
    dial_failures: int = 0
    replaced: int = 0
    keepalives: int = 0
    acquire_log: list[AcquireRecord] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready counters (``acquire_log`` as a list of dicts)."""
        return {
            "acquires": self.acquires,
            "reused": self.reused,
            "waited": self.waited,
            "service_dials": self.service_dials,
            "pool_dials": self.pool_dials,
            "dial_failures": self.dial_failures,
            "replaced": self.replaced,
            "keepalives": self.keepalives,
            "acquire_log": [
                {"kind": r.kind, "wait_ms": round(r.wait_ms, 1), "role": r.role}
                for r in self.acquire_log
            ],
        }


# -- actions ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dial:
    """Open a socket for ``call_id`` (report the outcome with ``dial_succeeded/failed``)."""

    slot_id: int
    call_id: str
    role: Role


@dataclass(frozen=True)
class SendKeepalive:
    """Send the provider's keepalive message on a held socket."""

    slot_id: int


@dataclass(frozen=True)
class Probe:
    """Ping a held socket; report the pong with ``alive``."""

    slot_id: int


@dataclass(frozen=True)
class Close:
    """Close a held socket, or cancel its dial. The core already counts it closed."""

    slot_id: int
    reason: str


@dataclass(frozen=True)
class Note:
    """Something worth a log line (``level`` ``"info"`` or ``"warning"``)."""

    call_id: str
    text: str
    level: str = "info"
    key: str = ""  # a stable code, for counting repeated notes


Action = Dial | SendKeepalive | Probe | Close | Note


@dataclass(frozen=True)
class Grant:
    """The answer to the service asking for a connection.

    Attributes:
        kind: ``"reuse"`` (take ``slot_id``, open) or ``"dial"`` (dial for yourself).
        slot_id: The socket to hand over, for ``"reuse"``.
        reason: Why, in a few words (for the log).
    """

    kind: str
    slot_id: int | None
    reason: str


@dataclass
class _Lane:
    call_id: str
    plan: LanePlan
    rung_at: float
    slots: dict[int, Slot] = field(default_factory=dict)
    stats: CallStats = field(default_factory=CallStats)
    redials_left: int = 0
    ended: bool = False
    expired: bool = False


class PoolCore:
    """The warm-pool's state machine for every call of a process.

    Every method takes ``now`` (seconds on one clock the caller chooses) and returns the
    actions to carry out, in order.

    Args:
        config: Bounds and timers.
    """

    def __init__(self, config: PoolConfig | None = None):
        self.config = config or PoolConfig()
        self._lanes: dict[str, _Lane] = {}
        self._slots: dict[int, Slot] = {}
        self._cancelled: set[int] = set()  # closed while dialling, outcome not reported yet
        self._next_id = 1

    # -- queries -----------------------------------------------------------------------------

    @property
    def held(self) -> int:
        """Sockets held right now across all calls (dialing or open)."""
        return sum(1 for s in self._slots.values() if s.state in _HELD)

    def calls(self) -> list[str]:
        """Calls with a lane (not yet ended)."""
        return list(self._lanes)

    def slot(self, slot_id: int) -> Slot | None:
        """A slot by id (``None`` once forgotten)."""
        return self._slots.get(slot_id)

    def stats(self, call_id: str) -> CallStats | None:
        """What the pool did for a call so far (``None`` for an unknown call)."""
        lane = self._lanes.get(call_id)
        return lane.stats if lane else None

    def pending_dial(self, call_id: str) -> int | None:
        """A pooled dial in flight for the call that the service could wait for."""
        lane = self._lanes.get(call_id)
        if lane is None or lane.ended:
            return None
        dialing = [s for s in lane.slots.values() if s.state is SlotState.DIALING]
        return min(dialing, key=lambda s: s.dial_started_at).id if dialing else None

    def next_deadline(self) -> float | None:
        """The earliest time a timer needs :meth:`tick` (``None``: nothing scheduled)."""
        times: list[float] = []
        for lane in self._lanes.values():
            if not lane.ended and not lane.expired and lane.stats.acquires == 0:
                times.append(lane.rung_at + self.config.max_ring_s)
            for s in lane.slots.values():
                if s.state is not SlotState.OPEN:
                    continue
                for t in (s.keepalive_at, s.probe_at, s.replace_at):
                    if t is not None:
                        times.append(t)
                if s.probing_since is not None:
                    times.append(s.probing_since + self.config.probe_timeout_s)
        return min(times) if times else None

    # -- events ------------------------------------------------------------------------------

    def open_call(self, call_id: str, plan: LanePlan, now: float) -> list[Action]:
        """A call starts ringing (or is set up): dial its warm socket if the plan says so.

        Raises:
            ValueError: If the call already has a lane.
        """
        if call_id in self._lanes:
            raise ValueError(f"call {call_id!r} is already in the pool")
        lane = _Lane(call_id, plan, now, redials_left=self.config.max_redials)
        self._lanes[call_id] = lane
        if not plan.prewarm:
            return []
        return self._dial(lane, Role.WARM, now, why="ringing")

    def dial_succeeded(self, slot_id: int, now: float) -> list[Action]:
        """A pooled dial opened its socket."""
        slot = self._slots.get(slot_id)
        if slot is None or slot.state is not SlotState.DIALING:
            # Cancelled while dialling (the call ended, the slot was superseded): the socket
            # that opened anyway is closed. A handed or unknown id is never touched.
            if slot is None and slot_id in self._cancelled:
                self._cancelled.discard(slot_id)
                return [Close(slot_id, "no longer wanted")]
            return []
        lane = self._lanes.get(slot.call_id)
        if lane is None or lane.ended or lane.expired:
            slot.state = SlotState.CLOSED
            self._forget(slot)
            return [Close(slot_id, "call ended while dialling")]
        cfg = self.config
        slot.state = SlotState.OPEN
        slot.opened_at = now
        slot.probe_at = now + cfg.probe_interval_s
        if lane.plan.keepalive_s:
            slot.keepalive_at = now + lane.plan.keepalive_s
        elif lane.plan.idle_close_s is not None:
            slot.replace_at = now + max(0.0, lane.plan.idle_close_s - cfg.idle_margin_s)
        actions: list[Action] = []
        if slot.replaces is not None:
            old = lane.slots.get(slot.replaces)
            if old is not None and old.state is SlotState.OPEN:
                actions += self._close(old, "replaced by a fresh socket")
            slot.replaces = None
        return actions

    def dial_failed(self, slot_id: int, now: float, error: str) -> list[Action]:
        """A pooled dial failed (refused, unreachable, timed out)."""
        slot = self._slots.get(slot_id)
        if slot is None or slot.state is not SlotState.DIALING:
            self._cancelled.discard(slot_id)
            return []
        slot.state = SlotState.CLOSED
        self._forget(slot)
        lane = self._lanes.get(slot.call_id)
        if lane is None:
            return []
        lane.stats.dial_failures += 1
        return [
            Note(
                slot.call_id,
                f"{slot.role} dial failed ({error}); the service will dial for itself",
                "warning",
                "dial_failed",
            )
        ]

    def closed(self, slot_id: int, now: float, detail: str = "") -> list[Action]:
        """A held socket closed (the provider closed it, the network dropped it)."""
        slot = self._slots.get(slot_id)
        if slot is None or slot.state is not SlotState.OPEN:
            return []
        slot.state = SlotState.CLOSED
        self._forget(slot)
        lane = self._lanes.get(slot.call_id)
        if lane is None:
            return []
        lived = now - (slot.opened_at if slot.opened_at is not None else now)
        young = lived < self.config.stable_after_s
        why = f"closed after {lived:.1f} s open ({detail or 'no reason given'})"
        return self._replace_dead(lane, slot, now, why, costs_budget=young)

    def discard(self, slot_id: int, now: float, reason: str) -> list[Action]:
        """Close a held socket the service cannot use (it asks for another URI or headers)."""
        slot = self._slots.get(slot_id)
        if slot is None or slot.state not in _HELD:
            return []
        lane = self._lanes.get(slot.call_id)
        actions = self._close(slot, reason)
        if lane is not None:
            actions.append(Note(lane.call_id, f"{slot.role} socket {reason}", "warning", "discard"))
        return actions

    def alive(self, slot_id: int, now: float) -> list[Action]:
        """A held socket answered a probe."""
        slot = self._slots.get(slot_id)
        if slot is not None and slot.state is SlotState.OPEN:
            slot.probing_since = None
            slot.probe_at = now + self.config.probe_interval_s
        return []

    def acquire(self, call_id: str, now: float, waited_ms: float = 0.0) -> tuple[Grant, list]:
        """The service asks for a connection (its setup, a reconnect).

        If the I/O layer waited for a pooled dial in flight (:meth:`pending_dial`) before
        asking, pass how long as ``waited_ms``.

        Returns:
            The grant, and the actions to carry out (the spare's dial, closing leftovers).
        """
        lane = self._lanes.get(call_id)
        if lane is None or lane.ended:
            return Grant("dial", None, "call not in the pool"), []
        stats = lane.stats
        stats.acquires += 1
        open_slots = [s for s in lane.slots.values() if s.state is SlotState.OPEN]
        actions: list[Action] = []
        if open_slots:
            slot = max(open_slots, key=lambda s: s.opened_at or 0.0)
            slot.state = SlotState.HANDED
            self._forget(slot)
            waited = waited_ms > 0.0
            stats.reused += 0 if waited else 1
            stats.waited += 1 if waited else 0
            kind = "waited" if waited else "reused"
            stats.acquire_log.append(AcquireRecord(now, kind, waited_ms, str(slot.role)))
            grant = Grant("reuse", slot.id, f"{slot.role} socket, open")
        else:
            stats.service_dials += 1
            stats.acquire_log.append(AcquireRecord(now, "dialled", 0.0, None))
            grant = Grant("dial", None, "no pooled socket open")
        # What is still held for this call: at most one spare survives.
        rest = [s for s in lane.slots.values() if s.state in _HELD]
        keep = None
        if lane.plan.spare and rest:
            keep = max(rest, key=lambda s: s.dial_started_at)
            keep.role = Role.SPARE
            keep.replaces = None
        for s in rest:
            if s is not keep:
                actions += self._close(s, "superseded")
        if lane.plan.spare and keep is None and not lane.expired:
            actions += self._dial(lane, Role.SPARE, now, why="the next reconnect")
        return grant, actions

    def hangup(self, call_id: str, now: float) -> tuple[CallStats | None, list[Action]]:
        """The call ended, or was never answered: close everything the pool holds for it.

        Returns:
            The call's stats (``None`` for an unknown call) and the closes to carry out.
        """
        lane = self._lanes.pop(call_id, None)
        if lane is None:
            return None, []
        lane.ended = True
        actions: list[Action] = []
        for s in list(lane.slots.values()):
            if s.state in _HELD:
                actions += self._close(s, "call ended")
        return lane.stats, actions

    def tick(self, now: float) -> list[Action]:
        """Run the timers due by ``now``: keepalives, probes, replacements, ring timeouts."""
        cfg = self.config
        actions: list[Action] = []
        for lane in list(self._lanes.values()):
            if (
                not lane.expired
                and lane.stats.acquires == 0
                and now >= lane.rung_at + cfg.max_ring_s
            ):
                lane.expired = True
                actions.append(
                    Note(
                        lane.call_id,
                        f"not answered or closed within {cfg.max_ring_s:.0f} s: "
                        "closing its warm socket",
                        "warning",
                        "ring_timeout",
                    )
                )
                for s in list(lane.slots.values()):
                    if s.state in _HELD:
                        actions += self._close(s, "ring timeout")
                continue
            for slot in list(lane.slots.values()):
                if slot.state is not SlotState.OPEN:
                    continue
                if slot.probing_since is not None:
                    if now >= slot.probing_since + cfg.probe_timeout_s:
                        actions += self._close(slot, "no answer to a ping")
                        actions += self._replace_dead(lane, slot, now, "no answer to a ping")
                        continue
                elif slot.probe_at is not None and now >= slot.probe_at:
                    slot.probing_since = now
                    slot.probe_at = None
                    actions.append(Probe(slot.id))
                if slot.keepalive_at is not None and now >= slot.keepalive_at:
                    assert lane.plan.keepalive_s
                    slot.keepalive_at = now + lane.plan.keepalive_s
                    lane.stats.keepalives += 1
                    actions.append(SendKeepalive(slot.id))
                if slot.replace_at is not None and now >= slot.replace_at:
                    slot.replace_at = None
                    lane.stats.replaced += 1
                    actions += self._dial(
                        lane, slot.role, now, why="ahead of the provider's idle close", of=slot
                    )
        return actions

    # -- internals ---------------------------------------------------------------------------

    def _dial(
        self, lane: _Lane, role: Role, now: float, *, why: str, of: Slot | None = None
    ) -> list[Action]:
        # A replacement ahead of an idle close swaps one held socket for another: it may
        # exceed the bound for the length of a dial.
        if of is None and self.held >= self.config.max_held:
            return [
                Note(
                    lane.call_id,
                    f"pool full ({self.config.max_held} sockets held): no {role} socket "
                    f"({why}); the service dials for itself",
                    "warning",
                    "pool_full",
                )
            ]
        slot = Slot(self._next_id, lane.call_id, role, SlotState.DIALING, now)
        slot.replaces = of.id if of is not None else None
        self._next_id += 1
        self._slots[slot.id] = slot
        lane.slots[slot.id] = slot
        lane.stats.pool_dials += 1
        return [Dial(slot.id, lane.call_id, role)]

    def _close(self, slot: Slot, reason: str) -> list[Action]:
        if slot.state not in _HELD:
            return []
        if slot.state is SlotState.DIALING:
            self._cancelled.add(slot.id)
        slot.state = SlotState.CLOSED
        self._forget(slot)
        return [Close(slot.id, reason)]

    def _replace_dead(
        self, lane: _Lane, dead: Slot, now: float, why: str, *, costs_budget: bool = True
    ) -> list[Action]:
        if lane.ended or lane.expired:
            return []
        # A replacement already on its way (ahead of an idle close) takes over.
        if any(s.state in _HELD for s in lane.slots.values()):
            return [Note(lane.call_id, f"{dead.role} socket {why}", "info", "held_died")]
        if costs_budget and lane.redials_left <= 0:
            return [
                Note(
                    lane.call_id,
                    f"{dead.role} socket {why}; no redials left: the service dials for itself",
                    "warning",
                    "redials_exhausted",
                )
            ]
        lane.redials_left -= 1 if costs_budget else 0
        lane.stats.replaced += 1
        note = Note(lane.call_id, f"{dead.role} socket {why}: replacing it", "info", "held_died")
        return [note, *self._dial(lane, dead.role, now, why="a replacement")]

    def _forget(self, slot: Slot) -> None:
        # Handed and closed slots are no longer the pool's: drop them from the index so a
        # long call does not accumulate them (the lane keeps its counters only).
        self._slots.pop(slot.id, None)
        lane = self._lanes.get(slot.call_id)
        if lane is not None:
            lane.slots.pop(slot.id, None)


_HELD = (SlotState.DIALING, SlotState.OPEN)
