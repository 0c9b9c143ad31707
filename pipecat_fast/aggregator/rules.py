"""Character classes and text tests behind the segmenter's boundary decisions.

Pure functions over a string and an index; no state. The segmenter in ``core.py`` calls them
while it scans a reply, and decides from their answers whether a mark ends a chunk.
"""

from __future__ import annotations

import re
import unicodedata

import regex

from pipecat_fast.aggregator.langdata import LanguageRules

# Marks that end a sentence whatever follows them (no letter case to consult): CJK full stop,
# exclamation and question marks, Devanagari danda, Arabic question mark and Urdu full stop,
# Ethiopic, Myanmar, Khmer and Tibetan full stops, Armenian full stop, Greek question mark.
SCRIPT_TERMINATORS = frozenset("。！？｡．।॥؟۔።፧፨။។៕།༎։\u037e")
# Armenian exclamation and question marks sit on the stressed word, inside it ("Ի՞նչ"); they end
# a sentence only when no letter follows.
ARMENIAN_MARKS = frozenset("՜՞")
LATIN_EXCLAMATIONS = frozenset("!?‼⁇⁈⁉")
ELLIPSIS = "…"

# Clause marks: where a first phrase or an over-long chunk may be cut.
CLAUSE_MARKS_SPACED = frozenset(",;:")  # need whitespace after them
CLAUSE_MARKS_UNSPACED = frozenset("，、；：،؛၊·՝\u0387")  # script marks, no whitespace needed
DASHES = frozenset("—–")

# Characters that may follow a terminator and still belong to its sentence.
CLOSERS = frozenset("\"'”’»«›‹“」』】》〉）］｝〕〗〙〛)]}`*_~")
# Invisible format characters (bidi controls, zero-width) that belong to what precedes them.
FORMAT_CHARS = frozenset(
    "\u200b\u200c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2060\u2066\u2067\u2068\u2069\ufeff"
)
# Characters that may open the next sentence before its first letter.
OPENERS = frozenset("\"'“‘«‹„‚「『【《〈（［｛〔([{¿¡*_`") | FORMAT_CHARS
BULLETS = frozenset("•⁃▪◦‣●○■□➢➤►")

# Quotes and brackets that hold a sentence together until they close (a terminator inside
# them does not end the chunk). Straight double quotes and » are resolved by position.
PAIRS = {
    "“": "”",
    "„": "“”",
    "«": "»",
    "»": "«",
    "‹": "›",
    "「": "」",
    "『": "』",
    "《": "》",
    "〈": "〉",
    "【": "】",
    "（": "）",
    "［": "］",
    "｛": "｝",
    "〔": "〕",
    "(": ")",
    "[": "]",
    "{": "}",
    '"': '"',
}
CLOSING_TO_OPENERS: dict[str, str] = {}
for _o, _cs in PAIRS.items():
    for _c in _cs:
        CLOSING_TO_OPENERS.setdefault(_c, "")
        CLOSING_TO_OPENERS[_c] += _o

# Inline speech-markup elements whose content must stay in one chunk (a word spelled out, a
# pronunciation, an emphasised phrase). Container elements (<speak>, <p>, <s>, <voice>,
# <prosody>, ...) may wrap a whole reply, so they hold nothing; every tag stays whole anyway.
HOLD_ELEMENTS = frozenset("spell say-as phoneme sub emphasis w em strong b i u".split())

_LIST_MARKER = regex.compile(
    r"(?:[•⁃▪◦‣●○■□➢➤►]\s*)?"  # optional bullet
    r"(?:\((?P<p>\d{1,3}|[a-zA-Z]|[ivxlcIVXLC]{1,6})\)"  # (a) (12) (iv)
    r"|(?P<n>\d{1,3}|[a-zA-Z]|[ivxlcIVXLC]{1,6})(?P<s>\.\)|\.|\))"  # 1. 1) 1.) a. iv)
    r")(?=[ \t])"
)
_ROMAN = ("i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x", "xi", "xii")
_URLISH = re.compile(r"(?:[a-z][a-z0-9+.-]*:/|www\.|@)", re.IGNORECASE)
_NUMBERISH = re.compile(r"^[$€£¥₹%#+-]?\d[\d.,:/'’]*%?$")
_ABBR_CHAIN = re.compile(r"^(?:\w{1,3}\.)+\w{1,3}$")
ROMAN_NUMERAL = re.compile(r"^[IVXLC]{1,6}$")
_GRAPHEME = regex.compile(r"\X")
_CITATION = re.compile(r"\[\d{1,3}(?:[-–,]\d{1,3})*\]")


