"""Templates filled later (issue 16): defined in one place, formatted in another.

``str.format``/``format_map``/``string.Template``/Jinja templates, in the same module or in
another module of the linted tree; placeholders whose values cannot be seen are graded by
their names, at their place in the template.
"""

import textwrap

from pipecat_fast.lint import Frequency, Position, Severity, lint_python_source
from pipecat_fast.lint.project import Project

BODY = "Keep answers short and read every detail back to the caller. " * 30

TEMPLATE_MODULE = f'''
PROMPT_TEMPLATE = """You are the booking line of Bright Smiles.
Today is {{current_date}}. {BODY}"""
GREETING = "Hello from {{company}}!"
'''


def lint(code: str, **kw):
    return lint_python_source(textwrap.dedent(code), **kw)


def only(findings, rule):
    hits = [f for f in findings if f.rule == rule]
    assert len(hits) == 1, [(f.rule, f.severity.label, f.message) for f in findings]
    return hits[0]


def test_module_template_formatted_in_a_function_is_laid_out():
    code = (
        TEMPLATE_MODULE
        + """
from datetime import datetime
async def run_bot():
    system_prompt = PROMPT_TEMPLATE.format(current_date=datetime.now().strftime("%A %d %B"))
"""
    )
    f = only(lint(code), "CB101")
    assert f.frequency is Frequency.DAY and f.position is Position.EARLY
    assert f.severity is Severity.WARNING and "1 cache miss a day" in f.message
    assert f.extra["size_known"] and f.token_offset < 15  # the template's layout is known


def test_template_from_another_module_of_the_tree_is_resolved(tmp_path):
    bot = """
    import datetime
    from app.prompts import PROMPT_TEMPLATE
    async def run_bot(llm):
        now = datetime.datetime.now().isoformat()
        system_prompt = PROMPT_TEMPLATE.format(current_date=now)
    """
    project = Project({"app/prompts.py": TEMPLATE_MODULE, "app/bot.py": textwrap.dedent(bot)})
    f = only(lint(bot, filename="app/bot.py", project=project), "CB101")
    # Laid out through the other module: an early per-session timestamp is an error.
    assert f.severity is Severity.ERROR and f.position is Position.EARLY
    assert f.line == 6 and f.extra["size_known"]
    # Without the tree the template is a hole: position unknown, graded middle.
    alone = only(lint(bot, filename="app/bot.py"), "CB101")
    assert alone.position is Position.MIDDLE and alone.severity is Severity.WARNING


def test_the_template_module_alone_says_what_its_placeholders_stand_for():
    f = only(lint(TEMPLATE_MODULE), "CB101")
    assert f.severity is Severity.WARNING and f.position is Position.EARLY
    assert f.frequency is Frequency.DAY and "{current_date}" in f.message
    # `{company}` says nothing volatile: no finding for it.
    assert [x for x in lint(TEMPLATE_MODULE) if x.rule != "CB101"] == []


def test_format_map_and_double_star_mappings_are_laid_out():
    for call in (
        "PROMPT.format_map({'caller_name': caller_name})",
        "PROMPT.format(**{'caller_name': caller_name})",
        "PROMPT.format_map(dict(caller_name=caller_name))",
    ):
        code = f"""
        PROMPT = "Caller: {{caller_name}}. {BODY}"
        async def run_bot(caller_name):
            system_prompt = {call}
        """
        f = only(lint(code), "CB103")
        assert f.severity is Severity.ERROR and f.position is Position.EARLY, call


def test_values_from_a_mapping_we_cannot_see_are_graded_by_placeholder_names():
    code = f"""
    PROMPT = "{BODY} The caller's appointment is at {{appointment_time}}. {BODY}"
    async def run_bot(record: dict):
        system_prompt = PROMPT.format(**record)
    """
    f = only(lint(code), "CB103")
    # Mid-prompt per-caller data: everything after it is uncacheable across callers.
    assert f.position is Position.MIDDLE and f.severity is Severity.WARNING
    assert "appointment_time" in f.message


def test_string_template_substitute_with_a_mapping():
    code = f"""
    import time
    from string import Template
    T = Template("Local time $now. {BODY}")
    async def on_user_turn(context):
        system_prompt = T.substitute({{"now": time.strftime("%H:%M:%S")}})
    """
    f = only(lint(code), "CB101")
    assert f.frequency is Frequency.REQUEST and f.severity is Severity.ERROR


