"""The load bench's pieces: arguments, caller identity, the metering proxy, background callers
against a shared engine (more callers than slots; an engine that goes away), the figures."""

import asyncio
import dataclasses

import pytest

from pipecat_fast.bench.load import (
    caller_call,
    caller_endpoints,
    full_positions,
    parse_ks,
)
from pipecat_fast.bench.load_callers import BackgroundCaller, Behaviour
from pipecat_fast.bench.load_report import engine_figures, goals, summarize_load
from pipecat_fast.bench.material import bench_calls
from pipecat_fast.bench.pipeline import Endpoints
from pipecat_fast.load import EngineLoad
from pipecat_fast.testing.capacity import EngineCapacity
from pipecat_fast.testing.metering_proxy import CALLER_HEADER, MeteringProxy
from pipecat_fast.testing.openai_server import OpenAIEmulator
from pipecat_fast.testing.profiles import SAME_REGION


def test_parse_ks_sorts_and_dedups_and_rejects_nonsense():
    assert parse_ks("4,1,2,2") == [1, 2, 4]
    for bad in ("0,2", "a", ""):
        with pytest.raises(ValueError, match="--k"):
            parse_ks(bad)


def test_full_pipelines_are_spread_and_include_the_last_caller():
    assert full_positions(8, 2) == [3, 7]
    assert full_positions(1, 3) == [0]
    assert full_positions(4, 4) == [0, 1, 2, 3]


@pytest.fixture(scope="module")
def call():
    return bench_calls(None)[0].only([0])


def test_each_caller_has_its_own_prefix_and_header(call):
    a, b = caller_call(call, "r0-k2-stock-p0"), caller_call(call, "r0-k2-stock-p1")
    assert a.system_prompt.endswith(call.system_prompt)
    assert b.system_prompt.endswith(call.system_prompt)
    assert a.system_prompt[:80] != b.system_prompt[:80]  # no shared prefix between callers
    endpoints = Endpoints("http://llm/v1", None, None, llm_settings={"max_tokens": 9})
    mine = caller_endpoints(endpoints, "p0")
    assert mine.llm_settings["extra"]["extra_headers"] == {CALLER_HEADER: "p0"}
    assert mine.llm_settings["max_tokens"] == 9
    assert "extra" not in endpoints.llm_settings  # the shared endpoints are not changed


def _endpoints(url: str, model="gpt-4.1-mini") -> Endpoints:
    return Endpoints(url, None, None, llm_model=model)


async def _callers(call, proxy_url: str, behaviour: Behaviour, k: int, load=None):
    callers = [
        BackgroundCaller(
            caller_call(call, f"c{i}"),
            caller_endpoints(_endpoints(proxy_url + "/v1"), f"c{i}"),
            behaviour,
            load=load,
            label=f"c{i}",
            patience_s=20.0,
        )
        for i in range(k)
    ]
    return await asyncio.gather(*(c.run() for c in callers))


async def test_more_callers_than_slots_queue_and_every_turn_is_answered_and_metered(call):
    # 3 callers on a 1-slot engine: two queue behind the first; nobody fails.
    replies = [(u, "Sure.") for u in (s.text for s in call.stt_script)]
    fast = dataclasses.replace(SAME_REGION, llm_decode_tokens_per_s=2000.0)
    async with OpenAIEmulator(fast, replies=replies, capacity=EngineCapacity(1, 1e6)) as llm:
        async with MeteringProxy(llm.base_url.removesuffix("/v1")) as proxy:
            results = await _callers(call, proxy.url, Behaviour(), 3)
            records = [dataclasses.asdict(r) for r in proxy.records]
    assert [len(r.turns) for r in results] == [1, 1, 1]
    assert all(not r.errors for r in results)
    assert sorted(r["caller"] for r in records) == ["c0", "c1", "c2"]
    assert all(r["status"] == 200 and r["stream"] for r in records)
    # The engine reported its queue: with one slot, somebody waited.
    assert max(r["queue_ms"] for r in records) > 0
    figures = engine_figures(records, answered_turns=3)
    assert figures["requests"] == 3 and figures["speculative_requests"] == 0
    assert figures["computed_per_turn"] > 0


async def test_an_engine_that_goes_away_mid_run_ends_the_turn_with_an_error_and_the_run_goes_on(
    call,
):
    two = call.only([0, 0]) if len(call.utterances) == 1 else call
    replies = [(s.text, "Sure.") for s in two.stt_script]
    llm = OpenAIEmulator(SAME_REGION, replies=replies, capacity=EngineCapacity(2, 1e6))
    await llm.start()
    load = EngineLoad(llm.base_url, interval_s=0.05)
    caller = BackgroundCaller(
        two,
        _endpoints(llm.base_url),
        Behaviour(prefill=True, draft=True),
        load=load,
        label="c0",
        patience_s=5.0,
    )
    task = asyncio.create_task(caller.run())
    while not llm.requests:  # the first request (a prefill or the turn) reached the engine
        await asyncio.sleep(0.02)
    await llm.stop()
    result = await asyncio.wait_for(task, 60)
    assert result.errors  # the failed turns are recorded, with their reason
    assert len(result.turns) + result.unanswered == len(two.utterances)
    assert not load.polling and load.speculative_in_flight == 0


