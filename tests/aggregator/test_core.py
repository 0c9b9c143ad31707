"""StreamSegmenter: every case issue 4 names, bad input, and hypothesis properties."""

from __future__ import annotations

import re

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loguru import logger

from pipecat_fast.aggregator.core import ChunkKind, SegmenterConfig, StreamSegmenter
from pipecat_fast.tokens import encode, get_encoding


def feed(pieces, **cfg):
    """Feed pieces; return (chunks emitted while streaming, chunks from flush)."""
    seg = StreamSegmenter(SegmenterConfig(**{"first_phrase": False, **cfg}))
    streamed = [c for p in pieces for c in seg.push(p)]
    return streamed, seg.flush()


def texts(pieces, **cfg):
    streamed, flushed = feed(pieces, **cfg)
    return [c.text for c in streamed + flushed]


def words(text):
    """LLM-like pieces: each word with its leading space."""
    return re.findall(r"\s*\S+|\s+$", text)


def o200k(text):
    """Real o200k_base token boundaries, as raw bytes."""
    enc = get_encoding("o200k_base")
    return [enc.decode_single_token_bytes(t) for t in encode(text, "o200k_base")]


def all_feeds(text):
    return {"chars": list(text), "words": words(text), "tokens": o200k(text)}


def graphemes_ends(text):
    return {m.end() for m in regex.finditer(r"\X", text)} | {0}


def assert_chunks(text, expected, **cfg):
    """Same chunks whatever the piece boundaries (chars, words, real tokens as bytes)."""
    for mode, pieces in all_feeds(text).items():
        assert texts(pieces, **cfg) == expected, mode


# ---------------------------------------------------------------- sentence boundaries


def test_plain_sentences_keep_their_boundary_whitespace():
    assert_chunks("Hello. How are you? Fine!", ["Hello. ", "How are you? ", "Fine!"])


def test_chunk_is_released_at_the_first_letter_of_the_next_sentence():
    seg = StreamSegmenter(SegmenterConfig(first_phrase=False))
    assert seg.push("Hello") == []
    assert seg.push(".") == []  # may still be "Hello.com" or "Hello..."
    assert seg.push(" ") == []
    assert [c.text for c in seg.push("H")] == ["Hello. "]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Mr. Smith is here. Dr. Watson too.", ["Mr. Smith is here. ", "Dr. Watson too."]),
        ("My name is Jonas E. Smith.", ["My name is Jonas E. Smith."]),
        (
            "We make a good team, you and I. Did you see Albert I. Jones?",
            ["We make a good team, you and I. ", "Did you see Albert I. Jones?"],
        ),
        ("I live in the U.S. How about you?", ["I live in the U.S. ", "How about you?"]),
        ("I work for the U.S. Government.", ["I work for the U.S. Government."]),
        ("Call Acme Inc. They open at nine.", ["Call Acme Inc. ", "They open at nine."]),
        ("See e.g. the manual.", ["See e.g. the manual."]),
        ("Please turn to p. 55.", ["Please turn to p. 55."]),
    ],
)
def test_abbreviations_and_initials(text, expected):
    assert_chunks(text, expected)


@pytest.mark.parametrize(
    "text, expected, lang",
    [
        # pySBD golden rule el/0 (also in sentencex): a sentence opening in lowercase.
        (
            "Τις Κυριακές δε δούλευε κανένας. το κόστος ήταν £260.950,00.",
            ["Τις Κυριακές δε δούλευε κανένας. ", "το κόστος ήταν £260.950,00."],
            "el",
        ),
        (
            "The room is ready. the keys are at the desk.",
            ["The room is ready. ", "the keys are at the desk."],
            "en",
        ),
        # Short unlisted abbreviations stay joined (pySBD pl, sentencex uk).
        ("To słowo bałt. jest skrótem.", ["To słowo bałt. jest skrótem."], "pl"),
        ("Це дослідження має наук. значення.", ["Це дослідження має наук. значення."], "uk"),
        # Listed abbreviations, capitalised words and a closing bracket stay joined too.
        ("It costs approx. ten euros.", ["It costs approx. ten euros."], "en"),
        ("We met in Paris. the next day too.", ["We met in Paris. the next day too."], "en"),
        (
            "He taught (he was an engineer.) at school.",
            ["He taught (he was an engineer.) at school."],
            "en",
        ),
    ],
)
def test_lowercase_sentence_start_after_a_full_word(text, expected, lang):
    assert_chunks(text, expected, language=lang)


