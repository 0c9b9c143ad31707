"""The remote caller's arithmetic: what the far end hears and when, and TTFA per utterance."""

import array
import math

import pytest

from pipecat_fast.testing.remote_caller import (
    CallerTimeline,
    ClientTurn,
    Playout,
    call_dict,
    client_turns,
    rms,
)


def test_rms_of_silence_a_full_scale_square_and_no_samples():
    assert rms(b"\x00\x00" * 160) == 0.0
    square = array.array("h", [1000, -1000] * 80).tobytes()
    assert rms(square) == pytest.approx(1000.0)
    assert rms(b"") == 0.0 and rms(b"\x01") == 0.0


def test_buffered_playout_plays_audio_sent_faster_than_real_time_at_its_own_pace():
    playout = Playout()
    # Ten 20 ms chunks arrive in the same millisecond (a bot that sends ahead of real time).
    starts = [playout.feed(10.0, 0.02, speech=True) for _ in range(10)]
    assert starts == pytest.approx([10.0 + 0.02 * i for i in range(10)])
    assert playout.segments == [[10.0, pytest.approx(10.2)]]
    assert playout.received_s == pytest.approx(0.2)


def test_unbuffered_playout_plays_each_chunk_when_it_arrives():
    playout = Playout(buffered=False)
    assert playout.feed(5.0, 0.02, True) == 5.0 and playout.feed(5.0, 0.02, True) == 5.0


def test_silence_shorter_than_the_stop_gap_joins_two_stretches_longer_splits_them():
    playout = Playout(stop_gap_s=0.35)
    playout.feed(0.0, 0.5, True)
    playout.feed(0.6, 0.2, False)  # 0.1 s of silence (0.5..0.6 idle, then silence)
    playout.feed(0.8, 0.5, True)  # 0.3 s after the speech ended: same stretch
    playout.feed(2.0, 0.5, True)  # 0.7 s after: a new stretch
    assert playout.segments == [[0.0, 1.3], [2.0, 2.5]]


def test_clear_drops_what_is_queued_but_not_played():
    playout = Playout()
    for _ in range(50):
        playout.feed(1.0, 0.02, True)  # one second queued at 1.0
    playout.clear(1.3)
    assert playout.segments == [[1.0, 1.3]]
    assert playout.feed(1.31, 0.02, True) == 1.31  # the next chunk plays at once


def test_speaking_covers_the_stop_gap_and_audio_still_queued():
    playout = Playout(stop_gap_s=0.35)
    playout.feed(1.0, 0.5, True)
    assert playout.speaking(0.5)  # queued after now
    assert playout.speaking(1.2) and playout.speaking(1.8)
    assert not playout.speaking(1.9)


def test_client_turns_measure_from_the_real_end_of_speech_to_the_first_reply_heard():
    playout = Playout()
    playout.feed(0.5, 0.3, True)  # the greeting, before any utterance: not a reply
    playout.feed(3.2, 1.0, True)  # reply to utterance 0 (ends at 2.0 + 0.8 = 2.8)
    # utterance 1 starts at 6.0, ends at 6.0 + 1.0; no reply before utterance 2 at 9.0
    playout.feed(9.5, 0.5, True)  # during utterance 2 (ends at 9.0 + 1.2 = 10.2): not a reply
    turns = client_turns([2.0, 6.0, 9.0], [800, 1000, 1200], playout)
    assert [t.ttfa_ms for t in turns][0] == pytest.approx(400.0)
    assert turns[1].ttfa_ms is None and turns[2].ttfa_ms is None
    assert turns[0].to_dict() == {"turn": 0, "ttfa_ms": 400.0}


def test_a_reply_after_the_next_utterance_started_answers_nothing():
    playout = Playout()
    playout.feed(4.5, 0.5, True)
    turns = client_turns([1.0, 4.0], [500, 500], playout)
    assert turns[0].ttfa_ms is None and turns[1].ttfa_ms == pytest.approx(0.0)
    assert math.isclose(turns[1].speech_end, 4.5)


def test_queued_until_is_what_still_plays_after_now():
    playout = Playout()
    for _ in range(10):
        playout.feed(2.0, 0.02, True)
    assert playout.queued_until(2.05) == pytest.approx(0.15)
    assert playout.queued_until(3.0) == 0.0


def test_a_call_result_reports_its_turns_summary_and_the_transports_own_keys():
    turns = [ClientTurn(0, 412.345, 1.0, 1.4), ClientTurn(1, None, 3.0, None)]
    timeline = CallerTimeline(no_reply=[1])
    out = call_dict(turns, timeline, 812.26, 3.456, None, call_sid="CA1", connect_ms=55.55)
    assert out["call_sid"] == "CA1" and out["connect_ms"] == 55.5
    assert out["turns"] == [{"turn": 0, "ttfa_ms": 412.3}, {"turn": 1, "ttfa_ms": None}]
    assert out["summary"]["n_turns"] == 1 and out["summary"]["n_unanswered"] == 1
    assert out["summary"]["ttfa_p50_ms"] == 412.3 and out["no_reply"] == [1]
    assert out["greeting_ms"] == 812.3 and out["bot_audio_s"] == 3.46 and out["error"] is None
