"""Per-session random or per-caller content placed mid-prompt (issue 16).

Shuffled or sampled lists, game rounds and records looked up per caller: everything after
them is uncacheable across sessions, so mid-prompt they warn and early they are errors.
"""

import textwrap

from pipecat_fast.lint import Position, Severity, lint_python_source

BODY = "Keep answers short and read every detail back to the caller. " * 30


def lint(code: str, **kw):
    return lint_python_source(textwrap.dedent(code), **kw)


def only(findings, rule):
    hits = [f for f in findings if f.rule == rule]
    assert len(hits) == 1, [(f.rule, f.severity.label, f.message) for f in findings]
    return hits[0]


def test_a_list_shuffled_in_place_mid_prompt():
    code = f"""
    import random
    QUESTIONS = ["What is the capital of France?", "How many legs has a spider?"]
    async def run_bot():
        questions = list(QUESTIONS)
        random.shuffle(questions)
        system_prompt = "{BODY}Ask these in order:\\n" + "\\n".join(questions) + "{BODY}"
    """
    f = only(lint(code), "CB102")
    assert f.position is Position.MIDDLE and f.severity is Severity.WARNING
    assert "shuffled" in f.message and "line 6" in f.message


def test_a_sample_drawn_at_session_start_early_is_an_error():
    code = f"""
    import random
    TOPICS = ["sports", "films", "music", "history"]
    async def run_bot():
        picked = random.sample(TOPICS, 2)
        system_prompt = f"Tonight's topics: {{', '.join(picked)}}. {BODY}"
    """
    assert only(lint(code), "CB102").severity is Severity.ERROR


def test_a_seeded_generator_is_stable_across_sessions():
    code = f"""
    import random
    TOPICS = ["sports", "films", "music", "history"]
    RNG = random.Random(42)
    async def run_bot():
        picked = RNG.sample(TOPICS, 2)
        system_prompt = f"Tonight's topics: {{', '.join(picked)}}. {BODY}"
    """
    assert [f for f in lint(code) if f.rule == "CB102"] == []


def test_a_game_round_kept_on_the_agent():
    code = f"""
    class QuizAgent:
        def __init__(self):
            self.round_number = 1
        async def on_user_turn(self, context):
            self.round_number += 1
            context.system_prompt = f"{BODY}{BODY} Round {{self.round_number}} of 10. {BODY}"
    """
    f = only(lint(code), "CB103")
    assert f.position is Position.MIDDLE and f.severity is Severity.WARNING
    assert "updated at line 6 in on_user_turn()" in f.message and "per request" in f.message


def test_a_caller_record_looked_up_at_call_start_is_caller_data_not_fetched_text():
    code = f"""
    async def run_bot(crm, caller_phone):
        customer = await crm.get_customer(caller_phone)
        system_prompt = f"{BODY} Customer record: {{customer}}. {BODY}"
    """
    found = lint(code)
    f = only(found, "CB103")
    assert f.severity is Severity.WARNING and [x for x in found if x.rule == "CB104"] == []


def test_a_user_profile_from_a_helper_early_is_an_error():
    code = f"""
    async def run_bot(db, user_id):
        user_profile = db.load(user_id)
        system_prompt = f"You are talking to: {{user_profile}}. {BODY}"
    """
    assert only(lint(code), "CB103").severity is Severity.ERROR


def test_static_lists_and_names_stay_clean():
    code = f"""
    MENU = ["latte", "mocha", "espresso"]
    COMPANY = "Dr. Donut"
    async def run_bot():
        system_prompt = f"You take orders for {{COMPANY}}. Menu: {{', '.join(MENU)}}. {BODY}"
    """
    assert [f for f in lint(code) if f.severity >= Severity.WARNING] == []
