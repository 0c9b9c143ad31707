"""Evaluate the linter on real voice-agent prompts nobody here wrote: a confusion table.

A *corpus* is a folder with a manifest (``index.jsonl``: one JSON object per prompt, with its
source repository, commit, path, lines, licence, verdict and ``early_dynamic``) and one
Markdown file per prompt holding the excerpts: the code block under the header is the file
named by ``- path:``; each further block is preceded by a line ``<path> (lines A-B of N):``.
The default corpus is ``../shared/data/prompts`` (11 prompts); pass others with ``--corpus``.

Each prompt's excerpts are written to a scratch folder at their own paths and linted the way
``pipecat-fast lint FOLDER`` lints a checkout (one project, so imports between the excerpts
resolve; text and JSON files when their names say prompt). A prompt counts as *flagged* when
any of its files has an early-dynamic finding (CB101-CB106, CB108) at warning or error; it is
flagged *by the right rule* when one of those rules matches a kind of content the verdict's
``dynamic_content`` names. CB301 (prefix below minimum) answers another question and is
reported beside the table, not counted. Fetched code is read from the corpus folder and
written only to a temporary folder, never to the project.

Run: ``pipecat-fast bench lint [--corpus DIR ...] [--provider openai]``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from pipecat_fast.lint.files import iter_paths, lint_path
from pipecat_fast.lint.findings import VOLATILE_RULES, Finding, Severity
from pipecat_fast.lint.project import Project
from pipecat_fast.lint.python_source import SINK_RULES
from pipecat_fast.testing.shared_data import shared_data_dir

DEFAULT_DIR = shared_data_dir() / "prompts"
"""``../shared/data/prompts`` next to a project checkout."""

GOAL_RECALL = 0.9
"""Issue 16: recall on early-dynamic prompts of at least 90 %..."""
GOAL_MAX_FP = 1
"""...with at most one false positive."""

_HEADER_PATH = re.compile(r"^- path:\s*(\S+)(?:\s+\(lines (\d+)-(\d+)(?: of \d+)?\))?")
_BLOCK_PATH = re.compile(r"^(\S+)\s+\(lines (\d+)-(\d+)(?: of \d+)?\):\s*$")
_LANG_EXT = {
    "python": ".py",
    "py": ".py",
    "javascript": ".js",
    "js": ".js",
    "typescript": ".ts",
    "ts": ".ts",
    "jinja": ".jinja",
    "markdown": ".md",
    "md": ".md",
    "json": ".json",
    "yaml": ".yaml",
}

# Kinds of content a verdict names, and the rule that reports each (checked in this order).
_KINDS: tuple[tuple[str, str], ...] = (
    ("CB108", r"cache_control|breakpoint|enable_prompt_caching|anthropic-cached"),
    ("CB101", r"\btime\b|timestamp|\bdate\b|datetime|today|strftime|clock|isoformat|minute"),
    ("CB102", r"random|shuffl|\bsample|uuid"),
    (
        "CB103",
        r"caller|callee|customer|patient|client_id|\bname\b|phone|crm|profile|record|per[- ]call"
        r"|per-session|session|\buser id|callsid|\bround|game|account|tier|\bid\b",
    ),
    ("CB104", r"article|fetch|scrap|search|document|retriev|web page|knowledge"),
    ("CB105", r"history|conversation|transcript|message|\bturn\b|utterance|logs|question"),
    ("CB106", r"iteration order|set order|\bset\(|glob|listdir|unordered"),
)


def expected_rules(dynamic_content: str) -> frozenset[str]:
    """Rules that report the kinds of content a verdict's wording names (maybe several).

    The wording is the manifest's ``verdict`` and ``dynamic_content`` (written before the
    linter ran); a manifest entry may also list ``expected_rules`` itself.
    """
    text = dynamic_content.lower()
    if text.startswith("none"):
        return frozenset()
    return frozenset(rule for rule, pattern in _KINDS if re.search(pattern, text))


def expected_rule(dynamic_content: str) -> str | None:
    """The first kind of content the wording names (see :func:`expected_rules`)."""
    text = dynamic_content.lower()
    found = [(m.start(), r) for r, p in _KINDS if (m := re.search(p, text)) and r != "CB108"]
    return min(found)[1] if found and not text.startswith("none") else None


@dataclass
class Excerpt:
    """One code block of a prompt's Markdown file."""

    path: str
    first_line: int
    language: str
    text: str