def test_lowercase_start_waits_for_the_whole_next_word_only_after_a_full_word():
    seg = StreamSegmenter(SegmenterConfig(first_phrase=False))
    assert seg.push("It is ready. t") == []  # "t" could still be a one-letter list marker
    assert [c.text for c in seg.push("he keys")] == ["It is ready. "]


def test_decimal_and_price_split_across_tokens_is_not_a_boundary():
    assert texts(
        ["It costs $29", ".", "99", " today", ".", " Pi", " is", " 3", ".", "14", "."]
    ) == [
        "It costs $29.99 today. ",
        "Pi is 3.14.",
    ]


def test_decimal_waits_for_the_next_token_instead_of_guessing():
    seg = StreamSegmenter(SegmenterConfig(first_phrase=False))
    assert seg.push("It costs $29.") == []
    assert seg.push("99 now.") == []
    assert [c.text for c in seg.flush()] == ["It costs $29.99 now."]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Python 3.11.2 is out. Update now.", ["Python 3.11.2 is out. ", "Update now."]),
        ("Use v2.0.1 today.", ["Use v2.0.1 today."]),
        ("The meeting is at 3 p.m. Then lunch.", ["The meeting is at 3 p.m. ", "Then lunch."]),
        ("Come at 3 p.m. tomorrow.", ["Come at 3 p.m. tomorrow."]),
        ("It starts at 10:30. Be early.", ["It starts at 10:30. ", "Be early."]),
    ],
)
def test_versions_and_times(text, expected):
    assert_chunks(text, expected)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1. Open the app. 2. Tap settings.", ["1. Open the app. ", "2. Tap settings."]),
        ("1. Open the app.\n2. Tap settings.", ["1. Open the app.\n", "2. Tap settings."]),
        ("1. Open the app 2. Tap settings", ["1. Open the app ", "2. Tap settings"]),
        ("Steps: 1. Open it. 2. Close it.", ["Steps: 1. Open it. ", "2. Close it."]),
        ("a) here b) there", ["a) here ", "b) there"]),
        ("• 9. The first item • 10. The second", ["• 9. The first item ", "• 10. The second"]),
    ],
)
def test_numbered_lists(text, expected):
    assert_chunks(text, expected)


def test_a_list_number_is_never_a_chunk_of_its_own():
    text = "1. Open the app.\n2. Tap Settings.\n3. Choose Privacy. 4. Done."
    for pieces in all_feeds(text).values():
        for chunk in texts(pieces):
            assert not re.fullmatch(r"\s*\d+[.)]\s*", chunk)


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "Visit https://example.com/a.b?c=d. Then log in.",
            ["Visit https://example.com/a.b?c=d. ", "Then log in."],
        ),
        (
            "Mail foo.bar@pipecat.ai. Thanks!",
            ["Mail foo.bar@pipecat.ai. ", "Thanks!"],
        ),
        ("Our site pipecat.ai has docs.", ["Our site pipecat.ai has docs."]),
        ("See www.example.co.uk for more.", ["See www.example.co.uk for more."]),
    ],
)
def test_urls_emails_and_domains(text, expected):
    assert_chunks(text, expected)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Well... I think so.", ["Well... I think so."]),
        ("Wait... Really?", ["Wait... ", "Really?"]),
        ("That is it… see you.", ["That is it… see you."]),
        ("Hmm... no.", ["Hmm... no."]),
    ],
)
def test_ellipses(text, expected):
    assert_chunks(text, expected)


