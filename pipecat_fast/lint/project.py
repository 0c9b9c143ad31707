"""The Python modules of a linted tree, for names imported from one module into another.

A prompt is often assembled across files: a template in ``prompts.py`` filled in
``bot.py``, a clock helper in ``utils/time.py``. When the linter is given a folder (or
several files), every ``.py`` file in it becomes a module of one :class:`Project`, and an
import that names one of them (``from common.prompt_templates import PROMPT_TEMPLATE``,
``from .helpers import current_date``) resolves to the assignment or ``def`` there.

Modules are found by the dotted path their file has under any of its ancestor folders
(``common/prompt_templates.py`` is ``common.prompt_templates`` and ``prompt_templates``),
relative imports from the importing file's folder. Files are parsed lazily, once; one that
does not parse is simply not resolvable.
"""

from __future__ import annotations

import ast
import os
import re
import stat
from pathlib import Path

from pipecat_fast.lint.py_index import ImportedName, ModuleIndex, parse

CODE_EXTS = (".py", ".pyw", ".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts")
"""Modules of a project: Python and JavaScript/TypeScript files."""
_INDEX_FILES = ("__init__.py", "index.ts", "index.tsx", "index.js", "index.mjs")

TEXT_EXTS = {
    ".txt",
    ".md",
    ".prompt",
    ".j2",
    ".jinja",
    ".jinja2",
    ".tmpl",
    ".tpl",
    ".mustache",
    ".hbs",
    ".liquid",
    ".yaml",
    ".yml",
}
"""Files code may read as prompt templates."""
SKIP_DIRS = {".git", ".hg", ".venv", "venv", "node_modules", "__pycache__", "build", "dist"}

_CALLED = re.compile(
    r"(?<![\w.])(?<!def )(?<!function )(?:(?:self|cls|this)\.)?([A-Za-z_]\w*)\s*\("
)
"""A call in source text of a plain name or a method of the object itself (``build(``,
``self.build(``), not a ``def``: the called name."""
MAX_MODULE_BYTES = 4 * 1024 * 1024
"""Modules larger than this are not parsed for cross-module resolution."""


_PER_CALL_IMPORT: re.Pattern | None = None


_IMPORT_LIST = re.compile(r"^[ \t]*from[ \t]+[\w.]+[ \t]+import[ \t]+(\([^)]*\)|[^\n]+)", re.M)
_FILLED_CALL = re.compile(
    r"(?<![\w.])((?:[A-Za-z_]\w*\.)+)?([A-Za-z_]\w*)\s*\.\s*"
    r"(?:format|format_map|substitute|safe_substitute)\s*\("
)
"""``NAME.format(`` or ``module.NAME.format(`` (group 1: the module path, if any)."""


def imports_per_call_framework(source: str) -> bool:
    """Whether source code imports a framework that starts a process for each call.

    The frameworks are :func:`pipecat_fast.providers.prompt_vars.process_per_call_imports`.
    """
    global _PER_CALL_IMPORT
    if _PER_CALL_IMPORT is None:
        from pipecat_fast.providers.prompt_vars import process_per_call_imports

        _PER_CALL_IMPORT = re.compile(
            "|".join(
                rf"(?:from|import)\s+{re.escape(m)}\b|['\"]{re.escape(m)}['\"/]"
                for m in process_per_call_imports()
            )
        )
    return _PER_CALL_IMPORT.search(source or "") is not None


