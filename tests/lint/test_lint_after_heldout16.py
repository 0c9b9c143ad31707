"""Context appends, spoken confirmations, placeholders in unknown text, conditional helpers.

Issue 16, after the blind run of heldout16a/b. Small examples of our own; each quiet case
has the case that must stay loud beside it.
"""

from pipecat_fast.lint import Position
from tests.lint.snippets import flagged, lint, module


def test_a_message_added_to_the_context_comes_after_its_system_prompt():
    code = """
    class Handler:
        def setup(self, memories):
            note = f"Memories: {memories}. BODY_TEXT"
            self.context.add_message({"role": "system", "content": note})
    """
    found = [f for f in lint(module(code)) if f.rule == "CB103"]
    assert found and all(f.position is Position.LATE for f in found) and not flagged(found)
    # The same message as the request's opening system prompt is early.
    opening = """
    def setup(memories):
        return [{"role": "system", "content": f"Memories: {memories}. BODY_TEXT"}]
    """
    assert flagged(lint(module(opening)), "CB103")


def test_a_spoken_confirmation_is_not_a_role_prompt():
    code = """
    def tool_result(result, date):
        return f"You're all set for {date} at {result['time']}. OPENING_TAIL"
    """
    spoken = code.replace("OPENING_TAIL", "Your confirmation is on its way.")
    assert not flagged(lint(module(spoken)))
    # A role prompt opening the same way is a prompt, with the date early in it.
    role = code.replace("You're all set for", "You're the booking assistant for")
    assert flagged(lint(module(role.replace("OPENING_TAIL", "BODY_TEXT"))), "CB101")


def test_a_placeholder_replaced_in_text_of_unknown_layout_keeps_the_value():
    code = """
    class Injector:
        async def process_frame(self, frame):
            chunks = self.rag.retrieve(frame.text, k=3)
            self.messages[0]["content"] = self.messages[0]["content"].replace("[CONTEXT]", chunks)
    """
    (f,) = [f for f in lint(module(code)) if f.rule == "CB104"]
    # Where the placeholder sits is out of view: the middle default, not lost.
    assert f.position is Position.MIDDLE and flagged([f])


def test_a_helper_that_formats_only_when_given_values_is_followed():
    code = """
    from datetime import datetime

    TEXTS = {"en": {"system": "You are kind. The time is {now}. BODY_TEXT"}}

    def get_text(key, language="en"):
        return TEXTS[language].get(key, key)

    def format_text(key, language="en", **kwargs):
        text = get_text(key, language)
        return text.format(**kwargs) if kwargs else text

    def agent(language):
        now = datetime.now().strftime("%H:%M")
        return GeminiLiveClient(system_instruction=format_text("system", language, now=now))
    """
    assert flagged(lint(module(code)), "CB101")
    # Called without the clock, the helper returns one of the table's fixed texts.
    fixed = code.replace(", now=now))", "))")
    assert not flagged(lint(module(fixed)))
