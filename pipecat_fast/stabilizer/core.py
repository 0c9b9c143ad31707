"""The partial-transcript stabiliser: hypotheses of one user turn in, the settled prefix out.

Pure logic: no frames, no tasks, no clock (times are passed in as numbers). The rule is the
one seed 003 reports from a production voice agent: pass a word on only once it has
survived two transcript updates in a row, which "cut the re-reading to 14%".

Terms used throughout:

- *hypothesis*: one interim or final transcript as the STT sends it.
- *segment*: the words an STT has not finalised yet. Deepgram's interims cover only the
  current segment and each ``is_final`` result is its own segment; engines that revise the
  whole hypothesis repeat the finalised words at the start of every interim.
- *stable prefix*: the finalised segments plus the longest word prefix of the current
  segment shared by the last ``updates`` hypotheses (compared after
  :func:`pipecat_fast.textnorm.normalize_words` unless ``normalize=False``).

The stabiliser is incremental, because it runs on every interim of the caller's turn: a
whitespace token is split and normalised once (cached), a hypothesis reuses the words of the
tokens it shares with the previous one, prefixes are compared with
:func:`pipecat_fast.prefix.common_prefix_len` (in C), and the prefill accounting tokenizes each
whitespace token of the stable text once (cached) instead of the whole text twice per change.
A feed costs a few µs plus a little per *new* token, whatever the utterance's length.
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass
from operator import attrgetter
from typing import Literal

import regex

from pipecat_fast.prefix import common_prefix_len
from pipecat_fast.textnorm import normalize_words
from pipecat_fast.tokens import DEFAULT_ENCODING, encode

__all__ = [
    "MODES",
    "Mode",
    "PartialStabilizer",
    "StabilizerCounters",
    "StableUpdate",
    "Word",
    "common_prefix_len",  # re-exported: pipecat_fast.prefix is its home
    "join_words",
    "prefill_delta",
    "split_words",
]

Mode = Literal["auto", "whole", "segment"]
MODES: tuple[str, ...] = ("auto", "whole", "segment")


@dataclass(frozen=True)
class Word:
    """One word of a hypothesis: its text as the STT spelled it and its comparison key.

    ``raw`` keeps any punctuation-only tokens that followed the word (``"yes -"``); ``sep``
    is what stood before it (a space, or nothing inside an unspaced script), so
    :func:`join_words` gives back the STT's text.
    """

    raw: str
    key: str
    sep: str = " "


_UNSPACED = regex.compile(
    r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}]"
)


def _units(token: str) -> list[str]:
    """A whitespace token cut into comparable units.

    Scripts written without spaces (Chinese, Japanese, Thai, Lao, Khmer, Myanmar, Tibetan)
    have no word boundary to wait for, and an STT revises their last characters as it
    revises a spaced script's last words: each of their grapheme clusters is a unit. Runs of
    other graphemes (``iPhone`` inside Japanese, digits) stay whole.
    """
    if not _UNSPACED.search(token):
        return [token]
    units: list[str] = []
    run = ""
    for grapheme in regex.findall(r"\X", token):
        if _UNSPACED.match(grapheme):
            if run:
                units.append(run)
                run = ""
            units.append(grapheme)
        else:
            run += grapheme
    if run:
        units.append(run)
    return units


# Caches of pure functions, shared by every stabiliser (a caller's words repeat from interim to
# interim and from call to call); each is emptied when it reaches this many entries.
_CACHE_LIMIT = 50_000
_TOKEN_UNITS: dict[str, tuple[_Unit, ...]] = {}
_PIECE_TOKENS: dict[tuple[str, str], tuple[int, ...]] = {}

_Unit = tuple[str, str, "Word | None", "Word | None"]
"""A unit of a whitespace token: its text, its normalised text ("" for punctuation), and its
:class:`Word` when it starts no punctuation run, keyed normalised and raw (None for
punctuation)."""


def _token_units(token: str) -> tuple[_Unit, ...]:
    """The units of a whitespace token (cached); see :data:`_Unit`."""
    units = _TOKEN_UNITS.get(token)
    if units is None:
        if len(_TOKEN_UNITS) >= _CACHE_LIMIT:
            _TOKEN_UNITS.clear()
        out = []
        for i, unit in enumerate(_units(token)):
            norm = "".join(normalize_words(unit))
            sep = "" if i else " "
            if norm:
                out.append((unit, norm, Word(unit, norm, sep), Word(unit, unit, sep)))
            else:
                out.append((unit, norm, None, None))
        units = _TOKEN_UNITS[token] = tuple(out)
    return units


def _piece_tokens(piece: str, encoding: str) -> tuple[int, ...]:
    """The token ids of one piece of text (cached)."""
    key = (encoding, piece)
    ids = _PIECE_TOKENS.get(key)
    if ids is None:
        if len(_PIECE_TOKENS) >= _CACHE_LIMIT:
            _PIECE_TOKENS.clear()
        ids = _PIECE_TOKENS[key] = tuple(encode(piece, encoding))
    return ids


def join_words(words: list[Word]) -> str:
    """The text of ``words`` as the STT spelled it (spaces only where it had them)."""
    return "".join((w.sep if i else "") + w.raw for i, w in enumerate(words))


def split_words(text: str, *, normalize: bool = True) -> list[Word]:
    """Split a transcript into :class:`Word` values.

    Args:
        text: A transcript.
        normalize: Compare case- and punctuation-insensitively (``key`` is the normalised
            word); if False, ``key`` is the whitespace token itself.

    Returns:
        The words, in order; empty when ``text`` has no word (empty, whitespace-only or
        punctuation-only). A punctuation-only token joins the word before it (or the first
        word, when it leads). In scripts written without spaces each character (grapheme
        cluster) is a word: ``"ご予約を"`` is four.
    """
    words: list[Word] = []
    lead = ""
    for token in text.split():
        for i, (unit, norm, _, _) in enumerate(_token_units(token)):
            sep = "" if i else " "
            if not norm:
                if words:
                    last = words[-1]
                    words[-1] = Word(last.raw + sep + unit, last.key, last.sep)
                else:
                    lead = lead + sep + unit if lead else unit
                continue
            raw = lead + sep + unit if lead else unit
            lead = ""
            words.append(Word(raw, norm if normalize else unit, sep))
    return words


def prefill_delta(previous: str, new: str, encoding: str = DEFAULT_ENCODING) -> tuple[int, int]:
    """Tokens a prefix cache reads and throws away going from a prefill of one text to another.

    ``previous`` was prefilled, then ``new`` is. A prefix (KV) cache keeps the longest common
    *token* prefix of the two texts; the rest of ``new`` must be read, and the rest of
    ``previous`` was read for nothing.

    Args:
        previous: The text prefilled before ("" for none).
        new: The text prefilled now.
        encoding: Token encoding (``pipecat_fast.tokens``), default o200k_base.

    Returns:
        ``(read, wasted)``: tokens of ``new`` after the common token prefix, and tokens of
        ``previous`` after it.
    """
    a, b = encode(previous, encoding), encode(new, encoding)
    keep = common_prefix_len(a, b)
    return len(b) - keep, len(a) - keep


@dataclass
class StabilizerCounters:
    """What a stabiliser did, summed over a user turn or a session.

    Parameters:
        hypotheses: Hypotheses that counted as an update (interims and finals).
        ignored: Hypotheses that added nothing: empty, whitespace- or punctuation-only, or
            older than the latest one (out-of-order time).
        stable_words: Words that became stable (a word retracted and stable again counts
            twice).
        retracted_words: Stable words later dropped from the stable prefix (contradicted by
            a later hypothesis or by the final).
        stable_changes: Times the stable text changed (each would be one prefill).
        prefill_tokens: Tokens read if every stable-text change were prefilled: per change,
            the tokens of the new stable text after its common token prefix with the
            previous one (o200k_base unless configured).
        wasted_tokens: Tokens of earlier stable texts thrown away: per change, the tokens of
            the previous stable text after that common token prefix. Over a turn,
            ``prefill_tokens - wasted_tokens`` equals the tokens of the last stable text.
    """

    hypotheses: int = 0
    ignored: int = 0
    stable_words: int = 0
    retracted_words: int = 0
    stable_changes: int = 0
    prefill_tokens: int = 0
    wasted_tokens: int = 0

    def add(self, other: StabilizerCounters) -> None:
        """Add another counter set into this one, field by field."""
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def to_dict(self) -> dict[str, int]:
        """The counters as a plain dict (for JSON)."""
        return asdict(self)


@dataclass(frozen=True)
class StableUpdate:
    """The stable prefix after one hypothesis.

    Parameters:
        text: The stable prefix in the STT's own spelling, case and punctuation (finalised
            segments as finalised, the rest from the latest hypothesis).
        word_count: Words in the stable prefix.
        new_words: Words that became stable with this hypothesis.
        retracted_words: Previously stable words no longer in the prefix (previous spelling).
        final: True when the prefix is made only of final segments (and is not empty).
        changed: True when ``text`` differs from the previous stable text of the turn
            (a spelling change of a stable word counts).
        counted: True when the hypothesis counted as an update.
        ignored: Why the hypothesis was ignored (``"empty"`` or ``"stale"``), else None.
        read_tokens: Tokens a prefill of ``text`` would read after the previous one
            (see :func:`prefill_delta`); 0 when unchanged.
        wasted_tokens: Tokens of the previous stable text this change threw away.
    """

    text: str
    word_count: int
    new_words: tuple[str, ...] = ()
    retracted_words: tuple[str, ...] = ()
    final: bool = False
    changed: bool = False
    counted: bool = False
    ignored: str | None = None
    read_tokens: int = 0
    wasted_tokens: int = 0


class PartialStabilizer:
    """Turns the hypotheses of one user turn into a stable prefix (the N-update rule).

    A word is stable once it has stood, unchanged after normalisation, at the same position
    in ``updates`` consecutive hypotheses; the stable prefix is the longest run of stable
    words from the start. Final segments are stable at once. Feed every interim and final
    of the turn in order; call :meth:`reset` when the user turn ends.

    Whole or segment interims (``mode``): ``"segment"`` treats each interim as the current
    segment only (Deepgram); ``"whole"`` strips the finalised words an interim starts with;
    ``"auto"`` (default) treats an interim that starts with the finalised words as whole
    and any other as a segment, and once an interim after a final does not start with the
    finalised words (conclusive: a whole-hypothesis engine repeats them) it stays in
    segment mode for the session. A final is always a new segment (Pipecat's user
    aggregator concatenates finals, so an STT that repeated them would duplicate text).

    Args:
        updates: Consecutive hypotheses a word must survive (N). 2 is seed 003's rule; 1
            passes every hypothesis on.
        normalize: Compare words case- and punctuation-insensitively.
        mode: ``"auto"``, ``"whole"`` or ``"segment"`` (see above).
        encoding: Token encoding for the prefill accounting; None turns token counting off.

    Raises:
        ValueError: If ``updates`` < 1 or ``mode`` is unknown.
    """

    def __init__(
        self,
        updates: int = 2,
        normalize: bool = True,
        *,
        mode: Mode = "auto",
        encoding: str | None = DEFAULT_ENCODING,
    ):
        if not isinstance(updates, int) or updates < 1:
            raise ValueError(f"updates must be an integer >= 1, got {updates!r}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.updates = updates
        self.normalize = normalize
        self.mode: Mode = mode
        self.encoding = encoding
        self.segment_mode_seen = False
        self.turn = StabilizerCounters()
        self._session_done = StabilizerCounters()  # the turns already reset
        self._committed: list[Word] = []
        self._committed_keys: list[str] = []
        self._committed_text = ""
        self._history: deque[list[str]] = deque(maxlen=updates)  # segment keys
        self._stable: list[Word] = []
        self._stable_keys: list[str] = []
        self._stable_text = ""
        self._stable_pieces = _Pieces()
        self._last_at: float | None = None
        self._prev: _Parsed | None = None

    @property
    def session(self) -> StabilizerCounters:
        """Counters summed over the session (the ended turns and the current one)."""
        total = StabilizerCounters()
        total.add(self._session_done)
        total.add(self.turn)
        return total

    @property
    def text(self) -> str:
        """The current stable prefix (STT spelling)."""
        return self._stable_text

    @property
    def word_count(self) -> int:
        """Words in the current stable prefix."""
        return len(self._stable)

    @property
    def final(self) -> bool:
        """True when the stable prefix is made only of final segments (and not empty)."""
        return bool(self._committed) and len(self._stable) == len(self._committed)

    def reset(self) -> StabilizerCounters:
        """Forget the user turn (call when it ends); keeps session counters and learnt mode.

        Returns:
            The finished turn's counters.
        """
        done = self.turn
        self._session_done.add(done)
        self.turn = StabilizerCounters()
        self._committed, self._committed_keys, self._committed_text = [], [], ""
        self._history.clear()
        self._stable, self._stable_keys, self._stable_text = [], [], ""
        self._stable_pieces = _Pieces()
        self._last_at = None
        return done

    def feed(self, text: str, *, final: bool = False, at: float | None = None) -> StableUpdate:
        """Add one hypothesis of the current user turn.

        Args:
            text: The transcript as the STT sent it.
            final: True for a final (``is_final``) segment; it becomes stable at once.
            at: When the hypothesis was produced, in s on any monotonic scale, or None. An
                interim older than the newest hypothesis seen this turn is stale and
                ignored; a final is always taken (losing it would lose the caller's words).

        Returns:
            The stable prefix after this hypothesis. Empty, whitespace- and
            punctuation-only hypotheses and stale interims change nothing and do not count
            as an update (``counted`` False, ``ignored`` says why).

        Raises:
            TypeError: If ``text`` is not a str (the processor logs and skips such frames).
        """
        if not isinstance(text, str):
            raise TypeError(f"a hypothesis is a str, got {type(text).__name__}")
        parsed = _Parsed.parse(text, self._prev, self.normalize)
        if not parsed.words:
            return self._ignore("empty")
        if at is not None:
            if not final and self._last_at is not None and at < self._last_at:
                return self._ignore("stale")
            self._last_at = at if self._last_at is None else max(at, self._last_at)
        self._prev = parsed
        self.turn.hypotheses += 1
        if final:
            sep = parsed.words[0].sep if self._committed_text else ""
            self._committed = self._committed + parsed.words
            self._committed_keys = self._committed_keys + parsed.keys
            self._committed_text = self._committed_text + sep + parsed.text
            self._history.clear()
            return self._settle(self._committed, self._committed_keys, self._committed_text)
        m = self._segment_start(parsed)
        self._history.append(parsed.keys[m:] if m else parsed.keys)
        n = self._stable_segment_len()
        if not n:
            return self._settle(self._committed, self._committed_keys, self._committed_text)
        first = parsed.words[m]
        seg_text = parsed.text[parsed.ends[m] - len(first.raw) : parsed.ends[m + n - 1]]
        stable_text = (
            self._committed_text + first.sep + seg_text if self._committed_text else seg_text
        )
        return self._settle(
            self._committed + parsed.words[m : m + n],
            self._committed_keys + parsed.keys[m : m + n],
            stable_text,
        )

    def _segment_start(self, parsed: _Parsed) -> int:
        """Where the current segment starts in an interim (see ``mode`` in the class doc)."""
        if not self._committed or self.mode == "segment":
            return 0
        n = len(self._committed_keys)
        repeats = parsed.keys[:n] == self._committed_keys
        if self.mode == "whole":
            return n if repeats else 0
        if repeats and not self.segment_mode_seen:
            return n
        self.segment_mode_seen = True
        return 0

    def _stable_segment_len(self) -> int:
        history = self._history
        if len(history) < self.updates:
            return 0
        last = history[-1]
        n = len(last)
        for i in range(len(history) - 1):
            n = min(n, common_prefix_len(history[i], last))
        return n

    def _settle(self, stable: list[Word], keys: list[str], text: str) -> StableUpdate:
        old = self._stable
        keep = common_prefix_len(self._stable_keys, keys)
        new_words = tuple(map(_RAW, stable[keep:])) if keep < len(stable) else ()
        retracted = tuple(map(_RAW, old[keep:])) if keep < len(old) else ()
        changed = text != self._stable_text
        read = wasted = 0
        c = self.turn
        if changed:
            c.stable_changes += 1
            if self.encoding is not None:
                read, wasted = self._stable_pieces.advance(text, self.encoding)
                c.prefill_tokens += read
                c.wasted_tokens += wasted
        c.stable_words += len(new_words)
        c.retracted_words += len(retracted)
        self._stable, self._stable_keys, self._stable_text = stable, keys, text
        committed = len(self._committed)
        return _update(
            text=text,
            word_count=len(stable),
            new_words=new_words,
            retracted_words=retracted,
            final=bool(committed) and len(stable) == committed,
            changed=changed,
            counted=True,
            read_tokens=read,
            wasted_tokens=wasted,
        )

    def _ignore(self, reason: str) -> StableUpdate:
        self.turn.ignored += 1
        return _update(
            text=self._stable_text,
            word_count=len(self._stable),
            final=self.final,
            ignored=reason,
        )


def _update(**fields) -> StableUpdate:
    """A :class:`StableUpdate`, made without the frozen dataclass's slow ``__init__``.

    That ``__init__`` calls ``object.__setattr__`` once per field; the fields not given here
    keep their class defaults.
    """
    update = object.__new__(StableUpdate)
    update.__dict__.update(fields)
    return update


class _Parsed:
    """One hypothesis split into words, built on the previous one where they share tokens.

    ``text`` is the hypothesis with single spaces (``" ".join(tokens)``), which is what
    :func:`join_words` gives for its words; ``ends[i]`` is where word ``i``'s ``raw`` ends in
    it. ``marks[j]`` is the state after the first ``j + 1`` tokens (words so far, the last
    word and its end then, punctuation waiting for a word), so a later hypothesis that shares
    those tokens starts from there.
    """

    __slots__ = ("tokens", "text", "words", "keys", "ends", "marks", "token_ends")

    def __init__(self, tokens, text, words, keys, ends, marks, token_ends):
        self.tokens: list[str] = tokens
        self.text: str = text
        self.words: list[Word] = words
        self.keys: list[str] = keys
        self.ends: list[int] = ends
        self.marks: list[tuple[int, Word | None, int, str]] = marks
        self.token_ends: list[int] = token_ends

    @classmethod
    def parse(cls, text: str, prev: _Parsed | None, normalize: bool) -> _Parsed:
        tokens = text.split()
        k = common_prefix_len(prev.tokens, tokens) if prev is not None else 0
        if k and k == len(tokens) == len(prev.tokens):
            return prev  # the same hypothesis again (nothing in a parse is ever changed)
        if k:
            n, last, last_end, lead = prev.marks[k - 1]
            words, keys, ends = prev.words[:n], prev.keys[:n], prev.ends[:n]
            if n:
                words[-1], ends[-1] = last, last_end
            marks, token_ends = prev.marks[:k], prev.token_ends[:k]
            pos = token_ends[-1] + 1
        else:
            words, keys, ends, marks, token_ends = [], [], [], [], []
            lead, pos = "", 0
        for token in tokens[k:]:
            end = pos
            for i, (unit, norm, by_norm, by_raw) in enumerate(_token_units(token)):
                end += len(unit)
                if not norm:  # punctuation joins the word before it, or the next one
                    sep = "" if i else " "
                    if words:
                        last = words[-1]
                        words[-1] = Word(last.raw + sep + unit, last.key, last.sep)
                        ends[-1] = end
                    else:
                        lead = lead + sep + unit if lead else unit
                    continue
                word = by_norm if normalize else by_raw
                if lead:
                    word = Word(lead + word.sep + unit, word.key, word.sep)
                    lead = ""
                words.append(word)
                keys.append(word.key)
                ends.append(end)
            token_ends.append(end)
            marks.append((len(words), words[-1] if words else None, end, lead))
            pos = end + 1
        return cls(tokens, " ".join(tokens), words, keys, ends, marks, token_ends)


class _Pieces:
    """A stable text as the pieces it tokenizes in, kept up to date as the text changes.

    The pieces are its first whitespace token, then each following one with its leading space.
    o200k/cl100k pre-tokenization never makes a token across a space that separates two
    non-space characters, so a text's tokens are its pieces' tokens end to end
    (``tests/stabilizer`` checks this against a whole-text encode). Each piece is encoded once
    (cached); a change of the stable text only looks at the pieces after the ones it kept.
    """

    __slots__ = ("text", "words", "ids", "cum")

    def __init__(self) -> None:
        self.text = ""
        self.words: list[str] = []
        self.ids: list[tuple[int, ...]] = []
        self.cum: list[int] = []  # tokens up to and including each piece

    def advance(self, text: str, encoding: str) -> tuple[int, int]:
        """Become ``text``; return ``(read, wasted)`` tokens (see :func:`prefill_delta`).

        ``read``: tokens of ``text`` after the longest common token prefix with the previous
        text; ``wasted``: tokens of the previous text after it.
        """
        old, words, ids, cum = self.text, self.words, self.ids, self.cum
        old_total = cum[-1] if cum else 0
        rest_old: list[int] = []
        if old and text.startswith(old) and text[len(old) : len(old) + 1] == " ":
            # The usual change: more stable words after the ones already there.
            j = len(words)
            new = text[len(old) + 1 :].split(" ")
        else:
            every = text.split(" ") if text else []
            j = common_prefix_len(words, every)
            new = every[j:]
            rest_old = [t for piece in ids[j:] for t in piece]
            del words[j:], ids[j:], cum[j:]
        keep = total = cum[-1] if cum else 0
        for word in new:
            piece = _piece_tokens(" " + word if words else word, encoding)
            words.append(word)
            ids.append(piece)
            total += len(piece)
            cum.append(total)
        if rest_old:
            keep += common_prefix_len(rest_old, [t for piece in ids[j:] for t in piece])
        self.text = text
        return total - keep, old_total - keep


_RAW = attrgetter("raw")