def _regular(path: str) -> bool:
    """A regular file (never a FIFO or device, which would block or never end)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


class Project:
    """Modules of one linted tree, keyed by every dotted name their path allows.

    Args:
        sources: ``{path: source text}`` of the Python files in the tree; or use
            :meth:`from_paths` to read them.
    """

    def __init__(
        self, sources: dict[str, str] | None = None, texts: dict[str, str] | None = None
    ) -> None:
        self._sources: dict[str, str | None] = {}
        self._by_dotted: dict[str, list[str]] = {}
        self._indexes: dict[str, ModuleIndex | None] = {}
        self._texts: dict[str, str | None] = {}
        self._definers: dict[str, list[str]] | None = None
        self._called: set[str] | None = None
        self._bound: dict[str, str] | None = None
        self._replace_targets: set[str] | None = None
        self._imported_and_filled: set[str] | None = None
        self._per_call_processes: bool | None = None
        self._data: list[str] = []
        for path, text in (sources or {}).items():
            self.add(path, text)
        for path, text in (texts or {}).items():
            self.add_text(path, text)

    @classmethod
    def from_paths(cls, paths: list[str], roots: list[str] | None = None) -> Project:
        """A project of the given code files, plus the text files under ``roots``.

        Args:
            paths: Files being linted; the ``.py``/JS/TS ones become modules.
            roots: Folders scanned: their text files (``.md``, ``.txt``, ``.jinja``...)
                can be templates the code reads at run time.
        """
        project = cls()
        for p in paths:
            if p == "-":
                continue
            ext = Path(p).suffix.lower()
            if ext in CODE_EXTS:
                project.add(p, None)
            elif ext in TEXT_EXTS:
                project.add_text(p, None)
        for root in roots or []:
            project.add_text_root(root)
        return project

    def add_text(self, path: str, text: str | None) -> None:
        """Add a text file the code may read (``None``: read it when first needed)."""
        self._texts[os.path.normpath(path)] = text

    def add_text_root(self, root: str, limit: int = 5000) -> None:
        """Add the text files under a folder (at most ``limit``), skipping build folders."""
        if not os.path.isdir(root):
            return
        count = 0
        for dirpath, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
            for name in sorted(files):
                ext = Path(name).suffix.lower()
                if ext == ".json" and len(self._data) < limit:
                    self._data.append(os.path.normpath(os.path.join(dirpath, name)))
                if ext in TEXT_EXTS:
                    self._texts.setdefault(os.path.normpath(os.path.join(dirpath, name)), None)
                    count += 1
                    if count >= limit:
                        return

    def text(self, path: str) -> str | None:
        """The content of a known text file (read once), or ``None``."""
        key = os.path.normpath(path)
        if key not in self._texts:
            return None
        value = self._texts[key]
        if value is None:
            try:
                raw = Path(key).read_bytes()[: MAX_MODULE_BYTES + 1]
                value = "" if len(raw) > MAX_MODULE_BYTES else raw.decode("utf-8-sig")
            except (OSError, UnicodeDecodeError):
                value = ""
            self._texts[key] = value
        return value or None

    def find_text(self, path: str, importer: str | None) -> str | None:
        """The content of the text file a path in the code names.

        Tried as given (absolute), relative to the importer's folder and each folder above
        it, and as a last resort the one file of the tree whose path ends with it.
        """
        candidates = []
        if os.path.isabs(path) or importer is None:
            candidates.append(path)
        if importer is not None and not os.path.isabs(path):
            base = os.path.dirname(importer)
            while True:
                candidates.append(os.path.join(base, path))
                parent = os.path.dirname(base)
                if parent == base or not parent:
                    break
                base = parent
        for c in candidates:
            if os.path.normpath(c) in self._texts:
                return self.text(c)
        tail = os.path.normpath(path).lstrip(os.sep + ".")
        matches = [k for k in self._texts if k == tail or k.endswith(os.sep + tail)]
        return self.text(matches[0]) if len(matches) == 1 else None

    def template_with_fields(self, fields: set[str], pattern: str) -> str | None:
        """The one text file (else string constant) of the tree holding every one of ``fields``.

        ``pattern`` is a format string for one placeholder (``"{{{}}}"`` for ``{name}``).
        Used when code fills a template it got from elsewhere (``prompt.format(time=...)``):
        if exactly one prompt file of the tree has those placeholders, it is that template.
        """
        if not fields:
            return None
        found = []
        for key in list(self._texts):
            content = self.text(key)
            if content and all(pattern.format(f) in content for f in fields):
                if Path(key).suffix.lower() in (".yaml", ".yml", ".json"):
                    # A config file: the template is the one string value holding the
                    # fields (`system_prompt: |` ...), not the whole file.
                    content = _data_string_with(content, fields, pattern) or content
                found.append(content)
                if len(found) > 1:
                    return None
        if found:
            return found[0]
        for content in self._string_constants():
            if all(pattern.format(f) in content for f in fields):
                found.append(content)
                if len(found) > 1:
                    return None
        return found[0] if found else None

    def _string_constants(self):
        """The multi-line string constants the modules of the tree assign at top level.

        Templates that code may fill out of view (``MESSAGE = \"\"\"...\"\"\"``).
        """
        for path in list(self._sources):
            index = self.index(path)
            if index is None:
                continue
            for stmt in index.tree.body:
                if (
                    isinstance(stmt, (ast.Assign, ast.AnnAssign))
                    and isinstance(stmt.value, ast.Constant)
                    and isinstance(stmt.value.value, str)
                    and "\n" in stmt.value.value
                ):
                    yield stmt.value.value

    def add(self, path: str, source: str | None) -> None:
        """Add a module; ``source`` ``None`` reads the file when it is first needed."""
        key = str(Path(path))
        self._sources[key] = source
        self._definers = None
        self._called = None
        self._bound = None
        self._replace_targets = None
        self._per_call_processes = None
        parts = list(Path(key).with_suffix("").parts)
        if parts and parts[-1] in ("__init__", "index"):
            parts = parts[:-1]
        for i in range(len(parts)):
            dotted = ".".join(parts[i:])
            if dotted:
                self._by_dotted.setdefault(dotted, []).append(key)

    def _code_texts(self):
        """``(path, source text)`` of every module, read when not given.

        Modules that do not parse are included.
        """
        for path, text in list(self._sources.items()):
            if text is None:
                if not _regular(path):
                    continue
                try:
                    text = Path(path).read_bytes()[:MAX_MODULE_BYTES].decode("utf-8-sig")
                except (OSError, UnicodeDecodeError):
                    continue
            yield path, text

    def bound_variables(self) -> dict[str, str]:
        """Template variables some file of the tree binds per call through a platform.

        Read from every module, text file and JSON file of the tree (a call-creation body in
        code, a workflow export): ``{name: "call" | "literal"}``, see
        :func:`pipecat_fast.lint.placeholders.bound_variables`; placeholders a module fills
        itself with ``.replace("{{name}}", value)`` are ``"filled"`` (graded there).
        """
        if self._bound is None:
            from pipecat_fast.lint.placeholders import bound_variables, replaced_placeholders

            found: dict[str, str] = {}
            texts = [t for _p, t in self._code_texts()]
            texts += [
                self.text(k) or "" for k in list(self._texts) if self._texts[k] or _regular(k)
            ]
            for key in self._data:
                if not _regular(key):
                    continue
                try:
                    texts.append(Path(key).read_bytes()[:MAX_MODULE_BYTES].decode("utf-8-sig"))
                except (OSError, UnicodeDecodeError):
                    continue
            for text in texts:
                for name, kind in bound_variables(text).items():
                    if found.get(name) != "call":
                        found[name] = kind
            for _p, text in self._code_texts():
                for name in replaced_placeholders(text):
                    found.setdefault(name, "filled")
            self._bound = found
        return self._bound

    def replace_targets(self) -> set[str]:
        """Template fields some module fills with ``.replace`` (see ``placeholders``)."""
        if self._replace_targets is None:
            from pipecat_fast.lint.placeholders import replace_targets

            found: set[str] = set()
            for _p, text in self._code_texts():
                found |= replace_targets(text)
            self._replace_targets = found
        return self._replace_targets

    def imported_and_filled(self) -> set[str]:
        """Names a module imports from another and fills there (``NAME.format(...)``).

        ``from .prompts import CALLER_PROMPT`` then ``CALLER_PROMPT.format(proposal=p)``
        (or ``prompts.CALLER_PROMPT.format(...)``): the template is filled at that call,
        which is linted with the values it passes; in the module that defines it, its
        ``{{name}}`` is ``.format``'s escape for a literal brace, not a slot.
        """
        if self._imported_and_filled is None:
            found: set[str] = set()
            for _p, text in self._code_texts():
                imported = {
                    n
                    for m in _IMPORT_LIST.finditer(text)
                    for n in re.findall(r"[A-Za-z_]\w*", m.group(1))
                }
                for m in _FILLED_CALL.finditer(text):
                    owner = m.group(1) or ""
                    if owner.startswith(("self.", "cls.")):
                        continue
                    if owner or m.group(2) in imported:
                        found.add(m.group(2))
            self._imported_and_filled = found
        return self._imported_and_filled

    def unused_import_of(self, path: str, name: str) -> bool:
        """Whether the module at ``path`` is imported by name lists that leave ``name`` out.

        ``from prompts import WELCOME_PROMPT`` in another module, while nothing in the tree
        but its own definition mentions ``BOOKING_CONFIRMATION_PROMPT``: that template is
        not used by the code in view (no ``import prompts``, no ``*``, no other mention).
        """
        stem = Path(path).stem
        pattern = re.compile(
            r"^[ \t]*from[ \t]+(?:[\w.]*\.)?" + re.escape(stem) + r"[ \t]+import[ \t]+"
            r"(\([^)]*\)|[^\n]+)",
            re.M,
        )
        word = re.compile(r"(?<![\w.])" + re.escape(name) + r"(?!\w)")
        plain = re.compile(r"^[ \t]*import[ \t]+(?:[\w.]*\.)?" + re.escape(stem) + r"\b", re.M)
        mentions = 0
        listed = False
        for p, text in self._code_texts():
            mentions += len(word.findall(text))
            if os.path.normpath(p) == os.path.normpath(path):
                continue
            if plain.search(text):
                return False
            for m in pattern.finditer(text):
                if "*" in m.group(1):
                    return False
                listed = True
        return listed and mentions == 1

    def runs_per_call_processes(self) -> bool:
        """Whether the tree uses a framework that starts a fresh process for each call.

        LiveKit Agents runs every job in its own process
        (:func:`pipecat_fast.providers.prompt_vars.process_per_call_imports`), so a value a
        module computes at import is computed again for each call there.
        """
        if self._per_call_processes is None:
            self._per_call_processes = any(
                imports_per_call_framework(text) for _p, text in self._code_texts()
            )
        return self._per_call_processes

    def called_names(self) -> set[str]:
        """Every plain name or own method some module of the tree calls (see ``_CALLED``).

        Read from the source text, so modules that do not parse count too.
        """
        if self._called is None:
            called: set[str] = set()
            for path, text in list(self._sources.items()):
                if text is None:
                    try:
                        text = Path(path).read_bytes()[:MAX_MODULE_BYTES].decode("utf-8-sig")
                    except (OSError, UnicodeDecodeError):
                        continue
                called.update(m.group(1) for m in _CALLED.finditer(text))
            self._called = called
        return self._called

    def index(self, path: str, source: str | None = None, tree: ast.Module | None = None):
        """The :class:`ModuleIndex` of a module of the project (parsed once), or ``None``."""
        key = str(Path(path))
        if key in self._indexes:
            return self._indexes[key]
        self._indexes[key] = None  # also guards against import cycles
        if tree is None:
            text = source if source is not None else self._sources.get(key)
            if text is None:
                try:
                    raw = Path(key).read_bytes()[: MAX_MODULE_BYTES + 1]
                    if len(raw) > MAX_MODULE_BYTES:
                        return None
                    text = raw.decode("utf-8-sig")
                except (OSError, UnicodeDecodeError):
                    return None
            try:
                tree, text = _parse_module(text, key)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return None
            source = text
        index = ModuleIndex(tree, source or "", path=key, project=self)
        self._indexes[key] = index
        return index

    def register(self, index: ModuleIndex) -> None:
        """Make an index built elsewhere (the file being linted) the project's own."""
        if index.path:
            self._indexes[str(Path(index.path))] = index
            if str(Path(index.path)) not in self._sources:
                self.add(index.path, None)

    def defining_module(self, name: str, user: ModuleIndex) -> tuple[ModuleIndex, ast.AST] | None:
        """The one other module of the tree that defines ``name`` at its top level.

        For a name a module uses but neither defines nor imports: an excerpt whose import
        lines were cut, or a ``from x import *``. ``None`` unless exactly one module
        defines it.
        """
        if self._definers is None:
            self._definers = {}
            for path in list(self._sources):
                for defined in self._top_level_names(path):
                    self._definers.setdefault(defined, []).append(path)
        paths = [p for p in self._definers.get(name, []) if p != str(Path(user.path or ""))]
        if len(set(paths)) != 1:
            return None
        index = self.index(paths[0])
        node = top_level_value(index, name) if index is not None else None
        return (index, node) if node is not None else None

    def _top_level_names(self, path: str) -> list[str]:
        """Names a module defines at top level, from its tree alone (no full index)."""
        built = self._indexes.get(path)
        tree = built.tree if built is not None else None
        if tree is None:
            text = self._sources.get(path)
            try:
                if text is None:
                    raw = Path(path).read_bytes()[: MAX_MODULE_BYTES + 1]
                    if len(raw) > MAX_MODULE_BYTES:
                        return []
                    text = raw.decode("utf-8-sig")
                tree, _text = _parse_module(text, path)
            except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
                return []
            except MemoryError:
                return []
        return [name for stmt in tree.body for name in _top_level_names(stmt)]

    def index_of(self, node: ast.AST) -> ModuleIndex | None:
        """The already-built index whose tree holds ``node``."""
        for index in self._indexes.values():
            if index is not None and index.owns(node):
                return index
        return None

    # -- imports --------------------------------------------------------------------------

    def _module_path(self, importer: ModuleIndex, imported: ImportedName) -> str | None:
        module = imported.module
        if imported.level:
            if not importer.path:
                return None
            base = Path(importer.path).parent
            for _ in range(imported.level - 1):
                base = base.parent
            rel = base.joinpath(*module.split(".")) if module else base
            candidates = [Path(str(rel) + ext) for ext in CODE_EXTS] + [
                rel / name for name in _INDEX_FILES
            ]
            for candidate in candidates:
                if str(candidate) in self._sources:
                    return str(candidate)
            return None
        candidates = self._by_dotted.get(module, [])
        if not candidates:
            return None
        if importer.path and len(candidates) > 1:
            # Prefer the module nearest to the importer (same folder tree).
            here = Path(importer.path).parent
            candidates = sorted(
                candidates, key=lambda c: -len(Path(c).parent.parts[: len(here.parts)])
            )
        return candidates[0]

    def resolve_import(self, importer: ModuleIndex, local: str) -> tuple[ModuleIndex, ast.AST]:
        """What an imported name refers to in another module of the project.

        Returns:
            ``(index, node)``: the module's index and the value last assigned to the name at
            its top level, or its ``def``/``class``; raises ``LookupError`` when the name
            does not come from a module of the project.
        """
        imported = importer.imported.get(local)
        if imported is None:
            raise LookupError(local)
        if imported.name is None:  # `import x`: a module, not a value
            raise LookupError(local)
        path = self._module_path(importer, imported)
        target_name = imported.name
        if path is None and imported.level and not imported.module:
            # `from . import helpers`: a sibling module, not a value.
            raise LookupError(local)
        if path is None:
            raise LookupError(local)
        index = self.index(path)
        if index is None:
            raise LookupError(local)
        node = top_level_value(index, target_name)
        if node is None:
            # Re-exported: `from .templates import PROMPT` in an __init__.py.
            if target_name in index.imported and index is not importer:
                return self.resolve_import(index, target_name)
            raise LookupError(local)
        return index, node


def _top_level_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        return [stmt.target.id] if isinstance(stmt.target, ast.Name) else []
    return []


def top_level_value(index: ModuleIndex, name: str) -> ast.AST | None:
    """The last top-level assignment, ``def`` or ``class`` of ``name`` in a module."""
    found: ast.AST | None = None
    for stmt in index.tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if stmt.name == name:
                found = stmt
        elif isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if isinstance(t, ast.Name) and t.id == name:
                    found = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            if isinstance(stmt.target, ast.Name) and stmt.target.id == name:
                found = stmt.value
    return found


def _data_string_with(content: str, fields: set[str], pattern: str) -> str | None:
    """The one string of a YAML/JSON document holding every field, else ``None``."""
    import yaml  # a dependency of Pipecat (YAML is a superset of JSON)

    try:
        docs = list(yaml.safe_load_all(content))
    except (yaml.YAMLError, RecursionError, ValueError, TypeError):
        return None  # not a document this can read: the whole file stands, as before
    hits: list[str] = []
    stack: list = list(docs)
    while stack and len(hits) < 2:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str) and all(pattern.format(f) in node for f in fields):
            hits.append(node)
    return hits[0] if len(hits) == 1 else None


def _parse_module(text: str, path: str) -> tuple[ast.Module, str]:
    """The tree of a module of the tree and the text it was read from.

    A Python module that does not parse (an excerpt cut inside a string, a syntax error)
    still defines what its recoverable statements define: an importer reads those
    (:func:`pipecat_fast.lint.recover.recover`, the same reading the module's own lint
    gets). Raises ``SyntaxError`` when nothing of it parses.
    """
    if Path(path).suffix.lower() in CODE_EXTS[2:]:
        from pipecat_fast.lint.js_source import js_to_python

        return js_to_python(text), text
    try:
        return parse(text, filename=path), text
    except SyntaxError:
        from pipecat_fast.lint.recover import recover

        recovered = recover(text)
        if recovered is None or recovered[2]:  # nothing read, or a fragment (no top level)
            raise
        return recovered[0], recovered[1]