def read_excerpts(md: str) -> list[Excerpt]:
    """The code blocks of a prompt file, each with the path and first line it comes from."""
    lines = md.splitlines()
    header_path, header_first = None, 1
    for line in lines:
        m = _HEADER_PATH.match(line)
        if m:
            header_path, header_first = m.group(1), int(m.group(2) or 1)
            break
    out: list[Excerpt] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("```"):
            i += 1
            continue
        # A fence closes only with at least as many backticks as opened it (CommonMark),
        # so a Markdown prompt holding its own ``` block can be quoted in a ```` fence.
        fence = line[: len(line) - len(line.lstrip("`"))]
        language = line[len(fence) :].strip().lower()
        j = i + 1
        while j < len(lines) and not (
            lines[j].startswith(fence) and not lines[j].lstrip("`").strip()
        ):
            j += 1
        body = "\n".join(lines[i + 1 : j]) + "\n"
        prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        m = _BLOCK_PATH.match(prev)
        if m:
            path, first = m.group(1), int(m.group(2))
        elif not out and header_path:
            path, first = header_path, header_first
        else:
            path, first = f"excerpt_{len(out)}", 1
        if not Path(path).suffix and language in _LANG_EXT:
            path += _LANG_EXT[language]
        out.append(Excerpt(path, first, language, body))
        i = j + 1
    return out


def materialise(excerpts: list[Excerpt], root: Path) -> dict[str, Excerpt]:
    """Write the excerpts under ``root`` at their paths and at their own line numbers.

    Each excerpt is preceded by blank lines up to the line it starts at, so findings carry
    the original file's line numbers and several excerpts of one file sit in order (a
    method excerpt after its class's excerpt continues the class). Overlapping excerpts of
    one file are written one after the other.

    Returns:
        Written path -> the first excerpt written there.
    """
    by_file: dict[Path, list[Excerpt]] = {}
    for ex in excerpts:
        rel = Path(ex.path)
        if rel.is_absolute() or ".." in rel.parts:
            rel = Path(rel.name)
        by_file.setdefault(root / rel, []).append(ex)
    written: dict[str, Excerpt] = {}
    for target, parts in by_file.items():
        parts.sort(key=lambda e: e.first_line)
        lines: list[str] = []
        for ex in parts:
            body = ex.text.splitlines()
            if len(lines) < ex.first_line - 1:
                lines.extend([""] * (ex.first_line - 1 - len(lines)))
            elif lines:
                lines.append("")
            lines.extend(body)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(lines) + "\n", encoding="utf-8")
        written[str(target)] = parts[0]
    return written


@dataclass
class CaseResult:
    """One prompt's verdict and what the linter said."""

    id: str
    early_dynamic: bool
    expected: frozenset[str]
    flagged: bool
    right_rule: bool
    findings: list[tuple[str, Finding]] = field(default_factory=list)
    below_minimum: bool = False
    error: str = ""

    @property
    def expected_rule(self) -> str | None:
        """One expected rule (for the table), or ``None``."""
        return min(self.expected) if self.expected else None

    @property
    def outcome(self) -> str:
        """``TP``, ``FP``, ``TN`` or ``FN``."""
        if self.early_dynamic:
            return "TP" if self.flagged else "FN"
        return "FP" if self.flagged else "TN"


