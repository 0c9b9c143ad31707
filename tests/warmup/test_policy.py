import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipecat_fast.providers import cache_facts, prefix_minimum
from pipecat_fast.warmup import Decision, DecisionLog, PrewarmPolicy, Reason, WarmupTarget
from pipecat_fast.warmup.policy import RecentWarmups

BIG = WarmupTarget(provider="openai", model="gpt-4.1", prefix_tokens=30_000, prefix_hash="p1")


def test_a_large_first_attempt_is_warmed():
    decision = PrewarmPolicy().decide(BIG, now_s=0.0)
    assert decision.warm and decision.reason == Reason.WARM
    assert "30000" in decision.detail and bool(decision)


def test_stt_is_never_warmed_even_when_everything_else_says_warm():
    stt = WarmupTarget(service="stt", provider="openai", prefix_tokens=50_000)
    decision = PrewarmPolicy(skip_retries=False).decide(stt, now_s=0.0)
    assert not decision.warm and decision.reason == Reason.NEVER_STT


def test_a_retry_is_skipped_when_the_caller_says_so_and_warmed_when_retries_are_allowed():
    retry = WarmupTarget(provider="openai", prefix_tokens=30_000, is_retry=True)
    assert PrewarmPolicy().decide(retry, 0.0).reason == Reason.RETRY
    assert PrewarmPolicy(skip_retries=False).decide(retry, 0.0).warm


@pytest.mark.parametrize(
    ("provider", "model"),
    [("openai", "gpt-4.1"), ("anthropic", "claude-haiku-4-5"), ("anthropic", "claude-opus-5")],
)
def test_the_minimum_comes_from_the_registry_per_provider_and_model(provider, model):
    floor = prefix_minimum(provider, model).tokens
    policy = PrewarmPolicy()
    below = WarmupTarget(provider=provider, model=model, prefix_tokens=floor - 1)
    at = WarmupTarget(provider=provider, model=model, prefix_tokens=floor)
    decision = policy.decide(below, 0.0)
    assert decision.reason == Reason.BELOW_MINIMUM and str(floor) in decision.detail
    assert policy.decide(at, 0.0).warm


def test_self_hosted_and_unknown_engines_have_no_floor():
    policy = PrewarmPolicy()
    assert policy.decide(WarmupTarget(provider="llama.cpp", prefix_tokens=40), 0.0).warm
    assert policy.decide(WarmupTarget(provider=None, prefix_tokens=40), 0.0).warm


def test_an_override_minimum_wins_over_the_registry():
    target = WarmupTarget(provider="vllm", prefix_tokens=500)
    assert PrewarmPolicy(min_prefix_tokens=1000).decide(target, 0.0).reason == "below_minimum"


def test_a_wait_longer_than_the_cache_lifetime_is_skipped():
    ttl = cache_facts("anthropic").ttl_s
    assert ttl == 300
    policy = PrewarmPolicy()
    long_wait = WarmupTarget(provider="anthropic", prefix_tokens=20_000, expected_wait_s=ttl + 1)
    short_wait = WarmupTarget(provider="anthropic", prefix_tokens=20_000, expected_wait_s=ttl - 1)
    assert policy.decide(long_wait, 0.0).reason == Reason.WAIT_EXCEEDS_TTL
    assert policy.decide(short_wait, 0.0).warm


def test_no_lifetime_means_no_ttl_skip_on_a_self_hosted_engine():
    target = WarmupTarget(provider="vllm", prefix_tokens=20_000, expected_wait_s=10_000)
    assert PrewarmPolicy().decide(target, 0.0).warm


def test_the_same_prefix_within_its_lifetime_is_already_warm_and_expires_with_it():
    policy = PrewarmPolicy()
    target = WarmupTarget(
        provider="openai", prefix_tokens=5000, prefix_hash="h", expected_wait_s=20
    )
    assert policy.decide(target, now_s=100.0).warm
    policy.record("h", 100.0)
    skipped = policy.decide(target, now_s=200.0)
    assert skipped.reason == Reason.ALREADY_WARM and "100 s ago" in skipped.detail
    # 300 s lifetime: at 381 s the entry would be 301 s old at the first turn (20 s later).
    assert policy.decide(target, now_s=381.0).warm
    other = WarmupTarget(provider="openai", prefix_tokens=5000, prefix_hash="other")
    assert policy.decide(other, now_s=200.0).warm


