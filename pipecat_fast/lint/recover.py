"""Linting Python that does not parse: an excerpt, a file with a syntax error, a template.

Two passes, both keeping the file's own line numbers:

1. **Recover the statements that parse.** An indented fragment (a function body cut out of
   a file) is wrapped in a function; then, while the parser complains, the lines it
   complains about are blanked: an unclosed bracket or string at the end cuts the tail, a
   stray closing bracket or indented line near the start cuts the head, anything else
   blanks that one line. What is left is linted as usual.
2. **Scan the string literals of the lines that were blanked.** Each literal (and run of
   adjacent literals) that reads like a prompt, by the name it is assigned to or by its
   opening ("You are..."), is linted on its own with its f-string fields as the holes,
   inside a function (so it counts as built per session).

A CB901 note says the file did not parse and what was linted; it is a warning only when
nothing at all could be read.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

from pipecat_fast.lint.findings import Finding, Severity
from pipecat_fast.lint.py_index import parse

MAX_REPAIRS = 80
"""Give up recovering after blanking this many times."""

MAX_LITERALS = 200
"""Lint at most this many string-literal runs of a file that does not parse."""

_PROMPT_NAME = re.compile(
    r"(?:^|[\s,(\[{])[\"']?([A-Za-z_][\w.]*)[\"']?\s*(?::|=|\+=)\s*[(\[]*\s*$"
)
_YOU_ARE = re.compile(r"\s*(you are|you're|your name is|act as)\b", re.IGNORECASE)
_PREFIX = re.compile(r"[rRbBuUfF]{1,2}$")


@dataclass
class Literal:
    """A string literal found by scanning source text.

    Attributes:
        start: Offset of its first character (the prefix, if any).
        end: Offset just past its closing quote (or the end of the line, if unterminated).
        text: The literal as written, prefix and quotes included.
        closed: False when the closing quote is missing.
    """

    start: int
    end: int
    text: str
    closed: bool


def scan_literals(source: str) -> list[Literal]:
    """Every string literal in ``source``, comments skipped; tolerant of broken code."""
    out: list[Literal] = []
    i, n = 0, len(source)
    while i < n:
        ch = source[i]
        if ch == "#":
            j = source.find("\n", i)
            i = n if j < 0 else j
            continue
        if ch not in "'\"":
            i += 1
            continue
        start = i
        m = _PREFIX.search(source, max(0, i - 2), i)
        if m and (m.start() == 0 or not _word_char(source[m.start() - 1])):
            start = m.start()
        quote = source[i : i + 3] if source[i : i + 3] in ('"""', "'''") else ch
        j = i + len(quote)
        closed = False
        while j < n:
            c = source[j]
            if c == "\\":
                j += 2
                continue
            if source.startswith(quote, j):
                j += len(quote)
                closed = True
                break
            if c == "\n" and len(quote) == 1:
                break
            j += 1
        j = min(j, n)
        out.append(Literal(start, j, source[start:j], closed))
        i = j
    return out


def _word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _blank(lines: list[str], first: int, last: int) -> None:
    for k in range(max(first, 0), min(last, len(lines))):
        lines[k] = "\n" if lines[k].endswith("\n") else ""


def recover(source: str) -> tuple[ast.Module, str, int, int, set[int]] | None:
    """The parseable part of ``source`` (see :func:`_recover`).

    An excerpt may also start inside a triple-quoted string (the tail of a docstring): its
    first triple quote then closes a string rather than opening one. Both readings are
    tried and the one that keeps more lines wins.
    """
    plain = _recover(source)
    m = re.search(r"\"\"\"|\'\'\'", source)
    if m is None:
        return plain
    head = source[: m.end()]
    if "\n" not in head.strip("\n") and head.strip() != m.group(0):
        return plain  # the quote opens on the first line after code: a string starts there
    blanked_head = re.sub(r"[^\n]", " ", head)
    tail = _recover(blanked_head + source[m.end() :])
    if tail is None:
        return plain
    written = {i for i, line in enumerate(head.splitlines(), start=1) if line.strip()}
    dropped = written | tail[4]
    if plain is not None and _lost(plain[0], plain[4]) <= _lost(tail[0], dropped):
        return plain
    return (*tail[:4], dropped)


