"""Python-source mode: prompt-building code, volatile sources, severity by place and rate."""

import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from pipecat_fast.lint import Frequency, Position, Severity, lint_python_source

BODY = "Keep answers short. " * 40


def lint(code: str, **kw):
    return lint_python_source(textwrap.dedent(code), **kw)


def only(findings, rule):
    hits = [f for f in findings if f.rule == rule]
    assert hits, f"no {rule} in {[(f.rule, f.message) for f in findings]}"
    return hits[0]


def test_clock_timestamp_first_in_fstring_is_an_error_per_session():
    code = f'''
    import datetime
    async def run_bot():
        system_prompt = f"""Local time: {{datetime.datetime.now().isoformat()}}
    You are a drive-thru order taker. {BODY}"""
    '''
    f = only(lint(code), "CB101")
    assert f.severity is Severity.ERROR
    assert f.frequency is Frequency.SESSION and f.position is Position.EARLY
    assert f.line == 4 and f.estimated


def test_clock_date_at_the_end_is_info():
    code = f"""
    from datetime import datetime
    class Agent:
        def __init__(self):
            super().__init__(instructions=("You are a travel agent. {BODY}"
                f"Today is {{datetime.now().strftime('%Y-%m-%d %A')}}"))
    """
    f = only(lint(code), "CB101")
    assert f.severity is Severity.INFO and f.position is Position.LATE
    assert f.frequency is Frequency.DAY  # strftime without a time of day


def test_clock_date_today_early_is_a_warning_per_day():
    code = f'''
    from datetime import date
    async def run_bot():
        prompt = f"""You are an assistant.
    Today's date is {{date.today():%A, %B %d, %Y}}.
    {BODY}"""
    '''
    f = only(lint(code), "CB101")
    assert f.severity is Severity.WARNING and f.frequency is Frequency.DAY


def test_clock_computed_at_import_time_is_fixed_per_process():
    code = f"""
    from datetime import datetime
    TODAY = datetime.now().strftime("%Y-%m-%d")
    STARTED = datetime.now().isoformat()
    SYSTEM_PROMPT = f"Date: {{TODAY}}. {BODY}"
    LATE_PROMPT = f"{BODY} Started: {{STARTED}}."
    """
    found = [f for f in lint(code) if f.rule == "CB101"]
    date, started = sorted(found, key=lambda f: f.line)
    # Computed once when the process starts and shared by every call it serves: the
    # prefix holds across calls, a note early or late (it only goes stale).
    assert date.frequency is Frequency.PROCESS and date.severity is Severity.INFO
    assert started.frequency is Frequency.PROCESS and started.severity is Severity.INFO
    assert "computed once at import time" in date.message
    # Where each call gets its own process (LiveKit), the import runs per call: a date
    # changes once a day, a timestamp to the second with every call.
    per_call = lint("from livekit.agents import Agent\n" + textwrap.dedent(code))
    date, started = sorted((f for f in per_call if f.rule == "CB101"), key=lambda f: f.line)
    assert date.frequency is Frequency.DAY and date.severity is Severity.WARNING
    assert started.frequency is Frequency.SESSION and started.severity is Severity.INFO


def test_clock_in_a_per_request_function_changes_per_request():
    code = f"""
    import time
    async def on_user_turn(context):
        context.system_prompt = f"t={{time.time()}} {BODY}"
    """
    assert only(lint(code), "CB101").frequency is Frequency.REQUEST


def test_clock_negative_tool_result_is_not_a_prompt():
    code = """
    from datetime import datetime
    async def get_current_time(params):
        return f"The current time is {datetime.now():%H:%M}."
    SYSTEM_PROMPT = "You are a bot. Call get_current_time when you need the time."
    """
    assert [f for f in lint(code) if f.rule == "CB101"] == []


def test_random_uuid_in_prompt():
    code = f"""
    import uuid
    def build():
        instructions = f"Session {{uuid.uuid4()}}. {BODY}"
    """
    assert only(lint(code), "CB102").severity is Severity.ERROR


def test_random_negative_deterministic_uuid5():
    code = f"""
    import uuid
    NS = uuid.uuid5(uuid.NAMESPACE_DNS, "example.com")
    SYSTEM_PROMPT = f"Tenant {{NS}}. {BODY}"
    """
    assert [f for f in lint(code) if f.rule == "CB102"] == []


def test_caller_data_parameter_first_is_an_error():
    code = f'''
    class Caller:
        def __init__(self, *, caller_phone: str):
            super().__init__(instructions=f"""Caller: {{caller_phone}}. {BODY}""")
    '''
    f = only(lint(code), "CB103")
    assert f.severity is Severity.ERROR and "named like caller data" in f.message


def test_caller_data_in_a_developer_message_is_late():
    code = """
    async def run_bot(transport, client):
        client_id = get_transport_client_id(transport, client)
        context.add_message({"role": "developer", "content": f"Use '{client_id}' as user id."})
    """
    f = only(lint(code), "CB103")
    assert f.severity is Severity.INFO and f.position is Position.LATE


