"""Which volatile sources feed a Python expression: clock, random, caller, fetched, history.

``classify(expr)`` walks the expression and the names it reads (through
:class:`~pipecat_fast.lint.py_index.ModuleIndex`, across modules of a
:class:`~pipecat_fast.lint.project.Project`) and returns :class:`Source` objects: what
changes, how often the value itself changes, and where it is computed. Calls to functions
the linted code defines are followed into their ``return`` (with the call's arguments bound
to the parameters), so a clock read inside a helper counts where the helper is called.
"""

from __future__ import annotations

import ast
import builtins
import datetime as _dt
import sys
import uuid as _uuid
from dataclasses import dataclass, replace
from typing import Any

from pipecat_fast.lint.findings import Frequency, shorten
from pipecat_fast.lint.py_index import ImportedName, ModuleIndex, Param
from pipecat_fast.lint.vocab import classify_name, names_business, names_deployment, words
from pipecat_fast.providers.prompt_vars import call_argument_types, run_context_types

MAX_DEPTH = 24

SAMPLE_NOW = _dt.datetime(2026, 12, 1, 9, 41, 7, 123456)
"""Stands in for the clock when a value's size is needed (``isoformat()`` of it is 26
characters); any fixed instant gives the same length for a given format."""
_SAMPLE_EPOCH = 1764582067.123456

_CLOCK_CALLS: dict[str, tuple[Frequency, Any]] = {
    "datetime.datetime.now": (Frequency.REQUEST, lambda t: t),
    "datetime.datetime.utcnow": (Frequency.REQUEST, lambda t: t),
    "datetime.datetime.today": (Frequency.REQUEST, lambda t: t),
    "datetime.date.today": (Frequency.DAY, lambda t: t.date()),
    "time.time": (Frequency.REQUEST, lambda t: t.timestamp()),
    "time.time_ns": (Frequency.REQUEST, lambda t: int(t.timestamp() * 1e9)),
    "time.localtime": (Frequency.REQUEST, None),
    "time.gmtime": (Frequency.REQUEST, None),
    "time.ctime": (Frequency.REQUEST, lambda t: t.ctime()),
    "time.asctime": (Frequency.REQUEST, lambda t: t.ctime()),
    "time.monotonic": (Frequency.REQUEST, lambda t: t.timestamp() - 1.7e9),
    "time.perf_counter": (Frequency.REQUEST, lambda t: t.timestamp() - 1.7e9),
    "arrow.now": (Frequency.REQUEST, lambda t: t),
    "arrow.utcnow": (Frequency.REQUEST, lambda t: t),
    "pendulum.now": (Frequency.REQUEST, lambda t: t),
    "pendulum.today": (Frequency.DAY, lambda t: t.date()),
    "django.utils.timezone.now": (Frequency.REQUEST, lambda t: t),
}
"""Clock reads: how often each changes, and its value as a function of the instant."""
_RANDOM_MODULES = ("random", "secrets", "numpy.random")
_RANDOM_CALLS = {"uuid.uuid1", "uuid.uuid4", "os.urandom", "shortuuid.uuid", "nanoid.generate"}
_SEEDABLE = {"random.Random", "numpy.random.default_rng", "numpy.random.RandomState"}
"""Generator constructors: deterministic when seeded with a constant."""
_RANDOM_SAMPLES: dict[str, Any] = {
    "uuid.uuid1": _uuid.UUID("3f2b8c1e-7d4a-11ef-9e2f-5a6b7c8d9e0f"),
    "uuid.uuid4": _uuid.UUID("3f2b8c1e-7d4a-4c1b-9e2f-5a6b7c8d9e0f"),
    "random.random": 0.8444218515250481,
}
_UNORDERED_CALLS = {"glob.glob", "glob.iglob", "os.listdir", "os.scandir", "os.walk"}
_UNORDERED_METHODS = {"iterdir", "rglob", "glob", "listdir"}
_FETCH_CALLS = (
    "requests.",
    "httpx.",
    "urllib.request.urlopen",
    "aiohttp.",
)
_PASS_THROUGH_METHODS = {"strip", "lstrip", "rstrip", "lower", "upper", "title", "capitalize"}
_FETCH_NAME_WORDS = {
    "fetch",
    "scrape",
    "crawl",
    "download",
    "article",
    "search",
    "retrieve",
    "urlopen",
    "browse",
}
_CLOCK_NAME_WORDS = {"now", "today", "timestamp", "utcnow", "current"}
"""An unresolved call counts as a clock read by its name only with one of these words."""
_KNOWN_LIBRARIES = {
    "datetime",
    "time",
    "typing",
    "os",
    "sys",
    "json",
    "re",
    "random",
    "uuid",
    "pathlib",
    "enum",
    "dataclasses",
    "collections",
    "functools",
    "itertools",
    "logging",
    "asyncio",
    "pydantic",
    "loguru",
    "pipecat",
    "livekit",
    "openai",
    "anthropic",
    "google",
    "dotenv",
}
"""Names imported from these are never guessed from their spelling (``datetime``...)."""

_SECOND_DIRECTIVES = set("SfXcTsrk")
_MINUTE_DIRECTIVES = set("MR")
_HOUR_DIRECTIVES = set("HIpl")
_DAY_DIRECTIVES = set("daAjxDFeuwUWV")

_ATTR_GRANULARITY = {
    "second": Frequency.REQUEST,
    "microsecond": Frequency.REQUEST,
    "tm_sec": Frequency.REQUEST,
    "minute": Frequency.MINUTE,
    "tm_min": Frequency.MINUTE,
    "hour": Frequency.HOUR,
    "tm_hour": Frequency.HOUR,
    "day": Frequency.DAY,
    "tm_mday": Frequency.DAY,
    "tm_wday": Frequency.DAY,
    "tm_yday": Frequency.DAY,
    "month": Frequency.PROCESS,
    "year": Frequency.PROCESS,
    "tm_mon": Frequency.PROCESS,
    "tm_year": Frequency.PROCESS,
}
_METHOD_GRANULARITY = {
    "date": Frequency.DAY,
    "weekday": Frequency.DAY,
    "isoweekday": Frequency.DAY,
    "toordinal": Frequency.DAY,
    "timetuple": Frequency.REQUEST,
    "time": Frequency.REQUEST,
    "timestamp": Frequency.REQUEST,
    "ctime": Frequency.REQUEST,
    "astimezone": Frequency.REQUEST,
}
_TIMESPEC = {
    "hours": Frequency.HOUR,
    "minutes": Frequency.MINUTE,
    "seconds": Frequency.REQUEST,
    "milliseconds": Frequency.REQUEST,
    "microseconds": Frequency.REQUEST,
    "auto": Frequency.REQUEST,
}


def strftime_frequency(fmt: str) -> Frequency:
    """How often a ``strftime`` format's output changes: every second, minute, hour, day."""
    directives = {fmt[i + 1] for i in range(len(fmt) - 1) if fmt[i] == "%"}
    if directives & _SECOND_DIRECTIVES:
        return Frequency.REQUEST
    if directives & _MINUTE_DIRECTIVES:
        return Frequency.MINUTE
    if directives & _HOUR_DIRECTIVES:
        return Frequency.HOUR
    if directives & _DAY_DIRECTIVES:
        return Frequency.DAY
    return Frequency.PROCESS


@dataclass(frozen=True)
class Source:
    """A volatile value feeding an expression.

    Attributes:
        rule: Rule id (``"CB101"``...).
        granularity: How often the value changes when re-evaluated (a date: per day).
        origin: Node where the value is computed (a call, a parameter, a name); for a
            value computed inside a helper function, the call of that helper.
        what: Short description for messages.
        inside: True when the value sits somewhere inside a larger string whose layout
            is unknown (position within the enclosing hole cannot be told).
        guessed: True when only the name says what the value is (a parameter called
            ``caller_phone``), not the code computing it.
        sample: A value of the same shape (a ``datetime``, a UUID, a float), when the
            expression's value *is* this source, so its rendered size is known.
        root: Where the value is first computed (inside a helper), for deduplication.
        placeholder: A template placeholder named like a volatile value: graded by what
            the name says, not by when the template itself is defined.
    """

    rule: str
    granularity: Frequency
    origin: ast.AST
    what: str
    inside: bool = False
    guessed: bool = False
    sample: Any = None
    root: ast.AST | None = None
    placeholder: bool = False
    per_pass: bool = False
    """A loop variable of a loop that sends a request on each pass: per request, however
    often the code around the loop runs."""
    per_call: bool = False
    """A value that exists only while a call is served (LiveKit job, room or participant
    metadata): per session, wherever the code that reads it appears to run (an excerpt
    whose ``async def entrypoint(ctx)`` line was cut)."""

    @property
    def key(self) -> int:
        """Identity for deduplication (the node first computing the value)."""
        return id(self.root if self.root is not None else self.origin)


