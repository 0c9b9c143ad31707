import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipecat_fast.load import (
    CancelReason,
    ComputeRate,
    InFlightPrefill,
    Kind,
    LoadReading,
    ProbeState,
    QueueEstimator,
    Reason,
    YieldConfig,
    cancel_on_dispatch,
    contended,
    decide,
    requests_on_engine,
    reuses_unfinished,
    shared_prefill_s,
)

NOW = 100.0


def state(running=None, waiting=None, capacity=None, age=0.1, **kw):
    return ProbeState(reading=LoadReading(NOW - age, running, waiting, capacity, "llama.cpp"), **kw)


def test_an_idle_engine_lets_both_kinds_go():
    for kind in Kind:
        verdict = decide(kind, state(running=0, waiting=0, capacity=4), None, NOW)
        assert verdict.allow and verdict.reason is Reason.IDLE


def test_requests_waiting_for_a_slot_stop_every_speculative_request():
    for kind in ("prefill", "draft"):
        verdict = decide(kind, state(running=4, waiting=1, capacity=4), None, NOW)
        assert not verdict and verdict.reason is Reason.QUEUE
        assert "1 requests waiting" in verdict.detail


def test_prefills_stop_at_half_the_slots_and_drafts_only_when_none_is_free():
    # 4 slots: a prefill goes while at most one runs; a draft while one is free.
    seen = [state(running=r, waiting=0, capacity=4) for r in range(5)]
    prefill = [decide("prefill", s, None, NOW) for s in seen]
    draft = [decide("draft", s, None, NOW) for s in seen]
    assert [v.allow for v in prefill] == [True, True, False, False, False]
    assert [v.allow for v in draft] == [True, True, True, True, False]
    assert prefill[2].reason is Reason.BUSY and "2 of 4 slots" in prefill[2].detail


def test_a_serial_engine_takes_a_prefill_only_when_idle():
    assert decide("prefill", state(running=0, waiting=0, capacity=1), None, NOW)
    assert not decide("prefill", state(running=1, waiting=0, capacity=1), None, NOW)


def test_requests_sent_since_the_reading_count_as_running():
    # The reading says 1 of 4; this process has sent another since: 2 of 4 stops prefills.
    seen = state(running=1, waiting=0, capacity=4, sent_since_reading=1)
    verdict = decide("prefill", seen, None, NOW)
    assert verdict.reason is Reason.BUSY


def test_without_capacity_only_the_queue_rule_applies_unless_a_limit_is_given():
    busy = state(running=50, waiting=0, capacity=None)
    assert decide("prefill", busy, None, NOW).allow
    limited = YieldConfig(running_limit=8)
    assert decide("prefill", busy, None, NOW, limited).reason is Reason.BUSY


def test_a_reading_too_old_while_the_probe_waits_is_stale_and_denies():
    probe = state(running=0, waiting=0, capacity=4, age=1.5, waiting_since_s=NOW - 1.4)
    verdict = decide("prefill", probe, None, NOW)
    assert not verdict and verdict.reason is Reason.STALE


def test_the_first_probe_still_in_flight_denies_until_the_engine_answers():
    verdict = decide("draft", ProbeState(waiting_since_s=NOW - 0.01), None, NOW)
    assert verdict.reason is Reason.STALE


def test_a_failing_probe_denies():
    verdict = decide("draft", state(running=0, waiting=0, capacity=4, failing=True), None, NOW)
    assert not verdict and verdict.reason is Reason.DOWN


def test_measured_queueing_decides_where_the_engine_says_nothing():
    assert decide("prefill", None, 0.05, NOW).reason is Reason.IDLE
    slow = decide("prefill", None, 0.4, NOW)
    assert not slow and slow.reason is Reason.SLOW and "400 ms" in slow.detail
    # ... and on top of an idle reading
    idle = state(running=0, waiting=0, capacity=4)
    assert decide("prefill", idle, 0.4, NOW).reason is Reason.SLOW


def test_knowing_nothing_keeps_the_one_caller_behaviour():
    verdict = decide("prefill", None, None, NOW)
    assert verdict.allow and verdict.reason is Reason.UNKNOWN


def test_disabled_never_yields():
    off = YieldConfig(enabled=False)
    jammed = state(running=4, waiting=9, capacity=4, failing=True)
    verdict = decide("prefill", jammed, 9.0, NOW, off)
    assert verdict.allow and verdict.reason is Reason.OFF


@pytest.mark.parametrize(
    "kwargs",
    [
        {"prefill_busy": 0},
        {"draft_busy": 1.5},
        {"max_waiting": -1},
        {"running_limit": 2.5},
        {"max_queue_s": -0.1},
        {"stale_s": "1"},
        {"prefill_busy": True},
    ],
)
def test_bad_config_is_a_clear_error(kwargs):
    with pytest.raises(ValueError, match="YieldConfig"):
        YieldConfig(**kwargs)


