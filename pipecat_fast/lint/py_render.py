"""Static rendering of prompt-building expressions into literal text and holes.

``render(expr)`` lays out what a prompt expression produces: literal text where the code
has it (string constants, f-string text, resolved templates filled by ``.format``,
``.replace`` chains, ``%``, ``string.Template`` and ``"sep".join([...])``) and a
:class:`Hole` wherever a run-time value goes. Token positions of the holes grade how early
volatile content sits. Placeholders a template keeps after filling are reported as
:class:`PlaceholderIssue`.
"""

from __future__ import annotations

import ast
import re
import string
from dataclasses import dataclass, field

from pipecat_fast.lint.findings import shorten
from pipecat_fast.lint.py_classify import Classifier, Source
from pipecat_fast.lint.py_index import ModuleIndex, Param

MAX_DEPTH = 8

PLACEHOLDER = re.compile(
    r"\{\{\s*[A-Za-z_][\w.]*\s*\}\}|\$\{[A-Za-z_]\w*\}|(?<!\{)\{[A-Z][A-Z0-9_]*\}(?!\})"
)
"""Placeholder shapes that ``.replace`` chains fill: ``{{NAME}}``, ``${NAME}``, ``{NAME}``."""


@dataclass
class Hole:
    """A run-time value in a rendered prompt.

    Attributes:
        node: The expression producing it.
        sources: Volatile sources feeding it.
    """

    node: ast.AST
    sources: list[Source]

    @property
    def stand_in(self) -> str:
        """Short text standing in for the value when counting tokens."""
        return "{" + shorten(ast.unparse(self.node), 30) + "}"


@dataclass
class PlaceholderIssue:
    """A placeholder the code leaves unfilled.

    Attributes:
        node: The call that should fill it.
        placeholder: The placeholder text, e.g. ``{{CURRENT_TIME}}``.
        message: What goes wrong.
        severity: ``"error"`` (ships literally or raises) or ``"warning"``.
    """

    node: ast.AST
    placeholder: str
    message: str
    severity: str = "error"


Segment = str | Hole


@dataclass
class Rendered:
    """A rendered prompt expression."""

    segments: list[Segment] = field(default_factory=list)

    @property
    def literal(self) -> str | None:
        """The whole text when it has no holes, else ``None``."""
        if all(isinstance(s, str) for s in self.segments):
            return "".join(self.segments)  # type: ignore[arg-type]
        return None

    def skeleton(self) -> tuple[str, list[tuple[Hole, int, int]]]:
        """Text with stand-ins for holes, and each hole's (start, end) in it."""
        parts: list[str] = []
        holes: list[tuple[Hole, int, int]] = []
        pos = 0
        for s in self.segments:
            text = s if isinstance(s, str) else s.stand_in
            if isinstance(s, Hole):
                holes.append((s, pos, pos + len(text)))
            parts.append(text)
            pos += len(text)
        return "".join(parts), holes


