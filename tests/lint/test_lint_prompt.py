"""Text mode: one positive and one negative per rule, regressions, bad input, properties."""

from hypothesis import given, settings
from hypothesis import strategies as st

from pipecat_fast import tokens
from pipecat_fast.lint import Frequency, Position, Severity, lint_prompt
from pipecat_fast.lint.textmap import TextMap

STATIC = (
    "You are a friendly receptionist for a dental practice. Keep answers short, "
    "confirm names and times back to the caller, and never give medical advice. "
)


def rules(findings):
    return [f.rule for f in findings]


def token_at_oracle(text: str, char_offset: int) -> int:
    """Index of the token holding a character: decode tokens one by one until past it."""
    char_offset = max(0, min(char_offset, len(text)))
    target = len(text[:char_offset].encode("utf-8", "surrogatepass"))
    enc = tokens.get_encoding()
    consumed = 0
    ids = tokens.encode(text)
    for i, t in enumerate(ids):
        consumed += len(enc.decode_single_token_bytes(t))
        if consumed > target:
            return i
    return len(ids)


def only(findings, rule):
    hits = [f for f in findings if f.rule == rule]
    assert hits, f"no {rule} in {rules(findings)}"
    return hits[0]


# -- regression cases named in the issue ------------------------------------------------


def test_timestamp_at_start_is_an_error_at_the_start_of_the_prefix():
    text = "Current time is 14:03:22. You are a helpful assistant. " + STATIC * 3
    f = only(lint_prompt(text), "CB101")
    assert f.severity is Severity.ERROR
    assert f.position is Position.EARLY
    assert f.frequency is Frequency.REQUEST
    assert f.char_offset == text.index("14:03:22")
    assert f.token_offset == token_at_oracle(text, f.char_offset)
    assert f.token_offset <= 5
    assert (f.line, f.col) == (1, 17)


def _static_prompt(n_tokens: int) -> str:
    words = []
    i = 0
    while tokens.count_tokens(" ".join(words)) < n_tokens:
        words.append(f"Policy {i}: greet callers warmly and keep replies to one sentence.")
        i += 1
    return " ".join(words)


def test_800_token_static_prefix_for_openai_warns_below_the_1024_minimum():
    text = _static_prompt(800)
    assert 780 <= tokens.count_tokens(text) <= 830
    f = only(lint_prompt(text, provider="openai", model="gpt-4o"), "CB301")
    assert f.severity is Severity.WARNING
    assert "1,024" in f.message
    assert f.extra["static_tokens"] == tokens.count_tokens(text)


def test_static_prefix_above_the_minimum_or_without_floor_is_fine():
    big = _static_prompt(1100)
    assert "CB301" not in rules(lint_prompt(big, provider="openai"))
    small = _static_prompt(800)
    assert "CB301" not in rules(lint_prompt(small, provider="vllm"))
    assert "CB301" not in rules(lint_prompt(small))  # no provider, no floor checked


def test_minimum_counts_tools_sent_before_the_prompt():
    text = _static_prompt(800)
    assert "CB301" not in rules(lint_prompt(text, provider="openai", tools_tokens=400))
    f = only(lint_prompt(text, provider="anthropic", model="claude-haiku-4-5"), "CB301")
    assert "4,096" in f.message


# -- CB101 volatile-clock -----------------------------------------------------------------


def test_clock_late_date_is_info_and_early_date_is_warning():
    early = lint_prompt("Today is Monday, May 13, 2024. " + STATIC * 3)
    f = only(early, "CB101")
    assert (f.severity, f.frequency, f.position) == (
        Severity.WARNING,
        Frequency.DAY,
        Position.EARLY,
    )
    late = only(lint_prompt(STATIC * 3 + "Today is 2024-05-13."), "CB101")
    assert late.severity is Severity.INFO and late.position is Position.LATE


def test_clock_negative_opening_hours_and_years_are_static():
    text = "Open 9:00 to 17:00 on weekdays. Say 'twenty twelve' for the year 2012. " + STATIC
    assert "CB101" not in rules(lint_prompt(text))


def test_clock_date_without_a_cue_is_only_info():
    f = only(lint_prompt("Founded on March 3, 2010. " + STATIC * 3), "CB101")
    assert f.severity is Severity.INFO


# -- CB102 random-value -------------------------------------------------------------------


def test_random_session_uuid_is_flagged():
    text = "Session id: 3f2b8c1e-9a4d-4c6b-8e2f-1a2b3c4d5e6f. " + STATIC * 3
    f = only(lint_prompt(text), "CB102")
    assert f.severity is Severity.ERROR


def test_random_negative_plain_prompt():
    assert "CB102" not in rules(lint_prompt(STATIC * 3))


def test_an_id_cue_is_a_whole_word_not_part_of_one():
    # A commit id under a title that says "function-calling": no id cue, so info at most.
    sha = "acead0507d7de44e216d24533964106ca1d1d044"
    title = f"# function-calling-google\nsource: pipecat @ {sha}\n"
    assert only(lint_prompt(title + STATIC * 3), "CB102").severity is Severity.INFO
    cued = f"call_id {sha}. " + STATIC * 3
    assert only(lint_prompt(cued), "CB102").severity is Severity.ERROR


