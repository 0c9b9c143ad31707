"""Constructs of real prompt code the linter must read (issue 16, third round).

Each test is a small example of our own of one construct: an excerpt that starts inside a
function's parameter list or a docstring's lone closing quotes, an ``__init__`` body cut
out before another method, a module of the tree that does not parse but is imported, a
parameter typed as one call's state, a message's content rewritten in place, what a
detector found in the caller's speech, LiveKit job/room/participant metadata, prompts in
YAML agent configs, and the per-call and per-time values real voice agents put early (with
the constants, environment settings and late content that must stay clean).
"""

import argparse
import io
import json
import textwrap

from pipecat_fast.lint import Frequency, Position, Severity, lint_python_source
from pipecat_fast.lint.cli import add_arguments, run
from pipecat_fast.lint.files import lint_path, lint_yaml
from pipecat_fast.lint.js_source import lint_js_source
from pipecat_fast.lint.project import Project
from tests.lint.snippets import BODY, flagged, lint

# -- excerpts that start in the middle of something ---------------------------------------

CUT_SIGNATURE = """
        self, call: CallState, lang: str
    ) -> list[dict]:
        return [
            {"role": "system", "content": f"Claim on file: {call.claim}. {BODY}"},
        ]
"""


def test_an_excerpt_starting_inside_a_parameter_list_gets_its_def_back():
    # Only the parameter's type says `call` is one call's state: the header must be read.
    found = lint_python_source(CUT_SIGNATURE.replace("{BODY}", BODY), "agent.py")
    (f,) = flagged(found, "CB103")
    assert f.severity is Severity.ERROR and f.line == 5  # the source's own line
    # Without the parameter list's closing line it is not a signature: nothing is invented.
    broken = CUT_SIGNATURE.replace("    ) -> list[dict]:\n", "")
    assert flagged(lint_python_source(broken.replace("{BODY}", BODY), "agent.py")) == []


def test_a_lone_closing_docstring_quote_on_the_first_line_is_read_as_a_tail():
    code = (
        '    """\n'
        '    greeting_tpl: str = """\n'
        "        Caller on file: {caller_name}.\n"
        f"        {BODY}\n"
        '    """\n'
        "\n"
        "    def greeting(self, caller_name: str) -> str:\n"
        "        return self._render(self.greeting_tpl, caller_name=caller_name)\n"
        "\n"
        "    def _render(self, tpl: str, **kwargs: str) -> str:\n"
        "        return tpl.format(**kwargs)\n"
        "\n"
        "    def messages(self, caller_name: str) -> list[dict]:\n"
        '        return [{"role": "system", "content": self.greeting(caller_name)}]\n'
    )
    found = lint_python_source(code, "prompts.py")
    assert flagged(found, "CB103"), [(f.rule, f.message) for f in found]
    note = next(f for f in found if f.rule == "CB901")
    assert note.severity is Severity.INFO  # read, not "no prompt text could be read"


def test_an_init_body_cut_out_before_another_method_is_read_as_a_method():
    code = (
        "        self.language_detector = Detector(config)\n"
        "        self.template = config.get('template')\n"
        "\n"
        "    def inject(self, messages):\n"
        "        lang = self.language_detector.dominant_language\n"
        '        note = f"Answer in {lang}.\\n\\n"\n'
        "        for i, msg in enumerate(messages):\n"
        '            if msg.get("role") == "system":\n'
        '                messages[i]["content"] = note + msg["content"]\n'
        "        return messages\n"
    )
    found = lint_python_source(code, "manager.py")
    (f,) = flagged(found, "CB103")
    assert f.frequency is Frequency.SESSION  # read per call, not at class level
    # Lines of the excerpt, not of the text read (which has a header put above it).
    assert f.line == 6 and "computed at line 5" in f.message and f.extra["origin_line"] == 5


# -- modules of the tree -----------------------------------------------------------------


def test_an_imported_module_that_does_not_parse_still_exports_what_it_defines():
    # A LiveKit agent (a process per call): the import-time date changes once a day.
    clock = "from livekit.agents import Agent\nfrom datetime import date\nTODAY = date.today()\n"
    # Cut inside its triple-quoted prompt: it does not parse on its own.
    persona = (
        "from hotel.clock import TODAY\n"
        'COMMON = f"""You are the front desk. Today is {TODAY.strftime("%A %d %B")}.\n'
        "You greet callers\n"
    )
    task = (
        "from hotel.persona import COMMON\n"
        "class Booking(Task):\n"
        "    def __init__(self):\n"
        f'        super().__init__(instructions=f"{{COMMON}}\\n\\n{BODY}")\n'
    )
    project = Project({"hotel/clock.py": clock, "hotel/persona.py": persona, "hotel/task.py": task})
    (f,) = flagged(lint_python_source(task, "hotel/task.py", project=project), "CB101")
    assert f.frequency is Frequency.DAY and f.position is Position.EARLY
    assert f.severity is Severity.WARNING and f.line == 4


