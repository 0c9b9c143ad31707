"""Later messages, per-agent lookups, labelled tails and functions with a fallback return.

Issue 16, after the blind run of heldout14a/b (Pipecat community bots; LiveKit and other
Python voice agents). Small examples of our own; each quiet case has the case that must
stay loud beside it.
"""

from pipecat_fast.lint import Position, Severity
from tests.lint.snippets import flagged, lint, module


def test_a_value_at_the_start_of_a_later_user_message_is_late():
    code = """
    def build(caller_name):
        return [
            {"role": "system", "content": "BODY_TEXT"},
            {"role": "user", "content": f"{caller_name} is calling. BODY_TEXT"},
        ]
    """
    found = [f for f in lint(module(code)) if f.rule == "CB103"]
    assert found and all(f.position is Position.LATE for f in found)
    assert not flagged(found)
    # The same value at the start of the system message is early.
    head = code.replace('"content": "BODY_TEXT"}', '"content": f"{caller_name}. BODY_TEXT"}')
    assert flagged(lint(module(head)), "CB103")


def test_a_task_message_of_a_node_without_role_messages_is_late():
    later = """
    def scheduling_node(today):
        return {
            "name": "scheduling",
            "task_messages": [{"role": "system", "content": f"TODAY: {today}. BODY_TEXT"}],
            "functions": [],
        }
    """
    assert not flagged(lint(module(later)))
    # A node that sets the role messages opens the context: its task text is the prompt's.
    first = later.replace(
        '"task_messages"',
        '"role_messages": [{"role": "system", "content": "Hi."}],\n            "task_messages"',
    )
    assert flagged(lint(module(first)), "CB101")


def test_a_system_message_appended_after_the_system_prompt_is_a_later_message():
    code = """
    SYSTEM = "BODY_TEXT"

    def pack(memories, history):
        messages = []
        messages.append({"role": "system", "content": SYSTEM})
        messages.append({"role": "system", "content": f"[MEMORIES]\\n{memories}\\nBODY_TEXT"})
        messages.extend(history)
        return messages
    """
    assert not flagged(lint(module(code)))
    # Appended first, the memories open the request.
    first = code.replace(
        '        messages.append({"role": "system", "content": SYSTEM})\n', ""
    ).replace("\\nBODY_TEXT", '\\n" + SYSTEM + "')
    assert flagged(lint(module(first)), "CB103")


def test_a_later_append_of_a_short_label_and_a_value_keeps_the_first_value_last():
    code = """
    BASE = "BODY_TEXT"

    def system_prompt(state):
        prompt = BASE
        if state.get("member_id"):
            prompt += f"\\nCurrent member: {state['member_id']}"
            if state.get("order_id"):
                prompt += f", order: {state['order_id']}"
        return prompt
    """
    found = lint(module(code))
    assert [f for f in found if f.rule == "CB103"] and not flagged(found)
    # A later append with instructions of its own is static text after the member id.
    rules = code.replace("f\", order: {state['order_id']}\"", '"BODY_TEXT"')
    assert flagged(lint(module(rules)), "CB103")


def test_one_of_a_tables_fixed_texts_picked_per_call_is_not_caller_data():
    code = """
    import json

    TONES = {"warm": "Speak warmly.", "formal": "Speak formally."}

    def instructions(metadata):
        payload = json.loads(metadata)
        tone = payload.get("tone", "")
        return TONES[tone] + " BODY_TEXT"
    """
    assert not flagged(lint(module(code)))
    # The caller's own field in the same place is per-call data.
    own = code.replace("TONES[tone]", 'payload["customer_name"]')
    assert flagged(lint(module(own)), "CB103")


def test_the_agents_prompt_sent_in_the_dispatch_metadata_is_its_configuration():
    code = """
    import json

    def instructions(ctx):
        payload = json.loads(ctx.job.metadata)
        return payload["prompt"] + " BODY_TEXT"
    """
    assert not flagged(lint(module(code)))
    caller = code.replace('payload["prompt"]', 'payload["client_name"]')
    assert flagged(lint(module(caller)), "CB103")


def test_a_function_with_a_short_fallback_return_is_laid_out_by_its_prompt():
    code = """
    TEMPLATE = "BODY_TEXT The current time is {{current_time}}."

    def get_system_prompt(current_time, content):
        if not content:
            return f"You are a helper. The time is {current_time}."
        return TEMPLATE.replace("{{current_time}}", current_time)

    def agent(time_str, content):
        return Agent(instructions=get_system_prompt(time_str, content))
    """
    found = [f for f in lint(module(code)) if f.rule == "CB101"]
    assert found and not flagged(found)
    assert any(f.position is Position.LATE and f.severity is Severity.INFO for f in found)
    # The time at the head of the prompt the function builds is early.
    head = code.replace(
        '"BODY_TEXT The current time is {{current_time}}."',
        '"The current time is {{current_time}}. BODY_TEXT"',
    )
    assert flagged(lint(module(head)), "CB101")