def test_bracketed_sentence_is_released_at_once_not_at_the_end():
    seg = StreamSegmenter(SegmenterConfig(first_phrase=False))
    out = []
    for piece in ["(Explore", " these", " until", " you", " say", " done", ".)", " Then"]:
        out += [c.text for c in seg.push(piece)]
    assert out == ["(Explore these until you say done.) "]
    assert [c.text for c in seg.push(" tell me")] == []


@pytest.mark.parametrize(
    "text, expected",
    [
        ('He said "Stop." Then he left.', ['He said "Stop." ', "Then he left."]),
        ('She said, "This is great." she smiled.', ['She said, "This is great." she smiled.']),
        ('"How many? I do not know."', ['"How many? I do not know."']),
        ("「はい。」次です。", ["「はい。」", "次です。"]),
        ("»Wirklich?« »Ja!«", ["»Wirklich?« ", "»Ja!«"]),
    ],
)
def test_quotes_and_brackets_after_a_terminator(text, expected):
    lang = "de" if "»" in text else None
    assert_chunks(text, expected, language=lang)


def test_missing_space_after_a_terminator_splits():
    assert_chunks(
        "Sure, I booked it.Your reference is ABC.",
        ["Sure, I booked it.", "Your reference is ABC."],
    )


def test_missing_space_does_not_split_domains_or_initials():
    assert_chunks("Write to Jane.Doe@example.com now.", ["Write to Jane.Doe@example.com now."])
    assert_chunks("I went to J.C. Penney.", ["I went to J.C. Penney."])


def test_boundary_whitespace_is_kept_so_nothing_is_glued_or_inserted():
    text = "First.  Second.\n\nThird.\nFourth."
    chunks = texts(words(text))
    assert chunks == ["First.  ", "Second.\n\n", "Third.\n", "Fourth."]
    assert "".join(chunks) == text


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            'Wait <break time="1.5s"/> here. Then go.',
            ['Wait <break time="1.5s"/> here. ', "Then go."],
        ),
        (
            "My email is <spell>foo.bar@pipecat.ai</spell>. Next one.",
            ["My email is <spell>foo.bar@pipecat.ai</spell>. ", "Next one."],
        ),
        (
            '<emphasis level="strong">Stop. Now.</emphasis> Then wait.',
            ['<emphasis level="strong">Stop. Now.</emphasis> ', "Then wait."],
        ),
        (
            '<voice name="en-US.Jenny">Hi there.</voice>',
            ['<voice name="en-US.Jenny">Hi there.</voice>'],
        ),
    ],
)
def test_ssml_tags_stay_intact(text, expected):
    assert_chunks(text, expected)


def test_container_markup_does_not_hold_the_reply():
    text = "<speak>Hello there. How are you?</speak>"
    assert_chunks(text, ["<speak>Hello there. ", "How are you?</speak>"])


def test_ssml_tag_split_across_tokens_stays_whole():
    pieces = ["Wait", " <bre", 'ak time="1', '.5s"/', ">", " here", ".", " Go", "."]
    assert texts(pieces) == ['Wait <break time="1.5s"/> here. ', "Go."]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("**Note.** This is bold.", ["**Note.** ", "This is bold."]),
        ("*Step one. Still italic.* Done.", ["*Step one. Still italic.* ", "Done."]),
        ("Use snake_case. Then go.", ["Use snake_case. ", "Then go."]),
        ("* item one\n* item two", ["* item one\n", "* item two"]),
    ],
)
def test_no_split_inside_markdown_emphasis(text, expected):
    assert_chunks(text, expected)


# ---------------------------------------------------------------- other scripts


def test_cjk_sentences_split_without_spaces_or_minimum_length():
    text = "本日はどのようなご用件でしょうか？ご注文の確認でしたら番号をお伝えください。"
    assert_chunks(
        text, ["本日はどのようなご用件でしょうか？", "ご注文の確認でしたら番号をお伝えください。"]
    )
    assert_chunks("はい。そうです。", ["はい。", "そうです。"])
    assert_chunks("你好！我很好。", ["你好！", "我很好。"])


def test_fullwidth_period_between_digits_is_a_decimal():
    assert_chunks("引き下げ幅は３．２９％です。次へ。", ["引き下げ幅は３．２９％です。", "次へ。"])


