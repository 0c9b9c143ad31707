"""Static index of one Python module: scopes, assignments, imports, name resolution.

Deliberately simple data flow: a local name resolves to its last assignment above the use
in the same function (then enclosing functions, then the module); ``self.x`` resolves to
the assignments of ``self.x`` in the enclosing class; a called name to the function it
defines. Control flow is ignored. A name imported from another module of the linted tree
resolves there through a :class:`~pipecat_fast.lint.project.Project`. What cannot be
resolved is left to the name heuristics in :mod:`pipecat_fast.lint.vocab`.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass

from pipecat_fast.lint.findings import Frequency

_Func = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_Scope = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)

PER_REQUEST_FUNCTION = re.compile(
    r"(process_frame|turn|handle_|on_message|on_transcri|on_user|query|callback|generate|"
    r"respond|reply|before_llm|on_llm|completion|inference)",
    re.IGNORECASE,
)
"""Function names whose body runs once per LLM request rather than once per session."""


def parse(source: str, filename: str = "<source>", mode: str = "exec") -> ast.AST:
    """``ast.parse`` without the ``SyntaxWarning``s user code may trigger (bad escapes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source, filename=filename, mode=mode)


@dataclass(frozen=True)
class Param:
    """A name that resolves to a function parameter."""

    arg: ast.arg
    function: ast.AST


@dataclass(frozen=True)
class ImportedName:
    """Where an imported name comes from: ``from <module> import <name>`` (``level`` dots)."""

    module: str
    name: str | None
    level: int = 0


_IN_PLACE_ORDER = {"shuffle"}
"""Methods/functions that reorder a list in place at random (``random.shuffle(x)``)."""
_IN_PLACE_GROW = {"append", "extend", "insert"}
_FORMAT_METHODS = {"format", "format_map", "replace", "substitute", "safe_substitute", "render"}


