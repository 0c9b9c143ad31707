"""Source that does not parse (issue 16): excerpts, syntax errors, template languages.

The statements that parse are linted as usual, the string literals and f-string fields of
the rest are scanned, and a CB901 note says what happened; never a traceback.
"""

import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from pipecat_fast.lint import Frequency, Position, Severity, lint_python_source
from pipecat_fast.lint.project import Project
from pipecat_fast.lint.recover import scan_literals

BODY = "Keep answers short and read every detail back to the caller. " * 30


def note(findings):
    (n,) = [f for f in findings if f.rule == "CB901"]
    return n


def test_a_syntax_error_elsewhere_does_not_hide_the_prompt():
    code = textwrap.dedent(
        f"""
        import datetime
        async def run_bot():
            system_prompt = f"Now: {{datetime.datetime.now().isoformat()}}. {BODY}"
        def broken(:
            pass
        """
    )
    found = lint_python_source(code)
    (f,) = [f for f in found if f.rule == "CB101"]
    assert f.severity is Severity.ERROR and f.line == 4
    n = note(found)
    assert n.severity is Severity.INFO and "does not parse" in n.message and n.line == 5


def test_an_excerpt_cut_inside_brackets_at_both_ends():
    excerpt = textwrap.dedent(
        f"""
                temperature=0.3,
            ),
        )

        async def run_bot(caller_name):
            system_prompt = f"Caller: {{caller_name}}. {BODY}"
            llm = AnthropicLLMService(
                api_key=os.environ["KEY"],
        """
    )
    found = lint_python_source(excerpt)
    (f,) = [f for f in found if f.rule == "CB103"]
    assert f.severity is Severity.ERROR and f.line == 7
    assert note(found).severity is Severity.INFO


def test_an_indented_function_body_is_linted_as_one():
    body = (
        "    article = await get_article_content(url)\n"
        f'    system_instruction = f"""You are a study partner. {{article}}\n    {BODY}"""\n'
    )
    found = lint_python_source(body)
    (f,) = [f for f in found if f.rule == "CB104"]
    # Inside a function: per session, not an import-time constant; line and column map back.
    assert f.frequency is Frequency.SESSION and f.severity is Severity.ERROR
    assert f.line == 2 and f.col == body.splitlines()[1].index("article}") + 1


def test_a_template_language_inside_python_is_read_from_its_literals():
    code = textwrap.dedent(
        f'''
        {{% if caller %}}
        SYSTEM_PROMPT = f"""Caller {{caller_phone}} is on the line. {BODY}"""
        {{% endif %}}
        '''
    )
    found = lint_python_source(code)
    (f,) = [f for f in found if f.rule == "CB103"]
    assert f.line == 3 and "string literal" not in f.message  # recovered as a statement


def test_an_excerpt_cut_inside_a_prompt_string_is_closed_at_the_cut():
    code = (
        "import time\n"
        "def build():\n"
        '    prompt = f"""You are a bot. It is {time.time()} now. ' + BODY + "\n"
        "    x = (\n"
    )
    found = lint_python_source(code)
    (f,) = [f for f in found if f.rule == "CB101"]
    # The string (and the bracket after it) is closed where the excerpt ends, so the
    # assignment is a statement of its own: its names resolve as in any statement.
    assert f.line == 3 and "string literal" not in f.message
    assert f.position is Position.EARLY and f.severity is Severity.ERROR
    (note,) = [f for f in found if f.rule == "CB901"]
    assert note.severity is Severity.INFO


def test_a_cut_string_inside_brackets_keeps_the_call_and_its_imports(tmp_path):
    # A LiveKit agent (a process per call): the import-time date changes once a day.
    clock = "import livekit.agents\nfrom datetime import date\nTODAY = date.today()\n"
    code = (
        "from clock import TODAY\n"
        "def node():\n"
        "    return make_node(\n"
        '        f"""You are the booking line. Today is {TODAY:%A %d %B}. ' + BODY + "\n"
    )
    project = Project({"clock.py": clock, "bot.py": code})
    found = lint_python_source(code, filename="bot.py", project=project)
    (f,) = [f for f in found if f.rule == "CB101"]
    # The date comes from the other module, computed at import in each call's process:
    # once a day, early.
    assert f.severity is Severity.WARNING and f.position is Position.EARLY
    assert f.frequency is Frequency.DAY


def test_nothing_readable_is_a_warning_note():
    (n,) = lint_python_source("def f(:\n")
    assert n.rule == "CB901" and n.severity is Severity.WARNING


def test_the_literal_scanner_skips_comments_and_keeps_prefixes():
    source = "# it's a comment\nx = rb'\\x00' + f\"{a}\" # \"not\"\ny = '''multi\nline'''\n"
    texts = [lit.text for lit in scan_literals(source)]
    assert texts == ["rb'\\x00'", 'f"{a}"', "'''multi\nline'''"]


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abf'\"{}()[]:=\n #\\+x1 .")), max_size=120))
def test_property_broken_code_of_any_shape_lints_without_raising(source):
    for f in lint_python_source(source, provider="openai"):
        assert f.line >= 1 and f.col >= 1