def is_terminator(ch: str, rules: LanguageRules) -> bool:
    """Whether ``ch`` may end a sentence (before context is checked)."""
    return (
        ch == "."
        or ch == ELLIPSIS
        or ch in LATIN_EXCLAMATIONS
        or ch in SCRIPT_TERMINATORS
        or ch in ARMENIAN_MARKS
        or ch in rules.extra_terminators
    )


def is_caseless_letter(ch: str) -> bool:
    """A letter of a script without case (CJK, Arabic, Hebrew, Indic, Thai, ...)."""
    return ch.isalpha() and not ch.isupper() and not ch.islower()


def is_unspaced_script(ch: str) -> bool:
    """CJK, kana and hangul-free scripts that write sentences without spaces between words."""
    o = ord(ch)
    return (
        0x3040 <= o <= 0x30FF  # kana
        or 0x3400 <= o <= 0x4DBF
        or 0x4E00 <= o <= 0x9FFF  # CJK ideographs
        or 0xF900 <= o <= 0xFAFF
        or 0x20000 <= o <= 0x2FA1F
    )


def is_unpunctuated_script(ch: str) -> bool:
    """Thai and Lao: sentences are separated by a space, not by a mark."""
    o = ord(ch)
    return 0x0E00 <= o <= 0x0EFF


def word_before(text: str, i: int) -> str:
    """The run of non-space characters that ends right before index ``i``, openers stripped.

    ``word_before("Hello Mr. X", 8) == "Mr"``; ``word_before('said ("U.S', 11) == "U.S"``.
    """
    j = i
    while j > 0 and not text[j - 1].isspace():
        j -= 1
    word = "".join(ch for ch in text[j:i] if ch not in FORMAT_CHARS)
    return word.lstrip("".join(OPENERS | BULLETS))


def word_after(text: str, i: int) -> tuple[str, bool]:
    """The word starting at ``i`` (letters, digits, apostrophes) and whether it is complete.

    Complete means a character that cannot continue the word follows it in ``text``.
    """
    j = i
    n = len(text)
    while j < n and (text[j].isalnum() or text[j] in "'’-" or _is_mark(text[j])):
        j += 1
    return text[i:j], j < n


def token_after(text: str, i: int) -> tuple[str, bool]:
    """The run of non-space characters starting at ``i`` and whether whitespace ends it."""
    j = i
    n = len(text)
    while j < n and not text[j].isspace():
        j += 1
    return text[i:j], j < n


def _is_mark(ch: str) -> bool:
    # Combining marks (Mn, Mc, Me) belong to the letter before them.
    return unicodedata.category(ch).startswith("M")


def looks_like_url(word: str) -> bool:
    """A URL, an e-mail address or a ``www.`` domain."""
    return bool(_URLISH.search(word))


def looks_like_number(word: str) -> bool:
    """A number, price, time, date or version: ``600``, ``$100.00``, ``1,000``, ``3:00``."""
    return bool(_NUMBERISH.match(word))


