"""Python-source mode: find prompt-building code and grade the volatile values it uses.

A *sink* is an expression that becomes (part of) what the model reads:

* the system slot: assignments to names like ``system_prompt``/``instructions``/
  ``self.personality``, keywords such as ``system_instruction=``, ``instructions=``,
  ``role_message=``, ``{"role": "system", "content": ...}``, ``{"prompt": ...}``, and
  f-strings that open with "You are";
* the message slot (after system prompt and tools): ``{"role": "user"|"developer", ...}``
  and per-turn instructions (``generate_reply(instructions=...)``);
* the tools slot (before the system prompt): ``tools=``, ``functions=``, ``{"functions": ...}``.

Each sink is rendered statically (:mod:`pipecat_fast.lint.py_render`); every volatile source
in a hole is graded by where the hole sits and how often the value changes.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from pipecat_fast import tokens
from pipecat_fast.lint.findings import (
    Finding,
    Frequency,
    Position,
    Severity,
    grade,
    position_band,
    shorten,
)
from pipecat_fast.lint.prompt import below_minimum_message
from pipecat_fast.lint.py_classify import Classifier, Source
from pipecat_fast.lint.py_index import ModuleIndex
from pipecat_fast.lint.py_render import Hole, Renderer
from pipecat_fast.lint.textmap import TextMap
from pipecat_fast.lint.vocab import words
from pipecat_fast.providers.llm import PrefixMinimum, prefix_minimum

SYSTEM_WORDS = {
    "prompt",
    "prompts",
    "instruction",
    "instructions",
    "system",
    "persona",
    "personality",
    "preamble",
}
NOT_TEXT_WORDS = {"name", "id", "ids", "count", "index", "len", "tokens", "path", "file", "key"}
"""A name ending in one of these holds something about a prompt, not prompt text."""
BUILD_METHODS = {"format", "format_map", "replace", "join", "substitute", "safe_substitute"}
SYSTEM_KEYWORDS = {
    "system_instruction",
    "system_prompt",
    "system_message",
    "instructions",
    "instruction",
    "system",
    "prompt",
    "role_message",
    "preamble",
    "persona",
}
MESSAGE_CALLS = {"generate_reply", "say", "add_message", "add_messages", "append"}
TOOL_KEYWORDS = {"tools", "functions", "standard_tools"}
TOOL_RULES = {"CB101", "CB102", "CB106"}
"""What counts in a tool list: an awaited tool list (an MCP server's) is usually stable."""
_YOU_ARE = re.compile(r"\s*(you are|you're|your name is|act as)\b", re.IGNORECASE)

_KIND = {
    "CB101": "time/date",
    "CB102": "random value",
    "CB103": "caller data",
    "CB104": "fetched content",
    "CB105": "conversation history",
    "CB106": "order-unstable data",
}


@dataclass(frozen=True)
class Sink:
    """An expression whose value the model reads.

    Attributes:
        value: The expression.
        slot: ``"system"``, ``"append"`` (``+=`` onto a prompt), ``"message"`` or ``"tools"``.
        label: Where it goes, for messages (``"`system_prompt`"``).
    """

    value: ast.AST
    slot: str
    label: str


def _target_name(target: ast.AST) -> str | None:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    if isinstance(target, ast.Subscript):
        key = target.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
    return None


def _names_prompt_text(name: str) -> bool:
    w = words(name)
    return bool(w) and bool(set(w) & SYSTEM_WORDS) and w[-1] not in NOT_TEXT_WORDS


def _builds_text(value: ast.AST, segments: list, index: ModuleIndex) -> bool:
    """True for code that builds prompt text: literal text, or a format-like call.

    A bare name, call or await only passes a value on; it is linted where it is built.
    """
    if any(isinstance(s, str) and s.strip() for s in segments):
        return True
    node = value
    if isinstance(node, ast.Name):
        resolved = index.resolve_name(node)
        node = resolved[0] if len(resolved) == 1 else node
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in BUILD_METHODS
    ) or isinstance(node, (ast.JoinedStr, ast.BinOp))


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def find_sinks(tree: ast.Module) -> list[Sink]:
    """Every prompt sink in a module, each value node once (first classification wins)."""
    sinks: list[Sink] = []
    seen: set[int] = set()

    def add(value: ast.AST | None, slot: str, label: str) -> None:
        if value is None or id(value) in seen:
            return
        seen.add(id(value))
        sinks.append(Sink(value, slot, label))

    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                name = _target_name(t)
                if name and _names_prompt_text(name):
                    slot = "append" if isinstance(node, ast.AugAssign) else "system"
                    add(node.value, slot, f"`{shorten(ast.unparse(t), 40)}`")
                elif name and name in TOOL_KEYWORDS:
                    add(node.value, "tools", f"`{shorten(ast.unparse(t), 40)}`")
        elif isinstance(node, ast.Call):
            call = _call_name(node)
            for kw in node.keywords:
                if kw.arg in SYSTEM_KEYWORDS:
                    slot = "message" if call in MESSAGE_CALLS else "system"
                    add(kw.value, slot, f"`{call}({kw.arg}=...)`")
                elif kw.arg in TOOL_KEYWORDS:
                    add(kw.value, "tools", f"`{call}({kw.arg}=...)`")
        elif isinstance(node, ast.Dict):
            keys = {
                k.value: v
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            }
            role = keys.get("role")
            if isinstance(role, ast.Constant) and "content" in keys:
                slot = "system" if role.value == "system" else "message"
                add(keys["content"], slot, f"a {role.value!s} message")
            for key in SYSTEM_KEYWORDS & keys.keys():
                add(keys[key], "system", f'`"{key}"` entry')
            for key in TOOL_KEYWORDS & keys.keys():
                add(keys[key], "tools", f'`"{key}"` entry')
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            if isinstance(first, ast.Constant) and _YOU_ARE.match(str(first.value)):
                add(node, "system", "an f-string prompt")
    return sinks


