import asyncio
import os

import pytest
from aiohttp import web

from pipecat_fast.load import (
    CancelReason,
    EngineLoad,
    Kind,
    Reason,
    YieldConfig,
    parse_metrics,
    parse_slots,
)
from pipecat_fast.load.probe import UnsupportedEndpoint, root_url
from pipecat_fast.testing._loopback import HttpEmulator

LLAMA = """# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing {running}
# HELP llamacpp:requests_deferred Number of requests deferred
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred {waiting}
"""

VLLM = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="a"}} {running}
vllm:num_requests_running{{model_name="b"}} 1
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{model_name="a"}} {waiting}
"""

SGLANG = """# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{model_name="m",tp_rank="0"}} {running}
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{{model_name="m",tp_rank="0"}} {waiting}
# TYPE sglang:max_running_requests gauge
sglang:max_running_requests{{model_name="m"}} 16
"""


def test_parse_each_dialect():
    assert parse_metrics(LLAMA.format(running=2, waiting=3)) == ("llama.cpp", 2, 3, None)
    # label sets of one gauge are summed (several models or ranks)
    assert parse_metrics(VLLM.format(running=2, waiting=0)) == ("vllm", 3, 0, None)
    assert parse_metrics(SGLANG.format(running=5, waiting=1)) == ("sglang", 5, 1, 16)


@pytest.mark.parametrize("text", ["", "# nothing here\nother_metric 1\n", "{not prometheus"])
def test_a_page_without_request_gauges_is_unsupported(text):
    with pytest.raises(UnsupportedEndpoint):
        parse_metrics(text)


def test_parse_slots():
    slots = [{"id": 0, "is_processing": True}, {"id": 1, "is_processing": False}]
    assert parse_slots(slots) == (1, 2)
    with pytest.raises(UnsupportedEndpoint):
        parse_slots({"error": "no"})


def test_shared_is_one_per_engine_whatever_the_url_form():
    a = EngineLoad.shared("http://127.0.0.1:9/v1")
    assert EngineLoad.shared("http://127.0.0.1:9/") is a
    assert root_url("http://x:1/v1/") == "http://x:1"
    measured = EngineLoad.shared(None, key=("provider", "model"))
    assert measured is EngineLoad.shared(None, key=("provider", "model"))
    assert measured is not a and measured.url is None


class FakeEngine(HttpEmulator):
    """An engine's load endpoints, with the gauges a test sets."""

    def __init__(self, text=LLAMA, *, slots=4, metrics=True):
        super().__init__()
        self.text, self.slot_count, self.serve_metrics = text, slots, metrics
        self.running = self.waiting = 0
        self.stalled = asyncio.Event()
        self.stalled.set()
        self.metrics_requests = 0

    def routes(self, app):
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/props", self._props)
        app.router.add_get("/slots", self._slots)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    async def _metrics(self, request):
        self.metrics_requests += 1
        await self.stalled.wait()
        if not self.serve_metrics:
            return web.json_response({"error": "metrics disabled"}, status=501)
        return web.Response(text=self.text.format(running=self.running, waiting=self.waiting))

    async def _props(self, request):
        return web.json_response({"total_slots": self.slot_count})

    async def _slots(self, request):
        return web.json_response(
            [{"id": i, "is_processing": i < self.running} for i in range(self.slot_count)]
        )


