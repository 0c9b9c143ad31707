"""JavaScript/TypeScript mode: the same analysis for voice agents written in JS/TS.

LiveKit's ``agents-js``, OpenAI's realtime agents and Twilio's samples build prompts with
template literals (`` `...${today}...` ``), ``+`` and ``[...].join(...)``. This module
reads a JS/TS file tolerantly (a statement it cannot read is skipped, never an error) and
translates the parts that matter into a Python syntax tree, which the Python-source mode
then lints: ``const``/``let`` declarations, functions and arrow functions, classes (their
constructor, methods and fields), ``return``, object and array literals, calls, template
literals, ``+``, ternaries. JavaScript's clock and random calls become their Python
counterparts (``new Date()`` is ``datetime.datetime.now()``, ``.toISOString()`` is
``.isoformat()``, ``Math.random()`` is ``random.random()``, ``crypto.randomUUID()`` is
``uuid.uuid4()``), ``arr.join(sep)`` is ``sep.join(arr)`` and ``arr.map(x => ...)`` a
comprehension, so the rendering, positions and grading are the Python mode's own. Types,
interfaces and decorators are skipped. Line and column numbers are the file's.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

KEYWORD_STARTS = set(
    "const let var function class return if for while do try switch import export throw "
    "interface type enum declare async break continue namespace module abstract".split()
)
_PUNCT = sorted(
    ">>>= ... === !== **= <<= >>= >>> &&= ||= ??= => == != <= >= && || ?? ?. ++ -- += -= *= "
    "/= %= &= |= ^= ** << >> { } ( ) [ ] ; , < > + - * / % & | ^ ! ~ ? : = . @ #".split(),
    key=len,
    reverse=True,
)
_REGEX_BEFORE = set("(,=:[!&|?{};+-*%<>~^") | {"return", "typeof", "case", "=>", "&&", "||"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}
MAX_TOKENS = 2_000_000


@dataclass
class Tok:
    """A JS token: kind NAME, NUM, STR, TPL (template literal), REGEX, PUNCT or EOF."""

    kind: str
    value: object
    line: int
    col: int
    nl: bool = False
    """True when a line break precedes it (automatic semicolon insertion)."""
    parts: list = field(default_factory=list)
    """For TPL: str pieces and token lists of the ``${...}`` expressions, alternating."""


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.line_start = 0
        self.count = 0

    def _col(self, pos: int) -> int:
        return len(self.text[self.line_start : pos].encode("utf-8"))

    def _advance_lines(self, start: int, end: int) -> None:
        chunk = self.text[start:end]
        n = chunk.count("\n")
        if n:
            self.line += n
            self.line_start = start + chunk.rfind("\n") + 1

    def tokens(self, stop_at_brace: bool = False) -> list[Tok]:
        out: list[Tok] = []
        text = self.text
        depth = 0
        nl = False
        while self.pos < len(text):
            self.count += 1
            if self.count > MAX_TOKENS:
                break
            ch = text[self.pos]
            if ch == "\n":
                nl = True
                self._advance_lines(self.pos, self.pos + 1)
                self.pos += 1
                continue
            if ch in " \t\r\ufeff\u00a0":
                self.pos += 1
                continue
            if text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
                continue
            if text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                end = len(text) if end < 0 else end + 2
                if "\n" in text[self.pos : end]:
                    nl = True
                self._advance_lines(self.pos, end)
                self.pos = end
                continue
            line, col = self.line, self._col(self.pos)
            if ch == "`":
                out.append(self._template(line, col, nl))
            elif ch in "'\"":
                out.append(self._string(ch, line, col, nl))
            elif ch.isdigit() or (ch == "." and text[self.pos + 1 : self.pos + 2].isdigit()):
                m = re.match(r"0[xXoObB][\w]+|[\d_]*\.?[\d_]+(?:[eE][+-]?\d+)?n?", text[self.pos :])
                n = m.group() if m else ch
                self.pos += len(n)
                out.append(Tok("NUM", n, line, col, nl))
            elif ch.isalpha() or ch in "_$" or ord(ch) > 127:
                m = re.match(r"[\w$\u0080-\uffff]+", text[self.pos :])
                name = m.group() if m else ch
                self.pos += len(name)
                out.append(Tok("NAME", name, line, col, nl))
            elif ch == "/" and self._regex_allowed(out):
                out.append(self._regex(line, col, nl))
            else:
                p = next((p for p in _PUNCT if text.startswith(p, self.pos)), ch)
                self.pos += len(p)
                if stop_at_brace:
                    if p == "{":
                        depth += 1
                    elif p == "}":
                        if depth == 0:
                            return out
                        depth -= 1
                out.append(Tok("PUNCT", p, line, col, nl))
            nl = False
        return out

    @staticmethod
    def _regex_allowed(out: list[Tok]) -> bool:
        if not out:
            return True
        prev = out[-1]
        if prev.kind == "PUNCT":
            return prev.value in _REGEX_BEFORE
        return prev.kind == "NAME" and prev.value in _REGEX_BEFORE

    def _regex(self, line: int, col: int, nl: bool) -> Tok:
        text = self.text
        i = self.pos + 1
        in_class = False
        while i < len(text) and text[i] != "\n":
            c = text[i]
            if c == "\\":
                i += 2
                continue
            if c == "[":
                in_class = True
            elif c == "]":
                in_class = False
            elif c == "/" and not in_class:
                i += 1
                break
            i += 1
        while i < len(text) and text[i].isalpha():
            i += 1
        value = text[self.pos : i]
        self.pos = i
        return Tok("REGEX", value, line, col, nl)

    def _escape(self) -> str:
        text = self.text
        c = text[self.pos + 1 : self.pos + 2]
        self.pos += 2
        if c == "\n":
            self._advance_lines(self.pos - 1, self.pos)
            return ""
        if c in _ESCAPES:
            return _ESCAPES[c]
        if c == "x":
            h = text[self.pos : self.pos + 2]
            self.pos += 2
            return chr(int(h, 16)) if re.fullmatch(r"[0-9a-fA-F]{2}", h) else ""
        if c == "u":
            if text[self.pos : self.pos + 1] == "{":
                end = text.find("}", self.pos)
                h = text[self.pos + 1 : end] if end > 0 else ""
                self.pos = end + 1 if end > 0 else self.pos
            else:
                h = text[self.pos : self.pos + 4]
                self.pos += 4
            try:
                return chr(int(h, 16))
            except (ValueError, OverflowError):
                return ""
        return c

    def _string(self, quote: str, line: int, col: int, nl: bool) -> Tok:
        text = self.text
        self.pos += 1
        chars: list[str] = []
        while self.pos < len(text):
            c = text[self.pos]
            if c == "\\":
                chars.append(self._escape())
                continue
            if c == quote:
                self.pos += 1
                break
            if c == "\n":
                break  # unterminated: stop at the line's end
            chars.append(c)
            self.pos += 1
        return Tok("STR", "".join(chars), line, col, nl)

    def _template(self, line: int, col: int, nl: bool) -> Tok:
        text = self.text
        self.pos += 1
        parts: list = []
        chars: list[str] = []
        while self.pos < len(text):
            c = text[self.pos]
            if c == "\\":
                chars.append(self._escape())
                continue
            if c == "`":
                self.pos += 1
                break
            if text.startswith("${", self.pos):
                parts.append("".join(chars))
                chars = []
                self.pos += 2
                inner = self.tokens(stop_at_brace=True)
                parts.append(inner)
                continue
            if c == "\n":
                self._advance_lines(self.pos, self.pos + 1)
            chars.append(c)
            self.pos += 1
        parts.append("".join(chars))
        return Tok("TPL", None, line, col, nl, parts)


class _Skip(Exception):
    """The statement cannot be read: skip to the next one."""


_BINARY = {
    "??": 1,
    "||": 2,
    "&&": 3,
    "|": 4,
    "^": 5,
    "&": 6,
    "==": 7,
    "!=": 7,
    "===": 7,
    "!==": 7,
    "<": 8,
    ">": 8,
    "<=": 8,
    ">=": 8,
    "instanceof": 8,
    "in": 8,
    "<<": 9,
    ">>": 9,
    ">>>": 9,
    "+": 10,
    "-": 10,
    "*": 11,
    "/": 11,
    "%": 11,
    "**": 12,
}
_BINOP = {
    "+": ast.Add,
    "-": ast.Sub,
    "*": ast.Mult,
    "/": ast.Div,
    "%": ast.Mod,
    "**": ast.Pow,
    "|": ast.BitOr,
    "^": ast.BitXor,
    "&": ast.BitAnd,
    "<<": ast.LShift,
    ">>": ast.RShift,
    ">>>": ast.RShift,
}
_ASSIGN_OPS = {"=", "+=", "-=", "*=", "/=", "%=", "**=", "||=", "&&=", "??=", "|=", "&=", "^="}

# Method names mapped to their Python counterparts (what the Python mode understands).
_METHOD_MAP = {
    "toISOString": ("isoformat", None),
    "toJSON": ("isoformat", None),
    "toLocaleDateString": ("strftime", "%A, %B %d, %Y"),
    "toDateString": ("strftime", "%a %b %d %Y"),
    "toLocaleTimeString": ("strftime", "%I:%M:%S %p"),
    "toTimeString": ("strftime", "%H:%M:%S"),
    "toLocaleString": ("strftime", "%c"),
    "toUTCString": ("strftime", "%c"),
    "trim": ("strip", None),
    "trimStart": ("lstrip", None),
    "trimEnd": ("rstrip", None),
    "toUpperCase": ("upper", None),
    "toLowerCase": ("lower", None),
    "replaceAll": ("replace", None),
}
_LOCALE_METHODS = {"toLocaleDateString", "toLocaleTimeString", "toLocaleString"}
_LOCALE_FIELDS = (
    ("weekday", "%A"),
    ("month", "%B"),
    ("day", "%d"),
    ("year", "%Y"),
    ("hour", "%H"),
    ("minute", "%M"),
    ("second", "%S"),
)
"""``Intl.DateTimeFormat`` options and the strftime field each shows."""


def _locale_format(default: str | None, options: ast.AST | None) -> str | None:
    """The strftime equivalent of ``date.toLocale*String(locale, options)``.

    The options name the fields shown (``{hour: 'numeric', minute: '2-digit'}``: to the
    minute), so they say how often the text changes; ``timeStyle: 'short'`` shows no
    seconds. Without fields the method's default applies (the time to the second).
    """
    if not isinstance(options, ast.Dict):
        return default
    keys = {
        k.value: v
        for k, v in zip(options.keys, options.values, strict=True)
        if isinstance(k, ast.Constant)
    }
    shown = [fmt for name, fmt in _LOCALE_FIELDS if name in keys]
    style = keys.get("timeStyle")
    if isinstance(style, ast.Constant):
        shown += ["%H", "%M"] if style.value == "short" else ["%H", "%M", "%S"]
    if "dateStyle" in keys:
        shown = ["%A", "%B", "%d", "%Y"] + shown
    return " ".join(shown) if shown else default


_GETTERS = {
    "getSeconds": "second",
    "getUTCSeconds": "second",
    "getMilliseconds": "microsecond",
    "getMinutes": "minute",
    "getUTCMinutes": "minute",
    "getHours": "hour",
    "getUTCHours": "hour",
    "getDate": "day",
    "getUTCDate": "day",
    "getDay": "day",
    "getMonth": "month",
    "getFullYear": "year",
}


def _name(id_: str, tok: Tok) -> ast.Name:
    return _at(ast.Name(id=id_, ctx=ast.Load()), tok)


def _at(node: ast.AST, tok: Tok) -> ast.AST:
    node.lineno = tok.line  # type: ignore[attr-defined]
    node.col_offset = tok.col  # type: ignore[attr-defined]
    node.end_lineno = tok.line  # type: ignore[attr-defined]
    node.end_col_offset = tok.col  # type: ignore[attr-defined]
    return node


def _dotted(*parts: str, tok: Tok) -> ast.AST:
    node: ast.AST = _name(parts[0], tok)
    for p in parts[1:]:
        node = _at(ast.Attribute(value=node, attr=p, ctx=ast.Load()), tok)
    return node


def _call(func: ast.AST, args: list, tok: Tok, keywords=None) -> ast.Call:
    return _at(ast.Call(func=func, args=args, keywords=keywords or []), tok)  # type: ignore


def _const(value, tok: Tok) -> ast.Constant:
    return _at(ast.Constant(value=value), tok)  # type: ignore[return-value]


class _Parser:
    """Recursive-descent reader of JS/TS statements and expressions into Python AST."""

    def __init__(self, toks: list[Tok]) -> None:
        self.toks = toks
        self.i = 0
        self.hoisted: list[ast.stmt] = []
        self.anon = 0
        self.eof = Tok("EOF", None, toks[-1].line if toks else 1, 0, True)

    # -- token helpers -----------------------------------------------------------------

    def peek(self, k: int = 0) -> Tok:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else self.eof

    def next(self) -> Tok:
        t = self.peek()
        self.i += 1
        return t

    def at(self, value: str, k: int = 0) -> bool:
        t = self.peek(k)
        return t.kind in ("PUNCT", "NAME") and t.value == value

    def eat(self, value: str) -> bool:
        if self.at(value):
            self.i += 1
            return True
        return False

    def expect(self, value: str) -> Tok:
        if not self.at(value):
            raise _Skip(value)
        return self.next()

    def skip_balanced(self) -> None:
        """Skip one token, or a whole bracketed group when it opens one."""
        t = self.next()
        pairs = {"(": ")", "[": "]", "{": "}"}
        if t.kind != "PUNCT" or t.value not in pairs:
            return
        stack = [pairs[t.value]]
        while stack and self.peek().kind != "EOF":
            t = self.next()
            if t.kind == "PUNCT":
                if t.value in pairs:
                    stack.append(pairs[t.value])
                elif t.value == stack[-1]:
                    stack.pop()

    def skip_type(self, stops: set[str]) -> None:
        """Skip a TypeScript type annotation up to one of ``stops`` at depth 0."""
        depth = 0
        while self.peek().kind != "EOF":
            t = self.peek()
            if t.kind == "PUNCT":
                if depth == 0 and t.value in stops:
                    return
                if t.value in ("(", "[", "{", "<"):
                    depth += 1
                elif t.value in (")", "]", "}", ">"):
                    if depth == 0:
                        return
                    depth -= 1
                elif t.value == "=>" and depth == 0 and "=>" in stops:
                    return
            self.i += 1

    def resync(self, start: int | None = None) -> None:
        """Skip to the end of the current statement.

        Stops at a ``;`` outside brackets, before the ``}`` closing the enclosing block, or
        at a line that starts a new statement no further right than this one started (so
        an unclosed bracket does not swallow the rest of the file).
        """
        if start is not None:
            self.i = start
        first_tok = self.peek()
        col, line = first_tok.col, first_tok.line
        depth = 0
        first = True
        while self.peek().kind != "EOF":
            t = self.peek()
            if not first and t.nl and t.line > line and t.col <= col:
                if t.kind == "NAME" and (
                    t.value in KEYWORD_STARTS
                    or (self.peek(1).kind == "PUNCT" and self.peek(1).value in ("=", "("))
                ):
                    return
            if t.kind == "PUNCT":
                if t.value in ("(", "[", "{"):
                    depth += 1
                elif t.value in (")", "]", "}"):
                    if depth == 0 and t.value == "}":
                        return
                    depth = max(0, depth - 1)
                elif t.value == ";" and depth == 0:
                    self.i += 1
                    return
            self.i += 1
            first = False

    # -- statements -----------------------------------------------------------------------

    def program(self) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        while self.peek().kind != "EOF":
            before = self.i
            if self.at("}"):
                self.i += 1
                continue
            out.extend(self.statement_safe())
            if self.i == before:
                self.i += 1
        return self.hoisted + out

    def statement_safe(self) -> list[ast.stmt]:
        start = self.i
        try:
            return self.statement()
        except (_Skip, RecursionError, IndexError, ValueError):
            self.resync(start)
            if self.i == start:
                self.i += 1
            return []

    def block(self) -> list[ast.stmt]:
        """A ``{...}`` block or a single statement; control flow is flattened."""
        if self.eat("{"):
            out: list[ast.stmt] = []
            while self.peek().kind != "EOF" and not self.at("}"):
                before = self.i
                out.extend(self.statement_safe())
                if self.i == before:
                    self.i += 1
            self.eat("}")
            return out
        return self.statement_safe()

    def end_statement(self) -> None:
        self.eat(";")

    def statement(self) -> list[ast.stmt]:
        t = self.peek()
        if t.kind == "PUNCT":
            if t.value == ";":
                self.i += 1
                return []
            if t.value == "{":
                return self.block()
            if t.value == "@":  # decorator
                self.i += 1
                self.expression()
                return []
        if t.kind == "NAME":
            v = t.value
            if v in ("import",) and not self.at("(", 1) and not self.at(".", 1):
                return self.import_statement()
            if v == "export":
                self.i += 1
                if self.eat("default"):
                    value = self.expression()
                    self.end_statement()
                    return [self.assign("default", value, t)]
                if self.at("{") or self.at("*"):
                    self.resync()
                    return []
                return self.statement()
            if v == "declare":
                self.resync()
                return []
            if v in ("const", "let", "var"):
                return self.declaration()
            if v == "async" and self.at("function", 1):
                self.i += 1
                return self.function_declaration()
            if v == "function":
                return self.function_declaration()
            if v == "abstract" and self.at("class", 1):
                self.i += 1
                return self.class_declaration()
            if v == "class":
                return self.class_declaration()
            if v in ("interface", "enum") or (v == "type" and self.peek(1).kind == "NAME"):
                self.i += 1
                while self.peek().kind != "EOF" and not self.at("{") and not self.at("="):
                    self.i += 1
                if self.eat("="):
                    self.skip_type({";"})
                elif self.at("{"):
                    self.skip_balanced()
                self.end_statement()
                return []
            if v == "return":
                self.i += 1
                if self.at(";") or self.at("}") or self.peek().nl:
                    self.end_statement()
                    return []
                value = self.expression()
                self.end_statement()
                return [_at(ast.Return(value=value), t)]  # type: ignore[list-item]
            if v in ("if", "while", "with"):
                self.i += 1
                self.expect("(")
                cond = self.expression()
                self.expect(")")
                body = self.block()
                if self.eat("else"):
                    body += self.block()
                return [_at(ast.Expr(value=cond), t)] + body  # type: ignore[list-item]
            if v == "for":
                return self.for_statement()
            if v == "do":
                self.i += 1
                body = self.block()
                if self.eat("while"):
                    self.expect("(")
                    self.expression()
                    self.expect(")")
                self.end_statement()
                return body
            if v == "try":
                self.i += 1
                body = self.block()
                if self.eat("catch"):
                    if self.at("("):
                        self.skip_balanced()
                    body += self.block()
                if self.eat("finally"):
                    body += self.block()
                return body
            if v == "switch":
                self.i += 1
                self.expect("(")
                self.expression()
                self.expect(")")
                self.expect("{")
                out: list[ast.stmt] = []
                while self.peek().kind != "EOF" and not self.at("}"):
                    if self.eat("case"):
                        self.expression()
                        self.expect(":")
                    elif self.eat("default"):
                        self.expect(":")
                    else:
                        before = self.i
                        out.extend(self.statement_safe())
                        if self.i == before:
                            self.i += 1
                self.eat("}")
                return out
            if v in ("throw", "break", "continue", "debugger"):
                self.resync()
                return []
        # An assignment statement keeps its target (``assign_expr`` keeps only the value).
        value = self.try_arrow(None) or self.conditional()
        if self.peek().kind == "PUNCT" and self.peek().value in _ASSIGN_OPS:
            op = self.next().value
            rhs = self.expression()
            self.end_statement()
            return self.assignment(value, op, rhs, t)
        self.end_statement()
        return [_at(ast.Expr(value=value), t)]  # type: ignore[list-item]

    def assign(self, name: str, value: ast.AST, tok: Tok) -> ast.stmt:
        target = _at(ast.Name(id=name, ctx=ast.Store()), tok)
        return _at(ast.Assign(targets=[target], value=value), tok)  # type: ignore[return-value]

    def assignment(self, target: ast.AST, op: str, value: ast.AST, tok: Tok) -> list[ast.stmt]:
        if not isinstance(target, (ast.Name, ast.Attribute, ast.Subscript)):
            return [_at(ast.Expr(value=value), tok)]  # type: ignore[list-item]
        target.ctx = ast.Store()  # type: ignore[attr-defined]
        if op == "=":
            return [_at(ast.Assign(targets=[target], value=value), tok)]  # type: ignore[list-item]
        py = {"+=": ast.Add, "-=": ast.Sub, "*=": ast.Mult}.get(op, ast.BitOr)
        node = ast.AugAssign(target=target, op=py(), value=value)
        return [_at(node, tok)]  # type: ignore[list-item]

    def import_statement(self) -> list[ast.stmt]:
        t = self.next()  # import
        if self.at("type"):
            self.i += 1
        names: list[tuple[str, str]] = []
        default = None
        if self.peek().kind == "STR":  # import 'side-effect'
            self.i += 1
            self.end_statement()
            return []
        if self.peek().kind == "NAME" and not self.at("from"):
            default = self.next().value
            self.eat(",")
        if self.eat("*"):
            self.expect("as")
            default = None
            names.append(("*", self.next().value))  # namespace import
        if self.eat("{"):
            while self.peek().kind != "EOF" and not self.at("}"):
                if self.at("type") and self.peek(1).kind == "NAME" and not self.at(",", 1):
                    self.i += 1
                name = self.next().value
                alias = name
                if self.eat("as"):
                    alias = self.next().value
                names.append((str(name), str(alias)))
                self.eat(",")
            self.eat("}")
        self.expect("from")
        src = self.next()
        self.end_statement()
        if src.kind != "STR":
            return []
        module, level = _module_name(str(src.value))
        stmts: list[ast.stmt] = []
        if default:
            names.append(("default", str(default)))
        plain = [(n, a) for n, a in names if n != "*"]
        if plain:
            node = ast.ImportFrom(
                module=module or None,
                names=[ast.alias(name=n, asname=a if a != n else None) for n, a in plain],
                level=level,
            )
            stmts.append(_at(node, t))  # type: ignore[arg-type]
        for n, a in names:
            if n == "*":
                stmts.append(_at(ast.Import(names=[ast.alias(name=module or a, asname=a)]), t))  # type: ignore[arg-type]
        return stmts

    def declaration(self) -> list[ast.stmt]:
        self.next()  # const/let/var
        out: list[ast.stmt] = []
        while True:
            t = self.peek()
            if self.at("{") or self.at("["):
                names = self.pattern_names()
                if self.eat(":"):
                    self.skip_type({"=", ",", ";"})
                value = self.expression() if self.eat("=") else None
                for n, tok in names:
                    if value is not None:
                        attr = _at(ast.Attribute(value=value, attr=n, ctx=ast.Load()), tok)
                        out.append(self.assign(n, attr, tok))
            else:
                name_tok = self.next()
                if name_tok.kind != "NAME":
                    raise _Skip("declaration")
                if self.eat("!"):
                    pass
                if self.eat(":"):
                    self.skip_type({"=", ",", ";"})
                if self.eat("="):
                    value = self.expression(name=str(name_tok.value))
                    if isinstance(value, ast.FunctionDef):
                        out.append(value)
                    else:
                        out.append(self.assign(str(name_tok.value), value, name_tok))
                _ = t
            if not self.eat(","):
                break
        self.end_statement()
        return out

    def pattern_names(self) -> list[tuple[str, Tok]]:
        """Names bound by a destructuring pattern (``{a, b: c}`` or ``[a, b]``)."""
        names: list[tuple[str, Tok]] = []
        open_tok = self.next()
        close = "}" if open_tok.value == "{" else "]"
        while self.peek().kind != "EOF" and not self.at(close):
            t = self.next()
            if t.kind == "NAME" and (self.at(",") or self.at(close) or self.at("=")):
                names.append((str(t.value), t))
                if self.eat("="):
                    self.expression()
            elif t.kind == "NAME" and self.eat(":"):
                if self.peek().kind == "NAME":
                    alias = self.next()
                    names.append((str(t.value), alias))
                    if self.eat("="):
                        self.expression()
                elif self.at("{") or self.at("["):
                    self.i -= 0
                    names.extend(self.pattern_names())
            elif t.kind == "PUNCT" and t.value in ("{", "["):
                self.i -= 1
                names.extend(self.pattern_names())
            self.eat(",")
        self.eat(close)
        return names

    def params(self) -> tuple[ast.arguments, list[ast.stmt]]:
        """``(a, b: T = d, ...rest)``; returns the arguments and destructuring assignments."""
        args: list[ast.arg] = []
        defaults: list[ast.AST] = []
        prelude: list[ast.stmt] = []
        self.expect("(")
        while self.peek().kind != "EOF" and not self.at(")"):
            if self.at("@"):
                self.i += 1
                self.expression()
            for mod in ("public", "private", "protected", "readonly"):
                self.eat(mod)
            rest = self.eat("...")
            t = self.peek()
            if self.at("{") or self.at("["):
                name = f"_arg{len(args)}"
                names = self.pattern_names()
                for n, tok in names:
                    attr = _at(ast.Attribute(value=_name(name, tok), attr=n, ctx=ast.Load()), tok)
                    prelude.append(self.assign(n, attr, tok))
            else:
                name = str(self.next().value)
            self.eat("?")
            if self.eat(":"):
                self.skip_type({",", ")", "="})
            arg = _at(ast.arg(arg=name, annotation=None), t)
            args.append(arg)  # type: ignore[arg-type]
            if self.eat("="):
                defaults.append(self.expression())
            elif defaults:
                defaults.append(_const(None, t))
            _ = rest
            self.eat(",")
        self.expect(")")
        return (
            ast.arguments(
                posonlyargs=[],
                args=args,
                vararg=None,
                kwonlyargs=[],
                kw_defaults=[],
                kwarg=None,
                defaults=defaults,
            ),
            prelude,
        )

    def function_body(self) -> list[ast.stmt]:
        body = self.block()
        return body or [ast.Pass()]

    def function_declaration(self) -> list[ast.stmt]:
        t = self.next()  # function
        self.eat("*")
        name = str(self.next().value) if self.peek().kind == "NAME" else self.fresh()
        if self.at("<"):
            self.skip_type({"("})
        args, prelude = self.params()
        if self.eat(":"):
            self.skip_type({"{"})
        body = prelude + self.function_body()
        return [self.make_def(name, args, body, t)]

    def make_def(self, name: str, args, body, tok: Tok) -> ast.FunctionDef:
        node = ast.FunctionDef(
            name=name, args=args, body=body or [ast.Pass()], decorator_list=[], returns=None
        )
        if "type_params" in ast.FunctionDef._fields:
            node.type_params = []  # type: ignore[attr-defined]
        return _at(node, tok)  # type: ignore[return-value]

    def fresh(self) -> str:
        self.anon += 1
        return f"_fn{self.anon}"

    def class_declaration(self) -> list[ast.stmt]:
        t = self.next()  # class
        name = str(self.next().value) if self.peek().kind == "NAME" else self.fresh()
        if self.at("<"):
            self.skip_type({"extends", "implements", "{"})
        bases: list[ast.AST] = []
        if self.eat("extends"):
            bases.append(self.expression(no_call_block=True))
        if self.eat("implements"):
            self.skip_type({"{"})
        self.expect("{")
        body: list[ast.stmt] = []
        fields: list[ast.stmt] = []
        while self.peek().kind != "EOF" and not self.at("}"):
            start = self.i
            try:
                member = self.class_member(fields)
                if member is not None:
                    body.append(member)
            except (_Skip, RecursionError, IndexError, ValueError):
                self.resync(start)
            if self.i == start:
                self.i += 1
        self.eat("}")
        if fields:
            args = ast.arguments(
                posonlyargs=[],
                args=[ast.arg(arg="self")],
                vararg=None,
                kwonlyargs=[],
                kw_defaults=[],
                kwarg=None,
                defaults=[],
            )
            body.insert(0, self.make_def("__fields__", args, fields, t))
        node = ast.ClassDef(
            name=name, bases=bases, keywords=[], body=body or [ast.Pass()], decorator_list=[]
        )
        if "type_params" in ast.ClassDef._fields:
            node.type_params = []  # type: ignore[attr-defined]
        return [_at(node, t)]  # type: ignore[list-item]

    def class_member(self, fields: list[ast.stmt]) -> ast.stmt | None:
        while self.at("@"):
            self.i += 1
            self.expression()
        for mod in (
            "public",
            "private",
            "protected",
            "static",
            "readonly",
            "abstract",
            "override",
            "declare",
            "async",
            "get",
            "set",
        ):
            if (
                self.at(mod)
                and self.peek(1).kind in ("NAME", "PUNCT")
                and not self.at("(", 1)
                and not self.at("=", 1)
                and not self.at(":", 1)
            ):
                self.i += 1
        self.eat("*")
        self.eat("#")
        t = self.next()
        if t.kind == "PUNCT" and t.value == "[":
            self.i -= 1
            self.skip_balanced()
            name = self.fresh()
        elif t.kind in ("NAME", "STR"):
            name = str(t.value)
        else:
            raise _Skip("member")
        self.eat("?")
        self.eat("!")
        if self.at("(") or self.at("<"):
            if self.at("<"):
                self.skip_type({"("})
            args, prelude = self.params()
            if self.eat(":"):
                self.skip_type({"{", ";"})
            if not self.at("{"):
                self.end_statement()
                return None  # an overload or abstract signature
            body = prelude + self.function_body()
            self_arg = ast.arg(arg="self")
            args.args.insert(0, self_arg)
            py_name = "__init__" if name == "constructor" else name
            return self.make_def(py_name, args, body, t)
        if self.eat(":"):
            self.skip_type({"=", ";", "}"})
        if self.eat("="):
            value = self.expression(name=name)
            target = _at(ast.Attribute(value=_name("self", t), attr=name, ctx=ast.Store()), t)
            if isinstance(value, ast.FunctionDef):
                self.end_statement()
                return value
            fields.append(_at(ast.Assign(targets=[target], value=value), t))  # type: ignore[arg-type]
        self.end_statement()
        return None

    def for_statement(self) -> list[ast.stmt]:
        t = self.next()  # for
        self.eat("await")
        self.expect("(")
        out: list[ast.stmt] = []
        if self.peek().kind == "NAME" and self.peek().value in ("const", "let", "var"):
            self.i += 1
            if self.at("{") or self.at("["):
                names = self.pattern_names()
            else:
                tok = self.next()
                names = [(str(tok.value), tok)]
            if self.eat("of") or self.eat("in"):
                iterable = self.expression()
                self.expect(")")
                for n, tok in names:
                    target = _at(ast.Name(id=n, ctx=ast.Store()), tok)
                    loop = ast.For(target=target, iter=iterable, body=[ast.Pass()], orelse=[])
                    out.append(_at(loop, t))  # type: ignore[arg-type]
                return out + self.block()
        depth = 1
        while self.peek().kind != "EOF" and depth:
            tok = self.next()
            if tok.kind == "PUNCT" and tok.value == "(":
                depth += 1
            elif tok.kind == "PUNCT" and tok.value == ")":
                depth -= 1
        return self.block()

    # -- expressions ----------------------------------------------------------------------

    def expression(self, name: str | None = None, no_call_block: bool = False) -> ast.AST:
        """An expression, commas excluded (sequence expressions keep their last value)."""
        return self.assign_expr(name)

    def assign_expr(self, name: str | None = None) -> ast.AST:
        arrow = self.try_arrow(name)
        if arrow is not None:
            return arrow
        left = self.conditional()
        if self.peek().kind == "PUNCT" and self.peek().value in _ASSIGN_OPS:
            self.next()
            return self.assign_expr()
        return left

    def try_arrow(self, name: str | None) -> ast.AST | None:
        t = self.peek()
        start = self.i
        is_async = False
        if self.at("async") and (
            self.at("(", 1) or (self.peek(1).kind == "NAME" and self.at("=>", 2))
        ):
            is_async = True
            self.i += 1
            t = self.peek()
        if t.kind == "NAME" and self.at("=>", 1):
            self.i += 1
            arg = _at(ast.arg(arg=str(t.value)), t)
            args = ast.arguments(
                posonlyargs=[],
                args=[arg],
                vararg=None,
                kwonlyargs=[],
                kw_defaults=[],
                kwarg=None,
                defaults=[],
            )
            self.expect("=>")
            return self.arrow_body(args, [], t, name)
        if t.kind == "PUNCT" and t.value in ("(", "<"):
            j = self.i
            if t.value == "<":
                self.skip_type({"("})
            if not self.at("("):
                self.i = start
                return None
            # Find the matching ')' and look for '=>' after an optional return type.
            save = self.i
            self.skip_balanced()
            if self.at(":"):
                self.i += 1
                self.skip_type({"=>", "{", ";", ","})
            ok = self.at("=>")
            self.i = save
            if not ok:
                self.i = start
                return None
            try:
                args, prelude = self.params()
            except _Skip:
                self.i = start
                return None
            if self.eat(":"):
                self.skip_type({"=>"})
            self.expect("=>")
            _ = j, is_async
            return self.arrow_body(args, prelude, t, name)
        self.i = start
        return None

    def arrow_body(self, args, prelude, tok: Tok, name: str | None) -> ast.AST:
        if self.at("{"):
            body = prelude + self.function_body()
            fname = name or self.fresh()
            fdef = self.make_def(fname, args, body, tok)
            if name:
                return fdef
            self.hoisted.append(fdef)
            return _name(fname, tok)
        value = self.assign_expr()
        if name or prelude:
            fname = name or self.fresh()
            ret = _at(ast.Return(value=value), tok)
            fdef = self.make_def(fname, args, prelude + [ret], tok)  # type: ignore[list-item]
            if name:
                return fdef
            self.hoisted.append(fdef)
            return _name(fname, tok)
        return _at(ast.Lambda(args=args, body=value), tok)

    def conditional(self) -> ast.AST:
        test = self.binary(0)
        if self.at("?") and not self.at(".", 1):
            t = self.next()
            body = self.assign_expr()
            self.expect(":")
            orelse = self.assign_expr()
            return _at(ast.IfExp(test=test, body=body, orelse=orelse), t)
        return test

    def binary(self, min_prec: int) -> ast.AST:
        left = self.unary()
        while True:
            t = self.peek()
            op = t.value if t.kind in ("PUNCT", "NAME") else None
            if op == "as" or op == "satisfies":
                self.i += 1
                self.skip_type({",", ")", ";", "]", "}", "?", ":", "=", "+", "&&", "||", "??"})
                continue
            prec = _BINARY.get(op) if isinstance(op, str) else None
            if prec is None or prec <= min_prec:
                return left
            self.i += 1
            right = self.binary(prec)
            if op in ("||", "??"):
                left = _at(ast.BoolOp(op=ast.Or(), values=[left, right]), t)
            elif op == "&&":
                left = _at(ast.BoolOp(op=ast.And(), values=[left, right]), t)
            elif op in _BINOP:
                left = _at(ast.BinOp(left=left, op=_BINOP[op](), right=right), t)
            else:
                left = _at(ast.Compare(left=left, ops=[ast.Eq()], comparators=[right]), t)

    def unary(self) -> ast.AST:
        t = self.peek()
        if t.kind == "PUNCT" and t.value in ("!", "-", "+", "~", "++", "--"):
            self.i += 1
            operand = self.unary()
            op = {"!": ast.Not, "-": ast.USub, "+": ast.UAdd, "~": ast.Invert}.get(
                str(t.value), ast.UAdd
            )
            return _at(ast.UnaryOp(op=op(), operand=operand), t)
        if t.kind == "NAME" and t.value in ("typeof", "void", "delete"):
            self.i += 1
            self.unary()
            return _const(None, t)
        if t.kind == "NAME" and t.value == "await":
            self.i += 1
            return _at(ast.Await(value=self.unary()), t)
        if t.kind == "PUNCT" and t.value == "<" and self.peek(1).kind == "NAME":
            # TS angle-bracket cast: <Type>expr
            save = self.i
            self.skip_type({">"})
            if self.eat(">"):
                return self.unary()
            self.i = save
        return self.postfix(self.primary())

    def arguments(self) -> list[ast.AST]:
        args: list[ast.AST] = []
        self.expect("(")
        while self.peek().kind != "EOF" and not self.at(")"):
            t = self.peek()
            if self.eat("..."):
                args.append(_at(ast.Starred(value=self.assign_expr(), ctx=ast.Load()), t))
            else:
                args.append(self.assign_expr())
            if not self.eat(","):
                break
        self.expect(")")
        return args

    def postfix(self, node: ast.AST) -> ast.AST:
        while True:
            t = self.peek()
            if (
                t.kind == "PUNCT"
                and t.value in (".", "?.")
                and not (t.value == "?." and self.at("(", 1))
            ):
                self.i += 1
                if self.at("["):
                    continue
                name_tok = self.next()
                if name_tok.kind == "PUNCT" and name_tok.value == "#":
                    name_tok = self.next()
                if name_tok.kind != "NAME":
                    raise _Skip("member")
                node = self.member(node, str(name_tok.value), name_tok)
            elif t.kind == "PUNCT" and t.value == "?." and self.at("(", 1):
                self.i += 1
            elif t.kind == "PUNCT" and t.value == "[" and not t.nl:
                self.i += 1
                key = self.expression()
                self.expect("]")
                node = _at(ast.Subscript(value=node, slice=key, ctx=ast.Load()), t)
            elif t.kind == "PUNCT" and t.value == "(" and not t.nl:
                args = self.arguments()
                node = self.call(node, args, t)
            elif t.kind == "PUNCT" and t.value == "!" and not t.nl and not self.at("=", 1):
                self.i += 1  # TS non-null assertion
            elif t.kind == "TPL" and not t.nl:
                self.i += 1
                node = _call(node, [self.template(t)], t)
            elif t.kind == "PUNCT" and t.value == "<" and self.generic_call_ahead():
                self.skip_type({"("})
            else:
                return node

    def generic_call_ahead(self) -> bool:
        save = self.i
        try:
            self.skip_type({"("})
            return self.at("(") and self.peek(-1).kind == "PUNCT" and self.peek(-1).value == ">"
        finally:
            self.i = save

    def member(self, node: ast.AST, name: str, tok: Tok) -> ast.AST:
        if name in _GETTERS and self.at("("):
            self.arguments()
            return _at(ast.Attribute(value=node, attr=_GETTERS[name], ctx=ast.Load()), tok)
        if name == "length":
            return _call(_name("len", tok), [node], tok)
        return _at(ast.Attribute(value=node, attr=name, ctx=ast.Load()), tok)

    def call(self, func: ast.AST, args: list[ast.AST], tok: Tok) -> ast.AST:
        """A call, with JS library calls mapped to their Python counterparts."""
        if isinstance(func, ast.Attribute):
            attr, recv = func.attr, func.value
            dotted = _flat(func)
            if dotted in ("Date.now", "performance.now"):
                return _call(_dotted("_js_time", "time", tok=tok), [], tok)
            if dotted == "Math.random":
                return _call(_dotted("_js_random", "random", tok=tok), [], tok)
            if dotted in ("crypto.randomUUID", "uuid.v4", "uuid.v1"):
                return _call(_dotted("_js_uuid", "uuid4", tok=tok), [], tok)
            if dotted == "JSON.stringify":
                return _call(_dotted("_js_json", "dumps", tok=tok), args[:1], tok)
            if dotted in ("String",):
                return _call(_name("str", tok), args[:1], tok)
            if attr == "join":
                sep = args[0] if args else _const(",", tok)
                return _call(
                    _at(ast.Attribute(value=sep, attr="join", ctx=ast.Load()), tok), [recv], tok
                )
            if attr in ("map", "flatMap") and args and isinstance(args[0], ast.Lambda):
                lam = args[0]
                if lam.args.args:
                    target = _at(ast.Name(id=lam.args.args[0].arg, ctx=ast.Store()), tok)
                    gen = ast.comprehension(target=target, iter=recv, ifs=[], is_async=0)
                    return _at(ast.ListComp(elt=lam.body, generators=[gen]), tok)
            if attr in ("filter", "reverse", "sort", "flat", "find"):
                return recv  # same elements (or one of them), for what feeds the prompt
            if attr == "concat" and args:
                return _at(ast.BinOp(left=recv, op=ast.Add(), right=args[0]), tok)
            if attr in ("slice", "substring", "substr"):
                lower = args[0] if args else None
                upper = args[1] if len(args) > 1 else None
                if attr == "substr" and lower is not None and upper is not None:
                    upper = _at(ast.BinOp(left=lower, op=ast.Add(), right=upper), tok)
                sl = ast.Slice(lower=lower, upper=upper, step=None)
                return _at(ast.Subscript(value=recv, slice=sl, ctx=ast.Load()), tok)
            if attr in _METHOD_MAP:
                py, fmt = _METHOD_MAP[attr]
                if attr in _LOCALE_METHODS:
                    fmt = _locale_format(fmt, args[1] if len(args) > 1 else None)
                new_args = [_const(fmt, tok)] if fmt is not None else args
                return _call(
                    _at(ast.Attribute(value=recv, attr=py, ctx=ast.Load()), tok), new_args, tok
                )
            if attr in ("getTime", "valueOf") and not args:
                return _call(
                    _at(ast.Attribute(value=recv, attr="timestamp", ctx=ast.Load()), tok), [], tok
                )
            if attr == "toString" and not args:
                return _call(_name("str", tok), [recv], tok)
        if isinstance(func, ast.Name) and func.id in ("uuidv4", "nanoid", "randomUUID"):
            return _call(_dotted("_js_uuid", "uuid4", tok=tok), [], tok)
        if isinstance(func, ast.Name) and func.id == "super":
            func = _at(
                ast.Attribute(
                    value=_call(_name("super", tok), [], tok), attr="__init__", ctx=ast.Load()
                ),
                tok,
            )
        # An object literal argument becomes keywords too, so `new Agent({instructions})`
        # reads like `Agent(instructions=...)` to the sink finder.
        keywords = []
        if len(args) == 1 and isinstance(args[0], ast.Dict):
            for k, v in zip(args[0].keys, args[0].values, strict=True):
                if (
                    isinstance(k, ast.Constant)
                    and isinstance(k.value, str)
                    and k.value.isidentifier()
                ):
                    keywords.append(ast.keyword(arg=k.value, value=v))
            if keywords:
                args = []
        return _call(func, args, tok, keywords)

    def primary(self) -> ast.AST:
        t = self.next()
        if t.kind == "NUM":
            try:
                text = str(t.value).replace("_", "").rstrip("n")
                value: object = (
                    int(text, 0) if re.fullmatch(r"0[xXoObB]?\w*|\d+", text) else float(text)
                )
            except ValueError:
                value = 0
            return _const(value, t)
        if t.kind == "STR":
            return _const(t.value, t)
        if t.kind == "REGEX":
            return _const(None, t)
        if t.kind == "TPL":
            return self.template(t)
        if t.kind == "NAME":
            v = str(t.value)
            if v == "this":
                return _name("self", t)
            if v in ("null", "undefined"):
                return _const(None, t)
            if v in ("true", "false"):
                return _const(v == "true", t)
            if v == "new":
                return self.new_expression(t)
            if v == "function":
                self.eat("*")
                fname = str(self.next().value) if self.peek().kind == "NAME" else self.fresh()
                args, prelude = self.params()
                if self.eat(":"):
                    self.skip_type({"{"})
                fdef = self.make_def(fname, args, prelude + self.function_body(), t)
                self.hoisted.append(fdef)
                return _name(fname, t)
            if v == "class":
                self.i -= 1
                cls = self.class_declaration()
                self.hoisted.extend(cls)
                return _name(cls[0].name, t)  # type: ignore[attr-defined]
            return _name(v, t)
        if t.kind == "PUNCT":
            if t.value == "(":
                value = self.expression()
                while self.eat(","):
                    value = self.expression()
                self.expect(")")
                return value
            if t.value == "[":
                return self.array(t)
            if t.value == "{":
                return self.object(t)
            if t.value == "#" and self.peek().kind == "NAME":
                return _name(str(self.next().value), t)
        raise _Skip("primary")

    def new_expression(self, t: Tok) -> ast.AST:
        callee = self.primary()
        while self.at("."):
            self.i += 1
            name_tok = self.next()
            callee = _at(
                ast.Attribute(value=callee, attr=str(name_tok.value), ctx=ast.Load()), name_tok
            )
        if self.at("<"):
            self.skip_type({"("})
        args = self.arguments() if self.at("(") else []
        if isinstance(callee, ast.Name) and callee.id == "Date" and not args:
            return _call(_dotted("_js_datetime", "datetime", "now", tok=t), [], t)
        return self.call(callee, args, t)

    def array(self, t: Tok) -> ast.AST:
        elts: list[ast.AST] = []
        while self.peek().kind != "EOF" and not self.at("]"):
            s = self.peek()
            if self.eat(","):
                continue
            if self.eat("..."):
                elts.append(_at(ast.Starred(value=self.assign_expr(), ctx=ast.Load()), s))
            else:
                elts.append(self.assign_expr())
            if not self.eat(","):
                break
        self.expect("]")
        return _at(ast.List(elts=elts, ctx=ast.Load()), t)

    def object(self, t: Tok) -> ast.AST:
        keys: list[ast.AST | None] = []
        values: list[ast.AST] = []
        while self.peek().kind != "EOF" and not self.at("}"):
            k = self.peek()
            if self.eat("..."):
                keys.append(None)
                values.append(self.assign_expr())
            elif self.at("["):
                self.i += 1
                keys.append(self.expression())
                self.expect("]")
                self.expect(":")
                values.append(self.assign_expr())
            else:
                for mod in ("async", "get", "set"):
                    if self.at(mod) and self.peek(1).kind in ("NAME", "STR"):
                        self.i += 1
                k = self.next()
                if k.kind not in ("NAME", "STR", "NUM"):
                    raise _Skip("object key")
                key = str(k.value)
                if self.at("(") or self.at("<"):
                    if self.at("<"):
                        self.skip_type({"("})
                    args, prelude = self.params()
                    if self.eat(":"):
                        self.skip_type({"{"})
                    fname = self.fresh()
                    self.hoisted.append(
                        self.make_def(fname, args, prelude + self.function_body(), k)
                    )
                    keys.append(_const(key, k))
                    values.append(_name(fname, k))
                elif self.eat(":"):
                    keys.append(_const(key, k))
                    values.append(self.assign_expr(name=None))
                else:
                    keys.append(_const(key, k))
                    values.append(_name(key, k))  # shorthand {instructions}
                    if self.eat("="):
                        self.assign_expr()
            if not self.eat(","):
                break
        self.expect("}")
        return _at(ast.Dict(keys=keys, values=values), t)

    def template(self, t: Tok) -> ast.AST:
        values: list[ast.AST] = []
        for part in t.parts:
            if isinstance(part, str):
                if part:
                    values.append(_const(part, t))
                continue
            if not part:
                continue
            sub = _Parser(part + [Tok("EOF", None, part[-1].line, part[-1].col)])
            try:
                expr = sub.expression()
            except (_Skip, RecursionError, IndexError, ValueError):
                expr = _name("_unreadable", part[0])
            self.hoisted.extend(sub.hoisted)
            values.append(
                _at(ast.FormattedValue(value=expr, conversion=-1, format_spec=None), part[0])
            )
        return _at(ast.JoinedStr(values=values), t)


def _flat(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _module_name(spec: str) -> tuple[str, int]:
    """A JS import specifier as a Python module name and relative level."""
    spec = re.sub(r"\.(?:m?[jt]sx?|cjs)$", "", spec)
    if spec.startswith("@/"):
        spec = spec[2:]
    if spec.startswith("."):
        level = 0
        parts = spec.split("/")
        mods = []
        for p in parts:
            if p == ".":
                level = max(level, 1)
            elif p == "..":
                level = (level or 1) + 1
            elif p:
                mods.append(p)
        return ".".join(m.replace("-", "_") for m in mods), max(level, 1)
    return ".".join(p.replace("-", "_") for p in spec.split("/") if p), 0


_CLOSERS = {"(": ")", "[": "]", "{": "}"}


def _close_at_end(toks: list[Tok]) -> list[Tok]:
    """Close the brackets still open at the end of the text.

    An excerpt cut inside an object literal or a call: its last statement is then read
    rather than skipped.
    """
    stack: list[str] = []
    for t in toks:
        if t.kind != "PUNCT":
            continue
        if t.value in _CLOSERS:
            stack.append(_CLOSERS[t.value])
        elif t.value in (")", "]", "}"):
            if stack and stack[-1] == t.value:
                stack.pop()
            else:
                return toks  # unbalanced inside: leave the text as it is
    if not stack or not toks:
        return toks
    last = toks[-1]
    closing = [Tok("PUNCT", c, last.line, last.col) for c in reversed(stack)]
    if last.kind == "EOF":
        return toks[:-1] + closing + [last]
    return toks + closing


def js_to_python(text: str) -> ast.Module:
    """The Python syntax tree standing for a JS/TS module.

    Statements it cannot read are left out; it never raises on bad input.
    """
    toks = _close_at_end(_Lexer(text).tokens())
    parser = _Parser(toks)
    body = parser.program()
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if first[:1] in (" ", "\t") and body:
        # An indented fragment is the body of a function cut out of a file: keep it one, so
        # what it computes counts per call, not as import-time constants.
        args = ast.arguments(
            posonlyargs=[],
            args=[],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        )
        wrapper = ast.AsyncFunctionDef(
            name="_fragment", args=args, body=body, decorator_list=[], returns=None
        )
        if "type_params" in ast.AsyncFunctionDef._fields:
            wrapper.type_params = []  # type: ignore[attr-defined]
        wrapper.lineno, wrapper.col_offset = body[0].lineno, 0  # type: ignore[attr-defined]
        body = [wrapper]
    prelude = [
        ast.Import(names=[ast.alias(name=n, asname=f"_js_{n}")])
        for n in ("datetime", "time", "random", "uuid", "json")
    ]
    for node in prelude:
        node.lineno = node.end_lineno = 1  # type: ignore[attr-defined]
        node.col_offset = node.end_col_offset = 0  # type: ignore[attr-defined]
    module = ast.Module(body=prelude + body, type_ignores=[])
    return ast.fix_missing_locations(module)


JS_EXTS = {".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts"}
"""File extensions read as JavaScript/TypeScript."""


def lint_js_source(
    source: str,
    filename: str = "<source>",
    *,
    provider: str | None = None,
    model: str | None = None,
    encoding: str | None = None,
    table: dict | None = None,
    project=None,
    breakpoints: bool | None = None,
) -> list:
    """Lint JavaScript/TypeScript code that builds prompts (see the module docstring).

    Same arguments and findings as :func:`~pipecat_fast.lint.python_source.lint_python_source`;
    lines and columns are the JS file's.

    Raises:
        ValueError: If ``provider`` is not in the minimum-prefix table.
    """
    from pipecat_fast import tokens
    from pipecat_fast.lint.findings import Finding, Severity
    from pipecat_fast.lint.python_source import _lint_tree
    from pipecat_fast.providers.llm import prefix_minimum

    minimum = prefix_minimum(provider, model, table)
    try:
        tree = js_to_python(source)
        findings = _lint_tree(
            tree,
            source,
            minimum,
            encoding or tokens.DEFAULT_ENCODING,
            filename,
            project,
            breakpoints,
        )
    except RecursionError:
        message = "expressions nested too deeply to analyse, not linted"
        return [Finding(rule="CB901", severity=Severity.WARNING, message=message)]
    for f in findings:
        f.message, f.evidence = _as_js(f.message), _as_js(f.evidence)
    return findings


_BACK_TO_JS = (
    ("_js_datetime.datetime.now()", "new Date()"),
    ("_js_time.time()", "Date.now()"),
    ("_js_random.random()", "Math.random()"),
    ("_js_uuid.uuid4()", "crypto.randomUUID()"),
    ("_js_json.dumps", "JSON.stringify"),
    (".isoformat()", ".toISOString()"),
)


def _as_js(text: str) -> str:
    """Messages name the JS calls, not the Python ones they were read as."""
    for py, js in _BACK_TO_JS:
        text = text.replace(py, js)
    return text
