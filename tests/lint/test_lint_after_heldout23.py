"""A state dict's empty slots, inserted later messages, `.format` escapes, templates nobody
uses, and prompt pieces only ever used as another prompt's tail.

Issue 16, after the blind run of heldout23a/b. Small examples of our own; each quiet case
has the case that must stay loud beside it.
"""

from pathlib import Path

from pipecat_fast.lint.files import iter_paths, lint_path
from pipecat_fast.lint.project import Project
from tests.lint.snippets import flagged, lint, module


def _tree(tmp_path, files: dict[str, str]) -> list:
    """Lint a small tree of modules as one project; every module's findings."""
    for name, text in files.items():
        path = Path(tmp_path) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(module(text), "utf-8")
    paths = list(iter_paths([str(tmp_path)]))
    project = Project.from_paths(paths, roots=[str(tmp_path)])
    return [f for p in paths for f in lint_path(p, project=project).findings]


def test_a_state_dict_slot_set_to_none_is_filled_per_call_not_the_text_none():
    code = """
    from datetime import datetime

    async def run_bot(transport):
        call_state = {"customer_name": None}
        system_instruction = (
            f"Known customer: {call_state['customer_name']}. "
            "BODY_TEXT"
        )
        llm = GoogleLLMService(api_key="x", system_instruction=system_instruction)
    """
    assert flagged(lint(module(code)), "CB103")
    # A slot holding text is that text: nothing per call.
    fixed = code.replace('{"customer_name": None}', '{"customer_name": "the owner"}')
    assert not flagged(lint(module(fixed)))


def test_a_message_inserted_after_the_opening_one_is_a_later_message():
    code = """
    from config import messages

    async def run_bot(transport, customer_name):
        context = LLMContext(messages)
        context.messages.insert(1, {
            "role": "system",
            "content": f"The customer's name is {customer_name}. BODY_TEXT",
        })
    """
    assert not flagged(lint(module(code)))
    # Inserted at the front, it opens the context: the name is early.
    first = code.replace("insert(1,", "insert(0,")
    assert flagged(lint(module(first)), "CB103")


def test_double_braces_a_format_call_leaves_are_text_not_slots(tmp_path):
    prompts = '''
    CALLER_PROMPT = """You are calling a recruiter.
    Open with: "Hi, is this {{contact_name}}?"
    BODY_TEXT
    Proposal: {proposal}
    """
    '''
    caller = """
    from .prompts import CALLER_PROMPT

    async def phone_call(proposal):
        system_prompt = CALLER_PROMPT.format(proposal=proposal)
        return await make_call(system_prompt=system_prompt)
    """
    files = {"svc/__init__.py": "", "svc/prompts.py": prompts, "svc/caller.py": caller}
    assert not flagged(_tree(tmp_path / "a", files))
    # A single-brace field the call does fill early is still graded where it is filled.
    early = prompts.replace('Open with: "Hi, is this {{contact_name}}?"', "Lead: {lead_name}")
    early_caller = caller.replace("format(proposal=proposal)", "format(proposal=proposal, **lead)")
    found = flagged(
        _tree(tmp_path / "b", {**files, "svc/prompts.py": early, "svc/caller.py": early_caller})
    )
    assert any(f.rule == "CB103" for f in found)


def test_a_template_the_tree_imports_around_and_never_uses_is_not_graded(tmp_path):
    prompts = '''
    WELCOME_PROMPT = """You are the hotel's receptionist. BODY_TEXT"""

    BOOKING_CONFIRMATION_PROMPT = """You are confirming a booking.
    Guest: {guest_name}
    BODY_TEXT
    """
    '''
    agent = """
    from prompts import WELCOME_PROMPT

    class Receptionist(Agent):
        def __init__(self):
            super().__init__(instructions=WELCOME_PROMPT)
    """
    assert not flagged(_tree(tmp_path / "a", {"prompts.py": prompts, "agent.py": agent}))
    # Imported too, it is a template filled somewhere: its placeholder is graded.
    used = agent.replace(
        "import WELCOME_PROMPT", "import WELCOME_PROMPT, BOOKING_CONFIRMATION_PROMPT"
    )
    assert flagged(_tree(tmp_path / "b", {"prompts.py": prompts, "agent.py": used}), "CB103")


def test_a_prompt_piece_only_used_after_other_text_is_graded_where_it_is_used():
    code = """
    from datetime import datetime

    TEMPLATE = "BODY_TEXT"

    async def entrypoint(ctx, user_id):
        doctors = await get_doctors(user_id)
        doctor_prompt = f"# Doctors for {user_id}: {doctors}\\nUse only these names."
        agent_instruction = TEMPLATE + doctor_prompt
        session = AgentSession(instructions=agent_instruction)
    """
    assert not flagged(lint(module(code)))
    # Put in front of the static text, the same piece is early.
    front = code.replace("TEMPLATE + doctor_prompt", "doctor_prompt + TEMPLATE")
    assert flagged(lint(module(front)), "CB103")


def test_a_module_linted_without_a_path_in_a_project_is_still_linted():
    # (`lint_python_source(text, project=...)` with no filename: the unused-template check
    # has no module to look for and stays out of the way.)
    from pipecat_fast.lint.python_source import lint_python_source

    code = 'SYSTEM_PROMPT = """You are the receptionist.\nGuest: {guest_name}\n""" + "BODY_TEXT"\n'
    assert flagged(lint_python_source(module(code), project=Project()), "CB103")


def test_a_name_only_passed_to_a_tool_factory_binds_its_handler_not_the_schema():
    code = """
    async def create_pipeline(transport, call_uuid: str = ""):
        tools = [create_transfer_tool(call_uuid=call_uuid, queue="support")]
        context = LLMContext(tools=tools)

        async def on_dtmf():
            tools = context.tools
            return tools
    """
    assert not flagged(lint(module(code)))
    # Written into a tool's description, the same id changes the list.
    schema = code.replace(
        'create_transfer_tool(call_uuid=call_uuid, queue="support")',
        '{"name": "transfer", "description": f"Transfer call {call_uuid}"}',
    )
    assert flagged(lint(module(schema)))


def test_an_argument_of_a_bot_started_per_room_is_that_session_s():
    code = """
    import argparse

    async def main(room_url, token, topic):
        system_instruction = f"You are a tutor for {topic}. BODY_TEXT"
        llm = GeminiLiveLLMService(api_key="x", system_instruction=system_instruction)

    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("-u", "--room-url", required=True)
        parser.add_argument("-t", "--token", required=True)
        parser.add_argument("--topic", default="")
        args = parser.parse_args()
        asyncio.run(main(args.room_url, args.token, args.topic))
    """
    assert flagged(lint(module(code)), "CB103")
    # A process not started for one room: its options configure the deployment.
    served = code.replace('"-u", "--room-url"', '"-p", "--port"')
    assert not flagged(lint(module(served)))
    # A menu of a few fixed values is one prompt per choice.
    menu = code.replace('"--topic", default=""', '"--topic", choices=["math", "art"]')
    assert not flagged(lint(module(menu)))


def test_a_template_held_under_no_name_in_a_tree_is_still_graded(tmp_path):
    # (The unused-template check needs a name; a template found by its text alone has none.)
    topic = '''
    GUIDE = {
        "body": """You are a phone agent.
    The time now is {{current_time}}.
    BODY_TEXT
    """,
    }
    '''
    found = _tree(tmp_path, {"topics/common.py": topic, "topics/__init__.py": ""})
    assert not [f for f in found if f.rule == "CB901"]
    assert flagged(found, "CB101")
