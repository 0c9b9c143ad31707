"""Retrieved passages appended in a loop, and the agent a call is routed to.

Issue 16, after the blind run of heldout10b (LiveKit agents). Small examples of our own;
each quiet case has the case that must stay loud beside it.
"""

import textwrap

from pipecat_fast.lint.vocab import names_deployment
from tests.lint.snippets import BODY, flagged, lint

RETRIEVAL = """
async def llm_node(self, chat_ctx, retriever, user_query):
    nodes = await retriever.aretrieve(user_query)
    instructions = "Context that might help answer the user's question:"
    for node in nodes:
        node_content = node.get_content()
        instructions += f"\\n\\n{node_content}"
    chat_ctx.items[0].content.append(instructions)
"""


def test_passages_joined_in_a_loop_by_separators_end_the_text():
    # Each pass adds a passage and a blank line: after a passage come only more passages.
    assert not flagged(lint(RETRIEVAL))


def test_a_loop_piece_with_words_of_its_own_is_repeated_static_text():
    loud = RETRIEVAL.replace('f"\\n\\n{node_content}"', f'f"\\n\\n{{node_content}} {BODY}"')
    assert flagged(lint(loud))


ROUTED = """
import json

class Caller(Agent):
    def __init__(self, agent_config, dial_info):
        tools = agent_config.get("tools", [])
        text = "Available tools:\\n"
        for tool in tools:
            text += f"- {tool['name']}: {tool['description']}\\n"
        super().__init__(instructions=text + "BODY_TEXT")

async def entrypoint(ctx):
    dial_info = json.loads(ctx.job.metadata)
    agent_id = dial_info["agent_id"]
    record = db.query(Agent).filter(Agent.id == agent_id).first()
    agent = Caller(agent_config={"tools": record.tools}, dial_info=dial_info)
"""


def test_the_stored_agent_a_call_is_routed_to_is_configuration():
    assert not flagged(lint(textwrap.dedent(ROUTED).replace("BODY_TEXT", BODY)))


def test_a_record_looked_up_by_the_caller_s_number_stays_per_caller():
    loud = ROUTED.replace('dial_info["agent_id"]', 'dial_info["phone_number"]')
    assert flagged(lint(textwrap.dedent(loud).replace("BODY_TEXT", BODY)), "CB103")


def test_which_keys_name_a_deployment():
    assert names_deployment("agent_id") and names_deployment("assistantId")
    assert not names_deployment("user_id") and not names_deployment("agent")
