"""Detectors for volatile content in prompt text: pure functions, text in, spans out.

Each detector returns :class:`Span` objects; :mod:`pipecat_fast.lint.prompt` grades them by
position and turns them into findings. Patterns are Unicode-aware (``regex``), cover ISO,
English and CJK date/time forms, and ask for a cue word before content that is also
common as static text (a bare ``9:00`` opening hour, an example phone number).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass

import regex

from pipecat_fast.lint.findings import Frequency
from pipecat_fast.lint.placeholders import (
    SIMPLE_PLACEHOLDERS,
    classify_placeholder,
    find_placeholders,
)

MAX_SPANS_PER_DETECTOR = 200
"""Stop after this many hits per detector, so a huge file cannot flood memory or output."""

CUE_WINDOW = 48
"""Characters before a match searched for a cue word."""


@dataclass(frozen=True)
class Span:
    """A stretch of prompt text a detector flagged.

    Attributes:
        rule: Rule id (``"CB101"``...).
        start: Start character offset.
        end: End character offset (exclusive).
        frequency: How often the content is expected to change.
        what: Short noun phrase for messages (``"timestamp"``).
        confident: False when the text could as well be static (a date with no "today");
            such spans are reported as info whatever their position.
        severity: Fixed severity label for non-volatile rules (placeholders), else ``None``.
    """

    rule: str
    start: int
    end: int
    frequency: Frequency
    what: str
    confident: bool = True
    severity: str | None = None


_F = regex.IGNORECASE | regex.VERSION1
_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_WEEKDAYS = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"

_CLOCK_CUE = regex.compile(
    r"(?:time|now|current|currently|clock|as of|it is|it's|timestamp|today|date|heure|hora|"
    r"uhr|zeit|ora|時|現在|시각|시간|время|الوقت|זמן)",
    _F,
)
_DATE_CUE = regex.compile(
    r"(?:today|current date|date is|date:|now|heute|aujourd|hoy|oggi|vandaag|hoje|今日|本日|"
    r"今天|오늘|сегодня|اليوم|היום)",
    _F,
)
# A cue is a whole word or a camelCase/snake_case part ("call_id", "sessionId"), never the inside
# of a longer word ("function-calling", "recall", "video").
_ID_CUE = regex.compile(
    r"(?<!(?-i:[a-z]))(?:session|request|call|conversation|trace|uuid|id|identifier)s?(?!(?-i:[a-z]))",
    _F,
)
_CALLER_CUE = regex.compile(
    r"(?:caller|calling from|customer|patient|client|user'?s|phone number is|number is|"
    r"email is|e-mail is|contact|speaking with|talking to|callback|reach (?:them|him|her) at)",
    _F,
)
_EXAMPLE_CUE = regex.compile(
    r"(?:e\.g\.|example|for instance|such as|format|i\.e\.|→|->|like\s*['\"]|spoken)", _F
)
_HISTORY_CUE = regex.compile(
    r"(?:history|transcript|conversation so far|previous messages|chat log|prior turns)", _F
)

_ISO_DATETIME = regex.compile(
    r"(?<!\d)\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])[T ](?:[01]\d|2[0-3]):[0-5]\d"
    r"(?::[0-5]\d(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?(?!\d)"
)
_TIME_SECONDS = regex.compile(r"(?<![\d:])(?:[01]?\d|2[0-3]):[0-5]\d:[0-5]\d(?:[.,]\d+)?(?![\d:])")
_TIME_MINUTES = regex.compile(
    r"(?<![\d:])(?:[01]?\d|2[0-3]):[0-5]\d(?:\s?[ap]\.?m\.?)?(?![\d:])", _F
)
_CJK_TIME = regex.compile(r"\d{1,2}\s?[時时시]\s?\d{1,2}\s?[分분](?:\s?\d{1,2}\s?[秒초])?")
_ISO_DATE = regex.compile(r"(?<![\d-])\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])(?![\d-])")
_LONG_DATE = regex.compile(
    rf"(?:{_WEEKDAYS},?\s+)?(?:{_MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}|"
    rf"\d{{1,2}}(?:st|nd|rd|th)?\.?\s+(?:of\s+)?{_MONTHS},?\s+\d{{4}})",
    _F,
)
_NUMERIC_DATE = regex.compile(r"(?<![\d/.])\d{1,2}[/.]\d{1,2}[/.]\d{4}(?![\d/.])")
_CJK_DATE = regex.compile(r"\d{4}\s?[年년]\s?\d{1,2}\s?[月월]\s?\d{1,2}\s?[日일]")
_WEEKDAY_TODAY = regex.compile(rf"(?:today is|it is|it's)\s+{_WEEKDAYS}", _F)
_EPOCH = regex.compile(r"(?<![\d.+])1[5-9]\d{8}(?:\d{3})?(?:\.\d+)?(?![\d])")
_UUID = regex.compile(
    r"(?<![0-9A-Fa-f-])[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-"
    r"[0-9A-Fa-f]{12}(?![0-9A-Fa-f-])"
)
_LONG_HEX = regex.compile(r"(?<![0-9A-Za-z])[0-9a-f]{32,}(?![0-9A-Za-z])")
_PHONE = regex.compile(
    r"(?<![\w+])(?:\+\d[\d\s().-]{6,18}\d|\(?\d{3}\)?[\s.-]\d{3}[\s.-]\d{4})(?![\w])"
)
_EMAIL = regex.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_CALLER_NAME = regex.compile(
    r"(?:(?:caller|customer|patient|user|client)(?:'s|’s)?\s+name\s+is|"
    r"you are (?:speaking|talking) (?:with|to))\s+"
    # The name itself is matched case-sensitively: capitalised words ("Maria Lopez"),
    # not "someone over Voice".
    r"(?-i:(\p{Lu}[\p{L}'’-]+(?:\s+\p{Lu}[\p{L}'’-]+)*))",
    _F,
)
_ROLE_LINE = regex.compile(
    r"^[ \t]*(user|assistant|human|ai|bot|agent|customer|caller)[ \t]*:[ \t]*\S", _F | regex.M
)
_JSON_ROLE = regex.compile(r'"role"\s*:\s*"(?:user|assistant)"')
_PLACEHOLDERS = (
    (regex.compile(r"\{\{\s*([A-Za-z_][\w.]*)\s*\}\}"), "error"),
    *SIMPLE_PLACEHOLDERS,
)


def _before(text: str, start: int, window: int = CUE_WINDOW) -> str:
    return text[max(0, start - window) : start]


def _cued(text: str, start: int, cue: regex.Pattern, window: int = CUE_WINDOW) -> bool:
    return cue.search(_before(text, start, window)) is not None


def _spans(pattern: regex.Pattern, text: str):
    for i, m in enumerate(pattern.finditer(text)):
        if i >= MAX_SPANS_PER_DETECTOR:
            return
        yield m


_QUOTES = "\"'“”‘’`"


def _quoted(text: str, start: int, end: int) -> bool:
    """True for a value written in quotes (`Times: "9:30 a.m."`): an example of a format."""
    return start > 0 and end < len(text) and text[start - 1] in _QUOTES and text[end] in _QUOTES


def clock_spans(text: str) -> list[Span]:
    """Timestamps, times of day and dates (CB101); quoted ones are examples (info)."""
    return [
        s
        if not _quoted(text, s.start, s.end)
        else Span(s.rule, s.start, s.end, s.frequency, s.what, confident=False)
        for s in _clock_spans(text)
    ]


def _clock_spans(text: str) -> list[Span]:
    out: list[Span] = []
    for m in _spans(_ISO_DATETIME, text):
        out.append(Span("CB101", m.start(), m.end(), Frequency.REQUEST, "timestamp"))
    for m in _spans(_TIME_SECONDS, text):
        out.append(Span("CB101", m.start(), m.end(), Frequency.REQUEST, "time of day"))
    for m in _spans(_CJK_TIME, text):
        out.append(Span("CB101", m.start(), m.end(), Frequency.REQUEST, "time of day"))
    for m in _spans(_TIME_MINUTES, text):
        if _cued(text, m.start(), _CLOCK_CUE) and not _cued(text, m.start(), _EXAMPLE_CUE, 24):
            out.append(Span("CB101", m.start(), m.end(), Frequency.REQUEST, "time of day"))
    for m in _spans(_EPOCH, text):
        if _cued(text, m.start(), _CLOCK_CUE):
            out.append(Span("CB101", m.start(), m.end(), Frequency.REQUEST, "Unix timestamp"))
    for pattern in (_ISO_DATE, _LONG_DATE, _NUMERIC_DATE, _CJK_DATE):
        for m in _spans(pattern, text):
            cued = _cued(text, m.start(), _DATE_CUE) or regex.match(_WEEKDAYS, m.group(), _F)
            out.append(
                Span("CB101", m.start(), m.end(), Frequency.DAY, "date", confident=bool(cued))
            )
    for m in _spans(_WEEKDAY_TODAY, text):
        out.append(Span("CB101", m.start(), m.end(), Frequency.DAY, "weekday"))
    return out


def random_spans(text: str) -> list[Span]:
    """UUIDs and long hex ids (CB102); confident only next to an id/session cue."""
    out: list[Span] = []
    for pattern in (_UUID, _LONG_HEX):
        for m in _spans(pattern, text):
            cued = _cued(text, m.start(), _ID_CUE)
            out.append(Span("CB102", m.start(), m.end(), Frequency.SESSION, "id", confident=cued))
    return out


def caller_spans(text: str) -> list[Span]:
    """Caller phone numbers, emails and names after a caller cue, not in an example (CB103)."""
    out: list[Span] = []
    for pattern, what in ((_PHONE, "phone number"), (_EMAIL, "email address")):
        for m in _spans(pattern, text):
            if _cued(text, m.start(), _CALLER_CUE, 60) and not _cued(
                text, m.start(), _EXAMPLE_CUE, 60
            ):
                out.append(Span("CB103", m.start(), m.end(), Frequency.SESSION, what))
    for m in _spans(_CALLER_NAME, text):
        out.append(Span("CB103", m.start(1), m.end(1), Frequency.SESSION, "caller name"))
    return out


def history_spans(text: str) -> list[Span]:
    """A pasted conversation: role-prefixed lines under a history heading, or JSON messages."""
    out: list[Span] = []
    roles = list(_spans(_ROLE_LINE, text))
    if len(roles) >= 2 and len({m.group(1).lower() for m in roles}) >= 2:
        first = roles[0]
        heading = _before(text, first.start(), 200)
        if _HISTORY_CUE.search(heading) and not _EXAMPLE_CUE.search(heading[-80:]):
            out.append(
                Span("CB105", first.start(), roles[-1].end(), Frequency.REQUEST, "conversation")
            )
    json_roles = list(_spans(_JSON_ROLE, text))
    if len(json_roles) >= 2:
        out.append(
            Span(
                "CB105",
                json_roles[0].start(),
                json_roles[-1].end(),
                Frequency.REQUEST,
                "JSON messages",
            )
        )
    return out


def placeholder_spans(
    text: str,
    rendered: bool,
    bound: Mapping[str, str] | None = None,
    double_only: bool = False,
) -> list[Span]:
    """Template placeholders.

    Args:
        text: Prompt text.
        rendered: True when ``text`` is what the model receives: every placeholder left in
            it is unfilled (CB201). False for a template (or unknown): a placeholder that
            something volatile fills (the engine's clock, a platform's per-call variable,
            a variable bound per call in the tree, a name that says clock/caller/fetched/
            history) marks where volatile content will land.
        bound: Variables the linted tree binds per call
            (:func:`pipecat_fast.lint.placeholders.bound_variables`).
        double_only: See :func:`pipecat_fast.lint.placeholders.find_placeholders`.
    """
    out: list[Span] = []
    if rendered:
        for pattern, level in _PLACEHOLDERS:
            for m in _spans(pattern, text):
                out.append(
                    Span(
                        "CB201",
                        m.start(),
                        m.end(),
                        Frequency.PROCESS,
                        "placeholder",
                        severity=level,
                    )
                )
        return out
    for ph in find_placeholders(text, double_only):
        guess = classify_placeholder(ph, bound)
        if guess:
            rule, freq, _why = guess
            out.append(Span(rule, ph.start, ph.end, freq, f"placeholder for {_noun(rule)}"))
    return out


def _noun(rule: str) -> str:
    return {
        "CB101": "the time/date",
        "CB102": "a random id",
        "CB103": "caller data",
        "CB104": "fetched content",
        "CB105": "conversation history",
    }.get(rule, "a value")


DETECTORS = (clock_spans, random_spans, caller_spans, history_spans)


def detect(
    text: str,
    rendered: bool = False,
    bound: Mapping[str, str] | None = None,
    double_only: bool = False,
) -> list[Span]:
    """All spans in ``text``, overlaps resolved in favour of the earlier-listed detector.

    Args:
        text: Prompt text.
        rendered: See :func:`placeholder_spans`.
        bound: See :func:`placeholder_spans`.
        double_only: See :func:`placeholder_spans`.

    Returns:
        Non-overlapping spans sorted by start offset.
    """
    candidates: list[Span] = placeholder_spans(text, rendered, bound, double_only)
    for detector in DETECTORS:
        candidates.extend(detector(text))
    taken: list[Span] = []  # sorted by start, non-overlapping
    starts: list[int] = []
    for span in candidates:  # first come, first kept: placeholders, then detector order
        i = bisect_left(starts, span.start)
        if i < len(taken) and taken[i].start < span.end:
            continue
        if i > 0 and taken[i - 1].end > span.start:
            continue
        taken.insert(i, span)
        starts.insert(i, span.start)
    return taken
