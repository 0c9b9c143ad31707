"""Template files and platform variables (issue 16, after the fourth blind run).

Small examples of our own: Liquid and Jinja expressions with the engine's own clock,
variables a voice platform fills itself (``{{customer.number}}``), variables the tree binds
per call through a platform's call-creation field, placeholders code in view fills,
language settings, YAML agent configs found by a folder scan, and a JavaScript excerpt cut
inside an object literal. Each positive has the case that must stay quiet beside it.
"""

import argparse
import io
import json

from pipecat_fast.lint import Frequency, Position, Severity, lint_prompt
from pipecat_fast.lint.cli import add_arguments, run
from pipecat_fast.lint.js_source import lint_js_source
from pipecat_fast.lint.placeholders import (
    bound_variables,
    classify_placeholder,
    find_placeholders,
    replaced_placeholders,
)
from pipecat_fast.lint.project import Project
from pipecat_fast.providers import prompt_vars
from tests.lint.snippets import BODY, flagged, lint

RULES = "Confirm each detail with the caller and keep every answer short.\n" * 40


def _volatile(findings, rule):
    return [f for f in findings if f.rule == rule]


def _lint_tree(tmp_path) -> dict[str, set[tuple[str, str]]]:
    """``{file name: {(rule, severity)}}`` for ``pipecat-fast lint <tmp_path>``."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out = io.StringIO()
    run(parser.parse_args([str(tmp_path), "--format", "json"]), out=out, err=io.StringIO())
    found: dict[str, set[tuple[str, str]]] = {}
    for r in json.loads(out.getvalue())["files"]:
        name = r["path"].rsplit("/", 1)[-1]
        found.setdefault(name, set()).update((f["rule"], f["severity"]) for f in r["findings"])
    return found


# -- the template engine's own clock -------------------------------------------------------


def test_liquid_now_with_a_date_filter_is_a_clock_at_the_granularity_of_its_format():
    minute = '# Context\nIt is {{ "now" | date: "%A, %B %d, %Y, %I:%M %p", "Europe/Paris" }}.\n'
    (f,) = _volatile(lint_prompt(minute + RULES), "CB101")
    assert f.frequency is Frequency.MINUTE and f.severity is Severity.ERROR
    day = "Today is {{ 'today' | date: '%B %d, %Y' }}.\n"
    (f,) = _volatile(lint_prompt(day + RULES), "CB101")
    assert f.frequency is Frequency.DAY and f.severity is Severity.WARNING
    # No format: LiquidJS's default shows the minute.
    (f,) = _volatile(lint_prompt('Now: {{ "now" | date }}\n' + RULES), "CB101")
    assert f.frequency is Frequency.MINUTE


def test_liquid_now_at_the_end_is_late_and_a_string_without_a_date_filter_is_text():
    (f,) = _volatile(lint_prompt(RULES + 'It is {{ "now" | date: "%H:%M" }}.'), "CB101")
    assert f.position is Position.LATE and f.severity is Severity.INFO
    assert _volatile(lint_prompt('Say {{ "now" | upcase }} loudly.\n' + RULES), "CB101") == []


def test_jinja_now_calls_and_strftime_read_their_format():
    text = "Time: {{ now().strftime('%H:%M') }}\n" + RULES
    (f,) = _volatile(lint_prompt(text), "CB101")
    assert f.frequency is Frequency.MINUTE and f.severity is Severity.ERROR
    text = "Date: {{ now.strftime('%B %d, %Y') }}\n" + RULES
    (f,) = _volatile(lint_prompt(text), "CB101")
    assert f.frequency is Frequency.DAY and f.severity is Severity.WARNING


def test_control_tags_and_plain_names_are_not_read_as_clocks():
    found = list(find_placeholders("{{#if vip}}{{/if}}{{> header}}{{ agent_name | upcase }}"))
    assert [p.name for p in found] == ["agent_name"]
    assert classify_placeholder(found[0]) is None


# -- variables a platform fills itself -----------------------------------------------------


def test_a_platforms_caller_variable_is_caller_data_and_its_clock_a_clock():
    (f,) = _volatile(lint_prompt("Caller's number: {{customer.number}}\n" + RULES), "CB103")
    assert f.severity is Severity.ERROR and f.frequency is Frequency.SESSION
    (f,) = _volatile(lint_prompt("UTC time: {{system__time_utc}}\n" + RULES), "CB101")
    assert f.severity is Severity.ERROR
    # Documented as configuration (or too slow to matter): not guessed from the name.
    assert flagged(lint_prompt("It is {{year}}. Agent {{system__agent_id}}.\n" + RULES)) == []


def test_the_registry_names_a_source_for_every_platform_and_binding_field():
    table = prompt_vars._table_data()
    for entry in table["providers"].values():
        assert entry["source"].startswith("https://")
    assert prompt_vars.platform_variable("customer.email").kind == "caller"  # a prefix
    assert prompt_vars.platform_variable("company_name") is None
    assert prompt_vars.binding_fields()["variableValues"] == "vapi"
    assert "livekit.agents" in prompt_vars.process_per_call_imports()


def test_a_platform_variable_in_a_literal_system_message_is_graded():
    text = "You are Ava. Caller: {{customer.number}}. " + BODY
    code = f"""
    messages = [{{"role": "system", "content": {text!r}}}]
    """
    (f,) = flagged(lint(code), "CB103")
    assert f.severity is Severity.ERROR and "named like" not in f.message
    # Code's own single-brace formatting is not a platform's variable.
    quiet = """
    messages = [{"role": "system", "content": "Reply with the {month} field. " + "x. " * 300}]
    """
    assert flagged(lint(quiet)) == []


# -- variables the tree binds per call -------------------------------------------------


def test_keys_of_a_call_creation_binding_are_read_with_what_they_are_bound_to():
    js = "await client.startSession({ agentId, dynamicVariables: "
    js += "{ persona_name: user.name, tier: 'gold' } })"
    assert bound_variables(js) == {"persona_name": "call", "tier": "literal"}
    workflow = '{"name": "templateContext", "value": "={{\\n{\\n  name: $json.firstName\\n}\\n}}"}'
    assert bound_variables(workflow) == {"name": "call"}
    assert bound_variables("const dynamic = { name: 'x' }") == {}


def test_a_template_whose_variable_is_bound_per_call_in_the_tree_is_graded(tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "agent.md").write_text(
        "You are speaking with {{persona_name}} today.\n" + RULES
    )
    (tmp_path / "start.ts").write_text(
        "export async function start(client, user) {\n"
        "  await client.startSession({ dynamicVariables: { persona_name: user.name } });\n"
        "}\n"
    )
    assert ("CB103", "error") in _lint_tree(tmp_path)["agent.md"]
    # Bound to a fixed value: configuration, even for a name that sounds like a caller's.
    (tmp_path / "prompts" / "agent.md").write_text(
        "You are speaking with {{customer_name}} today.\n" + RULES
    )
    (tmp_path / "start.ts").write_text(
        "await client.startSession({ dynamicVariables: { customer_name: 'Demo' } });\n"
    )
    found = _lint_tree(tmp_path)["agent.md"]
    assert not any(rule == "CB103" and sev != "info" for rule, sev in found)


def test_a_placeholder_code_in_view_fills_is_graded_there_not_guessed_again(tmp_path):
    (tmp_path / "prompt.js").write_text(
        "const prompt = `You help drivers. The current date is {{currentDate}}.\n"
        + RULES
        + "`;\nmodule.exports = prompt;\n"
    )
    (tmp_path / "service.js").write_text(
        'let prompt = require("./prompt");\n'
        "const currentDate = new Date().toLocaleDateString();\n"
        'prompt = prompt.replace("{{currentDate}}", currentDate);\n'
        'const messages = [{ role: "system", content: prompt }];\n'
    )
    assert replaced_placeholders((tmp_path / "service.js").read_text()) == {"currentDate"}
    found = _lint_tree(tmp_path)
    # Filled once at module load in a long-running server: a note, nowhere a warning.
    for name in ("prompt.js", "service.js"):
        assert not any(r.startswith("CB1") and s != "info" for r, s in found.get(name, ()))


# -- settings, YAML configs, excerpts ------------------------------------------------


def test_a_language_setting_is_configuration_and_a_detected_language_is_not():
    code = f"""
    def instructions(caller_language):
        return f"Translate everything into {{caller_language}}. {BODY}"
    """
    assert flagged(lint(code)) == []
    detected = code.replace("caller_language", "detected_language")
    assert flagged(lint(detected), "CB103")


def test_a_yaml_agent_config_is_linted_by_a_folder_scan_whatever_its_name(tmp_path):
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "lookup.yaml").write_text(
        "support:\n  prompt: |\n    You are a support agent.\n    Caller: {caller_number}\n"
        + "".join(f"    {line}\n" for line in RULES.splitlines())
    )
    (tmp_path / "examples" / "settings.yaml").write_text("port: 8080\nname: {caller_number}\n")
    found = _lint_tree(tmp_path)
    assert ("CB103", "error") in found["lookup.yaml"]
    assert found.get("settings.yaml", set()) == set()  # no prompt-named key: nothing read


def test_a_javascript_excerpt_cut_inside_an_object_literal_is_read():
    code = (
        "const config = {\n  model: {\n    messages: [\n      {\n"
        '        role: "system",\n'
        "        content: `You are Kylie. Text reminders to {{customer.number}}.\n" + RULES + "`,\n"
    )
    (f, *_rest) = flagged(lint_js_source(code, "config.js"), "CB103")
    assert f.severity is Severity.ERROR and f.line in (3, 6)  # the messages or the text


def test_a_template_constant_filled_out_of_view_is_found_by_its_fields():
    prompts = f'MESSAGE = """You answer the phone for {{company}}.\nTODAY is {{date}}\n{BODY}"""\n'
    agent = (
        "import datetime\n"
        "class Agent:\n"
        "    def __init__(self, config):\n"
        "        self.template = config.preamble\n"
        "        self.date = datetime.datetime.now().isoformat()\n"
        "    def messages(self):\n"
        "        return self.template.format(company=self.company, date=self.date)\n"
    )
    project = Project({"prompts.py": prompts, "agent.py": agent})
    found = lint(agent, filename="agent.py", project=project)
    assert [f for f in flagged(found, "CB101") if f.line == 7]
    # Two constants holding the fields: which one is meant is not known, nothing is laid out.
    other = prompts.replace("MESSAGE", "OTHER")
    project = Project({"prompts.py": prompts, "more.py": other, "agent.py": agent})
    assert not flagged(lint(agent, filename="agent.py", project=project), "CB101")


# -- n8n workflow exports (after the eighth blind run) --------------------------------------


def _workflow(system_message: str) -> str:
    node = {
        "name": "AI Agent",
        "type": "@n8n/n8n-nodes-langchain.agent",
        "parameters": {
            "text": "={{ $json.text }}",
            "options": {"systemMessage": system_message},
        },
    }
    return json.dumps({"name": "voice bot", "nodes": [node], "connections": {}}, indent=2)


def test_n8n_now_and_today_are_clocks_at_their_documented_granularity():
    (now,) = find_placeholders("It is {{$now}}.")
    assert now.name == "$now"
    assert classify_placeholder(now)[:2] == ("CB101", Frequency.REQUEST)
    (today,) = find_placeholders("Today is {{ $today.weekdayLong }}.")
    assert classify_placeholder(today)[:2] == ("CB101", Frequency.DAY)
    # Another built-in is not judged by the name after it: `$json.caller_name` is n8n's
    # item data, whose content the registry does not know.
    (item,) = find_placeholders("{{ $json.caller_name }}")
    assert classify_placeholder(item) is None
    assert prompt_vars.platform_variable("$now").source.startswith("https://docs.n8n.io/")


def test_an_n8n_workflow_in_a_workflows_folder_is_linted_for_its_agents_system_message(
    tmp_path,
):
    root = tmp_path / "bot"  # the scanned folder's own name counts: keep it neutral
    (root / "workflows").mkdir(parents=True)
    (root / "workflows" / "0001_telegram_voice.json").write_text(
        _workflow("=Current time: {{$now}}\n\n" + RULES)
    )
    (root / "workflows" / "0002_telegram_voice.json").write_text(
        _workflow("=" + RULES + "Current time: {{$now}}")
    )
    (root / "0003_export.json").write_text(_workflow("=Current time: {{$now}}\n\n" + RULES))
    found = _lint_tree(root)
    assert ("CB101", "error") in found["0001_telegram_voice.json"]  # per request, first line
    assert ("CB101", "info") in found["0002_telegram_voice.json"]  # the tail: late
    assert not {s for r, s in found["0002_telegram_voice.json"] if r == "CB101"} - {"info"}
    assert "0003_export.json" not in found  # a JSON name that says nothing is left alone
