import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipecat_fast.prefill.core import (
    CallerTurns,
    PrefillConfig,
    PrefillPlanner,
    ProviderSpeed,
    Skip,
)


def planner_for(**kwargs):
    return PrefillPlanner(PrefillConfig(**kwargs))


def test_first_prefill_early_then_one_per_n_new_words_and_one_at_a_time():
    planner = planner_for(first_words=1, min_new_words=2)
    assert planner.decide(0, 5000, now=0.0) is Skip.TOO_FEW_NEW_WORDS
    assert planner.decide(1, 5000, now=0.0) is None  # the first one carries the context
    assert planner.decide(5, 5000, now=0.1) is Skip.IN_FLIGHT
    planner.finished(True, now=0.2, prompt_tokens=5000, cached_tokens=4900)
    assert planner.decide(2, 5001, now=0.3) is Skip.TOO_FEW_NEW_WORDS  # only 1 new since 1
    assert planner.decide(3, 5002, now=0.3) is None
    assert planner.turn.prefills == 2
    assert planner.turn.prefill_computed_tokens == 100
    assert planner.turn.skipped == {"too_few_new_words": 2, "in_flight": 1}


def test_no_new_prefill_once_the_caller_is_silent_until_they_speak_again():
    planner = planner_for(min_new_words=1)
    planner.caller_silent()
    assert planner.decide(3, 100, now=0.0) is Skip.SILENCE
    planner.caller_speaking()
    assert planner.decide(3, 100, now=0.0) is None


def test_silence_rule_can_be_turned_off():
    planner = planner_for(min_new_words=1, stop_on_silence=False)
    planner.caller_silent()
    assert planner.decide(3, 100, now=0.0) is None


def test_below_the_provider_minimum_nothing_is_sent():
    planner = planner_for(min_new_words=1, min_prompt_tokens=1024)
    assert planner.decide(3, 800, now=0.0) is Skip.BELOW_MINIMUM
    assert planner.decide(4, 1500, now=0.0) is None


def test_a_prompt_under_one_cache_block_cannot_be_cached():
    planner = planner_for(min_new_words=1, min_prompt_tokens=0, block_tokens=16)  # vLLM
    assert planner.decide(1, 15, now=0.0) is Skip.BELOW_MINIMUM
    assert planner.decide(1, 16, now=0.0) is None


def test_a_later_prefill_inside_the_same_cache_block_is_not_sent():
    planner = planner_for(min_new_words=1, min_prompt_tokens=1024, block_tokens=128)  # OpenAI
    assert planner.decide(1, 2000, now=0.0) is None  # cacheable: 1920
    planner.finished(True, now=0.1, prompt_tokens=2000, cached_tokens=0)
    assert planner.decide(2, 2040, now=0.2) is Skip.NO_NEW_BLOCK  # still 1920
    assert planner.decide(3, 2048, now=0.3) is None  # 2048: one block more
    planner.finished(True, now=0.4, prompt_tokens=2048, cached_tokens=1920)
    planner.stop_turn()
    planner.end_turn()
    assert planner.decide(1, 2050, now=1.0) is None  # a new turn's first prefill always may


def test_with_one_token_blocks_every_new_token_counts():
    planner = planner_for(min_new_words=1, block_tokens=1)
    assert planner.decide(1, 40, now=0.0) is None
    planner.finished(True, now=0.1, prompt_tokens=40)
    assert planner.decide(2, 41, now=0.2) is None


def test_config_cacheable_follows_minimum_and_block():
    config = PrefillConfig(min_prompt_tokens=1024, block_tokens=128)
    assert [config.cacheable(n) for n in (0, 1023, 1024, 1100, 1152)] == [0, 0, 1024, 1024, 1152]
    assert PrefillConfig(min_prompt_tokens=0, block_tokens=1).cacheable(1) == 1
    assert PrefillConfig().cacheable(0) == 0


def test_a_provider_that_caches_nothing_of_repeated_prefixes_stops_getting_prefills():
    planner = planner_for(min_new_words=1, uncached_alarm=2)
    assert planner.decide(1, 300, now=0.0) is None
    planner.finished(True, now=0.1, prompt_tokens=300, cached_tokens=0)  # the first is cold
    assert not planner.not_caching_raised
    assert planner.decide(2, 305, now=0.2) is None
    planner.finished(True, now=0.3, prompt_tokens=305, cached_tokens=0)  # repeat: nothing
    assert not planner.not_caching_raised
    assert planner.decide(3, 310, now=0.4) is None
    planner.finished(True, now=0.5, prompt_tokens=310, cached_tokens=0)  # again: the alarm
    assert planner.not_caching_raised
    assert planner.decide(4, 320, now=0.6) is Skip.NOT_CACHING
    # A prompt that grew well past the uncached ones is tried again (a minimum we don't know).
    assert planner.decide(5, 470, now=0.7) is None