def test_jinja_template_render():
    code = f"""
    import datetime
    from jinja2 import Template
    SYSTEM = Template("{{% if vip %}}VIP. {{% endif %}}It is {{{{ now }}}}. {BODY}")
    async def run_bot(vip):
        system_prompt = SYSTEM.render(now=datetime.datetime.now().strftime("%H:%M"), vip=vip)
    """
    f = only(lint(code), "CB101")
    assert f.position is Position.EARLY and f.severity is Severity.ERROR
    assert f.frequency is Frequency.SESSION  # minute resolution, rendered once per session


def test_template_with_static_values_is_clean():
    code = f"""
    PROMPT = "You are the assistant of {{company}}. {BODY}"
    COMPANY = "Bright Smiles"
    async def run_bot():
        system_prompt = PROMPT.format(company=COMPANY)
    """
    assert [f for f in lint(code) if f.severity >= Severity.WARNING] == []


# -- templates in text files the code reads -------------------------------------------------

MD_LATE = BODY + "\n## Context\nThe conversation started at: {time}\n"
MD_EARLY = "Local time: {time}.\n" + BODY


def _project(code: str, texts: dict[str, str]) -> Project:
    return Project({"bot/main.py": textwrap.dedent(code)}, texts=texts)


def test_a_template_file_read_next_to_the_module_is_laid_out():
    code = """
    from datetime import datetime
    from pathlib import Path
    def load():
        return (Path(__file__).parent / "assets" / "agent.md").read_text()
    async def run_bot():
        system_prompt = load().format(time=datetime.now().strftime("%H:%M:%S"))
    """
    late = lint(
        code, filename="bot/main.py", project=_project(code, {"bot/assets/agent.md": MD_LATE})
    )
    assert only(late, "CB101").position is Position.LATE
    early = lint(
        code, filename="bot/main.py", project=_project(code, {"bot/assets/agent.md": MD_EARLY})
    )
    f = only(early, "CB101")
    assert f.position is Position.EARLY and f.severity is Severity.ERROR


def test_a_template_opened_in_a_with_block_and_a_loader_by_name():
    code = """
    import os
    from functools import cache
    @cache
    def prompt(name):
        with open(os.path.join(os.path.dirname(__file__), "prompts", f"{name}.md")) as f:
            return f.read()
    INSTRUCTIONS = prompt("support")
    async def run_bot(caller_name):
        system_prompt = INSTRUCTIONS.replace("{{caller_name}}", caller_name)
    """
    texts = {"bot/prompts/support.md": "Caller: {{caller_name}}.\n" + BODY}
    f = only(lint(code, filename="bot/main.py", project=_project(code, texts)), "CB103")
    assert f.position is Position.EARLY and f.severity is Severity.ERROR


def test_a_template_from_elsewhere_is_found_by_its_placeholders():
    # The template reaches this code through a name defined out of view; the one prompt
    # file of the tree with a `{time}` field is the template being filled.
    code = """
    from datetime import datetime
    async def run_bot(agent_prompt):
        messages = [{"role": "system", "content": agent_prompt.format(time=datetime.now())}]
    """
    texts = {"bot/assets/agent.md": MD_LATE, "bot/assets/other.md": "No fields here."}
    f = only(lint(code, filename="bot/main.py", project=_project(code, texts)), "CB101")
    assert f.position is Position.LATE and f.severity is Severity.INFO
    # Without a matching file the position is unknown: a warning.
    alone = only(lint(code, filename="bot/main.py"), "CB101")
    assert alone.position is Position.MIDDLE and alone.severity is Severity.WARNING


def test_a_replace_chain_over_statements_reports_only_what_ships_unfilled():
    code = """
    from pathlib import Path
    TEMPLATE = (Path(__file__).parent / "system.md").read_text()
    def build(reason, goal):
        prompt = TEMPLATE
        prompt = prompt.replace("{{reason}}", reason)
        prompt = prompt.replace("{{goal}}", goal)
        return prompt
    """
    texts = {"bot/system.md": BODY + "Reason: {{reason}}. Goal: {{goal}}. Notes: {{notes}}."}
    found = lint(code, filename="bot/main.py", project=_project(code, texts))
    unfilled = [f.evidence for f in found if f.rule == "CB201"]
    assert unfilled == ["{{notes}}"]
