import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipecat_fast.ttfa.core import (
    MARKS,
    STAGE_NAMES,
    TurnRecord,
    blocking_stages_ms,
    percentile,
    summarize,
)


def test_linear_pipeline_charges_each_stage_its_gap():
    marks = {
        "vad_stopped": 10.2,
        "final_transcript": 10.25,
        "turn_confirmed": 10.30,
        "llm_request": 10.31,
        "llm_first_token": 10.61,
        "tts_text": 10.70,
        "tts_first_byte": 10.74,
        "first_audio_out": 10.76,
    }
    stages = blocking_stages_ms(10.0, marks)
    assert list(stages) == list(STAGE_NAMES)
    expected = [200, 50, 50, 10, 300, 90, 40, 20]
    assert [round(v, 6) for v in stages.values()] == expected
    assert sum(stages.values()) == pytest.approx(760)


def test_stt_final_inside_vad_window_costs_nothing():
    stages = blocking_stages_ms(0.0, {"vad_stopped": 0.2, "final_transcript": 0.12})
    assert stages == {"endpointing": pytest.approx(200), "stt_final": 0.0}


def test_speculative_request_before_confirmation_only_charges_the_wait_after_it():
    # Draft sent 300 ms before the turn was confirmed; its first token released 5 ms after.
    marks = {
        "vad_stopped": 0.2,
        "turn_confirmed": 0.25,
        "llm_request": -0.05,
        "llm_first_token": 0.255,
        "first_audio_out": 0.4,
    }
    stages = blocking_stages_ms(0.0, marks)
    assert stages["llm_dispatch"] == 0.0
    assert stages["llm_ttft"] == pytest.approx(5)
    assert sum(stages.values()) == pytest.approx(400)


def test_tts_is_not_charged_for_the_llm_writing_its_sentence():
    # The LLM takes 400 ms to finish the first sentence; TTS answers 40 ms after getting it.
    marks = {
        "llm_first_token": 0.3,
        "tts_text": 0.7,
        "tts_first_byte": 0.74,
        "first_audio_out": 0.75,
    }
    stages = blocking_stages_ms(0.0, marks)
    assert stages["tts_ttfb"] == pytest.approx(40)
    assert stages["sentence_aggregation"] == pytest.approx(400)


@given(
    st.dictionaries(st.sampled_from(MARKS[:-1]), st.floats(-1.0, 5.0, allow_nan=False), max_size=7),
    st.floats(5.0, 6.0),
)
def test_blocking_times_are_non_negative_and_sum_to_ttfa(marks, out):
    marks = {**marks, "first_audio_out": out}
    stages = blocking_stages_ms(0.0, marks)
    assert all(v >= 0 for v in stages.values())
    assert sum(stages.values()) == pytest.approx(out * 1000, abs=1e-6)


def test_turn_record_to_dict_reports_ms_relative_to_end_of_speech():
    record = TurnRecord(
        turn=2,
        user_stopped_at=100.0,
        marks={"vad_stopped": 100.2, "llm_request": 100.3, "first_audio_out": 100.9},
        prompt_tokens=3000,
        cached_tokens=2944,
        extra={"speculation": "none"},
    )
    row = record.to_dict()
    assert row["ttfa_ms"] == pytest.approx(900)
    assert row["marks_ms"] == {
        "vad_stopped": pytest.approx(200),
        "llm_request": pytest.approx(300),
        "first_audio_out": pytest.approx(900),
    }
    assert row["stages_ms"]["output"] == pytest.approx(600)
    assert (row["prompt_tokens"], row["cached_tokens"], row["speculation"]) == (3000, 2944, "none")
    assert TurnRecord(turn=0, user_stopped_at=1.0).ttfa_ms is None


def test_percentile_interpolates_like_numpy_linear():
    values = [100.0, 300.0, 200.0, 400.0]
    assert percentile(values, 50) == pytest.approx(250)
    assert percentile(values, 95) == pytest.approx(385)
    assert percentile([7.0], 95) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_summarize_counts_unanswered_turns_apart():
    s = summarize([500.0, None, 700.0])
    assert s == {"ttfa_p50_ms": 600.0, "ttfa_p95_ms": 690.0, "n_turns": 2, "n_unanswered": 1}
    assert summarize([None])["ttfa_p50_ms"] is None