def _turn(config, k, turn, ttfa, **kw):
    return {
        "config": config,
        "k": k,
        "slot": 0,
        "call": "c",
        "repeat": 0,
        "turn": turn,
        "ttfa_ms": ttfa,
        **kw,
    }


def test_summary_pairs_turns_at_the_same_k_and_counts_speculation():
    turns = [
        _turn("stock", 1, 0, 1000.0),
        _turn("stock", 1, 1, 1200.0),
        _turn("prefill", 1, 0, 500.0, prefill_requests=2),
        _turn("prefill", 1, 1, 600.0, prefill_requests=1, prefill_yielded=1),
        _turn("stock", 2, 0, 1000.0),
        _turn("prefill", 2, 0, 1100.0, prefill_yielded=3),
    ]
    requests = [
        {"config": "stock", "k": 1, "stream": True, "prompt_tokens": 1000, "cached_tokens": 0},
        {"config": "prefill", "k": 1, "stream": False, "max_tokens": 1, "prompt_tokens": 900},
        {
            "config": "prefill",
            "k": 1,
            "stream": True,
            "prompt_tokens": 1000,
            "cached_tokens": 900,
            "queue_ms": 5.0,
        },
    ]
    table = summarize_load(turns, [], requests, [], ["stock", "prefill"], [1, 2])
    one = table["prefill"]["1"]
    assert one["ratio_p50"] == pytest.approx(550 / 1100, abs=0.01)
    assert one["speculative_requests"] == 1 and one["speculative_share"] == 0.5
    assert one["computed_tokens"] == 1000 and one["computed_per_turn"] == 500.0
    assert one["prefills"] == 3 and one["prefills_yielded"] == 1
    assert table["prefill"]["2"]["prefills_yielded"] == 3
    verdict = goals(table, [1, 2])["prefill"]
    assert verdict["1"]["p95_ok"] is True
    assert verdict["2"]["p95_ok"] is False and verdict["2"]["p50_kept"] is False  # 1.1x at K=2


def _calls(config, k, first, later):
    """One call per entry: its cold first turn and its warm second turn (``None``: none)."""
    rows = []
    for call, (cold, warm) in enumerate(zip(first, later, strict=True)):
        rows.append(_turn(config, k, 0, cold, repeat=call))
        if warm is not None:
            rows.append(_turn(config, k, 1, warm, repeat=call))
    return rows


def test_first_and_later_turns_are_paired_apart_where_a_pooled_p50_would_mislead():
    # K=1: the prefill takes the cold first turns from 2.5 s to 0.6 s, the warm ones 700 -> 580.
    # K=4: one cold first turn in four gets a prefill; the warm turns keep their gain. The
    # pooled p50 then falls on the one fast first turn and reads as a gain kept; the first
    # turns' own p50 says it was not.
    turns = [
        *_calls("stock", 1, [2500.0] * 3, [700.0] * 3),
        *_calls("prefill", 1, [600.0] * 3, [580.0] * 3),
        *_calls("stock", 4, [3800.0] * 4, [650.0, 650.0, 650.0, None]),
        *_calls("prefill", 4, [600.0, 3400.0, 3400.0, 3400.0], [550.0, 550.0, 550.0, None]),
    ]
    table = summarize_load(turns, [], [], [], ["stock", "prefill"], [1, 4])
    four = table["prefill"]["4"]
    assert four["ratio_p50"] == pytest.approx(600 / 3800, abs=0.01)
    assert four["by_turn"]["first"]["n_paired"] == 4
    assert four["by_turn"]["first"]["ratio_p50"] == pytest.approx(3400 / 3800, abs=0.01)
    assert four["by_turn"]["later"]["n_paired"] == 3
    assert four["by_turn"]["later"]["ratio_p50"] == pytest.approx(550 / 650, abs=0.01)
    verdict = goals(table, [1, 4])["prefill"]["4"]
    assert verdict["p50_kept"] is True
    assert verdict["p50_kept_first"] is False
    assert verdict["p50_kept_later"] is True


