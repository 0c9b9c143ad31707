"""Helpers for the tests that lint small source snippets of our own (reach3/4, after_*)."""

import textwrap

from pipecat_fast.lint import Severity, lint_python_source

BODY = "Confirm each detail with the caller and keep every answer short. " * 30
"""Static instructions long enough that what comes before them is early in the prompt."""


def module(code: str) -> str:
    """``code`` dedented, with each ``BODY_TEXT`` replaced by :data:`BODY`."""
    return textwrap.dedent(code).replace("BODY_TEXT", BODY)


def lint(code, **kw):
    """Lint ``code`` (dedented) as one Python module."""
    return lint_python_source(textwrap.dedent(code), **kw)


def flagged(findings, rule=None):
    """The CB1xx findings (of ``rule``, if given) at warning or error."""
    return [
        f
        for f in findings
        if (rule is None or f.rule == rule) and f.rule.startswith("CB1")
        if f.severity >= Severity.WARNING
    ]
