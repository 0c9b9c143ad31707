"""How prompt text and volatile values reach the linter (issue 16, after the part kept aside).

Each test is a small example of our own of one construct: a helper that puts its argument
into a message, a name whose import an excerpt cut off, a date computed at import, a
framework's session-state object, a short tail appended to a whole prompt, a loop that
sends one request per pass, a memory service that inserts per-turn text early, an excerpt
cut inside a string or starting inside one.
"""

import textwrap

from pipecat_fast.lint import Frequency, Position, Severity, lint_python_source
from pipecat_fast.lint.js_source import lint_js_source
from pipecat_fast.lint.project import Project

BODY = "Read every detail back to the caller and keep answers short. " * 30

NODES = '''
def node(text):
    """A Pipecat Flows node as a dict literal: the text becomes its task message."""
    return {
        "role_messages": [{"role": "system", "content": "You are the booking line."}],
        "task_messages": [{"role": "system", "content": text}],
    }


def relay(text):
    return node(text)
'''
CLOCK = """
from datetime import datetime


def today_text():
    return datetime.now().strftime("%A %d %B")
"""


def lint(code, **kw):
    return lint_python_source(textwrap.dedent(code), **kw)


def volatile(findings, rule):
    return [f for f in findings if f.rule == rule]


def _flow(where: str, via: str = "node") -> tuple[Project, str]:
    text = {
        "early": f"<task>Book a table.</task> Today is {{today_text()}}. {BODY}",
        "late": f"<task>Book a table.</task> {BODY} Today is {{today_text()}}.",
    }[where]
    bot = f'''
from app.nodes import {via}
from app.clock import today_text


def first_node():
    return {via}(f"""{text}""")
'''
    project = Project({"app/nodes.py": NODES, "app/clock.py": CLOCK, "app/bot.py": bot})
    return project, bot


def test_text_passed_to_a_helper_that_puts_it_in_a_flows_node_is_graded():
    project, bot = _flow("early")
    (f,) = volatile(lint_python_source(bot, "app/bot.py", project=project), "CB101")
    assert f.frequency is Frequency.DAY and f.position is Position.EARLY
    assert f.severity is Severity.WARNING and "built by `node()`" in f.message
    # The same text with the date at its end: only the short tail is re-prefilled.
    project, bot = _flow("late")
    (f,) = volatile(lint_python_source(bot, "app/bot.py", project=project), "CB101")
    assert f.severity is Severity.INFO and f.position is Position.LATE


def test_a_parameter_handed_on_through_a_second_helper_reaches_the_sink():
    project, bot = _flow("early", via="relay")
    (f,) = volatile(lint_python_source(bot, "app/bot.py", project=project), "CB101")
    assert f.severity is Severity.WARNING and "built by `relay()`" in f.message


def test_the_helper_alone_reports_nothing_for_its_parameter():
    found = lint_python_source(NODES, "app/nodes.py", project=Project({"app/nodes.py": NODES}))
    assert [f for f in found if f.rule.startswith("CB1")] == []


def test_a_name_whose_import_was_cut_resolves_to_the_one_module_defining_it():
    # A LiveKit agent: each call has its own process, so the import-time date is per call.
    clock = "import livekit.agents\nfrom datetime import date\nTODAY = date.today().isoformat()\n"
    excerpt = f'''
def instructions():
    return f"""You are the front desk. Today is {{TODAY}}. {BODY}"""
'''
    project = Project({"hotel/clock.py": clock, "hotel/agent.py": excerpt})
    (f,) = volatile(lint_python_source(excerpt, "hotel/agent.py", project=project), "CB101")
    assert f.frequency is Frequency.DAY and f.severity is Severity.WARNING
    # Two modules defining the name: which one is meant is not known, nothing is guessed.
    other = "TODAY = 'the day of the event'\n"
    project = Project({"hotel/clock.py": clock, "hotel/x.py": other, "hotel/agent.py": excerpt})
    found = lint_python_source(excerpt, "hotel/agent.py", project=project)
    assert [f for f in found if f.rule == "CB101" and f.severity >= Severity.WARNING] == []


def test_a_typescript_constant_whose_import_was_cut_is_followed():
    db = "import { cli } from '@livekit/agents';\n"  # a process per call (LiveKit)
    db += "export const TODAY = process.env.DAY ?? new Date().toISOString().slice(0, 10);\n"
    code = f"const common = `You are the front desk. Today is ${{TODAY}}. {BODY}`;\n"
    code += "export const agent = new Agent({ instructions: common });\n"
    project = Project({"src/db.ts": db, "src/agent.ts": code})
    (f,) = volatile(lint_js_source(code, "src/agent.ts", project=project), "CB101")
    # Evaluated at module load in each call's process, sliced to a date: once a day, early.
    assert f.frequency is Frequency.DAY and f.severity is Severity.WARNING


def test_a_timestamp_fixed_at_import_is_fixed_per_process():
    code = f"""
    from datetime import datetime
    STARTED = datetime.now().isoformat()
    SYSTEM_PROMPT = f"Started {{STARTED}}. {BODY}"
    """
    (f,) = volatile(lint(code), "CB101")
    assert f.frequency is Frequency.PROCESS and "computed once at import time" in f.message
    assert f.severity is Severity.INFO
    # Computed per call it is per session, an error early.
    per_call = code.replace("STARTED = datetime", "def build():\n        STARTED = datetime")
    per_call = per_call.replace("    SYSTEM_PROMPT", "        SYSTEM_PROMPT")
    (f,) = volatile(lint(per_call), "CB101")
    assert f.frequency is Frequency.SESSION and f.severity is Severity.ERROR


