"""Business details, callbacks, branches, volatile tails and Gemini's text parts.

Issue 16, after the blind run of heldout15a/b. Small examples of our own; each quiet case
has the case that must stay loud beside it.
"""

from tests.lint.snippets import flagged, lint, module


def test_the_business_own_phone_is_not_the_callers():
    code = """
    class OrderLLM:
        def prompt(self):
            return f"Our phone number is {self.restaurant.phone}. BODY_TEXT"
    """
    assert not flagged(lint(module(code)))
    caller = code.replace("self.restaurant.phone", "self.caller.phone")
    assert flagged(lint(module(caller)), "CB103")


def test_a_function_passed_as_a_handler_is_not_its_name():
    code = """
    async def handle_submission_date(args, flow_manager):
        return None

    def node():
        return NodeConfig(
            task_messages=[{"role": "system", "content": "Ask when the claim was sent."}],
            functions=[FlowsFunctionSchema(name="capture", handler=handle_submission_date)],
        )
    """
    assert not flagged(lint(module(code)))
    # A value named like a date in the same place is still one.
    value = code.replace("handler=handle_submission_date", "description=submission_date")
    assert flagged(lint(module(value)), "CB101")


def test_a_prompt_set_in_both_branches_is_laid_out_by_them():
    code = """
    from datetime import datetime

    def build(hotel, base_prompt):
        now = datetime.now().strftime("%H:%M")
        if hotel:
            system_prompt = f"{base_prompt}\\nThe time is {now}."
        else:
            system_prompt = f"{base_prompt}\\nIl est {now}."
        return [{"role": "system", "content": system_prompt}]
    """
    assert not flagged(lint(module(code)))
    early = code.replace('f"{base_prompt}\\nThe time is {now}."', 'f"The time is {now}. BODY_TEXT"')
    assert flagged(lint(module(early)), "CB101")


def test_per_call_values_after_a_value_add_no_fixed_text_after_it():
    code = """
    from datetime import datetime

    NOTE = "Use the caller's record below to greet them and to check the booking. " * 10

    def build(customer_profile):
        now = datetime.now().isoformat()
        return f"BODY_TEXT\\nNow: {now}\\n{NOTE}\\n{customer_profile}"
    """
    assert not flagged(lint(module(code)), "CB101")
    # Fixed instructions after the record are static text after the date too.
    rules = code.replace('{customer_profile}"', '{customer_profile}\\nBODY_TEXT"')
    assert flagged(lint(module(rules)), "CB101")


def test_gemini_text_parts_are_one_system_instruction():
    code = """
    def get_system_prompt(patient_name):
        return [
            "You are Emily, calling on behalf of the clinic.",
            f"You are speaking to {patient_name}.",
            "BODY_TEXT",
        ]

    model = GenerativeModel(model_name="m", system_instruction=get_system_prompt(name))
    """
    assert flagged(lint(module(code)), "CB103")
    late = code.replace(
        '            f"You are speaking to {patient_name}.",\n            "BODY_TEXT",\n',
        '            "BODY_TEXT",\n            f"You are speaking to {patient_name}.",\n',
    )
    assert not flagged(lint(module(late)), "CB103")
