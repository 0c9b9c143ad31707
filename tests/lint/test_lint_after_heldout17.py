"""Tools named in a list, user-turn prompts, helpers inside a later message, constant tails;
people's records and a config's prompt bound to a parameter.

Issue 16, after the blind runs of heldout17a/b and heldout18a/b. Small examples of our own;
each quiet case has the case that must stay loud beside it.
"""

from tests.lint.snippets import flagged, lint, module


def test_a_tool_named_like_a_clock_in_a_tool_list_is_a_tool():
    code = """
    from datetime import datetime
    from tools import get_weather, get_datetime

    class Assistant(Agent):
        def __init__(self):
            super().__init__(instructions="BODY_TEXT", tools=[get_weather, get_datetime])
    """
    assert not flagged(lint(module(code)))
    # A tool list built from the clock changes with it.
    built = code.replace("tools=[get_weather, get_datetime]", "tools=[make_tool(datetime.now())]")
    assert flagged(lint(module(built)), "CB101")


def test_a_user_turn_named_prompt_is_a_message_after_the_system_prompt():
    code = """
    async def coach(client, transcript):
        user_prompt_text = f"Recent transcript: {transcript}\\nBODY_TEXT"
        return await client.generate(contents=[user_prompt_text])
    """
    assert not flagged(lint(module(code)))
    system = code.replace("user_prompt_text", "system_prompt_text")
    assert flagged(lint(module(system)), "CB105")


def test_a_helper_called_inside_a_later_message_builds_later_text():
    code = """
    SYSTEM = "BODY_TEXT"

    def _known(call):
        return f"name={call.guest_name}; when={call.reservation_datetime}"

    def payload(call, user_input):
        return [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Known: {_known(call)}\\nBODY_TEXT"},
        ]
    """
    assert not flagged(lint(module(code)))
    # In the system message the same helper's values are early.
    early = code.replace('"content": SYSTEM}', '"content": f"Known: {call.guest_name}. " + SYSTEM}')
    assert flagged(lint(module(early)))


def test_a_module_constant_appended_after_a_value_counts_by_its_size():
    code = """
    import json

    BASE = "BODY_TEXT"
    TOOLS_NOTE = "NOTE_TEXT"

    def setup(ctx):
        jd_text = json.loads(ctx.room.metadata).get("jd_text", "")
        instructions = BASE
        instructions += f"\\n\\nJOB REQUIREMENTS:\\n{jd_text}"
        instructions += TOOLS_NOTE
        return Agent(instructions=instructions)
    """
    # Over one cache increment of tool notes, but under a third of the prompt.
    # (145 tokens of o200k_base: over the 128 of one increment, under half the base's 361.)
    short = code.replace("NOTE_TEXT", "Call log_turn after every candidate answer. " * 18)
    assert not flagged(lint(module(short)))
    # A constant as long as the base prompt after the job text is half the prompt.
    assert flagged(lint(module(code.replace("NOTE_TEXT", "BODY_TEXT"))))


# -- after heldout18 ----------------------------------------------------------------------


def test_a_candidates_name_and_resume_are_per_caller():
    code = """
    def interview(candidate_name, resume):
        return Agent(instructions=f"Interview {candidate_name}. Resume: {resume}. BODY_TEXT")
    """
    found = [f for f in lint(module(code)) if f.rule == "CB103"]
    assert {f.evidence for f in found} == {"candidate_name", "resume"} and flagged(found)
    # A resume parser is a tool, not the document.
    tool = code.replace("{resume}", "{resume_parser}").replace(", resume)", ", resume_parser)")
    assert {f.evidence for f in lint(module(tool)) if f.rule == "CB103"} == {"candidate_name"}


def test_a_parameter_bound_to_a_configs_prompt_is_not_guessed_from_its_name():
    code = """
    import re
    import yaml

    def _interpolate(text, business):
        return re.sub(r"\\\\{business\\\\}", business, text)

    def load(path):
        raw = yaml.safe_load(open(path).read())
        return {"prompt": _interpolate(raw.get("prompt", ""), raw.get("name", ""))}

    CONFIG = load("dental.yaml")
    messages = [{"role": "system", "content": CONFIG["prompt"] + " BODY_TEXT"}]
    """
    assert [f for f in lint(module(code)) if f.rule == "CB105"] == []
    # Bound to a value that is not the config's prompt, the parameter is judged by its name.
    other = code.replace('raw.get("prompt", "")', 'raw.get("notes", "")')
    assert [f.rule for f in lint(module(other))] == ["CB105"]


# -- after heldout19 ----------------------------------------------------------------------


def test_what_a_flows_handler_got_from_the_model_is_per_call():
    code = """
    def lead_node(description):
        return {
            "role_messages": [{"role": "system", "content": f"Take a lead. Said: {description}"}],
            "task_messages": [{"role": "system", "content": "BODY_TEXT"}],
        }

    async def start_lead(args: dict, flow_manager: FlowManager):
        return None, lead_node(args.get("description", ""))
    """
    assert flagged(lint(module(code)), "CB103")
    # The same helper fed from the node's configuration is not per call.
    config = code.replace('args.get("description", "")', 'flow_manager.state["intro"]')
    config = config.replace("async def start_lead(args: dict,", "async def start_lead(cfg: dict,")
    assert not flagged(lint(module(config)), "CB103")


def test_flowargs_typed_arguments_are_per_call():
    code = """
    def node(args: FlowArgs):
        return {"role_messages": [{"role": "system", "content": f"Hi {args['topic']}. BODY_TEXT"}]}
    """
    assert flagged(lint(module(code)), "CB103")
    assert not flagged(lint(module(code.replace("args: FlowArgs", "args: NodeSettings"))))
