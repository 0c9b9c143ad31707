"""DraftHold, the draft-and-hold state machine, on plain events: no pipeline, no clock."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipecat_fast.prefill.draft_core import (
    Confirm,
    DraftHold,
    PassInference,
    PassWithdrawal,
    Settled,
    StartDraft,
    Withdraw,
)
from pipecat_fast.textnorm import same_words


def kinds(decisions):
    return [type(d).__name__ for d in decisions]


def test_a_matching_draft_is_started_at_silence_held_and_released_on_confirmation():
    core = DraftHold()
    assert core.turn_started() == []
    assert core.caller_speaking() == []
    assert core.final_transcript("Yes, I want to book it.") == []  # still speaking: no draft
    assert core.caller_silent() == [StartDraft("Yes, I want to book it.")]
    assert core.held == "Yes, I want to book it."
    assert core.inner_inference() == []  # the held draft answers the turn: no second inference
    assert core.inner_confirmed() == [Settled("reused", 1, 0), Confirm(True, True)]
    assert core.held is None
    assert core.turn_stopped() == []
    assert core.outcomes == ["reused"]


def test_the_final_need_only_match_under_the_normaliser():
    core = DraftHold()
    core.stable_words("yes i want to book it")
    assert core.caller_silent() == [StartDraft("yes i want to book it")]
    core.final_transcript("Yes, I want to book it.")
    assert core.held is not None  # case and punctuation aside, the same words
    assert core.inner_confirmed()[-1] == Confirm(True, True)


def test_caller_resuming_withdraws_and_the_next_silence_drafts_all_their_words():
    core = DraftHold()
    core.final_transcript("I want to")
    assert core.caller_silent() == [StartDraft("I want to")]
    assert core.caller_speaking() == [Withdraw("the caller is speaking again")]
    core.final_transcript("book a cleaning.")
    assert core.caller_silent() == [StartDraft("I want to book a cleaning.")]
    assert core.inner_confirmed() == [Settled("reused", 2, 1), Confirm(True, True)]


def test_a_final_that_moves_on_withdraws_and_the_normal_request_runs():
    core = DraftHold(max_drafts=1)
    core.stable_words("I want to book")
    assert core.caller_silent() == [StartDraft("I want to book")]
    assert core.final_transcript("I want to book a table.") == [
        Withdraw("the final transcript moved on")
    ]  # and no second draft: one per turn here
    assert core.inner_inference() == [PassInference(None)]
    # The budget stopped the redraft of the final's words, and the account says so.
    assert core.inner_confirmed() == [
        Settled("discarded", 1, 1, over_budget=1),
        Confirm(True, False),
    ]


def test_a_final_after_silence_that_differs_redrafts_within_the_budget():
    core = DraftHold(max_drafts=2)
    core.stable_words("I want to book")
    core.caller_silent()
    decisions = core.final_transcript("I want to book a table.")
    assert decisions == [
        Withdraw("the final transcript moved on"),
        StartDraft("I want to book a table."),
    ]


def test_inference_before_any_final_withdraws_a_draft_of_stable_words():
    # The wrapped strategy ended the turn before the STT's final came: the stable words the
    # draft answered are not a final transcript, so the normal request runs.
    core = DraftHold()
    core.stable_words("book it")
    assert core.caller_silent() == [StartDraft("book it")]
    assert core.inner_inference() == [Withdraw("the final transcript differs"), PassInference(None)]


def test_drafting_from_stable_words_can_be_turned_off():
    core = DraftHold(use_stable_words=False)
    core.stable_words("I want to book")
    assert core.caller_silent() == []
    assert core.final_transcript("I want to book.") == [StartDraft("I want to book.")]


def test_no_words_no_draft_and_the_turn_is_settled_as_none():
    core = DraftHold()
    core.final_transcript("   ")
    assert core.caller_silent() == []
    assert core.inner_confirmed(enable_user_speaking_frames=False) == [
        Settled("none", 0, 0),
        Confirm(False, False),
    ]
    assert core.outcomes == ["none"]


def test_the_wrapped_strategys_own_speculation_and_withdrawal_pass_through():
    core = DraftHold()
    assert core.inner_inference("eager words") == [PassInference("eager words")]
    assert core.inner_withdrawal() == [PassWithdrawal()]
    # ...and its own confirmation of its speculation is kept.
    assert core.inner_confirmed(confirms_speculation=True)[-1] == Confirm(True, True)


def test_a_draft_withdrawn_elsewhere_is_not_released():
    core = DraftHold()
    core.final_transcript("book me for tuesday")
    core.caller_silent()
    assert core.withdrawn_elsewhere() == []  # the LLM service withdrew it (a tool call)
    assert core.held is None
    assert core.inner_confirmed() == [Settled("discarded", 1, 1), Confirm(True, False)]


def test_a_turn_ended_without_the_wrapped_strategy_withdraws_and_settles():
    core = DraftHold()
    core.final_transcript("I want to book")
    core.caller_silent()
    assert core.turn_stopped() == [
        Withdraw("the turn ended without the wrapped strategy confirming"),
        Settled("discarded", 1, 1),
    ]
    assert core.turn_stopped() == []  # once
    assert core.outcomes == ["discarded"]


def test_a_new_turn_withdraws_a_draft_of_the_last_one():
    core = DraftHold()
    core.final_transcript("hello")
    core.caller_silent()
    assert core.turn_started() == [Withdraw("a new turn started")]
    assert core.caller_text == ""


def test_a_pause_inside_the_stop_window_drafts_like_a_stop():
    core = DraftHold()
    core.stable_words("I need a cleaning")
    assert core.caller_paused() == [StartDraft("I need a cleaning")]
    assert core.caller_speaking() == [Withdraw("the caller is speaking again")]


def test_a_pause_drafts_the_finals_when_no_interim_came_after_them():
    core = DraftHold()
    core.interim_transcript("book it for")
    core.final_transcript("Book it for Tuesday.")
    assert core.caller_paused() == [StartDraft("Book it for Tuesday.")]
    assert core.inner_confirmed()[0] == Settled("reused", 1, 0, 1)


def test_a_pause_with_words_still_in_flight_waits_for_the_final():
    core = DraftHold()
    core.stable_words("book it")
    core.interim_transcript("book it for tues")  # the stable words do not cover it
    assert core.words_in_hand() is None
    assert core.caller_paused() == []
    assert core.final_transcript("Book it for Tuesday.") == [StartDraft("Book it for Tuesday.")]
    assert core.caller_silent() == []  # the VAD's stop: already drafted


def test_a_pause_drafts_stable_words_that_cover_the_latest_interim():
    core = DraftHold()
    core.final_transcript("Hi.")
    core.interim_transcript("book a cleaning")
    core.stable_words("Hi. Book a cleaning")
    assert core.caller_paused() == [StartDraft("Hi. Book a cleaning")]


def test_stable_words_that_settle_during_the_pause_start_the_draft():
    core = DraftHold()
    core.interim_transcript("book a cleaning")
    core.stable_words("book a")
    assert core.caller_paused() == []
    assert core.stable_words("book a cleaning") == [StartDraft("book a cleaning")]


def test_speech_after_a_pause_withdraws_its_draft_and_a_vad_stop_is_no_pause():
    core = DraftHold()
    core.final_transcript("I want")
    assert core.caller_paused() == [StartDraft("I want")]
    assert core.caller_paused() == []  # the same pause
    assert core.caller_resumed() == [Withdraw("the caller is speaking again")]
    core.final_transcript("to book.")
    assert core.caller_silent() == [StartDraft("I want to book.")]
    assert core.caller_resumed() == []  # not paused: the VAD's own start decides
    assert core.inner_confirmed()[0] == Settled("reused", 2, 1, 1)


def test_early_and_late_drafts_share_the_turns_budget():
    core = DraftHold(max_drafts=1)
    core.final_transcript("I want")
    assert core.caller_paused() == [StartDraft("I want")]
    core.caller_resumed()
    core.final_transcript("to book.")
    assert core.caller_silent() == []  # the budget is spent


def test_drafts_per_turn_are_capped():
    core = DraftHold(max_drafts=2)
    core.final_transcript("a")
    for _ in range(5):
        core.caller_silent()
        core.caller_speaking()
    # Three silences found the budget spent: each counted as a draft the budget stopped.
    assert core.inner_confirmed()[0] == Settled("discarded", 2, 2, over_budget=3)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_a_bad_draft_budget_is_refused(bad):
    with pytest.raises(ValueError, match="max_drafts_per_turn"):
        DraftHold(max_drafts=bad)


# -- every sequence of events ---------------------------------------------------------------

EVENTS = {
    "turn_started": lambda c: c.turn_started(),
    "speaking": lambda c: c.caller_speaking(),
    "silent": lambda c: c.caller_silent(),
    "paused": lambda c: c.caller_paused(),
    "resumed": lambda c: c.caller_resumed(),
    "interim": lambda c: c.interim_transcript("I want to book"),
    "stable": lambda c: c.stable_words("i want to book"),
    "final_same": lambda c: c.final_transcript("I want to book."),
    "final_more": lambda c: c.final_transcript("a cleaning"),
    "elsewhere": lambda c: c.withdrawn_elsewhere(),
    "inference": lambda c: c.inner_inference(),
    "own_speculation": lambda c: c.inner_inference("x"),
    "confirmed": lambda c: c.inner_confirmed(),
    "stopped": lambda c: c.turn_stopped(),
}


FINALS = {"final_same": "I want to book.", "final_more": "a cleaning"}


def check_sequence(names, max_drafts=2):
    """Run events and check the invariants every sequence must keep."""
    core = DraftHold(max_drafts=max_drafts)
    held = None  # what the decisions say is held
    finals = []
    drafts_this_turn = 0
    silent = False
    paused = False
    interim = None  # an interim after the last final
    stable = ""
    settled = 0
    for name in names:
        before = held
        finals += [FINALS[name]] if name in FINALS else []
        interim = None if name in FINALS else ("I want to book" if name == "interim" else interim)
        stable = "i want to book" if name == "stable" else stable
        if name == "paused" and not silent:
            silent = paused = True
        elif name == "resumed" and paused:
            silent = paused = False
        elif name in ("silent", "speaking"):
            silent, paused = name == "silent", False
        decisions = EVENTS[name](core)
        for d in decisions:
            if isinstance(d, StartDraft):
                assert held is None, f"two drafts held at once: {names}"
                assert silent, f"drafted while the caller was speaking: {names}"
                if paused and interim is not None:
                    # An early draft only with the words in hand: stable words covering
                    # the finals and the interim after them.
                    expected = " ".join([*finals, interim])
                    assert same_words(expected, stable) and d.text == stable, names
                assert d.text.strip()
                held = d.text
                drafts_this_turn += 1
                assert drafts_this_turn <= max_drafts
            elif isinstance(d, Withdraw):
                assert held is not None, f"withdrew nothing: {names}"
                held = None
            elif isinstance(d, Confirm):
                if d.confirms_speculation and name == "confirmed":
                    # Only a held draft that says the final's words is released.
                    assert before is not None and same_words(before, " ".join(finals))
                held = None
            elif isinstance(d, Settled):
                settled += 1
                assert d.drafts_discarded <= d.drafts
                assert (d.outcome == "none") == (d.drafts == 0)
        if name == "speaking" or (name == "resumed" and before is not None and not silent):
            assert held is None
        elif name == "elsewhere":
            held = None
        elif name in ("turn_started", "stopped"):
            assert held is None
            drafts_this_turn, finals, silent, paused = 0, [], False, False
            interim, stable = None, ""
        assert core.held == held
    assert len(core.outcomes) == settled


def test_every_short_sequence_of_events_keeps_the_invariants():
    for length in range(1, 5):
        for names in itertools.product(EVENTS, repeat=length):
            check_sequence(names)


@given(st.lists(st.sampled_from(sorted(EVENTS)), max_size=40), st.integers(1, 3))
def test_long_random_sequences_keep_the_invariants(names, max_drafts):
    check_sequence(names, max_drafts)


# -- silence as the second update (pause_stable_s) ------------------------------------------


def test_without_pause_stable_the_interim_at_a_pause_is_never_in_hand():
    """Off (the default): today's rule exactly, however long the silence."""
    core = DraftHold()
    core.interim_transcript("book it for tuesday")
    assert core.caller_silence(0.032) == [] and core.caller_silence(0.19) == []
    assert core.words_in_hand() is None and not core.interim_in_hand()
    assert core.caller_paused() == []
    settled = core.inner_confirmed()[0]
    assert settled.interim_drafts is None and "drafts_interim" not in settled.fields()


