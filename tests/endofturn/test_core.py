"""EarlyConfirm and PauseTracker: every rule, then properties over random calls (hypothesis)."""

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipecat_fast.endofturn.core import (
    AskVerdict,
    ClockUnreliable,
    Confirm,
    EarlyConfirm,
    EarlyVerdictSchedule,
    LateFinal,
    PauseTracker,
    STTResult,
)

SPEECH_FINAL = dict(is_final=True, speech_final=True)


def final(text, end_s, **kw):
    return STTResult(text=text, end_s=end_s, **{**SPEECH_FINAL, **kw})


def interim(text, end_s=None):
    return STTResult(text=text, is_final=False, end_s=end_s)


def spoken(core, seconds):
    """The caller speaks for ``seconds`` of audio (the strategy's clock advances)."""
    core.audio(seconds)


def stopped_after(core, speech_s, stop_secs=0.2):
    """Speech for ``speech_s``, then the VAD's stop window: returns the end of speech."""
    core.audio(speech_s + stop_secs)
    core.speech_stopped(stop_secs)
    return core.speech_end_s


def test_final_reaching_the_end_of_speech_confirms_once_the_analyzer_says_complete():
    core = EarlyConfirm()
    core.turn_started()
    spoken(core, 1.5)
    assert core.result(final("Book it for Tuesday.", 1.51)) == []  # no VAD stop yet
    end = stopped_after(core, 0.0)
    assert end == pytest.approx(1.5)
    assert core.verdict(True) == [Confirm("segment_end")]
    assert core.confirmations["segment_end"] == 1


def test_an_incomplete_verdict_never_confirms():
    core = EarlyConfirm()
    spoken(core, 1.5)
    core.result(final("So I was", 1.5))
    stopped_after(core, 0.0)
    assert core.verdict(False) == []
    assert core.proof() == "segment_end"  # the transcript is complete; the caller is not


def test_a_final_short_of_the_end_of_speech_waits_for_one_that_reaches_it():
    core = EarlyConfirm(tolerance_s=0.1)
    spoken(core, 1.0)
    core.result(final("I'd like", 1.0))  # cut at a short pause, then one more word
    end = stopped_after(core, 0.4)  # "Tuesday" spoken after it: speech ended at 1.4
    assert core.verdict(True) == []
    assert core.proof() is None
    assert core.result(final("Tuesday.", end + 0.01)) == [Confirm("segment_end")]
    assert core.final_text == "I'd like Tuesday."


def test_tolerance_applies_only_to_a_final_cut_at_a_pause():
    core = EarlyConfirm(tolerance_s=0.12)
    spoken(core, 2.0)
    core.result(final("Done.", 1.9, speech_final=False))  # a final Deepgram cut mid-speech
    stopped_after(core, 0.0)
    assert core.verdict(True) == []
    core.result(final("", 2.0, speech_final=False, finalize_answer=True))
    assert core.proof() == "segment_end"  # the finalize answer covers the audio up to 2.0


def test_an_empty_finalize_answer_after_the_final_proves_coverage():
    core = EarlyConfirm(tolerance_s=0.0)
    spoken(core, 1.5)
    core.result(final("Yes please.", 1.3))  # short of the VAD's end of speech at 1.5
    stopped_after(core, 0.0)
    assert core.verdict(True) == []
    answer = STTResult(text="", is_final=True, end_s=1.7, finalize_answer=True)
    assert core.result(answer) == [Confirm("segment_end")]
    assert core.final_text == "Yes please."  # the empty answer added no words


def test_an_interim_after_the_final_means_words_in_flight():
    core = EarlyConfirm()
    spoken(core, 1.6)
    core.result(final("I want", 1.5))
    core.result(interim("to book", 1.55))
    stopped_after(core, 0.0)
    assert core.verdict(True) == []
    assert core.result(final("to book.", 1.55)) == [Confirm("segment_end")]


def test_an_empty_interim_does_not_block():
    core = EarlyConfirm()
    spoken(core, 1.5)
    core.result(final("Yes.", 1.5))
    core.result(interim("   "))
    stopped_after(core, 0.0)
    assert core.verdict(True) == [Confirm("segment_end")]


def test_without_an_audio_range_only_pipecats_finalized_mark_counts():
    core = EarlyConfirm()
    spoken(core, 1.5)
    core.result(STTResult("Yes.", is_final=True))  # a provider that reports no range
    stopped_after(core, 0.0)
    assert core.verdict(True) == []
    assert core.result(STTResult("Thanks.", is_final=True, finalized=True)) == [
        Confirm("finalized")
    ]


