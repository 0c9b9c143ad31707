"""The spoken-words estimator and the playback ledger: plain values, no frames."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipecat_fast.bargein.core import (
    SECONDS_PER_CHAR,
    PlaybackLedger,
    heard_prefix,
    pause_units,
    speech_units,
    word_spans,
)
from pipecat_fast.testing.synth import plan_speech

COUNT = ", ".join(str(i) for i in range(1, 21)) + "."


def emulated(text):
    """Word end times and total duration of ``text`` as the TTS emulator speaks it."""
    words, duration = plan_speech(text)
    return [w.end_s for w in words], duration


# --- word splitting and units ----------------------------------------------------------------


def test_words_are_whitespace_runs_and_cjk_characters():
    text = "Hi, there.  Ok"
    assert [text[a:b] for a, b in word_spans(text)] == ["Hi,", "there.", "Ok"]
    assert [m for m in (lambda t: [t[a:b] for a, b in word_spans(t)])("予約します。")] == [
        "予", "約", "し", "ま", "す。",
    ]  # fmt: skip


def test_units_count_letters_and_digits_not_punctuation():
    assert speech_units("dollars.") == 7
    assert speech_units("42") == 2
    assert speech_units("—") == 1  # never zero
    assert speech_units("proceed?", "syllables") == 2
    assert speech_units("42", "syllables") == 2
    assert pause_units("dollars.") > pause_units("well,") > pause_units("word") == 0


def test_unknown_unit_is_an_error():
    with pytest.raises(ValueError):
        speech_units("x", "phonemes")
    with pytest.raises(ValueError):
        PlaybackLedger(unit="phonemes")


# --- heard_prefix: the cases -----------------------------------------------------------


def test_counting_interrupted_after_five_numbers_keeps_about_five():
    ends, duration = emulated(COUNT)
    heard = heard_prefix(COUNT, ends[4] + 0.02, audio_s=duration)
    assert 4 <= heard.words <= 6
    assert heard.text.startswith("1, 2, 3, 4")


def test_nothing_played_hears_nothing():
    heard = heard_prefix("Your total is 42 dollars. Shall I proceed?", 0.0, audio_s=2.5)
    assert heard.words == 0 and heard.text == ""


def test_the_whole_audio_hears_everything():
    text = "Your total is 42 dollars."
    heard = heard_prefix(text, 2.0, audio_s=2.0)
    assert heard.complete and heard.text == text


def test_word_timestamps_keep_exactly_the_finished_words():
    text = "Your total is 42 dollars."
    starts = [0.0, 0.3, 0.7, 0.85, 1.1]
    # Word 3 ("42") ends where "dollars." starts, at 1.1 s.
    assert heard_prefix(text, 1.09, word_starts=starts, audio_s=1.6).text == "Your total is"
    assert heard_prefix(text, 1.10, word_starts=starts, audio_s=1.6).text == "Your total is 42"
    assert heard_prefix(text, 1.59, word_starts=starts, audio_s=1.6).words == 4
    assert heard_prefix(text, 1.60, word_starts=starts, audio_s=1.6).complete


def test_a_partial_word_is_dropped():
    text = "Shall I proceed?"
    ends, duration = emulated(text)
    mid_last = (ends[1] + ends[2]) / 2
    assert heard_prefix(text, mid_last, audio_s=duration).text == "Shall I"


def test_playout_delay_is_subtracted():
    ends, duration = emulated(COUNT)
    at = ends[4] + 0.02
    assert heard_prefix(COUNT, at, audio_s=duration, playout_delay_s=0.5).words < (
        heard_prefix(COUNT, at, audio_s=duration).words
    )
    assert heard_prefix(COUNT, 0.3, audio_s=duration, playout_delay_s=0.3).words == 0


def test_unknown_length_uses_the_rate():
    text = "abcde fghij"  # 5 + 5 units
    assert heard_prefix(text, 5 * SECONDS_PER_CHAR).words == 1
    assert heard_prefix(text, 5 * SECONDS_PER_CHAR - 0.01).words == 0
    assert heard_prefix(text, 1.0, seconds_per_unit=0.1).words == 2


def test_audio_cut_short_does_not_squeeze_the_text():
    """A TTS that stopped mid-sentence: the words past its last audio were never spoken."""
    text = "one two three four five six seven eight nine ten"
    needed = sum(speech_units(w) for w in text.split()) * SECONDS_PER_CHAR
    short = needed * 0.2
    heard = heard_prefix(text, 10.0, audio_s=short)
    assert 0 < heard.words < 4


def test_spacing_and_spelling_are_kept():
    text = "Hello  there,\nfriend of mine."
    assert heard_prefix(text, 100.0, audio_s=3.0).text == text
    cut = heard_prefix(text, 1.5, audio_s=3.0).text
    assert text.startswith(cut) and not cut.endswith((" ", "\n"))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"played_s": float("nan")},
        {"played_s": 1.0, "audio_s": float("nan")},
        {"played_s": "1"},
        {"played_s": 1.0, "word_starts": [0.0]},
    ],
)
def test_bad_numbers_are_errors(kwargs):
    played = kwargs.pop("played_s")
    with pytest.raises(ValueError):
        heard_prefix("two words", played, **kwargs)


def test_empty_text_hears_nothing():
    assert heard_prefix("", 5.0, audio_s=1.0).words == 0
    assert heard_prefix("   ", 5.0).total == 0


# --- heard_prefix: properties -------------------------------------------------------------------

texts = st.lists(
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Zs", "Cc")),
            min_size=1, max_size=8),
    min_size=0, max_size=12,
).map(" ".join)  # fmt: skip
times = st.floats(min_value=-1.0, max_value=30.0, allow_nan=False)


@settings(max_examples=150, deadline=None)
@given(texts, times, st.one_of(st.none(), st.floats(0.01, 20.0)), st.floats(0.0, 2.0))
def test_heard_text_is_a_word_prefix(text, played, audio, delay):
    heard = heard_prefix(text, played, audio_s=audio, playout_delay_s=delay)
    spans = word_spans(text)
    assert 0 <= heard.words <= heard.total == len(spans)
    assert heard.text == (text[: spans[heard.words - 1][1]] if heard.words else "")


@settings(max_examples=150, deadline=None)
@given(texts, times, times, st.one_of(st.none(), st.floats(0.01, 20.0)))
def test_more_audio_never_unhears_a_word(text, a, b, audio):
    lo, hi = sorted((a, b))
    before, after = (heard_prefix(text, t, audio_s=audio).words for t in (lo, hi))
    assert before <= after


@settings(max_examples=120, deadline=None)
@given(texts, times, st.floats(0.01, 20.0), st.floats(0.0, 3.0))
def test_more_delay_never_hears_more(text, played, audio, delay):
    assert heard_prefix(text, played, audio_s=audio, playout_delay_s=delay).words <= (
        heard_prefix(text, played, audio_s=audio).words
    )


@settings(max_examples=120, deadline=None)
@given(texts, st.floats(0.01, 20.0))
def test_all_of_the_audio_hears_all_and_none_hears_none(text, audio):
    words = [text[a:b] for a, b in word_spans(text)]
    needed = sum(speech_units(w) + pause_units(w) for w in words) * SECONDS_PER_CHAR
    audio = max(audio, needed * 0.5)  # shorter audio than that was cut short (tested above)
    assert heard_prefix(text, audio, audio_s=audio).complete
    assert heard_prefix(text, 0.0, audio_s=audio).words == 0


@settings(max_examples=120, deadline=None)
@given(st.lists(st.floats(0.01, 1.0), min_size=1, max_size=15), times)
def test_with_timestamps_a_word_counts_once_the_next_began(gaps, played):
    starts = [sum(gaps[:i]) for i in range(len(gaps))]
    end = sum(gaps)
    text = " ".join(f"w{i}" for i in range(len(gaps)))  # no punctuation: no pauses
    heard = heard_prefix(text, played, word_starts=starts, audio_s=end)
    before_last = sum(1 for s in starts[1:] if s <= played + 1e-9)  # words 0..n-2: exact
    assert before_last <= heard.words <= before_last + 1
    # The last word ends by the voice's rate: not after the audio, not before it began.
    if played >= end:
        assert heard.complete
    if heard.complete:
        assert played >= starts[-1]


# --- the ledger ---------------------------------------------------------------------------------


def test_ledger_streamed_context_maps_all_its_text_onto_all_its_audio():
    ledger = PlaybackLedger()
    ledger.open("c")
    ledger.sentence("c", 1, "Your total is 42 dollars.")
    ledger.sentence("c", 2, "Shall I proceed?")
    _, d1 = emulated("Your total is 42 dollars.")
    _, d2 = emulated("Shall I proceed?")
    ledger.audio("c", d1 + d2)
    ledger.close("c")
    ledger.playing("c")
    ledger.written(d1 * 0.999)
    first, second = ledger.fate(1), ledger.fate(2)
    assert first.text.startswith("Your total is") and second.text == ""
    ledger.written(d2)
    assert ledger.fate(1).complete and ledger.fate(2).complete


def test_ledger_sequential_sentences_have_their_own_spans():
    ledger = PlaybackLedger(mode="sequential")
    ledger.open("c")
    ledger.announce("c", 10, "Your total is 42 dollars.")
    ledger.audio("c", 2.0)
    ledger.sentence("c", 1, "Your total is 42 dollars.", segment=10)
    ledger.announce("c", 11, "Shall I proceed?")
    ledger.audio("c", 0.5)  # the second sentence's audio is still arriving
    ledger.playing("c")
    ledger.written(2.0)
    assert ledger.fate(1).complete
    parts = ledger.unheld_parts({1})
    assert [p.text for p in parts] == [""]
    ledger.written(5 * SECONDS_PER_CHAR + 0.01)  # "Shall": 5 letters at the fallback rate
    (part,) = ledger.unheld_parts({1})
    assert part.text == "Shall" and not part.complete and part.words_sent == 3


def test_ledger_timed_words_end_where_the_next_starts():
    ledger = PlaybackLedger()
    ledger.open("c")
    for key, (word, start) in enumerate([("Your", 0.0), ("total", 0.3), ("is", 0.7)]):
        ledger.word("c", key, word, start)
    ledger.audio("c", 1.0)
    ledger.close("c")
    ledger.playing("c")
    ledger.written(0.69)
    assert [ledger.fate(k).complete for k in range(3)] == [True, False, False]
    ledger.written(0.31)
    assert all(ledger.fate(k).complete for k in range(3))


def test_ledger_learns_the_rate_from_completed_contexts():
    ledger = PlaybackLedger()
    ledger.open("a")
    ledger.sentence("a", 1, "abcde fghij")  # 10 units
    ledger.audio("a", 1.0)  # 0.1 s per unit, slower than the default
    ledger.close("a")
    assert math.isclose(ledger.rate, 0.1)


def test_ledger_interruption_keeps_a_reply_sent_after_it():
    ledger = PlaybackLedger()
    ledger.open("old")
    ledger.sentence("old", 1, "old text")
    ledger.playing("old")
    ledger.written(0.1)
    ledger.interruption_sent()
    ledger.open("new")
    ledger.sentence("new", 2, "new text")
    ledger.interrupted()
    assert not ledger.knows(1) and ledger.knows(2)


def test_ledger_ignores_audio_with_nothing_playing():
    ledger = PlaybackLedger()
    ledger.written(5.0)  # a straggler after an interruption
    ledger.open("c")
    ledger.sentence("c", 1, "hello there")
    assert ledger.fate(1).text == ""


def test_ledger_forgets_contexts_once_played_and_committed():
    ledger = PlaybackLedger()
    for i in range(50):
        cid = f"c{i}"
        ledger.open(cid)
        ledger.announce(cid, 1000 + i, "hello there")
        ledger.sentence(cid, i, "hello there")
        ledger.audio(cid, 1.0)
        ledger.close(cid)
        ledger.playing(cid)
        ledger.written(1.0)
        ledger.played_out(cid)
        assert ledger.fate(i).complete
        ledger.forget([i])
    assert ledger._contexts == {} and ledger._by_key == {}
