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
_RECORD_OWNERS = {
    "user",
    "client",
    "member",
    "account",
    "guest",
    "student",
    "player",
    "lead",
    "subscriber",
    "visitor",
    "buyer",
    "tenant",
    "candidate",
    "applicant",
    "interviewee",
    "debtor",
    "borrower",
    "learner",
    "prospect",
    "recipient",
}
_RECORD_WORDS = {
    "name",
    "info",
    "data",
    "profile",
    "details",
    "record",
    "records",
    "context",
    "memory",
    "memories",
    "preferences",
    "facts",
    "summary",
    "notes",
    "address",
    "location",
    "plan",
    "orders",
    "balance",
}
_RECORD_ALONE = {"profile", "crm", "memories", "preferences", "user_profile"}
"""Per-caller records looked up at call start (a CRM row, a user profile, stored memories).

Not ``userdata``: LiveKit's ``AgentSession(userdata=...)``/``RunContext.userdata`` is the
app's own session-state object (an order, a menu, flags), so what it holds is judged by
its fields' names (``userdata.customer_name`` is caller data, ``userdata.drink_items``
is not)."""
_PERSON_DOCUMENTS = {"resume", "cv"}
"""A person's own document, named as a whole (``resume``, ``candidate_cv``): per caller."""
_DEPLOYMENT_OWNERS = {"agent", "assistant", "bot", "workflow", "persona", "template", "tenant"}
_DEPLOYMENT_KEYS = {"id", "ids", "name", "slug", "key", "type", "config"}
"""``agent_id``, ``assistant_name``, ``workflow_id``: which configured agent a call is for.
Read from a call's metadata, it selects a deployment's stored configuration (its prompt,
its tools), the same for every call of that agent: not per-caller data."""


_BUSINESS_OWNERS = frozenset(
    {
        "restaurant",
        "business",
        "company",
        "clinic",
        "practice",
        "store",
        "shop",
        "office",
        "hotel",
        "organization",
        "organisation",
        "org",
        "brand",
        "branch",
        "tenant",
        "firm",
        "agency",
        "dealership",
    }
)
"""Objects that hold the deployment's own business (its phone, address, name, hours)."""


def names_business(word: str) -> bool:
    """Whether a word names the deployment's own business (``restaurant``, ``clinic``)."""
    return word in _BUSINESS_OWNERS


def names_deployment(identifier: str) -> bool:
    """Whether a key names the configured agent a call is routed to (``agent_id``)."""
    parts = words(identifier)
    return len(parts) == 2 and parts[0] in _DEPLOYMENT_OWNERS and parts[1] in _DEPLOYMENT_KEYS


_EARLIER_WORDS = {"last", "previous", "prev", "prior", "past"}
_EARLIER_RECORDS = {
    "session",
    "sessions",
    "checkin",
    "checkins",
    "visit",
    "visits",
    "context",
    "summary",
    "recap",
    "entry",
    "notes",
    "memory",
}
"""What is kept from the caller's earlier sessions (``last_session_summary``,
``previous_context``, ``last_checkin``): read per caller when the call starts, so per
session. The earlier word is needed: a ``summary`` or ``context`` alone may be anything."""
_DETECTED_WORDS = {"detected"}
"""What a detector found in the caller's speech (a language, an emotion, an intent): it
changes with the caller, so per session at least (``self.language_detector.dominant_language``,
``detected_language``)."""
_SETTING_LAST = {"language", "languages", "lang", "locale", "timezone", "tz", "dialect"}
"""A name ending in one of these is a setting chosen from a short list (``caller_language``,
``customer_locale``): calls with the same choice share the whole prompt, so it is configured
per deployment or per language, not per caller (what a detector found is another matter)."""
_CONFIG_WORDS = {
    "default",
    "defaults",
    "packaged",
    "builtin",
    "preset",
    "presets",
    "sample",
    "example",
    "examples",
    "placeholder",
    "dummy",
    "fake",
    "static",
    "fixed",
}
"""Words that make a name a shipped or configured value, the same for every call
(``default_profile``, ``example_transcript``, ``read_packaged_default_profile()``): one
value for every caller, so the rest of the name says nothing per call."""
_GAME_WORDS = {"round", "score", "lives", "attempts", "guesses", "streak", "riddle", "puzzle"}
"""Per-session game state: a round number, a score, the current riddle."""
_TIME_WORDS = {"time", "now", "timestamp", "datetime", "clock", "hour", "minute", "second"}
_NOT_A_CLOCK = {
    "zone",
    "limit",
    "budget",
    "window",
    "format",
    "unit",
    "units",
    "response",
    "wait",
    "delay",
    "max",
    "min",
    "slot",
    "slots",
    "opening",
    "closing",
}
"""Words that make a time word a setting or a static value, not the clock."""
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
_HISTORY_WORDS = {"history", "transcript", "conversation", "logs", "turns"}
_TURN_WORDS = {
    "message",
    "utterance",
    "question",
    "query",
    "input",
    "transcription",
    "text",
    "prompt_text",
}
"""What a caller just said (or the turn being checked): new on every request. Only whole
names (``text``, ``user_message``, ``last_utterance``), never parts of constants."""
_TURN_OWNERS = {"user", "last", "latest", "current", "new", "caller", "assistant", "bot"}
_HISTORY_NEUTRAL = {"json", "text", "str", "recent", "last", "previous", "past", "chat", "all"}


