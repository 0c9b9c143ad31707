"""Character offsets to lines, columns and token indexes, computed once per text.

Token offsets use :mod:`pipecat_fast.tokens` (OpenAI's real BPE), which also owns the
chunking of texts too long for one call of the BPE library.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right

from pipecat_fast import tokens


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

    def _ends(self) -> array:
        if self._token_byte_ends is None:
            self._token_byte_ends = tokens.token_byte_ends(self.text, self.encoding)
        return self._token_byte_ends

    @property
    def token_count(self) -> int:
        """Number of tokens in the whole text."""
        return len(self._ends())

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
        return bisect_right(self._ends(), self._byte_offset(char_offset))

    def tokens_between(self, start_char: int, end_char: int) -> int:
        """Tokens that start at or after ``start_char`` and before ``end_char`` (approx.)."""
        return max(0, self.token_at(end_char) - self.token_at(start_char))