# -- one call's state, rewritten messages, detectors, metadata ----------------------------


def test_a_parameter_typed_as_one_calls_state_is_per_call_data():
    code = f'''
    TEMPLATE = """# Claim
    {{claim}}
    {BODY}"""
    class Prompts:
        def build(self, call: CallStateModel) -> str:
            return TEMPLATE.format(claim=json.dumps(call.claim))
        def system(self, call: CallStateModel):
            return [{{"role": "system", "content": self.build(call)}}]
    '''
    (f,) = flagged(lint(code), "CB103")
    assert f.severity is Severity.ERROR and "CallStateModel" in f.message
    # The field's own name says more than the type: `call.messages` is the conversation.
    history = code.replace("json.dumps(call.claim)", "json.dumps(call.messages)")
    assert [f.rule for f in flagged(lint(history))] == ["CB105"]
    # The same name without the type may be a tool call: nothing is guessed.
    untyped = code.replace(": CallStateModel", "")
    assert flagged(lint(untyped)) == []


def test_text_put_in_front_of_a_system_messages_content_is_early():
    code = """
    from datetime import datetime
    def add_time(messages):
        stamp = datetime.now().isoformat()
        messages[0]["content"] = f"Now: {stamp}\\n" + messages[0]["content"]
        return messages
    """
    (f,) = flagged(lint(code))
    assert f.rule == "CB101" and f.severity is Severity.ERROR
    assert f.position is Position.EARLY
    # The message's own earlier text is not reported (not history, not new content).
    assert [x.rule for x in lint(code) if x.rule.startswith("CB1")] == ["CB101"]
    # Appended after the content it is the tail: late.
    tail = code.replace(
        'f"Now: {stamp}\\n" + messages[0]["content"]', 'messages[0]["content"] + f"\\nNow: {stamp}"'
    )
    assert flagged(lint(tail)) == []
    assert [x.position for x in lint(tail) if x.rule == "CB101"] == [Position.LATE]


def test_a_role_check_says_which_message_is_rewritten():
    code = """
    from datetime import datetime
    def add_time(messages):
        stamp = datetime.now().isoformat()
        for m in messages:
            if m["role"] == "system":
                m["content"] = f"Now: {stamp}\\n" + m["content"]
    """
    (f,) = flagged(lint(code))
    assert "system message" in f.message and f.severity is Severity.ERROR


def test_what_a_detector_found_in_the_callers_speech_is_per_session():
    code = f"""
    class Bot:
        async def start(self):
            lang = self.language_detector.dominant_language
            self.system_prompt = f"Reply in {{lang}}. {BODY}"
    """
    (f,) = flagged(lint(code), "CB103")
    assert f.frequency is Frequency.SESSION and f.severity is Severity.ERROR
    late = code.replace('f"Reply in {lang}. ' + BODY + '"', 'f"' + BODY + ' Reply in {lang}."')
    assert flagged(lint(late)) == []


def test_livekit_job_room_and_participant_metadata_are_per_call():
    for source in ("ctx.job.metadata", "ctx.room.metadata", "participant.metadata"):
        code = f"""
        import json
        async def entrypoint(ctx, participant):
            info = json.loads({source})
            agent = Agent(instructions=f"You are calling {{info['name']}}. {BODY}")
        """
        (f,) = flagged(lint(code), "CB103")
        assert f.severity is Severity.ERROR and source in f.message
    # The same metadata in the last line is late.
    late = f"""
    import json
    async def entrypoint(ctx):
        info = json.loads(ctx.job.metadata)
        agent = Agent(instructions=f"{BODY} You are calling {{info['name']}}.")
    """
    assert flagged(lint(late)) == []
    # Metadata of something else (a model's, a file's) says nothing about the call.
    other = late.replace("ctx.job.metadata", "model.metadata").replace(
        f"{BODY} You are calling {{info['name']}}.", f"Model: {{info['name']}}. {BODY}"
    )
    assert flagged(lint(other)) == []


# -- prompts in YAML ---------------------------------------------------------------------


def test_a_yaml_prompt_with_an_early_placeholder_is_graded_where_it_sits():
    raw = (
        "agent:\n"
        "  voice: alloy\n"
        "  system_prompt: |\n"
        "    Today is {{current_date}}. You take calls for a dental office.\n"
        + "".join(f"    {line}\n" for line in textwrap.wrap(BODY, 80))
    )
    (f,) = flagged(lint_yaml(raw), "CB101")
    assert f.severity is Severity.WARNING and f.frequency is Frequency.DAY
    assert (f.line, f.col) == (4, 14)
    # At the end it is late; under a key that is not a prompt it is not linted.
    late = raw.replace("Today is {{current_date}}. ", "") + "    Today is {{current_date}}.\n"
    assert flagged(lint_yaml(late)) == []
    other = raw.replace("system_prompt:", "greeting_audio:")
    assert lint_yaml(other) == []


