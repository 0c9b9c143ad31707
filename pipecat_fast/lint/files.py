"""Reading inputs safely and linting a path by kind: prompt text, Python source, JSON.

Bad input never stops a run: binary and undecodable files, Python that does not parse and
invalid JSON come back as a CB901 finding for that file, and the other files are linted.
Memory is bounded: at most ``max_bytes`` of a file is read.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from loguru import logger

from pipecat_fast import tokens
from pipecat_fast.lint.findings import Finding, Severity
from pipecat_fast.lint.js_source import lint_js_source
from pipecat_fast.lint.placeholders import DOUBLE_BRACE_EXTS, filled_by_replace
from pipecat_fast.lint.prompt import lint_prompt
from pipecat_fast.lint.python_source import lint_python_source
from pipecat_fast.lint.textmap import TextMap
from pipecat_fast.lint.vocab import words
from pipecat_fast.providers.llm import prefix_minimum

DEFAULT_MAX_BYTES = 4 * 1024 * 1024
"""Read at most this much of a file (4 MiB, about a million tokens: past any model's context
window); prompt text beyond it is not linted."""

PYTHON_EXTS = {".py", ".pyw"}
JS_EXTS = {".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts"}
JSON_EXTS = {".json"}
YAML_EXTS = {".yaml", ".yml"}
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
}
SKIP_DIRS = {".git", ".hg", ".venv", "venv", "node_modules", "__pycache__", "build", "dist"}
SYSTEM_KEYS = {
    "system",
    "system_prompt",
    "system_instruction",
    "instructions",
    "prompt",
    "systemMessage",  # n8n's AI Agent node (options.systemMessage), LangChain.js agents
}
TOOL_KEYS = {"tools", "functions"}


@dataclass
class FileReport:
    """What linting one input produced.

    Attributes:
        path: The path as given (or found under a given folder); ``"-"`` for stdin.
        kind: ``"text"``, ``"python"``, ``"json"`` or ``"skipped"``.
        findings: Findings, each with ``path`` set.
        truncated: True when only the first ``max_bytes`` were linted.
    """

    path: str
    kind: str
    findings: list[Finding] = field(default_factory=list)
    truncated: bool = False

    @property
    def linted(self) -> bool:
        """False when the input could not be linted at all (binary, unparseable...)."""
        return not any(f.rule == "CB901" and f.severity >= Severity.WARNING for f in self.findings)


PROMPTISH = {"prompt", "prompts", "instruction", "instructions", "system", "persona", "agent"}
TOOLISH = {"tool", "tools", "function", "functions", "schema", "schemas", "request", "requests"}
WORKFLOWISH = {"workflow", "workflows"}
"""JSON exports of workflow platforms (n8n) hold their agents' system messages."""


def _wanted_in_folder(relative: Path) -> bool:
    """Which files a folder scan picks.

    All ``.py``, JS/TS, ``.prompt`` and YAML files (a YAML file is linted only for the
    text under keys named like prompt text, so a config without one yields nothing); text
    and JSON files only when their name or a folder above them says prompt/instructions/
    system/persona/agent (JSON also tools/functions/schema/request, and workflow: an n8n
    export), so READMEs and configs are left alone.
    """
    ext = relative.suffix.lower()
    if ext in PYTHON_EXTS or ext in JS_EXTS or ext in YAML_EXTS or ext == ".prompt":
        return True
    if ext not in TEXT_EXTS | JSON_EXTS | YAML_EXTS:
        return False
    said = {w for part in relative.parts for w in words(Path(part).stem)}
    return bool(said & PROMPTISH) or (ext in JSON_EXTS and bool(said & (TOOLISH | WORKFLOWISH)))


def iter_paths(paths: list[str]) -> Iterator[str]:
    """Expand folders into the prompt, Python and JSON files under them (sorted).

    Files named explicitly are yielded whatever their extension; ``"-"`` stands for stdin.
    In folders: see :func:`_wanted_in_folder`.

    Raises:
        FileNotFoundError: If a path does not exist.
    """
    for p in paths:
        if p == "-":
            yield p
            continue
        path = Path(p)
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
                for name in sorted(files):
                    full = Path(root) / name
                    if not full.is_file():  # FIFOs, sockets, dangling links
                        continue
                    # The scanned folder's own name counts: `lint prompts/` takes its .md files.
                    if _wanted_in_folder(Path(path.resolve().name) / full.relative_to(path)):
                        yield str(full)
        elif path.exists():
            yield p
        else:
            raise FileNotFoundError(p)


