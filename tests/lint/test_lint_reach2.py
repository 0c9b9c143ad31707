"""More constructs of real prompt code the linter must read (issue 16, second corpus).

Each test is a small example of our own of one construct: a TypeScript variable declared
without a value and assigned on the next line, a function body cut out of a file whose
multi-line prompt holds lines at column 0, a volatile value followed only by a short label
and another value that changes as often, a parameter named like a standard-library module.
"""

import ast
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
    # With a one-line system message the user message is the prompt, laid out as one text.
    short_system = _request(BODY).replace("SUPERVISOR_PROMPT", '"You answer."')
    history, _latest = volatile(lint(short_system), "CB105")
    assert history.evidence == "history" and history.severity >= Severity.WARNING
    # After a whole system prompt the user message is a later message: past the stable
    # prefix (issue 16, after heldout14), late.
    history, _latest = volatile(lint(_request(BODY)), "CB105")
    assert history.position is Position.LATE and history.severity is Severity.INFO


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


def test_what_a_function_named_like_a_prompt_returns_is_that_prompt():
    code = f"""
    import datetime

    TEMPLATE = "# Basics\\nBe brief.\\n{{extra}}\\n{BODY}"

    class News:
        def make_system_prompt(self) -> str:
            now = datetime.datetime.now().strftime("%H:%M")
            return TEMPLATE.format(extra=f"It is {{now}}.")
    """
    (f,) = volatile(lint(code), "CB101")
    assert f.severity is Severity.ERROR and "make_system_prompt()" in f.message


def test_a_prompt_function_called_in_view_is_graded_where_its_result_goes():
    # Called in view, the caller binds its parameters: the date is the tail there.
    code = """
    def final_prompt(base, today):
        return f"{base}\\nToday is {today}."

    def start(base):
        system_prompt = final_prompt(base, "2026-01-01")
    """
    assert [f for f in lint(code) if f.rule == "CB101"] == []
    uncalled = code.replace("    def start(base):\n        system_prompt = final_prompt", "#")
    (f,) = volatile(lint(uncalled), "CB101")  # out of view, the parameter's name tells
    assert f.severity is Severity.INFO  # and it sits at the end


def test_a_prompt_named_arrow_function_member_returns_the_prompt():
    code = (
        "function stamp() {\n  const now = new Date();\n"
        "  const t = now.toLocaleTimeString('en-US', {hour: 'numeric', minute: '2-digit'});\n"
        "  return `Time: ${t}\\n`;\n"
        "}\n"
        f"const modes = {{ notes: {{ getPrompt: () => stamp() + `{BODY}` }} }};\n"
    )
    (f,) = volatile(lint_js_source(code, "modes.ts"), "CB101")
    assert f.severity >= Severity.WARNING and "getPrompt()" in f.message


def test_locale_options_say_how_often_a_javascript_time_changes():
    from pipecat_fast.lint.js_source import js_to_python

    def fmt(options):
        tree = js_to_python(f"const t = new Date().toLocaleTimeString('en-US'{options});")
        return ast.unparse(tree.body[-1].value.args[0])

    assert fmt("") == "'%I:%M:%S %p'"  # the default shows seconds
    assert fmt(", {hour: 'numeric', minute: '2-digit'}") == "'%H %M'"
    assert fmt(", {timeStyle: 'short'}") == "'%H %M'"


def test_keyword_arguments_gathered_by_kwargs_reach_the_template():
    code = f"""
    class Prompts:
        tpl = "# Rules\\n{{messages}}\\n" + "{BODY}"

        def next_system(self, call):
            return self._messages(self._format(self.tpl, messages=dump(call.messages)))

        def _format(self, prompt_tpl, **kwargs):
            text = prompt_tpl.format(**kwargs).strip()
            text = " ".join(
                [line.strip() for line in text.splitlines()]
            )
            return text

        def _messages(self, system):
            return [SystemMessage(content="Shared rules."), SystemMessage(content=system)]
    """
    found = [f for f in volatile(lint(code), "CB105") if f.severity >= Severity.WARNING]
    # The transcript passed as `messages=` ends up in the system message, at the call.
    assert [f.line for f in found] == [6]


def test_an_assignment_spread_over_lines_reads_the_previous_value():
    code = f"""
    def build(caller_name):
        body = f"Caller: {{caller_name}}. {BODY}"
        body = " ".join(
            body.split()
        )
        system_prompt = body
    """
    (f,) = volatile(lint(code), "CB103")
    assert f.severity is Severity.WARNING  # inside a join whose layout is not followed