# -- CB103 caller-data ------------------------------------------------------------------


def test_caller_phone_number_before_the_instructions():
    text = "The caller's number is +1 415 555 2671. " + STATIC * 3
    f = only(lint_prompt(text), "CB103")
    assert f.severity is Severity.ERROR and f.frequency is Frequency.SESSION


def test_caller_negative_example_numbers_in_instructions():
    text = (
        "Phone number recognition: spoken naturally, e.g. 'five five five one two three' "
        "→ Format as '+15551234567'. Always add +1. Your name is Kelly."
    )
    assert "CB103" not in rules(lint_prompt(text))


# -- CB104 fetched-content (text mode: a template placeholder) ----------------------------


def test_fetched_placeholder_in_template_marks_volatile_content():
    text = "You are a study partner. Article:\n{{ARTICLE_CONTENT}}\n" + STATIC * 3
    f = only(lint_prompt(text), "CB104")
    assert f.severity is Severity.ERROR


def test_fetched_negative_static_placeholder_names():
    text = "You are {{AGENT_NAME}} from {{COMPANY}}. " + STATIC
    assert not [f for f in lint_prompt(text) if f.rule.startswith("CB10")]


# -- CB105 history-in-prompt ------------------------------------------------------------


def test_history_pasted_into_the_prompt():
    text = (
        "You are a helpful agent.\nConversation history:\nUser: hi\nAssistant: hello\n"
        "User: my order is late\n" + STATIC * 3
    )
    f = only(lint_prompt(text), "CB105")
    assert f.frequency is Frequency.REQUEST


def test_history_negative_few_shot_example_dialogue():
    text = "Example:\nUser: what time do you open?\nAssistant: We open at nine.\n" + STATIC
    assert "CB105" not in rules(lint_prompt(text))


# -- CB201 unfilled-placeholder (rendered prompts) --------------------------------------


def test_unfilled_placeholder_in_rendered_prompt():
    text = "Current time: {{CURRENT_TIME}}\nYou are a bot."
    f = only(lint_prompt(text, rendered=True), "CB201")
    assert f.severity is Severity.ERROR and f.evidence == "{{CURRENT_TIME}}"


def test_unfilled_placeholder_negative_when_filled():
    assert "CB201" not in rules(lint_prompt("You are a bot. Be brief.", rendered=True))


def test_template_placeholder_for_time_is_volatile_not_unfilled():
    found = lint_prompt("Current time: {{CURRENT_TIME}}\nYou are a bot. " + STATIC * 3)
    assert "CB201" not in rules(found)
    assert only(found, "CB101").severity is Severity.ERROR


# -- any language, empty input ------------------------------------------------------------


def test_japanese_date_is_found_with_correct_offsets():
    text = "今日は2024年5月13日です。" + "あなたは親切な受付係です。短く答えてください。" * 20
    f = only(lint_prompt(text), "CB101")
    assert f.char_offset == 3
    assert f.token_offset == token_at_oracle(text, 3)
    assert f.severity is Severity.WARNING


def test_static_prompts_in_other_scripts_are_clean():
    for text in (
        "أنت موظف استقبال ودود. أجب باختصار وبلطف. " * 10,
        "Вы дружелюбный администратор. Отвечайте кратко. " * 10,
        "אתה פקיד קבלה ידידותי. ענה בקצרה. 🦷 " * 10,
    ):
        assert lint_prompt(text) == []


def test_empty_and_blank_prompts_have_no_findings():
    assert lint_prompt("") == []
    assert lint_prompt(" \n\t ", provider="openai") == []


def test_unknown_provider_is_a_clear_error():
    import pytest

    with pytest.raises(ValueError, match="unknown provider"):
        lint_prompt("hi", provider="nope")


# -- properties ---------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_any_text_lints_with_offsets_inside_the_prompt(text):
    total = tokens.count_tokens(text)
    for f in lint_prompt(text, provider="openai"):
        assert 0 <= (f.char_offset or 0) <= len(text)
        assert 0 <= f.token_offset <= total
        assert f.line >= 1 and f.col >= 1


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200), st.integers(min_value=0, max_value=220))
def test_textmap_token_offsets_match_a_walk_over_the_tokens(text, offset):
    tm = TextMap(text)
    assert tm.token_at(offset) == token_at_oracle(text, offset)
    assert tm.token_count == tokens.count_tokens(text)


def test_a_prompt_that_is_not_text_is_a_clear_error():
    import pytest

    with pytest.raises(TypeError, match="got NoneType"):
        lint_prompt(None)


def test_quoted_times_are_format_examples_not_the_clock():
    text = 'Write times the way they are said. Times: "9:30 a.m." or "2:15 p.m.". ' + STATIC * 3
    assert all(f.severity is Severity.INFO for f in lint_prompt(text) if f.rule == "CB101")
    unquoted = "Current time: 9:30 a.m. " + STATIC * 3
    assert only(lint_prompt(unquoted), "CB101").severity is Severity.ERROR