@pytest.mark.parametrize(
    "text, expected, lang",
    [
        ("नमस्ते। आप कैसे हैं॥ ठीक है।", ["नमस्ते। ", "आप कैसे हैं॥ ", "ठीक है।"], "hi"),
        ("हैलो।अच्छा।", ["हैलो।", "अच्छा।"], "hi"),
        ("كيف حالك؟ أنا بخير.", ["كيف حالك؟ ", "أنا بخير."], "ar"),
        ("یہ اردو ہے۔ وہ بھی۔", ["یہ اردو ہے۔ ", "وہ بھی۔"], "ur"),
        ("Ի՞նչ ես մտածում: Ոչինչ:", ["Ի՞նչ ես մտածում: ", "Ոչինչ:"], "hy"),
        ("πού είναι; Εδώ.", ["πού είναι; ", "Εδώ."], "el"),
    ],
)
def test_non_latin_terminators(text, expected, lang):
    assert_chunks(text, expected, language=lang)


def test_thai_flushes_at_whitespace_once_long_enough_not_at_the_end():
    phrase = "สวัสดีครับยินดีต้อนรับ"  # 22 graphemes of Thai, no punctuation
    text = " ".join([phrase] * 6)
    streamed, flushed = feed(words(text), unpunctuated_min_chars=30)
    assert len(streamed) >= 2
    assert all(c.text.endswith(" ") for c in streamed)
    assert "".join(c.text for c in streamed + flushed) == text


# ---------------------------------------------------------------- unicode safety


@pytest.mark.parametrize(
    "text",
    [
        "Great job! 👍🏽 Family: 👨\u200d👩\u200d👧\u200d👦. Flags 🇮🇳🇯🇵. Done.",
        "नमस्ते! मैं आपकी कैसे मदद कर सकती हूँ? अपॉइंटमेंट कल है।",
        "Cafe\u0301. Nai\u0308ve! Done.",
    ],
)
def test_no_boundary_inside_a_grapheme_cluster_with_real_token_bytes(text):
    for pieces in all_feeds(text).values():
        streamed, flushed = feed(pieces)
        ends = {c.end for c in streamed + flushed}
        assert ends <= graphemes_ends(text)
        assert "".join(c.text for c in streamed + flushed) == text


def test_conjunct_split_by_the_tokenizer_stays_whole():
    # "स्त" + "े" arrive as separate tokens; a length cut must not fall between them.
    pieces = ["न", "म", "स्त", "े"] * 12
    streamed, flushed = feed(pieces, max_chars=16)
    text = "".join(pieces)
    assert streamed
    assert {c.end for c in streamed + flushed} <= graphemes_ends(text)


def test_max_length_cut_in_emoji_only_reply_keeps_clusters():
    text = "👨\u200d👩\u200d👧\u200d👦👍🏽🇮🇳" * 20
    pieces = [b for b in o200k(text)]
    streamed, flushed = feed(pieces, max_chars=16)
    assert len(streamed) > 3
    assert {c.end for c in streamed + flushed} <= graphemes_ends(text)
    assert "".join(c.text for c in streamed + flushed) == text


def test_bytes_split_inside_a_code_point_are_joined():
    data = "Hi 👋. Ok.".encode()
    pieces = [data[i : i + 1] for i in range(len(data))]
    assert texts(pieces) == ["Hi 👋. ", "Ok."]


def _capture_warnings():
    messages = []
    handler = logger.add(lambda m: messages.append(str(m)), level="WARNING")
    return messages, handler


def test_invalid_utf8_becomes_replacement_char_with_one_log_line():
    messages, handler = _capture_warnings()
    try:
        out = texts([b"Bad \xff\xfe byte", b"s \xc3", b"( here. Next \xe2\x82", b"."])
    finally:
        logger.remove(handler)
    joined = "".join(out)
    assert "\ufffd" in joined and joined.startswith("Bad ")
    assert sum("invalid UTF-8" in m for m in messages) == 1


