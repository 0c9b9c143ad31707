"""TTSWarmPool against loopback WebSocket servers, with the real Pipecat TTS services.

Each lifecycle path: the warm socket adopted at setup; refused or dropped before use (fall
back, or replaced, the first sentence still spoken); silently dead (probe, replaced); kept
alive; replaced ahead of the provider's idle close; a spare for a barge-in on a reconnecting
provider; never answered; 200 concurrent calls, bounded and all closed.
"""

import asyncio
import json

import pytest
from pipecat.services.cartesia.tts import CartesiaTTSService
from pipecat.services.sarvam.tts import SarvamTTSService
from websockets.asyncio.server import serve

from pipecat_fast import _pipecat
from pipecat_fast.providers import load_tts_table
from pipecat_fast.testing.cartesia_server import CartesiaEmulator
from pipecat_fast.testing.profiles import SAME_REGION
from pipecat_fast.testing.sarvam_server import SarvamEmulator
from pipecat_fast.testing.tts_harness import TTSHarness
from pipecat_fast.ttspool import PoolConfig, TTSPrewarmPolicy, TTSWarmPool

FAST = PoolConfig(probe_interval_s=60, max_ring_s=60)


def cartesia(url):
    return CartesiaTTSService(api_key="k", url=url, settings=CartesiaTTSService.Settings(voice="v"))


def pool_tasks():
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("pf-ttspool")]


async def until(predicate, timeout=5.0):
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


@pytest.fixture
async def emulator():
    async with CartesiaEmulator(SAME_REGION) as emu:
        yield emu


async def test_warm_socket_is_adopted_at_setup_and_speaks(emulator):
    pool = TTSWarmPool(config=FAST)
    tts = cartesia(emulator.url)
    lease = pool.prewarm(tts, call_id="c1")
    assert lease.decision.warm
    await until(lambda: pool.is_warm("c1"))
    async with TTSHarness(tts) as run:
        await run.speak("Hello there.")
    stats = await lease.close()
    assert emulator.connections == 1  # setup dialled nothing
    assert (stats.reused, stats.service_dials, stats.pool_dials) == (1, 0, 1)
    assert lease.report()["acquire_log"] == [{"kind": "reused", "wait_ms": 0.0, "role": "warm"}]
    await pool.aclose()
    assert pool_tasks() == []


async def test_setup_waits_for_a_warm_dial_still_in_flight():
    slow = CartesiaEmulator(SAME_REGION.__class__(**{**SAME_REGION.__dict__, "rtt_ms": 100.0}))
    async with slow:
        pool = TTSWarmPool(config=FAST)
        tts = cartesia(slow.url)
        lease = pool.prewarm(tts, call_id="c1")  # a 300 ms handshake, answered at once
        async with TTSHarness(tts) as run:
            await run.speak("Hi.")
        stats = await lease.close()
        assert slow.connections == 1
        assert stats.waited == 1 and stats.service_dials == 0
        assert 0 < stats.acquire_log[0].wait_ms < 400
        await pool.aclose()


class RefusingCartesia(CartesiaEmulator):
    """Refuses the first ``refuse`` handshakes with HTTP 429, as a provider over its limit."""

    def __init__(self, refuse=1, **kw):
        super().__init__(SAME_REGION, **kw)
        self.refuse = refuse

    async def check_request(self, connection, request):
        if self.refuse > 0:
            self.refuse -= 1
            return connection.respond(429, "too many connections\n")
        return await super().check_request(connection, request)


async def test_refused_warm_socket_falls_back_to_the_services_own_dial(caplog_loguru):
    async with RefusingCartesia(refuse=1) as emu:
        pool = TTSWarmPool(config=FAST)
        tts = cartesia(emu.url)
        lease = pool.prewarm(tts, call_id="c1")
        await until(lambda: lease.stats.dial_failures == 1)
        assert pool.held == 0
        async with TTSHarness(tts) as run:
            await run.speak("Still spoken.")
        stats = await lease.close()
        assert stats.service_dials == 1 and stats.reused == 0
        assert emu.contexts and any(
            "Still spoken" in t for c in emu.contexts.values() for t in c.transcripts
        )
        assert any("dial failed (HTTP 429)" in m for m in caplog_loguru)
        await pool.aclose()


