"""The ``pipecat-fast lint`` command: exit codes, output formats, bad input."""

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipecat_fast.cli import main as router_main
from pipecat_fast.lint import cli

EARLY = "Current time is 14:03:22. You are a helpful assistant for Acme Dental.\n"
CLEAN = "You are a helpful assistant for Acme Dental. Keep answers short.\n"


def run(argv, stdin=None):
    import argparse

    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    args = parser.parse_args(argv)
    if stdin is not None:
        import sys

        old = sys.stdin
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()))
        try:
            code = cli.run(args, out=out, err=err)
        finally:
            sys.stdin = old
    else:
        code = cli.run(args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def files(tmp_path):
    folder = tmp_path / "prompts"
    folder.mkdir()
    (folder / "early.txt").write_text(EARLY)
    (folder / "clean.txt").write_text(CLEAN)
    return folder


def test_folder_scan_takes_python_and_prompt_named_files_only(tmp_path):
    (tmp_path / "README.md").write_text(EARLY)
    (tmp_path / "tsconfig.json").write_text("{// comments\n}")
    (tmp_path / "bot.py").write_text("x = 1\n")
    (tmp_path / "system_prompt.txt").write_text(EARLY)
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "greeting.md").write_text(CLEAN)
    (tmp_path / "tools.json").write_text("[]")
    doc = json.loads(run([str(tmp_path), "--format", "json"])[1])
    picked = sorted(f["path"][len(str(tmp_path)) + 1 :] for f in doc["files"])
    assert picked == ["agent/greeting.md", "bot.py", "system_prompt.txt", "tools.json"]


def test_exit_0_when_clean_and_1_on_errors(files):
    assert run([str(files / "clean.txt")])[0] == cli.EXIT_OK
    code, out, _ = run([str(files / "early.txt")])
    assert code == cli.EXIT_FINDINGS
    assert f"{files / 'early.txt'}:1:17: error CB101 volatile-clock" in out
    assert "fix: " in out


def test_fail_on_levels(files):
    # A late date is info: fails only with --fail-on info.
    (files / "late.txt").write_text(CLEAN * 5 + "Today is 2024-05-13.\n")
    assert run([str(files / "late.txt")])[0] == cli.EXIT_OK
    assert run([str(files / "late.txt"), "--fail-on", "info"])[0] == cli.EXIT_FINDINGS
    assert run([str(files / "early.txt"), "--fail-on", "never"])[0] == cli.EXIT_OK
    assert run([str(files / "clean.txt"), "--provider", "openai"])[0] == cli.EXIT_OK
    warn = run([str(files / "clean.txt"), "--provider", "openai", "--fail-on", "warning"])
    assert warn[0] == cli.EXIT_FINDINGS and "CB301" in warn[1]


def test_exit_2_on_usage_errors(files):
    code, _, err = run([str(files / "missing.txt")])
    assert code == cli.EXIT_USAGE and "no such file" in err
    code, _, err = run(["--diff", str(files / "missing.txt"), str(files / "clean.txt")])
    assert code == cli.EXIT_USAGE and "no such file" in err
    code, _, err = run([str(files / "clean.txt"), "--provider", "acme"])
    assert code == cli.EXIT_USAGE and "unknown provider" in err
    assert run([])[0] == cli.EXIT_USAGE


