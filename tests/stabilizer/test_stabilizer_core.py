"""PartialStabilizer: the N-update rule on hand-written hypothesis sequences and properties."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipecat_fast.stabilizer.core import (
    PartialStabilizer,
    StabilizerCounters,
    common_prefix_len,
    join_words,
    prefill_delta,
    split_words,
)
from pipecat_fast.textnorm import normalize_words
from pipecat_fast.tokens import count_tokens


def feed_all(stab, hypotheses):
    """Feed (text, final) pairs; return the stable texts after each."""
    return [stab.feed(text, final=final).text for text, final in hypotheses]


def interims(*texts):
    return [(t, False) for t in texts]


# --- the rule ----------------------------------------------------------------------------


def test_two_update_rule_passes_a_word_once_it_survives_the_next_update():
    stab = PartialStabilizer()
    out = feed_all(stab, interims("book", "book a", "book a table", "book a table for"))
    assert out == ["", "book", "book a", "book a table"]


def test_one_update_passes_every_hypothesis_on():
    stab = PartialStabilizer(updates=1)
    out = feed_all(stab, interims("book", "book a", "look a table"))
    assert out == ["book", "book a", "look a table"]


def test_three_update_rule_needs_three_hypotheses():
    stab = PartialStabilizer(updates=3)
    out = feed_all(stab, interims("book", "book a", "book a table", "book a table for"))
    assert out == ["", "", "book", "book a"]


def test_a_revised_word_restarts_its_count():
    stab = PartialStabilizer()
    out = feed_all(stab, interims("fly to", "fly to boston", "fly to austin", "fly to austin now"))
    # "boston" never survives an update; "austin" does on the fourth hypothesis.
    assert out == ["", "fly to", "fly to", "fly to austin"]
    assert stab.turn.retracted_words == 0


def test_comparison_ignores_case_and_punctuation_but_text_keeps_the_latest_spelling():
    stab = PartialStabilizer()
    feed_all(stab, interims("yes i want", "Yes, I want to"))
    assert stab.text == "Yes, I want"
    assert stab.word_count == 3


def test_normalize_false_compares_raw_tokens():
    stab = PartialStabilizer(normalize=False)
    assert feed_all(stab, interims("yes i want", "Yes, I want to")) == ["", ""]
    assert stab.feed("Yes, I want to go").text == "Yes, I want to"


def test_empty_whitespace_and_punctuation_only_hypotheses_add_nothing_and_do_not_count():
    stab = PartialStabilizer()
    stab.feed("book a")
    for junk in ("", "   ", ".", " ... ", "?!", "-"):
        update = stab.feed(junk)
        assert not update.counted and update.ignored == "empty" and not update.changed
    # The junk did not count as updates, so "book a" -> "book a table" are consecutive.
    assert stab.feed("book a table").text == "book a"
    assert stab.turn.hypotheses == 2
    assert stab.turn.ignored == 6


def test_unspaced_scripts_settle_character_by_character_without_inserted_spaces():
    stab = PartialStabilizer()
    partials = ("ご予約", "ご予約を", "ご予約をお願", "ご予約をお願いします")
    texts = [stab.feed(t).text for t in partials]
    assert texts == ["", "ご予約", "ご予約を", "ご予約をお願"]
    final = stab.feed("ご予約をお願いします。", final=True)
    assert final.text == "ご予約をお願いします。" and final.final


@pytest.mark.parametrize(
    "text, units",
    [
        ("iPhoneの修理、お願い。", ["iPhone", "の", "修", "理、", "お", "願", "い。"]),
        ("สวัสดีครับ ผม", ["ส", "วั", "ส", "ดี", "ค", "รั", "บ", "ผ", "ม"]),  # clusters kept
        ("¿ Qué tal ?", ["¿ Qué", "tal ?"]),
    ],
)
def test_words_join_back_to_the_stt_spelling(text, units):
    words = split_words(text)
    assert [w.raw for w in words] == units
    assert join_words(words) == text


@given(st.text(alphabet="ab .,。、ご予約 iPhone\u0e2a\u0e27\u0e31", max_size=30))
def test_split_and_join_give_back_the_text_up_to_whitespace_runs(text):
    words = split_words(text)
    if words:
        assert join_words(words) == " ".join(text.split())


def test_a_hypothesis_that_is_not_text_is_a_clear_error_and_changes_nothing():
    stab = PartialStabilizer()
    stab.feed("book a")
    with pytest.raises(TypeError, match="got NoneType"):
        stab.feed(None)
    assert stab.feed("book a table").text == "book a"


def test_a_shorter_hypothesis_is_an_ordinary_update_and_retracts():
    stab = PartialStabilizer()
    feed_all(stab, interims("book a table for", "book a table for four"))
    assert stab.text == "book a table for"
    update = stab.feed("book a")
    assert update.counted
    assert update.text == "book a"
    assert update.retracted_words == ("table", "for")
    assert stab.turn.retracted_words == 2


def test_a_final_with_no_interims_is_stable_at_once():
    update = PartialStabilizer().feed("Okay.", final=True)
    assert update.text == "Okay."
    assert update.final and update.changed
    assert update.new_words == ("Okay.",)


def test_a_final_that_differs_completely_retracts_every_stable_word():
    stab = PartialStabilizer()
    feed_all(stab, interims("book a", "book a table"))
    update = stab.feed("Cancel my order.", final=True)
    assert update.text == "Cancel my order."
    assert update.retracted_words == ("book", "a")
    assert update.new_words == ("Cancel", "my", "order.")
    assert update.final
    assert stab.turn.retracted_words == 2


def test_final_flag_only_when_the_prefix_is_all_final_segments():
    stab = PartialStabilizer()
    assert not stab.feed("book a").final  # empty prefix: not final
    assert stab.feed("Book a table.", final=True).final
    assert stab.feed("for").final  # one interim: nothing new is stable yet
    assert not stab.feed("for four").final  # "for" is stable, and it is an interim word


def test_segment_interims_follow_the_committed_finals():
    """Deepgram: interims cover only the current segment; each final is its own segment."""
    stab = PartialStabilizer()
    stab.feed("Book a table.", final=True)
    out = feed_all(stab, interims("for", "for four", "for four at"))
    assert out == ["Book a table.", "Book a table. for", "Book a table. for four"]
    assert stab.feed("For four at eight.", final=True).text == "Book a table. For four at eight."
    assert stab.segment_mode_seen


def test_whole_hypothesis_interims_are_recognised_in_auto_mode():
    """Local engines repeat the finalised words at the start of every interim."""
    stab = PartialStabilizer()
    stab.feed("book a table", final=True)
    out = feed_all(stab, interims("book a table for", "Book a table for four"))
    assert out == ["book a table", "book a table for"]
    assert not stab.segment_mode_seen


def test_auto_mode_stays_in_segment_mode_once_seen():
    stab = PartialStabilizer()
    stab.feed("Yes.", final=True)
    stab.feed("no thanks")  # does not start with "yes": segment mode from now on
    stab.reset()
    stab.feed("Okay.", final=True)
    feed_all(stab, interims("okay then", "okay then bye"))
    assert stab.text == "Okay. okay then"


def test_forced_modes():
    whole = PartialStabilizer(mode="whole")
    whole.feed("book a table", final=True)
    feed_all(whole, interims("for four", "for four at"))  # not repeating: taken as a segment
    assert whole.text == "book a table for four"
    segment = PartialStabilizer(mode="segment")
    segment.feed("yes", final=True)
    feed_all(segment, interims("yes i do", "yes i do now"))
    assert segment.text == "yes yes i do"


def test_stale_interims_are_ignored_but_finals_are_always_taken():
    stab = PartialStabilizer()
    stab.feed("book a", at=10.0)
    stale = stab.feed("look", at=9.5)
    assert stale.ignored == "stale" and not stale.counted
    assert stab.feed("book a table", at=10.5).text == "book a"
    assert stab.feed("Book a table.", final=True, at=10.2).text == "Book a table."


def test_reset_forgets_the_turn_but_keeps_session_counters():
    stab = PartialStabilizer()
    feed_all(stab, interims("okay", "okay sure"))
    done = stab.reset()
    assert done.stable_words == 1
    assert stab.text == "" and stab.word_count == 0 and stab.turn == StabilizerCounters()
    assert stab.feed("Mhm.", final=True).text == "Mhm."
    assert stab.session.stable_words == 2
    assert stab.session.hypotheses == 3


def test_token_accounting_on_a_revision():
    stab = PartialStabilizer(updates=1)
    stab.feed("fly to boston")
    update = stab.feed("fly to austin")
    read, wasted = prefill_delta("fly to boston", "fly to austin")
    assert (update.read_tokens, update.wasted_tokens) == (read, wasted)
    assert wasted >= 1 and read >= 1
    assert stab.turn.wasted_tokens == wasted
    assert stab.turn.prefill_tokens == count_tokens("fly to boston") + read


def test_prefill_delta_counts_tokens_after_the_common_token_prefix():
    assert prefill_delta("", "hello world") == (count_tokens("hello world"), 0)
    assert prefill_delta("hello world", "hello world") == (0, 0)
    assert prefill_delta("hello", "hello world") == (count_tokens(" world"), 0)
    # A case change at the start throws everything away.
    assert prefill_delta("book it", "Book it") == (count_tokens("Book it"), count_tokens("book it"))


def test_encoding_none_turns_token_counting_off():
    stab = PartialStabilizer(updates=1, encoding=None)
    stab.feed("fly to boston")
    stab.feed("fly to austin")
    assert stab.turn.prefill_tokens == 0 and stab.turn.wasted_tokens == 0


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="updates"):
        PartialStabilizer(updates=0)
    with pytest.raises(ValueError, match="mode"):
        PartialStabilizer(mode="both")


def test_split_words_keeps_punctuation_tokens_with_their_word():
    words = split_words("- yes - I do .")
    assert [w.raw for w in words] == ["- yes -", "I", "do ."]
    assert [w.key for w in words] == ["yes", "i", "do"]
    assert " ".join(w.raw for w in words) == "- yes - I do ."


def test_common_prefix_len():
    assert common_prefix_len([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix_len([], [1]) == 0


# --- properties --------------------------------------------------------------------------

VOCAB = ["book", "Book,", "a", "A", "table", "for", "four.", "at", "eight", "the", "uh", "."]
texts = st.lists(st.sampled_from(VOCAB), max_size=6).map(" ".join)
events = st.lists(st.tuples(texts, st.sampled_from([False, False, False, True])), max_size=12)


@settings(max_examples=150, deadline=None)
@given(events, st.integers(min_value=1, max_value=4))
def test_the_prefix_only_extends_unless_a_retraction_is_counted(seq, n):
    stab = PartialStabilizer(updates=n, encoding=None)
    before = []
    retracted = 0
    for text, final in seq:
        update = stab.feed(text, final=final)
        now = normalize_words(update.text)
        if update.retracted_words:
            retracted += len(update.retracted_words)
            assert len(update.retracted_words) == len(before) - common_prefix_len(before, now)
        else:
            assert now[: len(before)] == before
        assert update.word_count == len(now)
        before = now
    assert stab.turn.retracted_words == retracted
    assert stab.turn.stable_words - stab.turn.retracted_words == stab.word_count


@settings(max_examples=150, deadline=None)
@given(st.lists(texts, max_size=12))
def test_with_one_update_the_prefix_is_the_latest_hypothesis(seq):
    stab = PartialStabilizer(updates=1, encoding=None)
    for text in seq:
        update = stab.feed(text)
        if update.counted:
            assert normalize_words(update.text) == normalize_words(text)


@settings(max_examples=100, deadline=None)
@given(events)
def test_more_updates_never_pass_on_more_words(seq):
    stabs = [PartialStabilizer(updates=n, encoding=None) for n in (1, 2, 3)]
    for text, final in seq:
        counts = [s.feed(text, final=final).word_count for s in stabs]
        assert counts[0] >= counts[1] >= counts[2]


@settings(max_examples=60, deadline=None)
@given(events, st.integers(min_value=1, max_value=3))
def test_read_minus_wasted_tokens_is_the_last_stable_text(seq, n):
    stab = PartialStabilizer(updates=n)
    for text, final in seq:
        stab.feed(text, final=final)
    assert stab.turn.prefill_tokens - stab.turn.wasted_tokens == count_tokens(stab.text)


def test_a_repeated_interim_counts_as_an_update():
    stab = PartialStabilizer()
    assert feed_all(stab, interims("book a", "book a")) == ["", "book a"]


# --- the incremental stabiliser against a from-scratch one --------------------------------


class FromScratch:
    """The N-update rule recomputed from scratch on every hypothesis: split_words, whole-list
    comparisons, join_words and prefill_delta on whole texts (the stabiliser before it was made
    incremental). The real one must agree with it on everything it reports."""

    def __init__(self, updates, normalize=True, mode="auto"):
        self.updates, self.normalize, self.mode = updates, normalize, mode
        self.segment_mode_seen = False
        self.committed, self.history, self.stable, self.text = [], [], [], ""

    def feed(self, text, final=False):
        words = split_words(text, normalize=self.normalize)
        if not words:
            return None
        if final:
            self.committed = self.committed + words
            self.history = []
            stable = list(self.committed)
        else:
            seg = words
            if self.committed and self.mode != "segment":
                n = len(self.committed)
                repeats = [w.key for w in words[:n]] == [w.key for w in self.committed]
                if self.mode == "whole":
                    seg = words[n:] if repeats else words
                elif repeats and not self.segment_mode_seen:
                    seg = words[n:]
                else:
                    self.segment_mode_seen = True
            self.history = [*self.history, seg][-self.updates :]
            n = 0
            if len(self.history) == self.updates:
                keys = [[w.key for w in h] for h in self.history]
                n = min(common_prefix_len(k, keys[-1]) for k in keys)
            stable = self.committed + seg[:n]
        old = self.stable
        keep = common_prefix_len([w.key for w in old], [w.key for w in stable])
        text = join_words(stable)
        read, wasted = prefill_delta(self.text, text) if text != self.text else (0, 0)
        self.stable, self.text = stable, text
        return (
            text,
            len(stable),
            tuple(w.raw for w in stable[keep:]),
            tuple(w.raw for w in old[keep:]),
            read,
            wasted,
        )

    def reset(self):
        self.committed, self.history, self.stable, self.text = [], [], [], ""


WORDS = [
    "book",
    "Book,",
    "a",
    "A",
    "table",
    "tab",
    "for",
    "four.",
    "at",
    "eight",
    "uh",
    ".",
    "-",
    "don't",
    "dont",
    "4",
    "45",
    "$29.99",
    "Dr.",
    "¿",
    "qué",
    "tal?",
    "ご予約",
    "を",
    "お願い",
    "します。",
    "iPhoneの",
    "修理",
    "สวัสดี",
    "ครับ",
    "😀",
    "naïve",
    "NAÏVE",
]
hypotheses = st.lists(st.sampled_from(WORDS), max_size=9).map(" ".join)
# Interims that grow and get revised, as an STT's do, mixed with arbitrary ones.
turns = st.lists(
    st.tuples(
        st.one_of(hypotheses, st.tuples(hypotheses, hypotheses).map(" ".join)),
        st.sampled_from([False, False, False, False, True]),
        st.booleans(),  # reset after this hypothesis (the turn ended)
    ),
    max_size=25,
)


@settings(max_examples=400, deadline=None)
@given(turns, st.integers(1, 3), st.booleans(), st.sampled_from(["auto", "whole", "segment"]))
def test_the_incremental_stabiliser_agrees_with_a_from_scratch_one(seq, n, normalize, mode):
    real = PartialStabilizer(updates=n, normalize=normalize, mode=mode)
    ref = FromScratch(n, normalize, mode)
    for text, final, end_turn in seq:
        got = real.feed(text, final=final)
        want = ref.feed(text, final=final)
        if want is None:
            assert got.ignored == "empty"
        else:
            assert (
                got.text,
                got.word_count,
                got.new_words,
                got.retracted_words,
                got.read_tokens,
                got.wasted_tokens,
            ) == want
        if end_turn:
            real.reset()
            ref.reset()


def growing(words, cut):
    """Interims of ``words`` that grow word by word, the last one cut at ``cut`` characters."""
    out = []
    for i in range(1, len(words) + 1):
        last = words[i - 1]
        out.append(" ".join([*words[: i - 1], last[: max(1, cut)]]))
        out.append(" ".join(words[:i]))
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=40), st.integers(1, 4))
def test_growing_interims_agree_too(words, cut):
    real, ref = PartialStabilizer(), FromScratch(2)
    for text in [*growing(words, cut), " ".join(words)]:
        got, want = real.feed(text), ref.feed(text)
        if want is not None:
            assert (got.text, got.read_tokens, got.wasted_tokens) == (want[0], *want[4:])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=20))
def test_a_texts_tokens_are_its_space_separated_pieces_tokens(words):
    """What the incremental token accounting rests on (o200k pre-tokenization)."""
    from pipecat_fast.tokens import encode

    text = " ".join(words)
    pieces = [words[0], *(" " + w for w in words[1:])]
    assert encode(text) == [t for p in pieces for t in encode(p)]