def test_no_words_in_hand_no_proof():
    core = EarlyConfirm()
    spoken(core, 1.5)
    core.result(STTResult("", is_final=True, end_s=1.7, finalize_answer=True))
    stopped_after(core, 0.0)
    assert core.verdict(True) == []


def test_speech_again_voids_the_end_of_speech_and_the_verdict():
    core = EarlyConfirm()
    spoken(core, 1.0)
    core.result(final("So", 1.0))
    stopped_after(core, 0.0)
    core.speech_started()
    assert core.speech_end_s is None
    assert core.verdict(True) == []  # a verdict without a VAD stop is not acted on
    assert core.proof() is None


def test_a_new_turn_forgets_the_last_ones_transcript():
    core = EarlyConfirm()
    spoken(core, 1.0)
    core.result(final("Hello.", 1.0))
    core.turn_started()
    stopped_after(core, 0.0)
    assert core.final_text == ""
    assert core.verdict(True) == []


def test_a_result_beyond_the_strategys_audio_makes_timing_unreliable():
    core = EarlyConfirm()
    spoken(core, 1.0)
    [note] = core.result(final("Hello.", 1.5))  # the STT heard audio this strategy did not
    assert isinstance(note, ClockUnreliable) and not core.clock_reliable
    stopped_after(core, 1.0)
    core.result(final("There.", 2.2))
    assert core.verdict(True) == []  # timing proofs are off for good
    assert core.result(STTResult("Bye.", is_final=True, finalized=True)) == [Confirm("finalized")]


def test_rounding_of_the_stts_timestamps_is_not_a_broken_clock():
    core = EarlyConfirm(clock_lead_s=0.03)
    spoken(core, 1.0)
    assert core.result(final("Hello.", 1.02)) == []
    assert core.clock_reliable


def test_a_final_after_an_early_confirmation_is_reported_late_until_the_caller_speaks():
    core = EarlyConfirm()
    spoken(core, 1.0)
    core.result(final("Book it", 1.0))
    stopped_after(core, 0.0)
    assert core.verdict(True) == [Confirm("segment_end")]
    core.turn_stopped(by_us=True)
    core.audio(0.3)
    [late] = core.result(final("now.", 1.3))
    assert late == LateFinal("now.", pytest.approx(0.3))
    assert core.late_finals == 1
    core.speech_started()
    core.audio(0.7)
    assert core.result(final("Something else.", 2.0)) == []
    assert core.late_finals == 1


def test_a_final_after_a_turn_someone_else_confirmed_is_not_late():
    core = EarlyConfirm()
    spoken(core, 1.0)
    core.result(final("Book it", 1.0))
    stopped_after(core, 0.0)
    core.turn_stopped(by_us=False)
    core.audio(0.3)
    assert core.result(final("now.", 1.3)) == []
    assert core.late_finals == 0


@pytest.mark.parametrize("bad", [-0.1, "0.1", True, None])
def test_bad_tolerances_are_refused(bad):
    with pytest.raises(ValueError, match="tolerance_s"):
        EarlyConfirm(tolerance_s=bad)


# -- properties -----------------------------------------------------------------------------

WORD_S = st.floats(0.15, 0.6)  # the shortest word we guard against: 150 ms
GAP_S = st.floats(0.0, 0.19)  # pauses inside the VAD's 200 ms stop window