def test_fetched_article_before_instructions_is_an_error():
    code = f'''
    async def main(url, session):
        article_content = await get_article_content(url, session)
        article_content = truncate_content(article_content)
        system_instruction = f"""You are a study partner. Article:
        {{article_content}}
        {BODY}"""
    '''
    f = only(lint(code), "CB104")
    assert f.severity is Severity.ERROR and "line 3" in f.message


def test_fetched_any_awaited_value_counts_as_fetched():
    code = f"""
    async def main(client, doc_id):
        doc = await client.load(doc_id)
        system_instruction = f"Doc: {{doc}}. {BODY}"
    """
    assert "awaited" in only(lint(code), "CB104").message


def test_fetched_a_lookup_with_the_same_arguments_on_every_call_is_configuration():
    # Constants, or the configured agent's selector: the same result for every caller.
    code = f"""
    async def main(db, store, agent_slug):
        rules = await db.get_all_objections(agent_slug=agent_slug)
        blocks = store.search("prompt_blocks", user_id="admin")
        system_instruction = f"Rules: {{rules}} {{blocks}}. {BODY}"
    """
    assert [f for f in lint(code) if f.rule == "CB104"] == []
    per_caller = code.replace("agent_slug=agent_slug", "key=doc_key")
    assert "awaited" in only(lint(per_caller), "CB104").message
    # A clock read with a constant argument still reads the clock.
    clock = f"""
    def main():
        now = get_current_time("UTC")
        system_instruction = f"It is {{now}}. {BODY}"
    """
    assert only(lint(clock), "CB101")


def test_fetched_a_regex_search_is_not_a_search_fetch():
    code = f"""
    import re

    def build(text, when):
        found = re.search(r"## Prompt(.*)", text)
        system_instruction = f"{{found}} {BODY}"
    """
    assert [f for f in lint(code) if f.rule == "CB104"] == []
    fetched = code.replace("re.search(", "web.search(")
    assert only(lint(fetched), "CB104")


def test_fetched_negative_static_knowledge_base_last():
    code = f'''
    def load():
        with open("kb.txt") as f:
            return f.read()
    KB = load()
    RAG_PROMPT = f"""You answer from the knowledge base. {BODY}
    Knowledge base:
    {{KB}}"""
    '''
    assert [f for f in lint(code) if f.severity >= Severity.WARNING] == []


def test_history_json_in_prompt_suffix_is_info_and_prefix_is_error():
    late = f"""
    import json
    async def query(params):
        messages = params.context.get_messages()
        prompt = f"System: {BODY}\\nHistory: {{json.dumps(messages)}}"
    """
    assert only(lint(late), "CB105").severity is Severity.INFO
    early = f"""
    import json
    async def query(params):
        messages = params.context.get_messages()
        prompt = f"History: {{json.dumps(messages)}}\\n{BODY}"
    """
    assert only(lint(early), "CB105").severity is Severity.ERROR


def test_unstable_order_set_join_and_sorted_fix():
    bad = f"""
    TOPICS = {{"billing", "orders", "returns"}}
    SYSTEM_PROMPT = "Topics: " + ", ".join(TOPICS) + ". {BODY}"
    """
    f = only(lint(bad), "CB106")
    assert f.frequency is Frequency.PROCESS
    good = bad.replace('", ".join(TOPICS)', '", ".join(sorted(TOPICS))')
    assert [f for f in lint(good) if f.rule == "CB106"] == []


def test_unstable_order_json_dumps_sort_keys_fixes_dict_order():
    bad = f"""
    import json, glob
    DOCS = {{p: 1 for p in glob.glob("docs/*.md")}}
    SYSTEM_PROMPT = "Docs: " + json.dumps(DOCS) + " {BODY}"
    """
    assert only(lint(bad), "CB106")
    good = bad.replace("json.dumps(DOCS)", "json.dumps(DOCS, sort_keys=True)")
    assert [f for f in lint(good) if f.rule == "CB106"] == []


def test_tool_list_built_from_a_set_is_reported():
    code = """
    ALL = {weather_tool, order_tool}
    context = LLMContext(tools=list(ALL))
    """
    f = only(lint(code), "CB106")
    assert f.position is Position.EARLY


def test_tool_swap_per_flows_node_and_single_node_negative():
    swap = """
    def a():
        return NodeConfig(name="a", task_messages=[], functions=[choose_pizza])
    def b():
        return NodeConfig(name="b", task_messages=[], functions=[select_order])
    """
    assert only(lint(swap), "CB107").severity is Severity.INFO
    single = """
    def a():
        return NodeConfig(name="a", task_messages=[], functions=[choose_pizza])
    """
    assert [f for f in lint(single) if f.rule == "CB107"] == []


