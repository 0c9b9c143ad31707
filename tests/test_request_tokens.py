import time

from hypothesis import given
from hypothesis import strategies as st

from pipecat_fast.request_tokens import (
    END,
    SEPARATOR,
    START,
    chat_tokens,
    content_text,
    count_chat_tokens,
    tools_text,
)
from pipecat_fast.tokens import count_tokens


def test_openai_api_reference_example_counts_19():
    # OpenAI's API reference shows this request answered with "prompt_tokens": 19.
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello!"},
    ]
    assert count_chat_tokens(messages) == 19


def test_the_documented_framing_by_hand():
    # 3 framing tokens + role + content per message (+1 and the name for a named one),
    # and 3 tokens that open the reply (OpenAI Cookbook, "How to count tokens with tiktoken").
    messages = [
        {"role": "user", "content": "book me in"},
        {"role": "user", "name": "maria", "content": "tuesday"},
    ]
    first = 3 + count_tokens("user") + count_tokens("book me in")
    named = 3 + count_tokens("user") + 1 + count_tokens("maria") + count_tokens("tuesday")
    assert count_chat_tokens(messages) == first + named + 3
    assert chat_tokens(messages)[0] == START
    assert chat_tokens([{"role": "user", "content": "x"}]).count(END) == 1


def test_content_parts_and_tool_calls_are_read():
    assert content_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == "ab"
    assert content_text(None) == ""
    image = {"type": "image_url", "image_url": {"url": "data:..."}}
    assert "image_url" in content_text([image])
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]}
    assert count_chat_tokens([call]) > count_chat_tokens([{"role": "assistant", "content": ""}])


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "check_availability",
            "description": "List open slots.",
            "parameters": {
                "type": "object",
                "properties": {
                    "visit_type": {
                        "type": "string",
                        "enum": ["cleaning", "filling"],
                        "description": "What for.",
                    },
                    "days": {"type": "array", "items": {"type": "integer"}},
                    "office": {"type": "string"},
                },
                "required": ["visit_type"],
            },
        },
    },
    {"type": "function", "function": {"name": "get_time", "description": "Now."}},
]


def test_tools_are_read_as_a_functions_namespace():
    text = tools_text(TOOLS)
    assert text.startswith("namespace functions {")
    assert "// List open slots.\ntype check_availability = (_: {" in text
    assert 'visit_type: "cleaning" | "filling",' in text
    assert "days?: number[]," in text and "office?: string," in text
    assert "type get_time = () => any;" in text
    # The namespace is shorter than the JSON schema the request carries.
    import json

    assert count_tokens(text) < count_tokens(json.dumps(TOOLS))


def test_tools_come_first_so_changing_them_changes_everything_after():
    messages = [{"role": "user", "content": "hi"}]
    with_tools = chat_tokens(messages, TOOLS)
    assert with_tools[0] == START and with_tools.index(SEPARATOR) < 4
    assert with_tools[-len(chat_tokens(messages)) :] == chat_tokens(messages)


def test_a_separate_system_is_counted_like_a_system_message():
    messages = [{"role": "user", "content": "hi"}]
    system = [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    assert count_chat_tokens(messages, system=system) == count_chat_tokens(
        [{"role": "system", "content": "Be brief."}, *messages]
    )


def test_a_huge_prompt_is_cut_short_at_the_limit():
    huge = [{"role": "user", "content": "word " * 2_000_000}]
    started = time.perf_counter()
    tokens = chat_tokens(huge, limit=1000)
    assert 1000 < len(tokens) < 300_000
    assert time.perf_counter() - started < 5.0


words = st.text(alphabet="abc .,", max_size=30)
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system"]), "content": words}
)


@given(st.lists(message, max_size=6), st.lists(message, min_size=1, max_size=3))
def test_a_longer_conversation_starts_with_the_shorter_ones_tokens(history, more):
    # What a prefix cache relies on: the shorter prompt (without its reply priming) is a
    # prefix of the longer one.
    short = chat_tokens(history)[:-3]
    assert chat_tokens(history + more)[: len(short)] == short
