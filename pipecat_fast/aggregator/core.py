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
from dataclasses import dataclass, field
from enum import StrEnum

import regex
from loguru import logger

from pipecat_fast.aggregator import rules as R
from pipecat_fast.aggregator.langdata import RULES, LanguageRules, rules_for

_EN_STARTERS = RULES["en"].starters
_SURROGATES = re.compile(r"[\ud800-\udfff]")
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_CLAUSE_CUT = re.compile(r"(?:[,;:]|\s[-–—]|—)\s+|[，、；：،؛၊]\s*")
_GRAPHEME = regex.compile(r"\X")
_TAG = regex.compile(
    r"<(?P<close>/)?(?P<name>[A-Za-z][\w:.-]{0,40})"
    r"(?:\s+[\w:.-]{1,40}\s*=\s*(?:\"[^\"<>]{0,200}\"|'[^'<>]{0,200}'|[^\s\"'<>]{1,200}))*"
    r"\s*(?P<selfclose>/)?>"
)

_NEED = "need"  # a decision needs text that has not arrived yet


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
        hold_max_chars: An unclosed quote, bracket or markdown emphasis stops holding sentences
            together after this many code points (a stray ``(`` must not hold a whole reply).
    """

    language: str | None = None
    first_phrase: bool = True
    first_phrase_min_chars: int = 20
    max_chars: int = 300
    unpunctuated_min_chars: int = 30
    stall_flush_s: float | None = None
    hold_max_chars: int = 300

    def __post_init__(self) -> None:
        if self.max_chars < 16:
            raise ValueError(f"max_chars must be >= 16, got {self.max_chars}")
        if self.first_phrase_min_chars < 1:
            raise ValueError("first_phrase_min_chars must be >= 1")
        if self.stall_flush_s is not None and self.stall_flush_s <= 0:
            raise ValueError("stall_flush_s must be > 0 or None")


@dataclass(slots=True)
class _Hold:
    """An open quote, bracket, emphasis run or speech-markup element."""

    kind: str  # "q" quote/bracket, "e" emphasis, "x" markup element
    token: str  # the opening character(s) or the element name
    pos: int  # absolute offset where it opened


@dataclass(slots=True)
class _Decision:
    boundary: bool
    end: int = 0  # chunk end (after trailing whitespace)
    mark_end: int = 0  # after the mark and its closers
    resume: int = 0  # where to continue scanning when not a boundary


@dataclass
class _ReplyState:
    buf: str = ""
    base: int = 0  # reply offset of buf[0]
    i: int = 0  # scan position in buf
    holds: list[_Hold] = field(default_factory=list)
    emitted: bool = False
    marker: tuple[str, str, str] | None = None  # (bullet prefix, style, value) of this chunk
    marker_known: bool = False
    pending: bytes = b""
    last_input: float | None = None
    logged: set[str] = field(default_factory=set)


class StreamSegmenter:
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
        self._st = _ReplyState()

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
        self._st = _ReplyState()
        return out

    def reset(self) -> None:
        """Drop everything buffered (interruption) and start a new reply."""
        self._st = _ReplyState()

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
            before = (st.base, st.i)
            step = self._step(st.i, final)
            if step is _NEED:
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

    def _step(self, i: int, final: bool) -> object:
        """Examine buf[i]: emit a chunk, advance the scan, or return _NEED."""
        st, buf = self._st, self._st.buf
        c = buf[i]
        if st.marker is not None and i > 0 and buf[i - 1].isspace() and not c.isspace():
            d = self._decide_next_item(i, final)
            if d is _NEED:
                return _NEED
            if d is not None:
                out = self._emit(i, i, ChunkKind.SENTENCE, final=final)
                if out is not None:
                    return out
        if c == "\n":
            d = self._decide_newline(i, final)
            if d is _NEED:
                return _NEED
            if d.boundary:
                return self._emit(d.end, d.mark_end, ChunkKind.SENTENCE, final=final)
            st.i = max(d.resume, i + 1)
            return None
        if R.is_terminator(c, self._rules):
            d = self._decide_terminator(i, final)
            if d is _NEED:
                return _NEED
            if d.boundary:
                out = self._emit(d.end, d.mark_end, ChunkKind.SENTENCE, final=final, sync=d.resume)
                return out
            st.i = max(d.resume, i + 1)
            return None
        if self._first_phrase_armed() and (
            c in R.CLAUSE_MARKS_SPACED or c in R.CLAUSE_MARKS_UNSPACED or c in R.DASHES or c == "-"
        ):
            d = self._decide_clause(i, final)
            if d is _NEED:
                return _NEED
            if d is not None:
                return self._emit(d.end, d.mark_end, ChunkKind.CLAUSE, final=final)
        if c.isspace() and i > 0 and R.is_unpunctuated_script(buf[i - 1]):
            d = self._decide_unpunctuated(i, final)
            if d is _NEED:
                return _NEED
            if d is not None:
                kind = ChunkKind.SENTENCE if d.boundary else ChunkKind.CLAUSE
                return self._emit(d.end, d.mark_end, kind, final=final)
        nxt = self._advance_state(i, final)
        if nxt is _NEED:
            return _NEED
        st.i = nxt
        return None

    # ----------------------------------------------------------------- holds (quotes, ...)

    def _alive(self, holds: list[_Hold], at: int) -> bool:
        limit = self._cfg.hold_max_chars
        return any(h.kind == "x" or at - h.pos <= limit for h in holds)

    def _advance_state(self, i: int, final: bool) -> int | str:
        """Update quotes, brackets, emphasis and markup for buf[i]; return the next index."""
        st, buf = self._st, self._st.buf
        c = buf[i]
        pos = st.base + i
        prev = buf[i - 1] if i > 0 else " "
        if c in "*_~":
            j = i
            while j < len(buf) and buf[j] == c:
                j += 1
            if j == len(buf) and not final:
                return _NEED
            nxt = buf[j] if j < len(buf) else " "
            run = buf[i:j]
            if (c == "~" and len(run) != 2) or (prev.isalnum() and nxt.isalnum()):
                return j
            for k in range(len(st.holds) - 1, -1, -1):
                h = st.holds[k]
                if h.kind == "e" and h.token == run and not prev.isspace():
                    del st.holds[k:]
                    return j
            if not nxt.isspace() and (prev.isspace() or not prev.isalnum()):
                st.holds.append(_Hold("e", run, pos))
            return j
        if c == "<":
            return self._markup(i, final)
        if c == '"':
            for k in range(len(st.holds) - 1, -1, -1):
                if st.holds[k].kind == "q" and st.holds[k].token == '"':
                    del st.holds[k:]
                    return i + 1
            if prev.isspace() or prev in R.OPENERS or prev in "—–-:" or i == 0:
                st.holds.append(_Hold("q", c, pos))
            return i + 1
        if c in R.CLOSING_TO_OPENERS and self._close(c):
            return i + 1
        if c in R.PAIRS:
            if c == "(" and prev in ":;=8" and i > 0:
                return i + 1  # emoticon
            if c == "»" and not (prev.isspace() or i == 0):
                return i + 1
            st.holds.append(_Hold("q", c, pos))
        return i + 1

    def _close(self, c: str) -> bool:
        holds = self._st.holds
        openers = R.CLOSING_TO_OPENERS[c]
        for k in range(len(holds) - 1, -1, -1):
            if holds[k].kind == "q" and holds[k].token in openers and holds[k].token != '"':
                del holds[k:]
                return True
        return False

    def _markup(self, i: int, final: bool) -> int | str:
        """A markup tag at buf[i] ("<break .../>", "<spell>", "</spell>"): skip it whole."""
        st, buf = self._st, self._st.buf
        m = _TAG.match(buf, i, partial=True)
        if m is None:
            return i + 1  # "a < b", "x<y and": not a tag
        if m.partial:
            return i + 1 if final else _NEED
        name = m.group("name").lower()
        if name in R.SSML_ELEMENTS:
            if m.group("close"):
                for k in range(len(st.holds) - 1, -1, -1):
                    if st.holds[k].kind == "x" and st.holds[k].token == name:
                        del st.holds[k:]
                        break
            elif not m.group("selfclose"):
                st.holds.append(_Hold("x", name, st.base + i))
        return m.end()

    # ----------------------------------------------------------------- decisions

    def _first_phrase_armed(self) -> bool:
        return self._cfg.first_phrase and not self._st.emitted

    def _decide_terminator(self, i: int, final: bool) -> _Decision | str:
        st, buf, rules = self._st, self._st.buf, self._rules
        n = len(buf)
        no = _Decision(False)
        # 1. The run of terminators ("?!", "...", "。」" is run + closer).
        j = i
        while j < n and R.is_terminator(buf[j], rules):
            j += 1
        no.resume = j
        if j == n:
            return no if final else _NEED
        run = buf[i:j]
        nxt_raw = buf[j]
        if run[-1] in R.ARMENIAN_MARKS and len(run) == 1 and nxt_raw.isalpha():
            return no  # stress mark inside a word
        if run in (".", "．") and i > 0 and buf[i - 1].isdigit() and nxt_raw.isdigit():
            return no  # decimal, version, date: 3.14, 1.2.3, ３．２９
        if i > 0 and buf[i - 1] in "[(" and nxt_raw in "])" and set(run) <= {".", R.ELLIPSIS}:
            return no  # editorial omission: "[...]", "(…)"
        script = any(ch in R.SCRIPT_TERMINATORS or ch in R.ARMENIAN_MARKS for ch in run)
        excl = any(ch in R.LATIN_EXCLAMATIONS or ch in rules.extra_terminators for ch in run)
        ellipsis = (
            R.ELLIPSIS in run
            or run.count(".") >= 2
            or (run == "." and i >= 2 and buf[i - 1] == " " and buf[i - 2] == ".")
        )
        # 2. Closing quotes, brackets, emphasis, citations that belong to this sentence.
        holds = list(st.holds)
        k = j
        while k < n:
            ch = buf[k]
            if ch in R.FORMAT_CHARS:
                k += 1
                continue
            if ch in "'’" and k + 1 < n and buf[k + 1].isalpha():
                break  # possessive or contraction: "Jr.'s"
            if ch in R.CLOSERS:
                if ch in "*_~":
                    e = k
                    while e < n and buf[e] == ch:
                        e += 1
                    run_e = buf[k:e]
                    for h in range(len(holds) - 1, -1, -1):
                        if holds[h].kind == "e" and holds[h].token == run_e:
                            del holds[h:]
                            break
                    k = e
                    continue
                for h in range(len(holds) - 1, -1, -1):
                    if holds[h].kind == "q" and holds[h].token in R.CLOSING_TO_OPENERS.get(ch, ""):
                        del holds[h:]
                        break
                k += 1
                continue
            if ch == "<" and k + 1 == n and not final:
                return _NEED  # maybe a closing tag: "Now.</emphasis>"
            if ch == "<" and buf.startswith("</", k):
                close = buf.find(">", k, k + 64)
                if close < 0:
                    if n - k < 64 and not final:
                        return _NEED
                    break
                name = buf[k + 2 : close].strip().lower()
                for h in range(len(holds) - 1, -1, -1):
                    if holds[h].kind == "x" and holds[h].token == name:
                        del holds[h:]
                        break
                k = close + 1
                continue
            if ch == "[":
                e = R.citation_at(buf, k)
                if e > k:
                    k = e
                    continue
                if n - k < 10 and not final and re.fullmatch(r"\[\d{0,3}", buf[k:]):
                    return _NEED
            break
        if k == n and not final:
            return _NEED
        mark_end = k
        # 3. Inside an open quote, bracket, emphasis or markup element: not a boundary.
        if holds and self._alive(holds, st.base + i):
            return no
        # 4. Whitespace after the mark.
        q = k
        while q < n and buf[q].isspace():
            q += 1
        if q == n:
            return no if final else _NEED
        ws = buf[k:q]
        # A citation after a space still belongs here: "a gas. [1] It is ..."
        if ws and buf[q] == "[":
            e = R.citation_at(buf, q)
            if e > q:
                while e < n and R.citation_at(buf, e) > e:
                    e = R.citation_at(buf, e)
                mark_end = e
                q = e
                while q < n and buf[q].isspace():
                    q += 1
                if q == n:
                    return no if final else _NEED
                ws = buf[mark_end:q] or " "
        yes = _Decision(True, end=q, mark_end=mark_end, resume=j)
        if not ws:
            return self._no_space(i, j, k, run, script, excl, ellipsis, final, yes, no)
        if ws.count("\n") >= 2 or script:
            return yes
        # 5. What starts after the whitespace (skipping opening quotes and brackets)?
        r = q
        while r < n and buf[r] in R.OPENERS:
            r += 1
        while r < n and buf[r].isspace():
            r += 1
        if r == n:
            return no if final else _NEED
        m = buf[r]
        if R.is_terminator(m, rules) or m in ",;:)]}":
            e = r
            while e < n and R.is_terminator(buf[e], rules):
                e += 1
            if e == n and not final:
                return _NEED
            if e < n and buf[e].isalpha() and e > r:
                return yes  # the next sentence opens with an ellipsis: "raak. ...en toen"
            return no  # "Dad ! '' ." -- the later mark decides
        if m in "—–-" and m == buf[r]:
            # Dialogue attribution or an aside after a dash: "бар? — деді", "D.C. - Colombia".
            e = r + 1
            while e < n and (buf[e].isspace() or buf[e] in "—–-"):
                e += 1
            if e == n:
                return no if final else _NEED
            left_kind = R.abbreviation_kind(R.word_before(buf, i), rules)
            if buf[e].islower() or (left_kind is not None and not excl):
                return no
            return yes
        if m.islower() or m.isdigit() or buf[q] in "(" or buf[q] in R.BULLETS:
            # "Smith. a. here", "this. 1. The first", "world. (ii) Hello": a list item starts.
            left_kind = R.abbreviation_kind(R.word_before(buf, i), rules)
            if left_kind not in ("title", "initial", "numeric"):
                marker, known = R.list_marker_at(buf, q)
                if not known and not final:
                    return _NEED
                if marker is not None and _opens_list(marker):
                    return yes
        if m.islower():
            return no
        if ellipsis:
            if m == "I" and rules.code == "en":
                word, complete = R.word_after(buf, r)
                if not complete and not final:
                    return _NEED
                if word == "I":
                    return no
            return no if m.isdigit() else yes
        if excl:
            return yes
        return self._after_period(i, r, m, final, yes, no)

    def _no_space(self, i, j, k, run, script, excl, ellipsis, final, yes, no):
        """A terminator followed directly by a character: "it.Your", "？ご", "3.14", "Y!J"."""
        buf = self._st.buf
        nxt = buf[k]
        yes = _Decision(True, end=k, mark_end=k, resume=j)
        if script and not (run == "．" and nxt.isdigit()):
            return yes
        if R.is_terminator(nxt, self._rules) or ellipsis:
            return no
        left = R.word_before(buf, i)
        if excl:
            if (nxt.isupper() and len(left) >= 2) or (
                R.is_unspaced_script(nxt) and i > 0 and R.is_unspaced_script(buf[i - 1])
            ):
                return yes
            return no
        if run != ".":
            return no
        if R.is_unspaced_script(nxt) and i > 0 and R.is_unspaced_script(buf[i - 1]):
            return yes
        if not nxt.isupper():
            return no
        if (
            len(left) < 2
            or "." in left
            or R.looks_like_url(left)
            or R.abbreviation_kind(left, self._rules) is not None
        ):
            return no
        token, complete = R.token_after(buf, k)
        if not complete and not final:
            return _NEED
        core = token.rstrip("".join(R.CLOSERS) + ".,!?;:…")
        if re.fullmatch(r"[^\W\d_][^\W\d_'’]+", core):
            return yes  # "it.Your reference"
        return no

    def _after_period(self, i, r, m, final, yes, no):
        """A period, whitespace, then ``m`` (not lowercase): does the sentence end here?"""
        buf, rules = self._st.buf, self._rules
        left = R.word_before(buf, i)
        if not left and i > 1 and buf[i - 1] == " " and not buf[i - 2].isspace():
            left = R.word_before(buf, i - 1)  # a detached period: "Mr . Robinson"
        if not left or R.looks_like_url(left):
            return yes
        kind = R.abbreviation_kind(left, rules)
        at_start = self._word_starts_chunk(i - len(left))
        if m.isupper():
            if kind == "title":
                return no
            if self._closes_phrase(left, i):
                return yes  # "She weighed 5 lb. Tom", "in 753 B.C. Augustus"
            if kind == "initial":
                if left == "I" and rules.code == "en" and not at_start:
                    return self._starter(r, final, yes, no)
                return no
            if kind in ("abbr", "numeric"):
                return self._starter(r, final, yes, no)
            if R.looks_like_number(left):
                before = buf[: i - len(left)].rstrip()
                if at_start or (before.endswith(":") and left.isdigit() and len(left) <= 2):
                    return no  # "1. The first item", "Steps: 1. Open it."
                if rules.ordinal_dot and left.isdigit() and len(left) <= 3:
                    return no  # "am 12. Juni"
            if rules.ordinal_dot and R.ROMAN_NUMERAL.match(left):
                return no  # "XII. Pluku": a Roman ordinal
            return yes
        if m.isdigit():
            if kind is not None or R.looks_like_number(left):
                return no  # "p. 55", "No. 5", "Jan. 20", "1. 2."
            return yes
        if R.is_caseless_letter(m):
            if kind is not None or "." in left:
                return no  # "ዓ.ም. ሻርጌ", "د. ديفيد"
            return yes
        return yes

    def _closes_phrase(self, left: str, i: int) -> bool:
        """A postpositive abbreviation (a.m., Ph.D., B.C., 5 lb.) ending a 3+ word clause."""
        low = left.lower()
        rules = self._rules
        head = self._st.buf[: i - len(left)].split()
        if low in rules.postpositive:
            pass
        elif low in rules.units and head and R.looks_like_number(head[-1]):
            pass
        else:
            return False
        return len(head) >= 3

    def _starter(self, r: int, final: bool, yes, no):
        """Does the word at ``r`` usually start a sentence? Decides as soon as the prefix can."""
        word, complete = R.word_after(self._st.buf, r)
        starters = self._rules.starters | _EN_STARTERS
        if not complete and not final:
            if not any(s.startswith(word) for s in starters):
                return no  # "U.S. Gov..." can no longer become a sentence starter
            return _NEED
        return yes if word in starters else no

    def _word_starts_chunk(self, start: int) -> bool:
        """Whether the word at ``start`` is the first word of the chunk (after a bullet)."""
        head = self._st.buf[:start]
        return not head.strip() or all(ch in R.BULLETS or ch.isspace() for ch in head)

    def _decide_newline(self, i: int, final: bool) -> _Decision | str:
        st, buf = self._st, self._st.buf
        n = len(buf)
        q = i
        while q < n and buf[q].isspace():
            q += 1
        no = _Decision(False, resume=q)
        if q == n:
            return no if final else _NEED
        if not buf[:i].strip():
            return no
        ws = buf[i:q]
        yes = _Decision(True, end=q, mark_end=i)
        if ws.count("\n") >= 2:
            st.holds = [h for h in st.holds if h.kind == "x"]
            return yes
        st.holds = [h for h in st.holds if h.kind != "e"]
        if st.holds and self._alive(st.holds, st.base + i):
            return no
        marker, known = R.list_marker_at(buf, q)
        if not known and not final:
            return _NEED
        nxt = buf[q]
        if marker is not None or nxt in R.BULLETS or nxt in "-*+#>|":
            return yes
        return no if nxt.islower() else yes

    def _decide_next_item(self, i: int, final: bool) -> _Decision | str | None:
        """At a word start inside a list item: does the next item ("2.", "b)", "• ") begin?"""
        st, buf = self._st, self._st.buf
        if not st.marker_known:
            return None
        bullet, style, value = st.marker  # type: ignore[misc]
        marker, known = R.list_marker_at(buf, i)
        if not known:
            return None if final else _NEED
        if marker is None:
            if bullet and buf[i] == bullet[0] and i + 1 < len(buf) and buf[i + 1] != bullet[0]:
                return _Decision(True)
            return None
        nxt = R.marker_value(marker)
        if R.is_successor((style, value), nxt) or (bullet and marker.group(0)[0] == bullet[0]):
            return _Decision(True)
        return None

    def _decide_clause(self, i: int, final: bool) -> _Decision | None | str:
        """First-phrase policy: may the first chunk end at this clause mark?"""
        st, buf = self._st, self._st.buf
        n = len(buf)
        c = buf[i]
        if c == "-" and not (i > 0 and buf[i - 1] == " "):
            return None
        if c == "–" and not (i > 0 and buf[i - 1] == " "):
            return None
        q = i + 1
        while q < n and buf[q].isspace():
            q += 1
        if q == n:
            return None if final else _NEED
        spaced = q > i + 1
        if (c in R.CLAUSE_MARKS_SPACED or c in "-–") and not spaced:
            return None  # 1,000  3:00  https:  well-known
        if st.holds and self._alive(st.holds, st.base + i):
            return None
        if _grapheme_len(buf[:i].strip()) < self._cfg.first_phrase_min_chars:
            return None
        return _Decision(True, end=q, mark_end=i + 1)

    def _decide_unpunctuated(self, i: int, final: bool) -> _Decision | None | str:
        """Thai/Lao: a space between two words of the script separates phrases or sentences."""
        buf = self._st.buf
        n = len(buf)
        q = i
        while q < n and buf[q].isspace():
            q += 1
        if q == n:
            return None if final else _NEED
        if not R.is_unpunctuated_script(buf[q]):
            return None
        size = _grapheme_len(buf[:i].strip())
        if size >= self._cfg.unpunctuated_min_chars:
            return _Decision(True, end=q, mark_end=i)
        if self._first_phrase_armed() and size >= self._cfg.first_phrase_min_chars:
            return _Decision(False, end=q, mark_end=i)
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
            for m in re.finditer(r"\s+", region):
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
            The chunk; _NEED when ``end`` falls inside a grapheme cluster that the text so far
            cannot close; None when the piece is only whitespace (it stays with what follows).
        """
        st = self._st
        buf = st.buf
        safe = _grapheme_safe_end(buf, end, final=final)
        if safe is None:
            return _NEED
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


def _opens_list(marker) -> bool:
    """After a sentence, only a number, "(x)", "x)" or "a."/"i." start a list item."""
    style, value = R.marker_value(marker)
    if style.startswith("(") or style.endswith(")") or value.isdigit():
        return True
    return value.lower() in ("a", "i")


def _grapheme_len(text: str) -> int:
    return sum(1 for _ in _GRAPHEME.finditer(text))


def _grapheme_safe_end(buf: str, end: int, *, final: bool) -> int | None:
    """Smallest grapheme-cluster boundary >= ``end`` that the text so far can confirm.

    A boundary at ``end`` depends only on the text before it and the character at it (UAX #29
    rules GB9-GB13), so it is known once one character after ``end`` has arrived.
    """
    if end >= len(buf):
        return len(buf) if final else None
    if end <= 0:
        return 0
    for m in _GRAPHEME.finditer(buf, 0, min(len(buf), end + 256)):
        if m.start() == end:
            return end
        if m.start() < end < m.end():
            if m.end() >= len(buf) and not final:
                return None
            return m.end()
        if m.start() > end:
            break
    return end


def _grapheme_floor(buf: str, end: int) -> int:
    """Largest grapheme-cluster boundary <= ``end`` (``end`` < len(buf))."""
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