def test_exit_3_when_an_input_cannot_be_linted_and_others_still_are(files):
    (files / "blob.txt").write_bytes(b"\x00\x01\x02binary")
    (files / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (files / "broken.py").write_text("def f(:\n")
    code, out, _ = run([str(files)])
    assert code == cli.EXIT_FINDINGS  # early.txt still linted and failing
    assert "binary file" in out and "undecodable" in out and "does not parse" in out
    code, out, _ = run(
        [str(files / "blob.txt"), str(files / "broken.py"), str(files / "clean.txt")]
    )
    assert code == cli.EXIT_UNLINTED
    assert "3 file(s); 2 could not be linted" in out


def test_deeply_nested_inputs_are_reported_and_the_others_still_linted(files):
    # A prompt concatenated from 400 literals (a recursive walk of the tree runs out of
    # stack): its string literals are still read, with a note. JSON nested 100,000 deep:
    # one unlinted input. Never a traceback.
    (files / "concat.py").write_text("system_prompt = " + " + ".join(['"a"'] * 400) + "\n")
    (files / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    paths = [str(files / name) for name in ("concat.py", "deep.json", "clean.txt")]
    code, out, _ = run(paths)
    assert code == cli.EXIT_UNLINTED
    assert "too deeply to analyse: linted 1 prompt-like string literal" in out
    assert "JSON nested too deeply" in out and "3 file(s); 1 could not be linted" in out
    code, out, _ = run([str(files / "deep.json"), str(files / "early.txt")])
    assert code == cli.EXIT_FINDINGS and "CB101" in out


def test_fifo_is_skipped_not_waited_on(files):
    import os

    os.mkfifo(files / "system_prompt.txt")
    code, out, _ = run([str(files / "system_prompt.txt")])
    assert code == cli.EXIT_UNLINTED and "not a regular file" in out
    code, out, _ = run([str(files), "--format", "json"])  # a folder scan passes over it
    assert "system_prompt.txt" not in out and code == cli.EXIT_FINDINGS


def test_json_format(files):
    code, out, _ = run([str(files), "--format", "json"])
    doc = json.loads(out)
    assert code == 1 and doc["summary"]["error"] == 1
    by_path = {f["path"]: f for f in doc["files"]}
    hit = by_path[str(files / "early.txt")]["findings"][0]
    assert hit["rule"] == "CB101" and hit["severity"] == "error" and hit["token_offset"] == 4
    assert hit["line"] == 1 and hit["col"] == 17 and hit["fix"]


def test_sarif_format(files):
    code, out, _ = run([str(files / "early.txt"), "--format", "sarif"])
    log = json.loads(out)
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-2.1.0.json")
    run0 = log["runs"][0]
    assert run0["columnKind"] == "unicodeCodePoints"
    rule_ids = [r["id"] for r in run0["tool"]["driver"]["rules"]]
    (res,) = run0["results"]
    assert res["ruleId"] == "CB101" and rule_ids[res["ruleIndex"]] == "CB101"
    assert res["level"] == "error"
    loc = res["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"].endswith("early.txt")
    assert loc["region"] == {"startLine": 1, "startColumn": 17}


def test_sarif_lists_unlinted_inputs_as_notifications(files):
    (files / "blob.txt").write_bytes(b"\x00binary")
    log = json.loads(run([str(files / "blob.txt"), "--format", "sarif"])[1])
    notes = log["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert len(notes) == 1 and "binary" in notes[0]["message"]["text"]


def test_stdin_python_json_and_utf16(files):
    assert run(["-"], stdin=EARLY)[0] == cli.EXIT_FINDINGS
    (files / "bot.py").write_text(
        "import datetime\ndef build():\n"
        '    system_prompt = f"Now {datetime.datetime.now()}. ' + "Be brief. " * 50 + '"\n'
    )
    (files / "tools.json").write_text(
        json.dumps([{"name": "lookup", "description": "Example: '+15551234567' → format."}])
    )
    (files / "u16.txt").write_bytes(EARLY.encode("utf-16"))
    code, out, _ = run([str(files / "bot.py"), str(files / "tools.json"), "--format", "json"])
    doc = json.loads(out)
    kinds = {f["path"].rsplit("/", 1)[-1]: f["kind"] for f in doc["files"]}
    assert kinds == {"bot.py": "python", "tools.json": "json"}
    assert code == 1  # a per-session timestamp opens the Python-built prompt
    assert run([str(files / "u16.txt")])[0] == cli.EXIT_FINDINGS


def test_json_request_locates_findings_in_the_file(files):
    req = {
        "tools": [{"type": "function", "function": {"name": "f", "description": "Look up."}}],
        "messages": [{"role": "system", "content": "Today is Monday, May 13, 2024. " + CLEAN * 9}],
    }
    (files / "req.json").write_text(json.dumps(req, indent=2))
    code, out, _ = run([str(files / "req.json"), "--format", "json"])
    f = json.loads(out)["files"][0]["findings"][0]
    assert f["rule"] == "CB101" and (f["line"], f["col"]) == (14, 28)  # the date in "content"
    (files / "bad.json").write_text("{not json")
    assert run([str(files / "bad.json")])[0] == cli.EXIT_UNLINTED


def test_huge_text_file_is_read_bounded_and_reported(files):
    big = files / "big.txt"
    big.write_text(CLEAN * 2000 + EARLY)  # the timestamp sits beyond the first 4 KiB
    code, out, _ = run([str(big), "--max-bytes", "4096", "--format", "json"])
    doc = json.loads(out)
    findings = doc["files"][0]["findings"]
    assert doc["files"][0]["truncated"] is True
    assert [f["rule"] for f in findings] == ["CB901"] and findings[0]["severity"] == "info"
    assert code == cli.EXIT_OK
    (files / "big.py").write_text("x = 1\n" * 2000)
    assert run([str(files / "big.py"), "--max-bytes", "4096"])[0] == cli.EXIT_UNLINTED


def test_diff_mode(files):
    (files / "a.txt").write_text("Current time is 14:03:22. " + CLEAN * 50)
    (files / "b.txt").write_text("Current time is 14:03:25. " + CLEAN * 50)
    code, out, _ = run(["--diff", str(files / "a.txt"), str(files / "b.txt"), "--turns"])
    assert code == cli.EXIT_FINDINGS and "CB401 render-divergence" in out
    code, out, _ = run(["--diff", str(files / "a.txt"), str(files / "a.txt"), "--format", "json"])
    assert code == 0 and json.loads(out)["diff"]["identical"] is True


def test_router_maps_lint_to_this_module(files, capsys):
    assert router_main(["lint", str(files / "early.txt"), "--color", "never"]) == 1
    assert "CB101" in capsys.readouterr().out


def test_real_deepgram_tool_schemas_have_no_volatile_findings(shared_data, tmp_path):
    # FUNCTION_DEFINITIONS from deepgram-devs/flask-agent-function-calling-demo (MIT), as
    # stored in ../shared/data/prompts/tools_deepgram_devs_agent_functions.md: real tool
    # descriptions full of example phone numbers and emails.
    import ast
    import re

    md = (shared_data / "prompts" / "tools_deepgram_devs_agent_functions.md").read_text()
    code = re.search(r"```python\n(.*?)```", md, re.S).group(1)
    tree = ast.parse(code)
    node = next(
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and n.targets[0].id == "FUNCTION_DEFINITIONS"
    )
    (tmp_path / "functions.json").write_text(json.dumps(ast.literal_eval(node), indent=2))
    code, out, _ = run([str(tmp_path / "functions.json"), "--format", "json"])
    findings = json.loads(out)["files"][0]["findings"]
    assert code == 0 and [f for f in findings if f["severity"] != "info"] == []
    assert "+15551234567" in md  # the examples the caller-data rule must not flag


def test_a_folder_is_one_project_templates_resolve_across_files_and_languages(tmp_path):
    app = tmp_path / "app"
    (app / "assets").mkdir(parents=True)
    body = "Keep answers short and read details back. " * 30
    (app / "templates.py").write_text(f'TEMPLATE = "It is {{now}}. {body}"\n')
    (app / "bot.py").write_text(
        "import datetime\nfrom app.templates import TEMPLATE\n"
        "async def run_bot():\n"
        "    system_prompt = TEMPLATE.format(now=datetime.datetime.now().isoformat())\n"
    )
    (app / "agent.ts").write_text(
        "export function build() {\n"
        f"  const instructions = `Now ${{new Date().toISOString()}}. {body}`;\n"
        "  return instructions;\n}\n"
    )
    code, out, _ = run([str(tmp_path), "--format", "json"])
    found = {
        (r["path"].rsplit("/", 1)[-1], f["rule"], f["severity"])
        for r in json.loads(out)["files"]
        for f in r["findings"]
    }
    assert ("bot.py", "CB101", "error") in found  # laid out through templates.py
    assert ("agent.ts", "CB101", "error") in found
    assert code == cli.EXIT_FINDINGS


def test_breakpoints_flag_reports_a_late_clock_in_the_cached_block(files):
    late = files / "late.txt"
    late.write_text("You are a helpful assistant. " * 60 + "Current time is 14:03:22.\n")
    code, out, _ = run([str(late)])
    assert code == cli.EXIT_OK and "CB108" not in out
    code, out, _ = run([str(late), "--breakpoints"])
    assert code == cli.EXIT_FINDINGS and "CB108" in out and "costs more than no caching" in out


@settings(max_examples=25, deadline=None)
@given(
    st.binary(max_size=300),
    st.sampled_from([".py", ".ts", ".js", ".md", ".json", ".yaml", ".jinja", ".txt"]),
)
def test_property_any_bytes_in_any_kind_of_file_give_a_result_not_a_traceback(data, ext):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"prompt{ext}"
        path.write_bytes(data)
        code, out, err = run([str(path), "--provider", "openai"])
    assert code in (cli.EXIT_OK, cli.EXIT_FINDINGS, cli.EXIT_UNLINTED)
    assert "Traceback" not in out + err and "file(s)" in out


def test_an_internal_error_is_a_cb901_line_and_no_traceback_in_the_log(tmp_path, monkeypatch):
    # (Loguru's default sink prints debug lines on the terminal: the linter's own failure
    # must reach the log as one line, with no traceback attached.)
    from loguru import logger

    import pipecat_fast.lint.files as files

    def broken(*_a, **_k):
        raise TypeError("a bug in a rule")

    monkeypatch.setattr(files, "lint_python_source", broken)
    path = tmp_path / "bot.py"
    path.write_text('PROMPT = "You are a helpful assistant."\n', "utf-8")
    records: list = []
    sink = logger.add(records.append, level="DEBUG", format="{message}")
    try:
        code, out, _err = run([str(path)])
    finally:
        logger.remove(sink)
    assert code == cli.EXIT_UNLINTED
    assert "CB901" in out and "TypeError: a bug in a rule" in out
    mine = [r for r in records if "internal error" in r]
    assert mine and all(r.record["exception"] is None for r in mine)
