"""Constructs of real prompt code the linter must read (issue 16, fourth round).

Small examples of our own: an optional parameter's fallback idiom (``t if t is not None
else DEFAULT``), the last ``+=`` onto a prompt, a data block appended after a whole prompt
passed in, and configuration reads (``config.X``, ``os.getenv``) held under a name that
sounds like caller data. Each has the case that must still be flagged beside it.
"""

import textwrap

from pipecat_fast.lint import Position, Severity, lint_python_source
from tests.lint.snippets import BODY, flagged, lint

# -- an optional parameter that falls back to a constant template --------------------------

FALLBACK = f'''
from datetime import datetime

TEMPLATE = """You are a meeting helper.
{BODY}
Today is {{date}}.
"""

def build_prompt(template: str | None = None) -> str:
    template = template if template is not None else TEMPLATE
    return template.format(date=datetime.now().date().isoformat())
'''


def test_fallback_template_is_laid_out_and_a_date_in_its_last_line_is_late():
    found = lint(FALLBACK)
    clock = [f for f in found if f.rule == "CB101" and f.line == 11]
    assert clock and all(f.position is Position.LATE for f in clock)
    assert not flagged(found)


def test_fallback_written_with_or_and_is_none_is_laid_out_too():
    for expr in ("template or TEMPLATE", "TEMPLATE if template is None else template"):
        code = FALLBACK.replace("template if template is not None else TEMPLATE", expr)
        assert not flagged(lint(code)), expr


def test_fallback_template_with_the_date_first_is_still_flagged():
    code = FALLBACK.replace("You are a meeting helper.", "Today is {date}. You are a helper.")
    code = code.replace('Today is {date}.\n"""', '"""')
    hits = flagged(lint(code), "CB101")
    assert hits and hits[0].position is Position.EARLY


def test_a_caller_in_view_passing_its_own_template_is_what_is_laid_out():
    code = FALLBACK + textwrap.dedent(
        """
        def start():
            system_prompt = build_prompt("Today is {date}. " + TEMPLATE)
            return system_prompt
        """
    )
    hits = flagged(lint(code), "CB101")
    assert hits and any(f.position is Position.EARLY for f in hits)


# -- the last += onto a prompt ------------------------------------------------------------

APPEND = """
async def start(db, phone_number):
    agent_instructions = await db.load_agent_prompt()
    caller_context = (
        f"\\n\\nCALLER CONTEXT:\\n"
        f"- Phone: {phone_number}\\n"
    )
    agent_instructions += caller_context
    return Agent(instructions=agent_instructions)
"""


def test_caller_data_in_the_last_append_to_a_prompt_is_late():
    found = lint(APPEND)
    caller = [f for f in found if f.rule == "CB103"]
    assert caller and all(f.position is Position.LATE for f in caller)
    assert not flagged(found)


def test_an_append_followed_by_another_append_stays_flagged():
    code = APPEND.replace(
        "    return Agent", f'    agent_instructions += "{BODY}"\n    return Agent'
    )
    assert flagged(lint(code), "CB103")


def test_an_append_in_a_loop_stays_flagged():
    code = APPEND.replace(
        "    agent_instructions += caller_context\n",
        "    for _ in range(3):\n        agent_instructions += caller_context\n",
    )
    assert flagged(lint(code), "CB103")


# -- data appended after a whole prompt passed in -------------------------------------------

SNAPSHOT = '''
from datetime import datetime, timezone

def initial_prompt(base_prompt: str, entity_csv: str) -> str:
    prompt = f"""{base_prompt}

Current time: {datetime.now(timezone.utc).isoformat()}

{entity_csv}

Only changes are sent from now on.
"""
    return prompt
'''


def test_a_snapshot_of_data_appended_after_the_prompt_passed_in_is_late():
    found = lint(SNAPSHOT)
    clock = [f for f in found if f.rule == "CB101"]
    assert clock and all(f.position is Position.LATE for f in clock)
    assert not flagged(found)


def test_a_clock_before_more_prompt_text_of_unknown_size_stays_flagged():
    code = SNAPSHOT.replace("{entity_csv}", "{extra_instructions}")
    assert flagged(lint(code), "CB101")


