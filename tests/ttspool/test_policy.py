"""TTSPrewarmPolicy: which calls get a warm socket or a spare, and the reason it gives."""

import json

import pytest

from pipecat_fast.providers import load_tts_table, tts_facts
from pipecat_fast.ttspool import PoolReason, PoolTarget, TTSPrewarmPolicy
from pipecat_fast.warmup import DecisionLog


def ws(provider, **kw):
    return PoolTarget(provider=provider, websocket=True, can_prewarm=True, **kw)


def test_websocket_provider_with_adapter_is_warmed_with_its_upkeep():
    policy = TTSPrewarmPolicy()
    d = policy.decide(ws("cartesia"), 0.0)
    assert d.warm and d.reason == PoolReason.WARM
    assert "replaced ahead of its 300 s idle close" in d.detail
    d = policy.decide(ws("elevenlabs"), 0.0)
    assert d.warm and "keepalive every 10 s" in d.detail
    d = policy.decide(ws("deepgram"), 0.0)
    assert d.warm and "no documented idle limit" in d.detail


def test_retries_are_skipped_unless_asked():
    d = TTSPrewarmPolicy().decide(ws("cartesia", is_retry=True), 0.0)
    assert not d.warm and d.reason == PoolReason.RETRY and "seed 000" in d.detail
    assert TTSPrewarmPolicy(skip_retries=False).decide(ws("cartesia", is_retry=True), 0.0).warm


def test_http_services_hold_nothing_across_a_ring():
    policy = TTSPrewarmPolicy()
    target = PoolTarget(provider="openai", websocket=False, can_prewarm=False, http_client="httpx")
    d = policy.decide(target, 0.0)
    assert not d.warm and d.reason == PoolReason.HOLDS_NOTHING and "5 s" in d.detail
    aiohttp = PoolTarget(
        provider="cartesia", websocket=False, can_prewarm=False, http_client="aiohttp"
    )
    assert "15 s" in policy.decide(aiohttp, 0.0).detail


def test_provider_whose_warmup_holds_nothing_is_skipped(tmp_path):
    table = json.loads(json.dumps(load_tts_table()))
    table["providers"]["cartesia"]["warm_holds"] = "nothing"
    path = tmp_path / "tts.json"
    path.write_text(json.dumps(table))
    d = TTSPrewarmPolicy(table=load_tts_table(path)).decide(ws("cartesia"), 0.0)
    assert not d.warm and d.reason == PoolReason.HOLDS_NOTHING


def test_no_adapter_means_no_prewarm():
    target = PoolTarget(provider="inworld", websocket=True, can_prewarm=False)
    d = TTSPrewarmPolicy().decide(target, 0.0)
    assert not d.warm and d.reason == PoolReason.NO_ADAPTER


def test_spare_only_for_services_that_reconnect_on_interruption():
    policy = TTSPrewarmPolicy()
    assert policy.decide_spare(ws("sarvam", reconnects_on_interruption=True)).warm
    assert not policy.decide_spare(ws("cartesia")).warm
    http = PoolTarget(provider="openai", websocket=False, can_prewarm=False)
    assert not policy.decide_spare(http).warm


def test_keepalive_only_where_it_may_precede_the_session():
    policy = TTSPrewarmPolicy()
    assert policy.keepalive_s(ws("elevenlabs")) == 10
    assert policy.keepalive_message(ws("soniox")) == '{"keep_alive": true}'
    # Sarvam wants its config message first: a held Sarvam socket gets no keepalive.
    assert policy.keepalive_s(ws("sarvam")) is None
    assert policy.keepalive_message(ws("sarvam")) is None
    assert policy.keepalive_s(ws("cartesia")) is None


def test_unknown_provider_is_a_clear_error_and_decisions_log_counted():
    with pytest.raises(ValueError, match="unknown TTS provider"):
        TTSPrewarmPolicy().decide(ws("nope"), 0.0)
    lines = []
    log = DecisionLog(lines.append, first_n=2, every=3)
    policy = TTSPrewarmPolicy()
    for _ in range(6):
        log(policy.decide(ws("cartesia", is_retry=True), 0.0), label="pool")
    assert len(lines) == 4 and "6 decisions 'retry'" in lines[-1]


def test_registry_entries_all_load_with_sources():
    table = load_tts_table()
    for name in table["providers"]:
        facts = tts_facts(name)
        assert facts.warm_source and facts.idle_close_source
        if facts.keepalive is not None:
            assert facts.keepalive.source and facts.keepalive.interval_s > 0
    assert tts_facts("11labs").provider == "elevenlabs"
