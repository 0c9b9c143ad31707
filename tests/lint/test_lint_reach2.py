"""More constructs of real prompt code the linter must read (issue 16, second corpus).

Each test is a small example of our own of one construct: a TypeScript variable declared
without a value and assigned on the next line, a function body cut out of a file whose
multi-line prompt holds lines at column 0, a volatile value followed only by a short label
and another value that changes as often, a parameter named like a standard-library module.
"""

import textwrap

from pipecat_fast.lint import Position, Severity, lint_python_source
from pipecat_fast.lint.js_source import lint_js_source
from pipecat_fast.lint.project import Project

BODY = "Read every detail back to the caller and keep answers short. " * 30


def lint(code, **kw):
    return lint_python_source(textwrap.dedent(code), **kw)


def volatile(findings, rule):
    return [f for f in findings if f.rule == rule]


def test_a_typescript_variable_declared_then_assigned_keeps_its_value():
    code = (
        "function getSystemPrompt() {\n"
        "  let sysPrompt: string;\n"
        f"  sysPrompt = `# Shop\\n- Current time: ${{new Date()}}\\n{BODY}`;\n"
        "  return sysPrompt;\n"
        "}\n"
    )
    (f,) = volatile(lint_js_source(code, "config.ts"), "CB101")
    assert f.severity is Severity.ERROR and f.line == 3
    # The same assignment with the time in the last line is late, as a declaration is.
    late = code.replace("- Current time: ${new Date()}\\n" + BODY, BODY + "- Now: ${new Date()}")
    assert [f.severity for f in volatile(lint_js_source(late, "config.ts"), "CB101")] == [
        Severity.INFO
    ]


def test_an_assignment_to_a_member_is_kept_too():
    code = (
        "class Bot {\n  constructor(callerName) {\n"
        f"    this.instructions = `Caller: ${{callerName}}. {BODY}`;\n  }}\n}}\n"
    )
    (f,) = volatile(lint_js_source(code, "bot.js"), "CB103")
    assert f.severity is Severity.ERROR


FRAGMENT = '''
    deck = Deck()
    rounds = deck.formatted()

    system_instruction = f"""You are a quiz host.
RULES: one question at a time.

{rounds}

STYLE:
{BODY}"""
    llm = LLMService(
        api_key=KEY,
'''
DECK = """
import random

FACTS = ["a", "b", "c", "d"]


class Deck:
    def __init__(self):
        self.items = self._draw()

    def _draw(self):
        pool = list(FACTS)
        random.shuffle(pool)
        return pool

    def formatted(self):
        return "\\n".join(f"- {x}" for x in self.items)
"""


def test_a_cut_out_body_whose_prompt_lines_start_at_column_zero_is_read_as_code():
    source = FRAGMENT.replace("{BODY}", BODY)
    project = Project({"app/bot.py": source, "app/deck.py": DECK})
    found = lint_python_source(source, "app/bot.py", project=project)
    (f,) = volatile(found, "CB102")
    assert f.severity is Severity.ERROR  # shuffled rounds after a two-line header: early
    (note,) = volatile(found, "CB901")
    # Only the call cut off at the end is dropped, not the prompt above it.
    assert note.severity is Severity.INFO and "string literal" not in note.message


def test_the_prompt_of_a_cut_out_body_stays_a_prompt_when_the_quote_could_close_a_docstring():
    # Read the other way (the first triple quote closing a docstring), the prompt's text
    # would be code and the code a string: the reading that keeps the prompt a value wins.
    source = FRAGMENT.replace("{BODY}", BODY).replace("{rounds}", "{uuid.uuid4()}")
    (f,) = volatile(lint_python_source(source), "CB102")
    assert f.line == 8 and f.extra["sink"] == "`system_instruction`"


def _request(between: str) -> str:
    return f"""
    async def on_user_turn(history, latest_question):
        messages = [
            {{"role": "system", "content": SUPERVISOR_PROMPT}},
            {{
                "role": "user",
                "content": f"History: {{history}}\\n{between}Latest: {{latest_question}}",
            }},
        ]
        await client.responses.create(input=messages)
    """


def test_a_value_followed_by_a_short_label_and_a_value_as_volatile_is_late():
    history, latest = volatile(lint(_request("")), "CB105")
    # `latest_question` changes on every request too: the history costs only the label.
    assert history.evidence == "history" and history.position is Position.LATE
    assert history.severity is Severity.INFO and latest.severity is Severity.INFO


def test_a_value_followed_by_static_text_before_the_next_value_is_not_masked():
    history, _latest = volatile(lint(_request(BODY)), "CB105")
    assert history.evidence == "history" and history.severity is Severity.WARNING


def test_a_slower_value_does_not_mask_a_faster_one():
    code = f"""
    def on_user_turn(history, caller_name):
        system_prompt = BASE + f"History: {{history}}\\nCaller: {{caller_name}}\\n{BODY}"
    """
    found = lint(code)
    # Built per request: the caller's name changes per session, the history on every
    # request, so the history still costs the whole body after it.
    (h,) = volatile(found, "CB105")
    assert h.severity is Severity.WARNING and h.position is not Position.LATE


def test_a_parameter_named_like_a_module_is_not_that_module():
    code = f"""
    def build(goal, secrets):
        lines = "\\n".join(f"- {{k}}: {{v}}" for k, v in secrets.items())
        system_prompt = f"You are a caller. {{lines}} {BODY}"
    """
    assert volatile(lint(code), "CB102") == []
    module = """
    import secrets

    def build():
        system_prompt = f"Session {secrets.token_hex(8)}. {BODY}"
    """.replace("{BODY}", BODY)
    (f,) = volatile(lint(module), "CB102")
    assert f.severity is Severity.ERROR
