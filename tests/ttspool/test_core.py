"""The pool's pure lifecycle: every path, and invariants over random event sequences."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipecat_fast.ttspool.core import (
    Close,
    Dial,
    LanePlan,
    Note,
    PoolConfig,
    PoolCore,
    Probe,
    Role,
    SendKeepalive,
    SlotState,
)

WARM = LanePlan(prewarm=True)


def only(actions, kind):
    return [a for a in actions if isinstance(a, kind)]


def open_warm(core, call="c", plan=WARM, now=0.0):
    (dial,) = only(core.open_call(call, plan, now), Dial)
    assert core.dial_succeeded(dial.slot_id, now + 0.1) == []
    return dial.slot_id


def test_warm_socket_is_dialled_at_ring_and_handed_over():
    core = PoolCore()
    actions = core.open_call("c", WARM, 0.0)
    assert actions == [Dial(actions[0].slot_id, "c", Role.WARM)]
    assert core.held == 1 and core.pending_dial("c") == actions[0].slot_id
    core.dial_succeeded(actions[0].slot_id, 0.2)
    assert core.pending_dial("c") is None
    grant, more = core.acquire("c", 5.0)
    assert grant.kind == "reuse" and grant.slot_id == actions[0].slot_id
    assert more == [] and core.held == 0
    stats = core.stats("c")
    assert (stats.acquires, stats.reused, stats.service_dials, stats.pool_dials) == (1, 1, 0, 1)
    assert stats.acquire_log[0].kind == "reused"


def test_no_prewarm_means_the_service_dials_and_counts_it():
    core = PoolCore()
    assert core.open_call("c", LanePlan(prewarm=False), 0.0) == []
    grant, actions = core.acquire("c", 1.0)
    assert grant.kind == "dial" and actions == []
    assert core.stats("c").service_dials == 1
    assert core.stats("c").acquire_log[0].kind == "dialled"


def test_waited_acquire_is_counted_as_waited():
    core = PoolCore()
    (dial,) = core.open_call("c", WARM, 0.0)
    core.dial_succeeded(dial.slot_id, 0.5)
    grant, _ = core.acquire("c", 0.5, waited_ms=120.0)
    assert grant.kind == "reuse"
    stats = core.stats("c")
    assert (stats.waited, stats.reused) == (1, 0)
    assert stats.acquire_log[0].wait_ms == 120.0


def test_spare_is_dialled_after_each_hand_over():
    core = PoolCore()
    open_warm(core, plan=LanePlan(prewarm=True, spare=True))
    grant, actions = core.acquire("c", 1.0)
    assert grant.kind == "reuse"
    (spare,) = only(actions, Dial)
    assert spare.role is Role.SPARE
    core.dial_succeeded(spare.slot_id, 1.2)
    # A barge-in: the service reconnects and gets the spare; another spare follows.
    grant, actions = core.acquire("c", 3.0)
    assert grant.slot_id == spare.slot_id and only(actions, Dial)[0].role is Role.SPARE
    assert core.stats("c").reused == 2 and core.stats("c").service_dials == 0


def test_acquire_while_the_spare_is_still_dialling_keeps_it_as_the_next_spare():
    core = PoolCore()
    open_warm(core, plan=LanePlan(prewarm=True, spare=True))
    _, actions = core.acquire("c", 1.0)
    spare = only(actions, Dial)[0]
    grant, actions = core.acquire("c", 1.01)  # a reconnect before the spare opened
    assert grant.kind == "dial" and actions == []  # the dial in flight stays the spare
    assert core.pending_dial("c") == spare.slot_id


def test_without_spare_plan_leftovers_are_closed_at_acquire():
    core = PoolCore()
    (dial,) = core.open_call("c", WARM, 0.0)
    grant, actions = core.acquire("c", 0.01)  # the service did not wait for the dial
    assert grant.kind == "dial"
    assert actions == [Close(dial.slot_id, "superseded")]
    assert core.held == 0
    assert core.dial_succeeded(dial.slot_id, 0.2) == [Close(dial.slot_id, "no longer wanted")]


def test_held_socket_that_dies_young_is_replaced_until_the_budget_runs_out():
    core = PoolCore(PoolConfig(max_redials=2, stable_after_s=30))
    slot = open_warm(core)
    for n in range(2):
        actions = core.closed(slot, 1.0 + n, "close code 1011")
        (dial,) = only(actions, Dial)
        assert dial.role is Role.WARM
        core.dial_succeeded(dial.slot_id, 1.5 + n)
        slot = dial.slot_id
    actions = core.closed(slot, 3.0, "close code 1011")
    assert only(actions, Dial) == []
    assert [a.key for a in only(actions, Note)] == ["redials_exhausted"]
    assert core.stats("c").replaced == 2
    grant, _ = core.acquire("c", 4.0)
    assert grant.kind == "dial"


def test_idle_close_of_a_long_held_socket_costs_no_budget():
    core = PoolCore(PoolConfig(max_redials=0, stable_after_s=30))
    slot = open_warm(core)
    actions = core.closed(slot, 100.0, "close code 1000")
    assert len(only(actions, Dial)) == 1


def test_failed_dial_is_not_retried_and_says_so():
    core = PoolCore()
    (dial,) = core.open_call("c", WARM, 0.0)
    actions = core.dial_failed(dial.slot_id, 0.3, "HTTP 429")
    (note,) = actions
    assert note.level == "warning" and "HTTP 429" in note.text and note.key == "dial_failed"
    assert core.held == 0 and core.stats("c").dial_failures == 1
    assert core.acquire("c", 1.0)[0].kind == "dial"


def test_probe_cycle_and_silent_socket_replacement():
    core = PoolCore(PoolConfig(probe_interval_s=10, probe_timeout_s=5))
    slot = open_warm(core)  # opened at 0.1
    assert core.next_deadline() == pytest.approx(10.1)
    assert core.tick(10.0) == []
    assert core.tick(10.1) == [Probe(slot)]
    core.alive(slot, 10.2)
    assert core.next_deadline() == pytest.approx(20.2)
    assert core.tick(20.2) == [Probe(slot)]
    actions = core.tick(25.2)  # no pong within the timeout
    assert Close(slot, "no answer to a ping") in actions
    (dial,) = only(actions, Dial)
    assert core.slot(slot) is None and core.slot(dial.slot_id).state is SlotState.DIALING


def test_keepalive_every_interval_on_held_sockets():
    core = PoolCore(PoolConfig(probe_interval_s=1000))
    slot = open_warm(core, plan=LanePlan(prewarm=True, keepalive_s=10))
    sent = [t for t in range(0, 60) if SendKeepalive(slot) in core.tick(float(t) + 0.1)]
    assert sent == [10, 20, 30, 40, 50]
    assert core.stats("c").keepalives == 5


def test_replaced_ahead_of_the_idle_close_without_keepalive():
    core = PoolCore(PoolConfig(idle_margin_s=15, probe_interval_s=1000))
    old = open_warm(core, plan=LanePlan(prewarm=True, idle_close_s=300))
    assert core.tick(285.0) == []
    (dial,) = only(core.tick(285.1), Dial)
    assert core.held == 2  # the old one serves until the new one is open
    assert core.dial_succeeded(dial.slot_id, 285.4) == [Close(old, "replaced by a fresh socket")]
    assert core.held == 1 and core.stats("c").replaced == 1
    grant, _ = core.acquire("c", 290.0)
    assert grant.slot_id == dial.slot_id


def test_hangup_closes_everything_held_and_returns_the_stats():
    core = PoolCore()
    slot = open_warm(core, plan=LanePlan(prewarm=True, spare=True))
    _, actions = core.acquire("c", 1.0)
    spare = only(actions, Dial)[0].slot_id
    stats, actions = core.hangup("c", 2.0)
    assert actions == [Close(spare, "call ended")]
    assert stats.reused == 1 and core.held == 0 and core.calls() == []
    assert core.slot(slot) is None and core.next_deadline() is None
    assert core.hangup("c", 3.0) == (None, [])
    assert core.acquire("c", 3.0)[0].kind == "dial"


def test_never_answered_call_is_given_up_after_max_ring():
    core = PoolCore(PoolConfig(max_ring_s=60, probe_interval_s=1000))
    slot = open_warm(core)
    assert core.next_deadline() == pytest.approx(60.0)
    actions = core.tick(60.0)
    assert Close(slot, "ring timeout") in actions
    assert [a.key for a in only(actions, Note)] == ["ring_timeout"]
    assert core.held == 0 and core.next_deadline() is None
    assert core.tick(70.0) == []
    assert core.acquire("c", 80.0)[0].kind == "dial"  # answered late: stock path


def test_pool_full_is_noted_and_the_service_dials():
    core = PoolCore(PoolConfig(max_held=2))
    core.open_call("a", WARM, 0.0)
    core.open_call("b", WARM, 0.0)
    actions = core.open_call("c", WARM, 0.0)
    assert only(actions, Dial) == [] and [a.key for a in actions] == ["pool_full"]
    assert core.held == 2
    core.hangup("a", 1.0)
    assert len(only(core.open_call("d", WARM, 1.0), Dial)) == 1


def test_dial_finishing_after_hangup_is_closed():
    core = PoolCore()
    (dial,) = core.open_call("c", WARM, 0.0)
    _, actions = core.hangup("c", 0.1)
    assert actions == [Close(dial.slot_id, "call ended")]
    assert core.dial_succeeded(dial.slot_id, 0.2) == [Close(dial.slot_id, "no longer wanted")]


def test_discard_closes_without_replacement():
    core = PoolCore()
    slot = open_warm(core)
    actions = core.discard(slot, 1.0, "dialled for another URI/headers")
    assert actions[0] == Close(slot, "dialled for another URI/headers")
    assert only(actions, Dial) == [] and core.held == 0


def test_bad_config_and_duplicate_calls_are_rejected():
    with pytest.raises(ValueError):
        PoolConfig(max_held=-1)
    with pytest.raises(ValueError):
        PoolConfig(probe_timeout_s=0)
    core = PoolCore()
    core.open_call("c", WARM, 0.0)
    with pytest.raises(ValueError, match="already in the pool"):
        core.open_call("c", WARM, 0.0)


# -- invariants over random event sequences ---------------------------------------------------

CALLS = ["a", "b", "c"]
events = st.lists(
    st.tuples(
        st.sampled_from(
            ["open", "ok", "fail", "close", "alive", "acquire", "hangup", "tick", "discard"]
        ),
        st.sampled_from(CALLS),
        st.integers(0, 7),  # which dial/slot to pick
        st.floats(0.0, 40.0),  # time step
        st.booleans(),  # plan: spare
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(events)
def test_invariants_hold_for_any_event_sequence(seq):
    cfg = PoolConfig(max_held=3, probe_interval_s=5, probe_timeout_s=2, max_ring_s=100)
    core = PoolCore(cfg)
    now = 0.0
    dials: list[Dial] = []
    handed: set[int] = set()
    closed: set[int] = set()
    for kind, call, pick, step, spare in seq:
        now += step
        actions = []
        slot_id = dials[pick % len(dials)].slot_id if dials else 0
        if kind == "open" and call not in core.calls():
            plan = LanePlan(prewarm=True, spare=spare, keepalive_s=7.0, idle_close_s=60.0)
            actions = core.open_call(call, plan, now)
        elif kind == "ok":
            actions = core.dial_succeeded(slot_id, now)
        elif kind == "fail":
            actions = core.dial_failed(slot_id, now, "refused")
        elif kind == "close":
            actions = core.closed(slot_id, now, "peer")
        elif kind == "alive":
            actions = core.alive(slot_id, now)
        elif kind == "acquire":
            grant, actions = core.acquire(call, now)
            if grant.kind == "reuse":
                assert grant.slot_id not in handed and grant.slot_id not in closed
                handed.add(grant.slot_id)
        elif kind == "hangup":
            _, actions = core.hangup(call, now)
        elif kind == "tick":
            actions = core.tick(now)
        elif kind == "discard":
            actions = core.discard(slot_id, now, "mismatch")
        for a in actions:
            if isinstance(a, Dial):
                assert a.call_id in core.calls()
                dials.append(a)
            if isinstance(a, Close):
                # Never close a socket the service owns, never close one twice.
                assert a.slot_id not in handed
                closed.add(a.slot_id)
            if isinstance(a, SendKeepalive | Probe):
                assert core.slot(a.slot_id).state is SlotState.OPEN
        # Bounded: at most max_held, plus one replacement per lane for the length of a dial.
        assert core.held <= cfg.max_held + len(core.calls())
        for call_id in core.calls():
            held = [
                s
                for s in (core.slot(d.slot_id) for d in dials)
                if s is not None and s.call_id == call_id
            ]
            assert len(held) <= 2
        deadline = core.next_deadline()
        assert deadline is None or deadline >= 0
    for call in list(core.calls()):
        _, actions = core.hangup(call, now)
        assert all(isinstance(a, Close) for a in actions)
    assert core.held == 0 and core.calls() == [] and core.next_deadline() is None


def test_a_late_event_never_closes_a_socket_the_service_took():
    core = PoolCore()
    slot = open_warm(core)
    grant, _ = core.acquire("c", 1.0)
    assert grant.slot_id == slot
    assert core.dial_succeeded(slot, 1.1) == []
    assert core.closed(slot, 1.2) == [] and core.discard(slot, 1.3, "x") == []
    assert core.hangup("c", 2.0)[1] == []