class DroppingCartesia(CartesiaEmulator):
    """Closes the first ``drop`` connections right after accepting them (``abort``: no close
    frame, as a crashed server or a dropped TCP connection)."""

    def __init__(self, drop=1, abort=False, **kw):
        super().__init__(SAME_REGION, **kw)
        self.drop = drop
        self.abort = abort

    async def handle(self, connection):
        self.accepted = getattr(self, "accepted", 0) + 1
        if self.drop > 0:
            self.drop -= 1
            await asyncio.sleep(0.05)
            if self.abort:
                connection.transport.abort()
            else:
                await connection.close(1011, "going away")
            return
        await super().handle(connection)


@pytest.mark.parametrize("abort", [False, True])
async def test_socket_dying_before_use_is_replaced_and_the_first_sentence_spoken(abort):
    async with DroppingCartesia(drop=1, abort=abort) as emu:
        pool = TTSWarmPool(config=FAST)
        tts = cartesia(emu.url)
        lease = pool.prewarm(tts, call_id="c1")
        await until(lambda: lease.stats.replaced == 1 and emu.connections == 1)
        await until(lambda: pool.is_warm("c1"))
        async with TTSHarness(tts) as run:
            await run.speak("First sentence.")
        stats = await lease.close()
        assert stats.reused == 1 and stats.service_dials == 0
        assert emu.accepted == 2
        (ctx,) = [c for c in emu.contexts.values() if c.transcripts]
        assert ctx.transcripts[0].startswith("First sentence.") and ctx.first_chunk_at
        await pool.aclose()


class Freezer:
    """A TCP proxy whose open connections can go silent: bytes stop flowing, no FIN, no RST
    (a black hole, as a NAT or load balancer that dropped its state). New ones still flow."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.live = []
        self.server = None

    def freeze(self):
        for flag in self.live:
            flag["frozen"] = True

    async def start(self):
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _client(self, reader, writer):
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        flag = {"frozen": False}
        self.live.append(flag)

        async def pipe(r, w):
            try:
                while data := await r.read(65536):
                    if not flag["frozen"]:
                        w.write(data)
                        await w.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass

        await asyncio.gather(pipe(reader, up_w), pipe(up_r, writer))

    async def stop(self):
        self.server.close()


async def test_silently_dead_socket_is_found_by_its_probe_and_replaced(emulator):
    freezer = Freezer(emulator.port)
    port = await freezer.start()
    pool = TTSWarmPool(config=PoolConfig(probe_interval_s=0.2, probe_timeout_s=0.3))
    tts = cartesia(f"ws://127.0.0.1:{port}/tts/websocket")
    lease = pool.prewarm(tts, call_id="c1")
    await until(lambda: pool.held == 1 and emulator.connections == 1)
    await asyncio.sleep(0.3)  # at least one probe answered
    freezer.freeze()
    await until(lambda: lease.stats.replaced == 1, timeout=5)
    await until(lambda: pool.is_warm("c1") and emulator.connections == 2)
    async with TTSHarness(tts) as run:
        await run.speak("Through the fresh one.")
    stats = await lease.close()
    assert stats.reused == 1 and stats.service_dials == 0
    await pool.aclose()
    await freezer.stop()


async def test_a_handed_over_socket_closes_without_waiting_for_the_peer(emulator):
    """The barge-in's close does not wait the round trip of the closing handshake."""
    import time

    freezer = Freezer(emulator.port)
    port = await freezer.start()
    tts = CartesiaTTSService(
        api_key="k",
        url=f"ws://127.0.0.1:{port}/tts/websocket",
        settings=CartesiaTTSService.Settings(voice="v"),
        ws_close_timeout=1.0,
    )
    spec = _pipecat.tts_dial_spec(tts)
    timings = {}
    for marked in (False, True):
        connection = await _pipecat.tts_dial(tts, spec, background_close=True)
        if marked:
            _pipecat.close_in_background(connection)
        freezer.freeze()  # the peer's close frame will never come
        started = time.monotonic()
        await connection.close()
        timings[marked] = time.monotonic() - started
        await _pipecat.wait_background_close(connection)
        assert not _pipecat.connection_is_open(connection)
    assert timings[False] >= 0.9  # Pipecat's close waits its close timeout
    assert timings[True] < 0.1
    await freezer.stop()


def table_with(**cartesia_fields):
    table = json.loads(json.dumps(load_tts_table()))
    table["providers"]["cartesia"].update(cartesia_fields)
    return table


