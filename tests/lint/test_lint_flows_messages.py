"""A Pipecat Flows node's task message is graded as a message, not as a prompt of its own.

Issue 16, session of 2026-12-02: small examples of our own. The task message joins the
context after the role messages (and, on later nodes, the conversation): what precedes it
stays cached, so only the text after a value inside the message is at stake.
"""

import textwrap

from tests.lint.snippets import BODY, flagged, lint

NODE = """
def greeting_node(patient_name):
    return {
        "name": "greeting",
        "role_messages": [{"role": "system", "content": "BODY_TEXT"}],
        "task_messages": [{"role": "system", "content": TASK}],
        "functions": [],
    }
"""


def _node(task: str) -> str:
    return textwrap.dedent(NODE).replace("BODY_TEXT", BODY).replace("TASK", task)


def test_a_name_in_a_short_task_message_is_late():
    assert not flagged(lint(_node('f"Greet {patient_name} and confirm their date of birth."')))


def test_a_name_ahead_of_a_long_task_message_is_early():
    loud = _node(f'f"Greet {{patient_name}}. {BODY}"')
    assert flagged(lint(loud), "CB103")


def test_a_name_at_the_start_of_the_role_message_is_early():
    loud = (
        textwrap.dedent(NODE)
        .replace('"BODY_TEXT"', f'f"You are speaking with {{patient_name}}. {BODY}"')
        .replace("TASK", '"Greet the caller."')
    )
    assert flagged(lint(loud), "CB103")