def _lost(tree: ast.Module, blanked: set[int]) -> int:
    """Lines a reading does not read as code.

    Those blanked, and those inside a multi-line string that stands alone as a statement
    (a docstring's shape: what code read as a string becomes). A multi-line string that is
    a value (assigned, passed, returned: a prompt's text) is read, not lost.
    """
    inside: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Expr):
            continue
        value = node.value
        if isinstance(value, (ast.Constant, ast.JoinedStr)) and (
            isinstance(value, ast.JoinedStr) or isinstance(value.value, str)
        ):
            end = getattr(value, "end_lineno", None) or value.lineno
            if end > value.lineno:
                inside.update(range(value.lineno, end + 1))
    return len(blanked) + len(inside)


def _recover(source: str) -> tuple[ast.Module, str, int, int, set[int]] | None:
    """The parseable part of ``source``.

    Returns:
        ``(tree, text, line_shift, col_shift, blanked)``: the tree of ``text`` (the source,
        possibly wrapped in a function and with lines blanked); subtract ``line_shift`` from
        a line of ``text`` and add ``col_shift`` to a column to get back to ``source``;
        ``blanked`` holds the 1-based source lines that were dropped. ``None`` if nothing
        parses.
    """
    text, line_shift, col_shift = source, 0, 0
    dedented = textwrap.dedent(source)
    if dedented != source and dedented.strip():
        orig = next((ln for ln in source.splitlines() if ln.strip()), "")
        ded = next((ln for ln in dedented.splitlines() if ln.strip()), "")
        removed = (len(orig) - len(orig.lstrip(" \t"))) - (len(ded) - len(ded.lstrip(" \t")))
        header = _fragment_header(dedented)
        text = header + textwrap.indent(dedented, "    ")
        line_shift, col_shift = header.count("\n"), removed - 4
    elif (indent := _code_indent(source)) > 0:
        # A function body whose multi-line strings hold lines at column 0 (a prompt's
        # text): dedenting sees no common indent, but the code lines are all indented.
        # The body goes under a header as it is, strings untouched.
        base = "\n".join(ln[indent:] for ln in source.splitlines() if _indent(ln) == indent)
        header = _fragment_header(base)
        text, line_shift = header + source, header.count("\n")
    lines = text.splitlines(keepends=True)
    blanked: set[int] = set()
    for _ in range(MAX_REPAIRS):
        try:
            return parse("".join(lines)), "".join(lines), line_shift, col_shift, blanked
        except SyntaxError as e:
            bad = max((e.lineno or 1) - 1, 0)
            msg = (e.msg or "").lower()
            if bad >= len(lines):
                bad = len(lines) - 1
            if bad < 0:
                return None
            if (header := _cut_signature(lines, bad)) is not None:
                # An excerpt that starts inside a function's parameter list (its `def`
                # line cut off): give the parameters back their header, on their own line.
                lines[bad] = header
                continue
            if "unexpected indent" in msg and (opened := _open_class(lines, bad)) is not None:
                # Module lines (imports) then a method excerpted from a class whose header
                # was cut: the blank line above the method becomes a class header.
                lines = opened
                continue
            if "expected an indented block" in msg and lines[bad].strip() == "":
                m = re.search(r"on line (\d+)", msg)
                header = int(m.group(1)) - 1 if m else bad - 1
                cut = (header, header + 1)  # a block header whose body was cut off
            elif "unterminated triple" in msg and (closed := _close_at_end(lines)) is not None:
                # An excerpt cut inside a triple-quoted string: what it holds up to the cut
                # is the start of the prompt, so close the string (and its brackets) there.
                lines = closed
                continue
            elif "never closed" in msg and (
                closed := _close_brackets(lines, bad, _statement_end(lines, bad))
            ):
                # A call cut before its closing bracket (`super().__init__(instructions=
                # f"""...""",` and the excerpt ends): close it where the statement ends.
                lines = closed
                continue
            elif (
                "never closed" in msg
                or "unterminated triple" in msg
                or "unexpected eof" in msg
                or "eof while" in msg
            ):
                cut = (bad, _statement_end(lines, bad))
            elif any(
                k in msg for k in ("unmatched", "unexpected indent", "unindent")
            ) and bad < max(len(lines) // 2, 1):
                cut = (line_shift, bad + 1)  # leading lines of a cut-out fragment
            else:
                cut = (bad, bad + 1)
            if line_shift and cut[0] < 1:
                cut = (1, max(cut[1], 2))
            before = list(lines)
            _blank(lines, *cut)
            blanked.update(range(cut[0] + 1 - line_shift, cut[1] + 1 - line_shift))
            if lines == before:
                return None
        except (ValueError, RecursionError, MemoryError):
            return None
    return None


_SIGNATURE_END = re.compile(r"^(\s*)\)\s*(?:->[^:#]*)?:\s*(?:#.*)?$")
_MAX_SIGNATURE_LINES = 30


def _cut_signature(lines: list[str], bad: int) -> str | None:
    """Line ``bad`` with a ``def`` header put before it, when it starts a cut parameter list.

    The lines from ``bad`` up to one that closes the list (``) -> T:``) must read as the
    parameters of a function: ``def _cut_off(<them>): ...`` parses. The header gets the
    closing line's indent (the indent of the ``def`` that was cut off). ``None`` otherwise.
    """
    for k in range(bad, min(bad + _MAX_SIGNATURE_LINES, len(lines))):
        m = _SIGNATURE_END.match(lines[k])
        if m is None:
            continue
        params = "".join(lines[bad:k]).strip()
        if not params or params.startswith(("def ", "async ", "class ")):
            return None
        try:
            parse(f"def _cut_off(\n{params}\n{lines[k].strip()}\n    pass\n")
        except (SyntaxError, ValueError, RecursionError):
            return None
        return f"{m.group(1)}def _cut_off({lines[bad].lstrip()}"
    return None


def _close_at_end(lines: list[str]) -> list[str] | None:
    """``lines`` with the triple-quoted string left open at the end closed, brackets too.

    ``None`` when that does not make the text parse.
    """
    text = "".join(lines)
    for quote in ('"""', "'''"):
        candidate = text + ("" if text.endswith("\n") else "\n") + quote
        candidate += _closers(candidate) + "\n"
        try:
            parse(candidate)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        return candidate.splitlines(keepends=True)
    return None


def _closers(text: str) -> str:
    """The brackets ``text`` leaves open, closed innermost first (``"])"``); ``""`` if none.

    Read with Python's own tokenizer, so brackets inside strings and comments do not count;
    a tokenizer error (the text is cut) ends the reading where it stands.
    """
    import io
    import tokenize

    closers: list[str] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.OP and tok.string in "([{":
                closers.append({"(": ")", "[": "]", "{": "}"}[tok.string])
            elif tok.type == tokenize.OP and tok.string in ")]}" and closers:
                closers.pop()
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return "".join(reversed(closers))


_METHOD_LINE = re.compile(r"^(\s+)(?:async\s+)?def\s+\w+\s*\(\s*(?:(?:self|cls)\b|$)")


def _open_class(lines: list[str], bad: int) -> list[str] | None:
    """``lines`` with a class header on the blank line above the method at ``bad``.

    Only when line ``bad`` opens a method (``def name(self``) indented deeper than the
    code above it, with a blank line right above it to hold the header.
    """
    m = _METHOD_LINE.match(lines[bad])
    if m is None or bad == 0 or lines[bad - 1].strip():
        return None
    indent = len(m.group(1).expandtabs())
    above = next((ln for ln in reversed(lines[: bad - 1]) if ln.strip()), None)
    if indent < 4 or (above is not None and _indent(above) >= indent):
        return None
    out = list(lines)
    out[bad - 1] = " " * (indent - 4) + "class _Fragment:\n"
    return out


def _close_brackets(lines: list[str], start: int, end: int) -> list[str] | None:
    """``lines`` with the brackets left open by the statement ``lines[start:end]`` closed.

    The closers go at the end of its last non-blank line. ``None`` unless the statement,
    closed so, parses on its own (a cut call, not a syntax error inside it).
    """
    last = max((k for k in range(start, end) if lines[k].strip()), default=None)
    if last is None:
        return None
    segment = textwrap.dedent("".join(lines[start : last + 1]))
    tail = _closers(segment)
    if not tail:
        return None
    try:
        parse(segment.rstrip("\n") + tail + "\n")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    out = list(lines)
    out[last] = out[last].rstrip("\n") + tail + "\n"
    return out


_METHOD = re.compile(r"^(?:async\s+)?def\s+\w+\s*\(\s*(?:self|cls)\b", re.MULTILINE)
_FUNCTION_ONLY = re.compile(r"^(?:return|await|yield|async\s+(?:with|for))\b", re.MULTILINE)


def _fragment_header(dedented: str) -> str:
    """The header an indented fragment is read under: a class for a cut-out class body.

    Methods (``def name(self, ...)``) at the fragment's own level say it is the body of a
    class whose header was cut off: read as one, ``self.name(...)`` and ``self.field``
    resolve to its methods and fields. Anything else is read as a function body.
    """
    if _METHOD.search(dedented) and not _FUNCTION_ONLY.search(dedented):
        first = _first_code_line(dedented)
        if first is not None and _indent(first) > 0:
            # The piece before the first method is deeper than the methods: the body
            # of a method whose `def` line was cut off (an `__init__` excerpt put
            # before another method's). Read it as one.
            return f"class _Fragment:\n    def _cut_off(self):\n{' ' * (_indent(first) + 4)}pass\n"
        return "class _Fragment:\n"
    return "async def _fragment():\n"


def _first_code_line(text: str) -> str | None:
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return line
    return None


def _code_indent(source: str) -> int:
    """The least indent of the lines that hold code (not those inside a multi-line string).

    0 when a code line starts at column 0 or there is no code.
    """
    inside: set[int] = set()
    for lit in scan_literals(source):
        first = source.count("\n", 0, lit.start)
        last = first + lit.text.count("\n")
        inside.update(range(first + 1, last + 1))
    indents = [
        _indent(line)
        for k, line in enumerate(source.splitlines())
        if k not in inside and line.strip() and not line.lstrip().startswith("#")
    ]
    return min(indents) if indents else 0


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _statement_end(lines: list[str], start: int) -> int:
    """Where a statement cut off at ``start`` (an unclosed bracket or string) ends.

    The first later line indented no deeper than it that starts a new statement (not a
    closing bracket); the end of the text when there is none.
    """
    base = _indent(lines[start])
    for k in range(start + 1, len(lines)):
        line = lines[k]
        if not line.strip():
            continue
        if (
            _indent(line) <= base
            and line.strip()[0] not in ")]}\"'"
            and (
                re.match(
                    r"\s*(def|class|async|@|if|for|while|with|try|return|[A-Za-z_][\w.]*\s*[:=(])",
                    line,
                )
            )
        ):
            return k
    return len(lines)


def _line_of(source: str, offset: int) -> int:
    return source.count("\n", 0, offset) + 1


def _runs(source: str, literals: list[Literal]) -> list[list[Literal]]:
    """Literals joined by nothing but whitespace, ``+``, line continuations or parentheses."""
    runs: list[list[Literal]] = []
    for lit in literals:
        if runs:
            gap = source[runs[-1][-1].end : lit.start]
            if re.fullmatch(r"[\s+\\()]*", gap):
                runs[-1].append(lit)
                continue
        runs.append([lit])
    return runs


def _target(source: str, start: int) -> str | None:
    line_start = source.rfind("\n", 0, start) + 1
    head = source[line_start:start]
    if not head.strip("([ \t"):
        # The literal opens a line inside brackets: look at the line that opened them.
        prev_end = line_start - 1
        prev_start = source.rfind("\n", 0, max(prev_end, 0)) + 1
        head = source[prev_start:prev_end] if prev_end > 0 else head
    m = _PROMPT_NAME.search(head)
    return m.group(1).rsplit(".", 1)[-1] if m else None


def literal_findings(
    source: str, lines: set[int] | None, lint_tree: Callable[[ast.Module, str], list[Finding]]
) -> tuple[list[Finding], int]:
    """Lint the prompt-like string literals of ``source`` (only those on ``lines``).

    Returns:
        ``(findings, literal runs linted)``.
    """
    from pipecat_fast.lint.python_source import SYSTEM_KEYWORDS, _names_prompt_text

    findings: list[Finding] = []
    linted = 0
    for run in _runs(source, scan_literals(source)):
        if linted >= MAX_LITERALS:
            break
        first_line = _line_of(source, run[0].start)
        if lines is not None and first_line not in lines:
            continue
        body = " ".join(lit.text if lit.closed else lit.text + lit.text[-1:] for lit in run)
        try:
            value = parse(body, mode="eval").body
        except (SyntaxError, ValueError, RecursionError):
            value = None
        if value is None:
            value = _fields_only(run)
            if value is None:
                continue
        name = _target(source, run[0].start)
        opening = getattr(value, "value", "")
        if isinstance(value, ast.JoinedStr) and value.values:
            opening = getattr(value.values[0], "value", "")
        if not (
            (name and (_names_prompt_text(name) or name in SYSTEM_KEYWORDS))
            or _YOU_ARE.match(str(opening))
        ):
            continue
        target = name if name and _names_prompt_text(name) else "prompt"
        snippet = f"async def _fragment():\n    {target} = {ast.unparse(value)}\n"
        try:
            tree = parse(snippet)
        except (SyntaxError, ValueError, RecursionError):
            continue
        linted += 1
        for f in lint_tree(tree, snippet):
            if f.rule in ("CB301", "CB901"):
                continue
            f.line, f.col = first_line, 1
            f.message += " (read from a string literal: the code around it does not parse)"
            findings.append(f)
    return findings, linted


def _fields_only(run: list[Literal]) -> ast.AST | None:
    """An f-string whose fields do not parse: keep the text, each field a bare name."""
    parts: list[str] = []
    for lit in run:
        raw = lit.text
        m = re.match(r"([rRbBuUfF]{0,2})('''|\"\"\"|'|\")", raw)
        if not m:
            return None
        inner = raw[m.end() : len(raw) - len(m.group(2)) if lit.closed else len(raw)]
        if "f" in m.group(1).lower():
            inner = re.sub(r"(?<!\{)\{([^{}]*)\}(?!\})", _last_name, inner)
        parts.append(inner)
    text = "".join(parts)
    try:
        return parse("f" + repr(text).replace("\\\\{", "{"), mode="eval").body
    except (SyntaxError, ValueError):
        return ast.Constant(text)


def _last_name(field: re.Match) -> str:
    names = re.findall(r"[A-Za-z_]\w*", field.group(1)) or ["value"]
    return "{" + names[-1] + "}"


def lint_unparsable(
    source: str,
    filename: str,
    error: SyntaxError,
    lint_tree: Callable[[ast.Module, str], list[Finding]],
) -> list[Finding]:
    """Findings for code that does not parse (see the module docstring)."""
    findings: list[Finding] = []
    recovered = recover(source)
    lost: set[int] | None = None
    if recovered is not None:
        tree, text, line_shift, col_shift, blanked = recovered
        for f in lint_tree(tree, text):
            f.line = max(1, f.line - line_shift)
            if line_shift:
                f.col = max(1, f.col + col_shift)
                # Lines a message names ("value computed at line 12") are the read text's.
                f.message = re.sub(
                    r"\bat line (\d+)",
                    lambda m: f"at line {max(1, int(m.group(1)) - line_shift)}",
                    f.message,
                )
                if isinstance(f.extra.get("origin_line"), int):
                    f.extra["origin_line"] = max(1, f.extra["origin_line"] - line_shift)
            findings.append(f)
        lost = blanked
    extra, literals = literal_findings(source, lost, lint_tree)
    findings.extend(extra)
    if recovered is not None:
        kept = [
            i
            for i, line in enumerate(source.splitlines(), start=1)
            if line.strip() and i not in recovered[4]
        ]
        if not kept:
            recovered = None  # every line was dropped: nothing of it was read
    read = recovered is not None or literals > 0
    what = []
    if recovered is not None:
        skipped = len(recovered[4])
        what.append(
            "the statements that parse" + (f" ({skipped} lines skipped)" if skipped else "")
        )
    if literals:
        what.append(f"{literals} prompt-like string literal(s) of the rest")
    message = f"does not parse ({error.msg}, line {error.lineno})"
    message += ": linted " + " and ".join(what) if read else ", and no prompt text could be read"
    findings.append(
        Finding(
            rule="CB901",
            severity=Severity.INFO if read else Severity.WARNING,
            message=message,
            line=error.lineno or 1,
            col=error.offset or 1,
            extra={"recovered": recovered is not None, "literals": literals},
        )
    )
    findings.sort(key=lambda f: (f.line, f.col, -f.severity))
    return findings