def _message(src: Source, freq: Frequency, pos: Position, sink: Sink, where: dict) -> str:
    kind = _KIND.get(src.rule, "value")
    kind = f"named like {kind}" if src.guessed else kind
    head = f"`{src.what}` ({kind}, changes {freq.label})"
    if sink.slot == "message":
        return (
            f"{head} goes into {sink.label} after the system prompt and tools ({pos.value}): "
            "only what follows it is re-prefilled."
        )
    if sink.slot == "tools":
        return (
            f"{head} feeds the tool list {sink.label}; tools precede the system prompt in the "
            f"cached prefix ({pos.value})."
        )
    if src.inside or sink.slot == "append":
        return (
            f"{head} lands in {sink.label} inside `{where['hole']}`, whose layout is not "
            f"visible here: position unknown, graded {pos.value}."
        )
    return (
        f"{head} lands in {sink.label} at token ~{where['before']} of ~{where['total']} "
        f"({pos.value}): the cached prefix stops there and the ~{where['after']} tokens after "
        "it are re-prefilled whenever it changes."
    )


def _tool_swaps(tree: ast.Module, index: ModuleIndex) -> list[Finding]:
    lists: list[ast.AST] = []
    setters: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            kws = {k.arg for k in node.keywords}
            if "functions" in kws and (
                {"task_messages", "name"} & kws or "Node" in _call_name(node)
            ):
                lists.extend(k.value for k in node.keywords if k.arg == "functions")
            if _call_name(node) == "LLMSetToolsFrame":
                setters.append(node)
    distinct = {ast.unparse(v) for v in lists}
    out: list[Finding] = []
    at = setters[0] if setters else (lists[1] if len(distinct) >= 2 else None)
    if at is not None:
        line, col = index.line_col(at)
        why = (
            f"{len(distinct)} different per-node tool lists"
            if len(distinct) >= 2
            else "LLMSetToolsFrame replaces the tools mid-session"
        )
        out.append(
            Finding(
                rule="CB107",
                severity=Severity.INFO,
                message=(
                    f"{why}: every swap changes the tools block, which precedes the system "
                    "prompt in the OpenAI/Anthropic cached prefix, so the next request "
                    "misses the cache."
                ),
                line=line,
                col=col,
                estimated=True,
                evidence=shorten(ast.unparse(at), 60),
            )
        )
    return out


def lint_python_source(
    source: str,
    filename: str = "<source>",
    *,
    provider: str | None = None,
    model: str | None = None,
    encoding: str = tokens.DEFAULT_ENCODING,
    table: dict | None = None,
) -> list[Finding]:
    """Lint Python code that builds prompts.

    Args:
        source: The module's source text.
        filename: Name used in the syntax-error message.
        provider: Provider for the minimum-prefix check; ``None`` skips it.
        model: Model id for the minimum-prefix table.
        encoding: Token encoding for the estimated offsets.
        table: Minimum-prefix table; the bundled one by default.

    Returns:
        Findings sorted by line. Offsets (``char_offset``/``token_offset``) are estimates
        over the statically rendered prompt (``estimated=True``); ``line``/``col`` point at
        the source. A file that does not parse yields one CB901 finding.

    Raises:
        ValueError: If ``provider`` is not in the minimum-prefix table.
    """
    minimum = prefix_minimum(provider, model, table)
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as e:
        return [
            Finding(
                rule="CB901",
                severity=Severity.WARNING,
                message=f"does not parse, not linted: {e.msg} (line {e.lineno})",
                line=e.lineno or 1,
                col=e.offset or 1,
            )
        ]
    except (ValueError, RecursionError, MemoryError) as e:
        return [Finding(rule="CB901", severity=Severity.WARNING, message=f"not linted: {e}")]
    try:
        return _lint_tree(tree, source, minimum, encoding)
    except RecursionError:
        # ast.parse takes deeper nesting than a recursive walk of the tree does: a prompt
        # concatenated from hundreds of literals with `+`.
        message = "expressions nested too deeply to analyse, not linted"
        return [Finding(rule="CB901", severity=Severity.WARNING, message=message)]


