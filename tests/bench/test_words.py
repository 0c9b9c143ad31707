"""Words lost: the caller's words against the context's user messages."""

from pipecat_fast.bench.words import user_texts, words_lost


def test_every_word_in_the_context_is_none_lost_whatever_the_split_and_case():
    result = words_lost(
        ["Book it for Tuesday.", "Yes, please."],
        ["book it", "for tuesday", "Yes please"],  # a late final that landed as its own turn
    )
    assert result.scripted == 6 and result.lost == ()


def test_a_missing_word_is_lost_once_per_missing_occurrence():
    result = words_lost(["no no no", "Tuesday"], ["No no"])
    assert result.lost == ("no", "tuesday")


def test_user_texts_reads_strings_and_text_parts_and_skips_other_roles():
    messages = [
        {"role": "system", "content": "You are a receptionist."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": [{"type": "text", "text": "book it"}]},
    ]
    assert user_texts(messages) == ["Hi", "book it"]
