"""TurnTracker, the TTFA meter's pure state machine: plain timed events in, turn records out."""

import itertools
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipecat_fast.ttfa.core import TurnTracker, check_accounting

REPLY = ("llm_first_token", "tts_text", "tts_first_byte")


def ms(value):
    return pytest.approx(value, abs=1e-6)


def answered_turn(t: TurnTracker, base: float = 10.0):
    """One turn in the usual order; the caller stopped at ``base - 0.2``."""
    t.user_stopped(base, 0.2)
    t.final_transcript(base + 0.05)
    t.turn_confirmed(base + 0.10)
    t.llm_request(base + 0.12)
    t.llm_first_token(base + 0.40)
    t.tts_text(base + 0.45)
    t.tts_first_byte(base + 0.50)
    return t.first_audio_out(base + 0.52)


def test_a_turn_in_order_gives_its_marks_and_ttfa():
    t = TurnTracker()
    record = answered_turn(t)
    assert t.turns == [record] and t.open_turn is None
    assert record.turn == 0
    assert record.user_stopped_at == pytest.approx(9.8)
    assert record.ttfa_ms == ms(720)
    assert list(record.stages_ms().values()) == ms([200, 50, 50, 20, 280, 50, 50, 20])


def test_events_with_no_open_turn_mark_nothing():
    t = TurnTracker()
    t.turn_confirmed(1.0)
    t.llm_request(1.1)
    for name in REPLY:
        getattr(t, name)(1.2)
    assert t.first_audio_out(1.3) is None
    assert t.llm_usage(100, 0) is None
    assert t.turns == [] and t.unanswered == [] and t.open_turn is None


def test_a_final_inside_the_vad_window_is_carried_into_the_turn():
    t = TurnTracker()
    t.final_transcript(9.9)
    t.user_stopped(10.0, 0.2)
    assert t.open_turn.marks["final_transcript"] == 9.9


def test_the_last_final_before_confirmation_counts_and_none_after_it():
    t = TurnTracker()
    t.user_stopped(10.0, 0.2)
    t.final_transcript(10.05)
    t.final_transcript(10.08)
    t.turn_confirmed(10.1)
    t.final_transcript(10.3)  # a late segment: the turn did not wait for it
    assert t.open_turn.marks["final_transcript"] == 10.08


def test_leftovers_of_the_previous_reply_do_not_mark_a_new_turn():
    t = TurnTracker()
    t.user_stopped(10.0, 0.2)
    t.tts_first_byte(10.01)  # the previous reply's audio, still playing
    assert t.first_audio_out(10.02) is None  # no request yet: not this turn's audio
    t.turn_confirmed(10.1)
    t.llm_request(10.2)
    t.tts_first_byte(10.5)
    record = t.first_audio_out(10.6)
    assert record.marks["tts_first_byte"] == 10.5


def test_the_latest_request_before_the_first_token_answers_the_turn():
    t = TurnTracker()
    t.user_stopped(10.0, 0.2)
    t.llm_request(10.02)  # a speculative request, later discarded
    t.llm_request(10.11)  # the real one
    t.llm_first_token(10.3)
    t.llm_request(10.4)  # after the first token: not the turn's request
    assert t.open_turn.marks["llm_request"] == 10.11


def test_a_reply_drafted_before_the_vad_stop_is_carried_into_its_turn():
    """A draft at a pause inside the stop window, its first audio synthesized ahead."""
    t = TurnTracker()
    t.user_started()
    t.llm_request(9.95)  # the VAD has not stopped: no turn is open yet
    t.tts_text(9.97)
    t.tts_first_byte(9.99)
    t.user_stopped(10.0, 0.2)
    t.turn_confirmed(10.05)
    t.llm_first_token(10.06)
    record = t.first_audio_out(10.07)
    assert record is not None and record.ttfa_ms == ms(270)
    assert record.marks["llm_request"] == 9.95 and record.marks["tts_first_byte"] == 9.99
    assert record.stages_ms()["turn_detection"] == ms(50)
    assert sum(record.stages_ms().values()) == ms(270)


