"""Static rendering of prompt-building expressions into literal text and holes.

``render(expr)`` lays out what a prompt expression produces: literal text where the code
has it and a :class:`Hole` wherever a run-time value goes. It evaluates what the code
builds from literals: string constants, f-string text, ``+`` and ``*`` (``"..." * 120``),
``"sep".join(...)`` over lists, tuples, ``[...] * n``, lists grown with ``append``/
``extend`` and comprehensions over literal sequences, templates filled by ``.format``/
``.format_map``, ``.replace`` chains, ``%``, ``string.Template`` and Jinja's
``Template(...).render(...)``, ``textwrap.dedent``/``.strip()``, and the ``return`` of
functions the linted code defines (with the call's arguments in place of the parameters),
also across the modules of a :class:`~pipecat_fast.lint.project.Project`.

What it cannot evaluate stays a hole. A hole knows its size only when its value is a
volatile source of known shape (a timestamp, a UUID); otherwise its size is unknown and
token positions around it are bounds, never guesses. Placeholders a template keeps after
filling are reported as :class:`PlaceholderIssue`.
"""

from __future__ import annotations

import ast
import os
import re
import string
import textwrap
from dataclasses import dataclass, field

from pipecat_fast.lint.findings import shorten
from pipecat_fast.lint.py_classify import (
    SAMPLE_NOW,
    Classifier,
    ClockValue,
    Source,
    bind_arguments,
    function_returns,
)
from pipecat_fast.lint.py_index import ModuleIndex, Param

MAX_DEPTH = 12

MAX_RENDER_CHARS = 2_000_000
"""A rendered expression longer than this is left a hole of unknown size."""

MAX_ELEMENTS = 10_000
"""At most this many list elements are laid out by ``join``."""

PLACEHOLDER = re.compile(
    r"\{\{\s*[A-Za-z_][\w.]*\s*\}\}|\$\{[A-Za-z_]\w*\}|(?<!\{)\{[A-Z][A-Z0-9_]*\}(?!\})"
)
"""Placeholder shapes that ``.replace`` chains fill: ``{{NAME}}``, ``${NAME}``, ``{NAME}``."""

_TEMPLATE_FIELD = re.compile(r"\{\{.*\}\}|\$\{.*\}|\{[^{}\s]+\}")
"""A ``.replace`` target shaped like a template field (``{{ $now }}``, ``${name}``, ``{NAME}``)."""

