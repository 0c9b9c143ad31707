"""Which words of a reply the caller heard: the pure core of barge-in truncation.

Plain values in, decisions out; no frames, tasks or clocks (times are seconds, passed in).

:func:`heard_prefix` is the spoken-words estimator: a piece of text, how much of its audio was
played, optionally the TTS's word start times, and the playout delay still in the far end's
buffers; out comes the prefix of whole words the caller heard. A word counts once its audio
has ended (a partial word is dropped). Without word timestamps the played position is mapped
to words by *speech units*: letters and digits (``unit="chars"``, the default) or syllables
(``unit="syllables"``), plus a pause after punctuation; ``docs/bargein.md`` has the
measurement that chose characters.

:class:`PlaybackLedger` keeps, for the audio contexts of the replies in flight, what was sent
to the output transport (text pieces, word times, audio durations) and what the transport has
played, and answers what of each piece was heard.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import regex

Unit = Literal["chars", "syllables"]

SECONDS_PER_CHAR = 0.085
"""Fallback speaking rate while a text's audio is still arriving, in seconds per letter or
digit: conversational English runs ~165 words per minute with ~4.2 letters a word, ~11.5
letters/s (our assumption). Replaced by the rate measured on the call's own completed audio
as soon as there is some."""

SECONDS_PER_SYLLABLE = 0.2
"""The same rate in syllables (~1.4 syllables a word at ~2.75 words/s: 0.26 s; TTS voices
for agents run faster, ~0.2 s)."""

PAUSE_UNITS = {",": 2.0, ";": 3.0, ":": 3.0, ".": 4.0, "!": 4.0, "?": 4.0}
"""Pause after a word ending in this punctuation, in speech units (letters; scaled for
syllables): ~0.17 s after a comma, ~0.34 s after a sentence at the fallback rate. Also the CJK
and Devanagari equivalents via :data:`_PUNCT_ALIASES`."""

_PUNCT_ALIASES = {"，": ",", "、": ",", "；": ";", "：": ":", "。": ".", "！": "!", "？": "?",
                  "।": ".", "॥": ".", "؟": "?", "…": "."}  # fmt: skip

TRUNCATED_AUDIO_RATIO = 0.5
"""A finished text whose audio is shorter than this fraction of what its units need at the
measured rate was cut short (a TTS error, a dead socket): it is mapped at that rate instead of
being squeezed into the short audio, so the words the audio never reached are not heard."""

# A word: a run of non-space characters, except that Han, kana and Thai text (written without
# spaces) counts one character at a time, as TTS word timestamps report it.
_WORDS = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}]\p{P}*|\S+")
_SPEECH_CHARS = regex.compile(r"[\p{L}\p{N}]")
_SYLLABLE_SCRIPTS = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")
_VOWEL_GROUPS = regex.compile(r"[aeiouyàáâãäåæèéêëìíîïòóôõöøùúûüýÿœ]+", regex.IGNORECASE)
_DIGITS = regex.compile(r"\p{N}")


def word_spans(text: str) -> list[tuple[int, int]]:
    """Character spans ``[start, end)`` of the words of ``text``, in order."""
    return [m.span() for m in _WORDS.finditer(text)]


def speech_units(word: str, unit: Unit = "chars") -> float:
    """How long ``word`` takes to say, in units of :data:`SECONDS_PER_CHAR` or per syllable.

    Characters: its letters and digits (at least one). Syllables: vowel groups of Latin
    script, one per Han/kana/Hangul character, one per digit (a digit is read as a word).
    """
    if unit == "chars":
        return float(max(1, len(_SPEECH_CHARS.findall(word))))
    if unit != "syllables":
        raise ValueError(f"unit must be 'chars' or 'syllables', got {unit!r}")
    n = len(_SYLLABLE_SCRIPTS.findall(word)) + len(_DIGITS.findall(word))
    n += len(_VOWEL_GROUPS.findall(word))
    return float(max(1, n))


def pause_units(word: str, unit: Unit = "chars") -> float:
    """The pause after ``word`` (from its final punctuation), in the same units."""
    tail = word.rstrip("\"'”’)]»")[-1:] if word else ""
    pause = PAUSE_UNITS.get(_PUNCT_ALIASES.get(tail, tail), 0.0)
    return pause if unit == "chars" else pause * SECONDS_PER_CHAR / SECONDS_PER_SYLLABLE


def default_rate(unit: Unit) -> float:
    """The fallback seconds per unit."""
    return SECONDS_PER_CHAR if unit == "chars" else SECONDS_PER_SYLLABLE


@dataclass(frozen=True)
class Heard:
    """The heard part of a text.

    Attributes:
        words: How many whole words were heard.
        total: How many words the text has.
        text: The text up to the end of the last heard word (the original spelling and
            spacing; empty when no word was heard).
    """

    words: int
    total: int
    text: str

    @property
    def complete(self) -> bool:
        """Every word was heard."""
        return self.words == self.total


def _check_number(name: str, value: float | None) -> None:
    if value is not None and (not isinstance(value, int | float) or math.isnan(value)):
        raise ValueError(f"{name} must be a number, got {value!r}")


def heard_prefix(
    text: str,
    played_s: float,
    *,
    audio_s: float | None = None,
    word_starts: Sequence[float] | None = None,
    playout_delay_s: float = 0.0,
    seconds_per_unit: float | None = None,
    unit: Unit = "chars",
) -> Heard:
    """The whole words of ``text`` the caller heard.

    Args:
        text: What the TTS spoke (one sentence, or everything one audio context spoke).
        played_s: Seconds of this text's audio the output transport has played.
        audio_s: The text's whole audio length, once known; ``None`` while it is still
            arriving (then ``seconds_per_unit`` times the text's units stands in for it).
        word_starts: The TTS's start time of each word (s from the start of this text's
            audio), one per word of :func:`word_spans`. A word ends where the next starts;
            the last at ``audio_s`` (or its units at the rate, if unknown).
        playout_delay_s: Audio played but still in the far end's buffers (jitter buffer,
            telephony leg): subtracted from ``played_s``.
        seconds_per_unit: Speaking rate (default :func:`default_rate`).
        unit: Speech units for the estimate: ``"chars"`` or ``"syllables"``.

    Returns:
        The heard prefix. A word counts only once its audio has ended.

    Raises:
        ValueError: On a NaN or non-number time, or ``word_starts`` of the wrong length.
    """
    for name, value in (("played_s", played_s), ("audio_s", audio_s),
                        ("playout_delay_s", playout_delay_s),
                        ("seconds_per_unit", seconds_per_unit)):  # fmt: skip
        _check_number(name, value)
    spans = word_spans(text)
    n = len(spans)
    rate = seconds_per_unit if seconds_per_unit and seconds_per_unit > 0 else default_rate(unit)
    heard_s = played_s - max(0.0, playout_delay_s)
    if n == 0 or heard_s <= 0:
        return Heard(0, n, "")
    words = [text[a:b] for a, b in spans]
    if word_starts is not None:
        if len(word_starts) != n:
            raise ValueError(f"word_starts has {len(word_starts)} times for {n} words")
        ends = _timed_word_ends(words, list(word_starts), audio_s, rate, unit)
    else:
        units = [speech_units(w, unit) for w in words]
        pauses = [pause_units(w, unit) for w in words]
        total_units = sum(units) + sum(pauses)
        truncated = audio_s is not None and audio_s < TRUNCATED_AUDIO_RATIO * total_units * rate
        scale = rate if audio_s is None or truncated else audio_s / total_units
        limit = audio_s if truncated else math.inf  # a cut-short audio reached no further
        ends, pos = [], 0.0
        for u, p in zip(units, pauses, strict=True):
            pos += u
            ends.append(pos * scale if pos * scale <= limit else math.inf)
            pos += p
    k = 0
    while k < n and ends[k] <= heard_s + 1e-9:
        k += 1
    return Heard(k, n, text[: spans[k - 1][1]] if k else "")


WORD_END_MARGIN = 1.1
"""A timed word before a pause is taken to end once its units at the voice's own rate, plus
10 %, have been said (never later than the next word's start)."""


def _timed_word_ends(
    words: list[str], starts: list[float], audio_s: float | None, rate: float, unit: Unit
) -> list[float]:
    """Where each timed word ends, from the TTS's start times (Pipecat keeps no end times).

    A word straight before the next ends where that one starts. One before a pause (its
    punctuation) or the last one ends after its units at the voice's rate, measured on this
    text's unpunctuated words (start to next start per unit), with :data:`WORD_END_MARGIN`.
    """
    n = len(words)
    units = [speech_units(w, unit) for w in words]
    pauses = [pause_units(w, unit) for w in words]
    rates = sorted(
        (starts[i + 1] - starts[i]) / units[i]
        for i in range(n - 1)
        if pauses[i] == 0 and starts[i + 1] > starts[i]
    )
    voice = rates[len(rates) // 2] if rates else rate
    ends = []
    for i in range(n):
        natural = starts[i] + units[i] * voice * WORD_END_MARGIN
        if i + 1 < n:
            ends.append(starts[i + 1] if pauses[i] == 0 else min(starts[i + 1], natural))
        else:
            ends.append(min(audio_s, natural) if audio_s is not None else natural)
    return ends


# --- The ledger ---------------------------------------------------------------------------------

Mode = Literal["streamed", "sequential"]
"""How a TTS's sentence text relates to its audio.

``streamed``: WebSocket services send text ahead and stream the audio of everything sent in
one audio context without boundaries; each context's text is mapped onto its whole audio.
``sequential``: HTTP services synthesize one sentence at a time, its audio first and its
text frame after it, so each sentence's audio span is known exactly.
"""


@dataclass
class _Piece:
    key: int
    text: str
    start_s: float | None = None  # word pieces: TTS start time in the context's audio
    end_pos_s: float | None = None  # sequential sentences: audio position when it ended
    segment: int | None = None
    includes_spaces: bool = False
    committed: bool = False  # passed on to the context already (kept for the spans)


@dataclass
class _Context:
    context_id: str | None
    epoch: int
    mode: Mode
    pieces: list[_Piece] = field(default_factory=list)
    announced: list[tuple[int, str, float]] = field(default_factory=list)  # (segment, text, pos)
    sent_s: float = 0.0
    closed: bool = False
    played_s: float = 0.0
    played_out: bool = False


@dataclass(frozen=True)
class Fate:
    """What of one text piece the caller heard.

    Attributes:
        text: The heard text ("" when nothing).
        complete: The whole piece was heard.
        final: The answer cannot change any more (its audio has played out, or it never will).
    """

    text: str
    complete: bool
    final: bool


@dataclass(frozen=True)
class Part:
    """A heard piece of text to commit, in order.

    Attributes:
        key: The piece's text frame id (``None`` for an announced sentence).
        text: Its heard text.
        complete: All of it was heard.
        includes_spaces: The frame's ``includes_inter_frame_spaces``.
        words_sent: How many words the piece has.
    """

    key: int | None
    text: str
    complete: bool
    includes_spaces: bool = False
    words_sent: int = 0


class PlaybackLedger:
    """What was sent to the output transport, what it played, and what of it was heard.

    The side before the transport reports audio contexts, their text pieces and audio; the
    side after it reports which context is playing and how much audio it wrote. Keys are
    the text frames' ids, which survive the transport unchanged.

    Args:
        unit: Speech units for the estimate (see :func:`heard_prefix`).
        seconds_per_unit: Fallback speaking rate; the measured rate of completed contexts
            takes over once there is one.
        mode: How the TTS's sentence text relates to its audio (see :data:`Mode`).
    """

    def __init__(
        self,
        *,
        unit: Unit = "chars",
        seconds_per_unit: float | None = None,
        mode: Mode = "streamed",
    ):
        if unit not in ("chars", "syllables"):
            raise ValueError(f"unit must be 'chars' or 'syllables', got {unit!r}")
        if mode not in ("streamed", "sequential"):
            raise ValueError(f"mode must be 'streamed' or 'sequential', got {mode!r}")
        self.unit: Unit = unit
        self.mode: Mode = mode
        self._cleared_epoch = 0
        self._default_rate = seconds_per_unit or default_rate(unit)
        self._rates: list[float] = []
        self._contexts: dict[str | None, _Context] = {}
        self._by_key: dict[int, _Context] = {}
        self._epoch = 0
        self._playing: _Context | None = None

    # -- sent side ----------------------------------------------------------------------------

    @property
    def rate(self) -> float:
        """Seconds per unit: the median of the completed contexts' rates, else the default."""
        if not self._rates:
            return self._default_rate
        ordered = sorted(self._rates)
        return ordered[len(ordered) // 2]

    def interruption_sent(self) -> None:
        """The side before the transport saw an interruption: later contexts are a new reply."""
        self._epoch += 1

    def _context(self, context_id: str | None) -> _Context:
        ctx = self._contexts.get(context_id)
        if ctx is None:
            ctx = self._contexts[context_id] = _Context(context_id, self._epoch, self.mode)
        return ctx

    def open(self, context_id: str | None) -> None:
        """A new audio context starts (its ``TTSStartedFrame``)."""
        ctx = self._contexts.get(context_id)
        if ctx is None or ctx.closed or ctx.epoch != self._epoch:
            self._contexts[context_id] = _Context(context_id, self._epoch, self.mode)

    def announce(self, context_id: str | None, segment: int, text: str) -> None:
        """The TTS is about to speak ``text`` (its will-be-spoken ``AggregatedTextFrame``)."""
        ctx = self._context(context_id)
        ctx.announced.append((segment, text, ctx.sent_s))

    def audio(self, context_id: str | None, seconds: float) -> None:
        """``seconds`` of the context's audio went to the transport."""
        _check_number("seconds", seconds)
        if seconds > 0:
            self._context(context_id).sent_s += seconds

    def sentence(
        self,
        context_id: str | None,
        key: int,
        text: str,
        *,
        segment: int | None = None,
        includes_spaces: bool = False,
    ) -> None:
        """A sentence-level text frame (no word timing) of the context went to the transport."""
        ctx = self._context(context_id)
        piece = _Piece(key, text, segment=segment, includes_spaces=includes_spaces)
        if ctx.mode == "sequential":
            piece.end_pos_s = ctx.sent_s
        matched = [a for a in ctx.announced if a[0] == segment]
        drop = matched[0] if matched else (ctx.announced[0] if ctx.announced else None)
        if drop is not None:
            ctx.announced.remove(drop)
        ctx.pieces.append(piece)
        self._by_key[key] = ctx

    def word(
        self, context_id: str | None, key: int, text: str, start_s: float, *, spaces=False
    ) -> None:
        """A word the TTS timed, starting ``start_s`` into the context's audio."""
        _check_number("start_s", start_s)
        ctx = self._context(context_id)
        ctx.announced.clear()  # timed words need no announcements
        ctx.pieces.append(_Piece(key, text, start_s=max(0.0, start_s), includes_spaces=spaces))
        self._by_key[key] = ctx

    def close(self, context_id: str | None) -> None:
        """The context's audio is complete (its ``TTSStoppedFrame``)."""
        ctx = self._contexts.get(context_id)
        if ctx is None or ctx.closed:
            return
        ctx.closed = True
        units = self._units(ctx)
        if units > 0 and ctx.sent_s > 0 and not any(p.start_s is not None for p in ctx.pieces):
            rate = ctx.sent_s / units
            if TRUNCATED_AUDIO_RATIO < rate / self.rate < 1 / TRUNCATED_AUDIO_RATIO:
                self._rates.append(rate)
                del self._rates[:-20]

    # -- played side --------------------------------------------------------------------------

    def playing(self, context_id: str | None) -> None:
        """The transport started playing the context (its ``TTSStartedFrame`` came out)."""
        ctx = self._contexts.get(context_id)
        if ctx is None:
            ctx = self._context(context_id)
        self._playing = ctx

    def written(self, seconds: float) -> None:
        """The transport wrote ``seconds`` of audio of the playing context."""
        _check_number("seconds", seconds)
        if self._playing is not None and seconds > 0:
            self._playing.played_s += seconds

    def played_out(self, context_id: str | None) -> None:
        """The context's last audio was written (its ``TTSStoppedFrame`` came out)."""
        ctx = self._contexts.get(context_id)
        if ctx is not None:
            ctx.played_out = True
        if self._playing is ctx:
            self._playing = None

    def knows(self, key: int) -> bool:
        """Whether the text piece ``key`` was reported by the side before the transport."""
        return key in self._by_key

    # -- answers ------------------------------------------------------------------------------

    def _text_units(self, text: str) -> float:
        total = 0.0
        for a, b in word_spans(text):
            w = text[a:b]
            total += speech_units(w, self.unit) + pause_units(w, self.unit)
        return total

    def _units(self, ctx: _Context) -> float:
        return sum(self._text_units(p.text) for p in ctx.pieces)

    def _heard_in(self, ctx: _Context, delay_s: float) -> dict[int, Heard]:
        """Heard prefix of every piece of one context."""
        played = ctx.played_s
        audio_s = ctx.sent_s if ctx.closed else None
        out: dict[int, Heard] = {}
        rate = self.rate
        words = [p for p in ctx.pieces if p.start_s is not None]
        if words:
            text = " ".join(p.text for p in words)
            starts = [p.start_s for p in words]
            if len(word_spans(text)) == len(words) and starts == sorted(starts):
                heard = heard_prefix(
                    text, played, audio_s=audio_s, word_starts=starts,
                    playout_delay_s=delay_s, seconds_per_unit=rate, unit=self.unit,
                )  # fmt: skip
                for i, p in enumerate(words):
                    ok = i < heard.words
                    out[p.key] = Heard(int(ok), 1, p.text if ok else "")
            else:  # odd word tokens: each word on its own, by its start and the next
                for i, p in enumerate(words):
                    end = words[i + 1].start_s if i + 1 < len(words) else audio_s
                    ok = end is not None and end <= played - delay_s
                    out[p.key] = Heard(int(ok), 1, p.text if ok else "")
        sentences = [p for p in ctx.pieces if p.start_s is None]
        if not sentences:
            return out
        if ctx.mode == "sequential":
            start = 0.0
            for p in sentences:
                assert p.end_pos_s is not None
                out[p.key] = heard_prefix(
                    p.text, played - start, audio_s=p.end_pos_s - start,
                    playout_delay_s=delay_s, seconds_per_unit=rate, unit=self.unit,
                )  # fmt: skip
                start = p.end_pos_s
            return out
        # streamed: everything the context spoke, mapped onto its whole audio
        joined, bounds = "", []
        for p in sentences:
            if joined:
                joined += " "
            bounds.append((len(joined), len(joined) + len(p.text)))
            joined += p.text
        if audio_s is None:
            # Still arriving: as long as the rate says, and at least the audio already here.
            audio_s = max(ctx.sent_s, self._text_units(joined) * rate)
        heard = heard_prefix(
            joined, played, audio_s=audio_s, playout_delay_s=delay_s,
            seconds_per_unit=rate, unit=self.unit,
        )  # fmt: skip
        cut = len(heard.text)
        for p, (a, b) in zip(sentences, bounds, strict=True):
            n = len(word_spans(p.text))
            if cut >= b:
                out[p.key] = Heard(n, n, p.text)
            elif cut <= a:
                out[p.key] = Heard(0, n, "")
            else:
                part = p.text[: cut - a].rstrip()
                out[p.key] = Heard(len(word_spans(part)), n, part)
        return out

    def fate(self, key: int, playout_delay_s: float = 0.0) -> Fate:
        """What of the piece ``key`` was heard, with ``playout_delay_s`` still unplayed."""
        ctx = self._by_key.get(key)
        if ctx is None:
            return Fate("", False, True)
        heard = self._heard_in(ctx, playout_delay_s).get(key, Heard(0, 0, ""))
        final = heard.complete or (ctx.played_out and playout_delay_s <= 0)
        return Fate(heard.text, heard.complete, final)

    def _interrupted_contexts(self) -> list[_Context]:
        """The contexts the interruption the transport is handling now cuts off, in order.

        The n-th interruption out of the transport cuts every context opened before the
        n-th one into it (the side before the transport counts them as epochs), and any
        context that was playing.
        """
        n = self._cleared_epoch + 1
        return [ctx for ctx in self._contexts.values() if ctx.epoch < n or ctx.played_s > 0]

    def interrupted_keys(self) -> set[int]:
        """Keys of the pieces an interruption seen by the transport now cuts off."""
        return {
            p.key for ctx in self._interrupted_contexts() for p in ctx.pieces if not p.committed
        }

    def unheld_parts(self, held: set[int], playout_delay_s: float = 0.0) -> list[Part]:
        """Heard text of the interrupted contexts' pieces not in ``held``, in order.

        These are pieces whose text frame has not come out of the transport yet (an HTTP
        TTS's sentence frame follows its audio) and sentences known only by their
        announcement (their audio still arriving).
        """
        parts = []
        for ctx in self._interrupted_contexts():
            heard = self._heard_in(ctx, playout_delay_s)
            for p in ctx.pieces:
                if p.key in held or p.committed:
                    continue
                h = heard.get(p.key, Heard(0, len(word_spans(p.text)), ""))
                parts.append(Part(p.key, h.text, h.complete, p.includes_spaces, h.total))
            if ctx.mode != "sequential" or not ctx.announced:
                continue
            last_end = max((p.end_pos_s or 0.0 for p in ctx.pieces), default=0.0)
            for i, (_segment, text, _pos) in enumerate(ctx.announced):
                played = ctx.played_s - last_end if i == 0 else 0.0
                audio_s = max(ctx.sent_s - last_end, self._text_units(text) * self.rate)
                h = heard_prefix(
                    text, played, audio_s=audio_s, playout_delay_s=playout_delay_s,
                    seconds_per_unit=self.rate, unit=self.unit,
                )  # fmt: skip
                parts.append(Part(None, h.text, h.complete, False, h.total))
        return parts

    def all_played_out(self) -> None:
        """The transport has nothing more to play (it said the bot stopped speaking)."""
        for ctx in self._contexts.values():
            if ctx.played_s > 0:
                ctx.played_out = True
        self._playing = None

    def forget(self, keys: Sequence[int] = ()) -> None:
        """Drop pieces that were committed, and contexts with nothing left in flight."""
        for key in keys:
            ctx = self._by_key.pop(key, None)
            if ctx is not None:
                for p in ctx.pieces:
                    if p.key == key:
                        p.committed = True
        for cid, ctx in list(self._contexts.items()):
            done = all(p.committed for p in ctx.pieces)
            if ctx.played_out and done:
                del self._contexts[cid]

    def interrupted(self) -> None:
        """The transport was interrupted: every context sent before the interruption is over.

        Contexts opened after the side before the transport saw the same interruption (a
        new reply already on its way) are kept.
        """
        for ctx in self._interrupted_contexts():
            for p in ctx.pieces:
                self._by_key.pop(p.key, None)
            del self._contexts[ctx.context_id]
        self._cleared_epoch += 1
        self._playing = None