def test_cached_tokens_keep_the_caching_alarm_quiet():
    planner = planner_for(min_new_words=1)
    for i in range(6):
        assert planner.decide(i + 1, 2000 + i, now=float(i)) is None
        planner.finished(True, now=i + 0.5, prompt_tokens=2000 + i, cached_tokens=1900)
    assert not planner.not_caching_raised


def test_failures_back_off_exponentially_and_success_resets():
    planner = planner_for(min_new_words=1, backoff_s=1.0, max_backoff_s=3.0)
    assert planner.decide(1, None, now=0.0) is None
    planner.finished(False, now=0.0)
    assert planner.decide(2, None, now=0.5) is Skip.BACKING_OFF
    assert planner.decide(2, None, now=1.0) is None
    planner.finished(False, now=1.0)  # second failure: 2 s
    assert planner.decide(3, None, now=2.5) is Skip.BACKING_OFF
    assert planner.decide(3, None, now=3.0) is None
    planner.finished(False, now=3.0)  # third: capped at 3 s
    assert planner.decide(4, None, now=5.9) is Skip.BACKING_OFF
    assert planner.decide(4, None, now=6.0) is None
    planner.finished(True, now=6.1, prompt_tokens=10, cached_tokens=0)
    assert planner.turn.prefill_failures == 3
    assert planner.decide(5, None, now=6.2) is None  # success reset the backoff


def test_a_confirmed_turn_sends_nothing_more_and_a_new_turn_starts_fresh():
    planner = planner_for(min_new_words=1)
    assert planner.decide(1, None, now=0.0) is None
    planner.stop_turn()
    assert planner.turn_over
    planner.finished(True, now=0.1, prompt_tokens=50, cached_tokens=0)
    assert planner.decide(5, None, now=0.2) is Skip.TURN_ENDED
    account = planner.end_turn()
    assert (account.prefills, account.prefill_prompt_tokens) == (1, 50)
    assert planner.decide(1, None, now=0.3) is None  # counts from zero again


def test_a_new_turn_whose_first_words_come_after_the_vad_stop_sends_nothing():
    planner = planner_for(min_new_words=1)
    assert planner.decide(2, None, now=0.0) is None
    planner.finished(True, now=0.1)
    planner.caller_silent()
    planner.stop_turn()
    planner.end_turn()  # "Yes": the next turn's first stable word arrives with its final
    assert planner.decide(1, None, now=1.0) is Skip.SILENCE
    planner.caller_speaking()
    assert planner.decide(1, None, now=1.1) is None


def test_late_usage_lands_in_the_turn_that_sent_the_prefill():
    planner = planner_for(min_new_words=1)
    assert planner.decide(2, None, now=0.0) is None
    first = planner.end_turn()
    planner.finished(True, now=1.0, prompt_tokens=70, cached_tokens=20)
    assert first.prefill_computed_tokens == 50
    assert planner.turn.prefill_computed_tokens == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"first_words": 0},
        {"min_new_words": -1},
        {"min_new_words": 1.5},
        {"min_prompt_tokens": -1},
        {"block_tokens": "16"},
        {"backoff_s": -1.0},
        {"expected_turn_s": float("nan")},
        {"uncached_alarm": 0},
    ],
)
def test_bad_configuration_is_refused_with_the_field_named(kwargs):
    [name] = kwargs
    with pytest.raises(ValueError, match=name):
        PrefillConfig(**kwargs)


# -- the provider's speed and the "cannot finish" rule -------------------------------------


def test_speed_is_unknown_until_a_cold_request_was_measured():
    speed = ProviderSpeed()
    assert speed.seconds_for(30_000) is None
    speed.add(40, 0.15)  # warm requests measure only the base
    assert speed.seconds_for(100) == pytest.approx(0.15)
    assert speed.seconds_for(30_000) is None
    speed.add(30_000, 3.15)  # a cold one: 3 s above the base for 30k tokens
    assert speed.seconds_for(30_000) == pytest.approx(3.15)
    assert speed.seconds_for(3_000) == pytest.approx(0.45)


