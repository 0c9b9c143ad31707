"""Fields of one context, the conversation spread into a request, examples in a comprehension.

Issue 16, after the blind run of heldout11b (assistants and agent frameworks). Small
examples of our own; each quiet case has the case that must stay loud beside it.
"""

import textwrap

from tests.lint.snippets import BODY, flagged, lint, module


def test_locals_read_from_one_context_are_fields_of_one_record():
    code = """
    def triage_instructions(context_variables):
        customer_context = context_variables.get("customer_context")
        flight_context = context_variables.get("flight_context")
        return f\"\"\"BODY_TEXT
    The customer context is here: {customer_context}, and flight context: {flight_context}\"\"\"
    agent = Agent(instructions=triage_instructions)
    """
    assert not flagged(lint(module(code)))
    head = code.replace('f"""BODY_TEXT\n', 'f"""').replace(
        '{flight_context}"""', '{flight_context}\nBODY_TEXT"""'
    )
    assert flagged(lint(module(head)), "CB103")


MEMORY = """
from datetime import datetime
PROMPT = \"\"\"You are a friendly chatbot. Get to know the user.
{user_info}

System Time: {time}\"\"\"

async def call_model(state, store, user_id):
    memories = await store.asearch(("memories", user_id), query=str(state.messages[-3:]))
    formatted = "\\n".join(f"[{m.key}]: {m.value}" for m in memories)
    if formatted:
        formatted = f"<memories>\\n{formatted}\\n</memories>"
    sys = PROMPT.format(user_info=formatted, time=datetime.now().isoformat())
    return await llm.ainvoke([{"role": "system", "content": sys}, *state.messages])
"""


def test_memories_then_a_clock_then_the_conversation_cost_nothing_static():
    # After the memories come a label, the clock and the conversation: nothing static.
    assert not flagged(lint(module(MEMORY)))


def test_the_same_memories_ahead_of_static_instructions_are_flagged():
    loud = MEMORY.replace("System Time: {time}", "System Time: {time}\nBODY_TEXT")
    assert flagged(lint(module(loud)))


EXAMPLES = """
from dataclasses import dataclass

@dataclass(frozen=True)
class Message:
    user: str
    text: str = None

    def render(self):
        result = self.user + ":"
        if self.text is not None:
            result += " " + self.text
        return result

@dataclass(frozen=True)
class Prompt:
    header: Message
    examples: list

    def full_render(self):
        return [{"role": "system", "content": self.render_system_prompt()}]

    def render_system_prompt(self):
        return "\\n".join(
            [self.header.render()] + [conversation.render() for conversation in self.examples]
        )
"""


def test_example_conversations_rendered_in_a_comprehension_are_configuration():
    # `conversation` iterates over the configured examples; `result += " " + self.text`
    # builds text, it is not a state the method keeps changing.
    assert not flagged(lint(module(EXAMPLES)))


def test_a_comprehension_over_the_history_is_still_history():
    loud = EXAMPLES.replace(
        "[conversation.render() for conversation in self.examples]",
        '[conversation.render() for conversation in self.chat_history] + ["BODY_TEXT"]',
    )
    assert flagged(lint(module(loud)), "CB105")


ADK_AGENT = """
from google.adk.agents import LlmAgent
from concierge import prompt

root_agent = LlmAgent(name="root", model="gemini-2.0-flash", instruction=prompt.ROOT)
"""


def _adk(tmp_path, text: str, agent: str = ADK_AGENT) -> list:
    from pathlib import Path

    from pipecat_fast.lint.files import iter_paths, lint_path
    from pipecat_fast.lint.project import Project

    pkg = Path(tmp_path) / "concierge"
    pkg.mkdir()
    (pkg / "prompt.py").write_text(f'ROOT = """{text}"""\n', "utf-8")
    (pkg / "agent.py").write_text(textwrap.dedent(agent), "utf-8")
    paths = list(iter_paths([str(tmp_path)]))
    project = Project.from_paths(paths, roots=[str(tmp_path)])
    return [
        f for p in paths if p.endswith("agent.py") for f in lint_path(p, project=project).findings
    ]


def test_adk_fills_an_instruction_s_braces_from_session_state(tmp_path):
    # ADK replaces `{itinerary}` with session.state["itinerary"] before every request.
    found = flagged(_adk(tmp_path, "Current trip:\n{itinerary}\n" + BODY))
    assert found and "{itinerary}" in found[0].message