async def until(predicate, timeout=5.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition never became true"
        await asyncio.sleep(0.01)


def open_fds():
    return len(os.listdir("/proc/self/fd"))


async def test_probe_reads_llama_cpp_metrics_and_slots_while_held_and_stops_after():
    async with FakeEngine() as engine:
        load = EngineLoad(engine.url, interval_s=0.02)
        assert load.state() is None  # nobody holds it: no probe, no reading
        fds = open_fds()
        await load.acquire()
        await load.acquire()  # a second session shares the same probe
        await until(lambda: load.reading is not None)
        assert load.reading.capacity == 4 and load.reading.source == "llama.cpp"
        assert load.verdict(Kind.PREFILL).reason is Reason.IDLE
        engine.running = 2
        await until(lambda: load.reading.running == 2)
        assert load.verdict(Kind.PREFILL).reason is Reason.BUSY
        assert load.verdict(Kind.DRAFT).allow
        engine.waiting = 1
        await until(lambda: load.reading.waiting == 1)
        assert load.verdict(Kind.DRAFT).reason is Reason.QUEUE
        await load.release()
        assert load.polling  # one session still holds it
        await load.release()
        assert not load.polling and load.state() is None
        polled = engine.metrics_requests
        await asyncio.sleep(0.1)
        assert engine.metrics_requests == polled  # no probe after the last session left
        assert open_fds() <= fds  # its connection is closed
        assert load.summary()["verdicts"]["prefill:busy"] == 1


async def test_requests_sent_between_readings_count_against_the_next_one():
    async with FakeEngine() as engine:
        load = EngineLoad(engine.url, interval_s=10.0)  # one reading, then a long pause
        await load.acquire()
        try:
            await until(lambda: load.reading is not None)
            engine.stalled.clear()  # the next probe would hang: the reading stays as it is
            first = load.sent()
            assert load.verdict("prefill").allow  # 1 of 4 running counts as half: still < 2
            second = load.sent()
            assert load.verdict("prefill").reason is Reason.BUSY  # 2 sent since the reading
            load.done(first)
            load.done(second)
            assert load.verdict("prefill").allow
        finally:
            engine.stalled.set()
            await load.release()


async def test_llama_server_without_metrics_is_read_through_slots():
    async with FakeEngine(slots=2, metrics=False) as engine:
        load = EngineLoad(engine.url, interval_s=0.02)
        await load.acquire()
        try:
            engine.running = 1
            await until(lambda: load.reading is not None and load.reading.running == 1)
            assert load.reading.capacity == 2 and "slots" in load.reading.source
            assert load.verdict("prefill").reason is Reason.BUSY  # 1 of 2 is half
        finally:
            await load.release()


async def test_an_engine_with_no_load_endpoint_falls_back_to_measured_queueing():
    class Bare(HttpEmulator):
        def routes(self, app):
            async def health(request):
                return web.json_response({})

            app.router.add_get("/health", health)

    async with Bare() as bare:
        load = EngineLoad(f"http://127.0.0.1:{bare.port}", interval_s=0.02)
        await load.acquire()
        try:
            # The probe gives up on an engine without load figures: it stops polling (once
            # its task has closed its connection).
            await until(lambda: load.status == "unsupported" and not load.polling)
            assert load.verdict("prefill").reason is Reason.UNKNOWN
            for _ in range(3):
                load.measured(10, 0.1)
            assert load.verdict("prefill").reason is Reason.IDLE
            for _ in range(5):
                load.measured(10, 0.9)
            assert load.verdict("prefill").reason is Reason.SLOW
        finally:
            await load.release()


async def test_an_engine_that_stalls_is_stale_and_one_that_is_gone_is_down():
    engine = FakeEngine(VLLM)
    await engine.start()
    load = EngineLoad(engine.url, interval_s=0.02, timeout_s=0.5)
    config = YieldConfig(stale_s=0.2)
    await load.acquire()
    try:
        await until(lambda: load.reading is not None and load.reading.source == "vllm")
        assert load.verdict("draft", config).allow
        engine.stalled.clear()  # the engine stops answering the probe (a long batch)
        await until(lambda: load.verdict("draft", config).reason is Reason.STALE)
        engine.stalled.set()
        await until(lambda: load.verdict("draft", config).allow)
        await engine.stop()  # the engine is gone
        await until(lambda: load.verdict("draft", config).reason is Reason.DOWN)
        assert load.status == "failing" and load.probe_failures >= 1
    finally:
        engine.stalled.set()
        await load.release()
        await engine.stop()
    assert not load.polling


def test_a_probe_left_running_by_a_finished_event_loop_is_replaced():
    # One process, two runs (asyncio.run twice), the first never released its probe.
    load = None

    async def run(expect_reading):
        nonlocal load
        async with FakeEngine() as engine:
            load = load or EngineLoad(engine.url, interval_s=0.02)
            load.url = engine.url  # the second run's engine listens elsewhere
            await load.acquire()
            await until(lambda: load.reading is not None and load.reading.at_s > expect_reading)
            return load.reading.at_s

    first = asyncio.run(run(float("-inf")))
    asyncio.run(run(first))  # would time out on the dead loop's task


async def test_the_probe_cancels_a_prefill_in_flight_when_another_callers_request_starts():
    async with FakeEngine() as engine:
        load = EngineLoad(engine.url, interval_s=0.02)
        await load.acquire()
        try:
            await until(lambda: load.reading is not None)
            told = []
            engine.running = 1  # the prefill itself runs
            handle = load.sent("prefill", work_tokens=3000, on_cancel=told.append)
            assert load.state().prefill_tokens_in_flight == 3000
            polled = engine.metrics_requests
            await until(lambda: engine.metrics_requests >= polled + 3)
            assert told == []  # only this process's prefill runs
            engine.running = 2  # another caller's real turn starts
            await until(lambda: told)
            assert told[0].reason is CancelReason.CONTENDED
            await asyncio.sleep(0.1)
            assert len(told) == 1  # told once
            load.done(handle)
            assert load.summary()["prefills_cancelled"] == {"contended": 1}
            assert load.state().prefill_tokens_in_flight == 0
        finally:
            await load.release()


async def test_a_prefill_sent_beside_another_callers_request_is_cancelled_only_by_a_new_one():
    async with FakeEngine() as engine:
        load = EngineLoad(engine.url, interval_s=0.02)
        await load.acquire()
        try:
            engine.running = 1  # another caller's turn runs when the prefill is admitted
            await until(lambda: load.reading is not None and load.reading.running == 1)
            told = []
            handle = load.sent("prefill", work_tokens=3000, on_cancel=told.append)
            engine.running = 2  # the prefill itself now runs too
            polled = engine.metrics_requests
            await until(lambda: engine.metrics_requests >= polled + 3)
            assert told == []  # the request it was judged to share the engine with
            engine.running = 3  # a second caller's turn starts
            await until(lambda: told)
            assert told[0].reason is CancelReason.CONTENDED
            load.done(handle)
        finally:
            await load.release()


async def test_others_on_the_engine_as_a_request_ends_leave_the_request_itself_out():
    async with FakeEngine() as engine:
        load = EngineLoad(engine.url, interval_s=0.02)
        assert load.others_now(0.0, speculative=False) is None  # no probe: unknown
        await load.acquire()
        try:
            sent_at = load.clock()
            engine.running = 2  # our real request and another caller's
            await until(lambda: load.reading is not None and load.reading.running == 2)
            assert load.others_now(sent_at, speculative=False) == 1
            # A reading taken before it left cannot count it: nothing to leave out.
            assert load.others_now(load.clock() + 1.0, speculative=False) == 2
            # A speculative request of ours is counted once, by the reading or as sent since.
            handle = load.sent("prefill", work_tokens=10)
            assert load.others_now(load.clock(), speculative=True) == 2
            load.done(handle)
        finally:
            await load.release()


async def test_a_slotted_engine_by_its_probe_cancels_the_prefill_when_its_real_request_leaves():
    async with FakeEngine() as engine:
        load = EngineLoad(engine.url, interval_s=0.02)
        await load.acquire()
        try:
            await until(lambda: load.reading is not None)
            assert load.engine_source == "llama.cpp"
            handle = load.sent("prefill", work_tokens=3000, on_cancel=lambda v: None)
            verdict = load.dispatched(handle, measured_reuse=None, provider_reuse=None)
            assert verdict and verdict.reason is CancelReason.DISPATCHED
            # A real request seen to read the unfinished prefill keeps it.
            other = load.sent("prefill", work_tokens=3000)
            assert not load.dispatched(other, measured_reuse=True, provider_reuse=None)
            # A draft is never cancelled here; no prefill in flight, nothing to cancel.
            draft = load.sent("draft")
            assert not load.dispatched(draft, None, None)
            assert not load.dispatched(None, None, None)
            # Once its turn's request has left, the prefill is no longer judged contended.
            engine.running = 3
            await until(lambda: load.reading.running == 3)
            assert load.summary()["prefills_cancelled"] == {"dispatched": 1}
            for h in (handle, other, draft):
                load.done(h)
        finally:
            await load.release()
