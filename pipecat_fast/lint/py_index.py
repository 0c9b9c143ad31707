"""Static index of one Python module: scopes, assignments, imports, name resolution.

Deliberately simple data flow: a local name resolves to its last assignment above the use
in the same function (then enclosing functions, then the module); ``self.x`` resolves to
the assignments of ``self.x`` in the enclosing class. Control flow is ignored. What cannot
be resolved is left to the name heuristics in :mod:`pipecat_fast.lint.vocab`.
"""

from __future__ import annotations

import ast
import re
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


@dataclass(frozen=True)
class Param:
    """A name that resolves to a function parameter."""

    arg: ast.arg
    function: ast.AST


class ModuleIndex:
    """Parent links, assignments and imports of a parsed module.

    Args:
        tree: The parsed module.
        source: Its source text (for byte-to-character column conversion).
    """

    def __init__(self, tree: ast.Module, source: str) -> None:
        self.tree = tree
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
        self._collect()

    # -- collection ---------------------------------------------------------------------

    def _collect(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    local = alias.asname or alias.name.split(".")[0]
                    self.imports[local] = alias.name if alias.asname else local
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    self._record(target, node.value, node)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                self._record(node.target, node.value, node)

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
                names = [(ln, v) for ln, v in names if ln < line] or []
            if names:
                return [max(names, key=lambda p: p[0])[1]]
            if isinstance(scope, _Func):
                args = scope.args
                for a in args.posonlyargs + args.args + args.kwonlyargs:
                    if a.arg == node.id:
                        return [Param(a, scope)]
            if isinstance(scope, ast.Module):
                return []
            first = False
            scope = self.scope_of(scope)
            # Class bodies are not visible from methods.
            while isinstance(scope, ast.ClassDef):
                scope = self.scope_of(scope)
        return []

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
        return [v for _f, _ln, v in entries if v not in stmt_values]

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