async def test_held_socket_gets_the_providers_keepalive():
    received = []

    async def handler(connection):
        async for message in connection:
            received.append(message)

    async with serve(handler, "127.0.0.1", 0) as server:
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/tts/websocket"
        ka = {
            "message": '{"keepalive": 1}',
            "interval_s": 0.1,
            "before_session": True,
            "source": "test",
        }
        policy = TTSPrewarmPolicy(table=table_with(keepalive=ka))
        pool = TTSWarmPool(config=FAST, policy=policy)
        lease = pool.prewarm(cartesia(url), call_id="c1")
        await until(lambda: len(received) >= 3)
        assert set(received) == {'{"keepalive": 1}'}
        assert lease.stats.keepalives >= 3
        await lease.close()
        await pool.aclose()


async def test_held_socket_is_replaced_ahead_of_the_idle_close():
    async with CartesiaEmulator(SAME_REGION, idle_close_s=1.0) as emu:
        policy = TTSPrewarmPolicy(table=table_with(idle_close_s=1.0))
        pool = TTSWarmPool(config=PoolConfig(idle_margin_s=0.6, probe_interval_s=60), policy=policy)
        tts = cartesia(emu.url)
        lease = pool.prewarm(tts, call_id="c1")
        await until(lambda: emu.connections == 2 and pool.held == 1, timeout=5)
        assert lease.stats.replaced >= 1
        assert emu.idle_closes == 0  # never reached the provider's limit
        async with TTSHarness(tts) as run:
            await run.speak("Fresh.")
        assert (await lease.close()).service_dials == 0
        await pool.aclose()


async def test_barge_in_on_a_reconnecting_provider_takes_the_spare():
    async with SarvamEmulator(SAME_REGION) as emu:
        pool = TTSWarmPool(config=FAST)
        tts = SarvamTTSService(api_key="k", url=emu.url)
        lease = pool.prewarm(tts, call_id="c1")
        assert lease.spare.warm
        await until(lambda: pool.is_warm("c1"))
        async with TTSHarness(tts, sample_rate=24000) as run:
            await run.speak("Hello there, how are you doing today?")
            await until(lambda: pool.is_warm("c1"))  # the spare is open
            for n in range(2):
                await run.interrupt()
                await run.speak(f"Sorry, go ahead {n}.")
                await until(lambda: pool.is_warm("c1"))
        stats = await lease.close()
        assert stats.acquires == 3 and stats.reused == 3 and stats.service_dials == 0
        assert [r.role for r in stats.acquire_log] == ["warm", "spare", "spare"]
        assert emu.texts[-1] == "Sorry, go ahead 1."
        assert pool.held == 0
        await pool.aclose()


async def test_acquires_are_reported_to_the_ttfa_meter():
    from pipecat_fast.ttfa import TTFAObserver

    async with SarvamEmulator(SAME_REGION) as emu:
        pool = TTSWarmPool(config=FAST)
        tts = SarvamTTSService(api_key="k", url=emu.url)
        lease = pool.prewarm(tts, call_id="c1")
        await until(lambda: pool.is_warm("c1"))
        meter = TTFAObserver()
        async with TTSHarness(tts, sample_rate=24000, observers=[meter]) as run:
            await run.speak("Hello there, how are you doing today?")
            await until(lambda: pool.is_warm("c1"))
            await run.interrupt()
            await run.speak("Sorry, go ahead.")
        await lease.close()
        await pool.aclose()
    meter.close()
    assert meter.session["pool_first_reused"] is True
    assert meter.session["pool_acquires"] == 2 and meter.session["pool_handshakes"] == 0


async def test_without_pool_the_same_barge_in_dials_every_time():
    async with SarvamEmulator(SAME_REGION) as emu:
        tts = SarvamTTSService(api_key="k", url=emu.url)
        async with TTSHarness(tts, sample_rate=24000) as run:
            await run.speak("Hello there, how are you doing today?")
            await run.interrupt()
            await run.speak("Sorry, go ahead.")
        assert emu.connections == 2


async def test_spec_mismatch_is_discarded_and_the_service_dials(emulator):
    pool = TTSWarmPool(config=FAST)
    tts = cartesia(emulator.url)
    lease = pool.prewarm(tts, call_id="c1")
    await until(lambda: pool.is_warm("c1"))
    tts._api_key = "another-key"  # what the service will send no longer matches the held one
    async with TTSHarness(tts) as run:
        await run.speak("Hello.")
    stats = await lease.close()
    assert stats.service_dials == 1 and stats.reused == 0
    assert emulator.connections == 2
    await pool.aclose()


