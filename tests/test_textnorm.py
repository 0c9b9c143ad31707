"""The one normaliser, against Pipecat's NormalizedMatch: the same verdicts where Pipecat's rule
is right, and different only where its ``[^\\w\\s]`` breaks a script's words."""

import json
import unicodedata
from pathlib import Path

import pytest
import regex
from pipecat.turns.user_stop.eager_match_policy import NormalizedMatch

from pipecat_fast.prefill import TranscriptMatch
from pipecat_fast.textnorm import normalize, normalize_words, same_words
from tests.conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parent.parent
pipecat = NormalizedMatch._normalize  # the rule it documents, applied to one text

# Pipecat's documented cases (NormalizedMatch's docstring and module comment): a service
# capitalises and punctuates the committed transcript while leaving the eager one raw, and
# "it's" must match "its".
DOCUMENTED = [
    ("yes i want to book it", "Yes, I want to book it.", True),
    ("its fine", "It's fine.", True),
    ("it's fine", "its fine", True),
    ("hello   there", "Hello there!", True),
    ("I want to book", "I want to book a table.", False),
    ("book a cleaning", "book a filling", False),
    ("Don\u2019t worry", "dont worry", True),
    ("ＡＢＣ", "abc", True),  # NFKC
]


@pytest.mark.parametrize(("eager", "final", "expected"), DOCUMENTED)
def test_documented_cases_agree(eager, final, expected):
    assert TranscriptMatch().matches(eager, final) is expected
    assert NormalizedMatch().matches(eager, final) is expected
    assert same_words(eager, final) is expected


def test_words():
    assert normalize("Yes, I want to book it.") == "yes i want to book it"
    assert normalize_words("  Hi -- there ") == ["hi", "there"]
    assert normalize("") == ""


def test_words_of_every_script_stay_whole():
    # A vowel sign or virama is part of the word: Pipecat's rule splits these.
    assert normalize_words("नमस्ते दोस्त") == ["नमस्ते", "दोस्त"]
    assert normalize_words("สวัสดีครับ") == ["สวัสดีครับ"]
    assert normalize_words("வணக்கம்") == ["வணக்கம்"]
    # ...so two different words do not collapse into one another.
    assert not same_words("सेवा", "से वा")
    assert NormalizedMatch().matches("सेवा", "से वा")  # Pipecat's rule: "स व" twice


def test_invisible_marks_and_stray_accents_do_not_make_transcripts_differ():
    assert same_words("Shalom\u200e", "shalom")  # a left-to-right mark an editor left in
    assert same_words("\u202aDr.\u202c David", "dr david")  # bidi embedding
    assert normalize("geht\u00b4s") == "geht s"  # a spacing accent is a break, not a word
    assert pipecat("geht\u00b4s") == "geht s"


def texts():
    """Real transcripts and real multilingual text nobody here wrote."""
    found = []
    for path in sorted((ROOT / "pipecat_fast/bench/data/calls").glob("*.json")):
        call = json.loads(path.read_text())
        found += [turn["user"]["text"] for turn in call["turns"]]
    shared = SHARED_DATA
    partials = shared / "stt" / "pocketsphinx_partials.jsonl"
    if partials.exists():
        for line in partials.read_text().splitlines():
            row = json.loads(line)
            found += [row["reference_text"], row["final_after_end_utt"]]
            found += [p["partial"] for p in row["partials"]]
    for name in ("pysbd_golden_rules.jsonl", "sentencex_tests.jsonl"):
        path = shared / "sbd" / name
        if path.exists():
            found += [json.loads(line)["text"] for line in path.read_text().splitlines()]
    return [t for t in found if isinstance(t, str)]


# Where Pipecat's rule differs from ours, by design (see pipecat_fast.textnorm).
_OURS_DIFFERS = regex.compile(r"[\p{M}\p{Cf}_]")


def test_on_real_text_the_two_rules_differ_only_where_pipecats_breaks_a_word():
    if not (SHARED_DATA / "sbd").exists():
        pytest.skip("public test material not found (../shared/data)")
    corpus = texts()
    assert len(corpus) > 100
    differ = [t for t in corpus if normalize(t) != pipecat(t)]
    for text in differ:
        decomposed = unicodedata.normalize("NFKC", text)
        assert _OURS_DIFFERS.search(decomposed), f"unexplained difference on {text!r}"
    assert len(differ) < len(corpus) * 0.1


def test_asr_partials_get_the_same_verdicts_from_both():
    # Every (partial, final) and (final, reference) pair of real ASR output: the verdicts of
    # the two rules agree (these are English, lower-case, no marks).
    shared = SHARED_DATA / "stt" / "pocketsphinx_partials.jsonl"
    if not shared.exists():
        pytest.skip("public test material not found (../shared/data)")
    ours, theirs = TranscriptMatch(), NormalizedMatch()
    pairs = 0
    for line in shared.read_text().splitlines():
        row = json.loads(line)
        final = row["final_after_end_utt"] or ""
        candidates = [p["partial"] for p in row["partials"]] + [row["reference_text"]]
        for text in filter(None, candidates):
            for a, b in ((text, final), (text.upper() + ".", final), (final.capitalize(), final)):
                assert ours.matches(a, b) == theirs.matches(a, b), (a, b)
                pairs += 1
    assert pairs > 100
