"""``lint_prompt``: findings for one prompt text (a rendered prompt or a template)."""

from __future__ import annotations

from collections.abc import Mapping

from pipecat_fast import tokens
from pipecat_fast.lint.findings import (
    RULES,
    VOLATILE_RULES,
    Finding,
    Frequency,
    Position,
    Severity,
    grade,
    position_band,
    shorten,
)
from pipecat_fast.lint.text_rules import Span, detect
from pipecat_fast.lint.textmap import TextMap
from pipecat_fast.providers.llm import PrefixMinimum, prefix_minimum


def volatile_message(
    what: str,
    evidence: str,
    token_offset: int,
    total_tokens: int,
    frequency: Frequency,
    position: Position,
    tokens_after: int,
    *,
    confident: bool = True,
) -> str:
    """The message shared by every volatile-content finding (text and source modes)."""
    where = f"at token {token_offset} of {total_tokens} ({position.value} in the prompt)"
    if not confident:
        return (
            f"{what} `{evidence}` {where} looks like data; if it is rendered {frequency.label} "
            f"rather than fixed, every change re-prefills the {tokens_after} tokens after it."
        )
    return (
        f"{what} `{evidence}` {where} changes {frequency.label}: the cached prefix stops "
        f"here, and the {tokens_after} tokens after it are re-prefilled whenever it changes."
    )


def breakpoint_cost(frequency: Frequency) -> str:
    """What volatile content inside the block with the cache breakpoint costs."""
    if frequency >= Frequency.MINUTE:
        return (
            "every request writes the block to cache (1.25x the input price for 5 minutes, "
            "2x for 1 hour) and none reads it: caching costs more than no caching, even when "
            "the value sits at the block's very end"
        )
    if frequency == Frequency.SESSION:
        return (
            "each session writes the whole block anew and no session reads the static part "
            "another one wrote, wherever in the block the value sits"
        )
    per_day = frequency.misses_per_day or 1
    return (
        f"the whole block is written again each time it changes (about {per_day:,} "
        f"time{'s' if per_day > 1 else ''} a day), wherever in the block the value sits"
    )


BREAKPOINT_FIX = (
    "Split the block: keep the static text in the block with the breakpoint and send the "
    "volatile part as a separate block after it (no cache_control), or in the latest user "
    "message; with Pipecat's enable_prompt_caching, put it in a message rather than the "
    "system prompt."
)


def breakpoint_finding(f: Finding, breakpoint_at: int) -> Finding | None:
    """CB108 for a volatile finding that sits before the last cache breakpoint."""
    if (
        f.rule not in VOLATILE_RULES
        or f.frequency is None
        or f.frequency <= Frequency.PROCESS
        or f.char_offset is None
        or f.char_offset >= breakpoint_at
    ):
        return None
    if "looks like data" in f.message:
        return None  # not confident it changes at all
    severity = grade(f.frequency, Position.EARLY)
    if severity < Severity.WARNING:
        return None
    return Finding(
        rule="CB108",
        severity=severity,
        message=(
            f"`{f.evidence}` (changes {f.frequency.label}) is inside the block that carries "
            f"the cache breakpoint: {breakpoint_cost(f.frequency)}."
        ),
        char_offset=f.char_offset,
        char_end=f.char_end,
        token_offset=f.token_offset,
        line=f.line,
        col=f.col,
        fix=BREAKPOINT_FIX,
        frequency=f.frequency,
        position=Position.EARLY,
        evidence=f.evidence,
        estimated=f.estimated,
    )


def below_minimum_message(static_tokens: int, minimum: PrefixMinimum, what: str) -> str:
    """Message for CB301."""
    model = f" {minimum.model}" if minimum.model else ""
    return (
        f"the static prefix ({what}) is {static_tokens} tokens, below the "
        f"{minimum.tokens:,}-token minimum for {minimum.provider}{model}: no request is served "
        f"from cache until history pushes the prompt past the floor "
        f"(source: {minimum.source})."
    )