def test_a_clock_before_a_long_known_tail_stays_flagged():
    code = SNAPSHOT.replace("Only changes are sent from now on.", BODY)
    assert flagged(lint(code), "CB101")


# -- configuration reads are not caller data ---------------------------------------------

CONFIG = f"""
import os
import config

def session_instructions() -> str:
    profile = {{read}}
    return f"Profile {{profile}}. {BODY}"
"""


def test_a_configuration_read_is_not_guessed_from_its_holder_name():
    for read in ("config.CUSTOM_PROFILE", 'os.getenv("PROFILE")', 'os.environ["PROFILE"]'):
        code = CONFIG.replace("{read}", read)
        assert not flagged(lint(code)), read


def test_a_caller_value_held_under_the_same_name_is_still_flagged():
    code = CONFIG.replace("def session_instructions()", "def session_instructions(profile)")
    code = code.replace("    profile = {read}\n", "")
    assert flagged(lint(code), "CB103")


# -- a prompt built from sections ------------------------------------------------------------

SECTIONS = f'''
class Helper(AgentBase):
    def __init__(self):
        super().__init__(name="helper")
        self.prompt_add_section("Role", "You are a helpful assistant.")

    def configure(self, query_params, agent):
        caller_name = query_params.get("caller_name", "friend")
        agent.prompt_add_section("Caller", f"The caller is {{caller_name}}.")
        agent.prompt_add_section("Style", "{BODY}", bullets=["Be brief.", "Be kind."])
'''


def test_per_caller_text_in_an_early_prompt_section_is_flagged():
    hits = flagged(lint(SECTIONS), "CB103")
    assert hits and hits[0].position is Position.EARLY and hits[0].line == 9
    assert "prompt_add_section" in hits[0].message


def test_per_caller_text_in_the_last_section_is_late():
    code = (
        SECTIONS.replace(
            '        agent.prompt_add_section("Caller", f"The caller is {caller_name}.")\n', ""
        ).rstrip()
        + '\n        agent.prompt_add_section("Caller", f"The caller is {caller_name}.")\n'
    )
    found = lint(code)
    assert not flagged(found)
    assert [f.position for f in found if f.rule == "CB103"] == [Position.LATE]


# -- both branches of an if reach the use ----------------------------------------------------

BRANCHES = f'''
def configure(query_params, agent):
    customer_id = query_params.get("customer_id", "")
    if customer_id:
        role_text = f"You help customer {{customer_id}}. "
    else:
        role_text = "You help customers. "
    system_prompt = role_text + "{BODY}"
'''


def test_a_value_assigned_in_the_if_branch_is_not_hidden_by_the_else_branch():
    assert flagged(lint(BRANCHES), "CB103")


def test_the_else_branch_alone_being_constant_is_still_clean():
    code = BRANCHES.replace('f"You help customer {customer_id}. "', '"You help one customer. "')
    assert not flagged(lint(code))


# -- a caller's state or profile, typed --------------------------------------------------------

TYPED = f"""
def build_instructions(user_state: UserState) -> str:
    return f"You call {{user_state.name}} in {{user_state.city}}. {BODY}"
"""


def test_a_parameter_typed_as_a_users_state_is_per_caller():
    hits = flagged(lint(TYPED), "CB103")
    assert hits and hits[0].severity is Severity.ERROR


def test_a_parameter_typed_as_something_else_says_nothing():
    assert not flagged(lint(TYPED.replace("UserState", "AppSettings")))


# -- an excerpt cut before a call's closing bracket --------------------------------------------

CUT_CALL = f'''
class Caller(Agent):
    def __init__(self, *, name: str):
        super().__init__(
            instructions=f"""
            You are a sales agent. You are talking to {{name}} on the phone.
            {BODY}
            """,
'''


def test_a_call_cut_before_its_closing_bracket_is_closed_and_read():
    found = lint(CUT_CALL + '\nagent = Caller(name=get_lead()["caller_name"])\n')
    note = [f for f in found if f.rule == "CB901"]
    assert note and note[0].severity is Severity.INFO
    # The statement was kept (closed at the cut), so the constructor's prompt is linted.
    assert any(f.rule == "CB103" and f.line == 6 for f in found)