def test_yaml_that_does_not_load_is_one_cb901_and_aliases_are_visited_once(tmp_path):
    (bad,) = lint_yaml("prompt: [unclosed\n")
    assert bad.rule == "CB901" and bad.severity is Severity.WARNING and bad.line >= 1
    # A "billion laughs" document: aliases share nodes, each is visited once.
    bomb = 'a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]\n'
    for i in range(1, 9):
        prev = chr(ord("a") + i - 1)
        bomb += f"{chr(ord('a') + i)}: &{chr(ord('a') + i)} [*{prev}, *{prev}, *{prev}, *{prev}]\n"
    assert lint_yaml(bomb) == []
    path = tmp_path / "agent.yaml"
    path.write_text("instructions: 'Caller {{caller_name}}. " + BODY + "'\n")
    report = lint_path(str(path))
    assert report.kind == "yaml" and flagged(report.findings, "CB103")


# -- other ways voice agents put per-call or per-time content early ------------------------


def test_realtime_session_update_instructions_in_javascript():
    code = (
        "export function start(ws) {\n"
        "  ws.send(JSON.stringify({ type: 'session.update', session: {\n"
        f"    instructions: `The time is ${{new Date().toLocaleString()}}. {BODY}` }} }}));\n"
        "}\n"
    )
    (f,) = flagged(lint_js_source(code, "realtime.js"), "CB101")
    assert f.severity is Severity.ERROR  # date and time of day, every session
    day = code.replace("toLocaleString()", "toLocaleDateString()")
    (f,) = flagged(lint_js_source(day, "realtime.js"), "CB101")
    assert f.severity is Severity.WARNING and f.frequency is Frequency.DAY


def test_clock_libraries_and_unix_time_early_are_flagged():
    cases = {
        "arrow.now().format('YYYY-MM-DD HH:mm')": "import arrow",
        "pendulum.now('UTC').to_datetime_string()": "import pendulum",
        "time.strftime('%H:%M')": "import time",
    }
    for expr, imp in cases.items():
        code = f"""
        {imp}
        async def run_bot():
            system_prompt = f"Now: {{{expr}}}. {BODY}"
        """
        (f,) = flagged(lint(code), "CB101")
        assert f.severity is Severity.ERROR, expr
    js = (
        "export function build() {\n"
        f"  const instructions = `Request ${{Date.now()}}. {BODY}`;\n"
        "  return instructions;\n}\n"
    )
    (f,) = flagged(lint_js_source(js, "build.js"), "CB101")
    assert f.severity is Severity.ERROR


def test_a_record_looked_up_by_the_callers_number_then_formatted_in():
    code = f"""
    async def on_call(db, from_number):
        row = db.get(from_number)
        system_prompt = f"Account: {{row['plan']}}. {BODY}"
    """
    (f,) = flagged(lint(code), "CB103")
    assert f.severity is Severity.ERROR
    # A lookup keyed by a constant is configuration.
    constant = code.replace("db.get(from_number)", "db.get('default')")
    assert flagged(lint(constant)) == []


def test_environment_settings_and_constants_stay_clean():
    code = f"""
    import os
    COMPANY = os.environ.get("COMPANY_NAME", "Acme")
    REGION = os.environ["REGION"]
    SYSTEM_PROMPT = f"You work for {{COMPANY}} in {{REGION}} ({{os.getenv('TIER')}}). {BODY}"
    """
    assert flagged(lint(code)) == []
    js = (
        f"const instructions = `You are ${{process.env.AGENT_NAME}}. {BODY}`;\n"
        "export default instructions;\n"
    )
    assert flagged(lint_js_source(js, "agent.js")) == []


def test_a_template_file_filled_with_replace_is_graded_where_the_placeholder_sits(tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "agent.md").write_text(
        f"You are calling {{{{customer_name}}}} on behalf of Acme. {BODY}\n"
    )
    (tmp_path / "bot.py").write_text(
        "from pathlib import Path\n"
        "TEMPLATE = (Path(__file__).parent / 'prompts' / 'agent.md').read_text()\n"
        "async def run_call(customer):\n"
        "    system_prompt = TEMPLATE.replace('{{customer_name}}', customer.name)\n"
    )
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out = io.StringIO()
    run(parser.parse_args([str(tmp_path), "--format", "json"]), out=out, err=io.StringIO())
    found = {
        (r["path"].rsplit("/", 1)[-1], f["rule"], f["severity"])
        for r in json.loads(out.getvalue())["files"]
        for f in r["findings"]
    }
    # Graded where the code fills it, with the value it puts in; the template file on its
    # own is not guessed from the placeholder's name a second time.
    assert ("bot.py", "CB103", "error") in found
    assert not any(path == "agent.md" and rule == "CB103" for path, rule, _s in found)