def test_speed_takes_a_low_quantile_so_one_slow_request_does_not_swing_it():
    speed = ProviderSpeed()
    for seconds in (0.10, 0.11, 0.12):
        speed.add(10, seconds)
    for uncached, seconds in ((10_000, 1.11), (20_000, 2.11), (5_000, 9.0)):
        speed.add(uncached, seconds)
    assert speed.seconds_for(10_000) == pytest.approx(0.11 + 10_000 * 1e-4, rel=0.01)


# -- the idle speed: load is judged now, not baked into the speed -------------------------

COLD = 3_950  # a caller's cold first turn on the load bench: ~2 s at 2,000 tokens/s alone
IDLE_S = 2.0
LOADED_S = 6.0  # the same prompt while other callers' turns share the engine


def first_word_of_a_new_call(speed):
    """A new session (the speed is pooled per provider) at its caller's first stable word."""
    planner = PrefillPlanner(PrefillConfig(expected_turn_s=2.0, dispatch_s=0.35), speed)
    planner.caller_speaking(now=100.0)
    return planner


def real_cold_turn(speed, seconds, load):
    """Another session's cold first turn: its real request, sent with ``load`` others."""
    planner = PrefillPlanner(PrefillConfig(), speed)
    planner.request_dispatched(now=0.0, load_now=load)
    assert planner.real_request(prompt_tokens=COLD, cached_tokens=0, ttft_s=seconds)


def test_a_speed_learnt_under_load_does_not_stop_a_cold_prefill_once_the_engine_is_idle():
    speed = ProviderSpeed()
    # One idle call first (its prefill sent while the probe saw nothing running)...
    planner = first_word_of_a_new_call(speed)
    assert planner.decide(1, COLD, now=100.1, load_now=0) is None
    planner.finished(True, now=100.1 + IDLE_S, prompt_tokens=COLD, cached_tokens=0)
    # ...then many more, all under load (more than the samples kept): every one slow.
    for _ in range(40):
        real_cold_turn(speed, LOADED_S, load=5)
    assert speed.idle_samples == [(COLD, IDLE_S)]
    # The engine is idle again: ~2 s of prefill fits the ~2.25 s left, so it goes.
    planner = first_word_of_a_new_call(speed)
    assert planner.time_left(100.1) == pytest.approx(2.25)
    assert speed.seconds_for(COLD) == pytest.approx(IDLE_S)
    assert planner.decide(1, COLD, now=100.1, load_now=0) is None


def test_a_process_that_only_saw_load_relearns_from_the_first_idle_request():
    speed = ProviderSpeed()
    for _ in range(10):
        real_cold_turn(speed, LOADED_S, load=3)
    # Nothing says what the engine does alone: the slow speed is all there is.
    assert first_word_of_a_new_call(speed).decide(1, COLD, 100.1) is Skip.CANNOT_FINISH
    # The engine goes idle and a call's cold real request (always sent) measures it alone.
    real_cold_turn(speed, IDLE_S, load=0)
    assert first_word_of_a_new_call(speed).decide(1, COLD, 100.1, load_now=0) is None


def test_idle_samples_still_skip_a_prefill_that_truly_cannot_finish():
    # The large-prompt profile measured alone: 30k uncached tokens in 3.15 s.
    speed = ProviderSpeed()
    planner = PrefillPlanner(PrefillConfig(), speed)
    planner.request_dispatched(now=0.0, load_now=0)
    planner.real_request(prompt_tokens=20, cached_tokens=0, ttft_s=0.15)
    planner.request_dispatched(now=1.0, load_now=0)
    planner.real_request(prompt_tokens=30_000, cached_tokens=0, ttft_s=3.15)
    # Faster samples under load (a smaller engine config, noise) do not override what it does
    # alone.
    for _ in range(5):
        real_cold_turn(speed, 0.5, load=2)
    planner = first_word_of_a_new_call(speed)
    assert planner.decide(1, 30_000, now=100.5, load_now=0) is Skip.CANNOT_FINISH
    assert planner.decide(1, 3_000, now=100.5, load_now=0) is None  # 0.45 s still pays


def test_a_sample_of_unknown_load_is_not_taken_for_idle():
    speed = ProviderSpeed()
    speed.add(COLD, IDLE_S, load=0)
    speed.add(COLD, LOADED_S, load=None)  # no probe reading when it left
    speed.add(COLD, LOADED_S, load=1)
    assert speed.idle_samples == [(COLD, IDLE_S)]
    assert speed.samples == [(COLD, IDLE_S), (COLD, LOADED_S), (COLD, LOADED_S)]