readings = st.builds(
    ProbeState,
    reading=st.one_of(
        st.none(),
        st.builds(
            LoadReading,
            at_s=st.floats(0, NOW),
            running=st.one_of(st.none(), st.integers(0, 64)),
            waiting=st.one_of(st.none(), st.integers(0, 64)),
            capacity=st.one_of(st.none(), st.integers(1, 64)),
        ),
    ),
    failing=st.booleans(),
    waiting_since_s=st.one_of(st.none(), st.floats(0, NOW)),
    sent_since_reading=st.integers(0, 8),
)


@given(probe=st.one_of(st.none(), readings), queue=st.one_of(st.none(), st.floats(0, 5)))
def test_a_draft_is_never_held_back_where_a_prefill_would_go(probe, queue):
    # Drafts yield later than prefills (a reused draft is the real request sent early).
    if decide("prefill", probe, queue, NOW).allow:
        assert decide("draft", probe, queue, NOW).allow


@given(probe=readings, queue=st.one_of(st.none(), st.floats(0, 5)), extra=st.integers(1, 8))
def test_more_load_never_turns_a_denial_into_an_allowance(probe, queue, extra):
    reading = probe.reading
    if reading is None:
        return
    heavier = ProbeState(
        reading=LoadReading(
            reading.at_s,
            None if reading.running is None else reading.running + extra,
            None if reading.waiting is None else reading.waiting + extra,
            reading.capacity,
        ),
        failing=probe.failing,
        waiting_since_s=probe.waiting_since_s,
        sent_since_reading=probe.sent_since_reading,
    )
    for kind in Kind:
        if not decide(kind, probe, queue, NOW).allow:
            assert not decide(kind, heavier, queue, NOW).allow


def test_queue_estimator_measures_excess_over_the_fastest_warm_request():
    q = QueueEstimator(window_s=10.0)
    assert q.queue_s(0.0) is None
    for t, s in [(0.0, 0.10), (1.0, 0.11), (2.0, 0.10)]:
        q.add(20, s, t)
    assert q.queue_s(2.0) == pytest.approx(0.0, abs=0.011)
    for t in (3.0, 4.0, 5.0, 6.0):
        q.add(30, 0.60, t)  # the engine now queues every request ~0.5 s
    assert q.queue_s(6.0) == pytest.approx(0.5, abs=0.01)
    # Cold requests say nothing about queueing (their time is prefill).
    q.add(3000, 9.0, 7.0)
    assert q.queue_s(7.0) == pytest.approx(0.5, abs=0.01)
    # Old samples leave the window: nothing recent, no estimate.
    assert q.queue_s(30.0) is None


def test_queue_estimator_keeps_bounded_memory():
    q = QueueEstimator(history=8)
    for i in range(1000):
        q.add(10, 0.1, float(i))
    assert len(q) == 8


def test_a_cold_prefill_goes_only_while_the_engine_runs_nothing_else():
    # 1 of 4 slots running leaves room for a small increment, not for a big cold prefill:
    # continuous batching shares the compute, so it would slow the running caller's turn.
    one = state(running=1, waiting=0, capacity=4)
    assert decide("prefill", one, None, NOW, work_tokens=40).allow
    cold = decide("prefill", one, None, NOW, work_tokens=3000)
    assert cold.reason is Reason.BUSY and "cold prefill of ~3000 tokens" in cold.detail
    assert decide("prefill", state(running=0, waiting=0, capacity=4), None, NOW, work_tokens=3000)
    # Drafts are the real request sent early: the cold rule is the prefill's alone.
    assert decide("draft", one, None, NOW, work_tokens=3000).allow
    # The threshold is configurable.
    lenient = YieldConfig(cold_tokens=5000)
    assert decide("prefill", one, None, NOW, lenient, work_tokens=3000).allow


def test_the_cold_threshold_must_be_a_count():
    with pytest.raises(ValueError):
        YieldConfig(cold_tokens=-1)


# -- cancelling a prefill in flight ---------------------------------------------------------


def test_a_prefill_is_cancelled_at_its_real_request_only_where_the_engine_cannot_read_it():
    prefill = InFlightPrefill(NOW - 0.5, work_tokens=2000)
    verdict = cancel_on_dispatch(prefill, reuses=False)
    assert verdict and verdict.reason is CancelReason.DISPATCHED
    # Unknown keeps it (the one-caller behaviour, and how the answer is learnt); a serial
    # engine whose real request reads the unfinished prefill keeps it.
    assert not cancel_on_dispatch(prefill, reuses=None)
    assert not cancel_on_dispatch(prefill, reuses=True)
    assert not cancel_on_dispatch(None, reuses=False)
    assert not cancel_on_dispatch(prefill, False, YieldConfig(cancel_on_dispatch=False))
    assert not cancel_on_dispatch(prefill, False, YieldConfig(enabled=False))


