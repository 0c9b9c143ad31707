"""The linter's evaluation suite: real prompts (../shared/data/prompts), a corpus format of
several excerpts per prompt, and a run that never stops on a bad case."""

import argparse
import json
from pathlib import Path

from pipecat_fast.bench.evals.lint import (
    cut_to_lines,
    evaluate,
    expected_rules,
    lint_case,
    read_excerpts,
    run,
)
from pipecat_fast.lint import Severity, lint_python_source

FIXTURES = Path(__file__).parents[2] / "lint" / "fixtures"


def test_real_prompts_meet_the_issue_goal(shared_data):
    result = evaluate(shared_data / "prompts")
    positives = [c for c in result.cases if c.early_dynamic]
    assert len(result.cases) == 11 and len(positives) == 4
    # Every early-dynamic positive flagged by the right rule, no false positive.
    assert [c.id for c in positives if not (c.flagged and c.right_rule)] == []
    assert result.count("FP") == 0 and result.goal_met
    table = result.markdown()
    assert f"TP = {result.count('TP')}" in table and "right rule" in table


def test_day_granularity_positives_are_graded_below_per_session_ones(shared_data):
    cases = {c.id: c for c in evaluate(shared_data / "prompts").cases}

    def worst(case_id):
        return max(f.severity for _n, f in cases[case_id].findings if f.rule == "CB101")

    assert worst("01_pipecat_ultravox_donut") is Severity.ERROR  # per-session timestamp
    assert worst("03_pipecat_keenable_web_search") is Severity.WARNING  # date: per day


def test_findings_point_at_the_lines_of_the_original_file(shared_data):
    case = next(c for c in evaluate(shared_data / "prompts").cases if c.id.startswith("01_"))
    (f,) = [f for _n, f in case.findings if f.rule == "CB101"]
    assert f.line == 88  # realtime-ultravox.py line 88, the excerpt's 5th line


def test_copied_fixture_timestamp_in_first_sentence():
    code = (FIXTURES / "realtime_ultravox_excerpt.txt").read_text()
    (f,) = [f for f in lint_python_source(code) if f.rule == "CB101"]
    assert f.severity is Severity.ERROR and f.token_offset < 30


CASE = """# our_case

- source: example/voice-bot @ 0000000000000000000000000000000000000000
- path: bot/agent.py (lines 10-14 of 40)
- licence: MIT
- verdict: POSITIVE (early dynamic)

```python
from bot.prompts import TEMPLATE
import datetime
async def run_bot():
    system_prompt = TEMPLATE.format(now=datetime.datetime.now().isoformat())
```

bot/prompts.py (lines 1-2 of 2):

```python
TEMPLATE = "It is {now}. " + "Answer briefly and kindly. " * 60
```
"""


def test_a_case_with_several_excerpts_is_linted_as_one_checkout():
    excerpts = read_excerpts(CASE)
    assert [(e.path, e.first_line) for e in excerpts] == [
        ("bot/agent.py", 10),
        ("bot/prompts.py", 1),
    ]
    found = lint_case(CASE)
    (f,) = [f for name, f in found if f.rule == "CB101" and name == "agent.py"]
    # The template in the other excerpt is laid out: an early per-session timestamp.
    assert f.severity is Severity.ERROR and f.line == 13 and f.path == "bot/agent.py"