def decode(data: bytes, truncated: bool) -> str:
    """Decode file bytes as UTF-8 (BOM allowed) or BOM-marked UTF-16/32.

    Args:
        data: The bytes read.
        truncated: True when more bytes followed: an incomplete last character is dropped.

    Raises:
        UnicodeDecodeError: If the bytes are not text in those encodings.
    """
    encoding = "utf-8-sig"
    if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        encoding = "utf-32"
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    decoder = codecs.getincrementaldecoder(encoding)("strict")
    return decoder.decode(data, final=not truncated)


def read_input(path: str, max_bytes: int = DEFAULT_MAX_BYTES, stdin=None) -> tuple[str, bool]:
    """Read at most ``max_bytes`` of a file as text.

    Returns:
        ``(text, truncated)``.

    Raises:
        OSError: If the file cannot be read.
        ValueError: If it is binary or not decodable as text (the message says which).
    """
    if path == "-":
        import sys

        stream = stdin if stdin is not None else sys.stdin.buffer
        data = stream.read(max_bytes + 1)
    else:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    truncated = len(data) > max_bytes
    data = data[:max_bytes]
    head = data[:8192]
    has_bom = head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
    if b"\x00" in head and not has_bom:
        raise ValueError("binary file (NUL bytes), skipped")
    try:
        return decode(data, truncated), truncated
    except UnicodeDecodeError as e:
        declared = _declared_encoding(data)
        if declared is not None:
            try:
                return data.decode(declared, "strict"), truncated
            except UnicodeDecodeError:
                pass
        raise ValueError(f"not UTF-8/UTF-16 text (undecodable byte at {e.start}), skipped") from e


_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
"""A PEP 263 encoding declaration (``# -*- coding: latin-1 -*-``)."""


def _declared_encoding(data: bytes) -> str | None:
    """The encoding a file declares in its first two lines (PEP 263), if Python knows it."""
    for line in data.split(b"\n", 2)[:2]:
        m = _CODING.match(line)
        if m:
            try:
                return codecs.lookup(m.group(1).decode("ascii")).name
            except (LookupError, UnicodeDecodeError):
                return None
    return None


def _blocks(value, cached_default: bool = False) -> list[tuple[str, bool]]:
    """Text of a system value: a string, or Anthropic content blocks (with cache marks)."""
    if isinstance(value, str):
        return [(value, cached_default)]
    out: list[tuple[str, bool]] = []
    if isinstance(value, list):
        for block in value:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                out.append((block["text"], "cache_control" in block or "cachePoint" in block))
            elif isinstance(block, dict) and "cachePoint" in block and out:
                out[-1] = (out[-1][0], True)  # Bedrock: a cachePoint after the text
    return out


def _collect_json(node, tools: list, systems: list, key: str | None = None) -> None:
    if isinstance(node, dict):
        role = node.get("role")
        if role in ("system", "developer"):
            systems.extend(_blocks(node.get("content")))
        for k, v in node.items():
            if k in TOOL_KEYS and isinstance(v, list):
                tools.extend(v)
            elif k in SYSTEM_KEYS and (
                isinstance(v, str) or (k == "system" and isinstance(v, list))
            ):
                systems.extend(_blocks(v))
            else:
                _collect_json(v, tools, systems, k)
    elif isinstance(node, list):
        if (
            key is None
            and node
            and all(isinstance(t, dict) and ("name" in t or "function" in t) for t in node)
        ):
            tools.extend(node)
            return
        for v in node:
            _collect_json(v, tools, systems, key)


def _locate(raw: str, snippet: str, raw_map: TextMap) -> tuple[int, int] | None:
    for form in (snippet, json.dumps(snippet, ensure_ascii=False)[1:-1], json.dumps(snippet)[1:-1]):
        if form and (at := raw.find(form)) >= 0:
            return raw_map.line_col(at)
    return None