def test_whether_an_engine_reuses_an_unfinished_prefill_measured_first_then_registry_then_probe():
    assert reuses_unfinished(True, False, "llama.cpp") is True
    assert reuses_unfinished(None, True, "llama.cpp") is True
    assert reuses_unfinished(None, None, "llama.cpp") is False  # slotted, by its probe
    assert reuses_unfinished(None, None, "llama.cpp /slots") is False
    assert reuses_unfinished(None, None, "vllm") is None
    assert reuses_unfinished(None, None, "") is None


def reading_after(sent_at, running, waiting=0):
    return LoadReading(sent_at + 0.1, running, waiting, 4, "vllm")


def test_a_prefill_still_computing_is_cancelled_when_another_callers_request_starts():
    prefill = InFlightPrefill(NOW - 1.0, work_tokens=4000, tokens_per_s=2000.0)
    # Only this prefill runs: keep it.
    assert not contended(prefill, reading_after(prefill.sent_at_s, 1), 1, NOW)
    # One more request runs (another caller's turn): ~2,000 tokens left, cancel.
    verdict = contended(prefill, reading_after(prefill.sent_at_s, 2), 1, NOW)
    assert verdict and verdict.reason is CancelReason.CONTENDED
    assert "1 other requests running" in verdict.detail and "~2000" in verdict.detail
    # A request waiting for a slot counts too.
    assert contended(prefill, reading_after(prefill.sent_at_s, 1, waiting=1), 1, NOW)
    # Another of this process's prefills is not another caller's turn.
    assert not contended(prefill, reading_after(prefill.sent_at_s, 2), 2, NOW)


def test_a_prefill_is_kept_when_nearly_done_already_serving_its_turn_or_judged_by_an_old_reading():
    nearly = InFlightPrefill(NOW - 1.9, work_tokens=4000, tokens_per_s=2000.0)  # ~200 left
    assert nearly.remaining(NOW) < YieldConfig().cold_tokens
    assert not contended(nearly, reading_after(nearly.sent_at_s, 3), 1, NOW)
    busy = reading_after(NOW - 1.0, 3)
    assert not contended(InFlightPrefill(NOW - 1.0, 4000, dispatched=True), busy, 1, NOW)
    assert not contended(InFlightPrefill(NOW - 1.0, None), busy, 1, NOW)  # size unknown
    older = LoadReading(NOW - 2.0, 3, 0, 4, "vllm")  # taken before the prefill left
    assert not contended(InFlightPrefill(NOW - 1.0, 4000), older, 0, NOW)
    off = YieldConfig(cancel_contended=False)
    assert not contended(InFlightPrefill(NOW - 1.0, 4000), busy, 1, NOW, off)


def test_an_in_flight_prefills_remaining_work_is_its_size_less_what_the_rate_computed():
    assert InFlightPrefill(10.0, 1000, 500.0).remaining(11.0) == 500
    assert InFlightPrefill(10.0, 1000, 500.0).remaining(13.0) == 0
    assert InFlightPrefill(10.0, 1000).remaining(13.0) == 1000  # no rate: all of it
    assert InFlightPrefill(10.0).remaining(13.0) is None


def test_prefills_in_flight_with_cold_work_left_hold_back_a_new_prefill_but_not_a_draft():
    # One request of 8 slots runs: the slot rules allow both kinds...
    heavy = state(running=1, waiting=0, capacity=8, prefill_tokens_in_flight=1500)
    verdict = decide("prefill", heavy, None, NOW, work_tokens=40)
    assert not verdict and verdict.reason is Reason.BUSY
    assert "~1500 tokens to compute" in verdict.detail
    # ...a draft is the turn's request sent early: it goes (and the prefill is what yields).
    assert decide("draft", heavy, None, NOW).allow
    light = state(running=1, waiting=0, capacity=8, prefill_tokens_in_flight=100)
    assert decide("prefill", light, None, NOW, work_tokens=40).allow


def test_the_compute_rate_is_the_median_of_cold_samples():
    rate = ComputeRate(min_tokens=256, keep=3)
    assert rate.tokens_per_s() is None
    rate.add(100, 0.01)  # warm: mostly latency, not a sample
    assert rate.tokens_per_s() is None
    for tokens, seconds in ((1000, 1.0), (2000, 1.0), (3000, 1.0), (4000, 1.0)):
        rate.add(tokens, seconds)
    assert rate.tokens_per_s() == 3000.0  # the last three kept