def _corpus(tmp_path: Path, cases: dict[str, tuple[str, bool, str]]) -> Path:
    lines = []
    for case_id, (md, positive, dynamic) in cases.items():
        (tmp_path / f"{case_id}.md").write_text(md)
        entry = {"id": case_id, "file": f"{case_id}.md", "early_dynamic": positive}
        lines.append(json.dumps(entry | {"dynamic_content": dynamic}))
    (tmp_path / "index.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_a_corpus_folder_gives_a_confusion_table_and_bad_cases_do_not_stop_it(tmp_path):
    static = CASE.replace("It is {now}. ", "").replace(
        "TEMPLATE.format(now=datetime.datetime.now().isoformat())", "TEMPLATE"
    )
    corpus = _corpus(
        tmp_path,
        {
            "positive": (CASE, True, "timestamp: datetime.now() in the template"),
            "negative": (static, False, "none"),
            "junk": ("```python\ndef (((:\n\x00\n```\n", False, "none"),
        },
    )
    (tmp_path / "missing.md").unlink(missing_ok=True)
    result = evaluate(corpus)
    assert [c.outcome for c in result.cases] == ["TP", "TN", "TN"]
    assert result.right_rule_hits == 1 and result.goal_met
    args = argparse.Namespace(
        prompts_dir=None, corpus=[str(corpus)], provider="openai", summary=True
    )
    assert run(args) == 0


def test_an_unreadable_corpus_is_exit_2_not_a_traceback(tmp_path, capsys):
    args = argparse.Namespace(
        prompts_dir=None, corpus=[str(tmp_path / "nope")], provider="openai", summary=False
    )
    assert run(args) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_expected_rules_from_verdict_wording():
    assert expected_rules("timestamp: datetime.now()") == {"CB101"}
    assert expected_rules("per-session scraped article text") >= {"CB104"}
    assert "CB103" in expected_rules("id: transport client_id")
    assert "CB102" in expected_rules("random.shuffle'd rounds")
    assert expected_rules("none: static prompt") == frozenset()


def test_a_markdown_prompt_quoted_in_a_longer_fence_keeps_its_own_fences():
    md = (
        "# md_case\n\n- path: docs/prompt.md (lines 1-6 of 6)\n\n"
        "````markdown\n# Prompt\n\n```\nYou are {{caller_name}}'s helper.\n```\nBe brief.\n````\n"
    )
    (ex,) = read_excerpts(md)
    assert ex.path == "docs/prompt.md" and ex.language == "markdown"
    # The inner ``` lines are the prompt file's own text, not the end of the excerpt.
    assert ex.text.splitlines() == [
        "# Prompt",
        "",
        "```",
        "You are {{caller_name}}'s helper.",
        "```",
        "Be brief.",
    ]


def test_the_sink_rules_can_be_measured_apart(tmp_path, capsys):
    rules = "Keep every answer short and confirm each detail with the caller. " * 30
    # Built per call (in a function): a clock read at import would be fixed per process.
    known = f'    system_prompt = f"Role: a host. It is {{datetime.datetime.now()}}. {rules}"'
    unknown = f'    bot.configure(f"Role: a host. It is {{datetime.datetime.now()}}. {rules}")'
    case = (
        "# c\n\n- path: bot.py (lines 1-3 of 3)\n\n```python\nimport datetime\n"
        "def on_call(bot):\n{}\n```\n"
    )
    corpus = _corpus(
        tmp_path,
        {
            "known_api": (case.format(known), True, "timestamp"),
            "unknown_api": (case.format(unknown), True, "timestamp"),
        },
    )
    outcomes = {}
    for which in ("all", "fallback-only", "none"):
        args = argparse.Namespace(
            prompts_dir=None, corpus=[str(corpus)], provider=None, summary=False, sink_rules=which
        )
        run(args)
        rows = [ln.split(" | ") for ln in capsys.readouterr().out.splitlines()]
        outcomes[which] = {r[0][2:]: r[3].split()[0] for r in rows if r[0][2:].endswith("_api")}
    # A name the rules know (`system_prompt`), and a call they do not: the fallback finds
    # the second by its text; with it off too, neither is found.
    assert outcomes["all"] == {"known_api": "TP", "unknown_api": "TP"}
    assert outcomes["fallback-only"] == {"known_api": "TP", "unknown_api": "TP"}
    assert outcomes["none"] == {"known_api": "FN", "unknown_api": "FN"}
    assert [c.outcome for c in evaluate(corpus, None).cases] == ["TP", "TP"]  # scoped to run


WHOLE = """# whole_file

- source: example/voice-bot @ 0000000000000000000000000000000000000000
- path: bot/agent.py (lines 1-9 of 9)
- licence: MIT
- verdict: POSITIVE (early dynamic)

```python
import datetime
STATIC = "Answer briefly and kindly. " * 60
def greeting_prompt():
    return "Say hello. " * 60
async def run_bot():
    now = datetime.datetime.now().isoformat()
    system_prompt = f"It is {now}. " + STATIC
    return system_prompt
# end
```
"""


def test_prompt_lines_lint_only_the_manifest_lines_of_a_whole_file(tmp_path):
    # The dynamic prompt is on lines 5-8; lines 3-4 build a static one. Cutting to 3-4
    # must lose the finding that the whole file gives, and keep line numbers.
    (head,) = cut_to_lines(read_excerpts(WHOLE), [3, 4])
    assert head.first_line == 3 and head.text.startswith("def greeting_prompt")
    whole = [f for _n, f in lint_case(WHOLE) if f.rule == "CB101"]
    assert whole and whole[0].line == 7 and whole[0].severity >= Severity.WARNING
    assert not [f for _n, f in lint_case(WHOLE, lines=[3, 4]) if f.rule == "CB101"]
    assert [f.line for _n, f in lint_case(WHOLE, lines=[5, 8]) if f.rule == "CB101"] == [7]
    # A range outside the block, or no range, leaves the excerpts as they are.
    assert cut_to_lines(read_excerpts(WHOLE), [40, 50]) == read_excerpts(WHOLE)
    assert cut_to_lines(read_excerpts(WHOLE), "5-8") == read_excerpts(WHOLE)
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "w.md").write_text(WHOLE)
    entry = {"id": "w", "file": "w.md", "early_dynamic": True, "lines": [3, 4]}
    (corpus / "index.jsonl").write_text(json.dumps(entry | {"dynamic_content": "time"}) + "\n")
    assert [c.outcome for c in evaluate(corpus).cases] == ["TP"]
    assert [c.outcome for c in evaluate(corpus, prompt_lines=True).cases] == ["FN"]
