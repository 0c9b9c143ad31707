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
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass
from typing import Literal

import regex

from pipecat_fast.textnorm import normalize_words
from pipecat_fast.tokens import DEFAULT_ENCODING, encode

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
        for i, unit in enumerate(_units(token)):
            sep = "" if i else " "
            norm = "".join(normalize_words(unit))
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


def common_prefix_len(a: list, b: list) -> int:
    """Length of the longest common prefix of two sequences (compared with ``==``)."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


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
        self.session = StabilizerCounters()
        self.turn = StabilizerCounters()
        self._committed: list[Word] = []
        self._history: deque[list[Word]] = deque(maxlen=updates)
        self._stable: list[Word] = []
        self._stable_text = ""
        self._last_at: float | None = None

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
        self.turn = StabilizerCounters()
        self._committed = []
        self._history.clear()
        self._stable = []
        self._stable_text = ""
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
        words = split_words(text, normalize=self.normalize)
        if not words:
            return self._ignore("empty")
        if at is not None:
            if not final and self._last_at is not None and at < self._last_at:
                return self._ignore("stale")
            self._last_at = at if self._last_at is None else max(at, self._last_at)
        self._count(hypotheses=1)
        if final:
            self._committed = self._committed + words
            self._history.clear()
            stable = list(self._committed)
        else:
            segment = self._segment_of(words)
            self._history.append(segment)
            stable = self._committed + segment[: self._stable_segment_len()]
        return self._settle(stable)

    def _segment_of(self, words: list[Word]) -> list[Word]:
        """The current-segment part of an interim (see the class docstring on ``mode``)."""
        if not self._committed or self.mode == "segment":
            return words
        n = len(self._committed)
        repeats = [w.key for w in words[:n]] == [w.key for w in self._committed]
        if self.mode == "whole":
            return words[n:] if repeats else words
        if repeats and not self.segment_mode_seen:
            return words[n:]
        self.segment_mode_seen = True
        return words

    def _stable_segment_len(self) -> int:
        if len(self._history) < self.updates:
            return 0
        keys = [[w.key for w in h] for h in self._history]
        n = len(keys[-1])
        for other in keys[:-1]:
            n = min(n, common_prefix_len(other, keys[-1]))
        return n

    def _settle(self, stable: list[Word]) -> StableUpdate:
        old = self._stable
        keep = common_prefix_len([w.key for w in old], [w.key for w in stable])
        new_words = tuple(w.raw for w in stable[keep:])
        retracted = tuple(w.raw for w in old[keep:])
        text = join_words(stable)
        changed = text != self._stable_text
        read = wasted = 0
        if changed and self.encoding is not None:
            read, wasted = prefill_delta(self._stable_text, text, self.encoding)
        self._count(
            stable_words=len(new_words),
            retracted_words=len(retracted),
            stable_changes=int(changed),
            prefill_tokens=read,
            wasted_tokens=wasted,
        )
        self._stable, self._stable_text = stable, text
        return StableUpdate(
            text=text,
            word_count=len(stable),
            new_words=new_words,
            retracted_words=retracted,
            final=self.final,
            changed=changed,
            counted=True,
            read_tokens=read,
            wasted_tokens=wasted,
        )

    def _ignore(self, reason: str) -> StableUpdate:
        self._count(ignored=1)
        return StableUpdate(
            text=self._stable_text,
            word_count=len(self._stable),
            final=self.final,
            ignored=reason,
        )

    def _count(self, **deltas: int) -> None:
        for counters in (self.turn, self.session):
            for name, value in deltas.items():
                setattr(counters, name, getattr(counters, name) + value)
