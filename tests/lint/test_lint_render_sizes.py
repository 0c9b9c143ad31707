"""The linter counts what the code builds (issue 10, item 5).

Each case runs the prompt-building code for real and compares the linter's static token
counts with the real prompt's, counted by the real BPE: the numbers must match (within a
token or two where a clock value's digits tokenize differently), or the finding must say
that a size is unknown. A wrong number is a failure.
"""

import re
import textwrap

from pipecat_fast import tokens
from pipecat_fast.lint import Position, Severity, lint_python_source
from pipecat_fast.lint.textmap import TextMap

RULES = [
    "Confirm the caller's name and the reason for the call before anything else.",
    "Never read out more than three options at a time; offer to text the rest.",
    "If the caller sounds upset, apologise once and move on to the fix.",
]


def run(code: str, name: str = "SYSTEM_PROMPT") -> str:
    """Execute the module and return the prompt it builds."""
    scope: dict = {}
    exec(textwrap.dedent(code), scope)  # noqa: S102 - our own test code
    value = scope[name]
    return value() if callable(value) else value


def lint(code: str, **kw):
    return lint_python_source(textwrap.dedent(code), **kw)


def test_repeated_and_joined_static_text_is_counted_as_built():
    code = f"""
    RULES = {RULES!r}
    SYSTEM_PROMPT = "You are Ava, the front desk of a dental practice. " * 3 + "\\n".join(
        RULES * 40
    ) + "\\n" + "Keep every answer short. " * 120
    """
    real = tokens.count_tokens(run(code))
    assert real > 1024  # the new user's prompt was 1,817 tokens, reported as 24
    assert [f for f in lint(code, provider="openai") if f.rule == "CB301"] == []
    small = code.replace("RULES * 40", "RULES * 2").replace("* 120", "* 10")
    (f,) = [f for f in lint(small, provider="openai") if f.rule == "CB301"]
    assert f.severity is Severity.WARNING
    assert abs(f.extra["static_tokens"] - tokens.count_tokens(run(small))) <= 1


def test_token_position_of_a_timestamp_matches_the_real_prompt():
    code = f"""
    import datetime
    RULES = {RULES!r}
    def SYSTEM_PROMPT():
        lines = ["You are Ava. It is now " + datetime.datetime.now().isoformat() + "."]
        lines.extend(RULES * 30)
        lines.append("Goodbye politely.")
        return "\\n".join(lines)
    def build():
        system_prompt = SYSTEM_PROMPT()
        return system_prompt
    """
    real = run(code)
    stamp = re.search(r"\d{4}-\d\d-\d\dT[\d:.]+", real)
    tm = TextMap(real)
    (f,) = [f for f in lint(code) if f.rule == "CB101"]
    assert f.severity is Severity.ERROR and f.position is Position.EARLY
    assert abs(f.token_offset - tm.token_at(stamp.start())) <= 1
    assert abs(f.extra["total_tokens"] - tm.token_count) <= 2
    assert f"of ~{f.extra['total_tokens']}" in f.message and f.extra["size_known"]


def test_list_built_by_a_comprehension_over_literal_records():
    code = """
    TOOLS = [
        {"name": "book", "desc": "Book an appointment for the caller."},
        {"name": "cancel", "desc": "Cancel an appointment the caller has."},
    ]
    SYSTEM_PROMPT = "Tools:\\n" + "\\n".join(f"- {t['name']}: {t['desc']}" for t in TOOLS * 50)
    """
    (f,) = [f for f in lint(code, provider="openai") if f.rule == "CB301"]
    assert abs(f.extra["static_tokens"] - tokens.count_tokens(run(code))) <= 1


def test_text_of_unknown_size_is_never_given_a_wrong_number():
    code = """
    def load():
        with open("kb.txt") as f:
            return f.read()
    KB = load()
    SYSTEM_PROMPT = "You answer from the knowledge base below.\\n" + KB
    """
    (f,) = [f for f in lint(code, provider="openai") if f.rule == "CB301"]
    # The file's size is unknown: a lower bound, said to be one, and only a note.
    assert f.severity is Severity.INFO and "at least" in f.message and "unknown size" in f.message
    assert f.extra["size_known"] is False


def test_position_after_text_of_unknown_size_is_a_bound():
    rules = " ".join(RULES * 10)
    code = f"""
    import datetime
    async def run_bot(article):
        system_prompt = f"Article: {{article}}\\nNow: {{datetime.datetime.now():%H:%M}}. {rules}"
    """
    (f,) = [f for f in lint(code) if f.rule == "CB101"]
    assert "size unknown" in f.message and "at least" in f.message
    assert f.position is Position.MIDDLE  # cannot tell early from late: warned, not errored
    assert f.severity is Severity.WARNING
    # Followed by a few tokens only, it is late whatever the article's size.
    short = code.replace(rules, "Be brief.")
    (f,) = [f for f in lint(short) if f.rule == "CB101"]
    assert f.position is Position.LATE and f.severity is Severity.INFO


def test_repetition_by_an_unknown_count_stays_unknown():
    code = """
    import os
    SYSTEM_PROMPT = "Be brief. " * int(os.environ.get("N", "3"))
    """
    (f,) = [f for f in lint(code, provider="openai") if f.rule == "CB301"]
    assert f.severity is Severity.INFO and f.extra["size_known"] is False


def test_huge_repetition_is_not_built_in_memory():
    code = 'SYSTEM_PROMPT = "x" * 10**12\n'  # a terabyte if it were built
    found = lint(code, provider="openai")
    assert [f.rule for f in found] == ["CB301"] and found[0].extra["size_known"] is False