_JINJA = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}|\{%-?.*?-?%\}|\{#.*?#\}", re.DOTALL)


@dataclass
class Hole:
    """A run-time value in a rendered prompt.

    Attributes:
        node: The expression producing it.
        sources: Volatile sources feeding it.
        sample: Text of the same size as the value, when that is known (the value is a
            timestamp, a UUID...); ``None`` when its size is unknown.
        via: Node in the linted module through which the value arrived (an imported name,
            a call), when ``node`` itself lives in another module.
    """

    node: ast.AST
    sources: list[Source]
    sample: str | None = None
    via: ast.AST | None = None
    name: str | None = None
    """What to call it in messages, when not its expression (a template placeholder)."""

    @property
    def stand_in(self) -> str:
        """Text standing in for the value when counting tokens ("" when the size is unknown)."""
        return self.sample if self.sample is not None else ""

    @property
    def label(self) -> str:
        """Short source text of the expression, for messages."""
        if self.name is not None:
            return self.name
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


MAX_RETURNS = 4
"""A function with more returns than this, or a name set in more branches, is not laid out
(its value stays a hole)."""


def _text_parts(node: ast.List | ast.Tuple) -> bool:
    """A list of prompt sentences (Gemini's ``system_instruction=[...]`` parts).

    Every element a string or f-string, and at least one with a sentence of its own (so a
    list of words, ``["tides", "storms"]``, a loop's items, stays a list).
    """
    if not node.elts:
        return False
    texts = []
    for e in node.elts:
        if isinstance(e, ast.Constant) and isinstance(e.value, str):
            texts.append(e.value)
        elif isinstance(e, ast.JoinedStr):
            texts.append("".join(str(v.value) for v in e.values if isinstance(v, ast.Constant)))
        else:
            return False
    return any(len(t.split()) >= SENTENCE_WORDS for t in texts)


SENTENCE_WORDS = 4
"""Words that make a list element a sentence of a prompt rather than an item."""


def _holes_then_length(segments: list[Segment]) -> tuple[bool, int]:
    """Sort key among alternative renders: one with a value in it first, then the longest."""
    return any(isinstance(s, Hole) for s in segments), _length(segments)


def _concat(*parts: list[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for p in parts:
        for s in p:
            if isinstance(s, str) and out and isinstance(out[-1], str):
                out[-1] = out[-1] + s
            elif not (isinstance(s, str) and not s):
                out.append(s)
    return out


def _tests_only(test: ast.AST, name: str) -> bool:
    """Whether a comprehension's ``if`` reads nothing but the element ``name``."""
    names = [n for n in ast.walk(test) if isinstance(n, ast.Name)]
    calls = [n for n in ast.walk(test) if isinstance(n, ast.Call)]
    return (
        bool(names)
        and all(n.id == name for n in names)
        and all(isinstance(c.func, ast.Attribute) for c in calls)
    )


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _length(segments: list[Segment]) -> int:
    return sum(len(s) if isinstance(s, str) else len(s.stand_in) for s in segments)


def sample_text(sources: list[Source]) -> str | None:
    """Text the size of a hole's value, when the hole *is* one source of known shape."""
    if len(sources) != 1:
        return None
    s = sources[0]
    if s.inside or s.sample is None:
        return None
    try:
        value = s.sample.at(SAMPLE_NOW) if isinstance(s.sample, ClockValue) else s.sample
        return format(value)
    except Exception:
        return None


class _Unknown(Exception):
    """A sequence whose elements cannot be laid out."""


class Renderer:
    """Renders expressions of one module; collects placeholder issues on the way.

    Args:
        index: The module index.
        classifier: Classifier over the same index (shares its parameter bindings).
    """

    def __init__(self, index: ModuleIndex, classifier: Classifier) -> None:
        self.index = index
        self.classifier = classifier
        self.issues: dict[int, PlaceholderIssue] = {}
        self._via: list[ast.AST] = []
        self.visited: set[int] = set()
        """Every node rendered so far (what some sink's text is made of)."""
        self._chains: list[tuple[ast.AST, list[str], list[str]]] = []
        self.filled_by_replace = False
        """Set when a render met a ``.replace("{{name}}", value)`` chain or a ``.format``
        it could lay out: the text was a template the code in view fills (what the chain
        or the call leaves is text, not a slot)."""

    def ix(self, node: ast.AST) -> ModuleIndex:
        """The index of the module ``node`` belongs to."""
        return self.classifier.ix(node)

    def hole(self, node: ast.AST) -> list[Segment]:
        """A single hole for ``node``."""
        sources = self.classifier.classify(node)
        via = self._via[0] if self._via else None
        return [Hole(node, sources, sample_text(sources), via)]

    def render(self, node: ast.AST, depth: int = 0, seen: frozenset = frozenset()) -> Rendered:
        """Render an expression; placeholders a ``.replace`` chain left are issues."""
        outer = self._chains
        self._chains = []
        try:
            segments = self._render(node, depth, seen)
            self._unreplaced(segments)
        finally:
            self._chains = outer
        return Rendered(segments)

    def _unreplaced(self, segments: list[Segment]) -> None:
        """Report placeholders still in the text after every ``.replace`` of the render."""
        targets = [t for _n, ts, _m in self._chains for t in ts]
        if not any(PLACEHOLDER.fullmatch(t) for t in targets):
            return
        node = self._chains[-1][0]
        missing = [t for _n, _ts, ms in self._chains for t in ms]
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
                        f"`{m.group()}` is never replaced and ships to the model literally" + hint,
                    ),
                )

    def _render(self, node: ast.AST, depth: int, seen: frozenset) -> list[Segment]:
        if depth > MAX_DEPTH or id(node) in seen:
            return self.hole(node)
        seen = seen | {id(node)}
        self.visited.add(id(node))
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
                    number = self._literal_node(v.value, (ast.Constant,))
                    if (
                        isinstance(number, ast.Constant)
                        and type(number.value) in (int, float)
                        and not self.ix(v.value).updates_of(v.value)
                    ):
                        parts.append([str(number.value)])  # a numeric constant, as formatted
                    else:
                        parts.append(r(v.value))
                else:
                    parts.append(self.hole(v))
            return _concat(*parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return _concat(r(node.left), r(node.right))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            return self._repeat(node, r)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return self._percent(node, r)
        if isinstance(node, ast.Subscript):
            value = self._subscript(node)
            return r(value) if value is not None else self.hole(node)
        if isinstance(node, ast.Name):
            return self._name(node, r)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, r)
        if isinstance(node, ast.Call):
            return self._call(node, r)
        if isinstance(node, (ast.List, ast.Tuple)):
            return self._messages(node, r)
        if isinstance(node, (ast.IfExp, ast.BoolOp)):
            chosen = self._optional(node)
            if chosen is not None:
                return r(chosen)
            if isinstance(node, ast.IfExp):
                # `text.format(**kw) if kw else text`: laid out like an `if` that sets a
                # name in both branches (the branch with a value in it, else the longest).
                renders = [r(node.body), r(node.orelse)]
                if all(self._laid_out(inner) for inner in renders):
                    return max(renders, key=_holes_then_length)
            return self.hole(node)
        return self.hole(node)

    def _optional(self, node: ast.IfExp | ast.BoolOp) -> ast.AST | None:
        """The branch an optional parameter's fallback idiom takes, if it is one.

        ``t if t is not None else DEFAULT``, ``DEFAULT if t is None else t``, ``t or
        DEFAULT``: with ``t`` a parameter that defaults to ``None`` (or ``""``) and no
        caller in view passing another value, the text is ``DEFAULT``; a caller in view
        that passes one makes it ``t``.
        """
        if isinstance(node, ast.BoolOp):
            if not isinstance(node.op, ast.Or) or len(node.values) != 2:
                return None
            tested, given, fallback = node.values[0], node.values[0], node.values[1]
        else:
            test = node.test
            if (
                isinstance(test, ast.Compare)
                and len(test.ops) == 1
                and isinstance(test.ops[0], (ast.Is, ast.IsNot, ast.Eq, ast.NotEq))
                and isinstance(test.comparators[0], ast.Constant)
                and test.comparators[0].value is None
            ):
                tested = test.left
                is_none = isinstance(test.ops[0], (ast.Is, ast.Eq))
            elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                tested, is_none = test.operand, True
            else:
                tested, is_none = test, False
            given, fallback = (node.orelse, node.body) if is_none else (node.body, node.orelse)
        if not (
            isinstance(tested, ast.Name) and isinstance(given, ast.Name) and given.id == tested.id
        ):
            return None
        values = self.ix(tested).resolve_name(tested)
        if len(values) != 1 or not isinstance(values[0], Param):
            return None
        bound = self.classifier.bindings.get(id(values[0].arg))
        if bound is None:
            bound = _default_of(values[0])
        if isinstance(bound, ast.Constant) and bound.value in (None, ""):
            return fallback
        return given if bound is not None else None

    def _messages(self, node: ast.List | ast.Tuple, r) -> list[Segment]:
        """A list of chat messages as the text a provider caches (contents in order)."""
        from pipecat_fast.lint.python_source import message_content

        if _text_parts(node):
            # Gemini's `system_instruction=[...]` (a list of text parts): one text, in order.
            texts = [r(e) for e in node.elts]
            joined: list[list[Segment]] = []
            for i, text in enumerate(texts):
                joined.extend([["\n"], text] if i else [text])
            return _concat(*joined)
        parts: list[list[Segment]] = []
        for e in node.elts:
            content = message_content(e)
            if content is None:
                if not isinstance(e, ast.Starred):
                    return self.hole(node)
                # `*history`: the conversation sent as messages, as it should be; its size
                # is unknown.
                parts.append([Hole(e.value, [], None, self._via[0] if self._via else None)])
                continue
            parts.append([f"{_role(e)}: "])
            parts.append(r(content))
            parts.append(["\n"])
        return _concat(*parts) if parts else self.hole(node)

    # -- names ------------------------------------------------------------------------

    def _laid_out(self, inner: list[Segment]) -> bool:
        # A value that is not text we can lay out stays a hole on the name, so the name's
        # own meaning (client_id, caller_phone) is not lost.
        return not (len(inner) == 1 and isinstance(inner[0], Hole))

    def _name(self, node: ast.Name, r) -> list[Segment]:
        bound_name = self.classifier.names.get(node.id)
        if bound_name is not None:
            return r(bound_name)
        ix = self.ix(node)
        values = ix.resolve_name(node)
        if len(values) == 1 and isinstance(values[0], Param):
            bound = self.classifier.bindings.get(id(values[0].arg))
            if bound is not None:
                inner = r(bound)
                return inner if self._laid_out(inner) else self.hole(node)
            return self.hole(node)
        if len(values) == 1 and not ix.shuffles_of(node):
            inner = r(values[0])
            appends = ix.text_appends_of(node, getattr(values[0], "lineno", 0))
            if appends is None:
                return self.hole(node)
            if appends:
                # `identity = f"You are {name}"`, then `identity += f"...{now}"`: the text
                # built piece by piece, in order (every `if`'s piece counts).
                if self._laid_out(inner):
                    base = inner
                else:
                    # The name's hole (its meaning, `base_prompt`, is kept) with what the
                    # first value holds; the appended pieces follow it in order.
                    sources = self.classifier.classify(values[0])
                    via = self._via[0] if self._via else None
                    base = [Hole(node, sources, sample_text(sources), via)]
                return _concat(base, *(r(a.value) for a in appends))
            if self._laid_out(inner):
                return inner
            return self.hole(node)
        if 1 < len(values) <= MAX_RETURNS and not any(isinstance(v, Param) for v in values):
            # Set in each branch of an `if` (`system_prompt = f"{system_prompt}...{now}"` in
            # both): laid out by the longest branch with a value in it, when every branch
            # can be laid out (a constant branch hides nothing).
            if not ix.shuffles_of(node) and ix.text_appends_of(node, 0) == []:
                renders = [r(v) for v in values]
                if all(self._laid_out(inner) for inner in renders):
                    return max(renders, key=_holes_then_length)
        if not values and self.classifier.external(node):
            value = self.classifier.imported_value(node)
            if value is not None and not isinstance(
                value, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            ):
                return self._through(node, value, r)
        return self.hole(node)

    def _through(self, entry: ast.AST, value: ast.AST, r) -> list[Segment]:
        """Render a value from another module, holes reported at ``entry``."""
        pushed = self.index.owns(entry)
        if pushed:
            self._via.append(entry)
        try:
            inner = r(value)
        finally:
            if pushed:
                self._via.pop()
        return inner if self._laid_out(inner) else self.hole(entry)

    def _attribute(self, node: ast.Attribute, r) -> list[Segment]:
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            values = self.ix(node).resolve_self_attr(node)
            if self.ix(node).grown_self_attr(node):
                values = []  # a list the object keeps appending to: not its first value
            if len(values) == 1 and not isinstance(values[0], Param):
                inner = r(values[0])
                if self._laid_out(inner):
                    return inner
            return self.hole(node)
        value = self.classifier.module_attribute(node)
        if value is not None and not isinstance(
            value, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ):
            return self._through(node, value, r)
        return self.hole(node)

    def _value_of(self, node: ast.AST) -> ast.AST | None:
        """The expression a name (or ``self.x``, or an imported name) stands for, if one."""
        if isinstance(node, ast.Name):
            if node.id in self.classifier.names:
                return self.classifier.names[node.id]
            values = self.ix(node).resolve_name(node)
            if len(values) == 1:
                v = values[0]
                if isinstance(v, Param):
                    return self.classifier.bindings.get(id(v.arg))
                return v
            if not values:
                return self.classifier.imported_value(node)
            return None
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                if self.ix(node).grown_self_attr(node):
                    return None  # a list the object keeps appending to: not its first value
                values = self.ix(node).resolve_self_attr(node)
                return values[0] if len(values) == 1 else None
            return self.classifier.module_attribute(node)
        return None

    def _literal_node(self, node: ast.AST, kinds: tuple, hops: int = 4) -> ast.AST | None:
        """Follow names to a node of one of ``kinds`` (a dict or list literal...)."""
        for _ in range(hops):
            if isinstance(node, kinds):
                return node
            nxt = self._value_of(node)
            if nxt is None:
                return None
            node = nxt
        return node if isinstance(node, kinds) else None

    def _int(self, node: ast.AST) -> int | None:
        node = self._literal_node(node, (ast.Constant,)) or node
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        return None

    def _subscript(self, node: ast.Subscript) -> ast.AST | None:
        """``D["key"]`` of a dict literal, ``L[i]`` of a list literal: the element's node."""
        container = self._literal_node(node.value, (ast.Dict, ast.List, ast.Tuple))
        key = node.slice
        if isinstance(container, ast.Dict) and isinstance(key, ast.Constant):
            for k, v in zip(container.keys, container.values, strict=True):
                if isinstance(k, ast.Constant) and k.value == key.value:
                    # `state = {"customer_name": None}`: a slot the call fills in later,
                    # not the text "None".
                    return None if _is_none(v) else v
        if isinstance(container, (ast.List, ast.Tuple)):
            i = self._int(key)
            if i is not None and -len(container.elts) <= i < len(container.elts):
                elt = container.elts[i]
                return None if isinstance(elt, ast.Starred) else elt
        return None

    # -- * and sequences ----------------------------------------------------------------

    def _repeat(self, node: ast.BinOp, r) -> list[Segment]:
        left_n, right_n = self._int(node.left), self._int(node.right)
        times, text = (right_n, node.left) if right_n is not None else (left_n, node.right)
        if times is None:
            return self.hole(node)
        segments = r(text)
        if not segments or not self._laid_out(segments):
            return self.hole(node)
        if times <= 0:
            return []
        if _length(segments) * times > MAX_RENDER_CHARS:
            return self.hole(node)
        return _concat(*([segments] * times))

    def elements(self, node: ast.AST, depth: int = 0) -> list[tuple[ast.AST, dict]]:
        """Elements of a sequence expression, each with parameter bindings to apply.

        Raises:
            _Unknown: If the elements cannot be laid out statically.
        """
        if depth > 6:
            raise _Unknown
        if isinstance(node, (ast.List, ast.Tuple)):
            out: list[tuple[ast.AST, dict]] = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    out.extend(self.elements(e.value, depth + 1))
                else:
                    out.append((e, {}))
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.elements(node.left, depth + 1) + self.elements(node.right, depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            times = self._int(node.right)
            seq = node.left
            if times is None:
                times, seq = self._int(node.left), node.right
            if times is None:
                raise _Unknown
            items = self.elements(seq, depth + 1)
            if len(items) * max(times, 0) > MAX_ELEMENTS:
                raise _Unknown
            return items * max(times, 0)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)) and len(node.generators) == 1:
            gen = node.generators[0]
            if gen.is_async or not isinstance(gen.target, ast.Name):
                raise _Unknown
            if not all(_tests_only(test, gen.target.id) for test in gen.ifs):
                # (`"\n".join(b for b in bits if b)`: a test of the element alone drops
                # empty pieces, which take no room; any other test picks which ones ship.)
                raise _Unknown
            items = self.elements(gen.iter, depth + 1)
            return [(node.elt, {gen.target.id: item}) for item, _b in items]
        if isinstance(node, ast.Name):
            ix = self.ix(node)
            values = ix.resolve_name(node)
            if len(values) == 1 and not isinstance(values[0], Param):
                if ix.shuffles_of(node):
                    raise _Unknown
                items = self.elements(values[0], depth + 1)
                line = getattr(values[0], "lineno", 0)
                for grow in ix.growth_of(node, line):
                    if ix.in_loop(grow, outside=node):
                        raise _Unknown  # grown once per loop turn: how often is unknown
                    items = items + self._growth(grow, depth)
                return items
            value = self._value_of(node)
            if value is not None:
                return self.elements(value, depth + 1)
            raise _Unknown
        if isinstance(node, ast.Attribute) or isinstance(node, ast.Subscript):
            value = self._value_of(node) if isinstance(node, ast.Attribute) else None
            value = (
                value
                if value is not None
                else (self._subscript(node) if isinstance(node, ast.Subscript) else None)
            )
            if value is None:
                raise _Unknown
            return self.elements(value, depth + 1)
        raise _Unknown

    def _growth(self, grow: ast.AST, depth: int) -> list[tuple[ast.AST, dict]]:
        if isinstance(grow, ast.AugAssign):
            return self.elements(grow.value, depth + 1)
        assert isinstance(grow, ast.Call) and isinstance(grow.func, ast.Attribute)
        if grow.func.attr == "append" and grow.args:
            return [(grow.args[0], {})]
        if grow.func.attr == "extend" and grow.args:
            return self.elements(grow.args[0], depth + 1)
        raise _Unknown  # insert(): position in the list not tracked

    def _join(self, node: ast.Call, r) -> list[Segment]:
        func = node.func
        assert isinstance(func, ast.Attribute)
        try:
            items = self.elements(node.args[0])
        except _Unknown:
            return self.hole(node)
        if len(items) > MAX_ELEMENTS:
            return self.hole(node)
        sep = r(func.value)
        parts: list[list[Segment]] = []
        total = 0
        for i, (elt, names) in enumerate(items):
            if i:
                parts.append(list(sep))
            piece = self._with_names(elt, names, r)
            total += _length(piece)
            if total > MAX_RENDER_CHARS:
                return self.hole(node)
            parts.append(piece)
        return _concat(*parts)

    def _with_names(self, elt: ast.AST, names: dict, r) -> list[Segment]:
        """Render a comprehension element with its loop variable bound to one item."""
        if not names:
            return r(elt)
        saved = self.classifier.names
        self.classifier.names = {**saved, **names}
        try:
            return self._render(elt, 0, frozenset())
        finally:
            self.classifier.names = saved

    # -- calls ------------------------------------------------------------------------

    def _call(self, node: ast.Call, r) -> list[Segment]:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if isinstance(func, ast.Attribute) and name in ("strip", "lstrip", "rstrip"):
            inner = r(func.value)
            if node.args:
                return inner
            return _strip(inner, name)
        if name in ("dedent", "cleandoc") and node.args:
            inner = r(node.args[0])
            text = Rendered(inner).literal
            if text is not None:
                return [textwrap.dedent(text) if name == "dedent" else _cleandoc(text)]
            return inner
        if isinstance(func, ast.Name) and name == "str" and node.args:
            return r(node.args[0])
        fdef, is_method = self.classifier._callee(node)  # noqa: SLF001 - same package
        if fdef is not None:
            return self._function_call(node, fdef, is_method, r)
        text = self._file_text(node)
        if text is not None:
            return [text]
        if not isinstance(func, ast.Attribute):
            return self.hole(node)
        if name == "format":
            return self._format(node, r, self._mapping(node.keywords, None))
        if name == "format_map" and len(node.args) == 1:
            return self._format(node, r, self._mapping([], node.args[0]))
        if name == "replace" and len(node.args) >= 2:
            return self._replace_chain(node, r)
        if name == "join" and len(node.args) == 1:
            return self._join(node, r)
        if name in ("substitute", "safe_substitute"):
            return self._template(node, r, safe=name == "safe_substitute")
        if name == "render":
            return self._jinja(node, r)
        return self.hole(node)

    # -- files the code reads ------------------------------------------------------------

    def path_of(self, node: ast.AST, depth: int = 0) -> str | None:
        """The file path an expression builds (``Path(__file__).parent / "x.md"``...)."""
        if depth > 12:
            return None
        p = lambda n: self.path_of(n, depth + 1)  # noqa: E731
        ix = self.ix(node)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            if node.id == "__file__":
                return ix.path
            value = self._value_of(node)
            return p(value) if value is not None else None
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                piece = p(v.value if isinstance(v, ast.FormattedValue) else v)
                if piece is None:
                    return None
                parts.append(piece)
            return "".join(parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Add)):
            left, right = p(node.left), p(node.right)
            if left is None or right is None:
                return None
            return os.path.join(left, right) if isinstance(node.op, ast.Div) else left + right
        if isinstance(node, ast.Attribute) and node.attr == "parent":
            base = p(node.value)
            return os.path.dirname(base) if base is not None else None
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            dotted = ix.dotted(func) or ""
            args = [p(a) for a in node.args]
            if name in ("Path", "PurePath", "PosixPath") or dotted.endswith("path.join"):
                if not args or any(a is None for a in args):
                    return None
                return os.path.join(*args)  # type: ignore[arg-type]
            if dotted.endswith("path.dirname") and args and args[0] is not None:
                return os.path.dirname(args[0])
            if dotted.endswith(("path.abspath", "path.realpath", "path.normpath")) and args:
                return args[0]
            if name == "str" and args:
                return args[0]
            if isinstance(func, ast.Attribute):
                base = p(func.value)
                if name in ("resolve", "absolute", "expanduser") and base is not None:
                    return base
                if name == "joinpath" and base is not None and all(a is not None for a in args):
                    return os.path.join(base, *args)  # type: ignore[arg-type]
                if name == "files" and dotted.endswith("resources.files"):
                    return ""  # a package's folder: resolved by the file's tail
        return None

    def _file_text(self, node: ast.Call) -> str | None:
        """The content of a text file of the tree that ``node`` reads, if it reads one."""
        project = self.index.project
        func = node.func
        if project is None or not isinstance(func, ast.Attribute):
            return None
        path = None
        if func.attr == "read_text":
            path = self.path_of(func.value)
        elif func.attr == "read" and not node.args:
            opener = self._literal_node(func.value, (ast.Call,))
            if (
                isinstance(opener, ast.Call)
                and getattr(opener.func, "id", getattr(opener.func, "attr", "")) == "open"
                and opener.args
            ):
                path = self.path_of(opener.args[0])
        if not path:
            return None
        return project.find_text(path, self.ix(node).path)

    def _template_by_fields(self, fields: set[str], pattern: str) -> str | None:
        """The one text file of the tree with all of ``fields`` as placeholders, if any."""
        project = self.index.project
        if project is None or not fields:
            return None
        return project.template_with_fields(fields, pattern)

    def _function_call(self, node: ast.Call, fdef: ast.AST, is_method: bool, r) -> list[Segment]:
        returns = function_returns(fdef)
        if not returns or len(returns) > MAX_RETURNS:
            return self.hole(node)
        saved = self.classifier.bindings
        self.classifier.bindings = {**saved, **bind_arguments(fdef, node, is_method)}
        entry = node if self.index.owns(node) and not self.index.owns(fdef) else None
        if entry is not None:
            self._via.append(entry)
        try:
            renders = [r(value) for value in returns]
        finally:
            self.classifier.bindings = saved
            if entry is not None:
                self._via.pop()
        laid_out = [inner for inner in renders if self._laid_out(inner)]
        if len(returns) > 1 and len(laid_out) < len(returns):
            return self.hole(node)
        # Several returns (`if not content: return f"...short fallback..."`, then the
        # prompt): the longest with a value in it is the prompt the function builds.
        return max(laid_out, key=_holes_then_length) if laid_out else self.hole(node)

    def _mapping(self, keywords: list[ast.keyword], mapping: ast.AST | None):
        """Names to value nodes for ``.format(**d, k=v)`` / ``.format_map(d)``.

        Returns:
            ``(values, complete)``: ``complete`` is False when part of the mapping is not
            known (``**kwargs`` of unknown content).
        """
        values: dict[str, ast.AST] = {}
        complete = True
        sources = [mapping] if mapping is not None else []
        sources += [k.value for k in keywords if k.arg is None]
        for src in sources:
            d = self._literal_node(src, (ast.Dict, ast.Call))
            if isinstance(d, ast.Dict):
                for k, v in zip(d.keys, d.values, strict=True):
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        values[k.value] = v
                    else:
                        complete = False
            elif isinstance(d, ast.Call) and getattr(d.func, "id", "") == "dict" and not d.args:
                values.update({k.arg: k.value for k in d.keywords if k.arg})
                complete = complete and all(k.arg for k in d.keywords)
            else:
                complete = False
        values.update({k.arg: k.value for k in keywords if k.arg})
        return values, complete

    def _format(self, node: ast.Call, r, mapping) -> list[Segment]:
        kwargs, complete = mapping
        template = r(node.func.value)  # type: ignore[union-attr]
        if not self._laid_out(template):
            found = self._template_by_fields(set(kwargs), "{{{}}}")
            if found is None:
                return self.hole(node)
            template = [found]
        out: list[list[Segment]] = []
        auto = 0
        positional = node.args if node.func.attr == "format" else []  # type: ignore[union-attr]
        for seg in template:
            if isinstance(seg, Hole):
                out.append([seg])
                continue
            try:
                fields = list(string.Formatter().parse(seg))
            except ValueError:
                return self.hole(node)
            for literal, field_name, spec, conv in fields:
                out.append([literal])
                if field_name is None:
                    continue
                base = re.split(r"[.\[]", field_name, maxsplit=1)[0]
                value: ast.AST | None
                if base == "":
                    value = positional[auto] if auto < len(positional) else None
                    auto += 1
                elif base.isdigit():
                    i = int(base)
                    value = positional[i] if i < len(positional) else None
                else:
                    value = kwargs.get(base)
                if value is None:
                    out.append(self._unfilled(node, field_name, complete))
                    continue
                if spec or conv or base != field_name:
                    out.append(self.hole(value))
                else:
                    out.append(r(value))
        # The braces `.format` leaves (`{{name}}` turned into `{name}`) are text now.
        self.filled_by_replace = True
        return _concat(*out)

    def _unfilled(self, node: ast.Call, field_name: str, complete: bool) -> list[Segment]:
        """A field ``.format`` gets no known value for."""
        if complete and not any(isinstance(a, ast.Starred) for a in node.args):
            self.issues.setdefault(
                id(node),
                PlaceholderIssue(
                    node,
                    "{" + field_name + "}",
                    f"`.format()` gets no value for `{{{field_name}}}`: raises "
                    "KeyError/IndexError at run time",
                ),
            )
            return ["{" + field_name + "}"]
        # Filled from a mapping we cannot see: the placeholder's name says what goes there.
        name = re.split(r"[.\[]", field_name, maxsplit=1)[0]
        sources = self.classifier._by_name(name, node, placeholder=True)  # noqa: SLF001
        via = self._via[0] if self._via else None
        return [Hole(node, sources, None, via, "{" + field_name + "}")]

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
        if not self._laid_out(segments):
            olds = {
                c.args[0].value
                for c in chain
                if isinstance(c.args[0], ast.Constant) and isinstance(c.args[0].value, str)
            }
            found = self._template_by_fields(olds, "{}") if len(olds) == len(chain) else None
            if found is not None:
                segments = [found]
            else:
                # `content.replace("[Context here]", retrieved)` on text of unknown layout:
                # the values go somewhere inside it, so the whole result is one hole that
                # holds them (not the receiver's text alone, which would lose them).
                return self.hole(node)
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
            if _length(segments) > MAX_RENDER_CHARS:
                return self.hole(node)
        self._chains.append((node, targets, missing))
        if any(_TEMPLATE_FIELD.search(t) for t in targets if t not in missing):
            self.filled_by_replace = True
        return segments

    def _percent(self, node: ast.BinOp, r) -> list[Segment]:
        template = Rendered(r(node.left)).literal
        if template is None:
            return self.hole(node)
        right = self._literal_node(node.right, (ast.Tuple, ast.Dict)) or node.right
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

    def _template_source(self, receiver: ast.AST, names: tuple[str, ...]) -> ast.AST | None:
        """The text given to ``Template(...)``/``from_string(...)`` that built ``receiver``."""
        call = self._literal_node(receiver, (ast.Call,))
        if (
            isinstance(call, ast.Call)
            and (getattr(call.func, "id", None) or getattr(call.func, "attr", "")) in names
            and call.args
        ):
            return call.args[0]
        return None

    def _loaded_template(self, receiver: ast.AST) -> str | None:
        """The text of the template file ``env.get_template("name")`` loads, when in the tree.

        The loader's folder is not followed: the one file of the tree whose path ends with
        the name is taken (:meth:`Project.find_text`).
        """
        call = self._literal_node(receiver, (ast.Call,))
        project = self.index.project
        if (
            project is None
            or not isinstance(call, ast.Call)
            or getattr(call.func, "attr", None) != "get_template"
            or not call.args
        ):
            return None
        name = Rendered(self._render(call.args[0], 0, frozenset())).literal
        if not name:
            return None
        return project.find_text(name, self.ix(call).path)

    def _template(self, node: ast.Call, r, safe: bool) -> list[Segment]:
        func = node.func
        assert isinstance(func, ast.Attribute)
        source = self._template_source(func.value, ("Template",))
        template = Rendered(r(source)).literal if source is not None else None
        if template is None:
            return self.hole(node)
        mapping = node.args[0] if node.args else None
        kwargs, complete = self._mapping(node.keywords, mapping)
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
            if not complete:
                sources = self.classifier._by_name(key, node, placeholder=True)  # noqa: SLF001
                out.append([Hole(node, sources, None, self._via[0] if self._via else None)])
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

    def _jinja(self, node: ast.Call, r) -> list[Segment]:
        """``jinja2.Template(src).render(...)`` / ``env.from_string(src).render(...)``."""
        func = node.func
        assert isinstance(func, ast.Attribute)
        source = self._template_source(func.value, ("Template", "from_string"))
        template = Rendered(r(source)).literal if source is not None else None
        if template is None:
            template = self._loaded_template(func.value)
        if template is None:
            return self.hole(node)
        mapping = node.args[0] if node.args else None
        kwargs, complete = self._mapping(node.keywords, mapping)
        out: list[list[Segment]] = []
        pos = 0
        for m in _JINJA.finditer(template):
            out.append([template[pos : m.start()]])
            pos = m.end()
            expr = m.group(1)
            if expr is None:
                continue  # {% tag %} or {# comment #}: no text of its own
            head = re.split(r"[\s|.\[(]", expr.strip(), maxsplit=1)[0]
            value = kwargs.get(head)
            simple = re.fullmatch(r"[A-Za-z_]\w*", expr.strip()) is not None
            if value is not None and simple:
                out.append(r(value))
            elif value is not None:
                out.append(self.hole(value))
            else:
                sources = self.classifier._by_name(head, node, placeholder=True)  # noqa: SLF001
                out.append([Hole(node, sources, None, self._via[0] if self._via else None)])
        out.append([template[pos:]])
        _ = complete
        return _concat(*out)


def _default_of(param: Param) -> ast.AST | None:
    """A parameter's default value in its ``def``, if it has one."""
    args = getattr(param.function, "args", None)
    if args is None:
        return None
    positional = [*args.posonlyargs, *args.args]
    for p, d in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True):
        if p is param.arg:
            return d
    for p, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if p is param.arg:
            return d
    return None


def _role(message: ast.AST) -> str:
    """The role of a message literal or object, for the rendered request text.

    The source reader's own rule (one home: :func:`pipecat_fast.lint.python_source._role`),
    imported here lazily as :meth:`Renderer` already imports ``message_content``.
    """
    from pipecat_fast.lint.python_source import _role as role_of

    return role_of(message)


def _strip(segments: list[Segment], how: str) -> list[Segment]:
    out = list(segments)
    if how in ("strip", "lstrip") and out and isinstance(out[0], str):
        out[0] = out[0].lstrip()
    if how in ("strip", "rstrip") and out and isinstance(out[-1], str):
        out[-1] = out[-1].rstrip()
    return [s for s in out if not (isinstance(s, str) and not s)]


def _cleandoc(text: str) -> str:
    import inspect

    return inspect.cleandoc(text)
