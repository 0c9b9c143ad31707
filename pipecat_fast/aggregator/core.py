"""Streaming segmenter: text pieces of an LLM reply in, speakable chunks out.

Pure logic: no frames, no tasks, no clock (time comes in as a number). ``StreamSegmenter``
takes the reply as it streams (``str`` or raw UTF-8 ``bytes`` token by token), and returns each
chunk as soon as its end is certain, reading as little of what follows as the case needs:

- ``Hello. H`` -> ``"Hello. "`` at the first letter of the next sentence (one token);
- ``Dr. S``, ``U.S. G``, ``$29.`` ``99``, ``I. D`` wait for the next word or digit (one or two);
- ``本日は…か？ご`` and ``नमस्ते! म`` need no space and no letter case.

Chunks are exact slices of the reply: their concatenation is the reply, once invalid UTF-8 has
become U+FFFD, lone surrogates U+FFFD and C0 control characters other than tab, newline and
carriage return have been removed (each logged once per reply), and a whitespace-only tail left
at ``flush`` is dropped. Whitespace after a boundary stays at the end of the chunk before it, so
no sentence is glued to the next and nothing is inserted. No boundary ever falls inside an
extended grapheme cluster (as the ``regex`` package finds them): emoji ZWJ sequences, skin
tones, flags, combining marks and Indic conjuncts stay whole even when a token splits them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

import regex
from loguru import logger

from pipecat_fast.aggregator import rules as R
from pipecat_fast.aggregator.boundaries import NEED, BoundaryDecisions, ReplyState
from pipecat_fast.aggregator.langdata import LanguageRules, rules_for

_SURROGATES = re.compile(r"[\ud800-\udfff]")
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_CLAUSE_CUT = re.compile(r"(?:[,;:]|\s[-–—]|—)\s+|[，、；：،؛၊]\s*")
_GRAPHEME = regex.compile(r"\X")
_SPACES = re.compile(r"\s+")


class ChunkKind(StrEnum):
    """Why a chunk ended where it did."""

    SENTENCE = "sentence"  # a sentence boundary (or a line/list boundary)
    CLAUSE = "clause"  # first phrase of a reply cut at a clause mark (first-phrase policy)
    LENGTH = "length"  # max_chars reached: cut at the last clause mark or space
    STALL = "stall"  # the reply stalled for stall_flush_s: released what was safe to say
    END = "end"  # end of the reply (flush)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One speakable piece of a reply.

    Attributes:
        text: The exact slice of the reply, trailing boundary whitespace included.
        kind: Why it ended there.
        start: Offset of its first character in the reply (code points, after decoding).
        end: Offset after its last character.
        mark_end: Offset after the boundary mark (terminator and closing quotes), before the
            trailing whitespace; equals ``end`` for length, stall and end chunks.
    """

    text: str
    kind: ChunkKind
    start: int
    end: int
    mark_end: int


