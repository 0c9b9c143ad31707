"""A prompt-named text sent as a user message, a join that drops empty pieces, and a
person addressed by name.

Issue 16, after the blind run of heldout24a/b. Small examples of our own; each quiet case
has the case that must stay loud beside it.
"""

from tests.lint.snippets import flagged, lint, module


def test_a_prompt_named_text_sent_as_a_user_message_is_graded_there():
    code = """
    SYSTEM_PROMPT = "BODY_TEXT"

    async def run_bot(runner_args, contact_name):
        llm = GeminiLiveLLMService(api_key="x", system_instruction=SYSTEM_PROMPT)
        context = LLMContext()

        @transport.event_handler("on_client_connected")
        async def on_client_connected(transport, client):
            greeting_prompt = f"Greet {contact_name} by name. BODY_TEXT"
            context.add_message({"role": "user", "content": greeting_prompt})
    """
    assert not flagged(lint(module(code)))
    # Sent as the system instruction, the same text opens the prompt.
    system = code.replace("system_instruction=SYSTEM_PROMPT", "system_instruction=greeting_prompt")
    system = system.replace(
        '            context.add_message({"role": "user", "content": greeting_prompt})\n', ""
    )
    head = '        greeting_prompt = f"Greet {contact_name}. BODY_TEXT"\n'
    system = system.replace(
        "        llm = GeminiLiveLLMService", head + "        llm = GeminiLiveLLMService"
    )
    assert flagged(lint(module(system)), "CB103")


def test_a_join_that_drops_empty_pieces_is_laid_out_by_its_pieces():
    code = """
    BASE = "BODY_TEXT"

    def system_prompt_for(mode, context_summary=""):
        bits = [BASE, MODES.get(mode, ""), f"STATE: {context_summary}"]
        return "\\n".join(b for b in bits if b)

    class Tutor:
        async def start(self):
            system = system_prompt_for(self.mode, context_summary=self.session.history)
            context = LLMContext(messages=[{"role": "system", "content": system}])
    """
    assert not flagged(lint(module(code)))
    # The state first, the static text after it: early.
    front = code.replace(
        'bits = [BASE, MODES.get(mode, ""), f"STATE: {context_summary}"]',
        'bits = [f"STATE: {context_summary}", BASE]',
    )
    assert flagged(lint(module(front)), "CB105")
    # A test that reads something else picks which pieces ship: not laid out.
    picked = code.replace("for b in bits if b)", "for b in bits if mode in b)")
    assert flagged(lint(module(picked)), "CB105")


def test_a_name_the_text_addresses_is_the_person_s():
    code = """
    def get_main_menu_prompt(name: str) -> str:
        return f\"\"\"# Role
    You are Nova, a voice coach helping {name} use the squat rack.
    BODY_TEXT
    \"\"\"
    """
    assert flagged(lint(module(code)), "CB103")
    # The agent's own name ("You are {name}") is configuration.
    agent = code.replace(
        "You are Nova, a voice coach helping {name}",
        "You are {name}, a voice coach helping the user",
    )
    assert not flagged(lint(module(agent)))