def test_truncated_utf8_at_the_end_is_replaced_not_lost():
    out = texts([b"Hi \xf0\x9f"])
    assert out == ["Hi \ufffd"]


def test_lone_surrogates_and_nul_are_cleaned_with_a_log_line():
    messages, handler = _capture_warnings()
    try:
        out = texts(["A\ud800b. Nul\x00 here."])
    finally:
        logger.remove(handler)
    assert out == ["A\ufffdb. ", "Nul here."]
    assert any("surrogate" in m for m in messages) and any("control" in m for m in messages)


def test_push_rejects_other_types():
    with pytest.raises(TypeError):
        StreamSegmenter().push(42)  # type: ignore[arg-type]


# ---------------------------------------------------------------- first phrase, length, stall


def test_first_phrase_goes_at_the_first_clause_once_long_enough():
    text = (
        "Your appointment is on Tuesday, March 4th, at 10 a.m., with Dr. Smith. Bring it, please."
    )
    streamed, flushed = feed(words(text), first_phrase=True, first_phrase_min_chars=20)
    assert [(c.text, c.kind) for c in streamed] == [
        ("Your appointment is on Tuesday, ", ChunkKind.CLAUSE),
        ("March 4th, at 10 a.m., with Dr. Smith. ", ChunkKind.SENTENCE),
    ]
    assert [c.text for c in flushed] == ["Bring it, please."]


def test_first_phrase_ignores_short_clauses_and_numbers():
    streamed, _ = feed(
        words("Sure, we have 1,000 seats left for you today, and more."), first_phrase=True
    )
    assert streamed[0].text == "Sure, we have 1,000 seats left for you today, "


def test_first_phrase_is_rearmed_after_each_reply():
    seg = StreamSegmenter(SegmenterConfig(first_phrase=True, first_phrase_min_chars=8))
    for _ in range(2):
        out = [c.text for p in words("Okay then, let us begin now. Good.") for c in seg.push(p)]
        assert out[0] == "Okay then, "
        seg.flush()


def test_first_phrase_off_waits_for_the_sentence():
    streamed, _ = feed(words("Your appointment is on Tuesday, March 4th. Bye."), first_phrase=False)
    assert [c.text for c in streamed] == ["Your appointment is on Tuesday, March 4th. "]


def test_max_chars_cuts_at_the_last_clause_else_space():
    text = "word " * 10 + "clause, " + "more words here " * 10
    streamed, flushed = feed(words(text), max_chars=80)
    assert streamed[0].kind is ChunkKind.LENGTH
    assert streamed[0].text.endswith("clause, ")
    assert all(len(c.text) <= 80 for c in streamed)
    assert all(c.text.endswith(" ") for c in streamed)
    assert "".join(c.text for c in streamed + flushed) == text


def test_100_kb_reply_without_punctuation_streams_in_bounded_chunks():
    text = "lorem ipsum dolor sit amet " * 3800  # about 100 kB
    seg = StreamSegmenter(SegmenterConfig(max_chars=300))
    streamed = [
        c for p in [text[i : i + 997] for i in range(0, len(text), 997)] for c in seg.push(p)
    ]
    flushed = seg.flush()
    assert len(streamed) > 300
    assert max(len(c.text) for c in streamed) <= 300
    assert "".join(c.text for c in streamed + flushed) == text


def test_stall_releases_a_pending_sentence_but_not_an_abbreviation():
    seg = StreamSegmenter(SegmenterConfig(first_phrase=False, stall_flush_s=0.5))
    seg.push("Thanks for waiting.", now=10.0)
    assert seg.poll(10.2) == []
    out = seg.poll(10.6)
    assert [(c.text, c.kind) for c in out] == [("Thanks for waiting.", ChunkKind.STALL)]
    seg.push(" Mr.", now=11.0)
    assert seg.poll(20.0) == []


def test_stall_releases_up_to_the_last_clause():
    seg = StreamSegmenter(SegmenterConfig(first_phrase=False, stall_flush_s=0.5))
    seg.push("Let me check that for you, one moment while I", now=1.0)
    assert [c.text for c in seg.poll(2.0)] == ["Let me check that for you, "]