def lint_json(
    raw: str,
    provider: str | None = None,
    model: str | None = None,
    *,
    rendered: bool = False,
    encoding: str = tokens.DEFAULT_ENCODING,
    table: dict | None = None,
    bound: Mapping[str, str] | None = None,
) -> list[Finding]:
    """Lint a JSON tool schema or request: tools first, then system text, as providers cache.

    Tool lists are found under ``"tools"``/``"functions"`` keys or as a top-level list of
    ``{"name": ...}`` objects; system text under ``"system"``, ``"instructions"``,
    ``"prompt"``... or in ``{"role": "system"|"developer", "content": ...}`` messages.

    Returns:
        Findings located in the JSON file (line/col of the matched text where it can be
        found verbatim). Invalid JSON yields one CB901 finding.
    """
    try:
        data = json.loads(raw)
        tools: list = []
        systems: list[tuple[str, bool]] = []
        _collect_json(data, tools, systems)
    except json.JSONDecodeError as e:
        return [
            Finding(
                rule="CB901",
                severity=Severity.WARNING,
                message=f"invalid JSON, not linted: {e.msg}",
                line=e.lineno,
                col=e.colno,
            )
        ]
    except RecursionError:
        message = "JSON nested too deeply, not linted"
        return [Finding(rule="CB901", severity=Severity.WARNING, message=message)]
    tools_text = json.dumps(tools, ensure_ascii=False) if tools else ""
    parts = [(tools_text, False)] + systems
    combined = ""
    breakpoint_at = None
    for text, cached in parts:
        if not text:
            continue
        combined += ("\n\n" if combined else "") + text
        if cached:
            breakpoint_at = len(combined)  # the cached prefix runs up to this block's end
    findings = lint_prompt(
        combined,
        provider,
        model,
        rendered=rendered,
        encoding=encoding,
        table=table,
        breakpoint_at=breakpoint_at,
        bound=bound,
    )
    raw_map = TextMap(raw, encoding)
    for f in findings:
        if f.char_offset is not None and f.char_end is not None:
            where = _locate(raw, combined[f.char_offset : f.char_end], raw_map)
            f.line, f.col = where or (1, 1)
        else:
            f.line, f.col = 1, 1
    return findings


MAX_YAML_NODES = 100_000
"""Visit at most this many values of a YAML document (aliases can make a small file huge)."""


def lint_yaml(
    raw: str,
    provider: str | None = None,
    model: str | None = None,
    *,
    rendered: bool = False,
    encoding: str = tokens.DEFAULT_ENCODING,
    table: dict | None = None,
    bound: Mapping[str, str] | None = None,
) -> list[Finding]:
    """Lint the prompts of a YAML file: the text under keys named like prompt text.

    Agent configs keep their prompts in YAML (``system_prompt: |``, ``instructions:``), often
    as templates with ``{{var}}``/``{var}`` placeholders filled at run time. Each such value
    is linted as a prompt template on its own (a text file's rules: a placeholder named like
    a clock or caller value is graded where it sits). Other keys (settings, ids) are left
    alone.

    Returns:
        Findings located in the YAML file (line/col of the matched text where it can be
        found verbatim). YAML that does not load yields one CB901 finding.
    """
    import yaml  # a dependency of Pipecat; imported here so the linter loads without it

    try:
        docs = list(yaml.safe_load_all(raw))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        return [
            Finding(
                rule="CB901",
                severity=Severity.WARNING,
                message=f"invalid YAML, not linted: {getattr(e, 'problem', None) or e}",
                line=(mark.line + 1) if mark is not None else 1,
                col=(mark.column + 1) if mark is not None else 1,
            )
        ]
    except RecursionError:
        message = "YAML nested too deeply, not linted"
        return [Finding(rule="CB901", severity=Severity.WARNING, message=message)]
    prompts: list[str] = []
    _collect_yaml(docs, None, prompts, set(), [0])
    raw_map = TextMap(raw, encoding)
    out: list[Finding] = []
    for text in prompts:
        for f in lint_prompt(
            text, provider, model, rendered=rendered, encoding=encoding, table=table, bound=bound
        ):
            if f.char_offset is not None and f.char_end is not None:
                where = _locate(raw, text[f.char_offset : f.char_end], raw_map)
            else:
                first = next((ln for ln in text.splitlines() if ln.strip()), "")
                where = _locate(raw, first, raw_map) if first else None
            f.line, f.col = where or (1, 1)
            out.append(f)
    out.sort(key=lambda f: (f.line, f.col))
    return out


def _collect_yaml(node, key: str | None, out: list[str], seen: set[int], count: list[int]):
    from pipecat_fast.lint.python_source import _names_prompt_text

    count[0] += 1
    if count[0] > MAX_YAML_NODES:
        return
    if isinstance(node, str):
        if key is not None and (key in SYSTEM_KEYS or _names_prompt_text(key)) and node.strip():
            out.append(node)
        return
    if not isinstance(node, (dict, list)) or id(node) in seen:
        return
    seen.add(id(node))  # an alias repeats a node: visit it once
    if isinstance(node, dict):
        for k, v in node.items():
            _collect_yaml(v, str(k), out, seen, count)
    else:
        for v in node:
            _collect_yaml(v, key, out, seen, count)


def _is_regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True  # let the read report why it fails