def test_adk_state_at_the_instruction_s_end_and_app_state_are_not_flagged(tmp_path):
    assert not flagged(_adk(tmp_path, BODY + "\nCurrent trip:\n{itinerary}"))


def test_adk_app_state_is_set_per_deployment(tmp_path):
    assert not flagged(_adk(tmp_path, "Brand: {app:brand_name}\n" + BODY))


def test_the_same_braces_without_adk_are_text(tmp_path):
    plain = ADK_AGENT.replace("from google.adk.agents import LlmAgent\n", "")
    assert not flagged(_adk(tmp_path, "Current trip:\n{itinerary}\n" + BODY, plain))


RUN_CONTEXT = """
from agents import Agent, RunContextWrapper

def seat_instructions(run_context: RunContextWrapper[AirlineContext], agent) -> str:
    ctx = run_context.context
    return f"Confirmation {ctx.confirmation_number}, seat {ctx.seat_number}. BODY_TEXT"

seat_agent = Agent(name="Seats", instructions=seat_instructions)
"""


def test_what_dynamic_instructions_read_off_the_run_context_is_this_run_s_data():
    assert flagged(lint(module(RUN_CONTEXT)), "CB103")


def test_the_same_fields_off_an_untyped_parameter_say_nothing():
    plain = RUN_CONTEXT.replace(": RunContextWrapper[AirlineContext]", "")
    assert not flagged(lint(module(plain)))


def test_a_template_in_a_yaml_config_is_the_string_under_its_key(tmp_path):
    from pathlib import Path

    from pipecat_fast.lint.files import iter_paths, lint_path
    from pipecat_fast.lint.project import Project

    root = Path(tmp_path)
    models = "\n".join(f"  model_{i}: {{max_tokens: {i}}}" for i in range(200))
    (root / "config.yaml").write_text(
        f"models:\n{models}\nsystem_prompt: |\n  Today's date is {{date}}.\n  {BODY}\n",
        "utf-8",
    )
    (root / "bot.py").write_text(
        textwrap.dedent(
            """
            from datetime import datetime
            def messages(config):
                prompt = config.get("system_prompt")
                prompt = prompt.replace("{date}", datetime.now().strftime("%B %d %Y"))
                return [dict(role="system", content=prompt)]
            """
        ),
        "utf-8",
    )
    paths = list(iter_paths([str(root)]))
    project = Project.from_paths(paths, roots=[str(root)])
    found = [
        f for p in paths if p.endswith("bot.py") for f in lint_path(p, project=project).findings
    ]
    # The date opens the prompt: the models listed above it in the file are not its text.
    assert flagged(found, "CB101")


OUTBOUND = """
def fetch_script(agent, data):
    objective = data.get("objective")
    return f\"\"\"You are calling on behalf of {agent}. Deliver this message: {objective}.
BODY_TEXT\"\"\"

def create_call(agent, data):
    number = data["contact_number"]
    script = fetch_script(agent, data)
    return {"customer": {"number": number}, "messages": [{"role": "system", "content": script}]}
"""


def test_a_field_of_a_record_that_holds_the_caller_s_number_is_per_call():
    # `data` carries the contact's number, so its `objective` is this call's too.
    assert flagged(lint(module(OUTBOUND)), "CB103")


def test_the_same_field_of_a_record_without_caller_fields_says_nothing():
    quiet = OUTBOUND.replace('data["contact_number"]', 'data["region"]')
    assert not flagged(lint(module(quiet)))


def test_a_config_that_does_not_parse_or_holds_the_fields_twice_keeps_the_whole_file():
    from pipecat_fast.lint.project import _data_string_with

    nested = "a: " + "[" * 5000 + "]" * 5000 + '\nb: "{x}"'
    assert _data_string_with(nested, {"x"}, "{{{}}}") is None  # too deep: no crash
    assert _data_string_with("a: !!python/object:os.system x", {"x"}, "{{{}}}") is None
    assert _data_string_with('a: "{x} y"\nb: "{x}"', {"x"}, "{{{}}}") is None  # two strings
    assert _data_string_with('p: "Today {x}"', {"x"}, "{{{}}}") == "Today {x}"