def _span_finding(span: Span, tm: TextMap, tools_tokens: int) -> Finding:
    tok_start = tm.token_at(span.start)
    tok_end = tm.token_at(span.end)
    total = tm.token_count + tools_tokens
    before = tok_start + tools_tokens
    after = max(0, tm.token_count - tok_end)
    line, col = tm.line_col(span.start)
    evidence = shorten(tm.text[span.start : span.end])
    if span.severity is not None:  # placeholders in a rendered prompt
        return Finding(
            rule=span.rule,
            severity=Severity.parse(span.severity),
            message=(
                f"placeholder `{evidence}` at token {before} is still in the rendered prompt: "
                "the model sees it literally."
            ),
            char_offset=span.start,
            char_end=span.end,
            token_offset=before,
            line=line,
            col=col,
            evidence=evidence,
        )
    position = position_band(before, after)
    severity = grade(span.frequency, position) if span.confident else Severity.INFO
    return Finding(
        rule=span.rule,
        severity=severity,
        message=volatile_message(
            span.what,
            evidence,
            before,
            total,
            span.frequency,
            position,
            after,
            confident=span.confident,
        ),
        char_offset=span.start,
        char_end=span.end,
        token_offset=before,
        line=line,
        col=col,
        frequency=span.frequency,
        position=position,
        evidence=evidence,
    )


def lint_prompt(
    text: str,
    provider: str | None = None,
    model: str | None = None,
    *,
    rendered: bool = False,
    tools_tokens: int = 0,
    encoding: str = tokens.DEFAULT_ENCODING,
    table: dict | None = None,
    breakpoint_at: int | None = None,
    bound: Mapping[str, str] | None = None,
    double_only: bool = False,
) -> list[Finding]:
    """Lint one prompt for prefix-cache busters.

    Args:
        text: The system prompt (or a template of it), any language and script.
        provider: Provider for the minimum-prefix check (``"openai"``, ``"anthropic"``,
            ``"gemini"``, ``"vllm"``...); ``None`` skips that check.
        model: Model id for the minimum-prefix table (``"gpt-4o"``...).
        rendered: True when ``text`` is exactly what is sent: placeholders left in it are
            reported as unfilled (CB201). False (default) treats it as a template, where a
            placeholder named like a clock/caller value marks volatile content.
        tools_tokens: Tokens of the tool definitions sent before the prompt (tools precede
            the system prompt in OpenAI's and Anthropic's cached prefix).
        encoding: Token encoding for offsets (``o200k_base`` default).
        table: Minimum-prefix table (``pipecat_fast.providers.load_table``); the bundled
            one by default.
        breakpoint_at: Character offset of the last explicit cache breakpoint (the end of
            the block carrying Anthropic's ``cache_control``; ``len(text)`` when the whole
            prompt is one such block, as Pipecat's ``enable_prompt_caching`` sends it).
            Volatile content before it is also reported as CB108, wherever it sits.
        bound: Template variables the code around the prompt binds for each call through
            a platform's call-creation field (``{name: "call" | "literal"}``, from
            :func:`pipecat_fast.lint.placeholders.bound_variables`).
        double_only: The text is a Jinja/Liquid/Mustache/Handlebars template: only
            ``{{ ... }}`` is a placeholder, single braces are text.

    Returns:
        Findings sorted by character offset. Empty or whitespace-only text has none.

    Raises:
        TypeError: If ``text`` is not a str.
        ValueError: If ``provider`` is not in the minimum-prefix table.
    """
    if not isinstance(text, str):
        raise TypeError(f"lint_prompt takes the prompt as str, got {type(text).__name__}")
    minimum = prefix_minimum(provider, model, table)
    if not text.strip():
        return []
    tm = TextMap(text, encoding)
    findings = [
        _span_finding(s, tm, tools_tokens)
        for s in detect(text, rendered=rendered, bound=bound, double_only=double_only)
    ]
    if breakpoint_at is not None:
        blocks = [breakpoint_finding(f, breakpoint_at) for f in findings]
        findings.extend(b for b in blocks if b is not None)
    findings.sort(key=lambda f: (f.char_offset or 0, -f.severity))
    if minimum is not None and minimum.tokens > 0:
        cut = next(
            (f for f in findings if f.rule in VOLATILE_RULES and f.severity >= Severity.WARNING),
            None,
        )
        # An early error already says nothing is cached; a second finding adds noise.
        if cut is None or cut.severity < Severity.ERROR:
            static_end = cut.char_offset if cut else len(text)
            static_tokens = tools_tokens + tm.token_at(static_end or 0)
            if static_tokens < minimum.tokens:
                what = "up to the first volatile content" if cut else "the whole prompt"
                if tools_tokens:
                    what += f", tools included ({tools_tokens} tokens)"
                at = cut.char_offset or 0 if cut else 0
                line, col = tm.line_col(at)
                findings.append(
                    Finding(
                        rule="CB301",
                        severity=Severity.WARNING,
                        message=below_minimum_message(static_tokens, minimum, what),
                        char_offset=at,
                        token_offset=static_tokens,
                        line=line,
                        col=col,
                        fix=RULES["CB301"].fix,
                        extra={"minimum": minimum.tokens, "static_tokens": static_tokens},
                    )
                )
    return findings
