import pytest

from pipecat_fast.tokens import count_tokens, encode, token_offset_at


def test_counts_match_the_real_o200k_vocabulary():
    assert encode("Hello world") == [13225, 2375]  # tiktoken's o200k_base ids
    assert count_tokens("") == 0


def test_huge_texts_are_encoded_in_pieces_with_the_same_count():
    word = "appointment "
    per_word = count_tokens(word * 1001) - count_tokens(word * 1000)  # " appointment" = 1
    small = count_tokens(word * 1000)
    text = word * 120_000  # 1.44 M characters: one bpe-openai call would refuse it
    assert count_tokens(text) == small + 119_000 * per_word


def test_token_offset_of_a_character():
    text = "Current time is 14:03:22. You are a receptionist."
    assert token_offset_at(text, 0) == 0
    assert token_offset_at(text, len(text)) == count_tokens(text)
    assert 0 < token_offset_at(text, text.index("You")) < count_tokens(text)


def test_unknown_encoding_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown token encoding"):
        encode("x", "nope_base")