def classify_name(identifier: str, constant: bool = False) -> tuple[str, Frequency, str] | None:
    """Guess what kind of volatile value a name holds.

    Args:
        identifier: A placeholder or variable name, any case style.
        constant: True for a code identifier (not a template placeholder): an ALL_CAPS
            name is then a constant by convention and says nothing volatile.

    Returns:
        ``(rule_id, frequency, noun)``, the noun saying what the name suggests ("a date"),
        or ``None`` when the name says nothing volatile.
        Caller data wins over clock words, so ``appointment_time`` is caller data.
    """
    w = words(identifier)
    if not w:
        return None
    if constant and identifier.isupper() and len(identifier) > 1:
        return None  # ALL_CAPS: a constant by convention (Python and JS), fixed at import
    ws = set(w)
    low = "_".join(w)
    if w[-1] in _SETTING_LAST and not ws & _DETECTED_WORDS:
        return None  # a language or locale chosen from a short list: one prompt per choice
    if ws & _CONFIG_WORDS:
        return None  # a default, a preset, an example: the same for every call
    if ws & _CALLER_WORDS or low in _CALLER_EXACT:
        return "CB103", Frequency.SESSION, "per-caller data"
    if w[-1] in ("id", "sid") and ws & _ID_OWNERS and "tool" not in ws:
        return "CB103", Frequency.SESSION, "a per-call id"
    if (ws & _RECORD_OWNERS and ws & _RECORD_WORDS) or ws & _RECORD_ALONE or low in _RECORD_ALONE:
        return "CB103", Frequency.SESSION, "a per-caller record"
    if w[-1] in _PERSON_DOCUMENTS:
        return "CB103", Frequency.SESSION, "a per-caller record"
    if ws & _DETECTED_WORDS:
        return "CB103", Frequency.SESSION, "what was detected in the caller's speech"
    if ws & _EARLIER_WORDS and ws & _EARLIER_RECORDS and not ws & _HISTORY_WORDS:
        return "CB103", Frequency.SESSION, "a record of the caller's earlier sessions"
    if ws & _GAME_WORDS and not ws & {"trip", "robin"}:
        return "CB103", Frequency.SESSION, "per-session game state"
    if ws & _RANDOM_WORDS:
        return "CB102", Frequency.REQUEST, "a random value"
    if ws & _TIME_WORDS and not ws & _NOT_A_CLOCK:
        return "CB101", Frequency.REQUEST, "a time of day"
    if ws & _DATE_WORDS:
        return "CB101", Frequency.DAY, "a date"
    if ws & _FETCH_WORDS:
        return "CB104", Frequency.SESSION, "fetched content"
    if ws & _HISTORY_WORDS or ("messages" in ws and ws <= _HISTORY_NEUTRAL | {"messages"}):
        return "CB105", Frequency.REQUEST, "conversation history"
    if w[-1] in _TURN_WORDS and (len(w) == 1 or set(w[:-1]) <= _TURN_OWNERS):
        return "CB105", Frequency.REQUEST, "the latest turn's text"
    return None