def test_without_a_probe_the_speed_is_the_fast_quarter_of_what_was_measured():
    # A hosted API: no load is ever known. Queueing only adds time, so of eight cold
    # requests (three alone at 0.5 ms/token, five behind others) the estimate is the fast
    # ones', where the median is the slow ones'.
    timings = (2.0, 6.0, 2.0, 6.0, 6.0, 2.0, 6.0, 6.0)
    speed, median = ProviderSpeed(), ProviderSpeed(quantile=0.5)
    for seconds in timings:
        speed.add(4_000, seconds)
        median.add(4_000, seconds)
    assert speed.seconds_for(4_000) == pytest.approx(2.0)
    assert median.seconds_for(4_000) == pytest.approx(6.0)


def test_only_the_most_recent_samples_of_unknown_load_count():
    speed = ProviderSpeed(keep=4)
    for _ in range(4):
        speed.add(COLD, LOADED_S)
    for _ in range(4):
        speed.add(COLD, IDLE_S)  # the old slow ones age out
    assert speed.seconds_for(COLD) == pytest.approx(IDLE_S)


def test_the_queueing_measured_now_counts_but_only_while_it_is_measured():
    speed = ProviderSpeed()
    speed.add(COLD, 1.9, load=0)
    # 1.9 s of compute fits the ~2.25 s left; with 0.5 s of queueing measured now it does not.
    busy = first_word_of_a_new_call(speed)
    assert busy.decide(1, COLD, now=100.1, load_now=1, queue_s=0.5) is Skip.CANNOT_FINISH
    # The queue estimate ages out (None): the same prefill goes.
    calm = first_word_of_a_new_call(speed)
    assert calm.decide(1, COLD, now=100.1, load_now=0, queue_s=None) is None


@pytest.mark.parametrize("quantile", [-0.1, 1.5, float("nan"), True, "low"])
def test_a_bad_quantile_is_refused(quantile):
    with pytest.raises(ValueError, match="quantile"):
        ProviderSpeed(quantile=quantile)


def cold_speed():
    speed = ProviderSpeed()
    speed.add(20, 0.15)
    speed.add(30_000, 3.15)  # 0.1 ms per uncached token: the large-prompt profile
    return speed


def test_a_cold_prefill_that_cannot_finish_before_the_caller_is_done_is_skipped():
    planner = PrefillPlanner(PrefillConfig(expected_turn_s=2.0, dispatch_s=0.35), cold_speed())
    planner.caller_speaking(now=10.0)
    # At 10.5 s: ~1.5 s of speech left + 0.35 s; 30k cold tokens take ~3.2 s.
    assert planner.time_left(10.5) == pytest.approx(1.85)
    assert planner.decide(1, 30_000, now=10.5) is Skip.CANNOT_FINISH
    # A 3k-token prompt (0.45 s) still pays.
    assert planner.decide(1, 3_000, now=10.5) is None


def test_what_the_cache_already_holds_is_not_counted_as_work():
    planner = PrefillPlanner(PrefillConfig(min_new_words=1), cold_speed())
    planner.real_request(prompt_tokens=29_800, cached_tokens=0, ttft_s=3.1)  # turn 0's request
    planner.caller_speaking(now=0.0)
    assert planner.decide(1, 30_000, now=0.5) is None  # 200 uncached tokens: 0.17 s


def test_the_session_learns_how_long_its_caller_talks():
    planner = PrefillPlanner(PrefillConfig(expected_turn_s=2.0, dispatch_s=0.0), cold_speed())
    for start in (0.0, 10.0, 20.0):
        planner.caller_speaking(now=start)
        planner.caller_silent(now=start + 5.2, stop_secs=0.2)  # 5 s turns
    planner.caller_speaking(now=30.0)
    assert planner.time_left(30.5) == pytest.approx(4.5)
    assert planner.decide(1, 30_000, now=30.5) is None  # 3.15 s fits in 4.5 s


def sessions_that_spoke(seconds, n, pool):
    """``n`` earlier sessions of the process, each with one caller turn of ``seconds``."""
    for i in range(n):
        earlier = PrefillPlanner(PrefillConfig(), cold_speed(), pool)
        earlier.caller_speaking(now=10.0 * i)
        earlier.caller_silent(now=10.0 * i + seconds + 0.2, stop_secs=0.2)