async def test_never_answered_call_leaves_nothing_behind(emulator):
    pool = TTSWarmPool(config=FAST)
    lease = pool.prewarm(cartesia(emulator.url), call_id="c1")
    await until(lambda: pool.held == 1)
    stats = await lease.close()
    assert stats.acquires == 0 and pool.held == 0 and pool.calls == []
    assert pool_tasks() == []
    await asyncio.sleep(0.05)
    assert len(emulator._server.connections) == 0  # the server saw the close
    assert (await lease.close()) is stats  # idempotent


async def test_forgotten_call_is_closed_after_max_ring(emulator):
    pool = TTSWarmPool(config=PoolConfig(max_ring_s=0.3, probe_interval_s=60))
    lease = pool.prewarm(cartesia(emulator.url), call_id="c1")
    await until(lambda: pool.held == 1)
    await until(lambda: pool.held == 0, timeout=3)
    await lease.close()
    await pool.aclose()
    assert pool_tasks() == []


async def test_retry_calls_and_http_services_open_nothing(emulator):
    from pipecat.services.openai.tts import OpenAITTSService

    pool = TTSWarmPool(config=FAST)
    retry = pool.prewarm(cartesia(emulator.url), call_id="r", is_retry=True)
    http = pool.prewarm(OpenAITTSService(api_key="k"), call_id="h")
    assert not retry.decision.warm and retry.decision.reason == "retry"
    assert not http.decision.warm and http.decision.reason == "holds_nothing"
    await asyncio.sleep(0.1)
    assert pool.held == 0 and emulator.connections == 0
    await pool.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        pool.prewarm(cartesia(emulator.url))


async def test_a_service_reused_for_a_second_call_keeps_the_second_hook(emulator):
    pool = TTSWarmPool(config=FAST)
    tts = cartesia(emulator.url)
    first = pool.prewarm(tts, call_id="one")
    second = pool.prewarm(tts, call_id="two")
    await first.close()
    await until(lambda: pool.is_warm("two"))
    async with TTSHarness(tts) as run:
        await run.speak("Second call.")
    assert (await second.close()).reused == 1
    assert "_websocket_connect" not in vars(tts)
    await pool.aclose()


def test_prewarm_outside_the_event_loop_is_a_clear_error():
    with pytest.raises(RuntimeError, match="event loop"):
        TTSWarmPool().prewarm(cartesia("ws://127.0.0.1:9/tts/websocket"))


async def test_200_concurrent_calls_stay_bounded_and_all_close(emulator):
    pool = TTSWarmPool(config=PoolConfig(max_held=50, probe_interval_s=60))
    services = [cartesia(emulator.url) for _ in range(200)]
    leases = [pool.prewarm(s, call_id=f"c{i}") for i, s in enumerate(services)]
    assert pool.held == 50
    await until(lambda: sum(pool.is_warm(lease.call_id) for lease in leases) == 50, timeout=20)
    assert emulator.connections == 50
    # Half the calls are answered: their setup goes through the hook, as Pipecat's does.
    adopted = []
    for service in services[:100]:
        spec = _pipecat.tts_dial_spec(service)
        adopted.append(await service._websocket_connect(spec.uri, **spec.kwargs))
    assert sum(lease.stats.reused for lease in leases) == 50
    assert sum(lease.stats.service_dials for lease in leases) == 50
    assert pool.held == 0
    await asyncio.gather(*(lease.close() for lease in leases))
    for connection in adopted:
        await connection.close()
    await pool.aclose()
    assert pool.held == 0 and pool.calls == [] and pool_tasks() == []
    await until(lambda: len(emulator._server.connections) == 0, timeout=10)
    assert emulator.connections == 100  # 50 warm (all adopted) + 50 dialled by the services


async def test_a_pool_failure_at_hand_over_fails_open_to_the_services_dial(emulator, caplog_loguru):
    pool = TTSWarmPool(config=FAST)
    tts = cartesia(emulator.url)
    lease = pool.prewarm(tts, call_id="c1")
    await until(lambda: pool.is_warm("c1"))

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the pool")

    pool._core.acquire = broken
    async with TTSHarness(tts) as run:
        await run.speak("Spoken anyway.")
    assert any("pool failed" in m and "dialling" in m for m in caplog_loguru)
    assert emulator.connections == 2
    await lease.close()
    await pool.aclose()
