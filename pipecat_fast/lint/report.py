"""Output formats for lint results: human (rich), JSON, and SARIF 2.1.0."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import IO
from urllib.parse import quote

from rich.console import Console
from rich.text import Text

from pipecat_fast import __version__
from pipecat_fast.lint.files import FileReport
from pipecat_fast.lint.findings import RULES, Finding, Severity

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def all_findings(reports: list[FileReport]) -> list[Finding]:
    """Every finding of every report, in input order."""
    return [f for r in reports for f in r.findings]


def summary(reports: list[FileReport]) -> dict:
    """Counts by severity, and how many inputs were linted or skipped."""
    counts = Counter(f.severity.label for f in all_findings(reports))
    return {
        "files": len(reports),
        "skipped": sum(1 for r in reports if not r.linted),
        "error": counts.get("error", 0),
        "warning": counts.get("warning", 0),
        "info": counts.get("info", 0),
    }


def write_human(reports: list[FileReport], stream: IO[str], *, color: bool | None = None) -> None:
    """``file:line:col: severity RULE name: message`` lines with a fix hint under each.

    Args:
        reports: Lint reports.
        stream: Where to write.
        color: Force colours on/off; ``None`` lets rich decide (off when not a terminal).
    """
    console = Console(
        file=stream,
        highlight=False,
        soft_wrap=True,
        force_terminal=color,
        no_color=color is False,
    )
    for f in all_findings(reports):
        line = Text()
        line.append(f"{f.path or '<prompt>'}:{f.line}:{f.col}: ", style="bold")
        line.append(f.severity.label, style=_STYLE[f.severity])
        line.append(f" {f.rule} {f.name}: ", style="bold")
        line.append(f.message)
        if f.token_offset is not None and f.rule != "CB901":
            tilde = "~" if f.estimated else ""
            line.append(f" [token {tilde}{f.token_offset}]", style="dim")
        console.print(line)
        if f.fix and f.rule != "CB901":
            console.print(Text(f"    fix: {f.fix}", style="dim"))
    s = summary(reports)
    tail = Text(
        f"{s['error']} error(s), {s['warning']} warning(s), {s['info']} info in "
        f"{s['files']} file(s)" + (f"; {s['skipped']} could not be linted" if s["skipped"] else "")
    )
    console.print(tail, style="bold")


def to_json(reports: list[FileReport]) -> dict:
    """A JSON document: tool, summary, per-file kind and findings."""
    return {
        "tool": "pipecat-fast lint",
        "version": __version__,
        "summary": summary(reports),
        "files": [
            {
                "path": r.path,
                "kind": r.kind,
                "linted": r.linted,
                "truncated": r.truncated,
                "findings": [f.to_dict() for f in r.findings],
            }
            for r in reports
        ],
    }


def _uri(path: str | None) -> str:
    if not path or path == "-":
        return "stdin"
    if Path(path).is_absolute():
        return Path(path).as_uri()
    uri = path.replace("\\", "/")
    return quote(uri[2:] if uri.startswith("./") else uri, safe="/")


def to_sarif(reports: list[FileReport]) -> dict:
    """A SARIF 2.1.0 log with one run; columns count Unicode code points.

    Inputs that could not be linted are also listed as tool execution notifications.
    """
    rule_ids = sorted(RULES)
    index = {rid: i for i, rid in enumerate(rule_ids)}
    rules = [
        {
            "id": rid,
            "name": RULES[rid].name,
            "shortDescription": {"text": RULES[rid].summary},
            "fullDescription": {"text": RULES[rid].summary},
            "help": {"text": RULES[rid].fix},
            "defaultConfiguration": {"level": "warning"},
        }
        for rid in rule_ids
    ]
    results = []
    notifications = []
    for f in all_findings(reports):
        region = {"startLine": max(1, f.line), "startColumn": max(1, f.col)}
        result = {
            "ruleId": f.rule,
            "ruleIndex": index[f.rule],
            "level": _SARIF_LEVEL[f.severity],
            "message": {"text": f"{f.message} Fix: {f.fix}" if f.fix else f.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": _uri(f.path)},
                        "region": region,
                    }
                }
            ],
            "properties": {
                k: v
                for k, v in {
                    "tokenOffset": f.token_offset,
                    "charOffset": f.char_offset,
                    "frequency": f.frequency.label if f.frequency else None,
                    "position": f.position.value if f.position else None,
                    "estimated": f.estimated,
                }.items()
                if v is not None
            },
        }
        results.append(result)
        if f.rule == "CB901" and f.severity >= Severity.WARNING:
            notifications.append(
                {
                    "level": "warning",
                    "message": {"text": f"{f.path}: {f.message}"},
                    "locations": result["locations"],
                }
            )
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "pipecat-fast-lint",
                        "semanticVersion": __version__,
                        "rules": rules,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "invocations": [
                    {
                        "executionSuccessful": True,
                        "toolExecutionNotifications": notifications,
                    }
                ],
                "results": results,
            }
        ],
    }


def write_json(doc: dict, stream: IO[str]) -> None:
    """Write a JSON document (UTF-8 text, non-ASCII kept)."""
    json.dump(doc, stream, ensure_ascii=False, indent=2)
    stream.write("\n")