def test_stall_is_off_by_default():
    seg = StreamSegmenter()
    seg.push("Hello.", now=0.0)
    assert seg.poll(100.0) == []


# ---------------------------------------------------------------- bad input, lifecycle


def test_reply_of_only_emoji():
    assert texts(o200k("🎉👍🏽🇮🇳")) == ["🎉👍🏽🇮🇳"]


def test_flush_on_empty_buffer_returns_nothing():
    seg = StreamSegmenter()
    assert seg.flush() == []
    seg.push("   ")
    assert seg.flush() == []


def test_reset_drops_the_interrupted_sentence():
    seg = StreamSegmenter(SegmenterConfig(first_phrase=False))
    seg.push("I was saying that the")
    seg.reset()
    assert seg.pending_text == ""
    assert [c.text for c in seg.push("New reply. Ok")] == ["New reply. "]


def test_offsets_are_reply_offsets():
    streamed, flushed = feed(words("One. Two. Three."))
    assert [(c.start, c.end, c.mark_end) for c in streamed + flushed] == [
        (0, 5, 4),
        (5, 10, 9),
        (10, 16, 16),
    ]


def test_config_is_validated():
    with pytest.raises(ValueError):
        SegmenterConfig(max_chars=4)
    with pytest.raises(ValueError):
        SegmenterConfig(stall_flush_s=0)


# ---------------------------------------------------------------- properties

_ATOMS = [
    "Hello",
    "world",
    "Mr",
    "U.S",
    "3",
    "29",
    "a",
    "I",
    "The",
    "see",
    "e.g",
    "p.m",
    "1",
    "2",
    ".",
    ".",
    "!",
    "?",
    "...",
    "…",
    ",",
    ";",
    ":",
    "—",
    " ",
    " ",
    " ",
    "  ",
    "\n",
    "\n\n",
    '"',
    "(",
    ")",
    "«",
    "»",
    "*",
    "**",
    "_",
    "<break/>",
    "<spell>",
    "</spell>",
    "<",
    "。",
    "？",
    "、",
    "日本",
    "你好",
    "।",
    "नमस्ते",
    "स्त",
    "े",
    "؟",
    "مرحبا",
    "สวัสดี",
    "👍",
    "🏽",
    "\u200d",
    "👨",
    "🇮",
    "🇳",
    "\u0301",
    "e",
    "\ufe0f",
]
_texts = st.lists(st.sampled_from(_ATOMS), max_size=40).map("".join)


def _split(text, cuts):
    points = sorted({c % (len(text) + 1) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_texts, cuts=st.lists(st.integers(0, 10_000), max_size=12), fp=st.booleans())
def test_property_chunks_reproduce_the_input_and_respect_graphemes(text, cuts, fp):
    streamed, flushed = feed(_split(text, cuts), first_phrase=fp, max_chars=24)
    joined = "".join(c.text for c in streamed + flushed)
    # Declared whitespace handling: only a whitespace-only tail may be dropped at flush.
    assert text.startswith(joined) and not text[len(joined) :].strip()
    assert {c.end for c in streamed + flushed} <= graphemes_ends(text)
    assert all(c.text.strip() for c in streamed)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_texts, cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_property_bytes_in_any_split_give_the_same_chunks_as_the_whole_text(text, cuts):
    data = text.encode("utf-8")
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert texts(pieces) == texts([text])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_texts, cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_property_piece_boundaries_never_change_the_chunks(text, cuts):
    assert texts(_split(text, cuts), first_phrase=True) == texts([text], first_phrase=True)


def test_a_literal_less_than_sign_does_not_hold_sentences():
    seg = StreamSegmenter(SegmenterConfig(first_phrase=False))
    out = [c.text for p in words("If a<b and b < c then stop. Next one.") for c in seg.push(p)]
    assert out == ["If a<b and b < c then stop. "]


def test_core_does_not_import_pipecat():
    import subprocess
    import sys

    code = "import sys, pipecat_fast.aggregator.core; print('pipecat' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(st.characters(blacklist_categories=("Cs",)), max_size=80),
    cuts=st.lists(st.integers(0, 999), max_size=8),
)
def test_property_any_unicode_text_is_reproduced_after_cleaning(text, cuts):
    streamed, flushed = feed(_split(text, cuts), first_phrase=True, max_chars=20)
    cleaned = re.sub(r"[\x00-\x08\x0e-\x1f\x7f]", "", text)
    joined = "".join(c.text for c in streamed + flushed)
    assert cleaned.startswith(joined) and not cleaned[len(joined) :].strip()
    assert {c.end for c in streamed + flushed} <= graphemes_ends(cleaned)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=120), cuts=st.lists(st.integers(0, 999), max_size=8))
