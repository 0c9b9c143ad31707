"""The guard's pure core: prefix extension checks and the zero-cache-reads warning."""

from hypothesis import given, settings
from hypothesis import strategies as st

from pipecat_fast import tokens
from pipecat_fast.lint.guard_core import PrefixTracker, prefix_parts

SYSTEM = "You are a helpful assistant. " * 10
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]


def first_difference(a: list[int], b: list[int]) -> int:
    """Index of the first token where two encodings differ."""
    return next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)


def convo(n):
    msgs = []
    for i in range(n):
        msgs.append({"role": "user", "content": f"q{i}"})
        if i < n - 1:
            msgs.append({"role": "assistant", "content": f"a{i}"})
    return msgs


def test_growing_conversation_extends_the_prefix():
    t = PrefixTracker()
    for n in range(1, 5):
        assert t.observe_request(TOOLS, SYSTEM, convo(n)) == []
    assert t.warnings == []


def test_resent_turn_with_longer_user_text_still_extends():
    t = PrefixTracker()
    t.observe_request(TOOLS, SYSTEM, [{"role": "user", "content": "book a"}])
    assert t.observe_request(TOOLS, SYSTEM, [{"role": "user", "content": "book a table"}]) == []


def test_system_change_reports_where_the_diff_starts():
    t = PrefixTracker()
    t.observe_request(None, "Current time is 14:03:22. " + SYSTEM, convo(1))
    (w,) = t.observe_request(None, "Current time is 14:03:25. " + SYSTEM, convo(2))
    assert (w.kind, w.cause, w.first) == ("prefix-changed", "system", True)
    assert w.char_offset == len("Current time is 14:03:2")
    # The first token that differs between the two encodings (the one holding "25").
    a, b = (tokens.encode(f"Current time is 14:03:{s}. " + SYSTEM) for s in (22, 25))
    assert w.token_offset == first_difference(a, b)
    (again,) = t.observe_request(None, "Current time is 14:03:29. " + SYSTEM, convo(3))
    assert again.first is False  # logged once, recorded every time
    assert len(t.warnings) == 2


def test_appended_pipecat_addon_is_named():
    addon = "ASYNC TOOLS:\nSome of your tools keep running."
    t = PrefixTracker(known_addons={"the async-tool instructions": addon})
    t.observe_request(TOOLS, SYSTEM, convo(1))
    (w,) = t.observe_request(TOOLS, SYSTEM + "\n\n" + addon, convo(2))
    assert "the async-tool instructions" in w.message and "Pipecat" in w.message
    assert w.char_offset > len(SYSTEM)  # tools and the old system text still match


def test_tool_swap_added_removed_and_reordered():
    other = {"type": "function", "function": {"name": "book", "parameters": {}}}
    t = PrefixTracker()
    t.observe_request(TOOLS, SYSTEM, convo(1))
    (w,) = t.observe_request([other], SYSTEM, convo(2))
    assert w.cause == "tools" and w.detail == {"added": ["book"], "removed": ["get_weather"]}
    assert w.char_offset == len('[{"type": "function", "function": {"name": "')
    t.observe_request([TOOLS[0], other], SYSTEM, convo(3))
    (w,) = t.observe_request([other, TOOLS[0]], SYSTEM, convo(4))
    assert "reordered" in w.message


def test_history_rewrite_is_reported():
    t = PrefixTracker()
    t.observe_request(None, SYSTEM, convo(3))
    rewritten = convo(4)
    rewritten[0] = {"role": "user", "content": "summary of earlier turns"}
    (w,) = t.observe_request(None, SYSTEM, rewritten)
    assert w.cause == "history" and "message 0" in w.message


def test_prefix_parts_leaves_out_the_new_user_turn():
    parts, names = prefix_parts(TOOLS, SYSTEM, convo(2))
    assert [p.kind for p in parts] == ["tools", "system", "message", "message"]
    assert names == ["get_weather"]


def test_zero_cache_reads_warn_after_the_first_turns_above_the_minimum():
    t = PrefixTracker(minimum_tokens=1024, after_turns=2)
    assert t.observe_usage(1500, 0) == []  # first request: always a miss
    assert t.observe_usage(1600, 0) == []  # one eligible miss
    (w,) = t.observe_usage(1700, 0)  # two eligible misses in a row
    assert w.kind == "no-cache-reads" and "1024" in w.message
    assert t.observe_usage(1800, 0) == []  # warned once


def test_no_warning_when_reads_happen_or_below_minimum_or_unreported():
    hits = PrefixTracker(after_turns=2)
    for n in (1500, 1600, 1700, 1800):
        assert hits.observe_usage(n, 1024 if n > 1500 else 0) == []
    small = PrefixTracker(minimum_tokens=1024)
    for n in (300, 400, 500, 600):
        assert small.observe_usage(n, 0) == []
    unknown = PrefixTracker()
    for n in (1500, 1600, 1700):
        assert unknown.observe_usage(n, None) == []