def test_a_silent_pause_with_no_new_interim_drafts_the_latest_interim():
    core = DraftHold(pause_stable_s=0.032)
    core.final_transcript("Hi.")
    core.interim_transcript("book it for tuesday")  # while speaking: one update only
    assert core.words_in_hand() is None
    assert core.caller_silence(0.032) == []  # not paused yet: the pause decides below
    assert core.words_in_hand() == "Hi. book it for tuesday"
    assert core.caller_paused() == [StartDraft("Hi. book it for tuesday")]
    # The final says the same words under the normaliser: the draft stands and is released.
    assert core.final_transcript("Book it for Tuesday.") == []
    assert core.inner_confirmed() == [
        Settled("reused", 1, 0, 1, 0, interim_drafts=1, interim_differed=0),
        Confirm(True, True),
    ]


def test_a_silence_shorter_than_pause_stable_leaves_the_interim_out_of_hand():
    core = DraftHold(pause_stable_s=0.064)
    core.interim_transcript("book it for tuesday")
    core.caller_silence(0.032)
    assert core.caller_paused() == []  # the early draft's pause came first: nothing in hand
    assert core.caller_silence(0.064) == [StartDraft("book it for tuesday")]


def test_an_interim_arriving_in_the_silence_starts_the_count_again():
    core = DraftHold(pause_stable_s=0.032)
    core.interim_transcript("book it for")
    core.caller_silence(0.032)
    core.interim_transcript("book it for tuesday")  # the STT still moves: not in hand
    assert core.caller_paused() == []
    assert not core.interim_in_hand()
    assert core.caller_silence(0.064) == [StartDraft("book it for tuesday")]  # 32 ms after it