def test_speech_again_forgets_an_early_reply_and_old_audio_never_counts_as_one():
    t = TurnTracker()
    t.user_started()
    t.tts_first_byte(9.0)  # the previous reply's audio: no early request, not this turn's
    t.llm_request(9.5)
    t.user_started()  # the caller went on: the early draft was withdrawn
    t.user_stopped(10.0, 0.2)
    assert "llm_request" not in t.open_turn.marks and "tts_first_byte" not in t.open_turn.marks


def test_a_request_replacing_a_withdrawn_draft_drops_the_drafts_tts_marks():
    t = TurnTracker()
    t.user_stopped(10.0, 0.2)
    t.llm_request(10.01)
    t.tts_text(10.1)  # the draft's first phrase, synthesized ahead
    t.tts_first_byte(10.15)
    t.turn_confirmed(10.2)
    t.llm_request(10.21)  # the final differed: the normal request
    assert "tts_text" not in t.open_turn.marks and "tts_first_byte" not in t.open_turn.marks
    t.llm_first_token(10.4)
    t.tts_text(10.45)
    t.tts_first_byte(10.5)
    record = t.first_audio_out(10.52)
    assert record.marks["tts_first_byte"] == 10.5


def test_a_pause_is_dropped_and_a_confirmed_turn_without_audio_is_unanswered():
    t = TurnTracker()
    t.user_stopped(10.0, 0.2)
    assert t.user_started() is None  # the turn detector never confirmed it: a pause
    t.user_stopped(12.0, 0.2)
    t.turn_confirmed(12.1)
    missed = t.user_started()
    assert missed is not None and t.unanswered == [missed]
    record = answered_turn(t, 20.0)
    assert (missed.turn, record.turn) == (0, 1)


def test_a_final_from_before_an_unanswered_turn_does_not_mark_the_next():
    t = TurnTracker()
    t.final_transcript(11.9)
    t.user_stopped(12.0, 0.2)
    t.turn_confirmed(12.1)
    t.user_started()
    t.user_stopped(14.0, 0.2)
    assert "final_transcript" not in t.open_turn.marks


def test_a_second_vad_stop_leaves_a_confirmed_turn_unanswered():
    t = TurnTracker()
    t.user_stopped(10.0, 0.2)
    t.turn_confirmed(10.1)
    t.user_stopped(11.0, 0.2)
    assert [r.turn for r in t.unanswered] == [0]
    assert t.open_turn.turn == 1


def test_close_leaves_any_open_turn_unanswered():
    t = TurnTracker()
    t.user_stopped(10.0, 0.2)
    record = t.close()
    assert t.unanswered == [record] and t.open_turn is None
    assert t.close() is None


def test_usage_goes_to_the_turn_that_sent_the_request_even_after_its_audio():
    t = TurnTracker()
    answered_turn(t)
    assert t.llm_usage(3100, 2944, 12) is t.turns[0]
    assert t.llm_usage(9999, 0) is None  # one usage per request
    row = t.turns[0].to_dict()
    assert (row["prompt_tokens"], row["cached_tokens"], row["cache_write_tokens"]) == (
        3100,
        2944,
        12,
    )


def test_usage_of_a_discarded_draft_is_replaced_by_the_real_requests():
    t = TurnTracker()
    t.user_stopped(10.0, 0.2)
    t.llm_request(10.02)
    t.llm_usage(3000, 0)  # the discarded draft's
    t.turn_confirmed(10.1)
    t.llm_request(10.11)
    t.llm_first_token(10.3)
    t.first_audio_out(10.4)
    t.llm_usage(3010, 2990)
    assert (t.turns[0].prompt_tokens, t.turns[0].cached_tokens) == (3010, 2990)


