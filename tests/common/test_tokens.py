import pytest

from pipecat_fast.tokens import count_tokens, encode, get_encoding, token_byte_ends


def test_counts_match_the_real_o200k_vocabulary():
    assert encode("Hello world") == [13225, 2375]  # tiktoken's o200k_base ids
    assert count_tokens("") == 0


def test_huge_texts_are_encoded_in_pieces_with_the_same_count():
    word = "appointment "
    per_word = count_tokens(word * 1001) - count_tokens(word * 1000)  # " appointment" = 1
    small = count_tokens(word * 1000)
    text = word * 120_000  # 1.44 M characters: one bpe-openai call would refuse it
    assert count_tokens(text) == small + 119_000 * per_word


def test_token_byte_ends_add_up_to_the_utf8_bytes_of_each_token():
    text = "Current time is 14:03:22. Vous êtes réceptionniste 👋🏽."
    ends = token_byte_ends(text)
    ids = encode(text)
    enc = get_encoding()
    assert len(ends) == len(ids) == count_tokens(text)
    assert ends[-1] == len(text.encode("utf-8"))
    widths = [len(enc.decode_single_token_bytes(t)) for t in ids]
    assert all(ends[i] - (ends[i - 1] if i else 0) == w for i, w in enumerate(widths))


def test_token_byte_ends_of_a_huge_text_cover_every_byte():
    text = "appointment " * 120_000  # over one bpe-openai call's limit
    ends = token_byte_ends(text)
    assert len(ends) == count_tokens(text) and ends[-1] == len(text)


def test_unknown_encoding_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown token encoding"):
        encode("x", "nope_base")
