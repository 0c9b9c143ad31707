"""Boundary decisions of the streaming segmenter, and the quote/bracket/markup state they read.

``BoundaryDecisions`` is mixed into ``StreamSegmenter``: each ``_decide_*`` method looks at the
reply buffer around one character and answers "boundary here (chunk ends at ...)", "no
boundary", or ``NEED`` ("wait for more text"), using as little text after the mark as the case
allows. The ``_advance_state`` family keeps track of open quotes, brackets, markdown emphasis
and speech-markup elements, inside which no sentence ends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import regex

from pipecat_fast.aggregator import rules as R
from pipecat_fast.aggregator.langdata import RULES, LanguageRules

if TYPE_CHECKING:
    from pipecat_fast.aggregator.core import SegmenterConfig

NEED = "need"  # a decision needs text that has not arrived yet
_EN_STARTERS = RULES["en"].starters
_TAG = regex.compile(
    r"<(?P<close>/)?(?P<name>[A-Za-z][\w:.-]{0,40})"
    r"(?:\s+[\w:.-]{1,40}\s*=\s*(?:\"[^\"<>]{0,200}\"|'[^'<>]{0,200}'|[^\s\"'<>]{1,200}))*"
    r"\s*(?P<selfclose>/)?>"
)


@dataclass(slots=True)
class Hold:
    """An open quote, bracket, emphasis run or speech-markup element."""

    kind: str  # "q" quote/bracket, "e" emphasis, "x" markup element
    token: str  # the opening character(s) or the element name
    pos: int  # absolute offset where it opened


@dataclass(slots=True)
class Decision:
    """The answer for one candidate mark: a boundary (and where the chunk ends) or not."""

    boundary: bool
    end: int = 0  # chunk end (after trailing whitespace)
    mark_end: int = 0  # after the mark and its closers
    resume: int = 0  # where to continue scanning when not a boundary


@dataclass
class ReplyState:
    """Everything the segmenter holds for the reply in progress."""

    buf: str = ""
    base: int = 0  # reply offset of buf[0]
    i: int = 0  # scan position in buf
    holds: list[Hold] = field(default_factory=list)
    emitted: bool = False
    marker: tuple[str, str, str] | None = None  # (bullet prefix, style, value) of this chunk
    marker_known: bool = False
    pending: bytes = b""
    last_input: float | None = None
    logged: set[str] = field(default_factory=set)


class BoundaryDecisions:
    """Decision methods shared by ``StreamSegmenter`` (which owns the state they read)."""

    _st: ReplyState
    _rules: LanguageRules
    _cfg: SegmenterConfig

    # ----------------------------------------------------------------- holds (quotes, ...)

    def _alive(self, holds: list[Hold], at: int) -> bool:
        limit = self._cfg.hold_max_chars
        return any(at - h.pos <= limit for h in holds)

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
                return NEED
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
                st.holds.append(Hold("e", run, pos))
            return j
        if c == "<":
            return self._markup(i, final)
        if c == '"':
            for k in range(len(st.holds) - 1, -1, -1):
                if st.holds[k].kind == "q" and st.holds[k].token == '"':
                    del st.holds[k:]
                    return i + 1
            if prev.isspace() or prev in R.OPENERS or prev in "—–-:" or i == 0:
                st.holds.append(Hold("q", c, pos))
            return i + 1
        if c in R.CLOSING_TO_OPENERS and self._close(c):
            return i + 1
        if c in R.PAIRS:
            if c == "(" and prev in ":;=8" and i > 0:
                return i + 1  # emoticon
            if c == "»" and not (prev.isspace() or i == 0):
                return i + 1
            st.holds.append(Hold("q", c, pos))
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
            return i + 1 if final else NEED
        name = m.group("name").lower()
        if name in R.HOLD_ELEMENTS:
            if m.group("close"):
                for k in range(len(st.holds) - 1, -1, -1):
                    if st.holds[k].kind == "x" and st.holds[k].token == name:
                        del st.holds[k:]
                        break
            elif not m.group("selfclose"):
                st.holds.append(Hold("x", name, st.base + i))
        return m.end()

    # ----------------------------------------------------------------- decisions

    def _first_phrase_armed(self) -> bool:
        return self._cfg.first_phrase and not self._st.emitted

    def _decide_terminator(self, i: int, final: bool) -> Decision | str:
        st, buf, rules = self._st, self._st.buf, self._rules
        n = len(buf)
        no = Decision(False)
        # 1. The run of terminators ("?!", "...", "。」" is run + closer).
        j = i
        while j < n and R.is_terminator(buf[j], rules):
            j += 1
        no.resume = j
        if j == n:
            return no if final else NEED
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
                return NEED  # maybe a closing tag: "Now.</emphasis>"
            if ch == "<" and buf.startswith("</", k):
                close = buf.find(">", k, k + 64)
                if close < 0:
                    if n - k < 64 and not final:
                        return NEED
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
                    return NEED
            break
        if k == n and not final:
            return NEED
        mark_end = k
        # 3. Inside an open quote, bracket, emphasis or markup element: not a boundary.
        if holds and self._alive(holds, st.base + i):
            return no
        # 4. Whitespace after the mark.
        q = k
        while q < n and buf[q].isspace():
            q += 1
        if q == n:
            return no if final else NEED
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
                    return no if final else NEED
                ws = buf[mark_end:q] or " "
        yes = Decision(True, end=q, mark_end=mark_end, resume=j)
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
            return no if final else NEED
        m = buf[r]
        if R.is_terminator(m, rules) or m in ",;:)]}":
            e = r
            while e < n and R.is_terminator(buf[e], rules):
                e += 1
            if e == n and not final:
                return NEED
            if e < n and buf[e].isalpha() and e > r:
                return yes  # the next sentence opens with an ellipsis: "raak. ...en toen"
            return no  # "Dad ! '' ." -- the later mark decides
        if m in "—–-" and m == buf[r]:
            # Dialogue attribution or an aside after a dash: "бар? — деді", "D.C. - Colombia".
            e = r + 1
            while e < n and (buf[e].isspace() or buf[e] in "—–-"):
                e += 1
            if e == n:
                return no if final else NEED
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
                    return NEED
                if marker is not None and _opens_list(marker):
                    return yes
        if m.islower():
            if run == "." and not ellipsis and q == r and mark_end == j:
                # "δούλευε κανένας. το κόστος": a sentence that opens in lowercase after a
                # full word that no abbreviation list knows. Shorter words stay joined:
                # "bałt. jest", "наук. значення" are abbreviations nobody listed.
                left = R.word_before(buf, i)
                if R.is_plain_word(left, rules):
                    word, complete = R.word_after(buf, r)
                    if not complete and not final:
                        return NEED
                    if len(word) >= 2 and word.isalpha():
                        return yes
            return no
        if ellipsis:
            if m == "I" and rules.code == "en":
                word, complete = R.word_after(buf, r)
                if not complete and not final:
                    return NEED
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
        yes = Decision(True, end=k, mark_end=k, resume=j)
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
            return NEED
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
            return NEED
        return yes if word in starters else no

    def _word_starts_chunk(self, start: int) -> bool:
        """Whether the word at ``start`` is the first word of the chunk (after a bullet)."""
        head = self._st.buf[:start]
        return not head.strip() or all(ch in R.BULLETS or ch.isspace() for ch in head)

    def _decide_newline(self, i: int, final: bool) -> Decision | str:
        st, buf = self._st, self._st.buf
        n = len(buf)
        q = i
        while q < n and buf[q].isspace():
            q += 1
        no = Decision(False, resume=q)
        if q == n:
            return no if final else NEED
        if not buf[:i].strip():
            return no
        ws = buf[i:q]
        yes = Decision(True, end=q, mark_end=i)
        if ws.count("\n") >= 2:
            st.holds = [h for h in st.holds if h.kind == "x"]
            return yes
        st.holds = [h for h in st.holds if h.kind != "e"]
        if st.holds and self._alive(st.holds, st.base + i):
            return no
        marker, known = R.list_marker_at(buf, q)
        if not known and not final:
            return NEED
        nxt = buf[q]
        if marker is not None or nxt in R.BULLETS or nxt in "-*+#>|":
            return yes
        return no if nxt.islower() else yes

    def _decide_next_item(self, i: int, final: bool) -> Decision | str | None:
        """At a word start inside a list item: does the next item ("2.", "b)", "• ") begin?"""
        st, buf = self._st, self._st.buf
        if not st.marker_known:
            return None
        bullet, style, value = st.marker  # type: ignore[misc]
        marker, known = R.list_marker_at(buf, i)
        if not known:
            return None if final else NEED
        if marker is None:
            if bullet and buf[i] == bullet[0] and i + 1 < len(buf) and buf[i + 1] != bullet[0]:
                return Decision(True)
            return None
        nxt = R.marker_value(marker)
        if R.is_successor((style, value), nxt) or (bullet and marker.group(0)[0] == bullet[0]):
            return Decision(True)
        return None

    def _decide_clause(self, i: int, final: bool) -> Decision | None | str:
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
            return None if final else NEED
        spaced = q > i + 1
        if (c in R.CLAUSE_MARKS_SPACED or c in "-–") and not spaced:
            return None  # 1,000  3:00  https:  well-known
        if st.holds and self._alive(st.holds, st.base + i):
            return None
        if R.grapheme_len(buf[:i].strip()) < self._cfg.first_phrase_min_chars:
            return None
        return Decision(True, end=q, mark_end=i + 1)

    def _decide_unpunctuated(self, i: int, final: bool) -> Decision | None | str:
        """Thai/Lao: a space between two words of the script separates phrases or sentences."""
        buf = self._st.buf
        n = len(buf)
        q = i
        while q < n and buf[q].isspace():
            q += 1
        if q == n:
            return None if final else NEED
        if not R.is_unpunctuated_script(buf[q]):
            return None
        size = R.grapheme_len(buf[:i].strip())
        if size >= self._cfg.unpunctuated_min_chars:
            return Decision(True, end=q, mark_end=i)
        if self._first_phrase_armed() and size >= self._cfg.first_phrase_min_chars:
            return Decision(False, end=q, mark_end=i)
        return None


def _opens_list(marker) -> bool:
    """After a sentence, only a number, "(x)", "x)" or "a."/"i." start a list item."""
    style, value = R.marker_value(marker)
    if style.startswith("(") or style.endswith(")") or value.isdigit():
        return True
    return value.lower() in ("a", "i")
