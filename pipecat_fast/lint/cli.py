"""``pipecat-fast lint PATH...``: find prompt-cache busters in prompts, prompt code and tools.

Exit codes:
    0: nothing at or above ``--fail-on`` (default: error).
    1: at least one finding at or above ``--fail-on``.
    2: usage error (unknown option or provider, a path that does not exist).
    3: nothing failed, but some input could not be linted (binary, undecodable, Python
       that does not parse, invalid JSON, a Python/JSON file over ``--max-bytes``).
"""

from __future__ import annotations

import argparse
import os
import sys

from pipecat_fast import tokens
from pipecat_fast.lint.diff import diff_renders
from pipecat_fast.lint.files import (
    DEFAULT_MAX_BYTES,
    FileReport,
    iter_paths,
    lint_path,
    read_input,
)
from pipecat_fast.lint.findings import Frequency, Severity
from pipecat_fast.lint.project import Project
from pipecat_fast.lint.report import to_json, to_sarif, write_human, write_json
from pipecat_fast.providers.llm import load_table, prefix_minimum, providers

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_UNLINTED = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``lint`` command's arguments to ``parser``."""
    parser.description = __doc__.split("\n\n")[0]
    parser.epilog = "exit codes: 0 clean, 1 findings at --fail-on, 2 usage, 3 unlinted input"
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="prompt text files (.txt/.md/.prompt/.j2...), .py sources, .json tool schemas or "
        "requests, folders (searched recursively), or - for stdin",
    )
    parser.add_argument(
        "--format", choices=("text", "json", "sarif"), default="text", help="output format"
    )
    parser.add_argument(
        "--provider",
        help=f"check the static prefix against this provider's minimum ({', '.join(providers())})",
    )
    parser.add_argument("--model", help="model id for the minimum (e.g. gpt-4o, claude-haiku-4-5)")
    parser.add_argument(
        "--minimums",
        metavar="JSON",
        help="own minimum-prefix table (shape of providers/llm_cache.json)",
    )
    parser.add_argument(
        "--fail-on",
        choices=("error", "warning", "info", "never"),
        default="error",
        help="lowest severity that makes the exit code 1 (default: error)",
    )
    parser.add_argument(
        "--rendered",
        action="store_true",
        help="text files are rendered prompts: any placeholder left in them is unfilled",
    )
    parser.add_argument(
        "--breakpoints",
        action="store_true",
        help="the prompt is sent as one block carrying an explicit cache breakpoint "
        "(Anthropic cache_control, Pipecat enable_prompt_caching): volatile content anywhere "
        "in it is CB108; Python sources that enable_prompt_caching are detected without it",
    )
    parser.add_argument(
        "--diff",
        nargs=2,
        metavar=("RENDER_A", "RENDER_B"),
        help="compare two renders of one prompt (two sessions, or two turns with --turns)",
    )
    parser.add_argument(
        "--turns",
        action="store_true",
        help="with --diff: the renders are two turns of one session (graded per request)",
    )
    parser.add_argument(
        "--max-bytes",
        type=int,
        default=DEFAULT_MAX_BYTES,
        help=f"read at most this many bytes per file (default {DEFAULT_MAX_BYTES})",
    )
    parser.add_argument(
        "--encoding",
        default=tokens.DEFAULT_ENCODING,
        choices=("o200k_base", "cl100k_base"),
        help="token encoding for offsets (default o200k_base)",
    )
    parser.add_argument(
        "--color", choices=("auto", "always", "never"), default="auto", help="colour output"
    )


def _exit_code(reports: list[FileReport], fail_on: str) -> int:
    findings = [f for r in reports for f in r.findings if f.rule != "CB901"]
    if fail_on != "never":
        threshold = Severity.parse(fail_on)
        if any(f.severity >= threshold for f in findings):
            return EXIT_FINDINGS
    if any(not r.linted for r in reports):
        return EXIT_UNLINTED
    return EXIT_OK


def _write(reports: list[FileReport], args: argparse.Namespace, out) -> None:
    if args.format == "json":
        write_json(to_json(reports), out)
    elif args.format == "sarif":
        write_json(to_sarif(reports), out)
    else:
        color = {"always": True, "never": False}.get(args.color)
        write_human(reports, out, color=color)


def _run_diff(args: argparse.Namespace, table: dict | None, out, err) -> int:
    texts = []
    for p in args.diff:
        try:
            texts.append(read_input(p, args.max_bytes)[0])
        except FileNotFoundError:
            print(f"pipecat-fast lint: no such file: {p}", file=err)
            return EXIT_USAGE
        except (OSError, ValueError) as e:
            print(f"pipecat-fast lint: {p}: {e}", file=err)
            return EXIT_UNLINTED
    result = diff_renders(
        texts[0],
        texts[1],
        provider=args.provider,
        model=args.model,
        changes=Frequency.REQUEST if args.turns else Frequency.SESSION,
        encoding=args.encoding,
        table=table,
    )
    for f in result.findings:
        f.path = args.diff[0]
    report = FileReport(path=args.diff[0], kind="diff", findings=result.findings)
    if args.format == "json":
        doc = to_json([report])
        doc["diff"] = {k: v for k, v in result.to_dict().items() if k != "findings"}
        write_json(doc, out)
    elif args.format == "sarif":
        write_json(to_sarif([report]), out)
    else:
        if result.identical:
            print(
                f"renders are identical: {result.tokens_a} tokens, "
                f"{result.cacheable_prefix_tokens} cacheable",
                file=out,
            )
        _write([report], args, out)
    return _exit_code([report], args.fail_on)


def run(args: argparse.Namespace, out=None, err=None) -> int:
    """Run the ``lint`` command.

    Args:
        args: Parsed arguments (see :func:`add_arguments`).
        out: Text stream for results (``sys.stdout`` by default).
        err: Text stream for usage errors (``sys.stderr`` by default).

    Returns:
        The exit code (see the module docstring).
    """
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        table = load_table(args.minimums) if args.minimums else None
        if args.provider:
            prefix_minimum(args.provider, args.model, table)  # unknown provider: usage error
        if args.max_bytes <= 0:
            raise ValueError("--max-bytes must be positive")
        if args.diff:
            return _run_diff(args, table, out, err)
        if not args.paths:
            raise ValueError("give at least one PATH (or - for stdin, or --diff A B)")
        paths = list(iter_paths(args.paths))
    except FileNotFoundError as e:
        print(f"pipecat-fast lint: no such file or folder: {e}", file=err)
        return EXIT_USAGE
    except ValueError as e:
        print(f"pipecat-fast lint: {e}", file=err)
        return EXIT_USAGE
    # Imports between the linted modules resolve, and templates they read from the folders.
    project = Project.from_paths(paths, roots=[p for p in args.paths if os.path.isdir(p)])
    reports = [
        lint_path(
            p,
            args.provider,
            args.model,
            rendered=args.rendered,
            max_bytes=args.max_bytes,
            encoding=args.encoding,
            table=table,
            project=project,
            breakpoints=args.breakpoints,
        )
        for p in paths
    ]
    try:
        _write(reports, args, out)
    except BrokenPipeError:  # `pipecat-fast lint ... | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return _exit_code(reports, args.fail_on)


def main(argv: list[str] | None = None) -> int:
    """Standalone entry: ``python -m pipecat_fast.lint.cli PATH...``."""
    parser = argparse.ArgumentParser(prog="pipecat-fast lint")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