def test_usage_of_an_unanswered_turn_stays_on_that_turn():
    t = TurnTracker()
    answered_turn(t)
    t.llm_usage(3000, 0)
    t.user_started()
    t.user_stopped(20.0, 0.2)
    t.turn_confirmed(20.1)
    t.llm_request(20.2)
    t.user_started()  # the caller spoke again before any audio
    t.llm_usage(3100, 3000)
    assert t.unanswered[0].prompt_tokens == 3100
    assert t.turns[0].prompt_tokens == 3000


def test_a_new_turn_forgets_a_usage_still_awaited():
    t = TurnTracker()
    answered_turn(t)
    t.user_started()
    t.user_stopped(20.0, 0.2)
    assert t.llm_usage(3000, 0) is None
    assert t.turns[0].prompt_tokens is None


# -- accounting ----------------------------------------------------------------------------


def test_current_accounting_lands_on_the_open_turn_then_on_the_last_closed_one():
    t = TurnTracker()
    t.user_stopped(10.0, 0.2)
    t.annotate({"prefill_requests": 2})
    t.turn_confirmed(10.1)
    t.llm_request(10.2)
    t.first_audio_out(10.5)
    t.annotate({"prefill_requests": 3, "speculation": "reused"})  # late: the same turn
    assert t.turns[0].extra == {"prefill_requests": 3, "speculation": "reused"}


def test_added_accounting_sums_and_set_fields_replace():
    t = TurnTracker()
    t.user_stopped(10.0, 0.2)
    t.annotate(add={"pool_handshakes": 1, "pool_acquire_ms": 12.5})
    t.annotate(add={"pool_handshakes": 1, "pool_acquire_ms": 0.5})
    t.annotate({"pool_reused": False})
    t.annotate({"pool_reused": True})
    assert t.open_turn.extra == {"pool_handshakes": 2, "pool_acquire_ms": 13.0, "pool_reused": True}


def test_next_accounting_waits_for_the_next_turn():
    t = TurnTracker()
    answered_turn(t)
    t.annotate({"pool_prewarmed": True}, add={"pool_handshakes": 1}, target="next")
    assert "pool_prewarmed" not in t.turns[0].extra
    t.user_started()
    t.user_stopped(20.0, 0.2)
    assert t.open_turn.extra == {"pool_prewarmed": True, "pool_handshakes": 1}
    t.user_started()
    t.user_stopped(21.0, 0.2)
    assert t.open_turn.extra == {}  # taken by one turn only


def test_current_accounting_before_the_first_turn_goes_to_the_first_turn():
    t = TurnTracker()
    t.annotate(add={"warmup_requests": 1})
    t.user_stopped(10.0, 0.2)
    assert t.open_turn.extra == {"warmup_requests": 1}


def test_session_accounting_is_kept_apart_from_the_turns():
    t = TurnTracker()
    t.annotate({"warmup": "done"}, add={"warmup_tokens": 1500}, target="session")
    t.annotate(add={"warmup_tokens": 20}, target="session")
    answered_turn(t)
    assert t.session == {"warmup": "done", "warmup_tokens": 1520}
    assert t.turns[0].extra == {}


def test_accounting_on_an_unanswered_turn_stays_there():
    t = TurnTracker()
    answered_turn(t)
    t.user_started()
    t.user_stopped(20.0, 0.2)
    t.turn_confirmed(20.1)
    t.user_started()
    t.annotate({"bargein_words_heard": 0})
    assert t.unanswered[0].extra == {"bargein_words_heard": 0}
    assert "bargein_words_heard" not in t.turns[0].extra