def abbreviation_kind(word: str, rules: LanguageRules) -> str | None:
    """Classify the word before a period.

    Returns:
        ``"title"`` (Dr, Mr: never ends a sentence before a capital), ``"initial"`` (one letter),
        ``"abbr"`` (a known abbreviation or a letter chain such as ``U.S`` or ``a.m``),
        ``"numeric"`` (an abbreviation that precedes numbers, such as ``No``), or None.
    """
    if not word:
        return None
    if ("'" in word or "’" in word) and word[-1].isalpha():
        # Elided article or preposition: l'Ing., dell'Avv., d'Av.
        tail = re.split(r"['’]", word)[-1]
        whole = abbreviation_kind(tail, rules)
        if whole is not None:
            return whole
    low = word.lower()
    if low in rules.titles:
        return "title"
    if word[0].isalpha() and _single_grapheme(word):
        return "initial"  # a letter, or one syllable of an abugida (Malayalam "ഡോ")
    if low in rules.abbreviations:
        return "abbr"
    if _ABBR_CHAIN.match(word) and not word.replace(".", "").isdigit():
        return "abbr"
    if low in rules.numeric:
        return "numeric"
    if (
        rules.vowel_final
        and len(word) >= 3
        and word.isalpha()
        and word[1:].islower()
        and low[-1] not in "aeiouàèéìíòóùy"
    ):
        return "abbr"
    return None


PLAIN_WORD_MIN_LETTERS = 5
"""Shortest word whose period ends a sentence before a lowercase word (4-letter abbreviations such
as ``bałt.``, ``наук.``, ``град.`` occur in the shared SBD suites; 5 loses none of them)."""


def is_plain_word(word: str, rules: LanguageRules) -> bool:
    """A lowercase word of at least ``PLAIN_WORD_MIN_LETTERS`` letters that is no abbreviation.

    ``is_plain_word("κανένας", el) is True``; ``"approx"``, ``"U.S"`` and ``"Paris"`` are not.
    """
    return (
        len(word) >= PLAIN_WORD_MIN_LETTERS
        and word.isalpha()
        and word.islower()
        and abbreviation_kind(word, rules) is None
    )


def _single_grapheme(word: str) -> bool:
    return len(word) == 1 or (len(word) <= 8 and sum(1 for _ in _GRAPHEME.finditer(word)) == 1)


def list_marker_at(text: str, i: int) -> tuple[regex.Match[str] | None, bool]:
    """A list marker (``1.``, ``2)``, ``a.``, ``(iv)``, ``• 3.``) starting at index ``i``.

    Returns:
        The match (or None) and whether ``text`` was long enough to tell.
    """
    m = _LIST_MARKER.match(text, i, partial=True)
    if m is None:
        return None, True
    if m.partial:
        return None, False
    return m, True


def marker_value(m: re.Match[str]) -> tuple[str, str]:
    """(style, value) of a list marker match: style is ``"n."``, ``"a)"``, ``"(i)"``, ..."""
    if m.group("p") is not None:
        val = m.group("p")
        return ("(" + _value_class(val) + ")", val)
    val = m.group("n")
    return (_value_class(val) + m.group("s"), val)


def _value_class(val: str) -> str:
    if val.isdigit():
        return "n"
    if val.lower() in _ROMAN and len(val) > 1:
        return "r"
    return "a"


def is_successor(prev: tuple[str, str], nxt: tuple[str, str]) -> bool:
    """Whether list marker ``nxt`` follows ``prev`` (1. -> 2., a) -> b), (ii) -> (iii))."""
    (ps, pv), (ns, nv) = prev, nxt
    if pv.lower() in _ROMAN and nv.lower() in _ROMAN and ps[:1] == ns[:1] and ps[-1] == ns[-1]:
        if _ROMAN.index(nv.lower()) == _ROMAN.index(pv.lower()) + 1:
            return True
    if ps != ns:
        return False
    if pv.isdigit() and nv.isdigit():
        return int(nv) == int(pv) + 1
    if len(pv) == 1 and len(nv) == 1 and pv.isalpha() and nv.isalpha():
        return ord(nv) == ord(pv) + 1
    return False


def citation_at(text: str, i: int) -> int:
    """End index of a run of citation marks (``[1]``, ``[7][8]``) starting at ``i``, else ``i``."""
    j = i
    while True:
        m = _CITATION.match(text, j)
        if not m:
            return j
        j = m.end()


def grapheme_len(text: str) -> int:
    """Number of extended grapheme clusters in ``text``."""
    return sum(1 for _ in _GRAPHEME.finditer(text))