def test_engine_reuse_window_applies_only_when_given():
    target = WarmupTarget(provider="llama.cpp", prefix_tokens=3000, prefix_hash="h")
    plain, windowed = PrewarmPolicy(), PrewarmPolicy(engine_reuse_window_s=60)
    for policy in (plain, windowed):
        policy.record("h", 0.0)
    assert plain.decide(target, 10.0).warm
    assert windowed.decide(target, 10.0).reason == Reason.ALREADY_WARM
    assert windowed.decide(target, 61.0).warm


def test_rules_apply_in_order_stt_retry_minimum_ttl_recent():
    policy = PrewarmPolicy()
    policy.record("h", 0.0)
    everything = WarmupTarget(
        service="stt",
        provider="openai",
        prefix_tokens=10,
        prefix_hash="h",
        is_retry=True,
        expected_wait_s=10_000,
    )
    assert policy.decide(everything, 1.0).reason == Reason.NEVER_STT
    llm = WarmupTarget(**{**everything.__dict__, "service": "llm"})
    assert policy.decide(llm, 1.0).reason == Reason.RETRY
    first = WarmupTarget(**{**llm.__dict__, "is_retry": False})
    assert policy.decide(first, 1.0).reason == Reason.BELOW_MINIMUM
    big = WarmupTarget(**{**first.__dict__, "prefix_tokens": 9000})
    assert policy.decide(big, 1.0).reason == Reason.WAIT_EXCEEDS_TTL
    soon = WarmupTarget(**{**big.__dict__, "expected_wait_s": 5})
    assert policy.decide(soon, 1.0).reason == Reason.ALREADY_WARM


def test_an_unknown_provider_name_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown provider"):
        PrewarmPolicy().decide(WarmupTarget(provider="nonesuch", prefix_tokens=1), 0.0)


def test_recent_warmups_are_bounded_and_keep_the_newest():
    recent = RecentWarmups(max_keys=3)
    for i in range(5):
        recent.record(f"k{i}", float(i))
    assert len(recent) == 3
    assert recent.last("k0") is None and recent.last("k4") == 4.0
    recent.record("k2", 9.0)  # refreshed: now the newest
    recent.record("k5", 10.0)
    assert recent.last("k2") == 9.0 and recent.last("k3") is None


def test_decision_log_logs_the_first_few_per_reason_then_summarises():
    lines = []
    log = DecisionLog(lines.append, first_n=2, every=5)
    for _ in range(10):
        log(Decision(False, "retry", "a retry"))
    log(Decision(True, "warm", "big prefix"))
    assert [line for line in lines if "skip (retry)" in line] == [
        "warmup: skip (retry): a retry"
    ] * 2
    assert sum("decisions 'retry' so far" in line for line in lines) == 2  # at 5 and 10
    assert "warmup: warm (warm): big prefix" in lines
    assert log.summary() == "retry 10, warm 1"


@given(
    tokens=st.integers(0, 100_000),
    retry=st.booleans(),
    wait=st.one_of(st.none(), st.floats(0, 10_000)),
    provider=st.sampled_from(["openai", "anthropic", "gemini", "vllm", "llama.cpp", None]),
)
def test_a_warm_decision_always_satisfies_every_rule(tokens, retry, wait, provider):
    policy = PrewarmPolicy()
    target = WarmupTarget(
        provider=provider, prefix_tokens=tokens, is_retry=retry, expected_wait_s=wait
    )
    decision = policy.decide(target, 0.0)
    ttl = policy.lifetime_s(target)
    rules_ok = (
        not retry
        and tokens >= policy.minimum(target)
        and not (ttl is not None and wait is not None and wait > ttl)
    )
    assert decision.warm == rules_ok