def test_a_new_session_judges_its_first_turn_by_how_long_earlier_callers_spoke():
    # 3k cold tokens at 0.55 ms each (1.65 s + 0.15 s base), sent 0.7 s into the first turn.
    speed = ProviderSpeed()
    speed.add(20, 0.15)
    speed.add(3_000, 1.8)
    pool = CallerTurns()
    fresh = PrefillPlanner(PrefillConfig(expected_turn_s=2.0, dispatch_s=0.35), speed, pool)
    fresh.caller_speaking(now=100.0)
    # Nothing known about the callers: the 2 s guess leaves 1.65 s, too little.
    assert fresh.time_left(100.7) == pytest.approx(1.65)
    assert fresh.decide(1, 3_000, now=100.7) is Skip.CANNOT_FINISH
    # Earlier callers of this process spoke for 3 s: the next session's first turn fits.
    sessions_that_spoke(3.0, 3, pool)
    assert pool.typical == pytest.approx(3.0)
    new = PrefillPlanner(PrefillConfig(expected_turn_s=2.0, dispatch_s=0.35), speed, pool)
    new.caller_speaking(now=200.0)
    assert new.time_left(200.7) == pytest.approx(2.65)
    assert new.decide(1, 3_000, now=200.7) is None


def test_too_few_pooled_turns_keep_the_default_and_a_sessions_own_turns_win():
    pool = CallerTurns(min_samples=3)
    sessions_that_spoke(6.0, 2, pool)
    assert pool.typical is None
    planner = PrefillPlanner(PrefillConfig(expected_turn_s=2.0, dispatch_s=0.0), cold_speed(), pool)
    planner.caller_speaking(now=0.0)
    assert planner.time_left(0.0) == pytest.approx(2.0)  # two turns say nothing yet
    sessions_that_spoke(6.0, 1, pool)
    assert planner.time_left(0.0) == pytest.approx(6.0)
    # This session's caller speaks for 1 s: its own turns decide from then on.
    planner.caller_silent(now=1.2, stop_secs=0.2)
    planner.caller_speaking(now=10.0)
    assert planner.time_left(10.0) == pytest.approx(1.0)
    assert pool.typical == pytest.approx(6.0)  # the pool's median barely moves (6, 6, 6, 1)


def test_a_provider_that_reuses_an_unfinished_prefill_is_never_skipped_for_speed():
    speed = ProviderSpeed()  # nothing measured yet: the first cold prefill goes
    planner = PrefillPlanner(PrefillConfig(min_new_words=1), speed)
    planner.caller_speaking(now=0.0)
    assert planner.decide(1, 30_000, now=0.5) is None
    planner.request_dispatched(now=2.0)  # the turn ended with the prefill still running
    planner.finished(True, now=3.5, prompt_tokens=30_000, cached_tokens=0)
    # A serial engine: the real request waited for the prefill and read what it computed.
    planner.real_request(prompt_tokens=30_010, cached_tokens=29_990, ttft_s=1.6)
    assert speed.reuses_unfinished is True
    assert speed.samples == [(30_000, 3.0)]  # the waiting request is no speed sample
    planner.stop_turn()
    planner.end_turn()
    planner.caller_speaking(now=10.0)
    assert planner.decide(1, 90_000, now=10.5) is None  # 6 s of work, but never wasted here


def test_a_provider_that_recomputes_is_marked_so():
    speed = ProviderSpeed()
    planner = PrefillPlanner(PrefillConfig(min_new_words=1), speed)
    assert planner.decide(1, 30_000, now=0.5) is None
    planner.request_dispatched(now=2.0)
    planner.real_request(prompt_tokens=30_010, cached_tokens=0, ttft_s=3.2)
    assert speed.reuses_unfinished is False


def test_the_speed_rule_can_be_turned_off():
    planner = PrefillPlanner(PrefillConfig(skip_unfinishable=False), cold_speed())
    assert planner.decide(1, 300_000, now=0.5) is None


@given(st.lists(st.integers(0, 30), max_size=40))
def test_never_two_in_flight(word_counts):
    planner = planner_for(min_new_words=1)
    in_flight = 0
    for i, words in enumerate(word_counts):
        if planner.decide(words, None, now=float(i)) is None:
            in_flight += 1
            assert in_flight == 1
        if i % 3 == 2 and planner.in_flight:
            planner.finished(True, now=float(i))
            in_flight -= 1


