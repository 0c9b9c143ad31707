"""Which volatile sources feed a Python expression: clock, random, caller, fetched, history.

``classify(expr)`` walks the expression and the names it reads (through
:class:`~pipecat_fast.lint.py_index.ModuleIndex`) and returns :class:`Source` objects: what
changes, how often the value itself changes, and where it is computed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

from pipecat_fast.lint.findings import Frequency, shorten
from pipecat_fast.lint.py_index import ModuleIndex, Param
from pipecat_fast.lint.vocab import classify_name, words

MAX_DEPTH = 10

_CLOCK_CALLS: dict[str, Frequency] = {
    "datetime.datetime.now": Frequency.REQUEST,
    "datetime.datetime.utcnow": Frequency.REQUEST,
    "datetime.datetime.today": Frequency.REQUEST,
    "datetime.date.today": Frequency.DAY,
    "time.time": Frequency.REQUEST,
    "time.time_ns": Frequency.REQUEST,
    "time.localtime": Frequency.REQUEST,
    "time.gmtime": Frequency.REQUEST,
    "time.ctime": Frequency.REQUEST,
    "time.asctime": Frequency.REQUEST,
    "time.monotonic": Frequency.REQUEST,
    "time.perf_counter": Frequency.REQUEST,
    "arrow.now": Frequency.REQUEST,
    "arrow.utcnow": Frequency.REQUEST,
    "pendulum.now": Frequency.REQUEST,
    "pendulum.today": Frequency.DAY,
    "django.utils.timezone.now": Frequency.REQUEST,
}
_RANDOM_MODULES = ("random", "secrets", "numpy.random")
_RANDOM_CALLS = {"uuid.uuid1", "uuid.uuid4", "os.urandom", "shortuuid.uuid", "nanoid.generate"}
_UNORDERED_CALLS = {"glob.glob", "glob.iglob", "os.listdir", "os.scandir", "os.walk"}
_UNORDERED_METHODS = {"iterdir", "rglob", "glob", "listdir"}
_FETCH_CALLS = (
    "requests.",
    "httpx.",
    "urllib.request.urlopen",
    "aiohttp.",
)
_PASS_THROUGH_METHODS = {"strip", "lstrip", "rstrip", "lower", "upper", "title", "capitalize"}

_TIME_DIRECTIVES = set("HIMSfpXcTRsrk")
_DAY_DIRECTIVES = set("daAjxDFeuwUWVG")


def strftime_frequency(fmt: str) -> Frequency:
    """How often a ``strftime`` format's output changes: time of day, day, or coarser."""
    directives = {fmt[i + 1] for i in range(len(fmt) - 1) if fmt[i] == "%"}
    if directives & _TIME_DIRECTIVES:
        return Frequency.REQUEST
    if directives & _DAY_DIRECTIVES:
        return Frequency.DAY
    return Frequency.PROCESS


@dataclass(frozen=True)
class Source:
    """A volatile value feeding an expression.

    Attributes:
        rule: Rule id (``"CB101"``...).
        granularity: How often the value changes when re-evaluated (a date: per day).
        origin: Node where the value is computed (a call, a parameter, a name).
        what: Short description for messages.
        inside: True when the value sits somewhere inside a larger string whose layout
            is unknown (position within the enclosing hole cannot be told).
        guessed: True when only the name says what the value is (a parameter called
            ``caller_phone``), not the code computing it.
    """

    rule: str
    granularity: Frequency
    origin: ast.AST
    what: str
    inside: bool = False
    guessed: bool = False


def _inside(sources: list[Source]) -> list[Source]:
    return [replace(s, inside=True) for s in sources]


def _is_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.JoinedStr):
        return all(isinstance(v, ast.Constant) for v in node.values)
    return False