@pytest.mark.parametrize(
    ("fields", "add", "target", "error", "message"),
    [
        ([("a", 1)], {}, "current", TypeError, "fields must be a dict"),
        ({1: "a"}, {}, "current", TypeError, "keys must be strings"),
        ({}, {"n": "1"}, "current", TypeError, "add['n'] must be a number"),
        ({}, {"n": True}, "current", TypeError, "add['n'] must be a number"),
        ({}, {}, "turn", ValueError, "one of current, next, session; got 'turn'"),
    ],
)
def test_malformed_accounting_is_refused_with_a_clear_message(fields, add, target, error, message):
    with pytest.raises(error, match=message.replace("[", r"\[").replace("(", r"\(")):
        check_accounting(fields, add, target)
    t = TurnTracker()
    with pytest.raises(error):
        t.annotate(fields, add, target)


# -- every order of one turn's events ------------------------------------------------------

EVENTS = ("final_transcript", "turn_confirmed", "llm_request", *REPLY, "first_audio_out")


def test_every_order_of_a_turns_events_keeps_the_books_straight():
    """All 5,040 orders of a turn's seven events after the VAD stop, one step apart."""
    for order in itertools.permutations(EVENTS):
        t = TurnTracker()
        t.user_stopped(10.0, 0.2)
        at = {name: 10.0 + 0.01 * (i + 1) for i, name in enumerate(order)}
        for name in order:
            getattr(t, name)(at[name])
        before = order.index("llm_request") < order.index("first_audio_out")
        assert bool(t.turns) == before, order
        if not before:
            assert t.open_turn is not None and "first_audio_out" not in t.open_turn.marks
            continue
        [record] = t.turns
        assert record.ttfa_ms == ms((at["first_audio_out"] - 9.8) * 1000)
        assert sum(record.stages_ms().values()) == ms(record.ttfa_ms)
        for name in REPLY:  # a reply mark counts only after the turn's request
            marked = order.index("llm_request") < order.index(name) < order.index("first_audio_out")
            assert (name in record.marks) == marked, (order, name)
        assert ("turn_confirmed" in record.marks) == (
            order.index("turn_confirmed") < order.index("first_audio_out")
        )


# -- any sequence of events ----------------------------------------------------------------

ALL_EVENTS = ("user_started", "user_stopped", *EVENTS, "usage", "annotate")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(ALL_EVENTS), st.floats(0.0, 2.0), st.floats(0.0, 0.8)),
        max_size=60,
    )
)
def test_any_event_sequence_gives_consistent_records(steps):
    t = TurnTracker()
    now = 0.0
    for name, gap, stop_secs in steps:
        now += gap
        if name == "user_started":
            t.user_started()
        elif name == "user_stopped":
            t.user_stopped(now, stop_secs)
        elif name == "usage":
            t.llm_usage(100, 50)
        elif name == "annotate":
            t.annotate(add={"n": 1})
        else:
            getattr(t, name)(now)
    t.close()
    records = t.turns + t.unanswered
    # Every closed turn has its own index, with no gap.
    assert sorted(r.turn for r in records) == list(range(len(records)))
    assert [r.turn for r in t.turns] == sorted(r.turn for r in t.turns)
    for r in t.turns:
        assert r.complete and "llm_request" in r.marks
        assert r.ttfa_ms >= 0
        assert sum(r.stages_ms().values()) == pytest.approx(r.ttfa_ms, abs=1e-6)
        assert all(v >= 0 for v in r.stages_ms().values())
    for r in records:
        vad = r.marks["vad_stopped"]
        # A reply drafted before the VAD's stop is carried into the turn with its marks.
        early_ok = (
            "final_transcript",
            "llm_request",
            "llm_first_token",
            "tts_text",
            "tts_first_byte",
        )
        assert all(at >= vad for m, at in r.marks.items() if m not in early_ok)
        for mark in ("tts_text", "tts_first_byte"):  # never ahead of the turn's request
            assert mark not in r.marks or r.marks[mark] >= r.marks["llm_request"]
    for r in t.unanswered:
        assert not r.complete


def test_the_core_imports_without_pipecat():
    code = (
        "import sys; import pipecat_fast.ttfa.core, pipecat_fast.ttfa; "
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'pipecat'); "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
