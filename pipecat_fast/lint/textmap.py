"""Character offsets to lines, columns and token indexes, computed once per text.

Token offsets use :mod:`pipecat_fast.tokens` (OpenAI's real BPE). The BPE library refuses a
single call on a million characters or more, so long texts are encoded in pieces cut after
a newline; offsets are then exact except within a token of each cut.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right

from pipecat_fast import tokens

CHUNK_CHARS = 200_000
"""Encode at most this many characters per call (the BPE library's own limit is 1,000,000
characters and 200,000 tokens per call)."""


def _pieces(text: str) -> list[str]:
    if len(text) <= CHUNK_CHARS:
        return [text]
    out = []
    start = 0
    while start < len(text):
        end = min(start + CHUNK_CHARS, len(text))
        if end < len(text):
            cut = text.rfind("\n", start, end)
            if cut > start:
                end = cut + 1
        out.append(text[start:end])
        start = end
    return out


def encode_long(text: str, encoding: str = tokens.DEFAULT_ENCODING) -> list[int]:
    """Token ids of ``text`` of any length (pieces of at most ``CHUNK_CHARS`` characters)."""
    ids: list[int] = []
    for piece in _pieces(text):
        ids.extend(tokens.encode(piece, encoding))
    return ids


def count_long(text: str, encoding: str = tokens.DEFAULT_ENCODING) -> int:
    """Number of tokens in ``text`` of any length."""
    return len(encode_long(text, encoding))


class TextMap:
    """Maps character offsets of one text to (line, col) and to token indexes.

    Args:
        text: The text.
        encoding: Token encoding name (``o200k_base`` by default).
    """

    def __init__(self, text: str, encoding: str = tokens.DEFAULT_ENCODING) -> None:
        self.text = text
        self.encoding = encoding
        self._line_starts = array("q", [0])
        pos = text.find("\n")
        while pos >= 0:
            self._line_starts.append(pos + 1)
            pos = text.find("\n", pos + 1)
        self._token_byte_ends: array | None = None

    def line_col(self, char_offset: int) -> tuple[int, int]:
        """1-based (line, column) of a character offset; columns count code points."""
        char_offset = max(0, min(char_offset, len(self.text)))
        line = bisect_right(self._line_starts, char_offset)
        return line, char_offset - self._line_starts[line - 1] + 1

    def _ensure_tokens(self) -> None:
        if self._token_byte_ends is not None:
            return
        enc = tokens.get_encoding(self.encoding)
        ends = array("q")
        total = 0
        for piece in _pieces(self.text):
            for t in tokens.encode(piece, self.encoding):
                total += len(enc.decode_single_token_bytes(t))
                ends.append(total)
        self._token_byte_ends = ends

    @property
    def token_count(self) -> int:
        """Number of tokens in the whole text."""
        self._ensure_tokens()
        assert self._token_byte_ends is not None
        return len(self._token_byte_ends)

    def _byte_offset(self, char_offset: int) -> int:
        char_offset = max(0, min(char_offset, len(self.text)))
        if self.text.isascii():
            return char_offset
        return len(self.text[:char_offset].encode("utf-8", "surrogatepass"))

    def token_at(self, char_offset: int) -> int:
        """Index of the token containing the character at ``char_offset``.

        Returns:
            0-based token index; :attr:`token_count` when the offset is at the end.
        """
        self._ensure_tokens()
        assert self._token_byte_ends is not None
        return bisect_right(self._token_byte_ends, self._byte_offset(char_offset))

    def tokens_between(self, start_char: int, end_char: int) -> int:
        """Tokens that start at or after ``start_char`` and before ``end_char`` (approx.)."""
        return max(0, self.token_at(end_char) - self.token_at(start_char))