def _shadowed(ix, func: ast.AST) -> bool:
    """True when a call's receiver chain starts at a local name, not a module.

    A parameter or variable may be called like one: ``secrets.items()`` on a ``secrets``
    dict, ``time.strip()`` on a ``time`` string.
    """
    cur = func
    while isinstance(cur, ast.Attribute):
        cur = cur.value
    return isinstance(cur, ast.Name) and cur is not func and bool(ix.resolve_name(cur))


_PROMPT_WORDS = {"prompt", "prompts", "instruction", "instructions", "system", "persona"}


_STORED_CONFIG_WORDS = frozenset({"config", "configs", "configuration", "settings"})
"""Words that make an awaited call read stored configuration (``getAgentConfigById``)."""


def _names_prompt(key: str) -> bool:
    w = words(key)
    return bool(w) and bool(set(w) & _PROMPT_WORDS) and w[-1] not in ("name", "id", "path")


def _reads_prompt(node: ast.AST) -> bool:
    """A read of prompt text by a key that says so.

    ``raw.get("prompt")``, ``cfg["system_prompt"]``, ``resp.instructions``: the agent's own
    prompt, not a value to guess from a name.
    """
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "get" and node.args and isinstance(node.args[0], ast.Constant):
            return isinstance(node.args[0].value, str) and _names_prompt(node.args[0].value)
        return False
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return isinstance(node.slice.value, str) and _names_prompt(node.slice.value)
    return isinstance(node, ast.Attribute) and _names_prompt(node.attr)


def _loaded_prompt(sources: list[Source]) -> list[Source]:
    """The sources of a prompt's own text loaded at run time.

    ``record["system_prompt"]`` of an awaited agent config, ``resp.instructions``,
    ``json.loads(ctx.job.metadata)["prompt"]``. Fetched, or sent with each call's dispatch,
    it is still the agent's instructions, as stable as its configuration (like a prompt
    file read at start-up): not content fetched into a prompt, nor the caller's data (a
    per-caller value the dispatcher writes into it is out of view either way).
    """
    return [s for s in sources if s.rule not in ("CB103", "CB104")]


def _inside(sources: list[Source]) -> list[Source]:
    return [replace(s, inside=True, sample=None) for s in sources]


def _plain(sources: list[Source]) -> list[Source]:
    """The sources of a value derived from these (their own size no longer tells)."""
    return [replace(s, sample=None) if s.sample is not None else s for s in sources]


_TEXT_METHODS = {"format", "format_map", "join", "replace", "substitute", "safe_substitute"}