def test_a_cut_out_class_body_resolves_its_own_methods_and_fields():
    fragment = f'''
    greeting_tpl: str = """You greet {{{{name}}}}."""

    def greet(self, caller_name):
        return self._wrap(f"Caller: {{caller_name}}. {BODY}")

    def _wrap(self, text):
        return [{{"role": "system", "content": text}}]
'''
    (f,) = volatile(lint_python_source(fragment), "CB103")
    assert f.severity is Severity.ERROR and "_wrap()" in f.message


def test_a_prompt_loaded_at_run_time_is_the_prompt_not_fetched_content():
    code = f"""
    async def load(agent_id, caller_name):
        config = await fetch_agent_config(agent_id)
        system_prompt = config["system_prompt"] + "{BODY}"
        other_prompt = f"Article: {{await fetch_article(caller_name)}} {BODY}"
    """
    found = volatile(lint(code), "CB104")
    # Only the article is content fetched into a prompt; the agent's own prompt is not.
    assert [f.extra["sink"] for f in found] == ["`other_prompt`"]


def test_a_short_value_after_a_late_date_keeps_it_late():
    code = """
    def final(base_prompt, today, timezone):
        system_prompt = f"{base_prompt}\\nToday is {today} in the {timezone} timezone."
    """
    (f,) = volatile(lint(code), "CB101")
    assert f.position is Position.LATE and f.severity is Severity.INFO
    # A value of unknown size named like prompt text after it is not short.
    long_tail = code.replace("{timezone} timezone.", "{timezone} timezone. {extra_rules}")
    (f,) = volatile(lint(long_tail), "CB101")
    assert f.severity is Severity.WARNING


def test_a_name_is_not_guessed_from_when_its_text_is_built_in_view():
    code = f"""
    _subs = {{}}

    def apply(text):
        for key, value in _subs.items():
            text = text.replace(key, value)
        return text

    def build_prompt():
        return apply("\\n\\n".join([open("a.md").read(), "{BODY}"]))

    def start():
        messages = [{{"role": "system", "content": build_prompt()}}]
    """
    # `text` would read as what the caller just said; here it is the joined files.
    assert volatile(lint(code), "CB105") == []


def test_a_literal_with_a_role_line_and_a_clock_placeholder_is_a_template():
    guide = f'''
Node(
    content="""Copy the template below into the global node.

Template:
You are the desk agent of Acme.
## Now
UTC time: {{{{current_time}}}}
{BODY}""",
)
'''
    (f,) = volatile(lint_python_source(guide), "CB101")
    assert f.severity is Severity.ERROR and f.extra["sink"] == "a prompt template"
    # Without a role line it is any template (an e-mail, a log line): left alone.
    assert volatile(lint_python_source(guide.replace("You are", "This is")), "CB101") == []
    # A docstring that shows such a template is documentation, not a prompt.
    doc = f'def f():\n    """You are told:\n    {{{{current_time}}}}\n    {BODY}"""\n'
    assert volatile(lint_python_source(doc), "CB101") == []


def test_a_constant_passed_to_a_helper_is_not_guessed_from_the_parameter_name():
    code = f"""
    _QUESTION = "Did the reply answer the caller?"

    class Judge:
        def ask(self, criterion):
            return Question(instructions=self._instructions(_QUESTION, criterion))

        @staticmethod
        def _instructions(question, criterion):
            return " ".join([question, f"Criterion: {{criterion}}", "{BODY}"])
    """
    # `question` would read as what the caller just asked; it is bound to a constant.
    assert volatile(lint(code), "CB105") == []


def test_a_python_file_that_declares_its_encoding_is_read_in_it(tmp_path):
    from pipecat_fast.lint.files import lint_path

    path = tmp_path / "bot.py"
    text = f'# -*- coding: latin-1 -*-\nsystem_prompt = f"Café {{uuid.uuid4()}}. {BODY}"\n'
    path.write_bytes(text.encode("latin-1"))
    report = lint_path(str(path))
    assert report.linted and [f.rule for f in report.findings] == ["CB102"]
    # Undeclared, the same bytes are not UTF-8: reported, not guessed.
    path.write_bytes(text.split("\n", 1)[1].encode("latin-1"))
    (note,) = lint_path(str(path)).findings
    assert note.rule == "CB901" and "not UTF-8" in note.message


def test_code_nested_too_deeply_to_parse_still_has_its_prompt_literals_read():
    parts = ['"You are a bot. "', f'"Session {{session_id}}. {BODY}"'] + ['"x "'] * 3000
    code = "system_prompt = " + " + ".join(parts) + "\n"
    found = lint_python_source(code)
    (note,) = volatile(found, "CB901")
    assert note.severity is Severity.INFO and "1 prompt-like string literal" in note.message
    # The template's placeholder near its start is graded as what it stands for.
    (f,) = volatile(found, "CB103")
    assert f.severity is Severity.ERROR
