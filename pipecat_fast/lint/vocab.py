"""What a name says about the value behind it: clock, caller data, fetched text, history.

Used for template placeholders (``{{CURRENT_TIME}}``, ``{caller_name}``) and for Python
names the source mode cannot trace to a value (function parameters, attributes of objects
it cannot see). Word lists are ours; they are deliberately short, so a miss is silent
rather than a false alarm.
"""

from __future__ import annotations

import re

from pipecat_fast.lint.findings import Frequency

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def words(identifier: str) -> list[str]:
    """Lower-case words of an identifier: ``callerPhone_number`` -> caller, phone, number."""
    parts = re.split(r"[^0-9A-Za-z]+", identifier)
    out: list[str] = []
    for part in parts:
        out.extend(w.lower() for w in _CAMEL.split(part) if w)
    return out


_CALLER_WORDS = {
    "caller",
    "callee",
    "phone",
    "customer",
    "patient",
    "participant",
    "email",
    "appointment",
    "dial",
    "contact",
    "msisdn",
}
_CALLER_EXACT = {
    "first_name",
    "last_name",
    "full_name",
    "user_name",
    "username",
    "from_number",
    "to_number",
    "call_sid",
}
_ID_OWNERS = {
    "user",
    "client",
    "session",
    "call",
    "caller",
    "customer",
    "account",
    "room",
    "participant",
    "conversation",
    "order",
    "patient",
}
_TIME_WORDS = {"time", "now", "timestamp", "datetime", "clock", "hour", "minute", "second"}
_DATE_WORDS = {"date", "today", "weekday", "tomorrow", "yesterday"}
_RANDOM_WORDS = {"uuid", "guid", "nonce", "random", "rand", "salt"}
_FETCH_WORDS = {
    "fetch",
    "fetched",
    "scrape",
    "scraped",
    "crawl",
    "crawled",
    "download",
    "downloaded",
    "article",
    "search",
    "retrieve",
    "retrieved",
    "webpage",
    "browse",
}
_HISTORY_WORDS = {"history", "transcript", "conversation"}
_HISTORY_NEUTRAL = {"json", "text", "str", "recent", "last", "previous", "past", "chat", "all"}


def classify_name(identifier: str) -> tuple[str, Frequency, str] | None:
    """Guess what kind of volatile value a name holds.

    Args:
        identifier: A placeholder or variable name, any case style.

    Returns:
        ``(rule_id, frequency, noun)``, the noun saying what the name suggests ("a date"),
        or ``None`` when the name says nothing volatile.
        Caller data wins over clock words, so ``appointment_time`` is caller data.
    """
    w = words(identifier)
    if not w:
        return None
    ws = set(w)
    low = "_".join(w)
    if ws & _CALLER_WORDS or low in _CALLER_EXACT:
        return "CB103", Frequency.SESSION, "per-caller data"
    if w[-1] in ("id", "sid") and ws & _ID_OWNERS and "tool" not in ws:
        return "CB103", Frequency.SESSION, "a per-call id"
    if ws & _RANDOM_WORDS:
        return "CB102", Frequency.REQUEST, "a random value"
    if ws & _TIME_WORDS:
        return "CB101", Frequency.REQUEST, "a time of day"
    if ws & _DATE_WORDS:
        return "CB101", Frequency.DAY, "a date"
    if ws & _FETCH_WORDS:
        return "CB104", Frequency.SESSION, "fetched content"
    if ws & _HISTORY_WORDS or ("messages" in ws and ws <= _HISTORY_NEUTRAL | {"messages"}):
        return "CB105", Frequency.REQUEST, "conversation history"
    return None
