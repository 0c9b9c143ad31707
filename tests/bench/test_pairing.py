"""Tying measured turns to scripted utterances, and ratios over the same turns."""

import pytest

from pipecat_fast.bench.pairing import (
    UtteranceSpan,
    key_name,
    match_turns,
    paired_summary,
)
from pipecat_fast.ttfa import TurnRecord


def _record(stopped, first_audio):
    return TurnRecord(turn=99, user_stopped_at=stopped, marks={"first_audio_out": first_audio})


def _call_spans():
    # Utterance 0: 10.0-12.5 s; utterance 1 pauses 21.0-22.2 s and ends at 24.0 s; utterance 2
    # starts at 30 s.
    return [
        UtteranceSpan(0, started=10.0, speech_end=12.5, next_started=20.0),
        UtteranceSpan(1, 20.0, 24.0, pauses=((21.0, 22.2),), next_started=30.0),
        UtteranceSpan(2, 30.0, 32.0),
    ]


def test_each_reply_is_tied_to_the_utterance_it_answers():
    r0, r1, r2 = _record(12.5, 13.2), _record(24.0, 24.8), _record(32.0, 32.6)
    outcomes = match_turns(_call_spans(), [r2, r0, r1], bot_starts=[13.2, 24.8, 32.6])
    assert [o.record for o in outcomes] == [r0, r1, r2]
    assert [r.turn for r in (r0, r1, r2)] == [0, 1, 2]  # the scripted index, not the meter's
    assert [(o.false_cutoffs, o.talked_over) for o in outcomes] == [(0, 0)] * 3
    assert [o.deliberate_pause for o in outcomes] == [False, True, False]


def test_bot_audio_inside_a_deliberate_pause_is_a_false_cutoff_not_an_answer():
    # The meter closed a record at 21.9 s (the bot answered the half utterance), then the
    # caller went on; the real answer came after the real end.
    cut, real = _record(21.0, 21.9), _record(24.0, 24.9)
    outcomes = match_turns(_call_spans(), [cut, real], bot_starts=[21.9, 24.9])
    assert outcomes[1].record is real and outcomes[1].false_cutoffs == 1
    assert outcomes[1].talked_over == 0
    assert outcomes[0].record is None and outcomes[2].record is None


def test_a_reply_measured_from_the_pause_is_not_the_answer_to_the_real_end():
    # Audio after the real end, but its zero is the pause: it answers the half utterance.
    late = _record(21.0, 24.5)
    outcomes = match_turns(_call_spans(), [late], bot_starts=[24.5])
    assert outcomes[1].record is None and outcomes[1].false_cutoffs == 0


def test_bot_audio_after_the_caller_went_on_is_still_the_pause_s_false_cutoff():
    # Decided in the pause, heard after the caller resumed: one cut-off, not two events.
    outcomes = match_turns(_call_spans(), [], bot_starts=[22.5, 23.0])
    assert outcomes[1].false_cutoffs == 1 and outcomes[1].talked_over == 0


def test_bot_audio_while_the_caller_speaks_elsewhere_is_talked_over():
    outcomes = match_turns(_call_spans(), [], bot_starts=[11.0, 20.5])
    assert outcomes[0].talked_over == 1 and outcomes[0].false_cutoffs == 0
    assert outcomes[1].talked_over == 1 and outcomes[1].false_cutoffs == 0


def test_a_reply_after_the_next_utterance_started_answers_nothing():
    # The caller ran out of patience and spoke again: the late audio is no answer to turn 0.
    outcomes = match_turns(_call_spans(), [_record(12.5, 20.5)], bot_starts=[20.5])
    assert outcomes[0].record is None
    assert outcomes[1].talked_over == 1


def _rows(config, ttfas, paused=(), cutoffs=None):
    cutoffs = cutoffs or {}
    return [
        {
            "config": config,
            "slot": 0,
            "call": "c",
            "repeat": 0,
            "turn": i,
            "ttfa_ms": v,
            "deliberate_pause": i in paused,
            "false_cutoffs": cutoffs.get(i, 0),
        }
        for i, v in enumerate(ttfas)
    ]


def test_ratios_are_taken_over_the_turns_every_configuration_answered():
    # "fast" did not answer turn 3, the slow cold turn; over whichever turns each answered,
    # its p95 would compare 400-ish ms against stock's 5 s turn.
    rows = _rows("stock", [500, 600, 700, 5000]) + _rows("fast", [250, 300, 350, None])
    s = paired_summary(rows, ["stock", "fast"], "stock")
    assert s["n_scripted"] == 4 and s["n_paired"] == 3
    assert s["configs"]["stock"]["ttfa_p50_ms"] == 600
    assert s["ratios"]["fast"] == {"p50": 0.5, "p95": 0.5}
    assert s["unanswered"] == {"stock": [], "fast": ["0/c/0/3"]}
    assert s["answer_differences"] == [
        {"key": "0/c/0/3", "answered_by": ["stock"], "unanswered_by": ["fast"]}
    ]


def test_paused_turns_are_reported_apart_with_their_false_cutoffs():
    rows = _rows("stock", [500, 800, 700], paused={1}, cutoffs={1: 1})
    rows += _rows("fast", [250, 300, 350], paused={1}, cutoffs={1: 1})
    rows += _rows("faster", [200, None, 300], paused={1})
    s = paired_summary(rows, ["stock", "fast", "faster"], "stock")
    assert s["n_scripted"] == 2 and s["n_paired"] == 2  # turn 1 is not in the TTFA sample
    assert s["configs"]["stock"]["ttfa_p50_ms"] == 600
    assert s["paused"]["n_turns"] == 1 and s["paused"]["n_paired"] == 0
    assert s["paused"]["false_cutoffs"] == {"stock": 1, "fast": 1, "faster": 0}
    assert s["answer_differences"][0]["unanswered_by"] == ["faster"]


def test_the_same_call_twice_in_a_run_is_two_sets_of_turns():
    rows = _rows("stock", [500, 600]) + _rows("fast", [400, 300])
    again = [dict(r, slot=5) for r in rows]
    again[2]["ttfa_ms"] = None  # fast missed turn 0 of the second ask_prices only
    s = paired_summary(rows + again, ["stock", "fast"], "stock")
    assert s["n_scripted"] == 4 and s["n_paired"] == 3
    assert s["unanswered"]["fast"] == [key_name((5, "c", 0, 0))]


def test_nothing_answered_by_all_gives_no_ratio_rather_than_a_wrong_one():
    rows = _rows("stock", [500, None]) + _rows("fast", [None, 300])
    s = paired_summary(rows, ["stock", "fast"], "stock")
    assert s["n_paired"] == 0
    assert s["ratios"]["fast"] == {"p50": None, "p95": None}


@pytest.mark.parametrize("noise", [0.97, 1.0, 1.03])
def test_a_configuration_against_itself_is_its_noise(noise):
    base = [500.0, 610.0, 700.0, 820.0, 930.0]
    rows = _rows("stock", base) + _rows("stock-again", [v * noise for v in base])
    s = paired_summary(rows, ["stock", "stock-again"], "stock")
    assert s["ratios"]["stock-again"]["p50"] == pytest.approx(noise, abs=1e-3)