@given(
    st.lists(
        st.tuples(st.integers(0, 40), st.integers(0, 5000), st.booleans(), st.integers(0, 5000)),
        max_size=40,
    ),
    st.sampled_from([1, 16, 128]),
)
def test_every_sent_prefill_is_cacheable_and_adds_a_block(steps, block):
    planner = planner_for(min_new_words=1, min_prompt_tokens=1024, block_tokens=block)
    config = planner.config
    sent_this_turn = []
    for i, (words, tokens, end_turn, reported) in enumerate(steps):
        if end_turn:
            planner.stop_turn()
            planner.end_turn()
            sent_this_turn = []
            continue
        if planner.decide(words, tokens, now=float(i)) is None:
            assert config.cacheable(tokens) > 0
            if sent_this_turn:
                assert config.cacheable(tokens) > config.cacheable(sent_this_turn[-1])
            sent_this_turn.append(tokens)
            planner.finished(True, now=i + 0.5, prompt_tokens=tokens, cached_tokens=reported)


def test_a_failed_prefill_cached_nothing_so_the_next_counts_from_before_it():
    planner = planner_for(min_new_words=4, min_prompt_tokens=1024, block_tokens=128, backoff_s=0)
    assert planner.decide(1, 2000, now=0.0) is None
    planner.finished(False, now=0.1)
    # Not "too few new words" and not "no new block": nothing of the failed one was kept.
    assert planner.decide(2, 2004, now=0.2) is None


def test_usage_that_does_not_say_what_was_cached_is_not_taken_for_zero():
    # llama-cpp-python's server reports no cached tokens at all: neither the caching alarm
    # nor the speed may be judged from it.
    speed = ProviderSpeed()
    planner = PrefillPlanner(PrefillConfig(min_new_words=1), speed)
    for i in range(6):
        assert planner.decide(i + 1, 3000 + i, now=float(i)) is None
        planner.finished(True, now=i + 0.9, prompt_tokens=3000 + i, cached_tokens=None)
    assert not planner.not_caching_raised
    assert speed.samples == []
    assert planner.turn.prefill_computed_tokens == sum(3000 + i for i in range(6))
    planner.request_dispatched(now=10.0)
    planner.real_request(prompt_tokens=3010, cached_tokens=None, ttft_s=0.2)
    assert speed.reuses_unfinished is None and speed.samples == []


def test_a_prefix_an_earlier_turn_cached_is_not_taken_for_reading_the_unfinished_prefill():
    speed = ProviderSpeed()
    planner = PrefillPlanner(PrefillConfig(min_new_words=1), speed)
    planner.real_request(prompt_tokens=29_800, cached_tokens=0, ttft_s=3.1)  # turn 0
    planner.caller_speaking(now=10.0)
    assert planner.decide(1, 31_000, now=10.5) is None  # 1.2k new tokens in flight
    planner.request_dispatched(now=12.0)
    # The real request read turn 0's 29.8k from the cache, none of the prefill's new 1.2k.
    planner.real_request(prompt_tokens=31_010, cached_tokens=29_800, ttft_s=1.0)
    assert speed.reuses_unfinished is False


def test_a_prefill_cancelled_for_load_is_counted_by_reason_and_its_words_count_as_unsent():
    speed = ProviderSpeed()
    planner = PrefillPlanner(PrefillConfig(min_new_words=1), speed)
    planner.caller_speaking(now=0.0)
    assert planner.decide(2, 3_000, now=0.5) is None
    planner.cancelled("contended")
    assert not planner.in_flight
    assert planner.decide(2, 3_000, now=0.6) is None  # the same words may go again later
    planner.request_dispatched(now=1.0)
    planner.cancelled("dispatched")
    # The real request cannot tell whether it would have read the cancelled prefill.
    planner.real_request(prompt_tokens=3_010, cached_tokens=0, ttft_s=1.2)
    assert speed.reuses_unfinished is None
    account = planner.end_turn()
    assert account.cancelled == {"contended": 1, "dispatched": 1}
    assert account.to_dict()["prefill_cancelled"] == 2
    assert account.to_dict()["prefill_cancelled_contended"] == 1


# -- each judged decision carries its reason (the load bench's per-turn report) ---------------


def judged_planner(speed=None, **config):
    planner = PrefillPlanner(
        PrefillConfig(expected_turn_s=2.0, dispatch_s=0.35, min_new_words=1, **config),
        speed if speed is not None else cold_speed(),
    )
    planner.caller_speaking(now=10.0)
    return planner


