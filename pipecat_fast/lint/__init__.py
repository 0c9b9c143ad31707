"""Cache-bust linter: finds what keeps a prompt's prefix from being served from cache.

Library API (pure functions, text in, findings out)::

    from pipecat_fast.lint import lint_prompt, diff_renders, lint_python_source
    findings = lint_prompt(text, provider="openai", model="gpt-4o")

Command line: ``pipecat-fast lint PATH...`` (:mod:`pipecat_fast.lint.cli`). Run time:
:class:`CacheBustGuard`, a Pipecat observer, loaded lazily so that the linter and the CLI
do not import Pipecat's service stack.
"""

from pipecat_fast.lint.diff import RenderDiff, diff_renders
from pipecat_fast.lint.files import FileReport, lint_json, lint_path
from pipecat_fast.lint.findings import RULES, Finding, Frequency, Position, Rule, Severity
from pipecat_fast.lint.guard_core import GuardWarning, PrefixTracker
from pipecat_fast.lint.prompt import lint_prompt
from pipecat_fast.lint.python_source import lint_python_source
from pipecat_fast.providers.llm import PrefixMinimum, load_table, prefix_minimum

__all__ = [
    "RULES",
    "CacheBustGuard",
    "FileReport",
    "Finding",
    "Frequency",
    "GuardWarning",
    "Position",
    "PrefixMinimum",
    "PrefixTracker",
    "RenderDiff",
    "Rule",
    "Severity",
    "diff_renders",
    "lint_json",
    "lint_path",
    "lint_prompt",
    "lint_python_source",
    "load_table",
    "prefix_minimum",
]


def __getattr__(name: str):
    if name == "CacheBustGuard":
        from pipecat_fast.lint.guard import CacheBustGuard

        return CacheBustGuard
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