def _lint_tree(
    tree: ast.Module, source: str, minimum: PrefixMinimum | None, encoding: str
) -> list[Finding]:
    index = ModuleIndex(tree, source)
    classifier = Classifier(index)
    renderer = Renderer(index, classifier)
    best: dict[int, Finding] = {}
    static_prefixes: list[tuple[int, Sink]] = []
    for sink in find_sinks(tree):
        rendered = renderer.render(sink.value)
        if sink.slot != "tools" and not _builds_text(sink.value, rendered.segments, index):
            continue
        skeleton, holes = rendered.skeleton()
        tm = TextMap(skeleton, encoding)
        total = tm.token_count
        first_volatile = None
        for hole, start, end in holes:
            before = tm.token_at(start)
            after = max(0, total - tm.token_at(end))
            for src in hole.sources:
                if sink.slot == "tools" and src.rule not in TOOL_RULES:
                    continue
                freq = min(src.granularity, index.eval_frequency(src.origin))
                if sink.slot == "message":
                    pos = Position.LATE
                elif sink.slot == "tools":
                    pos = Position.EARLY
                elif src.inside or sink.slot == "append":
                    pos = Position.MIDDLE
                else:
                    pos = position_band(before, after)
                severity = grade(freq, pos)
                if severity >= Severity.WARNING and first_volatile is None:
                    first_volatile = before
                where = {
                    "before": before,
                    "after": after,
                    "total": total,
                    "hole": shorten(ast.unparse(hole.node), 40),
                }
                line, col = index.line_col(hole.node)
                message = _message(src, freq, pos, sink, where)
                origin_line = getattr(src.origin, "lineno", line)
                if origin_line != line:
                    message += f" (value computed at line {origin_line})"
                finding = Finding(
                    rule=src.rule,
                    severity=severity,
                    message=message,
                    char_offset=start,
                    token_offset=before,
                    line=line,
                    col=col,
                    frequency=freq,
                    position=pos,
                    estimated=True,
                    evidence=shorten(ast.unparse(hole.node), 60),
                    extra={"origin_line": origin_line, "sink": sink.label},
                )
                key = id(src.origin)
                old = best.get(key)
                if old is None or (finding.severity, -finding.line) > (old.severity, -old.line):
                    best[key] = finding
        if sink.slot == "system" and skeleton.strip():
            static = first_volatile if first_volatile is not None else total
            static_prefixes.append((static, sink))
    # One finding per place and rule: two sources in one hole read as one problem.
    by_place: dict[tuple[int, int, str], Finding] = {}
    for f in best.values():
        k = (f.line, f.col, f.rule)
        if k not in by_place or f.severity > by_place[k].severity:
            by_place[k] = f
    findings = list(by_place.values())
    for issue in renderer.issues.values():
        line, col = index.line_col(issue.node)
        findings.append(
            Finding(
                rule="CB201",
                severity=Severity.parse(issue.severity),
                message=issue.message,
                line=line,
                col=col,
                estimated=True,
                evidence=issue.placeholder,
            )
        )
    findings.extend(_tool_swaps(tree, index))
    if minimum is not None and minimum.tokens > 0 and static_prefixes:
        static, sink = max(static_prefixes, key=lambda p: p[0])
        has_error = any(f.severity >= Severity.ERROR for f in findings)
        if static < minimum.tokens and not has_error:
            line, col = index.line_col(sink.value)
            findings.append(
                Finding(
                    rule="CB301",
                    severity=Severity.WARNING,
                    message=below_minimum_message(
                        static, minimum, f"longest static start of a system prompt, {sink.label}"
                    ),
                    token_offset=static,
                    line=line,
                    col=col,
                    estimated=True,
                    extra={"minimum": minimum.tokens, "static_tokens": static},
                )
            )
    findings.sort(key=lambda f: (f.line, f.col, -f.severity))
    return findings


__all__ = ["Hole", "Sink", "find_sinks", "lint_python_source"]