def test_every_speculative_decision_is_counted_by_its_reason_per_config_and_k():
    cold_skip = {"outcome": "skipped", "reason": "cannot_finish", "estimate_s": 2.2}
    busy = {"outcome": "yielded", "reason": "busy", "detail": "a cold prefill..."}
    sent = {"outcome": "sent", "reason": "sent"}
    turns = [
        _turn("stock", 4, 0, 3000.0),
        _turn("stock", 4, 1, 700.0),
        # A full pipeline's first turn refused by the speed rule twice, then the load rule.
        _turn(
            "prefill",
            4,
            0,
            3100.0,
            prefill_requests=0,
            prefill_decisions=[cold_skip, cold_skip, busy],
            prefill_skipped_cannot_finish=2,
            prefill_skipped_too_few_new_words=5,
            prefill_yielded=1,
            prefill_yielded_busy=1,
        ),
        _turn(
            "prefill",
            4,
            1,
            600.0,
            prefill_requests=1,
            prefill_decisions=[sent],
            prefill_cancelled=1,
            prefill_cancelled_dispatched=1,
        ),
    ]
    background = [
        # A background caller's first turn: sent (its accounting as the pipeline's fields).
        {
            "config": "prefill",
            "k": 4,
            "turn": 0,
            "reply_ms": 500.0,
            "accounting": {"prefill_requests": 1, "prefill_decisions": [sent]},
        },
        # A draft caller's turn whose drafts the queue held back.
        {
            "config": "prefill",
            "k": 4,
            "turn": 1,
            "reply_ms": 400.0,
            "accounting": {"drafts_yielded_queue": 2, "drafts_over_budget": 1},
        },
    ]
    table = summarize_load(turns, background, [], [], ["stock", "prefill"], [4])
    cell = table["prefill"]["4"]
    assert cell["prefill_decisions"] == {"busy": 1, "cannot_finish": 2, "sent": 2}
    assert cell["prefill_yielded_by"] == {"busy": 1}
    assert cell["prefill_skipped_by"] == {"cannot_finish": 2, "too_few_new_words": 5}
    assert cell["prefill_cancelled_by"] == {"dispatched": 1}
    assert cell["drafts_yielded_by"] == {"queue": 2} and cell["drafts_over_budget"] == 1
    # The first turns: one sent (background), one refused by both rules (counted under each).
    assert cell["first_turn_prefill"] == {
        "turns": 2,
        "sent": 1,
        "cancelled": 0,
        "not_sent_by": {"busy": 1, "cannot_finish": 1},
    }
    assert table["stock"]["4"]["first_turn_prefill"] is None


def test_the_first_turns_speech_start_prefix_decisions_are_counted_apart():
    prefix_busy = {"outcome": "yielded", "reason": "busy", "words": 0}
    prefix_sent = {"outcome": "sent", "reason": "sent", "words": 0}
    words_skip = {"outcome": "skipped", "reason": "cannot_finish", "words": 2}
    turns = [
        _turn("stock", 4, 0, 3000.0),
        _turn(
            "prefill",
            4,
            0,
            900.0,
            prefill_requests=1,
            prefill_prefix_requests=1,
            prefill_decisions=[prefix_sent],
        ),
    ]
    background = [
        {
            "config": "prefill",
            "k": 4,
            "turn": 0,
            "reply_ms": 3000.0,
            "accounting": {"prefill_requests": 0, "prefill_decisions": [prefix_busy, words_skip]},
        },
    ]
    table = summarize_load(turns, background, [], [], ["stock", "prefill"], [4])
    assert table["prefill"]["4"]["first_turn_prefix"] == {
        "turns": 2,
        "sent": 1,
        "decisions": {"busy": 1, "sent": 1},
    }
    assert table["stock"]["4"]["first_turn_prefix"] is None


def test_a_turn_without_a_judged_decision_is_labelled_by_its_other_skips_never_by_pacing():
    from pipecat_fast.bench.load_report import turn_prefill_verdict

    assert turn_prefill_verdict({"prefill_requests": 2}) == ["sent"]
    silent = {"prefill_skipped_silence": 1, "prefill_skipped_in_flight": 3}
    assert turn_prefill_verdict(silent) == ["silence"]
    assert turn_prefill_verdict({"prefill_skipped_too_few_new_words": 4}) == ["not_judged"]
    judged = {"prefill_decisions": [{"reason": "below_minimum"}], "prefill_skipped_silence": 1}
    assert turn_prefill_verdict(judged) == ["below_minimum"]


def test_the_table_columns_say_the_first_turn_reasons():
    from pipecat_fast.bench.load import counts_text, first_turn_text

    first = {"turns": 6, "sent": 2, "not_sent_by": {"busy": 1, "cannot_finish": 3}}
    assert first_turn_text(first) == "2 of 6 (cannot_finish 3, busy 1)"
    assert counts_text({"busy": 2, "sent": 5, "cannot_finish": 9}) == (
        "sent 5, cannot_finish 9, busy 2"
    )
    assert first_turn_text(None) == "-" and counts_text({}) == "-"


def test_a_background_caller_told_its_engine_cannot_read_an_unfinished_prefill_cancels_one(call):
    def caller(behaviour, load):
        return BackgroundCaller(
            call, _endpoints("http://127.0.0.1:9/v1"), behaviour, load=load, label="c0"
        )

    load = EngineLoad("http://127.0.0.1:9")
    told = Behaviour(prefill=True, reuses_unfinished=False)
    assert caller(told, load)._cancels_unfinished()
    # Not told and nothing learnt (the loopback model names no provider that says): unknown.
    assert not caller(Behaviour(prefill=True), load)._cancels_unfinished()
    # Greedy levers never cancel, and without a probe nothing is cancelled either.
    assert not caller(dataclasses.replace(told, yields=False), load)._cancels_unfinished()
    assert not caller(told, None)._cancels_unfinished()