def test_speech_again_withdraws_the_interim_draft_as_today():
    core = DraftHold(pause_stable_s=0.032, max_drafts=3)
    core.interim_transcript("I want")
    core.caller_silence(0.032)
    assert core.caller_paused() == [StartDraft("I want")]
    assert core.caller_silence(0.0) == []
    assert core.caller_resumed() == [Withdraw("the caller is speaking again")]
    # The next pause counts its own silence: 32 ms of it with no new interim.
    core.interim_transcript("I want to book it")
    assert core.caller_silence(0.032) == []
    assert core.words_in_hand() == "I want to book it"
    assert core.caller_paused() == [StartDraft("I want to book it")]
    assert core.final_transcript("I want to book it.") == []
    settled = core.inner_confirmed()[0]
    assert settled.outcome == "reused"
    assert (settled.drafts, settled.drafts_discarded, settled.interim_drafts) == (2, 1, 2)
    assert settled.interim_differed == 0  # withdrawn for speech, not for a differing final


def test_the_interim_bet_never_takes_the_turns_last_draft():
    """Two micro-pauses must not spend the whole budget on the interim: the last draft is
    the final's (else a differing final could not be redrafted and the turn waits)."""
    core = DraftHold(pause_stable_s=0.032, max_drafts=2)
    core.interim_transcript("I want")
    core.caller_silence(0.032)
    assert core.caller_paused() == [StartDraft("I want")]
    core.caller_silence(0.0)
    assert core.caller_resumed() == [Withdraw("the caller is speaking again")]
    core.interim_transcript("I want to book it")
    core.caller_silence(0.032)
    assert core.caller_paused() == []  # one draft left: not for the interim
    assert core.caller_silence(0.064) == []
    assert core.final_transcript("I want to book it.") == [StartDraft("I want to book it.")]
    settled = core.inner_confirmed()[0]
    assert (settled.outcome, settled.drafts, settled.interim_drafts) == ("reused", 2, 1)


