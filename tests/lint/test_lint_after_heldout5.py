"""Person records, earlier sessions, and the template engine's clock inside a call.

Issue 16, after the fifth blind run. Small examples of our own; each positive has the case
that must stay quiet beside it.
"""

from pipecat_fast.lint import Position, Severity, lint_prompt
from pipecat_fast.lint.js_source import lint_js_source
from pipecat_fast.lint.vocab import classify_name
from tests.lint.snippets import BODY, flagged, lint

RULES = "Confirm each detail with the caller and keep every answer short.\n" * 40


def _loud(findings, rule):
    return [f for f in findings if f.rule == rule and f.severity >= Severity.WARNING]


def test_a_users_name_read_off_a_user_object_early_is_caller_data_js():
    src = (
        "export const makeInstructions = (agent, user) => {\n"
        f"  return `You are ${{agent.name}}, talking with ${{user.name}}. {BODY}`;\n"
        "};\n"
    )
    found = _loud(lint_js_source(src), "CB103")
    assert found and found[0].severity == Severity.ERROR
    assert "user.name" in found[0].message


def test_an_agents_name_is_configuration_not_caller_data_js():
    src = (
        "export const makeInstructions = (agent, bot) => {\n"
        f"  return `You are ${{agent.name}}, also called ${{bot.name}}. {BODY}`;\n"
        "};\n"
    )
    assert not _loud(lint_js_source(src), "CB103")


def test_a_guests_info_read_off_a_guest_object_is_caller_data_python():
    code = (
        "def build(guest):\n"
        f"    system_prompt = f'Guest notes: {{guest.info}}. {BODY}'\n"
        "    return system_prompt\n"
    )
    assert flagged(lint(code), "CB103")


def test_a_summary_of_the_last_session_is_a_per_caller_record():
    assert classify_name("last_session_summary")[0] == "CB103"
    assert classify_name("previous_context")[0] == "CB103"
    code = (
        "class Coach:\n"
        "    def __init__(self, userdata):\n"
        "        self.instructions = (\n"
        f"            f'You are a coach. {{userdata.last_session_summary}} {BODY}'\n"
        "        )\n"
    )
    assert flagged(lint(code), "CB103")


def test_a_summary_or_context_alone_says_nothing():
    assert classify_name("summary") is None
    assert classify_name("context") is None
    assert classify_name("session_summary") is None
    code = (
        "def build(context):\n"
        f"    system_prompt = f'You are a coach. {{context}} {BODY}'\n"
        "    return system_prompt\n"
    )
    assert not flagged(lint(code), "CB103")


def test_the_jinja_clock_inside_another_call_is_the_clock():
    text = (
        "You are Jarvis, a home assistant.\n"
        'The time is {{ (as_timestamp(now()) | timestamp_custom("%I:%M %p")) }}\n' + RULES
    )
    found = [f for f in lint_prompt(text) if f.rule == "CB101"]
    assert found and found[0].severity == Severity.ERROR
    assert found[0].position == Position.EARLY


def test_a_function_named_like_now_but_not_called_is_not_the_clock():
    text = "You are Jarvis.\nSay {{ greeting('now') }} to the guest.\n" + RULES
    assert not [f for f in lint_prompt(text) if f.rule == "CB101"]