def test_livekit_userdata_is_judged_by_its_fields_names():
    code = f"""
    class Waiter(Agent):
        def __init__(self, *, userdata):
            super().__init__(instructions=f"Menu: {{userdata.drink_items}}. {BODY}")

    class Greeter(Agent):
        def __init__(self, *, userdata):
            super().__init__(instructions=f"Caller: {{userdata.customer_name}}. {BODY}")
    """
    (f,) = volatile(lint(code), "CB103")
    assert f.line == 8 and f.severity is Severity.ERROR  # the caller's name, not the menu


def test_text_appended_to_a_local_string_is_not_changing_state():
    code = f"""
    def menu_lines(items):
        out = []
        for item in items:
            line = f"- {{item.label}}"
            if not item.available:
                line += " (sold out)"
            out.append(line)
        return "\\n".join(out)

    def build(items):
        instructions = f"Menu: {{menu_lines(items)}}. {BODY}"
    """
    assert [f for f in lint(code) if f.severity >= Severity.WARNING] == []
    # A counter a function keeps bumping is still state that changes per request.
    counter = f"""
    class Bot:
        def __init__(self):
            self.round_number = 0

        def on_user_turn(self):
            self.round_number += 1
            self.instructions = f"Round {{self.round_number}}. {BODY}"
    """
    (f,) = volatile(lint(counter), "CB103")
    assert f.frequency is Frequency.REQUEST and f.severity is Severity.ERROR


def test_a_short_tail_appended_to_a_whole_prompt_passed_in_is_late():
    code = """
    from datetime import date, timedelta

    def messages(base_prompt):
        today = date.today()
        tail = (
            f"\\nToday is {today.isoformat()}."
            f" Tomorrow is {(today + timedelta(days=1)).isoformat()}."
        )
        base_prompt = f"{base_prompt}{tail}"
        return [{"role": "system", "content": base_prompt}]
    """
    (f,) = volatile(lint(code), "CB101")
    assert f.position is Position.LATE and f.severity is Severity.INFO
    # A short value of unknown size before it (not a prompt) leaves the position open.
    short = """
    from datetime import date

    def messages(company):
        tail = f"\\nToday is {date.today().isoformat()}. Answer in one line."
        system_prompt = f"{company}{tail}"
    """
    (f,) = volatile(lint(short), "CB101")
    assert f.position is Position.MIDDLE and f.severity is Severity.WARNING


def test_date_arithmetic_with_a_timedelta_keeps_its_size_and_granularity():
    code = f"""
    from datetime import date, timedelta
    def build():
        system_prompt = f"Tomorrow is {{(date.today() + timedelta(days=1)).isoformat()}}. {BODY}"
    """
    (f,) = volatile(lint(code), "CB101")
    assert f.frequency is Frequency.DAY and f.extra["size_known"]


def test_a_loop_that_sends_a_request_per_pass_makes_its_variable_per_request():
    code = """
    async def batch(task):
        for topic in ["tides", "storms", "reefs"]:
            messages = [{"role": "system", "content": f"Write about {topic}. Keep it to one line."}]
            await task.queue_frame(LLMMessagesUpdateFrame(messages, run_llm=True))
    """
    (f,) = volatile(lint(code), "CB103")
    assert f.frequency is Frequency.REQUEST and f.severity is Severity.ERROR
    assert "loop sends a request on each pass" in f.message
    # One prompt per element, built and kept (an agent per language): not a request per pass.
    kept = """
    def agents():
        out = {}
        for lang in ["English", "French", "German"]:
            out[lang] = Agent(instructions=f"Answer in {lang}. Keep it to one line.")
        return out
    """
    assert [f for f in lint(kept) if f.severity >= Severity.WARNING] == []


def test_mem0_inserting_memories_before_the_system_prompt_is_an_error_after_it_an_info():
    code = """
    async def run_bot():
        memory = Mem0MemoryService(api_key="k", user_id="u")
        llm = OpenAILLMService(api_key="k")
    """
    (f,) = volatile(lint(code), "CB104")
    # Pipecat's default position=1: a new message right after the system prompt each turn;
    # the system prompt stays cached, the conversation after it is re-prefilled (said).
    assert f.severity is Severity.INFO and f.position is Position.LATE
    assert "index 1" in f.message and "conversation" in f.message
    first = code.replace(
        'user_id="u")', 'user_id="u", params=Mem0MemoryService.InputParams(position=0))'
    )
    (f,) = volatile(lint(first), "CB104")
    assert f.severity is Severity.ERROR and f.position is Position.EARLY
    computed = code.replace(
        'user_id="u")', 'user_id="u", params=Mem0MemoryService.InputParams(position=n))'
    )
    assert volatile(lint(computed), "CB104") == []


def test_an_excerpt_that_starts_inside_a_docstring_reads_the_code_after_it():
    code = (
        '\n    Starts the bot:\n    - the transport\n    - the services\n    """\n'
        "    memory = Mem0MemoryService(api_key='k')\n"
        f'    llm = LLM(system_instruction="""You are a helper. {BODY}""")\n'
    )
    found = lint_python_source(code)
    assert len(volatile(found, "CB104")) == 1
    (note,) = volatile(found, "CB901")
    assert note.severity is Severity.INFO


def test_a_helper_called_without_the_argument_uses_its_default_not_the_name():
    code = f"""
    def extra(user_name=None):
        line = f"Name: {{user_name}}" if user_name else ""
        return f"<ctx>{{line}}</ctx>"

    def build(caller_name):
        system_prompt = f"You are a bot. {{extra()}} {BODY}"
        other_prompt = f"You are a bot. {{extra(caller_name)}} {BODY}"
    """
    (f,) = volatile(lint(code), "CB103")
    # Only the call that passes the caller's name puts caller data in the prompt.
    assert f.extra["sink"] == "`other_prompt`" and f.severity is Severity.ERROR