class Classifier:
    """Finds volatile sources in expressions of one module.

    Args:
        index: The module index.
    """

    def __init__(self, index: ModuleIndex) -> None:
        self.index = index

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
                out.extend(_inside(found) if text_before else found)
                text_before = True
            return out
        if isinstance(node, ast.FormattedValue):
            found = c(node.value, depth, seen)
            spec = node.format_spec
            if isinstance(spec, ast.JoinedStr) and _is_literal(spec):
                fmt = "".join(str(v.value) for v in spec.values)
                found = [
                    replace(s, granularity=strftime_frequency(fmt)) if s.rule == "CB101" else s
                    for s in found
                ]
            return found
        if isinstance(node, ast.Call):
            return self._call(node, depth, seen)
        if isinstance(node, ast.Await):
            found = c(node.value, depth, seen)
            if isinstance(node.value, ast.Call) and not any(s.rule == "CB104" for s in found):
                name = self.index.dotted(node.value.func) or "call"
                found.append(
                    Source("CB104", Frequency.SESSION, node, f"awaited result of {name}()")
                )
            return found
        if isinstance(node, ast.Name):
            return self._name(node, depth, seen)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, depth, seen)
        if isinstance(node, ast.Subscript):
            found = c(node.value, depth, seen)
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and not found:
                found = self._by_name(key.value, node)
            return found
        if isinstance(node, ast.BinOp):
            left = c(node.left, depth, seen)
            right = c(node.right, depth, seen)
            # Whatever the right operand holds sits after the left one's text.
            return left + _inside(right)
        if isinstance(node, (ast.Set, ast.SetComp)):
            inner = [s for e in ast.iter_child_nodes(node) for s in c(e, depth, seen)]
            return inner + [
                Source("CB106", Frequency.PROCESS, node, "set (iteration order varies)")
            ]
        if isinstance(node, ast.Lambda):
            return c(node.body, depth, seen)
        if isinstance(node, ast.comprehension):
            return c(node.iter, depth, seen)
        out = []
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.expr, ast.comprehension, ast.keyword)):
                out.extend(c(child.value if isinstance(child, ast.keyword) else child, depth, seen))
        return out

    # -- names ------------------------------------------------------------------------

    def _by_name(self, name: str, origin: ast.AST) -> list[Source]:
        guess = classify_name(name)
        if guess is None:
            return []
        rule, freq, _noun = guess
        return [Source(rule, freq, origin, name, guessed=True)]

    def _values(self, values, name: str, origin, depth, seen) -> list[Source]:
        found: list[Source] = []
        literal = False
        for v in values:
            if isinstance(v, Param):
                found.extend(self._by_name(v.arg.arg, v.arg))
                continue
            literal = literal or _is_literal(v)
            found.extend(self.classify(v, depth, seen))
        if not found and not literal:
            found = self._by_name(name, origin)
        return found

    def _name(self, node: ast.Name, depth: int, seen: frozenset) -> list[Source]:
        values = self.index.resolve_name(node)
        if not values and node.id in self.index.imports:
            return []
        return self._values(values, node.id, node, depth, seen)

    def _attribute(self, node: ast.Attribute, depth: int, seen: frozenset) -> list[Source]:
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            values = self.index.resolve_self_attr(node)
            found = self._values(values, node.attr, node, depth, seen)
            return found if len(values) <= 1 else _inside(found)
        receiver_words = words(ast.unparse(node.value))
        if node.attr == "messages" and ("context" in receiver_words or "ctx" in receiver_words):
            return [Source("CB105", Frequency.REQUEST, node, "context messages")]
        base = self.classify(node.value, depth, seen)
        clock = {"hour": Frequency.SESSION, "minute": Frequency.REQUEST}
        coarse = {"day": Frequency.DAY, "year": Frequency.PROCESS, "month": Frequency.PROCESS}
        adjust = clock | coarse
        if node.attr in adjust:
            base = [
                replace(s, granularity=min(s.granularity, adjust[node.attr]))
                if s.rule == "CB101"
                else s
                for s in base
            ]
        if not base and not self.index.is_imported(node):
            base = self._by_name(node.attr, node)
        return base

    # -- calls ------------------------------------------------------------------------

    def _call(self, node: ast.Call, depth: int, seen: frozenset) -> list[Source]:
        c = self.classify
        func = node.func
        dotted = self.index.dotted(func) or ""
        explicit = self.index.is_imported(func) or dotted.count(".") >= 1
        what = shorten(ast.unparse(node), 50)
        if explicit:
            for name, freq in _CLOCK_CALLS.items():
                if dotted == name or ("." in dotted and name.endswith("." + dotted)):
                    return [Source("CB101", freq, node, what)]
            if dotted in ("time.strftime",) and node.args:
                fmt = node.args[0]
                freq = (
                    strftime_frequency(fmt.value)
                    if isinstance(fmt, ast.Constant) and isinstance(fmt.value, str)
                    else Frequency.REQUEST
                )
                return [Source("CB101", freq, node, what)]
            module = dotted.rsplit(".", 1)[0] if "." in dotted else ""
            if dotted in _RANDOM_CALLS or module in _RANDOM_MODULES:
                return [Source("CB102", Frequency.REQUEST, node, what)]
            if dotted in _UNORDERED_CALLS:
                return [Source("CB106", Frequency.PROCESS, node, f"{dotted}() order")]
            if dotted.startswith(_FETCH_CALLS):
                return [Source("CB104", Frequency.SESSION, node, what)]
        if isinstance(func, ast.Name) and func.id in ("set", "frozenset"):
            inner = [s for a in node.args for s in c(a, depth, seen)]
            return inner + [Source("CB106", Frequency.PROCESS, node, f"{func.id}() order")]
        if isinstance(func, ast.Name) and func.id == "sorted":
            return [s for a in node.args for s in c(a, depth, seen) if s.rule != "CB106"]
        args = list(node.args) + [k.value for k in node.keywords]
        # A call through a name or self attribute bound to a lambda/callable value.
        callee: list[Source] = []
        if isinstance(func, ast.Name):
            for v in self.index.resolve_name(func):
                if not isinstance(v, Param):
                    callee.extend(c(v, depth, seen))
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
        ):
            for v in self.index.resolve_self_attr(func):
                callee.extend(c(v, depth, seen))
        if callee:
            return callee + [s for a in args for s in c(a, depth, seen)]
        if dotted.endswith("json.dumps") or dotted == "dumps":
            sort_keys = any(
                k.arg == "sort_keys" and isinstance(k.value, ast.Constant) and k.value.value
                for k in node.keywords
            )
            found = [s for a in node.args[:1] for s in c(a, depth, seen)]
            return [s for s in found if not (sort_keys and s.rule == "CB106")]
        if isinstance(func, ast.Attribute):
            attr = func.attr
            receiver = c(func.value, depth, seen)
            if attr == "strftime":
                fmt = node.args[0] if node.args else None
                if isinstance(fmt, ast.Constant) and isinstance(fmt.value, str):
                    g = strftime_frequency(fmt.value)
                    receiver = [
                        replace(s, granularity=g) if s.rule == "CB101" else s for s in receiver
                    ]
                return receiver
            if attr == "date":
                return [
                    replace(s, granularity=min(s.granularity, Frequency.DAY))
                    if s.rule == "CB101"
                    else s
                    for s in receiver
                ]
            if attr in _UNORDERED_METHODS:
                return receiver + [Source("CB106", Frequency.PROCESS, node, f".{attr}() order")]
            if attr == "get_messages":
                return [Source("CB105", Frequency.REQUEST, node, what)]
            if attr == "get" and node.args and isinstance(node.args[0], ast.Constant):
                key = node.args[0].value
                if isinstance(key, str) and not receiver:
                    return self._by_name(key, node)
            if attr in ("format", "format_map", "replace", "join", "substitute"):
                # Position inside a template the renderer could not lay out is unknown.
                return receiver + _inside([s for a in args for s in c(a, depth, seen)])
            if attr in _PASS_THROUGH_METHODS:
                return receiver
            found = receiver + [s for a in args for s in c(a, depth, seen)]
        else:
            found = [s for a in args for s in c(a, depth, seen)]
        name_words = set(words(dotted.rsplit(".", 1)[-1])) if dotted else set()
        if not any(s.rule == "CB104" for s in found) and name_words & {
            "fetch",
            "scrape",
            "crawl",
            "download",
            "article",
            "search",
            "retrieve",
            "urlopen",
            "browse",
        }:
            found.append(Source("CB104", Frequency.SESSION, node, what))
        return found
