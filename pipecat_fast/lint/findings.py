"""What a lint finding is, the rule registry, and how severity is graded.

Severity grows with how early volatile content sits in the cached prefix and how often it
changes. Both scales and the grid that combines them live here, so every rule grades the
same way and the docs can print the grid from one place.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import IntEnum, StrEnum


class Severity(IntEnum):
    """How bad a finding is; ordered so that ``max()`` picks the worst."""

    INFO = 1
    WARNING = 2
    ERROR = 3

    @property
    def label(self) -> str:
        """Lower-case name used in every output format (``"error"``...)."""
        return self.name.lower()

    @classmethod
    def parse(cls, value: str) -> Severity:
        """Parse ``"error"``, ``"warning"`` or ``"info"`` (case-insensitive).

        Raises:
            ValueError: On any other value.
        """
        try:
            return cls[value.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {value!r}: use error, warning or info") from None


class Frequency(IntEnum):
    """How often a value changes; higher changes more often (busts the cache more).

    Clock values sit where their resolution puts them: a date (``%A, %B %d``) changes once
    a day, ``%H`` once an hour, ``%H:%M`` once a minute (more often than a value fixed for
    a whole session of a few minutes), seconds and finer on every request.
    """

    PROCESS = 1
    """Once per process start: computed at import time, set iteration order, glob order."""
    DAY = 2
    """Once per calendar day: a date without a time of day."""
    HOUR = 3
    """Once per hour: a clock value rendered to the hour (``%H``, ``now.hour``)."""
    SESSION = 4
    """Once per call/session: caller data, a session id, an article fetched at call start."""
    MINUTE = 5
    """Once per minute: a clock value rendered to the minute (``%H:%M``)."""
    REQUEST = 6
    """On every LLM request: a timestamp to the second or finer, a random value, history."""

    @property
    def label(self) -> str:
        """Human wording, e.g. ``"per request"``."""
        return {
            Frequency.PROCESS: "per process start",
            Frequency.DAY: "per day",
            Frequency.HOUR: "per hour",
            Frequency.SESSION: "per session",
            Frequency.MINUTE: "per minute",
            Frequency.REQUEST: "per request",
        }[self]

    @property
    def misses_per_day(self) -> int | None:
        """Cache misses a day the change costs one prompt variant on a busy line.

        ``None`` where the count follows the traffic (per session, per request) or is
        not per day at all (per process start).
        """
        return {Frequency.DAY: 1, Frequency.HOUR: 24, Frequency.MINUTE: 1440}.get(self)


class Position(StrEnum):
    """Where in the rendered prompt the volatile content starts."""

    EARLY = "early"
    """In the first half of the prompt: most of the prompt after it can never be cached."""
    MIDDLE = "middle"
    """Past the first half, with at least ``LATE_TAIL_TOKENS`` tokens and a third of the
    prompt after it; also used when the position cannot be resolved (the template lives in
    another file)."""
    LATE = "late"
    """Past the first half with fewer than ``LATE_TAIL_TOKENS`` tokens or less than a third
    of the prompt after it, or in a message that follows the system prompt and tools."""


LATE_TAIL_TOKENS = 128
"""A change followed by fewer tokens than this loses at most one OpenAI cache increment.