def _concat(*parts: list[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for p in parts:
        for s in p:
            if isinstance(s, str) and out and isinstance(out[-1], str):
                out[-1] = out[-1] + s
            elif not (isinstance(s, str) and not s):
                out.append(s)
    return out


class Renderer:
    """Renders expressions of one module; collects placeholder issues on the way.

    Args:
        index: The module index.
        classifier: Classifier over the same index.
    """

    def __init__(self, index: ModuleIndex, classifier: Classifier) -> None:
        self.index = index
        self.classifier = classifier
        self.issues: dict[int, PlaceholderIssue] = {}

    def hole(self, node: ast.AST) -> list[Segment]:
        """A single hole for ``node``."""
        return [Hole(node, self.classifier.classify(node))]

    def render(self, node: ast.AST, depth: int = 0, seen: frozenset = frozenset()) -> Rendered:
        """Render an expression."""
        return Rendered(self._render(node, depth, seen))

    def _render(self, node: ast.AST, depth: int, seen: frozenset) -> list[Segment]:
        if depth > MAX_DEPTH or id(node) in seen:
            return self.hole(node)
        seen = seen | {id(node)}
        r = lambda n: self._render(n, depth + 1, seen)  # noqa: E731
        if isinstance(node, ast.Constant):
            return [node.value] if isinstance(node.value, str) else self.hole(node)
        if isinstance(node, ast.JoinedStr):
            parts: list[list[Segment]] = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append([str(v.value)])
                elif (
                    isinstance(v, ast.FormattedValue)
                    and v.format_spec is None
                    and v.conversion == -1
                ):
                    parts.append(r(v.value))
                else:
                    parts.append(self.hole(v))
            return _concat(*parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return _concat(r(node.left), r(node.right))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return self._percent(node, r)
        values: list = []
        if isinstance(node, ast.Name):
            values = self.index.resolve_name(node)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            values = self.index.resolve_self_attr(node)
        if isinstance(node, (ast.Name, ast.Attribute)):
            if len(values) == 1 and not isinstance(values[0], Param):
                inner = r(values[0])
                # A value that is not text we can lay out stays a hole on the name, so the
                # name's own meaning (client_id, caller_phone) is not lost.
                if not (len(inner) == 1 and isinstance(inner[0], Hole)):
                    return inner
            return self.hole(node)
        if isinstance(node, ast.Call):
            return self._call(node, r)
        return self.hole(node)

    # -- calls ------------------------------------------------------------------------

    def _call(self, node: ast.Call, r) -> list[Segment]:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if isinstance(func, ast.Attribute) and name in ("strip", "lstrip", "rstrip"):
            return r(func.value)
        if name in ("dedent", "cleandoc") and node.args:
            return r(node.args[0])
        if isinstance(func, ast.Name) and name == "str" and node.args:
            return r(node.args[0])
        if not isinstance(func, ast.Attribute):
            return self.hole(node)
        if name == "format" and not any(k.arg is None for k in node.keywords):
            return self._format(node, r)
        if name == "replace" and len(node.args) >= 2:
            return self._replace_chain(node, r)
        if name == "join" and node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
            sep = r(func.value)
            parts: list[list[Segment]] = []
            for i, elt in enumerate(node.args[0].elts):
                if i:
                    parts.append(list(sep))
                parts.append(r(elt))
            return _concat(*parts)
        if name in ("substitute", "safe_substitute"):
            return self._template(node, r, safe=name == "safe_substitute")
        return self.hole(node)

    def _format(self, node: ast.Call, r) -> list[Segment]:
        template = Rendered(r(node.func.value)).literal  # type: ignore[union-attr]
        if template is None:
            return self.hole(node)
        kwargs = {k.arg: k.value for k in node.keywords if k.arg}
        try:
            fields = list(string.Formatter().parse(template))
        except ValueError:
            return self.hole(node)
        out: list[list[Segment]] = []
        auto = 0
        for literal, field_name, spec, conv in fields:
            out.append([literal])
            if field_name is None:
                continue
            base = re.split(r"[.\[]", field_name, maxsplit=1)[0]
            value: ast.AST | None
            if base == "":
                value = node.args[auto] if auto < len(node.args) else None
                auto += 1
            elif base.isdigit():
                i = int(base)
                value = node.args[i] if i < len(node.args) else None
            else:
                value = kwargs.get(base)
            if value is None:
                if not any(isinstance(a, ast.Starred) for a in node.args):
                    self.issues.setdefault(
                        id(node),
                        PlaceholderIssue(
                            node,
                            "{" + field_name + "}",
                            f"`.format()` gets no value for `{{{field_name}}}`: raises "
                            "KeyError/IndexError at run time",
                        ),
                    )
                out.append(["{" + field_name + "}"])
                continue
            if spec or conv or base != field_name:
                out.append(self.hole(value))
            else:
                out.append(r(value))
        return _concat(*out)

    def _replace_chain(self, node: ast.Call, r) -> list[Segment]:
        chain: list[ast.Call] = []
        cur: ast.AST = node
        while (
            isinstance(cur, ast.Call)
            and isinstance(cur.func, ast.Attribute)
            and cur.func.attr == "replace"
            and len(cur.args) >= 2
        ):
            chain.append(cur)
            cur = cur.func.value
        segments = r(cur)
        targets: list[str] = []
        missing: list[str] = []
        for call in reversed(chain):
            old = call.args[0]
            if not (isinstance(old, ast.Constant) and isinstance(old.value, str) and old.value):
                return self.hole(node)
            targets.append(old.value)
            new = r(call.args[1])
            rebuilt: list[list[Segment]] = []
            found = False
            for s in segments:
                if isinstance(s, str) and old.value in s:
                    found = True
                    pieces = s.split(old.value)
                    for i, piece in enumerate(pieces):
                        if i:
                            rebuilt.append(list(new))
                        rebuilt.append([piece])
                else:
                    rebuilt.append([s])
            if not found:
                missing.append(old.value)
            segments = _concat(*rebuilt)
        if any(PLACEHOLDER.fullmatch(t) for t in targets):
            for s in segments:
                if not isinstance(s, str):
                    continue
                for m in PLACEHOLDER.finditer(s):
                    hint = ""
                    if missing:
                        hint = f"; the chain replaces {', '.join(f'`{t}`' for t in missing)}, "
                        hint += "which the template does not contain"
                    self.issues.setdefault(
                        id(node) ^ hash(m.group()),
                        PlaceholderIssue(
                            node,
                            m.group(),
                            f"`{m.group()}` is never replaced and ships to the model literally"
                            + hint,
                        ),
                    )
        return segments

    def _percent(self, node: ast.BinOp, r) -> list[Segment]:
        template = Rendered(r(node.left)).literal
        if template is None:
            return self.hole(node)
        right = node.right
        values: list[ast.AST] = list(right.elts) if isinstance(right, ast.Tuple) else [right]
        named = (
            {
                k.value: v
                for k, v in zip(right.keys, right.values, strict=True)
                if isinstance(k, ast.Constant)
            }
            if isinstance(right, ast.Dict)
            else {}
        )
        out: list[list[Segment]] = []
        pos = 0
        i = 0
        for m in re.finditer(r"%(?:\((\w+)\))?[-#0 +]*\d*(?:\.\d+)?[sdrifa%]", template):
            out.append([template[pos : m.start()]])
            pos = m.end()
            if m.group() == "%%":
                out.append(["%"])
                continue
            value = (
                named.get(m.group(1)) if m.group(1) else (values[i] if i < len(values) else None)
            )
            i += 0 if m.group(1) else 1
            out.append(
                r(value) if value is not None and m.group().endswith("s") else self.hole(node)
            )
        out.append([template[pos:]])
        return _concat(*out)

    def _template(self, node: ast.Call, r, safe: bool) -> list[Segment]:
        func = node.func
        assert isinstance(func, ast.Attribute)
        base = func.value
        if not (
            isinstance(base, ast.Call)
            and getattr(base.func, "id", getattr(base.func, "attr", "")) == "Template"
            and base.args
        ):
            return self.hole(node)
        template = Rendered(r(base.args[0])).literal
        if template is None:
            return self.hole(node)
        kwargs = {k.arg: k.value for k in node.keywords if k.arg}
        if any(k.arg is None for k in node.keywords) or node.args:
            return self.hole(node)
        out: list[list[Segment]] = []
        pos = 0
        for m in re.finditer(r"\$(?:(\$)|\{([_a-zA-Z]\w*)\}|([_a-zA-Z]\w*))", template):
            out.append([template[pos : m.start()]])
            pos = m.end()
            if m.group(1):
                out.append(["$"])
                continue
            key = m.group(2) or m.group(3)
            if key in kwargs:
                out.append(r(kwargs[key]))
                continue
            self.issues.setdefault(
                id(node) ^ hash(key),
                PlaceholderIssue(
                    node,
                    m.group(),
                    f"`{m.group()}` has no value: "
                    + ("ships to the model literally" if safe else "raises KeyError at run time"),
                ),
            )
            out.append([m.group()])
        out.append([template[pos:]])
        return _concat(*out)