def test_net_of_cache_usage_counts_written_tokens_toward_the_prefix():
    t = PrefixTracker(minimum_tokens=1024, after_turns=2)
    # Anthropic-style: prompt_tokens excludes the 1200 tokens written to cache each time.
    for _ in range(2):
        assert t.observe_usage(20, 0, 1200, net_of_cache=True) == []
    (w,) = t.observe_usage(20, 0, 1200, net_of_cache=True)
    assert "1200 written" in w.message


def test_writes_on_every_request_and_no_read_say_caching_costs_more_than_none():
    t = PrefixTracker(minimum_tokens=1024, after_turns=2)
    found = [t.observe_usage(20, 0, 1500, net_of_cache=True) for _ in range(3)]
    (w,) = found[-1]
    assert "costs more than no caching" in w.message and "separate block" in w.message
    # Zero reads without writes (an OpenAI-style miss) is not called a write cost.
    plain = PrefixTracker(minimum_tokens=1024, after_turns=2)
    (w,) = [x for n in (1500, 1600, 1700) for x in plain.observe_usage(n, 0)]
    assert "costs more" not in w.message


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.text(min_size=1, max_size=20), min_size=2, max_size=6),
    st.data(),
)
def test_property_growth_is_quiet_and_any_rewrite_is_caught(turns, data):
    t = PrefixTracker()
    msgs = []
    for text in turns:
        msgs = msgs + [{"role": "user", "content": text}]
        assert t.observe_request(TOOLS, SYSTEM, msgs) == []
        msgs = msgs + [{"role": "assistant", "content": "ok"}]
    # The last request's prefix is everything before its own (last) user message.
    i = data.draw(st.integers(min_value=0, max_value=len(msgs) - 2))
    edited = list(msgs)
    edited[i] = {**edited[i], "content": edited[i]["content"] + "!"}
    found = t.observe_request(TOOLS, SYSTEM, edited + [{"role": "user", "content": "next"}])
    if i == len(msgs) - 2:  # that user turn was not part of the cached prefix yet
        assert found == []
    else:
        (w,) = found
        assert w.cause == "history" and f"message {i}" in w.message


def test_unchanged_plain_messages_are_not_serialized_again(monkeypatch):
    from pipecat_fast.lint import guard_core

    calls: list[object] = []
    real_json, real_flat = guard_core.serialize, guard_core._flat_text

    def counting(real):
        def wrapped(value):
            calls.append(value)
            return real(value)

        return wrapped

    monkeypatch.setattr(guard_core, "serialize", counting(real_json))
    monkeypatch.setattr(guard_core, "_flat_text", counting(real_flat))
    t = PrefixTracker()
    history = convo(6)
    t.observe_request(None, SYSTEM, history[:3])
    calls.clear()
    assert t.observe_request(None, SYSTEM, history[:5]) == []
    # Only the two messages that are new to the prefix were serialized.
    assert calls == history[2:4]


def test_a_message_edited_in_place_between_requests_is_still_caught():
    t = PrefixTracker()
    history = convo(3)
    t.observe_request(None, SYSTEM, history)
    history[0]["content"] = "summary of earlier turns"  # same dict object, new content
    (w,) = t.observe_request(None, SYSTEM, history + [{"role": "assistant", "content": "a2"}])
    assert w.cause == "history" and "message 0" in w.message


def test_nested_messages_are_compared_by_their_content_every_time():
    call = {"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "f"}}]}
    t = PrefixTracker()
    t.observe_request(None, SYSTEM, [call, {"role": "user", "content": "q"}])
    call["tool_calls"][0]["function"]["name"] = "g"  # nested in-place edit
    (w,) = t.observe_request(None, SYSTEM, [call, {"role": "user", "content": "q"}])
    assert w.cause == "history"


def test_a_prompt_whose_end_changes_every_request_is_tokenized_once(monkeypatch):
    from pipecat_fast.lint import guard_core

    built: list[int] = []

    class CountingTextMap(guard_core.TextMap):
        def __init__(self, text, encoding=tokens.DEFAULT_ENCODING):
            built.append(len(text))
            super().__init__(text, encoding)

    monkeypatch.setattr(guard_core, "TextMap", CountingTextMap)
    t = PrefixTracker()
    big = SYSTEM * 50
    for s in range(20, 26):
        t.observe_request(None, big + f"Current time: 14:03:{s}.", convo(1))
    changed = [w for w in t.warnings if w.kind == "prefix-changed"]
    assert len(changed) == 5 and len(built) == 1
    # Each offset is the first token that differs (checked against the real encodings).
    a, b = (tokens.encode(big + f"Current time: 14:03:{s}.") for s in (24, 25))
    assert changed[-1].token_offset == first_difference(a, b)