Source: OpenAI Cookbook, Prompt Caching 201 ("cache hits occurring in increments of 128
tokens"), quoted in ../shared/reference/prompt_caching_rules.md.
"""

SEVERITY_GRID: dict[tuple[Frequency, Position], Severity] = {
    (Frequency.REQUEST, Position.EARLY): Severity.ERROR,
    (Frequency.REQUEST, Position.MIDDLE): Severity.WARNING,
    (Frequency.REQUEST, Position.LATE): Severity.INFO,
    (Frequency.MINUTE, Position.EARLY): Severity.ERROR,
    (Frequency.MINUTE, Position.MIDDLE): Severity.WARNING,
    (Frequency.MINUTE, Position.LATE): Severity.INFO,
    (Frequency.HOUR, Position.EARLY): Severity.WARNING,
    (Frequency.HOUR, Position.MIDDLE): Severity.WARNING,
    (Frequency.HOUR, Position.LATE): Severity.INFO,
    (Frequency.SESSION, Position.EARLY): Severity.ERROR,
    (Frequency.SESSION, Position.MIDDLE): Severity.WARNING,
    (Frequency.SESSION, Position.LATE): Severity.INFO,
    (Frequency.DAY, Position.EARLY): Severity.WARNING,
    (Frequency.DAY, Position.MIDDLE): Severity.WARNING,
    (Frequency.DAY, Position.LATE): Severity.INFO,
    (Frequency.PROCESS, Position.EARLY): Severity.INFO,
    (Frequency.PROCESS, Position.MIDDLE): Severity.INFO,
    (Frequency.PROCESS, Position.LATE): Severity.INFO,
}
"""Severity of volatile content by change frequency and position (our own grading)."""


def position_band(tokens_before: int, tokens_after: int) -> Position:
    """Grade where volatile content starts from the token counts around it.

    Args:
        tokens_before: Tokens of the prompt before the volatile content starts.
        tokens_after: Tokens of the prompt after the volatile content ends.

    Returns:
        ``EARLY`` when no more of the prompt precedes it than follows it, ``LATE`` when
        fewer than ``LATE_TAIL_TOKENS`` tokens or less than a third of the prompt follow
        it, else ``MIDDLE``.
    """
    if tokens_before <= tokens_after:
        return Position.EARLY
    if tokens_after < LATE_TAIL_TOKENS or late_share(tokens_before, tokens_after):
        return Position.LATE
    return Position.MIDDLE


def late_share(tokens_before: int, tokens_after: int) -> bool:
    """Less than a third of the prompt follows the value: *late*, whatever the count.

    What it costs (the text after it, re-prefilled when it changes) is under a third of the
    prompt; the corpora's labelling rule counts content as early when at least about a third
    of the static text comes after it.
    """
    return 2 * tokens_after < tokens_before


def grade(frequency: Frequency, position: Position) -> Severity:
    """Severity for volatile content, from ``SEVERITY_GRID``."""
    return SEVERITY_GRID[(frequency, position)]


@dataclass(frozen=True)
class Rule:
    """A lint rule's identity and documentation.

    Attributes:
        id: Stable rule id, e.g. ``"CB101"``.
        name: Short kebab-case name, e.g. ``"volatile-clock"``.
        summary: One line saying what it finds.
        fix: One line saying how to fix it.
    """

    id: str
    name: str
    summary: str
    fix: str


RULES: dict[str, Rule] = {
    r.id: r
    for r in (
        Rule(
            "CB101",
            "volatile-clock",
            "A time or date is rendered into the cached prefix.",
            "Drop it from the system prompt and let a tool (get_current_time) return it, "
            "or move it to the end of the prompt or into the latest user message.",
        ),
        Rule(
            "CB102",
            "random-value",
            "A random value or fresh id (uuid, random, secrets) is rendered into the prefix.",
            "Keep ids out of the prompt (pass them to tools in code), or put them last.",
        ),
        Rule(
            "CB103",
            "caller-data",
            "Per-call data (caller name, phone, email, ids) is rendered into the prefix.",
            "Put the shared instructions first and the per-caller block at the end of the "
            "system prompt, or in the first user/developer message.",
        ),
        Rule(
            "CB104",
            "fetched-content",
            "Content fetched at run time (article, search result, API response) sits in "
            "the prefix ahead of static instructions.",
            "Move the static instructions above the fetched content, and the fetched "
            "content to the end of the prompt or into a message.",
        ),
        Rule(
            "CB105",
            "history-in-prompt",
            "Conversation history is pasted into the prompt instead of the messages list.",
            "Send history as user/assistant messages; a prompt that embeds it changes on "
            "every turn from where it starts.",
        ),
        Rule(
            "CB106",
            "unstable-order",
            "Order-unstable data (a set, glob/listdir order, json.dumps of such data "
            "without sort_keys) is rendered into the prompt or the tool list.",
            "Wrap it in sorted(...) or pass sort_keys=True, so every process renders the "
            "same bytes.",
        ),
        Rule(
            "CB107",
            "tool-swap",
            "The tool list changes during a session (per Flows node, LLMSetToolsFrame).",
            "Tools precede the system prompt in the cached prefix: advertise one stable "
            "superset and gate calls in code, or accept a cache miss at every swap.",
        ),
        Rule(
            "CB108",
            "volatile-breakpoint-block",
            "Volatile content sits inside the block that carries an explicit cache breakpoint "
            "(Anthropic cache_control, Bedrock cachePoint, Pipecat enable_prompt_caching): the "
            "block is written to cache on every change and read only while it stays identical.",
            "Split the block: the static text in a block that keeps the breakpoint, the "
            "volatile part in a separate block (or the latest user message) after it.",
        ),
        Rule(
            "CB109",
            "untraced-value",
            "A value nothing in view explains (a parameter no call in view fills, a name from "
            "outside the linted code, an out-of-view function's result) sits early in a "
            "prompt; lower confidence, always info.",
            "If it changes per call or per session, move it after the static instructions (or "
            "into a message); if it is configuration, ignore the note.",
        ),
        Rule(
            "CB201",
            "unfilled-placeholder",
            "A template placeholder ships to the model literally (never filled).",
            "Fill the placeholder the template actually contains (check the name and the "
            "brace style) or remove it.",
        ),
        Rule(
            "CB301",
            "prefix-below-minimum",
            "The static prefix is shorter than the provider's minimum cacheable prefix.",
            "Nothing is cached until history pushes the prompt past the floor; move "
            "stable material (tool docs, examples, policies) ahead of any dynamic part, or "
            "accept no caching on the first turns.",
        ),
        Rule(
            "CB401",
            "render-divergence",
            "Two renders of the same prompt differ (two sessions or two turns).",
            "Make everything before the divergence point byte-identical across renders; "
            "move what differs to the end.",
        ),
        Rule(
            "CB901",
            "unreadable-input",
            "An input could not be linted (binary, undecodable, too large or unparseable).",
            "Pass prompt text, Python or JSON files; fix the syntax error; raise "
            "--max-bytes for big files.",
        ),
    )
}

RULES_BY_NAME: dict[str, Rule] = {r.name: r for r in RULES.values()}

VOLATILE_RULES: frozenset[str] = frozenset(
    {"CB101", "CB102", "CB103", "CB104", "CB105", "CB106", "CB108"}
)
"""Rules that report volatile content in the prefix (the early-dynamic family)."""


@dataclass
class Finding:
    """One problem found in a prompt, a source file or a tool schema.

    Attributes:
        rule: Rule id, e.g. ``"CB101"``.
        severity: How bad it is.
        message: What was found, in one or two sentences.
        char_offset: Character (code point) offset in the rendered prompt where the
            problem starts; for Python sources an estimate over the prompt's literal text.
        token_offset: Token index of that character (``o200k_base`` unless told otherwise).
        line: 1-based line in the file (or prompt text) where it is reported.
        col: 1-based column, counted in code points.
        fix: How to fix it (defaults to the rule's fix).
        path: File the finding belongs to, when linting files.
        frequency: How often the content changes, for volatile-content rules.
        position: Where it sits in the prompt, for volatile-content rules.
        estimated: True when offsets come from a static rendering of source code rather
            than the real prompt text.
        evidence: The matched text or source expression, shortened.
        char_end: End character offset (exclusive) of the matched text, when known.
        extra: Rule-specific details (minimum, cacheable tokens, origin line...).
    """

    rule: str
    severity: Severity
    message: str
    char_offset: int | None = None
    token_offset: int | None = None
    line: int = 1
    col: int = 1
    fix: str = ""
    path: str | None = None
    frequency: Frequency | None = None
    position: Position | None = None
    estimated: bool = False
    evidence: str = ""
    char_end: int | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.fix and self.rule in RULES:
            self.fix = RULES[self.rule].fix

    @property
    def name(self) -> str:
        """The rule's kebab-case name."""
        return RULES[self.rule].name if self.rule in RULES else self.rule

    def to_dict(self) -> dict:
        """JSON-ready dict (enums as their lower-case labels)."""
        d = asdict(self)
        d["severity"] = self.severity.label
        d["name"] = self.name
        d["frequency"] = self.frequency.label if self.frequency else None
        d["position"] = self.position.value if self.position else None
        return d


def shorten(text: str, limit: int = 60) -> str:
    """One-line excerpt of ``text`` at most ``limit`` characters long."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