def test_unfilled_placeholder_replace_chain_with_wrong_name():
    code = """
    TEMPLATE = "Now: {{CURRENT_TIME}}. You are a bot."
    def build(now):
        system_prompt = TEMPLATE.replace("{{CURRENT_DATE}}", now)
    """
    f = only(lint(code), "CB201")
    assert f.severity is Severity.ERROR
    assert "{{CURRENT_TIME}}" in f.message and "{{CURRENT_DATE}}" in f.message


def test_unfilled_placeholder_negative_when_the_chain_fills_it():
    code = """
    TEMPLATE = "You are a bot. Now: {{CURRENT_TIME}}."
    def build(now):
        system_prompt = TEMPLATE.replace("{{CURRENT_TIME}}", now)
    """
    assert [f for f in lint(code) if f.rule == "CB201"] == []


def test_unfilled_fstring_escape_and_format_and_template():
    escaped = """
    def build(now):
        system_prompt = f"Now: {{CURRENT_TIME}}. Bot.".replace("{{CURRENT_TIME}}", now)
    """
    assert only(lint(escaped), "CB201")  # the f-string renders {CURRENT_TIME}
    missing_key = """
    T = "Hello {name}, today is {date}."
    prompt = T.format(name="Ann")
    """
    assert "KeyError" in only(lint(missing_key), "CB201").message
    template = """
    from string import Template
    prompt = Template("Caller $caller at $time").safe_substitute(caller="x")
    """
    assert "literally" in only(lint(template), "CB201").message


def test_format_fills_template_and_keeps_position():
    code = f'''
    from datetime import datetime
    PROMPT_TEMPLATE = """You are a helpful agent. {BODY}
    Current date: {{current_date}}"""
    def make():
        prompt = PROMPT_TEMPLATE.format(current_date=datetime.now().strftime("%A"))
    '''
    f = only(lint(code), "CB101")
    assert f.position is Position.LATE and f.severity is Severity.INFO


def test_template_from_another_file_is_graded_middle():
    code = """
    from datetime import datetime
    from templates import PROMPT_TEMPLATE
    def make():
        prompt = PROMPT_TEMPLATE.format(current_date=datetime.now().strftime("%A, %B %d"))
    """
    f = only(lint(code), "CB101")
    assert f.position is Position.MIDDLE and f.severity is Severity.WARNING
    assert "position unknown" in f.message


def test_prefix_below_minimum_in_source_and_syntax_errors():
    code = 'SYSTEM_PROMPT = "You are a bot."\n'
    assert only(lint(code, provider="openai"), "CB301").severity is Severity.WARNING
    assert [f for f in lint(code) if f.rule == "CB301"] == []
    bad = lint_python_source("def f(:\n  pass\n")
    assert [f.rule for f in bad] == ["CB901"] and bad[0].line == 1


def test_null_bytes_and_deep_nesting_do_not_crash():
    assert [f.rule for f in lint_python_source("a = 1\x00\n")] == ["CB901"]
    deep = "x = " + "(" * 300 + "1" + ")" * 300 + "\n"
    assert all(f.rule == "CB901" for f in lint_python_source(deep))


def test_columns_count_code_points_not_bytes():
    code = "import uuid\n" + 'prompt = f"éé {uuid.uuid4()} ' + "word " * 200 + '"\n'
    f = only(lint_python_source(code), "CB102")
    assert (f.line, f.col) == (2, 16)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
def test_property_any_text_as_python_never_raises(source):
    for f in lint_python_source(source, provider="openai"):
        assert f.line >= 1 and f.col >= 1


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=0, max_value=30), st.integers(min_value=0, max_value=30))
def test_property_severity_never_grows_as_the_timestamp_moves_later(before, after):
    def severity(n_before, n_after):
        code = (
            "import time\ndef build():\n"
            f'    system_prompt = f"{"Rule. " * n_before}{{time.time()}}{" Rule." * n_after}"\n'
        )
        return [f for f in lint_python_source(code) if f.rule == "CB101"][0].severity

    assert severity(before, after) >= severity(before + 40, after)


def test_percent_format_and_join_are_laid_out():
    pct = f"""
    from datetime import datetime
    def build():
        system_prompt = "Now %s. You are a bot. {BODY}" % datetime.now()
    """
    assert only(lint(pct), "CB101").position is Position.EARLY
    joined = f"""
    from datetime import datetime
    def build():
        instructions = " ".join(["You are a bot. {BODY}", f"Today is {{datetime.now():%A}}."])
    """
    f = only(lint(joined), "CB101")
    assert f.position is Position.LATE and f.frequency is Frequency.DAY


def test_history_sent_as_messages_before_the_new_turn_is_the_fix_not_a_finding():
    code = """
    def provisional(context, user_text):
        turn = {"role": "user", "content": user_text}
        return LLMContext(messages=[*context.get_messages(), turn])
    """
    assert [f for f in lint(code) if f.severity >= Severity.WARNING] == []
