"""Pipecat Flows nodes reached by a transition, a node's second task message, and a
message inserted counted from the list's end.

Issue 16, after the blind run of heldout25a. Small examples of our own; each quiet case
has the case that must stay loud beside it.
"""

from tests.lint.snippets import flagged, lint, module

FLOWS = """
from datetime import datetime

ROLE = "BODY_TEXT"

def create_initial_node():
    return {
        "role_messages": [{"role": "system", "content": ROLE}],
        "task_messages": [{"role": "system", "content": "Greet the caller. BODY_TEXT"}],
    }

async def create_booking_node():
    today = datetime.now().strftime("%d-%m-%Y")
    return {
        "role_messages": [{"role": "system", "content": ROLE}],
        "task_messages": [{"role": "system", "content": f"Today is {today}. BODY_TEXT"}],
    }

async def on_booking(args, flow_manager):
    await flow_manager.set_node("booking", await create_booking_node())

async def run_bot(transport):
    flow_manager = FlowManager(task=task, llm=llm)
    await flow_manager.initialize()
    await flow_manager.set_node("initial", create_initial_node())
"""


def test_a_flows_node_reached_by_a_transition_appends_its_task_messages():
    assert not flagged(lint(module(FLOWS)))
    # Made the first node, its task message opens the context: the date is early.
    first = FLOWS.replace(
        'set_node("initial", create_initial_node())',
        'set_node("initial", await create_booking_node())',
    )
    assert flagged(lint(module(first)), "CB101")


def test_a_first_node_s_second_task_message_follows_the_first():
    code = """
    ROLE = "BODY_TEXT"

    def create_initial_node(client):
        return {
            "role_messages": [{"role": "system", "content": ROLE}],
            "task_messages": [
                {"role": "system", "content": "Greet the client by name. BODY_TEXT"},
                {"role": "system", "content": f"Client: {client.first_name}. BODY_TEXT"},
            ],
        }

    async def run_bot(transport, client):
        await flow_manager.initialize(create_initial_node(client))
    """
    assert not flagged(lint(module(code)))
    # As the first task message, right after the role messages, it opens the node's text.
    first = code.replace(
        '{"role": "system", "content": "Greet the client by name. BODY_TEXT"},\n', ""
    )
    assert flagged(lint(module(first)), "CB103")


def test_a_message_inserted_before_the_latest_turn_is_a_later_message():
    code = """
    class RagInjector(FrameProcessor):
        async def process_frame(self, frame, direction):
            messages = frame.context.get_messages()
            chunks = await self._rag.retrieve(messages[-1]["content"])
            context_msg = {"role": "system", "content": f"Facts: {chunks}\\nBODY_TEXT"}
            insert_idx = len(messages) - 1
            messages.insert(insert_idx, context_msg)
    """
    assert not flagged(lint(module(code)))
    # At the front of the list it comes before the system prompt.
    front = code.replace(
        "messages.insert(insert_idx, context_msg)", "messages.insert(0, context_msg)"
    )
    assert flagged(lint(module(front)), "CB104")


MEMORY = """
class MemoryProcessor(FrameProcessor):
    def __init__(self, client, memory_position: int = 0):
        super().__init__()
        self._client = client
        self._memory_position = memory_position

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        memories = await self._client.recall(frame.context.get_messages()[-1]["content"])
        self._inject(frame.context, f"Earlier the caller said: {memories}")

    def _inject(self, context, memory_text):
        messages = context.get_messages()
        message = {"role": self._role, "content": memory_text}
        position = max(0, min(self._memory_position, len(messages)))
        messages.insert(position, message)
        context.set_messages(messages)
"""


def test_a_processor_inserting_each_turn_s_message_at_index_zero_is_before_the_prompt():
    found = flagged(lint(module(MEMORY)), "CB104")
    assert found and found[0].severity.name == "ERROR"
    # After the opening message, the system prompt stays a cached prefix.
    after = MEMORY.replace("memory_position: int = 0", "memory_position: int = 1")
    assert not flagged(lint(module(after)), "CB104")


def test_contact_fields_of_a_record_read_for_the_company_are_the_business_s():
    code = """
    def build_system_prompt(ctx: dict) -> str:
        return f'''You are the customer service agent for {ctx['companyName']}.
    Contact email: {ctx.get('contactEmail', 'N/A')}
    BODY_TEXT'''
    """
    assert not flagged(lint(module(code)))
    # A record read only for the caller's fields is the caller's.
    caller = code.replace("{ctx['companyName']}", "the clinic")
    assert flagged(lint(module(caller)), "CB103")
