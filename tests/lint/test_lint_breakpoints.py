"""Provider-specific placement: explicit cache breakpoints (issue 16).

Anthropic caches up to a block marked ``cache_control`` (Pipecat's ``enable_prompt_caching``
marks the whole system prompt as one such block). Volatile content inside that block makes
every change a cache write, even at the block's very end; the fix is a separate block after
the breakpoint (../shared/reference/prompt_caching_rules.md).
"""

import json
import textwrap

from pipecat_fast.lint import Position, Severity, lint_json, lint_prompt, lint_python_source

BODY = "Keep answers short and read every detail back to the caller. " * 30


def lint(code: str, **kw):
    return lint_python_source(textwrap.dedent(code), **kw)


def rules(findings):
    return {f.rule: f for f in findings}


PIPECAT_CACHED = f"""
import datetime
from pipecat.services.anthropic.llm import AnthropicLLMService
async def on_user_turn(context):
    system_prompt = f"{BODY} Current time: {{datetime.datetime.now():%H:%M:%S}}."
    llm = AnthropicLLMService(
        api_key="k",
        settings=AnthropicLLMService.Settings(
            system_instruction=system_prompt, enable_prompt_caching=True
        ),
    )
"""


def test_a_timestamp_at_the_end_of_a_pipecat_cached_system_prompt_is_an_error():
    found = rules(lint(PIPECAT_CACHED))
    # As plain placement it is late and fine...
    assert found["CB101"].position is Position.LATE and found["CB101"].severity is Severity.INFO
    # ...but inside the block with the breakpoint every request writes and none reads.
    block = found["CB108"]
    assert block.severity is Severity.ERROR and "costs more than no caching" in block.message
    assert "separate block" in block.fix


def test_without_prompt_caching_the_same_prompt_has_no_breakpoint_finding():
    code = PIPECAT_CACHED.replace("enable_prompt_caching=True", "enable_prompt_caching=False")
    assert "CB108" not in rules(lint(code))


def test_the_volatile_part_in_its_own_block_after_the_breakpoint_is_clean():
    code = f"""
    import datetime
    async def on_user_turn(client, messages):
        return await client.messages.create(
            model="claude-sonnet-4-5",
            system=[
                {{"type": "text", "text": "{BODY}", "cache_control": {{"type": "ephemeral"}}}},
                {{"type": "text", "text": f"Current time: {{datetime.datetime.now():%H:%M}}."}},
            ],
            messages=messages,
        )
    """
    assert "CB108" not in rules(lint(code))
    stamped_block = f'f"{BODY} Now {{datetime.datetime.now():%H:%M}}.", "cache_control"'
    inside = code.replace(f'"{BODY}", "cache_control"', stamped_block)
    assert inside != code
    assert rules(lint(inside))["CB108"].severity is Severity.ERROR


def test_a_per_day_date_in_the_block_is_a_warning_with_its_cost():
    code = PIPECAT_CACHED.replace("%H:%M:%S", "%A %d %B")
    block = rules(lint(code))["CB108"]
    assert block.severity is Severity.WARNING and "1 time a day" in block.message


def test_text_mode_with_breakpoints():
    text = BODY + "Current time is 14:03:22."
    assert "CB108" not in rules(lint_prompt(text))
    block = rules(lint_prompt(text, breakpoint_at=len(text)))["CB108"]
    assert block.severity is Severity.ERROR and block.char_offset == text.index("14:03:22")


def test_anthropic_request_json_marks_the_cached_blocks():
    def request(system):
        return json.dumps({"model": "claude-sonnet-4-5", "system": system, "messages": []})

    cached = {"type": "text", "text": BODY, "cache_control": {"type": "ephemeral"}}
    stamp = {"type": "text", "text": "Current time is 14:03:22."}
    assert "CB108" not in rules(lint_json(request([cached, stamp])))
    stamped = dict(cached, text=BODY + " Current time is 14:03:22.")
    assert rules(lint_json(request([stamped])))["CB108"].severity is Severity.ERROR


REQUEST_CACHED = """
from pipecat.services.anthropic.llm import AnthropicLLMService
from pipecat.processors.aggregators.llm_context import LLMContext
params = AnthropicLLMService.InputParams(enable_prompt_caching=True)
llm = AnthropicLLMService(api_key="k", params=params)
def context(caller_name):
    return LLMContext([SYSTEM, {"role": "user", "content": f"My name is {caller_name}."}])
"""


def test_a_name_in_the_user_message_after_a_cached_system_prompt_is_outside_the_block():
    # Pipecat marks the system prompt (the request's first system message) only.
    quiet = REQUEST_CACHED.replace("SYSTEM", f'{{"role": "system", "content": "{BODY}"}}')
    assert "CB108" not in rules(lint(quiet))
    loud = REQUEST_CACHED.replace(
        "SYSTEM, ", f'{{"role": "system", "content": f"{BODY} Caller: {{caller_name}}."}}, '
    )
    assert rules(lint(loud))["CB108"].severity >= Severity.WARNING


SEPARATE_SYSTEM = f'''
import anthropic
client = anthropic.Anthropic()
SYSTEM = """{BODY}"""
def answer(question):
    return client.messages.create(
        model="m", max_tokens=300, system=SYSTEM,
        messages=[{{"role": "user", "content": f"Q: {{question}}. Answer in one sentence."}}],
    )
'''


def test_a_user_message_beside_a_system_argument_comes_after_the_system_prompt():
    # `system=` is the request's system prompt: the user message follows it.
    assert not [f for f in lint(SEPARATE_SYSTEM) if f.severity >= Severity.WARNING]


def test_the_same_user_message_with_no_system_prompt_is_the_prompt():
    loud = SEPARATE_SYSTEM.replace(" system=SYSTEM,", "").replace("Answer in one sentence.", BODY)
    assert [f for f in lint(loud) if f.rule == "CB105" and f.severity >= Severity.WARNING]