def kind_of(path: str) -> str:
    """``"python"``, ``"js"``, ``"json"`` or ``"text"`` by file extension."""
    ext = Path(path).suffix.lower()
    if ext in PYTHON_EXTS:
        return "python"
    if ext in JS_EXTS and not path.endswith(".d.ts"):
        return "js"
    if ext in JSON_EXTS:
        return "json"
    if ext in YAML_EXTS:
        return "yaml"
    return "text"


def lint_path(
    path: str,
    provider: str | None = None,
    model: str | None = None,
    *,
    rendered: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    encoding: str = tokens.DEFAULT_ENCODING,
    table: dict | None = None,
    stdin=None,
    project=None,
    breakpoints: bool = False,
) -> FileReport:
    """Lint one input file by its kind; never raises for bad content.

    Args:
        path: File path, or ``"-"`` for stdin (read as prompt text).
        provider: Provider for the minimum-prefix check (``None`` skips it).
        model: Model id for the minimum table.
        rendered: Text files are rendered prompts (placeholders left are unfilled).
        max_bytes: Read at most this many bytes.
        encoding: Token encoding.
        table: Minimum-prefix table.
        stdin: Binary stream to read for ``"-"`` (``sys.stdin.buffer`` by default).
        project: The :class:`~pipecat_fast.lint.project.Project` of every Python file being
            linted, so imports between them resolve.
        breakpoints: The prompt (a text file's, a module's system prompt) is sent as one
            block carrying an explicit cache breakpoint (Anthropic ``cache_control``).

    Returns:
        The report; inputs that cannot be linted carry one CB901 finding.

    Raises:
        ValueError: If ``provider`` is unknown (a usage error, not bad content).
    """
    prefix_minimum(provider, model, table)  # an unknown provider is a usage error: raise it
    kind = "text" if path == "-" else kind_of(path)
    report = FileReport(path=path, kind=kind)

    def skip(message: str, severity: Severity = Severity.WARNING) -> FileReport:
        report.kind = "skipped" if severity >= Severity.WARNING else report.kind
        report.findings.append(Finding(rule="CB901", severity=severity, message=message, path=path))
        return report

    if path != "-" and not _is_regular(path):
        return skip("not a regular file (a FIFO, socket or device would block or never end)")
    try:
        text, truncated = read_input(path, max_bytes, stdin)
    except (OSError, ValueError) as e:
        return skip(str(e) if isinstance(e, ValueError) else f"cannot read: {e}")
    if truncated and kind in ("python", "js"):
        return skip(f"larger than {max_bytes} bytes; code is parsed whole, raise --max-bytes")
    if truncated and kind in ("json", "yaml"):
        what = kind.upper()
        return skip(f"larger than {max_bytes} bytes; {what} is parsed whole, raise --max-bytes")
    try:
        bound = None
        if project is not None and kind not in ("python", "js"):
            bound = project.bound_variables()
            if kind == "text":
                # A prompt file the code fills field by field with `.replace`: what no
                # `.replace` names ships as written, it is no slot.
                filled = filled_by_replace(text, project.replace_targets())
                bound = {**bound, **filled} if filled else bound
        if kind == "python":
            found = lint_python_source(
                text,
                path,
                provider=provider,
                model=model,
                encoding=encoding,
                table=table,
                project=project,
                breakpoints=True if breakpoints else None,
            )
        elif kind == "js":
            found = lint_js_source(
                text,
                path,
                provider=provider,
                model=model,
                encoding=encoding,
                table=table,
                project=project,
                breakpoints=True if breakpoints else None,
            )
        elif kind in ("json", "yaml"):
            found = (lint_json if kind == "json" else lint_yaml)(
                text,
                provider,
                model,
                rendered=rendered,
                encoding=encoding,
                table=table,
                bound=bound,
            )
        else:
            found = lint_prompt(
                text,
                provider,
                model,
                rendered=rendered,
                encoding=encoding,
                table=table,
                breakpoint_at=len(text) if breakpoints else None,
                bound=bound,
                double_only=Path(path).suffix.lower() in DOUBLE_BRACE_EXTS,
            )
    except Exception as e:  # one file's bad luck never stops the run
        # Reported as CB901, with the error's type and text; no traceback, on any log (the
        # CLI prints none: loguru's default sink shows debug lines).
        logger.debug(f"lint: {path}: internal error ({type(e).__name__}: {e})")
        return skip(f"internal error, not linted ({type(e).__name__}: {e}); please report it")
    for f in found:
        f.path = path
    report.findings = found
    if truncated:
        report.truncated = True
        skip(f"only the first {max_bytes} bytes were linted", Severity.INFO)
    if kind in ("python", "js") and not report.linted:
        report.kind = "skipped"
    return report