def is_literal(node: ast.AST) -> bool:
    """A constant, or an f-string with no values in it."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.JoinedStr):
        return all(isinstance(v, ast.Constant) for v in node.values)
    return False


@dataclass(frozen=True)
class ClockValue:
    """A value computed from the clock, as a function of the instant it is read.

    Evaluating it at instants a second, a minute, an hour, half a day and a day apart
    tells how often the rendered value changes, whatever chain of formatting produced it
    (``strftime``, ``isoformat()[:10]``, ``.hour``, JavaScript's ``toISOString().slice``).
    """

    fn: Any

    def at(self, instant: _dt.datetime) -> Any:
        """The value at ``instant``."""
        return self.fn(instant)

    def frequency(self) -> Frequency | None:
        """How often the value changes; ``None`` when it cannot be evaluated."""
        try:
            base = self.at(SAMPLE_NOW)
            for seconds, freq in _PROBES:
                if self.at(SAMPLE_NOW + _dt.timedelta(seconds=seconds)) != base:
                    return freq
        except Exception:  # not a value of the shape the code expects
            return None
        return Frequency.PROCESS


_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}

_PROBES = (
    (1, Frequency.REQUEST),
    (60, Frequency.MINUTE),
    (3600, Frequency.HOUR),
    (12 * 3600, Frequency.HOUR),
    (86400, Frequency.DAY),
)


def _apply(sample: Any, fn) -> Any:
    if sample is None:
        return None
    if isinstance(sample, ClockValue):
        return ClockValue(lambda t, inner=sample.fn: fn(inner(t)))
    try:
        return fn(sample)
    except Exception:  # a sample of the wrong shape: size unknown
        return None


def _clock(sources: list[Source], granularity: Frequency | None, fn=None) -> list[Source]:
    """Transform clock sources with ``fn``; their granularity follows the new value.

    ``granularity`` is what the transform implies when the value cannot be evaluated.
    """
    out = []
    for s in sources:
        if s.rule == "CB101":
            sample = _apply(s.sample, fn) if fn is not None else s.sample
            derived = sample.frequency() if isinstance(sample, ClockValue) else None
            if derived is not None:
                g = derived
            elif granularity is not None:
                g = min(s.granularity, granularity)
            else:
                g = s.granularity
            out.append(replace(s, granularity=g, sample=sample))
        else:
            out.append(replace(s, sample=None))
    return out


def _constant(node: ast.AST) -> Any:
    """The value of a literal (numbers, strings, slices of them), else raise ValueError."""
    if isinstance(node, ast.Slice):
        parts = [None if p is None else _constant(p) for p in (node.lower, node.upper, node.step)]
        return slice(*parts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_constant(node.operand)
    if isinstance(node, ast.Constant):
        return node.value
    raise ValueError("not a literal")


def function_returns(fdef: ast.AST) -> list[ast.AST]:
    """The values a ``def`` returns (nested functions and classes left out)."""
    out: list[ast.AST] = []
    stack = list(getattr(fdef, "body", []))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Return) and node.value is not None:
            out.append(node.value)
        stack.extend(ast.iter_child_nodes(node))
    return out


def bind_arguments(fdef: ast.AST, call: ast.Call, skip_self: bool) -> dict[int, ast.AST]:
    """Map the parameters of ``fdef`` (by ``id`` of their ``ast.arg``) to ``call``'s values."""
    args = fdef.args  # type: ignore[attr-defined]
    positional = list(args.posonlyargs) + list(args.args)
    if skip_self and positional and positional[0].arg in ("self", "cls"):
        positional = positional[1:]
    bound: dict[int, ast.AST] = {}
    defaults = list(args.defaults)
    for param, default in zip(positional[len(positional) - len(defaults) :], defaults, strict=True):
        bound[id(param)] = default
    for param, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if default is not None:
            bound[id(param)] = default
    for param, value in zip(positional, call.args, strict=False):
        if isinstance(value, ast.Starred):
            break
        bound[id(param)] = value
    by_name = {p.arg: p for p in positional + list(args.kwonlyargs)}
    for kw in call.keywords:
        if kw.arg and kw.arg in by_name:
            bound[id(by_name[kw.arg])] = kw.value
    # `def _format(tpl, *args, **kwargs): return tpl.format(*args, **kwargs)`: what the
    # call passes beyond the named parameters, as the tuple and dict the function sees.
    if args.vararg is not None and not any(isinstance(a, ast.Starred) for a in call.args):
        rest = list(call.args[len(positional) :])
        bound[id(args.vararg)] = ast.copy_location(ast.Tuple(elts=rest, ctx=ast.Load()), call)
    if args.kwarg is not None:
        extra = [kw for kw in call.keywords if kw.arg is None or kw.arg not in by_name]
        keys: list[ast.expr | None] = [
            ast.Constant(value=kw.arg) if kw.arg is not None else None for kw in extra
        ]
        mapping = ast.Dict(keys=keys, values=[kw.value for kw in extra])
        bound[id(args.kwarg)] = ast.copy_location(mapping, call)
    return bound


_BUILTIN_NAMES = frozenset(dir(builtins))
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


REQUEST_FRAMES = {
    "LLMMessagesFrame",
    "LLMMessagesUpdateFrame",
    "LLMMessagesAppendFrame",
    "LLMContextFrame",
    "LLMRunFrame",
}
"""Pipecat frames that start an LLM request (``LLMMessagesFrame``: Pipecat before 1.0)."""
REQUEST_CALLS = {"create", "acreate", "stream", "generate_content", "run_inference"}
"""SDK calls that send a request when given ``messages=``/``contents=``/a context."""
_REQUEST_KEYWORDS = {"messages", "contents", "context"}


def request_loops(index: ModuleIndex) -> set[int]:
    """``id``s of the ``for`` loops whose body sends an LLM request on each pass.

    A Pipecat request frame built in the body (``LLMMessagesUpdateFrame(messages)``), or
    an SDK call given messages (``client.chat.completions.create(messages=...)``).
    """
    out: set[int] = set()
    for node in ast.walk(index.tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if not (
            name in REQUEST_FRAMES
            or (name in REQUEST_CALLS and {k.arg for k in node.keywords} & _REQUEST_KEYWORDS)
        ):
            continue
        child, cur = node, index.parent.get(node)
        while cur is not None:
            if isinstance(cur, (ast.For, ast.AsyncFor)) and child in cur.body:
                out.add(id(cur))
            if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                break
            child, cur = cur, index.parent.get(cur)
    return out


def _arithmetic_constant(node: ast.AST) -> Any:
    """A literal, or ``timedelta(...)`` of literal arguments, as a value; else ``None``."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Call) and not isinstance(node.func, ast.Call):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        name = getattr(node.func, "id", name)
        if name == "timedelta":
            try:
                args = [_constant(a) for a in node.args]
                kwargs = {k.arg: _constant(k.value) for k in node.keywords if k.arg}
                return _dt.timedelta(*args, **kwargs)
            except (ValueError, TypeError, OverflowError):
                return None
    return None


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def _bound_locally(index: ModuleIndex, node: ast.Name) -> bool:
    """True when a comprehension, lambda or ``except ... as`` around ``node`` binds it."""
    cur = index.parent.get(node)
    while cur is not None:
        if isinstance(cur, _COMPREHENSIONS):
            for gen in cur.generators:
                if any(isinstance(n, ast.Name) and n.id == node.id for n in ast.walk(gen.target)):
                    return True
        elif isinstance(cur, ast.Lambda):
            if any(a.arg == node.id for a in ast.walk(cur.args) if isinstance(a, ast.arg)):
                return True
        elif isinstance(cur, ast.ExceptHandler) and cur.name == node.id:
            return True
        cur = index.parent.get(cur)
    return False


def _name_of_iterable(v: ast.AST) -> str:
    """The name of what a loop iterates over (``faqs`` for ``faqs.items()``; ``""``: none)."""
    while True:
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.args:
            if v.func.id not in ("enumerate", "sorted", "reversed", "list", "tuple", "zip"):
                return v.func.id
            v = v.args[0]
        elif (
            isinstance(v, ast.Call)
            and isinstance(v.func, ast.Attribute)
            and v.func.attr in ("items", "values", "keys", "copy")
        ):
            v = v.func.value
        elif isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute):
            return v.func.attr
        elif isinstance(v, ast.Attribute):
            return v.attr
        elif isinstance(v, ast.Name):
            return v.id
        else:
            return ""


class Classifier:
    """Finds volatile sources in expressions of one module (and the modules it imports).

    Args:
        index: The module index.
    """

    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.bindings: dict[int, ast.AST] = {}
        """Parameters bound to call-site arguments while a helper's return is followed."""
        self.names: dict[str, ast.AST] = {}
        """Comprehension variables bound to one element while a ``join`` is laid out."""
        self.resolved_calls: set[int] = set()
        """Calls whose callee was followed into its definition."""
        self.request_loops: set[int] = request_loops(index)
        """``for`` loops of this module that send an LLM request on each pass."""

    def ix(self, node: ast.AST) -> ModuleIndex:
        """The index of the module ``node`` belongs to."""
        if self.index.owns(node):
            return self.index
        project = self.index.project
        found = project.index_of(node) if project is not None else None
        return found or self.index

    def classify(self, node: ast.AST | None, depth: int = 0, seen: frozenset = frozenset()):
        """Volatile sources feeding ``node`` (deduplicated by origin)."""
        if node is None or depth > MAX_DEPTH or id(node) in seen:
            return []
        seen = seen | {id(node)}
        out = self._classify(node, depth + 1, seen)
        uniq: dict[int, Source] = {}
        for s in out:
            key = id(s.origin)
            if key not in uniq or (uniq[key].inside and not s.inside):
                uniq[key] = s
        return list(uniq.values())

    # -- dispatch -------------------------------------------------------------------

    def _classify(self, node: ast.AST, depth: int, seen: frozenset) -> list[Source]:
        c = self.classify
        if isinstance(node, ast.Constant):
            return []
        if isinstance(node, ast.JoinedStr):
            out: list[Source] = []
            text_before = False
            for v in node.values:
                if isinstance(v, ast.Constant):
                    text_before = text_before or bool(v.value)
                    continue
                found = c(v, depth, seen)
                out.extend(_inside(found) if text_before else _plain(found))
                text_before = True
            return out
        if isinstance(node, ast.FormattedValue):
            return self._formatted(node, depth, seen)
        if isinstance(node, ast.Call):
            return self._call(node, depth, seen)
        if isinstance(node, ast.Await):
            return self._await(node, depth, seen)
        if isinstance(node, ast.Name):
            return self._name(node, depth, seen)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, depth, seen)
        if isinstance(node, ast.Subscript):
            inner = c(node.value, depth, seen)
            try:
                key = _constant(node.slice)
            except ValueError:
                key = ValueError
            if key is not ValueError and any(
                x.rule == "CB101" and isinstance(x.sample, ClockValue) for x in inner
            ):
                # `isoformat()[:10]`, JS `toISOString().slice(0, 10)`: what is kept decides.
                return _clock(inner, None, lambda v, k=key: v[k])
            found = _plain(inner)
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                if names_deployment(key.value):
                    # `dial_info["agent_id"]`: which configured agent the call is for.
                    return []
            if isinstance(key, ast.Constant) and key.value == 0 and type(key.value) is int:
                # `stored["messages"][0]`: the first message of a list only named like a
                # conversation is its opening (a stored scenario's system prompt), the same
                # on every request, not the turns that follow it.
                found = [s for s in found if not (s.rule == "CB105" and s.guessed)]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                if _names_prompt(key.value):
                    found = _loaded_prompt(found)
                if not found and not self._of_business_record(node.value):
                    found = self._by_name(key.value, node)
            elif not self._fixed_table(node.value):
                # A record looked up by a per-caller key is per-caller too. (Not one of a
                # table's fixed texts, `TONE_INSTRUCTIONS[tone]`: whichever the key picks,
                # it is one of a few static variants, each cached on its own.)
                found += [s for s in _plain(c(key, depth, seen)) if s.rule != "CB106"]
            return found
        if isinstance(node, ast.BinOp):
            left = c(node.left, depth, seen)
            right = c(node.right, depth, seen)
            op = _BINOPS.get(type(node.op))
            for clock_side, other in ((left, node.right), (right, node.left)):
                constant = _arithmetic_constant(other)
                if op and clock_side and not (left and right) and constant is not None:
                    if any(isinstance(x.sample, ClockValue) for x in clock_side):
                        # `time.time() // 3600`, `today + timedelta(days=1)`: arithmetic
                        # with a constant keeps the shape.
                        first = clock_side is left
                        fn = (
                            (lambda v, k=constant: op(v, k))
                            if first
                            else (lambda v, k=constant: op(k, v))
                        )
                        return _clock(clock_side, None, fn)
            left = _plain(left)
            # Whatever the right operand holds sits after the left one's text.
            return left + _inside(right)
        if isinstance(node, (ast.Set, ast.SetComp)):
            inner = [s for e in ast.iter_child_nodes(node) for s in c(e, depth, seen)]
            return _plain(inner) + [
                Source("CB106", Frequency.PROCESS, node, "set (iteration order varies)")
            ]
        if isinstance(node, ast.IfExp):
            # `a if cond else b`: the text is one branch or the other; the condition is
            # not in it.
            return _plain(c(node.body, depth, seen) + c(node.orelse, depth, seen))
        if isinstance(node, ast.Lambda):
            return c(node.body, depth, seen)
        if isinstance(node, ast.comprehension):
            return c(node.iter, depth, seen)
        out = []
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.expr, ast.comprehension, ast.keyword)):
                out.extend(c(child.value if isinstance(child, ast.keyword) else child, depth, seen))
        return _plain(out)

    def _formatted(self, node: ast.FormattedValue, depth: int, seen: frozenset) -> list[Source]:
        found = self.classify(node.value, depth, seen)
        if node.conversion != -1:
            conv = {115: str, 114: repr, 97: ascii}.get(node.conversion, str)
            found = [replace(s, sample=_apply(s.sample, conv)) for s in found]
        spec = node.format_spec
        if spec is None:
            return found
        if isinstance(spec, ast.JoinedStr) and is_literal(spec):
            fmt = "".join(str(v.value) for v in spec.values)
            table = strftime_frequency(fmt) if "%" in fmt else None
            clocks = _clock(
                [x for x in found if x.rule == "CB101"], table, lambda v, f=fmt: format(v, f)
            )
            others = [
                replace(x, sample=_apply(x.sample, lambda v, f=fmt: format(v, f)))
                for x in found
                if x.rule != "CB101"
            ]
            return clocks + others
        return _plain(found)

    def _of_business_record(self, receiver: ast.AST) -> bool:
        """Whether ``receiver`` is a parameter read as the business's record."""
        if not isinstance(receiver, ast.Name):
            return False
        values = self.ix(receiver).resolve_name(receiver)
        return (
            len(values) == 1
            and isinstance(values[0], Param)
            and _business_record(values[0].function, receiver.id)
        )

    def _fixed_table(self, node: ast.AST) -> bool:
        """Whether ``node`` is a dict literal of fixed texts, by name or by a key into one.

        Its values all string constants, or dicts of them (``TRANSLATIONS[lang][key]``).
        """
        while isinstance(node, ast.Subscript):
            node = node.value
        if not isinstance(node, ast.Name):
            return False
        values = self.ix(node).resolve_name(node)
        return len(values) == 1 and _all_fixed_text(values[0])

    def _await(self, node: ast.Await, depth: int, seen: frozenset) -> list[Source]:
        found = _plain(self.classify(node.value, depth, seen))
        call = node.value
        if (
            isinstance(call, ast.Call)
            and id(call) not in self.resolved_calls
            and not any(s.rule in ("CB103", "CB104") for s in found)
        ):
            name = self.ix(call).dotted(call.func) or "call"
            last = name.rsplit(".", 1)[-1]
            local = call.func.id if isinstance(call.func, ast.Name) else last
            guess = classify_name(last)
            if _names_prompt(last) or _names_prompt(local):
                # `await prepare_instructions(db, agent)`, `await load_system_prompt(id)`
                # (also under the name it was imported as, `import agentInstructions
                # from ...`): the agent's own prompt loaded at run time (`_loaded_prompt`).
                pass
            elif guess and guess[0] == "CB103":
                found.append(
                    Source("CB103", Frequency.SESSION, node, f"record looked up by {name}()")
                )
            elif set(words(last)) & _STORED_CONFIG_WORDS or _same_for_every_call(call):
                # `await db.getAgentConfigById(id)`, `await load_settings()`: the
                # deployment's stored configuration (an agent row an operator edits), the
                # same for every call until someone changes it: not content fetched per call.
                pass
            else:
                found.append(
                    Source("CB104", Frequency.SESSION, node, f"awaited result of {name}()")
                )
        return found

    # -- names ------------------------------------------------------------------------

    def _by_name(self, name: str, origin: ast.AST, placeholder: bool = False) -> list[Source]:
        guess = classify_name(name, constant=not placeholder)
        if guess is None:
            return []
        rule, freq, _noun = guess
        return [Source(rule, freq, origin, name, guessed=True, placeholder=placeholder)]

    def _values(self, values, name: str, origin, depth, seen) -> list[Source]:
        found: list[Source] = []
        literal = False
        for v in values:
            if isinstance(v, Param):
                bound = self.bindings.get(id(v.arg))
                if bound is not None:
                    # Bound to a literal (an argument, or the default of a call that
                    # passes none), or to text the caller builds in view (a join, a
                    # format, a helper's result): that value, not a guess from the
                    # parameter's name.
                    literal = (
                        literal
                        or is_literal(bound)
                        or self._traced_text(bound)
                        or _reads_prompt(bound)
                    )
                    found.extend(self.classify(bound, depth, seen))
                else:
                    found.extend(
                        _typed_clock(v.arg)
                        or self._by_name(v.arg.arg, v.arg)
                        or _call_state(v.arg)
                        or _handler_arguments(v)
                        or _caller_record(v)
                        or self._from_caller(v, depth, seen)
                    )
                continue
            if isinstance(v, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # a function or class object, not text
            literal = literal or is_literal(v) or self._traced_text(v)
            found.extend(self.classify(v, depth, seen))
        if (
            not found
            and not literal
            and not any(
                isinstance(v, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for v in values
            )
        ):
            loop_of = self._iterable_name(values)
            if loop_of is None and not values and isinstance(origin, ast.Name):
                loop_of = self._comprehension_iterable(origin)
            found = self._by_name(name if loop_of is None else loop_of, origin)
        return found if len(values) <= 1 else _plain(found)

    def _iterable_name(self, values: list) -> str | None:
        """For a loop variable, the name of what it iterates over (``""`` when unnamed).

        A loop variable holds one element of its iterable: ``for question, answer in
        faqs.items()`` reads a configured FAQ, whatever the variable is called, and ``for
        m in history`` reads the history. So the iterable's name is guessed, not the
        element's.
        """
        if len(values) != 1 or isinstance(values[0], Param):
            return None
        v = values[0]
        loop = self.ix(v).parent.get(v) if isinstance(v, ast.AST) else None
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or loop.iter is not v:
            return None
        return _name_of_iterable(v)

    def _comprehension_iterable(self, node: ast.Name) -> str | None:
        """The name of what a comprehension's variable iterates over, as for a loop variable.

        ``[c.render() for c in self.examples]`` reads the examples (see
        :meth:`_iterable_name`).
        """
        ix = self.ix(node)
        cur = ix.parent.get(node)
        while cur is not None:
            if isinstance(cur, _COMPREHENSIONS):
                for gen in cur.generators:
                    if any(
                        isinstance(n, ast.Name) and n.id == node.id for n in ast.walk(gen.target)
                    ):
                        return _name_of_iterable(gen.iter)
            cur = ix.parent.get(cur)
        return None

    def _from_caller(self, param: Param, depth: int, seen: frozenset) -> list[Source]:
        """What the one call in view of a parameter's function passes for it.

        ``OutboundCaller(name=dial_info.get("name"))`` with ``dial_info`` read from the
        job's metadata: the ``name`` the constructor puts in its instructions is per call.
        Only a function called exactly once in its module (a class: its ``__init__``, by
        the class's name) is followed; several calls may pass different things.
        """
        fn = param.function
        ix = self.ix(param.arg)
        name = getattr(fn, "name", None)
        if not name or name.startswith("__") and name != "__init__":
            return []
        method = isinstance(ix.parent.get(fn), ast.ClassDef)
        if name == "__init__":
            cls = ix.parent.get(fn)
            if not isinstance(cls, ast.ClassDef):
                return []
            name, method = cls.name, True
        calls = [
            n
            for n in ast.walk(ix.tree)
            if isinstance(n, ast.Call)
            and (
                (isinstance(n.func, ast.Name) and n.func.id == name)
                or (
                    method
                    and isinstance(n.func, ast.Attribute)
                    and n.func.attr == name
                    and isinstance(n.func.value, ast.Name)
                    and n.func.value.id in ("self", "cls")
                )
            )
        ]
        if len(calls) != 1 or self._within(ix, calls[0], fn):
            return []
        value = bind_arguments(fn, calls[0], skip_self=method).get(id(param.arg))
        if value is None:
            return []
        return [s for s in self.classify(value, depth, seen) if s.rule == "CB103"]

    def _traced_text(self, node: ast.AST) -> bool:
        """Text whose making is in view, so its name says nothing more.

        An f-string, ``+``, a join/format/replace call, or a call of a function defined
        here (its ``return`` is followed).
        """
        if isinstance(node, (ast.JoinedStr, ast.BinOp)):
            return True
        if isinstance(node, ast.Name):
            # A constant by convention (`_REPLY_QUESTION`), or a name whose one value in
            # view is itself literal or built text.
            if node.id.isupper() and len(node.id) > 1:
                return True
            values = self.ix(node).resolve_name(node)
            return (
                len(values) == 1
                and not isinstance(values[0], Param)
                and (is_literal(values[0]) or self._traced_text(values[0]))
            )
        if is_setting(node):
            return True
        if not isinstance(node, ast.Call):
            return False
        if isinstance(node.func, ast.Attribute) and node.func.attr in _TEXT_METHODS:
            return True
        return self._callee(node)[0] is not None

    def imported_value(self, node: ast.Name) -> ast.AST | None:
        """The value an imported name has in another module of the project, if any.

        A name the module uses but neither defines nor imports (an excerpt whose imports
        were cut, a ``from x import *``) is looked up in the one module of the tree that
        defines it at top level.
        """
        ix = self.ix(node)
        if ix.project is None:
            return None
        if node.id not in ix.imported:
            if not self.unbound(node):
                return None
            found = ix.project.defining_module(node.id, ix)
            return found[1] if found is not None else None
        try:
            return ix.project.resolve_import(ix, node.id)[1]
        except LookupError:
            return None

    def unbound(self, node: ast.Name) -> bool:
        """True for a name neither assigned, defined, imported nor built in where it is used."""
        ix = self.ix(node)
        return not (
            node.id in ix.imports
            or node.id in _BUILTIN_NAMES
            or node.id.startswith("__")
            or ix.resolve_name(node)
            or ix.resolve_function(node) is not None
            or any(node.id in names for names in ix.assigned.values())
            or _bound_locally(ix, node)
        )

    def external(self, node: ast.Name) -> bool:
        """True for a name whose value comes from another module (imported, or unbound)."""
        return node.id in self.ix(node).imports or self.unbound(node)

    def module_attribute(self, node: ast.Attribute) -> ast.AST | None:
        """``mod.NAME`` where ``mod`` is a module of the project: the value of ``NAME``."""
        if not isinstance(node.value, ast.Name):
            return None
        ix = self.ix(node)
        imported = ix.imported.get(node.value.id)
        if ix.project is None or imported is None:
            return None
        from pipecat_fast.lint.project import top_level_value

        if imported.name is not None:
            # `from pkg import prompt` / `from . import prompt`: a module of the package.
            module = f"{imported.module}.{imported.name}" if imported.module else imported.name
            imported = ImportedName(module, None, imported.level)
        path = ix.project._module_path(ix, imported)  # noqa: SLF001 - same package
        target = ix.project.index(path) if path else None
        return top_level_value(target, node.attr) if target is not None else None

    def _name(self, node: ast.Name, depth: int, seen: frozenset) -> list[Source]:
        if node.id in self.names:
            return self.classify(self.names[node.id], depth, seen)
        ix = self.ix(node)
        values = ix.resolve_name(node)
        if not values and self.external(node):
            value = self.imported_value(node)
            if value is not None:
                if isinstance(value, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    return []
                return self.classify(value, depth, seen)
        if not values and isinstance(node.ctx, ast.Load) and ix.resolve_function(node) is not None:
            # `handler=handle_submission_date`: a function passed as a callback, not text
            # (what it returns is judged where it is called).
            return []
        if not values and node.id in ix.imports:
            imported = ix.imported.get(node.id)
            module = imported.module.split(".")[0] if imported else ""
            if module in _KNOWN_LIBRARIES or not module:
                return []
            return self._by_name(node.id, node)
        per_pass = self._loop_variable(node, values)
        if per_pass:
            return per_pass
        found = self._updated(node, node.id, self._values(values, node.id, node, depth, seen))
        if values and not isinstance(values[-1], Param):
            # A list grown with append/extend carries what was added to it.
            line = getattr(values[-1], "lineno", 0)
            for grow in ix.growth_of(node, line):
                added = grow.value if isinstance(grow, ast.AugAssign) else grow
                args = added.args if isinstance(added, ast.Call) else [added]
                found = _plain(found) + [s for a in args for s in self.classify(a, depth, seen)]
        if values and not isinstance(values[-1], Param):
            # Text appended with `+=` (`identity += f"...{now}"`) is part of the value.
            line = getattr(values[-1], "lineno", 0)
            pieces = ix._scoped_calls(ix.text_grown, node, after=line)  # noqa: SLF001
            for piece in pieces:
                if piece.lineno < node.lineno:
                    found = found + _inside(self.classify(piece.value, depth, seen))
        for shuffle in ix.shuffles_of(node)[-1:]:
            found = _plain(found) + [
                Source("CB102", Frequency.REQUEST, shuffle, f"`{node.id}` shuffled in place")
            ]
        return found

    def _loop_variable(self, node: ast.Name, values: list) -> list[Source]:
        """A loop variable read inside a loop that sends one request per pass."""
        ix = self.ix(node)
        if len(values) != 1 or isinstance(values[0], Param) or ix is not self.index:
            return []
        loop = ix.parent.get(values[0])
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or loop.iter is not values[0]:
            return []
        if id(loop) not in self.request_loops or not self._within(ix, node, loop):
            return []
        if isinstance(loop.iter, (ast.List, ast.Tuple, ast.Set)) and len(loop.iter.elts) < 2:
            return []
        return [Source("CB103", Frequency.REQUEST, node, node.id, per_pass=True)]

    def _updated(self, node: ast.AST, name: str, found: list[Source]) -> list[Source]:
        """Add the state a ``+=`` in a function keeps changing (a round counter, a score)."""
        ix = self.ix(node)
        # `line += " UNAVAILABLE"` appends text: building a string, not a changing state.
        updates = [
            u
            for u in ix.updates_of(node)
            if ix.function_of(u) is not None and not self._appends_text(u.value)
        ]
        if not updates or any(s.rule in ("CB101", "CB102") for s in found):
            return found
        guess = classify_name(name)
        rule = guess[0] if guess and guess[0] in ("CB103", "CB105") else "CB103"
        last = updates[-1]
        what = f"{name}, updated at line {last.lineno} in {ix.function_name(last)}()"
        kept = [s for s in _plain(found) if s.rule != rule]
        return kept + [Source(rule, Frequency.REQUEST, last, what)]

    def _appends_text(self, value: ast.AST) -> bool:
        """``x += <text>``: a literal, an f-string, or a name holding one (building text).

        Also a concatenation with a literal or f-string in it (``x += " " + self.text``).
        """
        if _is_text(value):
            return True
        if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
            return self._appends_text(value.left) or self._appends_text(value.right)
        if isinstance(value, ast.Name):
            values = self.ix(value).resolve_name(value)
            return len(values) == 1 and _is_text(values[0])
        return False

    def _attribute(self, node: ast.Attribute, depth: int, seen: frozenset) -> list[Source]:
        ix = self.ix(node)
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            values = ix.resolve_self_attr(node)
            found = self._values(values, node.attr, node, depth, seen)
            found = self._updated(node, node.attr, found)
            grown = ix.grown_self_attr(node)
            if grown and not any(s.rule in ("CB101", "CB102") for s in found):
                # `self.pages.append(frame.text)` in a handler: the list accumulates what
                # the session produced, turn by turn.
                last = grown[-1]
                guess = classify_name(node.attr)
                rule = guess[0] if guess and guess[0] in ("CB103", "CB105") else "CB105"
                what = (
                    f"self.{node.attr}, grown at line {last.lineno} in {ix.function_name(last)}()"
                )
                found = [s for s in _plain(found) if s.rule != rule]
                found.append(Source(rule, Frequency.REQUEST, last, what))
            return found if len(values) <= 1 else _inside(found)
        value = self.module_attribute(node)
        if value is not None:
            return self.classify(value, depth, seen)
        if isinstance(node.value, ast.Name) and (imp := ix.imported.get(node.value.id)):
            module = ".".join(p for p in (imp.module, imp.name) if p)
            freq = FRAMEWORK_CLOCK_TEXT.get(f"{module}.{node.attr}")
            if freq is not None and not imp.level:
                what = f"{ast.unparse(node)} (rendered with the current time)"
                return [Source("CB101", freq, node, what)]
        receiver_words = words(ast.unparse(node.value))
        if node.attr == "messages" and ("context" in receiver_words or "ctx" in receiver_words):
            return [Source("CB105", Frequency.REQUEST, node, "context messages")]
        if node.attr in _CALL_METADATA and set(receiver_words) & _CALL_METADATA_OWNERS:
            # LiveKit's `ctx.job.metadata`, `ctx.room.metadata`, `participant.metadata` /
            # `.attributes`: what the dispatcher or the caller's client set for this call
            # (https://docs.livekit.io/agents/server/job.md): per session.
            what = f"{ast.unparse(node)} (set per call)"
            return [Source("CB103", Frequency.SESSION, node, what, per_call=True)]
        if isinstance(node.value, ast.Name) and _per_session_argument(ix, node):
            # `main(args.room_url, args.token, args.topic)`: a bot process started for each
            # room (it is given the room's URL or a call's id on its command line), so every
            # argument it is started with is that session's.
            what = f"{ast.unparse(node)} (a command-line argument of a bot started per session)"
            return [Source("CB103", Frequency.SESSION, node, what, per_call=True)]
        if "detector" in receiver_words:
            # `self.language_detector.dominant_language`: what a detector found in the
            # caller's speech changes with the caller, wherever the detector was built.
            what = f"what {ast.unparse(node.value)} detected ({node.attr})"
            return [Source("CB103", Frequency.SESSION, node, what)]
        base = self.classify(node.value, depth, seen)
        if _names_prompt(node.attr):
            base = _loaded_prompt(base)
        if node.attr in _ATTR_GRANULARITY:
            return _clock(base, _ATTR_GRANULARITY[node.attr], lambda v, a=node.attr: getattr(v, a))
        if not ix.is_imported(node) and all(s.guessed for s in base):
            if receiver_words and names_business(receiver_words[-1]):
                # `self.restaurant.phone`, `clinic.address`: the business's own details,
                # set per deployment, not the caller's (a field name alone would say so).
                return _plain([s for s in base if not s.guessed])
            # Nothing, or only a guess from the receiver's name or type (`call:
            # CallStateModel`): the field's own name says more (`call.messages`).
            base = (
                self._by_name(node.attr, node)
                or self._by_owner(receiver_words, node.attr, node)
                or base
            )
        return _plain(base)

    def _by_owner(self, receiver_words: list[str], attr: str, node: ast.AST) -> list[Source]:
        """A field read off an object named for a person's record: ``user.name``, ``guest.info``.

        The field's name alone says nothing (``name``, ``info``), but with its owner it reads
        as a placeholder's dotted path does (``user_name``: per-caller data). Only owners that
        name a person whose record it is (a user, a customer, a guest...), never an agent or a
        bot, whose fields are configuration.
        """
        if not receiver_words or receiver_words[-1] not in _PERSON_OWNERS:
            return []
        guess = classify_name(f"{receiver_words[-1]}_{attr}")
        if guess is None:
            return []
        what = f"{receiver_words[-1]}.{attr}"
        return [Source(guess[0], guess[1], node, what, guessed=True)]

    # -- calls ------------------------------------------------------------------------

    def _function_result(
        self, fdef: ast.AST, call: ast.Call, depth: int, seen: frozenset, skip_self: bool
    ) -> list[Source]:
        """Sources of what a call of a ``def`` the code defines returns."""
        if id(fdef) in seen:
            return []
        self.resolved_calls.add(id(call))
        saved = self.bindings
        self.bindings = {**saved, **bind_arguments(fdef, call, skip_self)}
        try:
            returns = function_returns(fdef)
            found = [s for r in returns for s in self.classify(r, depth, seen | {id(fdef)})]
        finally:
            self.bindings = saved
        name = getattr(fdef, "name", "function")
        fix = self.ix(fdef)
        out = []
        for s in found:
            if self._within(fix, s.origin, fdef):
                # Computed when the helper runs: graded where it is called.
                s = replace(
                    s,
                    origin=call,
                    root=s.root if s.root is not None else s.origin,
                    what=f"{name}() -> {s.what}",
                )
            out.append(s)
        return out if len(returns) <= 1 else _plain(out)

    @staticmethod
    def _within(index: ModuleIndex, node: ast.AST, ancestor: ast.AST) -> bool:
        cur: ast.AST | None = node
        while cur is not None:
            if cur is ancestor:
                return True
            cur = index.parent.get(cur)
        return False

    def class_of_value(self, node: ast.AST) -> ast.ClassDef | None:
        """The class of the object an expression holds, when it is built by ``Cls(...)``."""
        value: ast.AST | None = node
        for _ in range(4):
            if isinstance(value, ast.Call):
                func = value.func
                found: ast.AST | None = None
                if isinstance(func, ast.Name):
                    ix = self.ix(func)
                    found = None if ix.resolve_name(func) else ix.resolve_function(func)
                    if found is None and self.external(func):
                        found = self.imported_value(func)
                elif isinstance(func, ast.Attribute):
                    found = self.module_attribute(func)
                return found if isinstance(found, ast.ClassDef) else None
            if isinstance(value, ast.Name):
                values = self.ix(value).resolve_name(value)
                value = values[0] if len(values) == 1 and not isinstance(values[0], Param) else None
            elif (
                isinstance(value, ast.Attribute)
                and isinstance(value.value, ast.Name)
                and value.value.id == "self"
            ):
                values = self.ix(value).resolve_self_attr(value)
                value = values[0] if len(values) == 1 else None
            else:
                return None
        return None

    def _callee(self, node: ast.Call) -> tuple[ast.AST | None, bool]:
        """The ``def`` a call invokes when the linted code defines it: ``(def, is_method)``."""
        func = node.func
        ix = self.ix(node)
        if isinstance(func, ast.Name):
            if ix.resolve_name(func):
                return None, False
            fdef = ix.resolve_function(func)
            if fdef is None and self.external(func):
                fdef = self.imported_value(func)
            if isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return fdef, False
            return None, False
        if isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
                fdef = ix.resolve_method(func)
                if isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    return fdef, True
                return None, False
            fdef = self.module_attribute(func)
            if isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return fdef, False
            cls = self.class_of_value(func.value)
            if cls is not None:
                for stmt in cls.body:
                    if (
                        isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and stmt.name == func.attr
                    ):
                        return stmt, True
        return None, False

    def _call(self, node: ast.Call, depth: int, seen: frozenset) -> list[Source]:
        c = self.classify
        ix = self.ix(node)
        func = node.func
        dotted = ix.dotted(func) or ""
        explicit = (ix.is_imported(func) or dotted.count(".") >= 1) and not _shadowed(ix, func)
        what = shorten(ast.unparse(node), 50)
        args = list(node.args) + [k.value for k in node.keywords]
        if explicit:
            for name, (freq, probe) in _CLOCK_CALLS.items():
                if dotted == name or ("." in dotted and name.endswith("." + dotted)):
                    sample = ClockValue(probe) if probe is not None else None
                    return [Source("CB101", freq, node, what, sample=sample)]
            if dotted in ("time.strftime",) and node.args:
                fmt = node.args[0]
                if isinstance(fmt, ast.Constant) and isinstance(fmt.value, str):
                    freq = strftime_frequency(fmt.value)
                    sample = ClockValue(lambda t, f=fmt.value: t.strftime(f))
                else:
                    freq, sample = Frequency.REQUEST, None
                return [Source("CB101", freq, node, what, sample=sample)]
            module = dotted.rsplit(".", 1)[0] if "." in dotted else ""
            if dotted in _SEEDABLE:
                seeded = bool(node.args) and all(isinstance(a, ast.Constant) for a in node.args)
                return [] if seeded else [Source("CB102", Frequency.REQUEST, node, what)]
            if dotted in _RANDOM_CALLS or module in _RANDOM_MODULES:
                sample = _RANDOM_SAMPLES.get(dotted)
                return [Source("CB102", Frequency.REQUEST, node, what, sample=sample)]
            if dotted in _UNORDERED_CALLS:
                return [Source("CB106", Frequency.PROCESS, node, f"{dotted}() order")]
            if dotted.startswith(_FETCH_CALLS):
                return [Source("CB104", Frequency.SESSION, node, what)]
        if isinstance(func, ast.Name) and func.id in ("set", "frozenset"):
            inner = [s for a in node.args for s in c(a, depth, seen)]
            return _plain(inner) + [Source("CB106", Frequency.PROCESS, node, f"{func.id}() order")]
        if isinstance(func, ast.Name) and func.id == "sorted":
            return _plain([s for a in node.args for s in c(a, depth, seen) if s.rule != "CB106"])
        if isinstance(func, ast.Name) and func.id in ("str", "int", "round", "float") and node.args:
            conv = {"str": str, "int": int, "round": round, "float": float}[func.id]
            return [replace(s, sample=_apply(s.sample, conv)) for s in c(node.args[0], depth, seen)]
        fdef, is_method = self._callee(node)
        if fdef is not None:
            return self._function_result(fdef, node, depth, seen, skip_self=is_method)
        # A call through a name or self attribute bound to a lambda/callable value.
        callee: list[Source] = []
        if isinstance(func, ast.Name):
            for v in ix.resolve_name(func):
                if not isinstance(v, Param):
                    callee.extend(c(v, depth, seen))
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
        ):
            for v in ix.resolve_self_attr(func):
                callee.extend(c(v, depth, seen))
        if callee:
            return _plain(callee + [s for a in args for s in c(a, depth, seen)])
        if dotted.endswith("json.dumps") or dotted == "dumps":
            sort_keys = any(
                k.arg == "sort_keys" and isinstance(k.value, ast.Constant) and k.value.value
                for k in node.keywords
            )
            found = [s for a in node.args[:1] for s in c(a, depth, seen)]
            return _plain([s for s in found if not (sort_keys and s.rule == "CB106")])
        if isinstance(func, ast.Attribute):
            receiver = c(func.value, depth, seen)
            found = self._method(node, func, receiver, args, depth, seen, what)
            if found is not None:
                return found
            found = _plain(receiver + [s for a in args for s in c(a, depth, seen)])
        else:
            found = _plain([s for a in args for s in c(a, depth, seen)])
        return found + self._by_call_name(node, dotted, found, what)

    def _method(self, node, func, receiver, args, depth, seen, what) -> list[Source] | None:
        """Sources of ``receiver.method(...)`` for methods with a known meaning, else None."""
        c = self.classify
        attr = func.attr
        if attr == "join":
            # The joined elements are the whole text: where the hole is, they are.
            return _plain(receiver) + _plain([s for a in args for s in c(a, depth, seen)])
        if attr in ("format", "format_map", "substitute", "safe_substitute", "render"):
            # Position inside a template the renderer could not lay out is unknown.
            return _plain(receiver) + _inside([s for a in args for s in c(a, depth, seen)])
        clock = any(s.rule == "CB101" for s in receiver)
        if attr == "strftime":
            fmt = node.args[0] if node.args else None
            if isinstance(fmt, ast.Constant) and isinstance(fmt.value, str):
                g = strftime_frequency(fmt.value)
                return _clock(receiver, g, lambda v, f=fmt.value: v.strftime(f))
            return _plain(receiver)
        if attr == "isoformat" and clock:
            spec = next((k.value for k in node.keywords if k.arg == "timespec"), None)
            spec = spec if spec is not None else (node.args[1] if len(node.args) > 1 else None)
            timespec = spec.value if isinstance(spec, ast.Constant) else "auto"
            g = _TIMESPEC.get(str(timespec), Frequency.REQUEST)
            kw = {} if timespec == "auto" else {"timespec": timespec}
            return _clock(receiver, g, lambda v, kw=kw: v.isoformat(**kw))
        if attr == "replace" and clock and node.keywords:
            zeroed = {k.arg for k in node.keywords if isinstance(k.value, ast.Constant)}
            g = Frequency.REQUEST
            if {"second", "microsecond"} <= zeroed:
                g = Frequency.MINUTE
            if {"minute", "second", "microsecond"} <= zeroed:
                g = Frequency.HOUR
            if {"hour", "minute", "second", "microsecond"} <= zeroed:
                g = Frequency.DAY
            try:
                kw = {k.arg: _constant(k.value) for k in node.keywords if k.arg}
            except ValueError:
                return _clock(receiver, g)
            return _clock(receiver, g, lambda v, k=kw: v.replace(**k))
        if attr in _METHOD_GRANULARITY and clock:
            return _clock(receiver, _METHOD_GRANULARITY[attr], lambda v, a=attr: getattr(v, a)())
        if clock and attr not in ("format", "replace"):
            try:
                consts = [_constant(a) for a in node.args]
                kw = {k.arg: _constant(k.value) for k in node.keywords if k.arg}
            except ValueError:
                consts = None
            if consts is not None and len(kw) == len(node.keywords):
                # Any other method with literal arguments (`.split("T")`, `.zfill(2)`):
                # evaluate it on the clock's value.
                return _clock(
                    receiver, None, lambda v, a=attr, c=consts, k=kw: getattr(v, a)(*c, **k)
                )
        if attr == "replace":
            return _plain(receiver) + _inside([s for a in args for s in c(a, depth, seen)])
        if attr in _UNORDERED_METHODS:
            return _plain(receiver) + [Source("CB106", Frequency.PROCESS, node, f".{attr}() order")]
        if attr == "get_messages":
            return [Source("CB105", Frequency.REQUEST, node, what)]
        if attr == "get" and self._fixed_table(func.value):
            # `TRANSLATIONS[lang].get(key, key)`: one of the table's fixed texts.
            return []
        if attr == "get" and node.args and isinstance(node.args[0], ast.Constant):
            key = node.args[0].value
            if isinstance(key, str) and names_deployment(key):
                return []  # `metadata.get("agent_id")`: which configured agent (see above)
            if isinstance(key, str) and not receiver:
                if self._of_business_record(func.value):
                    return []
                return self._by_name(key, node)
        if attr in _PASS_THROUGH_METHODS:
            return [
                replace(s, sample=_apply(s.sample, lambda v, a=attr: getattr(v, a)()))
                for s in receiver
            ]
        return None

    def _by_call_name(self, node: ast.Call, dotted: str, found: list[Source], what: str):
        """What an unresolved call's own name says it returns (fetched text, a record...)."""
        if not dotted:
            return []
        root = dotted.split(".", 1)[0]
        if "." in dotted and (root in sys.stdlib_module_names or root in _KNOWN_LIBRARIES):
            # `re.search(...)`, `re.match(...)`: a library function's name says what it does
            # to its arguments (a regex search), not what it fetches.
            return []
        name_words = set(words(dotted.rsplit(".", 1)[-1]))
        # `store.search("prompt_blocks", user_id="admin")`: the same lookup on every call,
        # so the same result for every caller (the deployment's stored settings). Not a
        # clock: `get_current_time("UTC")` still reads the time.
        lookup_for_all = _same_for_every_call(node)
        out: list[Source] = []
        if (
            not any(s.rule == "CB104" for s in found)
            and name_words & _FETCH_NAME_WORDS
            and not lookup_for_all
        ):
            out.append(Source("CB104", Frequency.SESSION, node, what))
        elif not found:
            guess = classify_name(dotted.rsplit(".", 1)[-1])
            if guess and guess[0] == "CB103" and not lookup_for_all:
                out.append(Source("CB103", Frequency.SESSION, node, what, guessed=True))
            elif guess and guess[0] == "CB101" and name_words & _CLOCK_NAME_WORDS:
                out.append(Source("CB101", guess[1], node, what, guessed=True))
        return out


def _all_fixed_text(node: ast.AST, depth: int = 0) -> bool:
    """A dict literal whose leaves are all string constants (two levels deep at most)."""
    if not isinstance(node, ast.Dict) or not node.values or depth > 1:
        return False
    return all(
        (isinstance(v, ast.Constant) and isinstance(v.value, str)) or _all_fixed_text(v, depth + 1)
        for v in node.values
    )


def _same_for_every_call(call: ast.Call) -> bool:
    """Whether a lookup's arguments are the same for every call of the agent.

    Constants, and names that select the configured agent (``agent_slug``, ``agent_id``:
    see :func:`~pipecat_fast.lint.vocab.names_deployment`), as values or keywords. What
    such a lookup returns is the deployment's stored configuration, not per-call content.
    """
    args = [*call.args, *(k.value for k in call.keywords)]
    if not args:
        return False
    for kw in call.keywords:
        if kw.arg is not None and names_deployment(kw.arg):
            continue
        if not _fixed_or_deployment(kw.value):
            return False
    return all(_fixed_or_deployment(a) for a in call.args)


def _fixed_or_deployment(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return names_deployment(node.id)
    if isinstance(node, ast.Attribute):
        return names_deployment(node.attr)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        key = node.slice.value
        return isinstance(key, str) and names_deployment(key)
    return False


_SESSION_FLAG_WORDS = {"room", "meeting", "session", "call", "conversation", "sid"}
"""Words of a command-line option that names the one session a process serves."""
_SETTING_FLAG_WORDS = {
    "type", "mode", "model", "voice", "language", "lang", "locale", "timezone", "tz",
    "provider", "port", "host", "config", "env", "level", "debug", "verbose", "log",
    "url", "token", "key", "transport", "sample", "rate", "dir", "path", "file",
}  # fmt: skip
"""Words of an option that configures the process rather than carrying the session's data."""


def _per_session_argument(ix: ModuleIndex, node: ast.Attribute) -> bool:
    """``args.topic`` of ``args = parser.parse_args()`` in a bot started per session.

    The module's parser takes an option naming one session (``--room-url``, ``--call-sid``,
    ``--session-id``: Pipecat's classic spawn-per-room runner passes ``-u ROOM -t TOKEN``),
    and this option is neither a setting (``--model``, ``--voice``) nor a menu (``choices=``).
    """
    values = ix.resolve_name(node.value)
    if len(values) != 1 or not isinstance(values[0], ast.Call):
        return False
    call = values[0]
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "parse_args"):
        return False
    options: dict[str, ast.Call] = {}
    session = False
    for n in ast.walk(ix.tree):
        if not (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "add_argument"
        ):
            continue
        flags = [
            a.value for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        dest = next(
            (
                k.value.value
                for k in n.keywords
                if k.arg == "dest" and isinstance(k.value, ast.Constant)
            ),
            None,
        )
        for flag in flags:
            w = set(words(flag.lstrip("-")))
            if w & _SESSION_FLAG_WORDS and not w & {"max", "timeout", "limit"}:
                session = True
        long = [f for f in flags if f.startswith("--")] or flags
        name = dest or (long[0].lstrip("-").replace("-", "_") if long else None)
        if name:
            options[name] = n
    option = options.get(node.attr)
    if not session or option is None:
        return False
    if any(k.arg in ("choices", "type", "action") and _not_text_option(k) for k in option.keywords):
        return False
    w = set(words(node.attr))
    return not (w & _SETTING_FLAG_WORDS or w & _SESSION_FLAG_WORDS)


def _not_text_option(kw: ast.keyword) -> bool:
    """``choices=[...]`` (a menu), ``type=int``/``float``, ``action="store_true"``."""
    if kw.arg == "choices":
        return True
    if kw.arg == "type":
        return isinstance(kw.value, ast.Name) and kw.value.id in ("int", "float", "bool")
    return True


_STATE_OWNERS = {
    "call",
    "caller",
    "session",
    "conversation",
    "user",
    "customer",
    "client",
    "patient",
    "guest",
    "contact",
}
_PERSON_OWNERS = _STATE_OWNERS - {"call", "session", "conversation"} | {
    "member",
    "student",
    "player",
    "subscriber",
    "visitor",
    "candidate",
}
"""Receivers whose fields are one person's record (``user.name``, ``candidate.info``)."""
_STATE_WORDS = {"state", "profile", "details"}
_CALL_METADATA = {"metadata", "attributes"}
FRAMEWORK_CLOCK_TEXT = {
    "homeassistant.helpers.llm.DATE_TIME_PROMPT": Frequency.REQUEST,
}
"""Framework constants whose text is a template the framework renders with the clock.

Home Assistant's ``llm.DATE_TIME_PROMPT`` is ``'Current time is {{ now().strftime(
"%H:%M:%S") }}. Today's date is ...'``, rendered on every request by its template engine
(home-assistant/core, ``homeassistant/helpers/llm.py``): the time to the second.
"""

_CALL_METADATA_OWNERS = {"job", "room", "participant", "caller", "call", "dispatch"}


def is_setting(node: ast.AST) -> bool:
    """A configuration read, set per deployment rather than per caller.

    ``config.CUSTOM_PROFILE`` (an ALL_CAPS attribute), ``os.environ["X"]``,
    ``os.environ.get("X")``, ``os.getenv("X")``: the name it is held under (``profile``)
    says nothing more.
    """
    if isinstance(node, ast.Attribute):
        return node.attr.isupper() and len(node.attr) > 1
    target = node.value if isinstance(node, ast.Subscript) else node
    if isinstance(target, ast.Call):
        target = target.func
    dotted = ast.unparse(target) if isinstance(target, (ast.Attribute, ast.Name)) else ""
    return dotted in ("os.environ", "os.environ.get", "os.getenv", "environ", "getenv")


_CLOCK_TYPES: dict[str, tuple[Frequency, Any]] = {
    "datetime": (Frequency.REQUEST, lambda t: t),
    "datetime.datetime": (Frequency.REQUEST, lambda t: t),
    "date": (Frequency.DAY, lambda t: t.date()),
    "datetime.date": (Frequency.DAY, lambda t: t.date()),
    "pendulum.DateTime": (Frequency.REQUEST, lambda t: t),
    "arrow.Arrow": (Frequency.REQUEST, lambda t: t),
}
"""Parameter types that hold an instant (a time or a date), and its value at an instant."""


def _typed_clock(arg: ast.arg) -> list[Source]:
    """A parameter typed as a time or a date (``now: datetime``, ``day: date | None``).

    Its type says what its name may not: an instant the caller passes in, which differs
    from one call of the function to the next (a clock read, an appointment). Its format
    (``{now:%A}``) then says how often the rendered text changes.
    """
    if arg.annotation is None:
        return []
    try:
        text = ast.unparse(arg.annotation).replace(" ", "")
    except (ValueError, RecursionError):
        return []
    for wrapper in ("Optional[", "typing.Optional["):
        if text.startswith(wrapper) and text.endswith("]"):
            text = text[len(wrapper) : -1]
    text = text.removesuffix("|None").removeprefix("None|")
    typed = _CLOCK_TYPES.get(text)
    if typed is None:
        return []
    freq, probe = typed
    what = f"{arg.arg} (a `{text}` parameter)"
    return [Source("CB101", freq, arg, what, sample=ClockValue(probe))]


def _record_keys(fn: ast.AST, name: str) -> list[str]:
    """The constant keys read off ``name`` in ``fn`` (``name["k"]``, ``name.get("k")``)."""
    keys: list[str] = []
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == name
            and isinstance(node.slice, ast.Constant)
        ):
            keys.append(node.slice.value)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == name
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            keys.append(node.args[0].value)
    return [k for k in keys if isinstance(k, str)]


def _business_record(fn: ast.AST, name: str) -> bool:
    """A record its function reads the business's own fields off (``ctx["companyName"]``).

    Its contact fields (``ctx.get("contactEmail")``) are the business's, set per
    deployment or tenant, not the caller's.
    """
    return any((w := words(k)) and names_business(w[0]) for k in _record_keys(fn, name))


def _caller_record(param: Param) -> list[Source]:
    """A parameter its function reads caller fields off (``data["contact_number"]``).

    A record with the caller's number or name in it is that call's record, so its other
    fields (``data.get("objective")``) are that call's too.
    """
    fn, name = param.function, param.arg.arg
    if _business_record(fn, name):
        return []
    for node in ast.walk(fn):
        key = None
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == name
            and isinstance(node.slice, ast.Constant)
        ):
            key = node.slice.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == name
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            key = node.args[0].value
        guess = classify_name(key) if isinstance(key, str) else None
        if guess is not None and guess[0] == "CB103":
            what = f"{name} (a record holding the caller's {key})"
            return [Source("CB103", Frequency.SESSION, param.arg, what, guessed=True)]
    return []


def _handler_arguments(param: Param) -> list[Source]:
    """The first parameter of a Pipecat Flows function handler: the call's arguments.

    A handler is ``async def handle(args, flow_manager: FlowManager)``; ``args`` holds what
    the model took from this call's conversation (``FlowArgs``, see the registry), however
    it is annotated (``dict``) or named.
    """
    fn = param.function
    args = getattr(fn, "args", None)
    if args is None:
        return []
    positional = list(args.posonlyargs) + list(args.args)
    if positional and positional[0].arg in ("self", "cls"):
        positional = positional[1:]
    if not positional or positional[0] is not param.arg:
        return []
    managers = [
        a
        for a in positional[1:] + list(args.kwonlyargs)
        if a.annotation is not None and ast.unparse(a.annotation).split(".")[-1] == "FlowManager"
    ]
    if not managers:
        return []
    what = f"{param.arg.arg} (a Flows handler's arguments: what the model took from this call)"
    return [Source("CB103", Frequency.SESSION, param.arg, what, guessed=True)]


def _call_state(arg: ast.arg) -> list[Source]:
    """A parameter typed as one call's state (``call: CallStateModel``): per-session data.

    Also a caller's state or profile (``user: UserState``, ``c: CustomerProfile``). The
    type says what the name does not: the object holds the state of the call being served
    (its caller's claim, language, reminders), so every field read off it is that call's
    data. Only the annotation counts (a plain ``call`` may be a tool call).
    """
    if arg.annotation is None:
        return []
    outer = arg.annotation.value if isinstance(arg.annotation, ast.Subscript) else arg.annotation
    outer_name = getattr(outer, "id", None) or getattr(outer, "attr", None)
    if outer_name in run_context_types():
        # OpenAI Agents' `RunContextWrapper[T]`: the context object passed to this run.
        what = f"{arg.arg} (a {outer_name}: this run's own context)"
        return [Source("CB103", Frequency.SESSION, arg, what, guessed=True)]
    if outer_name in call_argument_types():
        # Pipecat Flows' `args: FlowArgs`: what the model took from this call's conversation.
        what = f"{arg.arg} (a {outer_name}: the arguments the model took from this call)"
        return [Source("CB103", Frequency.SESSION, arg, what, guessed=True)]
    try:
        ws = set(words(ast.unparse(arg.annotation)))
    except (ValueError, RecursionError):
        return []
    if not (ws & _STATE_OWNERS and ws & _STATE_WORDS):
        return []
    what = f"{arg.arg} (a {ast.unparse(arg.annotation)}: one call's state)"
    return [Source("CB103", Frequency.SESSION, arg, what, guessed=True)]