# -- what a request's timing is tagged with (the provider's idle speed) ---------------------


def test_requests_on_the_engine_count_the_reading_and_what_this_process_sent_since():
    assert requests_on_engine(state(running=0, waiting=0, capacity=4), NOW) == 0
    assert requests_on_engine(state(running=2, waiting=1, capacity=4), NOW) == 3
    # A prefill another session sent after the reading is not in it yet, but it runs.
    assert requests_on_engine(state(running=0, waiting=0, sent_since_reading=1), NOW) == 1
    assert requests_on_engine(state(running=None, waiting=0), NOW) == 0  # a queue-only gauge


def test_without_a_current_reading_the_engine_load_is_unknown_not_idle():
    assert requests_on_engine(None, NOW) is None  # no probe (a hosted API)
    assert requests_on_engine(ProbeState(), NOW) is None  # before the first reading
    assert requests_on_engine(state(running=0, waiting=0, failing=True), NOW) is None
    old = state(running=0, waiting=0, age=1.5)  # older than stale_s: says nothing of now
    assert requests_on_engine(old, NOW) is None
    assert requests_on_engine(old, NOW, YieldConfig(stale_s=2.0)) == 0
    assert requests_on_engine(state(), NOW) is None  # the page had neither gauge


# -- a cold prefill of the turn's prefix moves compute: it may share the engine if it fits ----


def test_a_cold_prefill_sharing_the_engine_goes_if_it_still_finishes_before_its_real_request():
    one = state(running=1, waiting=0, capacity=4)
    # ~1 s alone, 2 sharers: ~2 s, and the caller is done in 2.4 s: it goes (today's rule, with
    # nothing timed, refuses any cold prefill beside a running request).
    verdict = decide("prefill", one, None, NOW, work_tokens=2000, idle_s=1.0, time_left_s=2.4)
    assert verdict.allow and verdict.reason is Reason.IDLE
    # ~2 s alone would take ~4 s shared: refused, and the detail says by how much.
    refused = decide("prefill", one, None, NOW, work_tokens=4000, idle_s=2.0, time_left_s=2.4)
    assert not refused and refused.reason is Reason.BUSY
    assert "~4.00 s" in refused.detail and "~2.40 s" in refused.detail
    # This process's speculative requests sent since the reading share the engine too.
    two = state(running=1, waiting=0, capacity=4, sent_since_reading=1)
    assert not decide("prefill", two, None, NOW, work_tokens=2000, idle_s=1.0, time_left_s=2.4)
    # Slots and queue still come first: half the slots running, or anyone waiting, stops it.
    half = state(running=2, waiting=0, capacity=4)
    assert not decide("prefill", half, None, NOW, work_tokens=2000, idle_s=0.1, time_left_s=9)
    queued = state(running=1, waiting=1, capacity=4)
    assert not decide("prefill", queued, None, NOW, work_tokens=2000, idle_s=0.1, time_left_s=9)


def test_a_timed_cold_prefill_counts_the_prefills_in_flight_as_sharers_not_as_a_veto():
    # Another session's cold prefill is in flight (1 running, ~1,500 tokens left): untimed,
    # the in-flight rule holds a new prefill back; timed, it is one more sharer.
    heavy = state(running=1, waiting=0, capacity=8, prefill_tokens_in_flight=1500)
    assert not decide("prefill", heavy, None, NOW, work_tokens=3000)
    timed = decide("prefill", heavy, None, NOW, work_tokens=3000, idle_s=1.2, time_left_s=2.5)
    assert timed.allow
    assert not decide("prefill", heavy, None, NOW, work_tokens=3000, idle_s=1.3, time_left_s=2.5)


def test_shared_prefill_time_counts_every_request_on_the_engine_as_an_equal_sharer():
    assert shared_prefill_s(2.0, 0) == pytest.approx(2.0)
    assert shared_prefill_s(2.0, 1) == pytest.approx(4.0)
    assert shared_prefill_s(2.0, 3) == pytest.approx(8.0)
    assert shared_prefill_s(-1.0, -2) == 0.0


def test_a_prefill_admitted_beside_running_requests_is_cancelled_only_by_new_ones():
    # Sent while one other caller's request ran: judged to finish beside it.
    prefill = InFlightPrefill(NOW - 1.0, work_tokens=4000, tokens_per_s=2000.0, others_at_send=1)
    assert not contended(prefill, reading_after(prefill.sent_at_s, 2), 1, NOW)
    # A second caller's request starts (or waits): that one it was not judged against.
    verdict = contended(prefill, reading_after(prefill.sent_at_s, 3), 1, NOW)
    assert verdict and verdict.reason is CancelReason.CONTENDED
    assert contended(prefill, reading_after(prefill.sent_at_s, 2, waiting=1), 1, NOW)
