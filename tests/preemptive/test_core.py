"""FeedCore and HoldCore on plain values: every rule, then random sequences (hypothesis)."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipecat_fast.preemptive.core import (
    CancelTTS,
    Feed,
    FeedCore,
    HoldCore,
    Settle,
)


def kinds(decisions):
    return [type(d).__name__ for d in decisions]


# -- FeedCore --------------------------------------------------------------------------------


def test_a_held_draft_hands_over_its_start_and_first_phrase_then_stops():
    core = FeedCore()
    assert core.held(1, "start") == [Feed(1)]
    assert core.held(2, "text", "Sure, ") == [Feed(2)]
    assert core.held(3, "text", "I can.") == [Feed(3)]
    core.tts_started()  # the TTS began synthesizing the first phrase
    assert core.held(4, "text", " Your") == []
    assert core.held(5, "end") == []
    assert core.state == "holding" and core.draft_in_tts


def test_confirmation_releases_and_drops_only_the_originals_handed_over():
    core = FeedCore()
    for i, kind in enumerate(["start", "text", "text"], start=1):
        [feed] = core.held(i, kind, "ab")
        assert core.take_promise(feed.frame_id)
    core.tts_started()
    core.held(4, "text", "cd")
    core.held(5, "end")
    assert core.confirmed() == [Settle("released", 4)]
    drops = [core.original(i) for i in (1, 2, 3, 4, 5)]
    assert drops == [True, True, True, False, False]  # 4 and 5 were never handed over
    core.response_ended()
    assert core.state == "idle"
    assert core.stats.released == 1 and core.stats.chars_fed == 4


def test_an_original_that_overtakes_its_promised_copy_is_the_frame():
    core = FeedCore()
    [feed] = core.held(1, "start")
    assert core.original(1) is False  # passes: the copy was never handed over
    assert core.take_promise(feed.frame_id) is False  # and now never is


def test_a_whole_short_reply_is_handed_over_with_its_end():
    core = FeedCore()
    for i, kind in enumerate(["start", "text", "end"], start=1):
        assert core.held(i, kind, "Yes.") == [Feed(i)]
    assert core.state == "holding"


def test_max_chars_bounds_what_goes_before_confirmation():
    core = FeedCore(max_chars=10)
    core.held(1, "start")
    assert core.held(2, "text", "abcdefgh") == [Feed(2)]
    assert core.held(3, "text", "ijk") == []  # 11 > 10
    assert core.held(4, "text", "l") == []


def test_withdrawal_cancels_the_tts_and_counts_the_discarded_characters():
    core = FeedCore()
    core.held(1, "start")
    core.held(2, "text", "Hello there.")
    assert core.withdrawn("caller spoke") == [CancelTTS("caller spoke"), Settle("discarded", 12)]
    assert core.stats.discarded == 1 and core.stats.chars_discarded == 12
    assert core.withdrawn() == []  # nothing left to cancel
    assert core.original(2) is False  # a late original (the gate dropped it anyway) passes


def test_a_new_draft_supersedes_the_one_in_the_tts():
    core = FeedCore()
    core.held(1, "start")
    core.held(2, "text", "old")
    assert kinds(core.held(3, "start")) == ["CancelTTS", "Settle", "Feed"]
    assert core.stats.drafts_fed == 2 and core.stats.discarded == 1


def test_a_tts_error_on_the_draft_withdraws_the_draft():
    core = FeedCore()
    assert core.tts_failed() == []  # no draft in the TTS: not ours
    core.held(1, "start")
    assert kinds(core.tts_failed()) == ["WithdrawDraft", "CancelTTS", "Settle"]
    assert core.stats.tts_errors == 1


def test_frames_outside_a_draft_pass_and_confirmation_without_one_is_nothing():
    core = FeedCore()
    assert core.held(1, "text", "stray") == []
    assert core.original(7) is False
    assert core.confirmed() == []


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_a_bad_max_chars_is_refused(bad):
    with pytest.raises(ValueError):
        FeedCore(max_chars=bad)


FEED_EVENTS = ("start", "text", "end", "tts", "confirm", "withdraw", "error", "orig", "take")


def run_feed(names):
    """Invariants: every frame is delivered at most once (copy xor original), a confirmed
    draft settles once, the discarded characters never exceed those handed over."""
    core = FeedCore(max_chars=6)
    next_id = itertools.count(1)
    held = []  # originals the gate holds, in order
    delivered: dict[int, int] = {}
    promised = []
    for name in names:
        if name in ("start", "text", "end"):
            frame_id = next(next_id)
            if name == "start":
                held = []  # the gate drops a reply a new one supersedes
            held.append(frame_id)
            for d in core.held(frame_id, name, "abc"):
                if isinstance(d, Feed):
                    promised.append(d.frame_id)
        elif name == "tts":
            core.tts_started()
        elif name == "confirm":
            core.confirmed()
        elif name == "withdraw":
            core.withdrawn()
            held = []
        elif name == "error":
            if core.tts_failed():
                held = []  # the draft is withdrawn: the gate discards it
        elif name == "orig" and held:
            frame_id = held.pop(0)
            if not core.original(frame_id):
                delivered[frame_id] = delivered.get(frame_id, 0) + 1
        elif name == "take" and promised:
            frame_id = promised.pop(0)
            if core.take_promise(frame_id):
                delivered[frame_id] = delivered.get(frame_id, 0) + 1
        assert all(n == 1 for n in delivered.values()), names
        assert core.stats.chars_discarded <= core.stats.chars_fed
        assert core.stats.released + core.stats.discarded <= core.stats.drafts_fed


def test_every_short_feed_sequence_keeps_the_invariants():
    for length in range(1, 5):
        for names in itertools.product(FEED_EVENTS, repeat=length):
            run_feed(names)


@given(st.lists(st.sampled_from(FEED_EVENTS), max_size=40))
def test_long_feed_sequences_keep_the_invariants(names):
    run_feed(names)


# -- HoldCore --------------------------------------------------------------------------------


def test_nothing_of_a_draft_passes_before_confirmation_and_all_of_it_after_in_order():
    hold = HoldCore()
    assert hold.frame("before", frame_id=1) == ["before"]  # no draft yet
    hold.expect(10)
    assert hold.frame("start", frame_id=10) == []
    assert hold.frame("tts-started", frame_id=11, context_id="c1") == []
    assert hold.frame("audio", frame_id=12, context_id="c1") == []
    assert hold.frame("metrics", frame_id=13, system=True) == ["metrics"]  # verdicts pass
    assert hold.holding and hold.held_count == 3
    hold.settle(10, released=True)
    # The verdict is applied by the next frame through (the confirmation frame itself).
    assert hold.frame("confirmed", frame_id=14, system=True) == [
        "start",
        "tts-started",
        "audio",
        "confirmed",
    ]
    assert hold.frame("more-audio", frame_id=15, context_id="c1") == ["more-audio"]


def test_a_release_carried_by_the_confirmation_waits_for_it_and_lets_it_out_first():
    """The TTS may push the draft's audio while the confirmation frame is still in its queue:
    the transport must still see the confirmation before any of the draft."""
    hold = HoldCore()
    hold.expect(10)
    assert hold.frame("start", frame_id=10) == []
    assert hold.frame("audio", frame_id=11, context_id="c1") == []
    hold.settle(10, released=True, after=50)
    # Audio the TTS sends before the confirmation reached the hold stays held.
    assert hold.frame("more-audio", frame_id=12, context_id="c1") == []
    assert hold.frame("metrics", frame_id=13, system=True) == ["metrics"]
    assert hold.holding
    assert hold.frame("confirmed", frame_id=50, system=True) == [
        "confirmed",
        "start",
        "audio",
        "more-audio",
    ]
    assert not hold.holding
    assert hold.frame("later", frame_id=14, context_id="c1") == ["later"]


def test_a_release_carried_by_the_confirmation_before_the_marker_lets_the_draft_play():
    hold = HoldCore()
    hold.expect(10)
    hold.settle(10, released=True, after=50)
    assert hold.frame("confirmed", frame_id=50, system=True) == ["confirmed"]
    assert hold.frame("start", frame_id=10) == ["start"]
    assert hold.frame("audio", frame_id=11, context_id="c1") == ["audio"]


def test_withdrawal_drops_the_draft_keeps_the_rest_and_its_late_audio_stays_out():
    hold = HoldCore()
    hold.expect(10)
    hold.frame("start", frame_id=10)
    hold.frame("audio", frame_id=11, context_id="c1")
    hold.frame("unrelated", frame_id=12)  # held in order, not the draft's
    hold.frame("keep-me", frame_id=13, context_id="c1", interruptible=False)
    hold.settle(10, released=False)
    assert hold.frame("withdrawn", frame_id=14, system=True) == [
        "unrelated",
        "keep-me",
        "withdrawn",
    ]
    assert hold.frame("late-audio", frame_id=15, context_id="c1") == []
    assert hold.frame("next-reply", frame_id=16, context_id="c2") == ["next-reply"]


def test_a_draft_withdrawn_before_its_marker_came_out_drops_its_marker_and_context():
    hold = HoldCore()
    hold.expect(10)
    hold.settle(10, released=False)
    assert hold.frame("late-start", frame_id=10) == []
    assert hold.frame("late-audio", frame_id=11, context_id="c1") == []
    assert not hold.holding
    hold.expect(20)  # the next draft is judged on its own
    assert hold.frame("start2", frame_id=20) == []
    assert hold.holding


def test_a_draft_confirmed_before_its_marker_came_out_plays_as_it_comes():
    hold = HoldCore()
    hold.expect(10)
    hold.settle(10, released=True)
    assert hold.frame("start", frame_id=10) == ["start"]
    assert hold.frame("audio", frame_id=11, context_id="c1") == ["audio"]


def test_an_interruption_before_the_marker_in_the_stream_does_not_touch_the_later_draft():
    """Found running Pipecat: the feeder expects a marker while older frames (a turn-start
    interruption) are still on their way to the hold."""
    hold = HoldCore()
    hold.expect(10)
    assert hold.frame("old-interruption", frame_id=5, system=True) == ["old-interruption"]
    assert hold.frame("start", frame_id=10) == []
    assert hold.holding


def test_the_session_ending_drops_an_unconfirmed_window():
    hold = HoldCore()
    hold.expect(10)
    hold.frame("start", frame_id=10)
    hold.frame("audio", frame_id=11, context_id="c1")
    assert hold.end() == []


def test_the_cancelling_interruption_is_swallowed():
    hold = HoldCore()
    hold.swallow(99)
    assert hold.frame("interruption", frame_id=99, system=True) == []
    assert hold.frame("interruption again", frame_id=99, system=True) == ["interruption again"]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                ["frame", "marker", "expect", "release", "release-after", "withdraw", "end"]
            ),
            st.sampled_from([None, "c1", "c2"]),
            st.booleans(),
        ),
        max_size=30,
    )
)
def test_every_frame_comes_out_at_most_once_and_only_released_drafts_play(steps):
    hold = HoldCore()
    out: list[int] = []
    ids = itertools.count(1)
    expected: list[int] = []
    withdrawn_markers: set[int] = set()
    for kind, context, interruptible in steps:
        if kind == "expect":
            marker = next(ids)
            hold.expect(marker)
            expected.append(marker)
        elif kind == "marker" and expected:
            marker = expected[0]
            out += hold.frame(marker, frame_id=marker)
        elif kind == "frame":
            frame_id = next(ids)
            out += hold.frame(frame_id, frame_id=frame_id, context_id=context,
                              interruptible=interruptible)  # fmt: skip
        elif kind in ("release", "release-after", "withdraw") and expected:
            marker = expected.pop(0)
            after = -marker if kind == "release-after" else None
            hold.settle(marker, released=kind != "withdraw", after=after)
            if kind == "withdraw":
                withdrawn_markers.add(marker)
            out += hold.frame(-marker, frame_id=-marker, system=True)  # the verdict frame
        elif kind == "end":
            out += hold.end()
        assert len(out) == len(set(out))
        assert not set(out) & set(hold.held_items)
        assert not set(out) & withdrawn_markers  # a withdrawn draft's marker never plays
