"""``TTSWarmPool``: the warm-pool's I/O — sockets, tasks and the clock around the pure core.

Open the TTS connection while the phone rings, hand it to the Pipecat service when its setup
asks for one, keep a spare for services that reconnect on every interruption, close
everything when the call ends or is never answered::

    pool = TTSWarmPool()

    # telephony webhook: the call is ringing
    tts = CartesiaTTSService(api_key=..., settings=...)
    lease = pool.prewarm(tts, call_id=call_sid, is_retry=attempt > 1, sample_rate=8000)

    # answered: build and run the pipeline with the same ``tts`` as usual;
    # its setup adopts the open socket instead of dialling.

    # hung up, or never answered
    stats = await lease.close()

The service's sockets all go through a hook on its ``_websocket_connect``
(:func:`pipecat_fast._pipecat.install_connect_hook`): a pooled socket is handed over only if
it was dialled for exactly the URI and headers the service asks for and is still open;
otherwise the service dials as it always does (fail open). The decisions (which calls get a
warm socket, a spare) come from :class:`~pipecat_fast.ttspool.policy.TTSPrewarmPolicy`, the
lifecycle from :class:`~pipecat_fast.ttspool.core.PoolCore`.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loguru import logger

from pipecat_fast import _pipecat
from pipecat_fast._logging import RateLimitedLog
from pipecat_fast.ttspool.core import (
    AcquireRecord,
    CallStats,
    Close,
    Dial,
    LanePlan,
    Note,
    PoolConfig,
    PoolCore,
    Probe,
    Role,
    SendKeepalive,
)
from pipecat_fast.ttspool.policy import PoolTarget, TTSPrewarmPolicy
from pipecat_fast.warmup import Decision, DecisionLog

_TASK_PREFIX = "pf-ttspool"
_call_ids = itertools.count(1)


@dataclass
class _Held:
    """A socket the pool dialled (or is dialling) for a call."""

    spec: _pipecat.DialSpec
    role: Role
    dial: asyncio.Task | None = None
    done: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    connection: Any = None
    tasks: set[asyncio.Task] = field(default_factory=set)


class CallLease:
    """One call's place in the pool: its decisions, its counters, and how to end it.

    Attributes:
        call_id: The call's id in the pool.
        service: The Pipecat TTS service whose sockets go through the pool.
        decision: Whether a warm socket was opened while the call rang, and why.
        spare: Whether a spare socket is kept once the call holds one, and why.
        provider: The TTS provider, if recognised.
    """

    def __init__(
        self,
        pool: TTSWarmPool,
        call_id: str,
        service: Any,
        decision: Decision,
        spare: Decision,
        provider: str | None,
    ):
        self._pool = pool
        self.call_id = call_id
        self.service = service
        self.decision = decision
        self.spare = spare
        self.provider = provider
        self._final: CallStats | None = None
        self._on_acquire: list[Callable[[AcquireRecord], None]] = []
        self._handed: list[Any] = []  # handed-over sockets that close in the background
        self._hook: Any = None  # the connect hook installed on the service

    @property
    def stats(self) -> CallStats:
        """What the pool did for this call so far (final once closed)."""
        if self._final is not None:
            return self._final
        return self._pool._core.stats(self.call_id) or CallStats()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran."""
        return self._final is not None

    def on_acquire(self, callback: Callable[[AcquireRecord], None]) -> None:
        """Call ``callback(record)`` each time the service asks the pool for a connection."""
        self._on_acquire.append(callback)

    def report(self) -> dict[str, Any]:
        """JSON-ready accounting: the decisions and the counters (``CallStats.to_dict``)."""
        return {
            "provider": self.provider,
            "warm": self.decision.warm,
            "warm_reason": str(self.decision.reason),
            "spare": self.spare.warm,
            **self.stats.to_dict(),
        }

    async def close(self) -> CallStats:
        """The call ended or was never answered: close what the pool holds for it.

        Sockets already handed to the service are the service's (Pipecat closes them when
        the pipeline ends). Idempotent.
        """
        if self._final is None:
            self._final = await self._pool._hangup(self)
        return self._final

    async def __aenter__(self) -> CallLease:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class TTSWarmPool:
    """Warm TTS sockets for the calls of one process (see the module docstring).

    Args:
        config: Bounds and timers (:class:`~pipecat_fast.ttspool.core.PoolConfig`).
        policy: Which calls get a warm socket and a spare.
        dial_timeout_s: Give up on a pooled dial after this long (the service then dials).
        acquire_wait_s: How long the service's setup waits for a pooled dial still in flight
            before dialling itself (a dial begun while the phone rang is further along than
            a fresh one). ``None``: as long as a dial may take (``dial_timeout_s``).
        annotate: Report each time the service asks for a connection to the TTFA meter
            (``TTFAAnnotationFrame``, ``pool_*`` keys).
        clock: Monotonic clock (s); injectable for tests.
    """

    def __init__(
        self,
        *,
        config: PoolConfig | None = None,
        policy: TTSPrewarmPolicy | None = None,
        dial_timeout_s: float = 10.0,
        acquire_wait_s: float | None = None,
        annotate: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._core = PoolCore(config)
        self.annotate = annotate
        self.policy = policy or TTSPrewarmPolicy()
        self.dial_timeout_s = dial_timeout_s
        self.acquire_wait_s = dial_timeout_s if acquire_wait_s is None else acquire_wait_s
        self._clock = clock
        self._leases: dict[str, CallLease] = {}
        self._held: dict[int, _Held] = {}
        self._lane_spec: dict[str, _pipecat.DialSpec | None] = {}
        self._keepalive: dict[str, str | None] = {}
        self._tasks: set[asyncio.Task] = set()
        self._reactor: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None
        self._log = RateLimitedLog("TTSWarmPool")
        self.decisions = DecisionLog(first_n=5, every=100)
        self._closed = False

    # -- public ------------------------------------------------------------------------------

    @property
    def held(self) -> int:
        """Sockets the pool holds right now, across calls (dialling or open)."""
        return self._core.held

    @property
    def calls(self) -> list[str]:
        """Calls in the pool (not yet closed)."""
        return list(self._leases)

    def is_warm(self, call_id: str) -> bool:
        """Whether the pool holds an open socket for the call, ready to hand over."""
        return any(
            held.connection is not None and _pipecat.connection_is_open(held.connection)
            for _, held in self._lane_items(call_id)
        )

    def prewarm(
        self,
        service: Any,
        *,
        call_id: str | None = None,
        is_retry: bool = False,
        sample_rate: int | None = None,
        provider: str | None = None,
    ) -> CallLease:
        """Put a call's TTS service in the pool; dial its socket now if the policy says so.

        Call it when the call starts ringing (e.g. from the telephony webhook), before the
        pipeline runs. Returns at once; the dial runs in the background. Every later socket of
        the service (setup, reconnects) goes through the pool. Fails open: a service the pool
        cannot help gets a lease that does nothing, with the reason logged.

        Args:
            service: The Pipecat TTS service the call's pipeline will use.
            call_id: The call's id (unique among open calls); a fresh one by default.
            is_retry: The call is a retry of an earlier attempt (skipped: seed 000).
            sample_rate: The pipeline's ``audio_out_sample_rate``, for services whose URL
                carries it (the service's own ``sample_rate`` wins; Pipecat's default, 24 kHz,
                otherwise).
            provider: The TTS provider's registry name, when it cannot be recognised.

        Raises:
            RuntimeError: If the pool is closed, or no event loop is running.
            ValueError: If ``call_id`` is already in the pool, or ``provider`` is unknown.
        """
        if self._closed:
            raise RuntimeError("TTSWarmPool is closed")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "TTSWarmPool.prewarm must be called from the event loop that runs the pipelines"
            ) from None
        call_id = call_id or f"call-{next(_call_ids)}"
        if call_id in self._leases:
            raise ValueError(f"call {call_id!r} is already in the pool")
        ident = _pipecat.tts_identity(service)
        if provider is None:
            provider = _pipecat.tts_provider(service)
        spec = _pipecat.tts_dial_spec(service, sample_rate) if ident.websocket else None
        target = PoolTarget(
            provider=provider,
            websocket=ident.websocket,
            can_prewarm=spec is not None,
            reconnects_on_interruption=ident.reconnects_on_interruption,
            is_retry=is_retry,
            http_client=ident.http_client,
        )
        decision = self.policy.decide(target, self._clock())
        spare = self.policy.decide_spare(target)
        if is_retry and self.policy.skip_retries:
            spare = Decision(False, decision.reason, decision.detail)
        self.decisions(decision, label=f"TTS pool {call_id}")
        lease = CallLease(self, call_id, service, decision, spare, provider)
        self._leases[call_id] = lease
        self._lane_spec[call_id] = spec
        self._keepalive[call_id] = self.policy.keepalive_message(target)
        facts = self.policy.facts(target)
        plan = LanePlan(
            prewarm=decision.warm,
            spare=spare.warm,
            keepalive_s=self.policy.keepalive_s(target),
            idle_close_s=facts.idle_close_s if facts else None,
        )
        actions = self._core.open_call(call_id, plan, self._clock())
        if ident.websocket:
            lease._hook = _pipecat.install_connect_hook(service, self._hook(lease))
        self._run(actions)
        return lease

    async def aclose(self) -> None:
        """Close every call's held sockets and stop the pool's tasks."""
        self._closed = True
        for lease in list(self._leases.values()):
            await lease.close()
        await self._stop_timers()
        tasks = [*self._tasks]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._log.flush()

    async def __aenter__(self) -> TTSWarmPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the service's side --------------------------------------------------------------------

    def _hook(self, lease: CallLease):
        async def connect(uri: str, kwargs: dict[str, Any], dial):
            try:
                connection = await self._acquire(lease, uri, kwargs)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # fail open: a pool bug never costs the call its socket
                self._log.error(f"{lease.call_id}: pool failed ({e!r}); dialling", key="acquire")
                connection = None
            if connection is not None:
                return connection
            return await dial(uri, **kwargs)

        return connect

    async def _acquire(self, lease: CallLease, uri: str, kwargs: dict[str, Any]) -> Any:
        """A pooled connection for the service's dial of ``uri``, or None (it dials)."""
        call_id = lease.call_id
        if lease.closed or call_id not in self._leases:
            return None
        started = self._clock()
        self._lane_spec[call_id] = _pipecat.DialSpec(uri, dict(kwargs))  # the spares' spec
        core = self._core
        # A held socket dialled for something else, or closed meanwhile, is no use.
        for slot_id, held in list(self._lane_items(call_id)):
            if not held.spec.matches(uri, kwargs):
                self._run(core.discard(slot_id, self._clock(), "dialled for another URI/headers"))
            elif held.connection is not None and not _pipecat.connection_is_open(held.connection):
                self._run(core.closed(slot_id, self._clock(), "found closed at hand-over"))
        waited_ms = 0.0
        pending = core.pending_dial(call_id)
        if pending is not None and pending in self._held:
            done = asyncio.shield(self._held[pending].done)
            try:
                await asyncio.wait_for(done, self.acquire_wait_s)
            except TimeoutError:
                pass
            waited_ms = (self._clock() - started) * 1000.0
        grant, actions = core.acquire(call_id, self._clock(), waited_ms=waited_ms)
        connection = None
        if grant.kind == "reuse" and grant.slot_id is not None:
            held = self._held.pop(grant.slot_id, None)
            if held is not None:
                self._stop_tasks(held)
                connection = held.connection
        self._run(actions)
        stats = core.stats(call_id)
        if stats is not None and stats.acquire_log:
            record = stats.acquire_log[-1]
            await self._annotate(lease, record, first=stats.acquires == 1)
            for callback in lease._on_acquire:
                try:
                    callback(record)
                except Exception as e:  # a metrics callback never breaks a connect
                    self._log.warning(f"on_acquire callback failed: {e}", key="callback")
        if connection is not None and _pipecat.connection_is_open(connection):
            logger.debug(f"TTSWarmPool {call_id}: handing over a {grant.reason}")
            if lease.spare.warm and _pipecat.close_in_background(connection):
                # It will be closed to dial the next one: let that close run on its own.
                lease._handed.append(connection)
            return connection
        return None

    async def _annotate(self, lease: CallLease, record: AcquireRecord, *, first: bool) -> None:
        """Report the acquire to the TTFA meter (``pool_*`` keys, docs/ttfa.md).

        The first connection (at setup, before any turn) goes to the session; a later one (a
        reconnect: barge-in, idle close) to the turn it delays, and to the session's totals.
        """
        if not self.annotate:
            return
        from pipecat.processors.frame_processor import FrameDirection

        from pipecat_fast.frames import TTFAAnnotationFrame

        dialled = 1 if record.kind == "dialled" else 0
        frames = [
            TTFAAnnotationFrame(
                fields={"pool_first_reused": not dialled} if first else {},
                add={
                    "pool_acquires": 1,
                    "pool_handshakes": dialled,
                    "pool_acquire_ms": round(record.wait_ms, 1),
                },
                target="session",
            )
        ]
        if not first:
            frames.append(
                TTFAAnnotationFrame(
                    fields={"pool_reused": not dialled},
                    add={"pool_reconnects": 1, "pool_handshakes": dialled},
                )
            )
        try:
            for frame in frames:
                await lease.service.push_frame(frame, FrameDirection.DOWNSTREAM)
        except Exception as e:  # a service outside a pipeline: nothing to report to
            logger.debug(f"TTSWarmPool {lease.call_id}: no TTFA annotation ({e})")

    # -- lifecycle ---------------------------------------------------------------------------

    async def _hangup(self, lease: CallLease) -> CallStats:
        call_id = lease.call_id
        stats, actions = self._core.hangup(call_id, self._clock())
        self._run(actions)
        self._leases.pop(call_id, None)
        self._lane_spec.pop(call_id, None)
        self._keepalive.pop(call_id, None)
        if lease._hook is not None:
            _pipecat.remove_connect_hook(lease.service, lease._hook)
            lease._hook = None
        # Let this call's closes finish, so a closed lease leaves no socket behind.
        mine = [t for t in self._tasks if t.get_name().endswith(f":{call_id}")]
        if mine:
            await asyncio.gather(*mine, return_exceptions=True)
        for connection in lease._handed:  # closes the service began, finishing on their own
            await _pipecat.wait_background_close(connection)
        lease._handed.clear()
        if not self._core.calls():
            await self._stop_timers()
        return stats or CallStats()

    async def _stop_timers(self) -> None:
        reactor, self._reactor = self._reactor, None
        if reactor is not None and not reactor.done():
            reactor.cancel()
            await asyncio.gather(reactor, return_exceptions=True)

    def _lane_items(self, call_id: str):
        for slot_id, held in self._held.items():
            slot = self._core.slot(slot_id)
            if slot is not None and slot.call_id == call_id:
                yield slot_id, held

    def _run(self, actions: list) -> None:
        for action in actions:
            if isinstance(action, Dial):
                self._start_dial(action)
            elif isinstance(action, Close):
                self._close(action)
            elif isinstance(action, SendKeepalive):
                self._keepalive_send(action)
            elif isinstance(action, Probe):
                self._probe(action)
            elif isinstance(action, Note):
                log = self._log.warning if action.level == "warning" else self._log.info
                log(f"{action.call_id}: {action.text}", key=action.key or action.text)
        self._ensure_reactor()

    def _spawn(self, coro, call_id: str, what: str, held: _Held | None = None) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro, name=f"{_TASK_PREFIX}-{what}:{call_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if held is not None:
            held.tasks.add(task)
            task.add_done_callback(held.tasks.discard)
        return task

    def _start_dial(self, action: Dial) -> None:
        lease = self._leases.get(action.call_id)
        spec = self._lane_spec.get(action.call_id)
        if lease is None or spec is None:
            self._run(self._core.dial_failed(action.slot_id, self._clock(), "nothing to dial yet"))
            return
        held = _Held(spec=spec, role=action.role)
        self._held[action.slot_id] = held
        held.dial = self._spawn(
            self._dial(action.slot_id, lease, spec, held), action.call_id, "dial"
        )

    async def _dial(self, slot_id: int, lease: CallLease, spec: _pipecat.DialSpec, held: _Held):
        try:
            dialling = _pipecat.tts_dial(lease.service, spec, background_close=lease.spare.warm)
            connection = await asyncio.wait_for(dialling, self.dial_timeout_s)
        except asyncio.CancelledError:
            if not held.done.done():
                held.done.set_result(False)
            raise
        except Exception as e:
            self._held.pop(slot_id, None)
            if not held.done.done():
                held.done.set_result(False)
            self._run(self._core.dial_failed(slot_id, self._clock(), _describe(e)))
            return
        held.connection = connection
        if self._core.slot(slot_id) is None:  # closed while dialling
            self._held.pop(slot_id, None)
            held.done.set_result(False)
            await _quiet_close(connection)
            return
        call_id = self._core.slot(slot_id).call_id
        self._spawn(self._watch(slot_id, connection), call_id, "watch", held)
        actions = self._core.dial_succeeded(slot_id, self._clock())
        held.done.set_result(True)
        self._run(actions)

    async def _watch(self, slot_id: int, connection: Any) -> None:
        await connection.wait_closed()
        if slot_id in self._held:
            self._held.pop(slot_id, None)
            code = getattr(connection, "close_code", None)
            self._run(self._core.closed(slot_id, self._clock(), f"close code {code}"))

    def _close(self, action: Close) -> None:
        held = self._held.pop(action.slot_id, None)
        if held is None:
            return
        call_id = self._call_of(held)
        if held.dial is not None and not held.dial.done():
            held.dial.cancel()
        self._stop_tasks(held)
        if held.connection is not None:
            self._spawn(_quiet_close(held.connection), call_id, "close")

    def _call_of(self, held: _Held) -> str:
        if held.dial is not None:
            return held.dial.get_name().rsplit(":", 1)[-1]
        return "?"

    def _stop_tasks(self, held: _Held) -> None:
        for task in list(held.tasks):
            task.cancel()

    def _keepalive_send(self, action: SendKeepalive) -> None:
        held = self._held.get(action.slot_id)
        slot = self._core.slot(action.slot_id)
        if held is None or held.connection is None or slot is None:
            return
        message = self._keepalive.get(slot.call_id)
        if message:
            self._spawn(_quiet_send(held.connection, message), slot.call_id, "keepalive", held)

    def _probe(self, action: Probe) -> None:
        held = self._held.get(action.slot_id)
        slot = self._core.slot(action.slot_id)
        if held is None or held.connection is None or slot is None:
            return

        async def probe():
            try:
                pong = await held.connection.ping()
                await pong
            except Exception:
                return  # a closed socket is reported by its watcher; a silent one by the core
            self._run(self._core.alive(action.slot_id, self._clock()))

        self._spawn(probe(), slot.call_id, "probe", held)

    # -- timers ------------------------------------------------------------------------------

    def _ensure_reactor(self) -> None:
        if self._wake is None:
            self._wake = asyncio.Event()
        self._wake.set()
        if (self._reactor is None or self._reactor.done()) and self._core.calls():
            self._reactor = asyncio.get_running_loop().create_task(
                self._timers(), name=f"{_TASK_PREFIX}-timers"
            )

    async def _timers(self) -> None:
        assert self._wake is not None
        while self._core.calls():
            deadline = self._core.next_deadline()
            timeout = None if deadline is None else max(0.0, deadline - self._clock())
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                pass
            try:
                self._run(self._core.tick(self._clock()))
            except Exception as e:  # a timer bug must not stop every other call's timers
                self._log.error(f"pool timers failed ({e!r})", key="timers")


async def _quiet_close(connection: Any) -> None:
    try:
        await connection.close()
    except Exception as e:  # closing a dead socket: nothing left to do
        logger.debug(f"TTSWarmPool: closing a pooled socket: {e}")


async def _quiet_send(connection: Any, message: str) -> None:
    try:
        await connection.send(message)
    except Exception as e:  # the watcher reports the close
        logger.debug(f"TTSWarmPool: keepalive not sent: {e}")


def _describe(error: Exception) -> str:
    status = getattr(getattr(error, "response", None), "status_code", None)
    text = str(error) or type(error).__name__
    return f"HTTP {status}" if status else text[:200]