# -- a parameter whose one caller in view passes per-call data ---------------------------------

CALLED = f"""
import json

class Caller(Agent):
    def __init__(self, *, name: str):
        super().__init__(instructions=f"You are talking to {{name}}. {BODY}")

async def entrypoint(ctx):
    dial_info = json.loads(ctx.job.metadata)
    agent = Caller(name=dial_info.get("name", "there"))
"""


def test_a_constructor_parameter_filled_from_job_metadata_is_per_call():
    hits = flagged(lint(CALLED), "CB103")
    assert hits and hits[0].severity is Severity.ERROR and hits[0].line == 6


def test_a_constructor_parameter_filled_with_a_constant_stays_clean():
    code = CALLED.replace('dial_info.get("name", "there")', '"the front desk"')
    assert not flagged(lint(code))


def test_two_callers_passing_different_things_are_not_followed():
    code = CALLED + '    other = Caller(name="the front desk")\n'
    assert not flagged(lint(code))


def test_job_metadata_read_in_a_cut_out_entrypoint_body_is_still_per_call():
    # The `async def entrypoint(ctx):` line cut off: the body reads as module code.
    code = CALLED.replace("async def entrypoint(ctx):\n    ", "").replace("\n    agent", "\nagent")
    hits = flagged(lint(code), "CB103")
    assert hits and hits[0].severity is Severity.ERROR


# -- a string built piece by piece with += ------------------------------------------------------

PIECES = f"""
from datetime import datetime

def compose(agent_name, company):
    identity = f"You are {{agent_name}}"
    if company:
        identity += f", the assistant of {{company}}"
    identity += f". Current time: {{datetime.now():%H:%M}}"
    system_prompt = identity + "\\n{BODY}"
    return system_prompt
"""


def test_a_clock_appended_with_plus_equals_early_in_the_prompt_is_flagged():
    hits = flagged(lint(PIECES), "CB101")
    assert hits and hits[0].severity is Severity.ERROR and hits[0].line == 8


def test_pieces_appended_in_a_loop_are_not_laid_out_as_one():
    code = PIECES.replace(
        '    identity += f". Current time',
        '    for _ in range(2):\n        identity += f". Current time',
    )
    hits = flagged(lint(code), "CB101")
    assert hits and all(f.severity is Severity.WARNING for f in hits)  # position unknown


def test_the_agents_prompt_loaded_by_an_awaited_helper_is_not_fetched_content():
    code = f'''
async def start(db, slug):
    agent_instructions = await prepare_instructions(db, slug)
    return Agent(instructions=agent_instructions + "{BODY}")
'''
    assert not flagged(lint(code), "CB104")
    fetched = code.replace("prepare_instructions", "fetch_article")
    assert flagged(lint(fetched), "CB104")


# -- framework constants rendered with the clock; a method excerpt after module imports -----

HA = f'''
from homeassistant.helpers import llm, template


    def _render_system_prompt(
        self,
        has_tools: bool,
    ) -> str:
        parts = [
            template.Template(llm.DATE_TIME_PROMPT + "{BODY}", self.hass).async_render({{}})
        ]
        return "\\n".join(parts)
'''


def test_home_assistants_date_time_prompt_first_is_a_clock_at_the_start():
    hits = flagged(lint_python_source(HA), "CB101")
    assert hits and hits[0].severity is Severity.ERROR and hits[0].line == 10


def test_the_same_name_from_another_module_is_not_that_constant():
    code = HA.replace("from homeassistant.helpers import llm", "from myapp import llm")
    assert not flagged(lint_python_source(code), "CB101")


def test_a_method_excerpt_after_module_imports_keeps_its_name_and_the_imports():
    code = HA.replace("llm.DATE_TIME_PROMPT", "llm.CUSTOM_PROMPT")
    found = lint_python_source(code)
    note = [f for f in found if f.rule == "CB901"]
    # Read as a class body: nothing dropped, so the note does not count skipped lines.
    assert note and "skipped" not in note[0].message