class ModuleIndex:
    """Parent links, assignments and imports of a parsed module.

    Args:
        tree: The parsed module.
        source: Its source text (for byte-to-character column conversion).
    """

    def __init__(
        self, tree: ast.Module, source: str, path: str | None = None, project=None
    ) -> None:
        self.tree = tree
        self.path = path
        self.project = project
        """The :class:`~pipecat_fast.lint.project.Project` this module belongs to, if any."""
        self.memo: dict = {}
        """What the linter's passes worked out about this module once (its sinks...)."""
        self.lines = source.splitlines()
        self.parent: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        # scope node -> name -> [(lineno, value)]
        self.assigned: dict[ast.AST, dict[str, list[tuple[int, ast.AST]]]] = {}
        # class node -> attribute -> [(function, lineno, value)]
        self.self_assigned: dict[ast.AST, dict[str, list[tuple[ast.AST, int, ast.AST]]]] = {}
        self.imports: dict[str, str] = {}
        self.imported: dict[str, ImportedName] = {}
        # scope node -> name -> FunctionDef (methods under their class node)
        self.defs: dict[ast.AST, dict[str, ast.AST]] = {}
        # scope node -> name -> [(lineno, call)]: in-place shuffles and list growth
        self.shuffled: dict[ast.AST, dict[str, list[tuple[int, ast.Call]]]] = {}
        self.grown: dict[ast.AST, dict[str, list[tuple[int, ast.Call]]]] = {}
        # scope node -> name -> [(line, `x += <text>`)]: a string built piece by piece
        self.text_grown: dict[ast.AST, dict[str, list[tuple[int, ast.AugAssign]]]] = {}
        # class node -> attribute -> [AugAssign]; scope node -> name -> [AugAssign]
        self.self_augmented: dict[ast.AST, dict[str, list[ast.AugAssign]]] = {}
        self.self_grown: dict[ast.AST, dict[str, list[ast.Call]]] = {}
        self.augmented: dict[ast.AST, dict[str, list[ast.AugAssign]]] = {}
        self.formatted_names: set[str] = set()
        self.formatted_at: dict[str, list[int]] = {}
        """Lines where each such name is filled."""
        """Names that some ``X.format(...)``/``.replace``/``Template(X)`` call fills here."""
        self._collect()

    # -- collection ---------------------------------------------------------------------

    def _collect(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    local = alias.asname or alias.name.split(".")[0]
                    self.imports[local] = alias.name if alias.asname else local
                    self.imported[local] = ImportedName(alias.name if alias.asname else local, None)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    local = alias.asname or alias.name
                    if node.module:
                        self.imports[local] = f"{node.module}.{alias.name}"
                    else:
                        self.imports[local] = alias.name
                    self.imported[local] = ImportedName(node.module or "", alias.name, node.level)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defs.setdefault(self.scope_of(node), {})[node.name] = node
            elif isinstance(node, ast.Call):
                self._collect_call(node)
            elif isinstance(node, ast.AugAssign):
                self._record_augmented(node)
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                if isinstance(node.op, ast.Add) and isinstance(node.value, (ast.List, ast.Tuple)):
                    scope = self.scope_of(node)
                    self.grown.setdefault(scope, {}).setdefault(node.target.id, []).append(
                        (node.lineno, node)
                    )
                elif isinstance(node.op, ast.Add) and isinstance(
                    node.value, (ast.Constant, ast.JoinedStr, ast.BinOp, ast.Name)
                ):
                    scope = self.scope_of(node)
                    self.text_grown.setdefault(scope, {}).setdefault(node.target.id, []).append(
                        (node.lineno, node)
                    )
            if isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if isinstance(item.optional_vars, ast.Name):
                        self._record(item.optional_vars, item.context_expr, node)
            if isinstance(node, (ast.For, ast.AsyncFor)):
                # A loop variable stands for an element: it carries what the iterable holds.
                for name in ast.walk(node.target):
                    if isinstance(name, ast.Name):
                        self._record(name, node.iter, node)
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    self._record(target, node.value, node)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                self._record(node.target, node.value, node)

    def _record_augmented(self, node: ast.AugAssign) -> None:
        target = node.target
        if isinstance(target, ast.Name):
            self.augmented.setdefault(self.scope_of(node), {}).setdefault(target.id, []).append(
                node
            )
        elif (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            cls = self.class_of(node)
            if cls is not None:
                self.self_augmented.setdefault(cls, {}).setdefault(target.attr, []).append(node)

    def updates_of(self, node: ast.AST) -> list[ast.AugAssign]:
        """``x += ...`` / ``self.x += ...`` statements that update the value ``node`` reads.

        A counter or accumulator updated in a function changes every time it runs.
        """
        if isinstance(node, ast.Attribute):
            cls = self.class_of(node)
            return [] if cls is None else self.self_augmented.get(cls, {}).get(node.attr, [])
        if isinstance(node, ast.Name):
            scope: ast.AST | None = self.scope_of(node)
            while scope is not None:
                found = self.augmented.get(scope, {}).get(node.id)
                if found or node.id in self.assigned.get(scope, {}):
                    return [u for u in found or [] if isinstance(u.value, ast.expr)]
                if isinstance(scope, ast.Module):
                    return []
                scope = self.scope_of(scope)
        return []

    def grown_self_attr(self, node: ast.Attribute) -> list[ast.Call]:
        """``self.x.append(...)`` calls outside ``__init__`` growing the list ``node`` reads."""
        cls = self.class_of(node)
        return [] if cls is None else self.self_grown.get(cls, {}).get(node.attr, [])

    def _collect_call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if isinstance(func, ast.Attribute) and name in _FORMAT_METHODS:
            if isinstance(func.value, ast.Name):
                self.formatted_names.add(func.value.id)
                self.formatted_at.setdefault(func.value.id, []).append(node.lineno)
        if name in ("Template", "from_string") and node.args:
            if isinstance(node.args[0], ast.Name):
                self.formatted_names.add(node.args[0].id)
        if name in _IN_PLACE_ORDER and node.args and isinstance(node.args[0], ast.Name):
            self.shuffled.setdefault(self.scope_of(node), {}).setdefault(
                node.args[0].id, []
            ).append((node.lineno, node))
        if (
            name in _IN_PLACE_GROW
            and isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Attribute)
            and isinstance(func.value.value, ast.Name)
            and func.value.value.id == "self"
        ):
            # `self.pages.append(text)`: an object's list that grows while it runs.
            cls = self.class_of(node)
            fn = self.function_of(node)
            if cls is not None and getattr(fn, "name", "") != "__init__":
                self.self_grown.setdefault(cls, {}).setdefault(func.value.attr, []).append(node)
        if (
            name in _IN_PLACE_GROW
            and isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
        ):
            self.grown.setdefault(self.scope_of(node), {}).setdefault(func.value.id, []).append(
                (node.lineno, node)
            )

    def _record(self, target: ast.AST, value: ast.AST, stmt: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts, strict=True):
                    self._record(t, v, stmt)
            return
        if isinstance(target, ast.Name):
            scope = self.scope_of(stmt)
            self.assigned.setdefault(scope, {}).setdefault(target.id, []).append(
                (stmt.lineno, value)
            )
        elif (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            func = self.function_of(stmt)
            cls = self.class_of(stmt)
            if cls is not None:
                self.self_assigned.setdefault(cls, {}).setdefault(target.attr, []).append(
                    (func, stmt.lineno, value)
                )

    # -- scopes -------------------------------------------------------------------------

    def scope_of(self, node: ast.AST) -> ast.AST:
        """Innermost function, lambda, class or module enclosing ``node``."""
        cur = self.parent.get(node)
        while cur is not None and not isinstance(cur, _Scope):
            cur = self.parent.get(cur)
        return cur if cur is not None else self.tree

    def function_of(self, node: ast.AST) -> ast.AST | None:
        """Innermost function or lambda enclosing ``node``, or ``None`` at module/class level."""
        cur = self.parent.get(node)
        while cur is not None:
            if isinstance(cur, _Func):
                return cur
            if isinstance(cur, ast.ClassDef):
                return None
            cur = self.parent.get(cur)
        return None

    def class_of(self, node: ast.AST) -> ast.ClassDef | None:
        """Innermost class enclosing ``node``."""
        cur = self.parent.get(node)
        while cur is not None and not isinstance(cur, ast.ClassDef):
            cur = self.parent.get(cur)
        return cur

    def eval_frequency(self, node: ast.AST) -> Frequency:
        """How often the expression at ``node`` is evaluated.

        Returns:
            ``PROCESS`` at module or class level (import time), ``REQUEST`` inside a
            function whose name or ``FunctionCallParams`` parameter says it runs per LLM
            request, else ``SESSION``.
        """
        func = self.function_of(node)
        if func is None:
            return Frequency.PROCESS
        # Nested handlers count as their outermost named function's frequency or their own.
        cur: ast.AST | None = func
        while cur is not None:
            if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if PER_REQUEST_FUNCTION.search(cur.name):
                    return Frequency.REQUEST
                for a in cur.args.args + cur.args.kwonlyargs:
                    if a.annotation is not None and "FunctionCallParams" in ast.unparse(
                        a.annotation
                    ):
                        return Frequency.REQUEST
                break
            cur = self.function_of(cur)
        return Frequency.SESSION

    def function_name(self, node: ast.AST) -> str:
        """Name of the function enclosing ``node`` (``"<module>"`` at top level)."""
        func = self.function_of(node)
        if func is None:
            cls = self.class_of(node)
            return f"class {cls.name}" if cls is not None else "<module>"
        return getattr(func, "name", "<lambda>")

    # -- resolution ---------------------------------------------------------------------

    def resolve_name(self, node: ast.Name) -> list[ast.AST | Param]:
        """Values a name may hold at ``node``: assignments or a parameter; [] if unknown."""
        scope = self.scope_of(node)
        line = node.lineno
        first = True
        while scope is not None:
            names = self.assigned.get(scope, {}).get(node.id, [])
            if first:
                # Assignments above the use, not the one whose value holds it (`x = f(\n x)`
                # spread over lines reads the previous `x`).
                names = [(ln, v) for ln, v in names if ln < line and not self._holds(v, node)]
            if names:
                last = max(names, key=lambda p: p[0])[1]
                return [last, *self._other_branches(last, names)]
            if isinstance(scope, _Func):
                args = scope.args
                for a in args.posonlyargs + args.args + args.kwonlyargs:
                    if a.arg == node.id:
                        return [Param(a, scope)]
                for a in (args.vararg, args.kwarg):  # `*args`, `**kwargs`
                    if a is not None and a.arg == node.id:
                        return [Param(a, scope)]
            if isinstance(scope, ast.Module):
                return []
            first = False
            scope = self.scope_of(scope)
            # Class bodies are not visible from methods.
            while isinstance(scope, ast.ClassDef):
                scope = self.scope_of(scope)
        return []

    def _other_branches(self, last: ast.AST, names: list[tuple[int, ast.AST]]) -> list[ast.AST]:
        """Values the other branch of the ``if`` holding ``last`` assigns to the same name.

        ``if vip: text = f"... {customer_id}" else: text = "..."``: either may reach the
        use, so both do (control flow is not followed, so neither branch is preferred).
        """
        child, up = last, self.parent.get(last)
        while up is not None and not isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if isinstance(up, ast.If):
                in_body = any(child is b for b in up.body)
                in_else = any(child is b for b in up.orelse)
                if in_body or in_else:
                    other = up.orelse if in_body else up.body
                    return [
                        v
                        for _ln, v in names
                        if v is not last and any(self._holds(b, v) or b is v for b in other)
                    ]
            child, up = up, self.parent.get(up)
        return []

    def _holds(self, ancestor: ast.AST, node: ast.AST) -> bool:
        """True when ``node`` lies inside ``ancestor``."""
        cur = self.parent.get(node)
        while cur is not None:
            if cur is ancestor:
                return True
            cur = self.parent.get(cur)
        return False

    def resolve_function(self, node: ast.Name) -> ast.AST | None:
        """The ``def`` or ``class`` a called name refers to in this module's scopes."""
        scope: ast.AST | None = self.scope_of(node)
        while scope is not None:
            found = self.defs.get(scope, {}).get(node.id)
            if found is not None:
                return found
            if isinstance(scope, ast.Module):
                return None
            scope = self.scope_of(scope)
            while isinstance(scope, ast.ClassDef):
                scope = self.scope_of(scope)
        return None

    def resolve_method(self, node: ast.Attribute) -> ast.AST | None:
        """The ``def`` of ``self.<name>`` in the class enclosing ``node``, or ``None``."""
        cls = self.class_of(node)
        return None if cls is None else self.defs.get(cls, {}).get(node.attr)

    def _scoped_calls(self, table: dict, node: ast.Name, after: int = 0) -> list[ast.Call]:
        scope: ast.AST | None = self.scope_of(node)
        while scope is not None:
            names = self.assigned.get(scope, {})
            calls = table.get(scope, {}).get(node.id, [])
            if node.id in names or calls:
                first = scope is self.scope_of(node)
                return [c for ln, c in calls if ln > after and (not first or ln <= node.lineno)]
            if isinstance(scope, ast.Module):
                return []
            scope = self.scope_of(scope)
        return []

    def shuffles_of(self, node: ast.Name) -> list[ast.Call]:
        """In-place random reorderings (``random.shuffle(x)``) of the list ``node`` names."""
        return self._scoped_calls(self.shuffled, node)

    def growth_of(self, node: ast.Name, assigned_line: int) -> list[ast.AST]:
        """``x.append(...)``/``x.extend(...)``/``x += [...]`` after ``x`` was assigned."""
        return self._scoped_calls(self.grown, node, after=assigned_line)

    def text_appends_of(self, node: ast.Name, assigned_line: int) -> list[ast.AugAssign] | None:
        """``x += "..."`` statements between ``x``'s assignment and its use at ``node``.

        ``None`` when one of them runs in a loop (how many pieces it adds is not known).
        """
        found = self._scoped_calls(self.text_grown, node, after=assigned_line)
        if any(self.in_loop(a) for a in found):
            return None
        return [a for a in found if a.lineno < node.lineno]

    def in_loop(self, node: ast.AST, outside: ast.AST | None = None) -> bool:
        """True when ``node`` runs inside a loop (that does not also hold ``outside``)."""
        cur = self.parent.get(node)
        while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if isinstance(cur, (ast.For, ast.AsyncFor, ast.While, ast.comprehension)):
                held = outside is not None and self._holds(cur, outside)
                if not held:
                    return True
            cur = self.parent.get(cur)
        return False

    def _holds(self, ancestor: ast.AST, node: ast.AST) -> bool:
        cur: ast.AST | None = node
        while cur is not None:
            if cur is ancestor:
                return True
            cur = self.parent.get(cur)
        return False

    def owns(self, node: ast.AST) -> bool:
        """True when ``node`` belongs to this module's tree."""
        return node is self.tree or node in self.parent

    def resolve_self_attr(self, node: ast.Attribute) -> list[ast.AST]:
        """Values ``self.<attr>`` may hold at ``node`` within its class."""
        cls = self.class_of(node)
        if cls is None:
            return []
        entries = self.self_assigned.get(cls, {}).get(node.attr, [])
        func = self.function_of(node)
        local = [(ln, v) for f, ln, v in entries if f is func and ln < node.lineno]
        if local:
            return [max(local, key=lambda p: p[0])[1]]
        # Exclude the statement the use sits in (self.x = self.x + ...).
        stmt_values = {v for f, ln, v in entries if ln == node.lineno}
        found = [v for _f, _ln, v in entries if v not in stmt_values]
        if not found:
            # A class attribute (a pydantic/dataclass field default, a class constant).
            for base in [cls, *self._bases(cls)]:
                values = self.assigned.get(base, {}).get(node.attr, [])
                if values:
                    return [max(values, key=lambda p: p[0])[1]]
        return found

    def _bases(self, cls: ast.ClassDef) -> list[ast.ClassDef]:
        """Base classes of ``cls`` defined in this module (one level)."""
        out = []
        for b in cls.bases:
            if isinstance(b, ast.Name):
                found = self.defs.get(self.scope_of(cls), {}).get(b.id)
                if isinstance(found, ast.ClassDef):
                    out.append(found)
        return out

    def dotted(self, node: ast.AST) -> str | None:
        """``a.b.c`` for a Name/Attribute chain, with the first part expanded by imports."""
        parts: list[str] = []
        cur = node
        while isinstance(cur, ast.Attribute):
            parts.append(cur.attr)
            cur = cur.value
        if not isinstance(cur, ast.Name):
            return None
        parts.append(self.imports.get(cur.id, cur.id))
        return ".".join(reversed(parts))

    def is_imported(self, node: ast.AST) -> bool:
        """True when the chain's first name comes from an import."""
        cur = node
        while isinstance(cur, ast.Attribute):
            cur = cur.value
        return isinstance(cur, ast.Name) and cur.id in self.imports

    def line_col(self, node: ast.AST) -> tuple[int, int]:
        """1-based line and code-point column of a node (ast columns are UTF-8 bytes)."""
        line = getattr(node, "lineno", 1)
        col_bytes = getattr(node, "col_offset", 0)
        if 1 <= line <= len(self.lines):
            text = self.lines[line - 1].encode("utf-8")[:col_bytes]
            return line, len(text.decode("utf-8", "replace")) + 1
        return line, col_bytes + 1
