from dataclasses import replace

import pytest

from pipecat_fast.warmup.traffic import (
    SEED000,
    SEED001,
    SMALL,
    Traffic,
    Warmup,
    markdown,
    simulate,
    table,
)

# Seed 000's shares on a tenth of its day (the same shares, a faster test).
DAY = Traffic(calls=4_810, retries=1_586, dead_retries=1_514, day_s=8_640.0)


def run(strategy, prompt=SEED001, traffic=DAY, **kwargs):
    return simulate(strategy, prompt, traffic, **kwargs)


def test_the_day_has_seed_000s_shares():
    full = Traffic()
    assert full.talking == 4_329  # 9 % of 48,103 talk: not the 28 % nor the 63 %
    assert full.talking_retries == 716
    assert run("never").talking_calls == DAY.talking


def test_never_warm_spends_no_warmup_tokens_and_every_first_turn_is_cold():
    result = run("never")
    cold = SEED001.warm_first_turn_ms + SEED001.prefix_tokens * SEED001.prefill_ms_per_token
    assert result.warmup_prompt_tokens == 0 and result.warmed_calls == 0
    assert all(t == pytest.approx(cold) for t in result.first_turn_ttfa_ms)


def test_always_warm_warms_every_call_and_makes_the_first_turn_warm():
    result = run("always")
    summary = result.summary()
    assert result.warmed_calls == DAY.calls
    per_call = Warmup().requests * (SEED001.prefix_tokens + SEED001.warmup_user_tokens)
    assert result.warmup_prompt_tokens == DAY.calls * per_call
    assert summary["first_turn_ttfa_p50_ms"] < 1_000  # warm: 900 ms + one turn's prefill
    assert summary["warmup_share_pct"] > 80  # the bill is for calls nobody talked in


def test_the_policy_skips_retries_and_keeps_the_median_gain_for_far_fewer_tokens():
    always, policy = run("always").summary(), run("policy").summary()
    assert policy["skips"] == {"retry": DAY.retries}
    assert policy["warmed_calls"] == DAY.calls - DAY.retries
    assert policy["prompt_tokens_per_answered"] < 0.75 * always["prompt_tokens_per_answered"]
    assert policy["first_turn_ttfa_p50_ms"] == always["first_turn_ttfa_p50_ms"]
    # the talking retries (~17 % of talking calls) now start cold: p95 pays
    assert policy["first_turn_ttfa_p95_ms"] > always["first_turn_ttfa_p95_ms"] + 2000


def test_below_the_minimum_always_warm_pays_for_nothing_and_the_policy_sends_none():
    never, always, policy = (run(s, SMALL).summary() for s in ("never", "always", "policy"))
    assert policy["warmed_calls"] == 0 and policy["skips"]["below_minimum"] > 0
    assert policy["prompt_tokens_per_answered"] == never["prompt_tokens_per_answered"]
    assert always["first_turn_ttfa_mean_ms"] == never["first_turn_ttfa_mean_ms"]
    assert always["prompt_tokens_per_answered"] > 5 * never["prompt_tokens_per_answered"]


def test_a_prefix_shared_by_every_call_is_warmed_about_once_per_cache_lifetime():
    shared = replace(SEED000, shared_prefix=True)
    policy = run("policy", shared)
    # calls every ~2 s keep one shared prompt warm: the policy warms it once, then live
    # traffic and later calls' rings find it warm
    assert 1 <= policy.warmed_calls <= DAY.day_s / 300 + 1
    assert policy.skips["already_warm"] >= DAY.calls - DAY.retries - policy.warmed_calls
    assert (
        policy.summary()["first_turn_ttfa_p50_ms"]
        == run("always", shared).summary()["first_turn_ttfa_p50_ms"]
    )


def test_waiting_longer_than_the_cache_lifetime_makes_the_policy_skip():
    queued = replace(DAY, wait_s=400.0)  # e.g. an outbound call held in a queue
    always, policy = run("always", traffic=queued), run("policy", traffic=queued)
    assert policy.warmed_calls == 0 and policy.skips["wait_exceeds_ttl"] > 0
    # the entry expired before the first turn: always-warm paid and gained nothing
    assert (
        always.summary()["first_turn_ttfa_p50_ms"]
        == run("never", traffic=queued).summary()["first_turn_ttfa_p50_ms"]
    )


def test_the_simulation_is_deterministic_per_seed_and_renders_a_table():
    a = table(scenarios=[SMALL], traffic=DAY, seed=3)
    assert a == table(scenarios=[SMALL], traffic=DAY, seed=3)
    text = markdown(a)
    assert text.count("\n") == 1 + 3 and "| policy |" in text


def test_an_unknown_strategy_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown strategy"):
        run("sometimes")