@dataclass
class Evaluation:
    """All cases of one corpus and the confusion counts."""

    cases: list[CaseResult]
    corpus: str = ""

    def count(self, outcome: str) -> int:
        """How many cases have ``outcome`` (TP/FP/TN/FN)."""
        return sum(1 for c in self.cases if c.outcome == outcome)

    @property
    def positives(self) -> int:
        """Prompts whose verdict is early dynamic."""
        return sum(1 for c in self.cases if c.early_dynamic)

    @property
    def right_rule_hits(self) -> int:
        """Positives flagged by a rule the verdict calls for."""
        return sum(1 for c in self.cases if c.early_dynamic and c.flagged and c.right_rule)

    @property
    def recall(self) -> float:
        """Flagged positives over positives (1.0 when there are none)."""
        return self.count("TP") / self.positives if self.positives else 1.0

    @property
    def goal_met(self) -> bool:
        """Recall of at least 90 % with at most one false positive (issue 16)."""
        return self.recall >= GOAL_RECALL and self.count("FP") <= GOAL_MAX_FP

    def markdown(self, detail: bool = True) -> str:
        """The confusion table and the per-prompt table, as Markdown."""
        tp, fp, tn, fn = (self.count(k) for k in ("TP", "FP", "TN", "FN"))
        lines = [
            f"Corpus: `{self.corpus}` ({len(self.cases)} prompts, {self.positives} early dynamic)",
            "",
            "| | verdict: early dynamic | verdict: not early dynamic |",
            "|---|---|---|",
            f"| **flagged** (CB101-CB106, CB108 at warning/error) | TP = {tp} | FP = {fp} |",
            f"| **not flagged** | FN = {fn} | TN = {tn} |",
            "",
            f"Recall {self.recall:.0%} ({tp} of {self.positives}); positives flagged by the "
            f"right rule: {self.right_rule_hits} of {self.positives}; false positives: {fp}. "
            f"Goal (recall >= {GOAL_RECALL:.0%}, at most {GOAL_MAX_FP} FP): "
            f"{'met' if self.goal_met else 'missed'}.",
        ]
        if detail:
            lines += [
                "",
                "| prompt | verdict | expected | outcome | flagging findings (rule, severity, "
                "file:line) | CB301 |",
                "|---|---|---|---|---|---|",
            ]
            for c in self.cases:
                shown = ", ".join(
                    f"{f.rule} {f.severity.label} {name}:{f.line}"
                    for name, f in c.findings
                    if f.rule in VOLATILE_RULES and f.severity >= Severity.WARNING
                )
                if c.error:
                    shown = f"not evaluated: {c.error}"
                lines.append(
                    f"| {c.id} | {'early dynamic' if c.early_dynamic else 'not early'} | "
                    f"{', '.join(sorted(c.expected)) or '-'} | {c.outcome}"
                    f"{' (right rule)' if c.early_dynamic and c.flagged and c.right_rule else ''}"
                    f" | {shown or '-'} | {'yes' if c.below_minimum else 'no'} |"
                )
        return "\n".join(lines)


def _manifest(corpus: Path) -> list[dict]:
    index = corpus / "index.jsonl"
    entries = []
    for raw in index.read_text("utf-8").splitlines():
        if raw.strip():
            entries.append(json.loads(raw))
    return entries


def _early_dynamic(entry: dict) -> bool:
    if "early_dynamic" in entry:
        return bool(entry["early_dynamic"])
    return str(entry.get("verdict", "")).upper().startswith("POSITIVE")


def cut_to_lines(excerpts: list[Excerpt], lines: object) -> list[Excerpt]:
    """The first excerpt cut to the manifest's ``lines`` ``[A, B]`` (the prompt-building lines).

    This turns a case that holds the whole file back into the excerpt a reader would quote,
    so one corpus measures both forms. Other excerpts are kept; a range that is missing,
    malformed or outside the first excerpt leaves the excerpts as they are.
    """
    if not excerpts or not isinstance(lines, (list, tuple)) or len(lines) != 2:
        return excerpts
    try:
        a, b = int(lines[0]), int(lines[1])
    except (TypeError, ValueError):
        return excerpts
    head = excerpts[0]
    body = head.text.splitlines()
    last = head.first_line + len(body) - 1
    if not head.first_line <= a <= b or a > last:
        return excerpts
    text = "\n".join(body[a - head.first_line : b - head.first_line + 1]) + "\n"
    return [Excerpt(head.path, a, head.language, text), *excerpts[1:]]


def lint_case(
    md: str,
    provider: str | None = "openai",
    scratch: Path | None = None,
    lines: object = None,
) -> list[tuple[str, Finding]]:
    """Lint one prompt's excerpts as a checkout: ``(file, finding)`` with the file's lines.

    ``lines``: the manifest's prompt-building lines; when given, the first excerpt is cut
    to them first (:func:`cut_to_lines`).
    """
    excerpts = read_excerpts(md)
    if lines is not None:
        excerpts = cut_to_lines(excerpts, lines)
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        root = Path(tmp)
        written = materialise(excerpts, root)
        paths = list(iter_paths([str(root)]))
        project = Project.from_paths(paths, roots=[str(root)])
        out: list[tuple[str, Finding]] = []
        for p in paths:
            report = lint_path(p, provider, project=project)
            ex = written.get(p)
            name = Path(p).name
            for f in report.findings:  # lines are the original file's (see materialise)
                f.path = ex.path if ex is not None else str(Path(p).relative_to(root))
                out.append((name, f))
        return out


