"""Position by share, conversation turns, double-brace engines, defaults and loop elements.

Issue 16, after the sixth blind run, studied on whole files. Small examples of our own; each
positive has the case that must stay quiet beside it.
"""

from pathlib import Path

from pipecat_fast.lint import Position, Severity, lint_prompt
from pipecat_fast.lint.files import lint_path
from pipecat_fast.lint.findings import position_band
from pipecat_fast.lint.placeholders import find_placeholders
from pipecat_fast.lint.vocab import classify_name
from tests.lint.snippets import BODY, flagged, lint

SENTENCE = "Confirm each detail with the caller and keep every answer short.\n"


def test_less_than_a_third_of_the_prompt_after_a_value_is_late():
    # 300 tokens after it is more than one cache increment, but a fifth of the prompt.
    assert position_band(1200, 300) is Position.LATE
    assert position_band(600, 400) is Position.MIDDLE  # two fifths after: still middle
    assert position_band(400, 600) is Position.EARLY
    assert position_band(1200, 100) is Position.LATE  # under one increment, as before


def test_a_caller_placeholder_in_the_last_fifth_of_a_long_template_is_not_a_finding():
    late = SENTENCE * 160 + "The caller is {{caller_name}}.\n" + SENTENCE * 30
    found = [f for f in lint_prompt(late) if f.rule == "CB103"]
    assert found and all(f.severity == Severity.INFO for f in found)
    assert found[0].position is Position.LATE
    early = SENTENCE * 60 + "The caller is {{caller_name}}.\n" + SENTENCE * 60
    assert any(f.rule == "CB103" and f.severity >= Severity.WARNING for f in lint_prompt(early))


def test_a_value_in_the_models_own_turn_is_not_in_the_cached_prefix():
    code = """
    def on_result(conversation, response):
        name = response.function_call.name
        said = response.message
        conversation.append({"role": "assistant", "content": f"Calling {name} for {said}"})
        conversation.append({"role": "system", "content": f"Caller said: {said}. " + RULES})
    """
    found = flagged(lint(code.replace("RULES", repr(BODY))), "CB105")
    assert [f.line for f in found] == [6]  # the system message, not the assistant's turn


def test_single_braces_in_a_jinja_template_are_text(tmp_path: Path):
    body = SENTENCE * 20
    text = (
        "You are {{ company | default('Acme') }}'s assistant.\n"
        'Say "Thanks, {caller_name}." once verified.\n' + body
    )
    assert {p.name for p in find_placeholders(text, double_only=True)} == {"company"}
    assert "caller_name" in {p.name for p in find_placeholders(text)}
    jinja = tmp_path / "prompts" / "agent_prompt.jinja"
    jinja.parent.mkdir()
    jinja.write_text(text, "utf-8")
    assert not [f for f in lint_path(str(jinja)).findings if f.severity >= Severity.WARNING]
    loud = tmp_path / "prompts" / "agent_prompt_caller.jinja"
    loud.write_text("The caller is {{ caller_name }}.\n" + body, "utf-8")
    assert any(f.rule == "CB103" for f in lint_path(str(loud)).findings)
    # The same single-brace field in a plain text template is still a placeholder.
    txt = tmp_path / "prompts" / "agent_prompt.txt"
    txt.write_text("The caller is {caller_name}.\n" + body, "utf-8")
    assert any(f.rule == "CB103" for f in lint_path(str(txt)).findings)


def test_a_default_or_example_value_says_nothing_per_call():
    assert classify_name("user_profile")[0] == "CB103"
    assert classify_name("read_packaged_default_profile") is None
    assert classify_name("example_customer_name") is None
    code = f"""
    def instructions():
        return f"Profile: {{read_default_profile()}}. {BODY}"
    """
    assert not flagged(lint(code))
    assert flagged(lint(code.replace("read_default_profile", "read_user_profile")), "CB103")


def test_a_loop_variable_is_judged_by_what_it_iterates_over():
    code = f"""
    class FaqBot:
        def __init__(self, faqs):
            kb = ""
            for question, answer in faqs.items():
                kb += f"Q: {{question}} A: {{answer}}\\n"
            self.system_prompt = f"Knowledge base: {{kb}} {BODY}"
    """
    assert not flagged(lint(code))
    history = code.replace("faqs.items()", "self.chat_history").replace("question, answer", "m")
    history = history.replace("{question} A: {answer}", "{m}")
    assert flagged(lint(history), "CB105")


def test_a_gemini_system_instruction_built_by_a_prompt_function_is_graded_where_it_goes():
    from pipecat_fast.lint.js_source import lint_js_source

    src = (
        "function makeInstructions(agent, user) {\n"
        f"  return `Merhaba ${{agent.name}}, ${{user.name}} ile konuşuyorsun. {BODY}`;\n"
        "}\n"
        "function Bot(props) {\n"
        "  const user = { name: props.userName };\n"
        "  const text = makeInstructions(agent, user);\n"
        "  const config = { systemInstruction: { parts: [{ text }] } };\n"
        "  setConfig(config);\n"
        "}\n"
    )
    found = [f for f in lint_js_source(src) if f.rule == "CB103"]
    assert found and found[0].severity == Severity.ERROR
    assert "systemInstruction" in found[0].message
    inline = src.replace("  const config = { systemInstruction: { parts: [{ text }] } };\n", "")
    inline = inline.replace("setConfig(config)", "setConfig({ systemInstruction: text })")
    assert any(f.rule == "CB103" and f.severity == Severity.ERROR for f in lint_js_source(inline))
    quiet = src.replace("systemInstruction", "displayOptions")
    assert not [f for f in lint_js_source(quiet) if f.severity >= Severity.WARNING]


def test_the_first_message_of_a_stored_list_is_its_opening_not_the_history():
    code = f"""
    def create_agent(scenario):
        opening = scenario.get("messages", [{{}}])[0].get("content", "")
        return Agent(instructions=opening + {BODY!r})
    """
    assert not flagged(lint(code))
    assert flagged(lint(code.replace("[0]", "[-1]")), "CB105")


def test_a_value_inside_unknown_text_of_a_user_message_is_late():
    code = """
    from judge_prompts import TURN_PROMPT

    async def judge(client, recent_turns):
        messages = [
            system_message(),
            {"role": "user", "content": TURN_PROMPT.format(recent=recent_turns)},
        ]
        return await client.chat.completions.create(model="m", messages=messages)
    """
    found = [f for f in lint(code) if f.rule == "CB105"]
    assert found and all(f.severity == Severity.INFO for f in found)
    assert all(f.position is Position.LATE for f in found)
    system = code.replace('"role": "user"', '"role": "system"', 1)
    assert flagged(lint(system), "CB105")  # in the system message: position unknown, middle
