"""Evaluation on the real prompts of ../shared/data/prompts, plus a copied fixture."""

from pathlib import Path

from pipecat_fast.bench.evals.lint import evaluate, expected_rule, parse_excerpt
from pipecat_fast.lint import Severity, lint_python_source

FIXTURES = Path(__file__).parents[2] / "lint" / "fixtures"


def test_real_prompts_meet_the_issue_goal(shared_data):
    result = evaluate(shared_data / "prompts")
    positives = [c for c in result.cases if c.early_dynamic]
    negatives = [c for c in result.cases if not c.early_dynamic]
    assert len(result.cases) == 11 and len(positives) == 4
    # Every early-dynamic positive flagged by the right rule...
    assert [c.id for c in positives if not c.right_rule] == []
    # ...and at most one false positive over the negatives.
    assert sum(c.outcome == "FP" for c in negatives) <= 1
    table = result.markdown()
    assert f"TP = {result.count('TP')}" in table and "right rule" in table


def test_day_granularity_positives_are_graded_below_per_session_ones(shared_data):
    cases = {c.id: c for c in evaluate(shared_data / "prompts").cases}

    def worst(case_id):
        return max(f.severity for f in cases[case_id].findings if f.rule == "CB101")

    assert worst("01_pipecat_ultravox_donut") is Severity.ERROR  # per-session timestamp
    assert worst("03_pipecat_keenable_web_search") is Severity.WARNING  # date: per day


def test_copied_fixture_timestamp_in_first_sentence():
    code, _ = parse_excerpt((FIXTURES / "realtime_ultravox_excerpt.txt").read_text())
    (f,) = [f for f in lint_python_source(code) if f.rule == "CB101"]
    assert f.severity is Severity.ERROR and f.token_offset < 30


def test_parse_excerpt_recovers_function_bodies_and_cut_calls():
    body = "    url = input()\n    prompt = f'You are {url}'\n    llm = Service(\n"
    code, first = parse_excerpt(body)
    assert code.startswith("async def _excerpt():") and "Service(" not in code
    assert first == 0
    tail_of_dict = "        x=1,\n    ),\n}\n\nSYSTEM_PROMPT = 'hi'\n"
    code, first = parse_excerpt(tail_of_dict)
    assert code.strip() == "SYSTEM_PROMPT = 'hi'" and first == 5


def test_expected_rule_from_verdict_wording():
    assert expected_rule("timestamp: datetime.now()") == "CB101"
    assert expected_rule("per-session scraped article text") == "CB104"
    assert expected_rule("id: transport client_id") == "CB103"
    assert expected_rule("none") is None
