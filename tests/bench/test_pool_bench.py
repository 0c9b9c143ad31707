"""The bench's `stock-pool` and `pool` configurations: the calls they make and what they report."""

from types import SimpleNamespace

import pytest
from pipecat.services.sarvam.tts import SarvamTTSService

from pipecat_fast.bench.configs import CONFIGS, POOL_GREETING, BenchConfig, barge_in_moments
from pipecat_fast.bench.evals.pool import greeting_summary, pool_summary
from pipecat_fast.bench.material import bench_calls
from pipecat_fast.bench.pipeline import Endpoints, build_spec
from pipecat_fast.bench.runner import build_report, run_call
from pipecat_fast.testing.caller_transport import CallerTransport
from pipecat_fast.testing.profiles import SAME_REGION
from pipecat_fast.testing.stack import SARVAM_IDLE_CLOSE_S, EmulatorStack

ENDPOINTS = Endpoints(
    llm_base_url="http://127.0.0.1:9/v1",
    tts_url="ws://127.0.0.1:9/tts/websocket",
    stt_base_url="ws://127.0.0.1:9",
    sarvam_tts_url="ws://127.0.0.1:9/text-to-speech/ws",
)


def test_the_pools_calls_greet_barge_in_and_go_quiet_past_the_idle_close():
    call = bench_calls(ids=["book_cleaning"])[0]
    n = len(call.utterances)
    spec = build_spec(call, ENDPOINTS)
    CONFIGS["stock-pool"].customize(spec)
    assert isinstance(spec.tts, SarvamTTSService)
    assert spec.call.greeting == POOL_GREETING
    middle = n // 2
    assert spec.call.pause_before_s[middle] > SARVAM_IDLE_CLOSE_S
    assert spec.call.barge_in_after_s[middle] is None
    assert [m is not None for m in spec.call.barge_in_after_s].count(True) == n - 2
    # The run's copy carries them; the shared call script does not.
    assert call.greeting is None and call.barge_in_after_s == [] and call.pause_before_s == []
    pool_spec = build_spec(call, ENDPOINTS)
    CONFIGS["pool"].customize(pool_spec)
    assert pool_spec.ringing and pool_spec.on_hangup and pool_spec.ring_s >= 2.0


def test_a_config_without_the_sarvam_emulator_is_a_clear_error():
    spec = build_spec(bench_calls(ids=["book_cleaning"])[0], Endpoints(None, None, None))
    with pytest.raises(ValueError, match="Sarvam TTS emulator"):
        CONFIGS["pool"].customize(spec)


def test_caller_pauses_before_the_utterances_it_is_told_to():
    caller = CallerTransport([b"", b"", b""], pause_before_s=[None, 18.0], await_greeting=True)
    assert [caller.pause_before(i) for i in range(4)] == [None, 18.0, None, None]
    assert caller.await_greeting


def test_greeting_and_pool_summaries():
    results = [
        SimpleNamespace(config="stock-pool", greeting_ms=300.0, session={}),
        SimpleNamespace(config="stock-pool", greeting_ms=340.0, session={}),
        SimpleNamespace(
            config="pool",
            greeting_ms=240.0,
            session={"pool_first_reused": True, "pool_acquires": 3, "pool_handshakes": 0},
        ),
        SimpleNamespace(
            config="pool",
            greeting_ms=None,
            session={"pool_first_reused": False, "pool_acquires": 2, "pool_handshakes": 1},
        ),
    ]
    g = greeting_summary(results, "stock-pool")
    assert g["stock-pool"]["greeting_p50_ms"] == 320.0 and g["stock-pool"]["p50"] == 1.0
    assert g["pool"]["n"] == 1 and g["pool"]["missing"] == 1
    assert g["pool"]["p50"] == round(240 / 320, 3)
    p = pool_summary(results)
    assert set(p) == {"pool"}
    assert p["pool"] == {
        "calls": 2,
        "first_reused": 1,
        "acquires": 5,
        "service_handshakes": 1,
        "acquire_ms": 0.0,
    }


def _short(config: BenchConfig) -> BenchConfig:
    """The configuration without its long idle gap (which would make the test ~20 s longer).

    The idle gap's utterance waits for the reply to end; in a two-utterance call that is the
    second one, so the barge-in is put back: the call must redial on a talked-over reply.
    """

    def customize(spec):
        config.customize(spec)
        spec.call.pause_before_s = []
        spec.call.barge_in_after_s = barge_in_moments(len(spec.call.utterances))

    return BenchConfig(config.name, config.description, customize)


@pytest.mark.slow
async def test_pool_call_greets_from_the_held_socket_and_barges_in_on_the_spare():
    call = bench_calls(ids=["reschedule"])[0].only([0, 1])
    async with EmulatorStack(
        SAME_REGION, stt_scripts={call.id: call.stt_script}, replies=call.replies
    ) as stack:
        pooled = await run_call(call, _short(CONFIGS["pool"]), Endpoints(**stack.urls()))
        connections = stack.sarvam_tts.connections
    assert pooled.error is None, pooled.error
    assert pooled.greeting_ms is not None and pooled.greeting_ms > 0
    assert len(pooled.turns) == 2
    assert pooled.session["pool_first_reused"] is True
    assert pooled.session["pool_handshakes"] == 0  # setup and the barge-in's redial: pooled
    assert pooled.session["pool_acquires"] >= 2
    assert connections >= 2  # the warm socket and at least one spare, all dialled by the pool
    report = build_report([pooled], "pool")
    assert report["greeting"]["pool"]["n"] == 1 and report["pool"]["pool"]["first_reused"] == 1