def test_property_arbitrary_bytes_never_raise_and_lose_nothing(data, cuts):
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    streamed, flushed = feed(pieces)
    expected = re.sub(r"[\x00-\x08\x0e-\x1f\x7f]", "", data.decode("utf-8", "replace"))
    joined = "".join(c.text for c in streamed + flushed)
    assert expected.startswith(joined) and not expected[len(joined) :].strip()


# ---------------------------------------------------------------- the skip-ahead scan


class CharByChar(StreamSegmenter):
    """The segmenter with its skip-ahead turned off: every character goes through _step."""

    def _plain_run_end(self, i):
        return i


def same_chunks(pieces, **cfg):
    config = SegmenterConfig(**cfg)
    fast, slow = StreamSegmenter(config), CharByChar(config)
    got = [c for p in pieces for c in fast.push(p)] + fast.flush()
    want = [c for p in pieces for c in slow.push(p)] + slow.flush()
    return got == want


@pytest.mark.parametrize("first_phrase", [False, True])
def test_skipping_plain_runs_changes_no_chunk_on_the_sbd_material(shared_data, first_phrase):
    """Every case of the sentence-boundary material, fed as real tokens, words and characters,
    in its language: the skip-ahead scan cuts exactly where the character-by-character one
    does (same text, kind and offsets)."""
    from pipecat_fast.bench.evals.sbd import lang_code, load_cases

    cases = load_cases(shared_data)
    assert len(cases) > 900
    for case in cases:
        for mode, pieces in all_feeds(case.text).items():
            assert same_chunks(pieces, language=lang_code(case.lang), first_phrase=first_phrase), (
                case.text,
                mode,
            )


ALPHABET = "ab Z.,;:!?…\n-—\"'“”«»()[]*_~<>/&$%0123456789。、！ก ข《》अ।\u0301\U0001f600\u200d•"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=6), max_size=40),
    st.booleans(),
    st.sampled_from([None, "de", "el", "hy", "th"]),
    st.sampled_from([16, 40, 300]),
)
def test_skipping_plain_runs_changes_no_chunk_on_any_stream(pieces, first_phrase, lang, cap):
    assert same_chunks(pieces, first_phrase=first_phrase, language=lang, max_chars=cap)


def grapheme_safe_end_from_the_start(buf, end, final):
    """The reference: segment the whole text from its start."""
    if end >= len(buf):
        return len(buf) if final else None
    if end <= 0:
        return 0
    for m in regex.finditer(r"\X", buf):
        if m.start() == end:
            return end
        if m.start() < end < m.end():
            return None if (m.end() >= len(buf) and not final) else m.end()
    return end


@settings(max_examples=500, deadline=None)
@given(
    st.text(alphabet=ALPHABET + "\r\U0001f1fa\U0001f1f8\u0915\u094d\u0937", max_size=40), st.data()
)
def test_grapheme_safe_end_segmenting_from_an_ascii_pair_agrees_with_the_start(buf, data):
    from pipecat_fast.aggregator.core import _grapheme_safe_end

    end = data.draw(st.integers(0, len(buf) + 1))
    final = data.draw(st.booleans())
    assert _grapheme_safe_end(buf, end, final=final) == grapheme_safe_end_from_the_start(
        buf, end, final
    )
