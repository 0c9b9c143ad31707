"""The engine's load, read once per engine per process and shared by every session.

:class:`EngineLoad` is the I/O around :func:`pipecat_fast.load.core.decide`: one per engine
(``EngineLoad.shared(url)``), holding

- a **load probe** (optional) that polls the engine's load endpoint while any session uses it,
  every ``interval_s``, with one connection: llama.cpp's ``/metrics``
  (``llamacpp:requests_processing``, ``llamacpp:requests_deferred``; slots from ``/props``
  ``total_slots``) or ``/slots`` (``is_processing`` per slot), vLLM's ``/metrics``
  (``vllm:num_requests_running``, ``vllm:num_requests_waiting``), SGLang's ``/metrics``
  (``sglang:num_running_reqs``, ``sglang:num_queue_reqs``, ``sglang:max_running_requests``).
  Sessions never wait for it: they read its last answer.
- a :class:`~pipecat_fast.load.core.QueueEstimator` fed with the sessions' own requests — the
  only signal for an engine without a load endpoint (hosted APIs);
- the speculative requests this process has in flight to the engine, so a burst of sessions
  deciding between two readings counts the requests the others just sent, and the prompt
  tokens its prefills in flight still have to compute (from the compute rate measured on
  finished ones);
- the prefills it may cancel: on each reading the probe asks
  :func:`~pipecat_fast.load.core.contended` about every prefill in flight and calls the
  session's ``on_cancel`` when another caller's request now shares the engine with it; at the
  session's real request :meth:`EngineLoad.dispatched` asks
  :func:`~pipecat_fast.load.core.cancel_on_dispatch`. The session does the cancelling.

Metric names: llama.cpp ``tools/server/README.md`` ("Available metrics"); vLLM "Production
Metrics" (``docs/usage/metrics.md``); SGLang "Production Metrics"
(``docs/references/production_metrics.md``) and ``python/sglang/srt/metrics/collector.py``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from loguru import logger

from pipecat_fast._logging import RateLimitedLog
from pipecat_fast.load.core import (
    ALLOWING,
    KEEP,
    CancelVerdict,
    ComputeRate,
    InFlightPrefill,
    Kind,
    LoadReading,
    ProbeState,
    QueueEstimator,
    Verdict,
    YieldConfig,
    cancel_on_dispatch,
    contended,
    decide,
    requests_on_engine,
    reuses_unfinished,
)

ENDPOINTS = ("auto", "metrics", "slots")

# Gauges per engine dialect: (running, waiting, capacity or None).
METRIC_NAMES: dict[str, tuple[str, str, str | None]] = {
    "llama.cpp": ("llamacpp:requests_processing", "llamacpp:requests_deferred", None),
    "vllm": ("vllm:num_requests_running", "vllm:num_requests_waiting", None),
    "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:max_running_requests"),
}


@dataclass
class _Flight:
    """One speculative request in flight (the probe's bookkeeping)."""

    kind: Kind
    prefill: InFlightPrefill
    on_cancel: Callable[[CancelVerdict], None] | None = None
    config: YieldConfig | None = None


class UnsupportedEndpoint(Exception):
    """The engine answers, but not with load figures this probe can read."""


def parse_metrics(text: str) -> tuple[str, int | None, int | None, int | None]:
    """The load gauges of a Prometheus text page.

    Returns:
        ``(dialect, running, waiting, capacity)``; a gauge the page lacks is ``None``.
        Samples of one gauge with several label sets (ranks, models) are summed.

    Raises:
        UnsupportedEndpoint: If the page is not Prometheus text or has none of the gauges.
    """
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                values[sample.name] = values.get(sample.name, 0.0) + float(sample.value)
    except Exception as e:  # the parser raises ValueError (and others) on bad text
        raise UnsupportedEndpoint(f"not Prometheus text ({type(e).__name__}: {e})") from None
    for dialect, (running, waiting, capacity) in METRIC_NAMES.items():
        if running in values or waiting in values:

            def gauge(name: str | None) -> int | None:
                return int(values[name]) if name is not None and name in values else None

            return dialect, gauge(running), gauge(waiting), gauge(capacity)
    raise UnsupportedEndpoint("no request gauges of llama.cpp, vLLM or SGLang on the page")


def parse_slots(data: Any) -> tuple[int, int]:
    """llama.cpp's ``/slots`` JSON: ``(processing, slots)``.

    Raises:
        UnsupportedEndpoint: If it is not a list of slot objects.
    """
    if not isinstance(data, list) or not all(isinstance(s, dict) for s in data):
        raise UnsupportedEndpoint("/slots did not return a list of slots")
    return sum(1 for s in data if s.get("is_processing")), len(data)


def root_url(url: str) -> str:
    """``http://host:port`` of an engine given its root or its OpenAI base URL (``.../v1``)."""
    url = url.rstrip("/")
    return url.removesuffix("/v1")


class EngineLoad:
    """One engine's load as this process sees it; share one per engine (:meth:`shared`).

    Args:
        url: The engine's root URL or OpenAI base URL; ``None``: no probe, only the queueing
            measured on the sessions' own requests.
        endpoint: ``"auto"`` (``/metrics``, else llama.cpp's ``/slots``), ``"metrics"`` or
            ``"slots"``.
        interval_s: Pause between probe requests (s).
        timeout_s: A probe request unanswered after this counts as failed (s).
        capacity: The engine's slots when it does not report them (vLLM: ``max_num_seqs``).
        queue: The measured-queueing estimator; a new one by default.
        clock: Monotonic clock (s).
        name: For log lines.

    Raises:
        ValueError: For an unknown ``endpoint`` or a non-positive interval or timeout.
    """

    _SHARED: dict[tuple[Any, ...], EngineLoad] = {}

    def __init__(
        self,
        url: str | None = None,
        *,
        endpoint: str = "auto",
        interval_s: float = 0.25,
        timeout_s: float = 2.0,
        capacity: int | None = None,
        queue: QueueEstimator | None = None,
        clock: Callable[[], float] = time.monotonic,
        name: str | None = None,
    ):
        if endpoint not in ENDPOINTS:
            raise ValueError(f"endpoint must be one of {', '.join(ENDPOINTS)}, got {endpoint!r}")
        if not interval_s > 0 or not timeout_s > 0:
            raise ValueError("interval_s and timeout_s must be > 0")
        self.url = root_url(url) if url else None
        self.endpoint = endpoint
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.capacity = capacity
        self.queue = queue if queue is not None else QueueEstimator()
        self.clock = clock
        self.name = name or f"EngineLoad({self.url or 'measured'})"
        self.reading: LoadReading | None = None
        self.status = "idle" if self.url else "measured"
        """``idle`` (not polling), ``polling``, ``failing``, ``unsupported`` or ``measured``."""
        self.verdicts: Counter[tuple[str, str]] = Counter()
        """Verdicts given, by ``(kind, reason)``."""
        self.cancels: Counter[str] = Counter()
        """Prefills this process was told to cancel, by reason."""
        self.probes = 0
        self.probe_failures = 0
        self.rate = ComputeRate()
        """The engine's prompt compute rate measured on finished requests."""
        self._users = 0
        self._task: asyncio.Task | None = None
        self._asked_at: float | None = None
        self._failing = False
        self._in_flight: dict[int, _Flight] = {}
        self._ids = itertools.count()
        self._log = RateLimitedLog(self.name)
        self._source = ""

    # -- sharing ----------------------------------------------------------------------------

    @classmethod
    def shared(cls, url: str | None, **kwargs: Any) -> EngineLoad:
        """The process's one :class:`EngineLoad` for ``url`` (created on first use).

        ``url=None`` with a ``key=...`` keyword gives a probe-less one per key (measured
        queueing only), e.g. per provider and model.
        """
        key = kwargs.pop("key", None)
        ident = (root_url(url) if url else None, key, kwargs.get("endpoint", "auto"))
        found = cls._SHARED.get(ident)
        if found is None:
            found = cls._SHARED[ident] = cls(url, **kwargs)
        return found

    @property
    def users(self) -> int:
        """Sessions holding the probe now."""
        return self._users

    @property
    def polling(self) -> bool:
        """Whether the probe task runs."""
        return self._task is not None and not self._task.done()

    async def acquire(self) -> None:
        """A session starts using the engine: the probe polls while anyone holds it."""
        self._users += 1
        if self.url is None or self.status == "unsupported":
            return
        loop = asyncio.get_running_loop()
        if self._task is not None and (self._task.done() or self._task.get_loop() is not loop):
            self._task = None  # a task of a finished run (another event loop)
        if self._task is None:
            self._task = loop.create_task(self._poll(), name=f"{self.name}-probe")

    async def release(self) -> None:
        """A session is done with the engine; the last one stops the probe (and its socket)."""
        self._users = max(0, self._users - 1)
        if self._users == 0:
            task, self._task = self._task, None
            if task is not None and not task.done():
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                except Exception as e:  # the probe's own failures are logged where they happen
                    logger.debug(f"{self.name}: probe ended with {e!r}")
            self._asked_at = None
            if self.status in ("polling", "failing"):
                self.status = "idle"
            self._log.flush()

    # -- what sessions ask ------------------------------------------------------------------

    def state(self, now: float | None = None) -> ProbeState | None:
        """What the probe can say now (``None`` without a working probe)."""
        if self.url is None or self.status in ("unsupported", "idle"):
            return None
        now = self.clock() if now is None else now
        reading = self.reading
        since = reading.at_s if reading is not None else float("-inf")
        flights = self._in_flight.values()
        return ProbeState(
            reading=reading,
            failing=self._failing,
            waiting_since_s=self._asked_at,
            sent_since_reading=sum(1 for f in flights if f.prefill.sent_at_s > since),
            prefill_tokens_in_flight=self.prefill_tokens_in_flight(now),
        )

    def prefill_tokens_in_flight(self, now: float | None = None) -> int:
        """Prompt tokens this process's speculative prefills in flight still have to compute."""
        now = self.clock() if now is None else now
        rate = self.rate.tokens_per_s()
        total = 0
        for flight in self._in_flight.values():
            if flight.kind is Kind.PREFILL and not flight.prefill.dispatched:
                left = replace(flight.prefill, tokens_per_s=rate).remaining(now)
                total += left or 0
        return total

    def requests_now(self, config: YieldConfig | None = None) -> int | None:
        """Requests on the engine besides one sent now (``None``: unknown, e.g. no probe).

        :func:`~pipecat_fast.load.core.requests_on_engine` on the probe's state: what a
        request's timing is tagged with, so the provider's speed is learnt from idle ones.
        """
        now = self.clock()
        return requests_on_engine(self.state(now), now, config)

    def others_now(
        self, sent_at_s: float, *, speculative: bool, config: YieldConfig | None = None
    ) -> int | None:
        """Other requests on the engine now, besides one of ours sent at ``sent_at_s``.

        For the idle tag of a request's speed sample as it ends (``PrefillPlanner.finished``,
        ``real_request``): ours is counted by the reading once it was taken after the request
        left, and by the speculative requests sent since otherwise (``speculative``: a prefill
        or draft still registered with :meth:`sent`). ``None`` when unknown.
        """
        now = self.clock()
        state = self.state(now)
        total = requests_on_engine(state, now, config)
        if state is None or state.reading is None or total is None:
            return None
        mine = 1 if speculative or state.reading.at_s >= sent_at_s else 0
        return max(0, total - mine)

    def queue_now(self) -> float | None:
        """The queueing measured on the sessions' own recent requests (s), or ``None``."""
        return self.queue.queue_s(self.clock())

    def verdict(
        self,
        kind: Kind | str,
        config: YieldConfig | None = None,
        *,
        work_tokens: int | None = None,
        idle_s: float | None = None,
        time_left_s: float | None = None,
    ) -> Verdict:
        """May a speculative request of ``kind`` go now (:func:`~pipecat_fast.load.decide`).

        Args:
            kind: ``"prefill"`` or ``"draft"``.
            config: The thresholds.
            work_tokens: Prompt tokens the request would have the engine compute, if known.
            idle_s: A prefill's time alone on the engine (s), if known.
            time_left_s: Until the session's real request is likely to leave (s), if known.
        """
        now = self.clock()
        verdict = decide(
            kind,
            self.state(now),
            self.queue.queue_s(now),
            now,
            config,
            work_tokens=work_tokens,
            idle_s=idle_s,
            time_left_s=time_left_s,
        )
        self.verdicts[(str(Kind(kind)), str(verdict.reason))] += 1
        if verdict.reason not in ALLOWING:
            self._log.info(
                f"{Kind(kind)} held back ({verdict.reason}: {verdict.detail})",
                key=f"deny-{verdict.reason}",
            )
        return verdict

    def sent(
        self,
        kind: Kind | str = Kind.PREFILL,
        *,
        work_tokens: int | None = None,
        on_cancel: Callable[[CancelVerdict], None] | None = None,
        config: YieldConfig | None = None,
    ) -> int:
        """A speculative request just left: returns its handle for :meth:`done`.

        Args:
            kind: A prefill or a draft (a draft is counted as load, never cancelled here).
            work_tokens: Prompt tokens a prefill asks the engine to compute (estimated).
            on_cancel: For a prefill: called (once) from the probe when
                :func:`~pipecat_fast.load.core.contended` says to cancel it; it must cancel
                the request (and call :meth:`done`).
            config: The thresholds ``on_cancel`` is judged by (the session's).
        """
        handle = next(self._ids)
        kind = Kind(kind)
        now = self.clock()
        self._in_flight[handle] = _Flight(
            kind,
            InFlightPrefill(now, work_tokens, others_at_send=self._others_now(now, config)),
            on_cancel if kind is Kind.PREFILL else None,
            config,
        )
        return handle

    def _others_now(self, now: float, config: YieldConfig | None) -> int:
        """Requests on the engine now besides this process's speculative prefills (0 unknown)."""
        state = self.state(now)
        total = requests_on_engine(state, now, config)
        if state is None or total is None or state.reading is None:
            return 0
        ours = sum(1 for f in self._in_flight.values() if f.kind is Kind.PREFILL)
        return max(0, total - ours)

    def done(self, handle: int) -> None:
        """The speculative request ``handle`` ended (answered, failed or cancelled)."""
        self._in_flight.pop(handle, None)

    def dispatched(
        self, handle: int | None, measured_reuse: bool | None, provider_reuse: bool | None
    ) -> CancelVerdict:
        """The session's real request left while its prefill ``handle`` may be in flight.

        Returns :func:`~pipecat_fast.load.core.cancel_on_dispatch`'s verdict (the session
        cancels); the prefill is no longer judged by :func:`contended` (it serves the real
        request, or is cancelled).

        Args:
            handle: The prefill's handle, ``None`` when none is in flight.
            measured_reuse: ``ProviderSpeed.reuses_unfinished`` (what this process saw).
            provider_reuse: The provider registry's ``reuses_unfinished_prefill``.
        """
        flight = self._in_flight.get(handle) if handle is not None else None
        if flight is None or flight.kind is not Kind.PREFILL:
            return KEEP
        flight.prefill = replace(flight.prefill, dispatched=True)
        flight.on_cancel = None
        reuses = reuses_unfinished(measured_reuse, provider_reuse, self._source)
        verdict = cancel_on_dispatch(flight.prefill, reuses, flight.config)
        if verdict:
            self._cancelled(verdict)
        return verdict

    def _cancelled(self, verdict: CancelVerdict) -> None:
        reason = str(verdict.reason)
        self.cancels[reason] += 1
        self._log.info(f"prefill cancelled ({reason}: {verdict.detail})", key=f"cancel-{reason}")

    def _check_contention(self, reading: LoadReading) -> None:
        """On a new reading: cancel the prefills another caller's request now contends with."""
        now = self.clock()
        rate = self.rate.tokens_per_s()
        prefills = sum(
            1
            for f in self._in_flight.values()
            if f.kind is Kind.PREFILL and f.prefill.sent_at_s <= reading.at_s
        )
        for flight in list(self._in_flight.values()):
            if flight.on_cancel is None:
                continue
            prefill = replace(flight.prefill, tokens_per_s=rate)
            verdict = contended(prefill, reading, prefills, now, flight.config)
            if verdict:
                callback, flight.on_cancel = flight.on_cancel, None
                self._cancelled(verdict)
                try:
                    callback(verdict)
                except Exception as e:  # a session's callback must not stop the probe
                    logger.warning(f"{self.name}: cancelling a prefill failed ({e!r})")

    @property
    def speculative_in_flight(self) -> int:
        """Speculative requests this process has in flight to the engine."""
        return len(self._in_flight)

    def measured(self, uncached_tokens: int, seconds: float) -> None:
        """One of the sessions' own requests: first token after ``seconds``."""
        self.queue.add(uncached_tokens, seconds, self.clock())
        self.rate.add(uncached_tokens, seconds)

    @property
    def engine_source(self) -> str:
        """The probe's dialect (``"llama.cpp"``, ``"vllm"``...), ``""`` before a reading."""
        return self._source

    # -- the probe --------------------------------------------------------------------------

    async def _poll(self) -> None:
        import aiohttp

        self.status = "polling"
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        connector = aiohttp.TCPConnector(limit=1)
        try:
            async with aiohttp.ClientSession(timeout=timeout, connector=connector) as http:
                capacity = self.capacity
                failures = 0
                while True:
                    asked = self.clock()
                    self._asked_at = asked
                    try:
                        reading = await self._read(http, asked, capacity)
                    except UnsupportedEndpoint as e:
                        self.status = "unsupported"
                        self._asked_at = None
                        logger.info(
                            f"{self.name}: {e}; speculation yields to the queueing measured on "
                            "the sessions' own requests instead"
                        )
                        return
                    except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as e:
                        self.probes += 1
                        self.probe_failures += 1
                        failures += 1
                        if not self._failing:  # one line per outage, not one per probe
                            logger.warning(
                                f"{self.name}: load probe failed ({type(e).__name__}: {e}); "
                                "speculation stops until the engine answers"
                            )
                        self._failing = True
                        self.status = "failing"
                    else:
                        self.probes += 1
                        if self._failing:
                            logger.info(
                                f"{self.name}: the engine answers the load probe again "
                                f"(after {failures} failed probes)"
                            )
                        failures = 0
                        self._failing = False
                        self.status = "polling"
                        self.reading = reading
                        capacity = reading.capacity
                        self._check_contention(reading)
                    self._asked_at = None
                    await asyncio.sleep(self.interval_s)
        finally:
            self._asked_at = None

    async def _read(self, http: Any, asked: float, capacity: int | None) -> LoadReading:
        if self.endpoint in ("auto", "metrics"):
            async with http.get(self.url + "/metrics") as response:
                if response.status in (404, 501) or (
                    response.status == 200 and "json" in response.content_type
                ):
                    if self.endpoint == "metrics":
                        raise UnsupportedEndpoint(f"{self.url}/metrics: HTTP {response.status}")
                    self.endpoint = "slots"
                    return await self._read(http, asked, capacity)
                response.raise_for_status()
                text = await response.text()
            try:
                dialect, running, waiting, reported = parse_metrics(text)
            except UnsupportedEndpoint:
                if self.endpoint == "auto":
                    self.endpoint = "slots"
                    return await self._read(http, asked, capacity)
                raise
            if dialect == "llama.cpp" and capacity is None:
                capacity = await self._llama_slots(http)
            self._source = dialect
            return LoadReading(asked, running, waiting, reported or capacity, dialect)
        async with http.get(self.url + "/slots") as response:
            if response.status in (404, 501):
                raise UnsupportedEndpoint(
                    f"{self.url} serves neither /metrics nor /slots (HTTP {response.status})"
                )
            response.raise_for_status()
            data = await response.json(content_type=None)
        running, slots = parse_slots(data)
        self._source = "llama.cpp /slots"
        return LoadReading(asked, running, None, slots or capacity, "llama.cpp /slots")

    async def _llama_slots(self, http: Any) -> int | None:
        try:
            async with http.get(self.url + "/props") as response:
                if response.status != 200:
                    return None
                props = await response.json(content_type=None)
        except Exception as e:  # informational: without it only the queue rule applies
            logger.debug(f"{self.name}: no /props ({e!r})")
            return None
        slots = props.get("total_slots") if isinstance(props, dict) else None
        return slots if isinstance(slots, int) and slots > 0 else None

    def summary(self) -> dict[str, Any]:
        """Counts for reports: verdicts by kind and reason, probe requests and failures."""
        return {
            "url": self.url,
            "status": self.status,
            "source": self._source,
            "probes": self.probes,
            "probe_failures": self.probe_failures,
            "verdicts": {f"{k}:{r}": n for (k, r), n in sorted(self.verdicts.items())},
            "prefills_cancelled": dict(sorted(self.cancels.items())),
        }
