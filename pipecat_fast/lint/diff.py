"""Two-render mode: render a prompt twice (two sessions or two turns) and compare.

Where the renders first differ is where the cached prefix ends; everything before it can be
served from cache, everything after it is prefilled again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipecat_fast import tokens
from pipecat_fast.lint.findings import Finding, Frequency, grade, position_band, shorten
from pipecat_fast.lint.prompt import lint_prompt
from pipecat_fast.lint.textmap import TextMap
from pipecat_fast.prefix import common_prefix_len
from pipecat_fast.providers.llm import prefix_minimum


@dataclass
class RenderDiff:
    """Result of comparing two renders of one prompt.

    Attributes:
        identical: True when the renders are byte-identical.
        first_divergent_char: First differing character offset (``None`` when identical).
        first_divergent_token: Index of the first differing token (``None`` when identical).
        line: 1-based line of the divergence in render A.
        col: 1-based column (code points) of the divergence in render A.
        common_prefix_tokens: Leading tokens the two renders share exactly.
        cacheable_prefix_tokens: Of those, what the provider can serve from cache (0 below
            its minimum, rounded down to its granularity); equals ``common_prefix_tokens``
            when no provider is given.
        tokens_a: Tokens in render A.
        tokens_b: Tokens in render B.
        differs_a: What render A has where they differ (shortened).
        differs_b: What render B has there (shortened).
        findings: CB401 for the divergence plus text findings inside the differing part
            and unfilled placeholders in either render.
    """

    identical: bool
    first_divergent_char: int | None
    first_divergent_token: int | None
    line: int
    col: int
    common_prefix_tokens: int
    cacheable_prefix_tokens: int
    tokens_a: int
    tokens_b: int
    differs_a: str = ""
    differs_b: str = ""
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        d = dict(self.__dict__)
        d["findings"] = [f.to_dict() for f in self.findings]
        return d


def diff_renders(
    a: str,
    b: str,
    *,
    provider: str | None = None,
    model: str | None = None,
    changes: Frequency = Frequency.SESSION,
    encoding: str = tokens.DEFAULT_ENCODING,
    table: dict | None = None,
) -> RenderDiff:
    """Compare two renders of the same prompt.

    Args:
        a: First render (e.g. session 1, or turn N).
        b: Second render (session 2, or turn N+1).
        provider: Provider for the cacheable-prefix floor and granularity; ``None`` to
            report the raw common prefix.
        model: Model id for the floor.
        changes: How often the renders differ in production: ``SESSION`` for two sessions,
            ``REQUEST`` for two turns. Grades the CB401 finding.
        encoding: Token encoding.
        table: Minimum-prefix table; the bundled one by default.

    Returns:
        The comparison. Character offsets and line/col refer to render A.

    Raises:
        ValueError: If ``provider`` is not in the table.
    """
    minimum = prefix_minimum(provider, model, table)
    ta, tb = tokens.encode(a, encoding), tokens.encode(b, encoding)
    common_tokens = common_prefix_len(ta, tb)
    cacheable = minimum.cacheable(common_tokens) if minimum else common_tokens
    placeholder_findings = [
        f for f in lint_prompt(a, rendered=True, encoding=encoding) if f.rule == "CB201"
    ]
    if a == b:
        return RenderDiff(
            identical=True,
            first_divergent_char=None,
            first_divergent_token=None,
            line=1,
            col=1,
            common_prefix_tokens=common_tokens,
            cacheable_prefix_tokens=cacheable,
            tokens_a=len(ta),
            tokens_b=len(tb),
            findings=placeholder_findings,
        )
    char = common_prefix_len(a, b)
    # Trim the common suffix too, so "what differs" is just the changed part.
    suffix = common_prefix_len(a[char:][::-1], b[char:][::-1])
    part_a, part_b = a[char : len(a) - suffix], b[char : len(b) - suffix]
    tm = TextMap(a, encoding)
    line, col = tm.line_col(char)
    after = max(0, len(ta) - common_tokens)
    position = position_band(common_tokens, after)
    severity = grade(changes, position)
    msg = (
        f"renders diverge at token {common_tokens} of {len(ta)} (line {line}, col {col}; "
        f"{position.value}): `{shorten(part_a, 40)}` vs `{shorten(part_b, 40)}`. "
        f"Cacheable prefix: {cacheable} tokens"
    )
    if minimum is not None and minimum.tokens and common_tokens < minimum.tokens:
        msg += f" (the shared {common_tokens} tokens are below the {minimum.tokens:,} minimum)"
    findings = [
        Finding(
            rule="CB401",
            severity=severity,
            message=msg + ".",
            char_offset=char,
            token_offset=common_tokens,
            line=line,
            col=col,
            frequency=changes,
            position=position,
            evidence=shorten(part_a, 40),
            extra={"cacheable_prefix_tokens": cacheable, "differs_b": shorten(part_b, 40)},
        )
    ]
    # Name what changed when a detector recognises it (a timestamp, an id...).
    for f in lint_prompt(a, encoding=encoding):
        start = f.char_offset
        if f.rule == "CB301" or start is None:
            continue
        if start < max(len(a) - suffix, char + 1) and start + len(f.evidence) > char:
            findings.append(f)
    findings.extend(placeholder_findings)
    return RenderDiff(
        identical=False,
        first_divergent_char=char,
        first_divergent_token=common_tokens,
        line=line,
        col=col,
        common_prefix_tokens=common_tokens,
        cacheable_prefix_tokens=cacheable,
        tokens_a=len(ta),
        tokens_b=len(tb),
        differs_a=shorten(part_a, 80),
        differs_b=shorten(part_b, 80),
        findings=findings,
    )
