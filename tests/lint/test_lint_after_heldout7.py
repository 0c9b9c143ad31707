"""Tails of unknown layout, later messages, stored configuration and caller-name cues.

Issue 16, after the seventh blind run (whole files). Small examples of our own; each
quiet case has the case that must stay loud beside it.
"""

import textwrap
from pathlib import Path

from pipecat_fast.lint.files import iter_paths, lint_path
from pipecat_fast.lint.js_source import lint_js_source
from pipecat_fast.lint.project import Project
from pipecat_fast.lint.text_rules import caller_spans
from tests.lint.snippets import BODY, flagged, lint


def _module(code: str) -> str:
    """``code`` dedented, with ``BODY_TEXT`` replaced by the long static instructions."""
    return textwrap.dedent(code).replace("BODY_TEXT", BODY)


def test_a_history_text_at_the_tail_of_a_prompt_is_late_whatever_its_layout():
    tail = """
    class Companion(Agent):
        def __init__(self, template, conversation_history):
            recap = template.format(history=conversation_history)
            super().__init__(instructions=f"BODY_TEXT\\nLAST CHECK-IN:\\n{recap}\\nBe kind.")
    """
    assert not flagged(lint(_module(tail)))
    head = tail.replace(
        'f"BODY_TEXT\\nLAST CHECK-IN:\\n{recap}', 'f"LAST CHECK-IN:\\n{recap}\\nBODY_TEXT'
    )
    (found,) = flagged(lint(_module(head)), "CB105")
    assert "inside `{recap}`" in found.message


def test_a_value_inside_a_user_message_after_the_system_message_is_late():
    code = """
    from string import Template
    def request(req, tpl):
        user_text = Template(tpl).substitute(summary=req.conversation_summary)
        return (
            ChatMessage(role="system", content="BODY_TEXT"),
            ChatMessage(role="user", content=user_text),
        )
    """
    assert not flagged(lint(_module(code)))
    first = code.replace('ChatMessage(role="system", content="BODY_TEXT"),', "").replace(
        "content=user_text)", 'content=user_text + "BODY_TEXT")'
    )
    assert flagged(lint(_module(first)), "CB105")


def test_a_caller_record_sent_as_a_second_system_message_is_not_a_prompt_of_its_own():
    code = """
    def answer(caller):
        record = lookup_client(caller)
        prompt = f"Client {record['name']} calling. Appointment: {record['appointment']}."
        return [
            {"role": "system", "content": "BODY_TEXT"},
            {"role": "system", "content": prompt},
        ]
    """
    assert not flagged(lint(_module(code)))
    alone = code.replace('{"role": "system", "content": "BODY_TEXT"},', "").replace(
        "{record['appointment']}.\"", "{record['appointment']}. BODY_TEXT\""
    )
    assert flagged(lint(_module(alone)), "CB103")


def test_an_awaited_stored_agent_configuration_is_not_fetched_content():
    code = textwrap.dedent(
        """
        import { getAgentConfigById } from './db';
        export async function agentInstructions(id) {
          const config = await getAgentConfigById(id);
          return `You are ${config.name}. Task: ${config.task}.
        INSTRUCTIONS_HERE`;
        }
        """
    ).replace("INSTRUCTIONS_HERE", BODY)
    assert not flagged(lint_js_source(code))
    fetched = code.replace("getAgentConfigById", "fetchLatestArticles")
    assert flagged(lint_js_source(fetched), "CB104")


def test_a_caller_name_cue_needs_a_capitalised_name():
    assert not caller_spans("If you are speaking to someone over Voice, be brief.")
    (span,) = caller_spans("You are speaking with Maria Lopez today.")
    assert span.rule == "CB103" and span.what == "caller name"


def _replace_tree(tmp_path: Path, fill: str) -> list:
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "agent.md").write_text(
        "# Agent\nYou book visits. Write the summary as 'Visit | {patient_name}'.\n"
        + BODY
        + "\n## Local time\n{{ $now }}\n",
        "utf-8",
    )
    (tmp_path / "agent.py").write_text(
        textwrap.dedent(
            """
            import os
            from datetime import datetime

            def load_system_prompt(patient_name):
                path = os.path.join(os.path.dirname(__file__), "prompts", "agent.md")
                with open(path, encoding="utf-8") as f:
                    content = f.read()
                return FILL

            system_prompt = load_system_prompt("x")
            """
        ).replace("FILL", fill),
        "utf-8",
    )
    paths = list(iter_paths([str(tmp_path)]))
    project = Project.from_paths(paths, roots=[str(tmp_path)])
    return [f for p in paths for f in lint_path(p, project=project).findings]


def test_a_prompt_file_filled_field_by_field_with_replace_keeps_its_other_braces_as_text(
    tmp_path: Path,
):
    # The code replaces only the clock field: `{patient_name}` is a notation in an example.
    replaced = _replace_tree(tmp_path, 'content.replace("{{ $now }}", datetime.now().isoformat())')
    assert not [f for f in flagged(replaced) if f.rule == "CB103"]


def test_a_prompt_file_filled_with_format_is_a_template(tmp_path: Path):
    formatted = _replace_tree(tmp_path, "content.format(patient_name=patient_name)")
    assert [f for f in flagged(formatted) if f.rule == "CB103"]