def test_a_final_that_differs_withdraws_the_interim_draft_and_redrafts_on_the_final():
    core = DraftHold(pause_stable_s=0.032)
    core.interim_transcript("book it for tuesday")
    core.caller_silence(0.032)
    assert core.caller_paused() == [StartDraft("book it for tuesday")]
    assert core.final_transcript("Book it for Thursday.") == [
        Withdraw("the final transcript moved on"),
        StartDraft("Book it for Thursday."),
    ]
    assert core.held == "Book it for Thursday."
    assert core.inner_confirmed() == [
        Settled("reused", 2, 1, 2, 0, interim_drafts=1, interim_differed=1),
        Confirm(True, True),
    ]


def test_the_interim_is_never_in_hand_for_the_vads_stop_or_the_confirmation():
    """The stop drafts what it drafts today (the finals); confirmation releases only a draft
    the final transcript says."""
    core = DraftHold(pause_stable_s=0.032, max_drafts=2)
    core.final_transcript("Hi.")
    core.interim_transcript("book it")
    core.caller_silence(0.1)
    assert core.caller_silent() == [StartDraft("Hi.")]  # the VAD's stop: no interim words
    core.turn_stopped()
    core.turn_started()
    core.interim_transcript("book it for tuesday")
    core.caller_silence(0.032)
    assert core.caller_paused() == [StartDraft("book it for tuesday")]
    # Confirmed before any final: nothing says the drafted words, so nothing is released.
    settled, confirm = core.inner_confirmed()
    assert confirm == Confirm(True, False) and settled.outcome == "discarded"
    assert settled.interim_differed == 1