def test_a_cannot_finish_skip_is_recorded_with_its_estimate_and_the_time_left():
    planner = judged_planner()
    assert planner.decide(1, 30_000, now=10.5, load_now=0, queue_s=0.1) is Skip.CANNOT_FINISH
    (decision,) = planner.turn.decisions
    assert (decision.outcome, decision.reason) == ("skipped", "cannot_finish")
    assert decision.estimate_s == pytest.approx(3.15 + 0.1)  # idle speed + queueing now
    assert decision.time_left_s == pytest.approx(1.85)
    assert decision.work_tokens == 30_000 and decision.load_now == 0
    assert decision.at_s == pytest.approx(0.5) and decision.words == 1
    fields = planner.turn.to_dict()
    assert fields["prefill_skipped_cannot_finish"] == 1
    assert fields["prefill_decisions"] == [decision.to_dict()]
    assert (
        fields["prefill_decisions"][0]["estimate_s"] > fields["prefill_decisions"][0]["time_left_s"]
    )


def test_a_yield_is_recorded_with_the_load_rule_and_its_detail_not_as_a_planner_skip():
    from pipecat_fast.load import Reason, Verdict

    planner = judged_planner()
    asked = []

    def engine_busy(work, idle_s, time_left_s):
        asked.append((work, idle_s, time_left_s))
        return Verdict(False, Reason.QUEUE, "2 requests waiting for a slot")

    assert planner.decide(1, 3_000, now=10.5, engine_busy=engine_busy) is Skip.ENGINE_BUSY
    # The load rule is told what the speed rule found (its estimate and the time left).
    assert asked == [(3_000, pytest.approx(0.15 + 3_000 * 0.0001), pytest.approx(1.85))]
    (decision,) = planner.turn.decisions
    assert (decision.outcome, decision.reason) == ("yielded", "queue")
    assert decision.detail == "2 requests waiting for a slot"
    fields = planner.turn.to_dict()
    assert fields["prefill_yielded"] == 1 and fields["prefill_yielded_queue"] == 1
    assert "prefill_skipped_engine_busy" not in fields  # counted once, as the yield


def test_an_allowing_verdict_sends_and_a_plain_reason_string_still_yields():
    from pipecat_fast.load import Reason, Verdict

    planner = judged_planner()
    allow = Verdict(True, Reason.IDLE, "vllm: running 0")
    assert planner.decide(1, 3_000, now=10.5, engine_busy=lambda *a: allow) is None
    assert [(d.outcome, d.reason) for d in planner.turn.decisions] == [("sent", "sent")]
    planner.finished(True, now=10.9, prompt_tokens=3_000, cached_tokens=0)
    assert planner.decide(3, 3_200, now=11.0, engine_busy=lambda *a: "busy") is Skip.ENGINE_BUSY
    assert [(d.outcome, d.reason) for d in planner.turn.decisions][-1] == ("yielded", "busy")
    assert planner.turn.to_dict()["prefill_yielded_busy"] == 1


def test_size_rules_are_recorded_by_name_and_cheap_pacing_rules_only_counted():
    planner = judged_planner(min_prompt_tokens=1_024)
    assert planner.decide(1, 500, now=10.5) is Skip.BELOW_MINIMUM
    assert planner.decide(0, 500, now=10.6) is Skip.TOO_FEW_NEW_WORDS  # not judged: no record
    assert [(d.outcome, d.reason) for d in planner.turn.decisions] == [("skipped", "below_minimum")]
    fields = planner.turn.to_dict()
    assert fields["prefill_skipped_below_minimum"] == 1
    assert fields["prefill_skipped_too_few_new_words"] == 1


def test_a_turn_keeps_its_first_decisions_and_counts_the_rest():
    from pipecat_fast.prefill.core import DECISIONS_KEPT

    planner = judged_planner()
    for words in range(1, DECISIONS_KEPT + 4):
        planner.decide(words, 30_000, now=10.5)
    assert len(planner.turn.decisions) == DECISIONS_KEPT
    assert planner.turn.to_dict()["prefill_decisions_dropped"] == 3


# -- a cold first turn: which turn length, and when losing costs no one -----------------------


