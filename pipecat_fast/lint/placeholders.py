"""Template placeholders: where they are, and what fills them.

A placeholder is filled on every render by definition; whether that busts the cache depends
on what fills it. This module reads a placeholder in any of the common template syntaxes
(``{{ name }}``, Liquid/Jinja expressions with filters and calls such as
``{{ "now" | date: "%H:%M" }}`` or ``{{ now().strftime('%B %d') }}``, ``${name}``,
``%(name)s``, ``{name}``) and judges it from the strongest evidence there is:

1. the template engine's own clock (Liquid's ``"now"``/``"today"`` with the ``date``
   filter, Jinja's ``now()``), its format saying how often the text changes;
2. a platform's documented system variable (``{{customer.number}}``, ``{{system__time_utc}}``;
   :mod:`pipecat_fast.providers.prompt_vars`), including the ones documented as
   configuration (``{{year}}``), which are then not guessed from their names;
3. a variable the linted tree binds for one call through a platform's call-creation field
   (``variableValues``, ``dynamic_variables``, ``templateContext``...: ``bound``), unless the
   value bound is a literal (configuration);
4. its name (:func:`pipecat_fast.lint.vocab.classify_name`), the whole dotted path as well
   as its last part (``customer.number`` is the customer's).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import regex

from pipecat_fast.lint.findings import Frequency
from pipecat_fast.lint.vocab import classify_name
from pipecat_fast.providers import prompt_vars

MAX_PLACEHOLDERS = 400
"""Stop after this many placeholders in one text (a huge file cannot flood the output)."""

_EXPR = regex.compile(r"\{\{-?\s*((?:(?!\}\}|\{\{)[^\n]){1,200}?)\s*-?\}\}")
"""``{{ ... }}`` on one line: Mustache/Handlebars names, Liquid and Jinja expressions."""
SIMPLE_PLACEHOLDERS = (
    (regex.compile(r"\$\{([A-Za-z_]\w*)\}"), "error"),
    (regex.compile(r"%\(([A-Za-z_]\w*)\)[sdr]"), "error"),
    (regex.compile(r"(?<!\{)\{([A-Z][A-Z0-9_]*)\}(?!\})"), "error"),
    (regex.compile(r"(?<![{$\w])\{([a-z_][A-Za-z0-9_]*)\}(?!\})"), "warning"),
)
"""Single-brace and ``${}``/``%()`` placeholders, with the severity of one left unfilled."""
_PATH = regex.compile(r"\$?[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*")
"""A variable path; a leading ``$`` is an n8n built-in (``$now``, ``$json.text``)."""
_QUOTED = regex.compile(r"""^\s*(["'])(.*?)\1""")
_FORMAT_ARG = regex.compile(r"""(["'])((?:(?!\1).)*%(?:(?!\1).)*)\1""")
_CALL = regex.compile(r"""(?<![\w.'"])([A-Za-z_]\w*)\s*\(""")
DOUBLE_BRACE_EXTS = frozenset({".j2", ".jinja", ".jinja2", ".liquid", ".mustache", ".hbs"})
"""Template files whose engine fills only ``{{ ... }}``: single braces in them are text."""
_CONTROL = ("#", "/", ">", "!", "^", "&", "else", "end")


@dataclass(frozen=True)
class Placeholder:
    """One placeholder in a template.

    Attributes:
        start: Start character offset.
        end: End character offset (exclusive).
        name: The variable path (``customer.number``), or the string literal a filter is
            applied to (``now`` in ``{{ "now" | date: ... }}``).
        literal: True when ``name`` was a string literal, not a variable.
        call: True when the variable is called (``now()``).
        filters: Names of the filters applied (``("date",)``).
        fmt: A strftime-style format found in the expression (a ``date`` filter's
            argument, a ``.strftime(...)`` call's), or ``None``.
        level: Severity of the placeholder when it ships unfilled (CB201).
        double: True for ``{{ ... }}`` (the syntax platforms and template engines fill);
            False for ``${x}``, ``%(x)s`` and ``{x}`` (code's own formatting).
    """

    start: int
    end: int
    name: str
    literal: bool = False
    call: bool = False
    filters: tuple[str, ...] = ()
    fmt: str | None = None
    level: str = "error"
    double: bool = True


def _split_filters(expr: str) -> list[str]:
    parts, depth, quote, cur = [], 0, "", []
    for ch in expr:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "|" and depth <= 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return parts


def parse_expression(expr: str, start: int, end: int) -> Placeholder | None:
    """A ``{{ ... }}`` expression as a :class:`Placeholder`; ``None`` for control tags."""
    body = expr.strip()
    if not body or body.startswith(_CONTROL) or body.split(" ", 1)[0] in _CONTROL:
        return None
    head, *filters = _split_filters(body)
    filter_names = tuple(f.strip().split(":", 1)[0].split("(", 1)[0].strip() for f in filters)
    fmt = None
    for f in (*filters, head):
        m = _FORMAT_ARG.search(f)
        if m:
            fmt = m.group(2)
            break
    clock = _engine_clock(head)
    if clock is not None:
        # `{{ (as_timestamp(now()) | timestamp_custom("%H:%M")) }}`: the engine's clock read
        # inside another call or parentheses is still the clock, formatted by what wraps it.
        return Placeholder(start, end, clock, False, True, filter_names, fmt)
    q = _QUOTED.match(head)
    if q:
        return Placeholder(start, end, q.group(2).strip(), True, False, filter_names, fmt)
    m = _PATH.match(head.strip())
    if not m:
        return None
    rest = head.strip()[m.end() :]
    return Placeholder(start, end, m.group(), False, rest.startswith("("), filter_names, fmt)


def _engine_clock(head: str) -> str | None:
    """The template engine's clock function called anywhere in an expression (``now()``)."""
    calls = prompt_vars.template_clock_calls()
    for m in _CALL.finditer(head):
        if m.group(1) in calls:
            return m.group(1)
    return None


def find_placeholders(text: str, double_only: bool = False) -> Iterator[Placeholder]:
    """Every placeholder in ``text``, in no particular order (at most ``MAX_PLACEHOLDERS``).

    ``double_only``: the text is a Jinja, Liquid, Mustache or Handlebars template (the
    file says so), where only ``{{ ... }}`` is filled and ``{x}`` or ``${x}`` are literal
    text (a tool call's notation, an example).
    """
    count = 0
    for m in _EXPR.finditer(text):
        ph = parse_expression(m.group(1), m.start(), m.end())
        if ph is not None:
            yield ph
            count += 1
            if count >= MAX_PLACEHOLDERS:
                return
    for pattern, level in () if double_only else SIMPLE_PLACEHOLDERS:
        for m in pattern.finditer(text):
            yield Placeholder(m.start(), m.end(), m.group(1), level=level, double=False)
            count += 1
            if count >= MAX_PLACEHOLDERS:
                return


_GRANULARITY = {
    "minute": Frequency.MINUTE,
    "day": Frequency.DAY,
    "session": Frequency.SESSION,
    "request": Frequency.REQUEST,
}
_KIND = {
    "caller": ("CB103", Frequency.SESSION, "per-caller data"),
    "call_id": ("CB103", Frequency.SESSION, "a per-call id"),
    "history": ("CB105", Frequency.REQUEST, "conversation history"),
}


def _format_frequency(fmt: str) -> Frequency:
    from pipecat_fast.lint.py_classify import strftime_frequency  # the one strftime reader

    return strftime_frequency(fmt.replace("%-", "%"))


def classify_placeholder(
    ph: Placeholder, bound: Mapping[str, str] | None = None
) -> tuple[str, Frequency, str] | None:
    """What fills a placeholder: ``(rule, frequency, noun)``, or ``None`` when nothing volatile.

    Args:
        ph: The placeholder.
        bound: Variables the linted tree binds per call through a platform's call-creation
            field: ``{name: "call" | "literal"}`` (see :func:`bound_variables`), or filled by
            code in view (``"filled"``: a ``.replace("{{name}}", value)``, graded where that
            code puts the value in, not guessed here).
    """
    name = ph.name
    if ph.literal:
        if name.lower() in prompt_vars.liquid_clock_literals() and any(
            f in prompt_vars.liquid_date_filters() for f in ph.filters
        ):
            fmt = ph.fmt or prompt_vars.liquid_default_format()
            return "CB101", _format_frequency(fmt), "the template engine's current time"
        return None
    if ph.call and name in prompt_vars.template_clock_calls():
        freq = _format_frequency(ph.fmt) if ph.fmt else Frequency.REQUEST
        return "CB101", freq, "the template engine's current time"
    platform = prompt_vars.platform_variable(name) if ph.double else None
    if platform is not None:
        if platform.kind == "clock":
            freq = _GRANULARITY.get(platform.granularity or "", Frequency.SESSION)
            if ph.fmt:
                freq = min(freq, _format_frequency(ph.fmt))
            return "CB101", freq, f"{platform.platform}'s current time"
        if platform.kind in _KIND:
            rule, freq, noun = _KIND[platform.kind]
            return rule, freq, f"{noun} ({platform.platform} fills it per call)"
        return None  # documented as configuration: not guessed from its name
    if name.startswith("$"):
        return None  # an engine built-in the registry does not list ($json...): not guessed
    last = name.rsplit(".", 1)[-1]
    guess = classify_name(last) or (classify_name(name.replace(".", "_")) if "." in name else None)
    binding = (bound or {}).get(name) or (bound or {}).get(last)
    if binding == "call" and (guess is None or guess[0] != "CB101"):
        return "CB103", Frequency.SESSION, "a variable bound for each call"
    if binding == "literal" and guess is not None and guess[0] != "CB101":
        return None  # bound to a fixed value where the call is made
    if binding == "filled":
        return None  # code in view fills it: graded there, with the value it puts in
    if guess is not None and guess[0] == "CB101" and ph.fmt:
        return "CB101", min(guess[1], _format_frequency(ph.fmt)), guess[2]
    return guess


def platform_fills(ph: Placeholder) -> bool:
    """Whether a platform or template engine fills ``ph`` itself, whatever the code does.

    True for ``{{ ... }}`` placeholders that are a platform's documented variable (not one
    documented as configuration) or the engine's clock (``{{ "now" | date: ... }}``).
    """
    if not ph.double:
        return False
    if ph.literal or ph.call:
        return classify_placeholder(ph) is not None
    platform = prompt_vars.platform_variable(ph.name)
    return platform is not None and platform.kind != "config"


_BINDING = None


def _binding_pattern() -> regex.Pattern:
    global _BINDING
    if _BINDING is None:
        fields = "|".join(regex.escape(f) for f in prompt_vars.binding_fields())
        _BINDING = regex.compile(rf"""(?<![\w$])["']?({fields})["']?(?![\w$])""")
    return _BINDING


_KEY = regex.compile(r"""(?:^|[{,\s])["']?([A-Za-z_]\w*)["']?\s*:\s*([^,}\n]+)""", regex.M)
_LITERAL_VALUE = regex.compile(
    r"""^\s*(?:(["'`])[^"'`$]*\1|-?\d[\d.]*|true|false|True|False|None|null)\s*$"""
)
MAX_BINDING_SCAN = 2000
"""Characters of the object after a binding field read for its keys."""


_REPLACED = regex.compile(
    r"""\.replace(?:All)?\(\s*(["'`])(?:\{\{\s*([\w.]+)\s*\}\}|\{([\w.]+)\}|\$\{([\w.]+)\})\1"""
)


def replaced_placeholders(text: str) -> set[str]:
    """Placeholders a source file fills itself with ``.replace("{{name}}", value)``."""
    return {next(g for g in m.groups()[1:] if g) for m in _REPLACED.finditer(text or "")}


_REPLACE_TARGET = regex.compile(r"""\.replace(?:All)?\(\s*(["'`])((?:(?!\1)[^\n]){2,200}?)\1\s*,""")
_FIELD_SHAPE = regex.compile(r"\{\{.*\}\}|\$\{.*\}|\{[^{}\s]+\}")


def replace_targets(text: str) -> set[str]:
    """Template-field-shaped text a source file replaces literally (``.replace("{{ now }}", x)``).

    A text file holding one of these is a template that code fills with ``.replace``, one
    field at a time: its other placeholder-shaped text is not filled by anything.
    """
    return {
        m.group(2) for m in _REPLACE_TARGET.finditer(text or "") if _FIELD_SHAPE.search(m.group(2))
    }


def filled_by_replace(text: str, targets: set[str]) -> dict[str, str]:
    """``{name: "filled"}`` for every placeholder of ``text`` when code fills it by ``.replace``.

    Empty unless one of ``targets`` (:func:`replace_targets`) occurs in ``text``: then the
    replaced fields are graded in the code that puts their value in, and the rest ship as
    they are written (``"Appointment | {patient_name}"``, a tool's notation in an example).
    """
    if not any(t in text for t in targets):
        return {}
    return {ph.name: "filled" for ph in find_placeholders(text)}


def bound_variables(text: str) -> dict[str, str]:
    """Variables a source file binds per call through a platform's call-creation field.

    Finds ``variableValues: {name: customer.firstName}``, ``"dynamic_variables": {...}``,
    ``templateContext={...}`` (also inside a string that holds an object, as workflow
    exports write it) and reads the object's keys: ``"call"`` when the value is computed
    (a variable, a request field), ``"literal"`` when it is a fixed string or number.
    """
    out: dict[str, str] = {}
    if not text:
        return out
    for m in _binding_pattern().finditer(text):
        tail = text[m.end() : m.end() + 300]
        brace = tail.find("{")
        if brace < 0:
            continue
        body = text[m.end() + brace : m.end() + brace + MAX_BINDING_SCAN]
        body = body.replace("\\n", "\n").replace('\\"', '"')
        depth = 0
        end = len(body)
        for i, ch in enumerate(body):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    end = i + 1
                    break
        for k in _KEY.finditer(body[1:end]):
            key, value = k.group(1), k.group(2).strip()
            kind = "literal" if _LITERAL_VALUE.match(value) else "call"
            if out.get(key) != "call":
                out[key] = kind
    return out