def evaluate(
    prompts_dir: Path | str = DEFAULT_DIR,
    provider: str | None = "openai",
    prompt_lines: bool = False,
) -> Evaluation:
    """Lint every prompt in a corpus's ``index.jsonl`` and compare with its verdict.

    ``prompt_lines``: lint only each case's prompt-building lines (its manifest ``lines``)
    of the first file, not the whole block: the excerpt form of a whole-file corpus.

    Raises:
        FileNotFoundError: If ``index.jsonl`` is missing.
    """
    corpus = Path(prompts_dir)
    cases: list[CaseResult] = []
    for entry in _manifest(corpus):
        case_id = str(entry.get("id", entry.get("file", "?")))
        wording = f"{entry.get('verdict', '')}; {entry.get('dynamic_content', '')}"
        if str(entry.get("dynamic_content", "")).lower().startswith("none"):
            wording = "none"
        want = frozenset(entry.get("expected_rules") or []) or expected_rules(wording)
        result = CaseResult(case_id, _early_dynamic(entry), want, False, False)
        try:
            md = (corpus / entry["file"]).read_text("utf-8")
            result.findings = lint_case(
                md, provider, lines=entry.get("lines") if prompt_lines else None
            )
        except Exception as e:  # one bad case never stops the evaluation (and no traceback)
            result.error = f"{type(e).__name__}: {e}"
            print(f"{case_id}: not evaluated ({result.error})", file=sys.stderr)
        hits = {
            f.rule
            for _n, f in result.findings
            if f.rule in VOLATILE_RULES and f.severity >= Severity.WARNING
        }
        result.flagged = bool(hits)
        result.right_rule = bool(hits & want)
        result.below_minimum = any(f.rule == "CB301" for _n, f in result.findings)
        cases.append(result)
    return Evaluation(cases, corpus=str(prompts_dir))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of the evaluation (for a ``pipecat-fast bench`` suite or ``main``)."""
    parser.add_argument(
        "prompts_dir", nargs="?", default=None, help="a corpus folder (same as --corpus)"
    )
    parser.add_argument(
        "--corpus",
        action="append",
        default=[],
        metavar="DIR",
        help="corpus folder with index.jsonl and one .md per prompt (repeatable; default: "
        "../shared/data/prompts)",
    )
    parser.add_argument("--provider", default="openai", help="provider for the CB301 column")
    parser.add_argument(
        "--summary", action="store_true", help="confusion tables only, no per-prompt rows"
    )
    parser.add_argument(
        "--sink-rules",
        choices=("all", "fallback-only", "none"),
        default="all",
        help="measure the ways of finding prompts in code apart: 'fallback-only' turns the "
        "rules for known APIs and names off and keeps the text-only fallback, 'none' turns "
        "both off (default: all)",
    )
    parser.add_argument(
        "--prompt-lines",
        action="store_true",
        help="lint only each case's prompt-building lines (its manifest 'lines') of the first "
        "file instead of the whole block: the excerpt form of a corpus that holds whole files",
    )


def run(args: argparse.Namespace) -> int:
    """Print each corpus's evaluation as Markdown.

    Returns:
        0 when every corpus meets the goal (recall >= 90 % on early-dynamic prompts, at
        most one false positive), 1 when one misses it, 2 when a corpus cannot be read.
    """
    corpora = list(args.corpus) + ([args.prompts_dir] if args.prompts_dir else [])
    corpora = corpora or [str(DEFAULT_DIR)]
    token = SINK_RULES.set(getattr(args, "sink_rules", "all"))
    try:
        return _run(args, corpora)
    finally:
        SINK_RULES.reset(token)


def _run(args: argparse.Namespace, corpora: list[str]) -> int:
    code = 0
    for i, corpus in enumerate(corpora):
        if i:
            print()
        try:
            result = evaluate(corpus, args.provider or None, getattr(args, "prompt_lines", False))
        except (OSError, ValueError) as e:
            print(f"corpus {corpus}: cannot be read ({type(e).__name__}: {e})", file=sys.stderr)
            code = 2
            continue
        print(result.markdown(detail=not args.summary))
        if not result.goal_met and code == 0:
            code = 1
    return code


def main(argv: list[str] | None = None) -> int:
    """``python -m pipecat_fast.bench.evals.lint [--corpus DIR ...] [--provider P]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