def first_turns_and_later_ones(pool, first_s, later_s, n=3):
    """``n`` earlier sessions: a first turn of ``first_s`` and a later one of ``later_s``."""
    for i in range(n):
        earlier = PrefillPlanner(PrefillConfig(), cold_speed(), pool)
        for start, seconds in ((100.0 * i, first_s), (100.0 * i + 10.0, later_s)):
            earlier.caller_speaking(now=start)
            earlier.caller_silent(now=start + seconds + 0.2, stop_secs=0.2)


def test_a_new_sessions_first_turn_is_judged_by_earlier_first_turns_not_by_every_turn():
    # The load bench's callers: first turns ~2.6 s, later ones ~1.5 s (pooled median 2.05 s).
    pool = CallerTurns()
    first_turns_and_later_ones(pool, 2.6, 1.5)
    assert pool.typical == pytest.approx(2.05)
    assert pool.typical_first == pytest.approx(2.6)
    speed = ProviderSpeed()
    speed.add(20, 0.15)
    speed.add(3_950, 2.1)  # the cold first turn alone
    new = PrefillPlanner(PrefillConfig(expected_turn_s=2.0, dispatch_s=0.35), speed, pool)
    new.caller_speaking(now=500.0)
    # 0.5 s in: 2.6 - 0.5 + 0.35 = 2.45 s left for ~2.1 s of prefill (all turns: 1.9 s).
    assert new.time_left(500.5) == pytest.approx(2.45)
    assert new.decide(1, 3_950, now=500.5, load_now=0) is None


def idle_bet(pool, cancels, load_now):
    speed = ProviderSpeed()
    speed.add(20, 0.15)
    speed.add(3_950, 2.3)
    planner = PrefillPlanner(PrefillConfig(dispatch_s=0.35), speed, pool)
    planner.caller_speaking(now=500.0)
    return planner.decide(1, 3_950, now=500.5, load_now=load_now, cancels_unfinished=cancels)


def test_at_an_idle_engine_that_cancels_an_unfinished_prefill_a_cold_one_plans_for_a_long_turn():
    # First turns of 2.0, 2.4 and 2.8 s: the median leaves 2.25 s at 0.5 s in, for a 2.3 s
    # prefill: refused; a long turn (the 75th percentile, 2.6 s) leaves 2.45 s.
    pool = CallerTurns()
    for i, seconds in enumerate((2.0, 2.4, 2.8)):
        earlier = PrefillPlanner(PrefillConfig(), cold_speed(), pool)
        earlier.caller_speaking(now=100.0 * i)
        earlier.caller_silent(now=100.0 * i + seconds + 0.2, stop_secs=0.2)
    # The engine idle and the `dispatched` rule cancelling it if unfinished: losing costs no
    # one, so it goes.
    assert idle_bet(pool, cancels=True, load_now=0) is None
    # Someone else on the engine would share the lost work: the median turn.
    assert idle_bet(pool, cancels=True, load_now=1) is Skip.CANNOT_FINISH
    # An engine that might read it, or not be told to cancel: it would run beside the real
    # request and slow it: the median turn.
    assert idle_bet(pool, cancels=False, load_now=0) is Skip.CANNOT_FINISH
    # Load unknown (no probe): not taken for idle.
    assert idle_bet(pool, cancels=True, load_now=None) is Skip.CANNOT_FINISH


def test_the_idle_turn_quantile_is_a_share():
    with pytest.raises(ValueError, match="idle_turn_quantile"):
        PrefillConfig(idle_turn_quantile=1.5)


def test_a_request_sent_idle_that_another_joined_is_not_an_idle_sample():
    from pipecat_fast.prefill.core import busiest

    speed = ProviderSpeed()
    planner = PrefillPlanner(PrefillConfig(), speed)
    # Sent into an idle engine, but another caller's turn ran beside it by the time it ended:
    # it shared the compute, so it says nothing of the engine's own speed.
    planner.request_dispatched(now=0.0, load_now=0)
    assert planner.real_request(COLD, 0, ttft_s=2.6, load_after=1)
    planner.request_dispatched(now=10.0, load_now=0)
    assert planner.real_request(COLD, 0, ttft_s=2.1, load_after=0)
    assert speed.idle_samples == [(COLD, 2.1)]
    # A prefill likewise.
    planner.caller_speaking(now=20.0)
    assert planner.decide(1, COLD + 100, now=20.5, load_now=0) is None
    planner.finished(True, 23.0, COLD + 100, COLD, load_after=2)
    assert speed.idle_samples == [(COLD, 2.1)]
    assert busiest(None, 0) is None and busiest(0, None) == 0 and busiest(1, 0) == 1
