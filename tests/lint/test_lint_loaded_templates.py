"""A Jinja template loaded by name (``env.get_template("system.j2")``) is laid out from its file.

Issue 16, session of 2026-12-02: small examples of our own. Before, the render of a template
loaded through an ``Environment`` was a hole of unknown layout, so a caller's name at the
template's last line was graded *middle* in the module that renders it.
"""

import textwrap
from pathlib import Path

from pipecat_fast.lint.files import iter_paths, lint_path
from pipecat_fast.lint.project import Project
from tests.lint.snippets import BODY, flagged

CODE = """
from jinja2 import Environment, FileSystemLoader

env = Environment(loader=FileSystemLoader("prompts"))

def system_prompt(caller_name):
    return env.get_template("system.j2").render(caller_name=caller_name)

def context(caller_name):
    return [{"role": "system", "content": system_prompt(caller_name)}]
"""


def _lint_tree(tmp_path: Path, template: str) -> list:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "system.j2").write_text(template, "utf-8")
    (tmp_path / "bot.py").write_text(textwrap.dedent(CODE), "utf-8")
    paths = list(iter_paths([str(tmp_path)]))
    project = Project.from_paths(paths, roots=[str(tmp_path)])
    return [(Path(p).name, f) for p in paths for f in lint_path(p, project=project).findings]


def test_a_caller_name_on_the_last_line_of_a_loaded_template_is_late(tmp_path: Path):
    found = _lint_tree(tmp_path, BODY + "\nThe caller's name is {{ caller_name }}.\n")
    assert not flagged([f for _n, f in found])
    (in_code,) = [f for n, f in found if n == "bot.py" and f.rule == "CB103"]
    assert in_code.position.value == "late"


def test_the_same_name_on_the_first_line_is_early_in_the_module_that_renders_it(
    tmp_path: Path,
):
    found = _lint_tree(tmp_path, "The caller's name is {{ caller_name }}.\n" + BODY + "\n")
    assert [f for n, f in found if n == "bot.py" and f in flagged([f]) and f.rule == "CB103"]
