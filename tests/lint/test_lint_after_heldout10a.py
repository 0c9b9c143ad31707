"""A Flows node's role message followed by its task message; a history block ending a text.

Issue 16, after the blind run of heldout10a (Pipecat bots). Small examples of our own; each
quiet case has the case that must stay loud beside it.
"""

import textwrap

from tests.lint.snippets import BODY, flagged, lint

NODE = """
from datetime import datetime
ROLE = "You are the front desk of a clinic. Speak briefly. The current time is {now}."
TASK = "BODY_TEXT"

def orchestrator_node():
    return NodeConfig(
        name="orchestrator",
        role_messages=[{"role": "system", "content": ROLE.format(now=datetime.now())}],
        task_messages=[{"role": "system", "content": TASK}],
        functions=[],
    )
"""


def test_a_clock_ending_the_role_message_costs_the_task_message_after_it():
    assert flagged(lint(textwrap.dedent(NODE).replace("BODY_TEXT", BODY)), "CB101")


def test_the_same_clock_with_a_short_task_message_is_late():
    quiet = textwrap.dedent(NODE).replace("BODY_TEXT", "Ask how you can help.")
    assert not flagged(lint(quiet))


EXTRACT = """
class Extractor:
    async def extract(self, variables, system_prompt):
        vars_description = "\\n".join(f"- {v.name}: {v.prompt}" for v in variables)
        conversation_history = self._build_conversation_history()
        user_prompt = (
            "\\n\\nVariables to extract:\\n"
            f"{vars_description}"
            "\\n\\nConversation history:\\n"
            f"{conversation_history}"
        )
        messages = [
            {"role": "user", "content": user_prompt},
        ]
        context = LLMContext()
        context.set_messages(messages)
        return await self.llm.run_inference(context, system_instruction=system_prompt)

    def _build_conversation_history(self):
        lines = []
        for m in self._context.messages:
            role, text = self._split(m)
            lines.append(f"{role}: {text}")
        return "\\n".join(lines)
"""


def test_a_history_block_that_ends_the_text_is_late():
    assert not flagged(lint(EXTRACT))


def test_the_same_history_block_before_instructions_is_flagged():
    loud = EXTRACT.replace('f"{conversation_history}"', f'f"{{conversation_history}}" "{BODY}"')
    assert flagged(lint(loud), "CB105")


STORY = """
NEXT = \"\\"\\"Here is the story so far:
%s

BODY_TEXT\\"\\"\\"

class Illustrator(FrameProcessor):
    def __init__(self):
        super().__init__()
        self.pages = []

    async def process_frame(self, frame, direction):
        prompt = NEXT % " ".join(self.pages)
        await self.llm.generate(contents=[Content(role="user", parts=[Part(text=prompt)])])
        self.pages.append(frame.text)
"""


def test_a_list_the_object_appends_to_while_it_runs_is_session_content():
    code = textwrap.dedent(STORY).replace('\\"\\"\\"', '"""').replace("BODY_TEXT", BODY)
    assert flagged(lint(code), "CB105")


def test_the_same_list_filled_once_in_init_is_configuration():
    code = (
        textwrap.dedent(STORY)
        .replace('\\"\\"\\"', '"""')
        .replace("BODY_TEXT", BODY)
        .replace("        self.pages.append(frame.text)\n", "")
    )
    assert not flagged(lint(code))