@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(st.tuples(GAP_S, WORD_S), min_size=1, max_size=8),
    final_latency=st.floats(0.05, 0.35),
    interim_latency=st.floats(0.05, 0.6),
    hangover=st.floats(0.0, 0.06),
    verdict_delay=st.floats(0.0, 0.08),
)
# The dangerous shape: a short last word after a short pause, whose interim and final both
# arrive after the analyzer's verdict, while the final before the pause already arrived.
@example([(0.0, 0.3), (0.05, 0.15)], 0.3, 0.5, 0.0, 0.0)
@example([(0.0, 0.4), (0.01, 0.15)], 0.35, 0.6, 0.06, 0.0)
def test_never_confirms_before_every_word_is_in_the_final(
    words, final_latency, interim_latency, hangover, verdict_delay
):
    """A world where the STT finalizes at every pause of 10 ms or more (Deepgram's default
    endpointing) and sends an interim for each word some time after it ends: whenever the
    core confirms, every word the caller said is in the final transcript."""
    events = []  # (time, kind, payload)
    t = 0.0
    segment_words: list[str] = []
    for i, (gap, length) in enumerate(words):
        if gap >= 0.01 and segment_words:
            events.append((t + 0.01 + final_latency, "final", (list(segment_words), t + 0.01)))
            segment_words = []
        t += gap
        t += length
        segment_words.append(f"w{i}")
        events.append((t + interim_latency, "interim", (f"w{i}", t)))
    end_of_speech = t + hangover
    events.append((t + 0.01 + final_latency, "final", (list(segment_words), t + 0.01)))
    events.append((end_of_speech + 0.2, "vad_stop", None))
    events.append((end_of_speech + 0.2 + verdict_delay, "verdict", None))
    events.sort(key=lambda e: e[0])

    core = EarlyConfirm(tolerance_s=0.12)
    now = 0.0
    heard: list[str] = []
    confirmed_with = None
    for at, kind, payload in events:
        core.audio(at - now)
        now = at
        if kind == "final":
            texts, end = payload
            heard += texts
            decisions = core.result(final(" ".join(texts), end))
        elif kind == "interim":
            word, _end = payload
            if word in heard:
                continue  # already finalized: Deepgram never resends a finalized word
            decisions = core.result(interim(word))
        elif kind == "vad_stop":
            decisions = core.speech_stopped(0.2)
        else:
            decisions = core.verdict(True)
        if any(isinstance(d, Confirm) for d in decisions) and confirmed_with is None:
            confirmed_with = core.final_text.split()
    assert confirmed_with is not None  # every word is eventually finalized: it confirms
    assert confirmed_with == [f"w{i}" for i in range(len(words))]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("audio"), st.floats(0.0, 1.0)),
            st.tuples(st.just("start"), st.none()),
            st.tuples(st.just("stop"), st.floats(0.0, 0.5)),
            st.tuples(st.just("verdict"), st.booleans()),
            st.tuples(
                st.just("result"),
                st.tuples(
                    st.sampled_from(["", "yes", "book it"]),
                    st.booleans(),
                    st.one_of(st.none(), st.floats(0.0, 20.0)),
                    st.booleans(),
                    st.booleans(),
                    st.booleans(),
                ),
            ),
            st.tuples(st.just("turn"), st.booleans()),
        ),
        max_size=40,
    )
)
def test_every_confirmation_has_its_proof_and_a_complete_verdict(steps):
    """Over any event sequence, a Confirm comes only with a proof in hand and the analyzer's
    complete verdict since the VAD stopped; at most one per verdict."""
    core = EarlyConfirm()
    complete_since_stop = False
    for kind, arg in steps:
        proof_before = None
        if kind == "audio":
            core.audio(arg)
            decisions = []
        elif kind == "start":
            core.speech_started()
            complete_since_stop = False
            decisions = []
        elif kind == "stop":
            decisions = core.speech_stopped(arg)
            complete_since_stop = False
        elif kind == "verdict":
            decisions = core.verdict(arg)
            if core.speech_end_s is not None:
                complete_since_stop = arg
        elif kind == "result":
            text, is_final, end, sf, answer, finalized = arg
            decisions = core.result(STTResult(text, is_final, end, sf, answer, finalized))
        else:
            if arg:
                core.turn_started()
            else:
                core.turn_stopped(by_us=False)
            complete_since_stop = False
            decisions = []
        confirms = [d for d in decisions if isinstance(d, Confirm)]
        assert len(confirms) <= 1
        if confirms:
            assert complete_since_stop
            proof_before = core.proof()
            assert proof_before == confirms[0].proof
            assert core.final_text.strip() and core.speech_end_s is not None
            complete_since_stop = False  # one confirmation per verdict


# -- PauseTracker ---------------------------------------------------------------------------


def test_pause_tracker_counts_silence_from_the_last_speech_frame():
    pauses = PauseTracker(0.7)
    for confidence in (0.1, 0.2):
        pauses.feed(confidence, 0.032)
    assert pauses.silence_s == pytest.approx(0.064) and not pauses.heard_speech
    pauses.feed(0.9, 0.032)
    assert pauses.silence_s == 0.0 and pauses.heard_speech
    pauses.feed(0.69, 0.032)
    pauses.feed(0.3, 0.032)
    assert pauses.silence_s == pytest.approx(0.064)
    pauses.feed(0.7, 0.032)  # at the threshold is speech, as the VAD counts it
    assert pauses.silence_s == 0.0
    pauses.reset()
    assert pauses.silence_s == 0.0 and not pauses.heard_speech


def test_pause_tracker_refuses_a_threshold_outside_0_1():
    with pytest.raises(ValueError):
        PauseTracker(1.5)


# -- the early verdict ----------------------------------------------------------------------


def test_a_complete_verdict_at_the_pause_confirms_at_the_vads_stop():
    core = EarlyConfirm()
    spoken(core, 1.5)
    core.result(final("Book it for Tuesday.", 1.51))
    core.audio(0.1)
    assert core.early_verdict(True) == []  # held for the stop
    core.audio(0.1)
    assert core.speech_stopped(0.2) == [Confirm("segment_end")]
    assert core.early_verdicts == 1


