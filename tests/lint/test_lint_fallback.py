"""The general fallbacks: prompts found by their text, untraced values, typed clocks.

Each snippet is our own: a framework the linter has no rule for (``agent.configure(...)``,
``bot.set_persona(...)``) stands for code it has never seen.
"""

from pipecat_fast.lint import Frequency, Severity
from pipecat_fast.lint.js_source import lint_js_source
from pipecat_fast.lint.prompt_text import opens_like_prompt, prompt_score, reads_as_prompt
from tests.lint.snippets import BODY, flagged, lint

HEAD = "Role: the front desk of a dental office, on the phone."
"""A prompt's opening that no rule for a known sink or an f-string reads ("You are..." would)."""

INSTRUCTIONS = (
    "Always greet the caller by the shop's name. Never read out prices you are not sure of. "
    "If the caller asks for a manager, offer to take a message. Keep your answers short; "
    "you speak on the phone, so avoid lists.\n"
    "## Tone\nWarm and brief. Respond in the caller's language.\n"
) * 6
"""Instructions without a role line: second person, instruction sentences, a heading."""


def test_text_that_opens_like_a_prompt_is_linted_whatever_call_takes_it():
    code = f"""
    from datetime import datetime

    def start(agent):
        agent.configure(f"{HEAD} It is {{datetime.now()}}. {BODY}")
    """
    (f,) = flagged(lint(code), "CB101")
    assert f.severity is Severity.ERROR and f.line == 5
    assert "Found by its text alone" in f.message and f.extra["confidence"] == "low"


def test_a_value_judged_by_its_name_in_text_found_by_its_text_is_only_a_note():
    # Two guesses stacked: the prompt found by its text, the value's volatility by its name.
    code = f"""
    def start(agent, caller_phone):
        agent.configure(f"{HEAD} The caller's number is {{caller_phone}}. {BODY}")
    """
    findings = lint(code)
    assert not flagged(findings)
    (note,) = [f for f in findings if f.rule == "CB103"]
    assert note.severity is Severity.INFO and note.extra["confidence"] == "low"


def test_the_same_value_in_view_of_a_known_sink_is_still_flagged():
    code = f"""
    def start(caller_phone):
        return Agent(instructions=f"{HEAD} The caller's number is {{caller_phone}}. {BODY}")
    """
    (f,) = flagged(lint(code), "CB103")
    assert f.severity >= Severity.WARNING


def test_the_fallback_is_silent_for_text_a_known_sink_already_takes():
    code = f"""
    from datetime import datetime

    def start():
        text = f"{HEAD} It is {{datetime.now()}}. {BODY}"
        return Agent(instructions=text)
    """
    (f,) = flagged(lint(code), "CB101")
    assert "Found by its text alone" not in f.message and f.extra["confidence"] == "high"


def test_log_lines_exceptions_and_short_text_are_not_prompts():
    code = f"""
    from datetime import datetime

    def report(logger, caller_phone):
        logger.info(f"You are connected. Started at {{datetime.now()}}. {BODY}")
        print(f"You are up. Started at {{datetime.now()}}. {BODY}")
        sms = f"Your table is booked for {{datetime.now():%H:%M}}, {{caller_phone}}."
        if not sms:
            raise ValueError(f"You are missing a time: {{datetime.now()}}. {BODY}")
        return sms
    """
    assert flagged(lint(code)) == []


def test_instructions_without_a_role_line_are_a_prompt_of_unknown_place():
    early = f'''
    from datetime import datetime

    def start(bot):
        bot.set_rules(f"Current time: {{datetime.now()}}.\\n" + """{INSTRUCTIONS}""")
    '''
    (f,) = flagged(lint(early), "CB101")
    # The text does not open a prompt, so where it sits in one is not known: middle.
    assert f.severity is Severity.WARNING and f.position.value == "middle"
    assert "does not open like a prompt" in f.message
    short = f'''
    from datetime import datetime

    def start(bot):
        bot.set_rules("""{INSTRUCTIONS}""" + f"Current time: {{datetime.now()}}.")
    '''
    assert flagged(lint(short)) == []  # at its end: late


def test_a_fallback_text_is_no_whole_prompt_for_the_minimum_prefix_check():
    code = f"""
    def start(bot):
        bot.configure(f"{HEAD} {{bot.id}} {BODY}")
    """
    assert not [f for f in lint(code, provider="openai") if f.rule == "CB301"]


def test_javascript_text_passed_to_an_unknown_call_is_linted_too():
    code = f"""
    export function start(agent) {{
      agent.setPersona(`{HEAD} Now: ${{new Date().toISOString()}}. {BODY}`);
    }}
    """
    (f,) = [f for f in lint_js_source(code) if f.rule == "CB101"]
    assert f.severity is Severity.ERROR and "Found by its text alone" in f.message


def test_content_reading():
    assert opens_like_prompt("You are Max, the booking assistant of a hotel in Lisbon.")
    assert opens_like_prompt("# Booking assistant\n\n<role>\nYou are Max, the assistant.\n")
    assert opens_like_prompt("## Role\nBooking assistant for a hotel in Lisbon, on the phone.")
    assert not opens_like_prompt("You are ")  # a fragment
    assert reads_as_prompt(INSTRUCTIONS) and prompt_score(INSTRUCTIONS) >= 4
    assert not reads_as_prompt("The weather in Lisbon is 21 degrees and sunny. " * 10)
    assert not reads_as_prompt('<?xml version="1.0"?><Response><Say>' + INSTRUCTIONS)
    assert not reads_as_prompt("https://example.com/hooks/" + INSTRUCTIONS)


def test_an_untraced_value_early_in_a_prompt_is_an_info_note():
    code = f"""
    def build(destination):
        return Agent(instructions=f"You are a tour guide for {{destination}}. {BODY}")
    """
    (note,) = [f for f in lint(code) if f.rule == "CB109"]
    assert note.severity is Severity.INFO and note.extra["confidence"] == "low"
    assert "a parameter whose value is not in view" in note.message
    assert flagged(lint(code)) == []  # a note, not a finding about the prompt


def test_no_untraced_note_for_configuration_late_values_or_values_in_view():
    code = f"""
    import os

    def build(destination):
        a = Agent(instructions=f"You are a guide for {{os.environ['CITY']}}. {BODY}")
        b = Agent(instructions=f"{BODY} Tour of {{destination}}.")
        c = Agent(instructions=f"You are a guide for {{TEMPLATE.format(x=1)}}. {BODY}")
        return build_one("Lisbon")

    def build_one(city):
        return Agent(instructions=f"You are a guide for {{city}}. {BODY}")
    """
    assert [f for f in lint(code) if f.rule == "CB109"] == []


def test_a_parameter_typed_as_a_time_or_a_date_is_a_clock_value():
    code = f"""
    from datetime import date, datetime

    def by_day(day: date):
        return Agent(instructions=f"Today is {{day}}. {BODY}")

    def by_instant(at: datetime | None = None):
        return Agent(instructions=f"It is {{at:%H:%M}}. {BODY}")

    def by_name(label: str):
        return Agent(instructions=f"Desk {{label}}. {BODY}")
    """
    day, minute = flagged(lint(code), "CB101")
    assert day.line == 5 and day.frequency is Frequency.DAY and day.severity is Severity.WARNING
    assert minute.line == 8 and minute.severity is Severity.ERROR
    assert "per minute" in minute.message or "per session" in minute.message
