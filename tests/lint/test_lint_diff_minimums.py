"""Two-render mode (CB401) and the provider minimum-prefix table."""

import json

import pytest

from pipecat_fast import tokens
from pipecat_fast.lint import Frequency, Position, Severity, diff_renders, prefix_minimum
from pipecat_fast.providers.llm import load_table, providers

BODY = "Greet the caller, confirm the booking, keep it short. " * 100


def test_diff_reports_first_divergent_token_and_cacheable_prefix():
    a = BODY + "Caller: Bob Smith."
    b = BODY + "Caller: Alice Jones."
    d = diff_renders(a, b, provider="openai")
    common = d.common_prefix_tokens
    ta, tb = tokens.encode(a), tokens.encode(b)
    assert ta[:common] == tb[:common] and ta[common] != tb[common]
    assert d.first_divergent_token == common
    assert d.first_divergent_char == a.index("Bob")
    assert d.cacheable_prefix_tokens == common - common % 128  # OpenAI 128-token steps
    assert d.differs_a.startswith("Bob") and d.differs_b.startswith("Alice")
    f = d.findings[0]
    assert f.rule == "CB401" and f.position is Position.LATE and f.severity is Severity.INFO


def test_diff_early_timestamp_between_turns_is_an_error_and_names_it():
    a = "Current time is 14:03:22. " + BODY
    b = "Current time is 14:03:25. " + BODY
    d = diff_renders(a, b, provider="openai", changes=Frequency.REQUEST)
    assert d.cacheable_prefix_tokens == 0
    assert d.findings[0].severity is Severity.ERROR
    assert "CB101" in [f.rule for f in d.findings]  # what differs is a time of day


def test_diff_identical_renders_are_fully_cacheable():
    d = diff_renders(BODY, BODY, provider="openai")
    assert d.identical and d.findings == []
    n = tokens.count_tokens(BODY)
    assert d.cacheable_prefix_tokens == n - n % 128


def test_diff_reports_placeholders_left_in_a_render():
    d = diff_renders("Now {{CURRENT_TIME}}. " + BODY, "Now {{CURRENT_TIME}}. " + BODY)
    assert [f.rule for f in d.findings] == ["CB201"]


def test_every_table_entry_names_its_source():
    table = load_table()
    for name, entry in table["providers"].items():
        assert entry["source"], name
        for rule in entry.get("models", []):
            assert rule["source"] and rule["tokens"] >= 0, (name, rule)


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("openai", "gpt-4o", 1024),
        ("azure", "gpt-4o-mini", 1024),
        ("anthropic", "claude-opus-4-6", 4096),
        ("anthropic", "claude-3-5-haiku-20241022", 2048),
        ("anthropic", "claude-sonnet-4-5-20250929", 1024),
        ("google", "models/gemini-2.5-flash", 2048),
        ("gemini", "gemini-3.6-flash", 4096),
        ("vllm", None, 0),
    ],
)
def test_minimum_lookup(provider, model, expected):
    assert prefix_minimum(provider, model).tokens == expected


def test_minimum_unknown_provider_and_own_table(tmp_path):
    with pytest.raises(ValueError, match="known: anthropic"):
        prefix_minimum("acme")
    own = {"providers": {"acme": {"default": 300, "source": "our bench", "models": []}}}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(own))
    assert prefix_minimum("acme", table=load_table(path)).tokens == 300
    path.write_text("[]")
    with pytest.raises(ValueError, match="providers"):
        load_table(path)
    assert "openai" in providers()


def test_cacheable_rounding():
    m = prefix_minimum("openai", "gpt-4o")
    assert m.cacheable(1000) == 0 and m.cacheable(1300) == 1280
    assert prefix_minimum("openai", "gpt-5.6-mini").cacheable(1300) == 1300