def test_speech_after_the_pause_voids_its_verdict():
    for void in (lambda c: c.pause_ended(), lambda c: c.speech_started()):
        core = EarlyConfirm()
        spoken(core, 1.5)
        core.result(final("I want", 1.51))
        core.early_verdict(True)
        void(core)
        core.audio(0.2)
        assert core.speech_stopped(0.2) == []


def test_an_incomplete_early_verdict_leaves_the_stop_to_the_analyzer():
    core = EarlyConfirm()
    spoken(core, 1.5)
    core.result(final("So I was", 1.51))
    core.early_verdict(False)
    core.audio(0.2)
    assert core.speech_stopped(0.2) == []
    assert core.verdict(True) == [Confirm("segment_end")]
    assert core.early_verdicts == 0


def test_after_the_stop_an_early_verdict_counts_only_before_the_analyzers_own():
    core = EarlyConfirm()
    spoken(core, 1.5)
    core.result(final("Yes.", 1.51))
    stopped_after(core, 0.0)
    assert core.early_verdict(True) == [Confirm("segment_end")]  # it came first
    other = EarlyConfirm()
    spoken(other, 1.5)
    other.result(final("So", 1.51))
    stopped_after(other, 0.0)
    assert other.verdict(False) == []
    assert other.early_verdict(True) == []  # the stop's own verdict said incomplete


# -- when the early verdict is asked ----------------------------------------------------------

FRAME_S = 0.032  # one Silero frame


def test_the_model_is_asked_once_per_pause_at_the_configured_silence():
    plan = EarlyVerdictSchedule(FRAME_S)
    assert plan.silence(0.0) == ([], False)
    assert plan.silence(0.02) == ([], False)  # not yet
    assert plan.silence(FRAME_S) == ([AskVerdict(0)], False)
    assert plan.silence(2 * FRAME_S) == ([], False)  # once per pause, even after it returned
    assert plan.answered(0) is True  # the caller is still silent: its answer counts
    assert plan.silence(3 * FRAME_S) == ([], False)
    assert plan.asked == 1


def test_speech_again_voids_the_pause_and_its_answer():
    plan = EarlyVerdictSchedule(FRAME_S)
    plan.silence(FRAME_S)
    assert plan.silence(0.0) == ([], True)  # the pause ended: its verdict is void
    assert plan.answered(0) is False
    assert plan.silence(FRAME_S) == ([AskVerdict(1)], False)  # a new pause, a new ask
    assert plan.answered(1) is True


def test_at_most_one_inference_runs_and_a_pause_waiting_for_it_is_asked_when_it_returns():
    plan = EarlyVerdictSchedule(FRAME_S)
    plan.silence(FRAME_S)  # pause 0 asked
    plan.silence(0.0)  # the caller goes on while it runs
    assert plan.silence(FRAME_S) == ([], False)  # pause 1: the CPU is still busy with pause 0
    assert plan.running
    assert plan.answered(0) is False  # void, but the slot is free now
    assert plan.silence(2 * FRAME_S) == ([AskVerdict(1)], False)
    assert plan.asked == 2


def test_the_stop_waits_only_for_an_inference_of_the_pause_that_led_to_it():
    plan = EarlyVerdictSchedule(FRAME_S)
    plan.silence(FRAME_S)
    assert plan.waits_at_stop()  # asked in this pause, still running: wait, do not repeat
    plan.answered(0)
    assert not plan.waits_at_stop()  # back already
    other = EarlyVerdictSchedule(FRAME_S)
    other.silence(FRAME_S)
    other.silence(0.0)
    other.silence(FRAME_S)  # blocked behind the void one
    assert not other.waits_at_stop()  # what runs is for a pause that is over
    other.speech_started()
    assert not other.waits_at_stop()


def test_after_the_vads_stop_nothing_more_is_asked():
    plan = EarlyVerdictSchedule(FRAME_S)
    plan.silence(FRAME_S)
    plan.silence(0.0)
    plan.silence(FRAME_S)  # blocked: pause 0's inference is running
    plan.vad_stopped()  # the wrapped analyzer answers for this pause
    plan.answered(0)
    assert plan.silence(0.3) == ([], False)
    plan.turn_stopped()
    assert plan.answered(1) is False  # a late answer belongs to the ended turn


def test_schedule_settings_are_checked():
    for bad in (0, -0.1, True, "0.1"):
        with pytest.raises(ValueError):
            EarlyVerdictSchedule(bad)