@pytest.mark.parametrize("bad", [0, -0.1, True, "0.032"])
def test_a_bad_pause_stable_is_refused(bad):
    with pytest.raises(ValueError, match="pause_stable_s"):
        DraftHold(pause_stable_s=bad)


@given(
    st.lists(st.sampled_from(sorted(EVENTS)), max_size=30),
    st.lists(st.sampled_from([0.0, 0.032, 0.064, 0.128]), min_size=30, max_size=30),
)
def test_with_the_option_off_silence_changes_no_decision(names, silences):
    """pause_stable_s=None: feeding the silence frame by frame leaves every decision as today."""
    today, fed = DraftHold(), DraftHold()
    for name, silence in zip(names, silences, strict=False):
        assert fed.caller_silence(silence) == []
        assert EVENTS[name](fed) == EVENTS[name](today), names
        assert fed.held == today.held
    assert fed.outcomes == today.outcomes


def test_drafts_held_back_for_load_are_counted_by_the_rule_that_said_so():
    answers = iter(["queue", "busy", None])
    core = DraftHold(engine_busy=lambda: next(answers))
    core.final_transcript("book me for tuesday")
    assert core.caller_silent() == []  # queue
    core.caller_speaking()
    assert core.caller_silent() == []  # busy
    core.caller_speaking()
    assert core.caller_silent() == [StartDraft("book me for tuesday")]
    settled = core.inner_confirmed()[0]
    assert settled.drafts_yielded == 2
    assert settled.yielded_by == (("busy", 1), ("queue", 1))
    fields = settled.fields()
    assert fields["drafts_yielded_queue"] == 1 and fields["drafts_yielded_busy"] == 1
    assert "drafts_over_budget" not in fields