@dataclass(frozen=True)
class SegmenterConfig:
    """Settings of a ``StreamSegmenter``.

    Attributes:
        language: Language code for abbreviations and ordinals (``"en"``, ``"de-DE"``); scripts
            with their own terminators (CJK, Devanagari, Arabic, ...) work in any language.
        first_phrase: Let the first chunk of a reply end at a clause mark (comma, semicolon,
            colon, dash, CJK comma) once it is ``first_phrase_min_chars`` long; later chunks end
            at sentence boundaries only.
        first_phrase_min_chars: Shortest first phrase, in grapheme clusters. 20 is our starting
            default (about 1.3 s of speech at 15 characters/s, long enough for a TTS to give the
            phrase its own intonation); the pipeline bench tunes it.
        max_chars: Longest chunk, in code points; a longer one is cut at its last clause mark,
            else its last space, else its last grapheme boundary. Must be at least 16.
        unpunctuated_min_chars: In Thai and Lao, which separate sentences with a space instead
            of a mark, a space ends a chunk once the chunk is at least this long.
        stall_flush_s: If set, ``poll(now)`` releases a pending sentence or clause when no text
            has arrived for this many seconds. None disables it.
        hold_max_chars: An unclosed quote, bracket, markdown emphasis or inline markup element
            stops holding sentences together after this many code points (a stray ``(`` must
            not hold a whole reply).
    """

    language: str | None = None
    first_phrase: bool = True
    first_phrase_min_chars: int = 20
    max_chars: int = 300
    unpunctuated_min_chars: int = 30
    stall_flush_s: float | None = None
    hold_max_chars: int = 300

    def __post_init__(self) -> None:
        if self.language is not None and not isinstance(self.language, str):
            raise TypeError(
                "language must be a language code such as 'en' or 'de-DE' (or None), got "
                f"{type(self.language).__name__}"
            )
        if not isinstance(self.first_phrase, bool):
            raise TypeError(f"first_phrase must be True or False, got {self.first_phrase!r}")
        for name, low in (
            ("max_chars", 16),
            ("first_phrase_min_chars", 1),
            ("unpunctuated_min_chars", 1),
            ("hold_max_chars", 1),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an integer, got {value!r}")
            if value < low:
                raise ValueError(f"{name} must be >= {low}, got {value}")
        stall = self.stall_flush_s
        if stall is not None:
            if isinstance(stall, bool) or not isinstance(stall, (int, float)):
                raise TypeError(f"stall_flush_s must be a number of seconds or None, got {stall!r}")
            if not stall > 0:
                raise ValueError(f"stall_flush_s must be > 0 or None, got {stall}")


class StreamSegmenter(BoundaryDecisions):
    """Split one streamed reply at a time into chunks a TTS can speak.

    Call ``push`` for each piece of the reply, ``flush`` at its end, ``reset`` on interruption.
    ``poll`` is only needed with ``stall_flush_s``. Not thread-safe; one instance per stream.

    Example::

        seg = StreamSegmenter(SegmenterConfig(first_phrase=False))
        out = [c.text for p in ["Hello", ".", " How", " are you?"] for c in seg.push(p)]
        out += [c.text for c in seg.flush()]
        assert out == ["Hello. ", "How are you?"]
    """

    def __init__(self, config: SegmenterConfig | None = None) -> None:
        self._cfg = config or SegmenterConfig()
        self._rules: LanguageRules = rules_for(self._cfg.language)
        self._st = ReplyState()

    # ----------------------------------------------------------------- public API

    @property
    def config(self) -> SegmenterConfig:
        """The settings in use."""
        return self._cfg

    @property
    def pending_text(self) -> str:
        """Text received but not yet emitted (undecoded trailing bytes excluded)."""
        return self._st.buf

    def set_language(self, language: str | None) -> None:
        """Switch language rules; takes effect for text not yet decided."""
        self._rules = rules_for(language)

    def push(self, piece: str | bytes, now: float | None = None) -> list[Chunk]:
        """Add the next piece of the reply and return the chunks it completes.

        Args:
            piece: Text, or raw UTF-8 bytes (decoded incrementally: a code point split across
                pieces is joined; invalid bytes become U+FFFD with one log line per reply).
            now: Current time in seconds (any monotonic clock), for ``stall_flush_s``.

        Returns:
            Completed chunks, in order (often empty).

        Raises:
            TypeError: If ``piece`` is neither ``str`` nor ``bytes``.
        """
        if isinstance(piece, (bytes, bytearray, memoryview)):
            text = self._decode(bytes(piece), final=False)
        elif isinstance(piece, str):
            text = piece
        else:
            raise TypeError(f"push() takes str or bytes, not {type(piece).__name__}")
        if now is not None:
            self._st.last_input = now
        if not text:
            return []
        self._st.buf += self._sanitize(text)
        return self._scan(final=False)

    def poll(self, now: float) -> list[Chunk]:
        """Release what is safe to say if the reply stalled (``stall_flush_s``).

        Releases a pending sentence whose end only waits for lookahead (not after an
        abbreviation, an initial or a number), else the text up to the last clause mark.

        Args:
            now: Current time in seconds, same clock as ``push``.

        Returns:
            The released chunk, or an empty list.
        """
        st, stall = self._st, self._cfg.stall_flush_s
        if stall is None or st.last_input is None or now - st.last_input < stall:
            return []
        if not st.buf.strip():
            return []
        cut = self._stall_cut()
        if cut is None:
            return []
        st.last_input = now  # at most one release per stall period
        chunk = self._emit(cut, cut, ChunkKind.STALL, final=cut >= len(st.buf))
        return [chunk] if isinstance(chunk, Chunk) else []

    def flush(self) -> list[Chunk]:
        """End of the reply: return every remaining chunk and re-arm the first-phrase policy."""
        st = self._st
        if st.pending:
            st.buf += self._sanitize(self._decode(b"", final=True))
        out = self._scan(final=True)
        if st.buf.strip():
            chunk = self._emit(len(st.buf), len(st.buf), ChunkKind.END, final=True)
            if isinstance(chunk, Chunk):
                out.append(chunk)
        self._st = ReplyState()
        return out

    def reset(self) -> None:
        """Drop everything buffered (interruption) and start a new reply."""
        self._st = ReplyState()

    # ----------------------------------------------------------------- input hygiene

    def _log_once(self, key: str, message: str) -> None:
        if key not in self._st.logged:
            self._st.logged.add(key)
            logger.warning(message)

    def _decode(self, data: bytes, *, final: bool) -> str:
        st = self._st
        data = st.pending + data
        cut = len(data) if final else _complete_prefix(data)
        st.pending = data[cut:]
        head = data[:cut]
        if not head:
            return ""
        text = head.decode("utf-8", errors="replace")
        if text.count("\ufffd") > head.count(b"\xef\xbf\xbd"):
            self._log_once("utf8", "segmenter: invalid UTF-8 in the reply, replaced with U+FFFD")
        return text

    def _sanitize(self, text: str) -> str:
        if _SURROGATES.search(text):
            self._log_once("surrogate", "segmenter: lone surrogates in the reply, replaced")
            text = _SURROGATES.sub("\ufffd", text)
        if _CONTROLS.search(text):
            self._log_once("control", "segmenter: control characters in the reply, removed")
            text = _CONTROLS.sub("", text)
        return text

    # ----------------------------------------------------------------- scanning

    def _scan(self, *, final: bool) -> list[Chunk]:
        st, cfg = self._st, self._cfg
        out: list[Chunk] = []
        if not st.marker_known:
            self._detect_marker()
        while True:
            if st.i >= cfg.max_chars:
                chunk = self._length_cut()
                if chunk is None:
                    break
                out.append(chunk)
                continue
            if st.i >= len(st.buf):
                break
            # Skip, in one regex search, the characters _step would only step over.
            nxt = self._plain_run_end(st.i)
            if nxt > st.i:
                st.i = min(nxt, cfg.max_chars) if st.i < cfg.max_chars else nxt
                continue
            before = (st.base, st.i)
            step = self._step(st.i, final)
            if step is NEED:
                break
            if isinstance(step, Chunk):
                out.append(step)
            elif (st.base, st.i) == before:
                st.i += 1  # never stall the scan on an undecidable position
        # A decision that waits on a long run of text must not grow a chunk without bound.
        while not final and len(st.buf) >= cfg.max_chars + 64:
            chunk = self._length_cut()
            if chunk is None:
                break
            out.append(chunk)
        return out

    def _plain_run_end(self, i: int) -> int:
        """The first index >= ``i`` where ``_step`` may do more than step over the character.

        Those are: line breaks, terminators, quote/bracket/emphasis/markup characters, clause
        marks and dashes while the first phrase is armed, a space after Thai or Lao, and the
        first non-space after a space while the chunk is a list item. Everything else only
        moves the scan on, so a run of it is skipped at once.
        """
        st = self._st
        pattern = _interesting(self._rules, self._first_phrase_armed(), st.marker is not None)
        m = pattern.search(st.buf, i)
        return len(st.buf) if m is None else m.start()

    def _step(self, i: int, final: bool) -> object:
        """Examine buf[i]: emit a chunk, advance the scan, or return NEED."""
        st, buf = self._st, self._st.buf
        c = buf[i]
        if st.marker is not None and i > 0 and buf[i - 1].isspace() and not c.isspace():
            d = self._decide_next_item(i, final)
            if d is NEED:
                return NEED
            if d is not None:
                out = self._emit(i, i, ChunkKind.SENTENCE, final=final)
                if out is not None:
                    return out
        if c == "\n":
            d = self._decide_newline(i, final)
            if d is NEED:
                return NEED
            if d.boundary:
                return self._emit(d.end, d.mark_end, ChunkKind.SENTENCE, final=final)
            st.i = max(d.resume, i + 1)
            return None
        if R.is_terminator(c, self._rules):
            d = self._decide_terminator(i, final)
            if d is NEED:
                return NEED
            if d.boundary:
                out = self._emit(d.end, d.mark_end, ChunkKind.SENTENCE, final=final, sync=d.resume)
                return out
            st.i = max(d.resume, i + 1)
            return None
        if self._first_phrase_armed() and (
            c in R.CLAUSE_MARKS_SPACED or c in R.CLAUSE_MARKS_UNSPACED or c in R.DASHES or c == "-"
        ):
            d = self._decide_clause(i, final)
            if d is NEED:
                return NEED
            if d is not None:
                return self._emit(d.end, d.mark_end, ChunkKind.CLAUSE, final=final)
        if c.isspace() and i > 0 and R.is_unpunctuated_script(buf[i - 1]):
            d = self._decide_unpunctuated(i, final)
            if d is NEED:
                return NEED
            if d is not None:
                kind = ChunkKind.SENTENCE if d.boundary else ChunkKind.CLAUSE
                return self._emit(d.end, d.mark_end, kind, final=final)
        nxt = self._advance_state(i, final)
        if nxt is NEED:
            return NEED
        st.i = nxt
        return None

    # ----------------------------------------------------------------- cutting

    def _length_cut(self) -> Chunk | None:
        """max_chars reached: cut at the last clause mark, else space, else grapheme boundary."""
        st, cfg = self._st, self._cfg
        limit = min(cfg.max_chars, len(st.buf) - 1)
        if limit <= 0:
            return None
        region = st.buf[:limit]
        cut = 0
        for m in _CLAUSE_CUT.finditer(region):
            if m.end() >= cfg.max_chars // 4:
                cut = m.end()
        if not cut:
            for m in _SPACES.finditer(region):
                if region[: m.start()].strip():
                    cut = m.end()
        cut = _grapheme_floor(st.buf, cut or limit)
        if cut <= 0:
            cut = _grapheme_safe_end(st.buf, limit, final=False) or 0
        if cut <= 0 or cut >= len(st.buf):
            return None  # one grapheme cluster still growing at the end: wait for more text
        # Bring quotes/brackets/emphasis state up to the cut before dropping the text.
        while st.i < cut:
            nxt = self._advance_state(st.i, final=True)
            st.i = nxt if isinstance(nxt, int) else st.i + 1
        out = self._emit(cut, cut, ChunkKind.LENGTH, final=False, keep_blank=True)
        return out if isinstance(out, Chunk) else None

    def _stall_cut(self) -> int | None:
        st, buf = self._st, self._st.buf
        if st.i < len(buf) and R.is_terminator(buf[st.i], self._rules):
            left = R.word_before(buf, st.i)
            tail = buf[st.i :]
            if tail.strip() and all(
                R.is_terminator(ch, self._rules) or ch in R.CLOSERS or ch.isspace() for ch in tail
            ):
                kind = R.abbreviation_kind(left, self._rules)
                if kind is None and not (left and R.looks_like_number(left)):
                    return len(buf)
        cut = 0
        for m in _CLAUSE_CUT.finditer(buf):
            if m.end() < len(buf):
                cut = m.end()
        return cut or None

    def _emit(
        self,
        end: int,
        mark_end: int,
        kind: ChunkKind,
        *,
        final: bool,
        keep_blank: bool = False,
        sync: int | None = None,
    ) -> Chunk | str | None:
        """Cut buf[:end] off as a chunk.

        Returns:
            The chunk; NEED when ``end`` falls inside a grapheme cluster that the text so far
            cannot close; None when the piece is only whitespace (it stays with what follows).
        """
        st = self._st
        buf = st.buf
        safe = _grapheme_safe_end(buf, end, final=final)
        if safe is None:
            return NEED
        end = safe
        mark_end = min(mark_end, end)
        text = buf[:end]
        if not text.strip() and not keep_blank:
            st.i = max(st.i, end)
            return None
        if sync is not None:
            # Closing quotes, brackets, emphasis and tags after the mark close their holds.
            k = sync
            while k < end:
                nxt = self._advance_state(k, final=True)
                k = nxt if isinstance(nxt, int) else k + 1
        chunk = Chunk(text, kind, st.base, st.base + end, st.base + mark_end)
        st.buf = buf[end:]
        st.base += end
        st.i = max(0, st.i - end)
        st.emitted = True
        st.marker = None
        st.marker_known = False
        self._detect_marker()
        return chunk

    def _detect_marker(self) -> None:
        st = self._st
        m, known = R.list_marker_at(st.buf, len(st.buf) - len(st.buf.lstrip()))
        if not known:
            return
        st.marker_known = True
        if m is not None:
            style, value = R.marker_value(m)
            bullet = m.group(0)[0] if m.group(0)[0] in R.BULLETS else ""
            st.marker = (bullet, style, value)


_INTERESTING: dict[tuple[str, bool, bool], re.Pattern] = {}


def _interesting(rules: LanguageRules, armed: bool, marker: bool) -> re.Pattern:
    """The characters where ``_step`` may act (see ``StreamSegmenter._plain_run_end``)."""
    key = (rules.extra_terminators, armed, marker)
    pattern = _INTERESTING.get(key)
    if pattern is None:
        chars = set('\n.*_~<"') | {R.ELLIPSIS} | set(rules.extra_terminators)
        chars |= R.LATIN_EXCLAMATIONS | R.SCRIPT_TERMINATORS | R.ARMENIAN_MARKS
        chars |= set(R.CLOSING_TO_OPENERS) | set(R.PAIRS)
        if armed:
            chars |= R.CLAUSE_MARKS_SPACED | R.CLAUSE_MARKS_UNSPACED | R.DASHES | {"-"}
        alternatives = ["[" + "".join(re.escape(c) for c in sorted(chars)) + "]"]
        alternatives.append(r"(?<=[\u0e00-\u0eff])\s")  # R.is_unpunctuated_script
        if marker:
            alternatives.append(r"(?<=\s)\S")
        pattern = _INTERESTING[key] = re.compile("|".join(alternatives))
    return pattern


def _grapheme_safe_end(buf: str, end: int, *, final: bool) -> int | None:
    """Smallest grapheme-cluster boundary >= ``end`` that the text so far can confirm.

    A boundary at ``end`` depends only on the text before it and the character at it (UAX #29
    rules GB9-GB13), so it is known once one character after ``end`` has arrived.
    """
    if end >= len(buf):
        return len(buf) if final else None
    if end <= 0:
        return 0
    if _ascii_pair(buf, end):
        return end
    for m in _GRAPHEME.finditer(buf, _restart_before(buf, end), min(len(buf), end + 256)):
        if m.start() == end:
            return end
        if m.start() < end < m.end():
            if m.end() >= len(buf) and not final:
                return None
            return m.end()
        if m.start() > end:
            break
    return end


def _ascii_pair(buf: str, i: int) -> bool:
    """Whether ``i`` is a grapheme-cluster boundary because ``buf[i - 1]``, ``buf[i]`` are ASCII.

    No ASCII character extends, joins or prepends to another (UAX #29); only CR LF holds.
    """
    a, b = buf[i - 1], buf[i]
    return a < "\x80" and b < "\x80" and not (a == "\r" and b == "\n")


def _restart_before(buf: str, end: int, window: int = 64) -> int:
    """A grapheme-cluster boundary at or before ``end`` to segment from (``0 < end < len``).

    Segmenting from a boundary that an ASCII pair makes certain gives the same clusters as
    segmenting from the start of the text; without one in ``window`` characters, 0.
    """
    for q in range(end, max(1, end - window) - 1, -1):
        if _ascii_pair(buf, q):
            return q
    return 0


def _grapheme_floor(buf: str, end: int) -> int:
    """Largest grapheme-cluster boundary <= ``end`` (``end`` < len(buf))."""
    if 0 < end and _ascii_pair(buf, end):
        return end
    best = 0
    for m in _GRAPHEME.finditer(buf, 0, end + 1):
        if m.start() > end:
            break
        best = m.start()
        if m.end() == end:
            return end
    return best


def _complete_prefix(data: bytes) -> int:
    """Length of the prefix of ``data`` that holds no incomplete trailing UTF-8 sequence."""
    n = len(data)
    for back in range(1, min(4, n) + 1):
        b = data[n - back]
        if b & 0xC0 == 0x80:
            continue  # continuation byte: look further back for the lead byte
        if b < 0x80:
            return n
        need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1
        return n - back if need > back else n
    return n
