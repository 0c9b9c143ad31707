"""The examples: they compile, use no deprecated Pipecat API, and bench_your_bot runs a call."""

import ast
import importlib
import importlib.util
import os
import py_compile
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def test_example_bots_compile():
    for path in sorted((ROOT / "examples").glob("*.py")):
        py_compile.compile(str(path), doraise=True)


def test_bot_common_imports_and_exposes_run_call():
    spec = importlib.util.spec_from_file_location("bot_common", ROOT / "examples/bot_common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(module.run_call)
    # The bots lint their own prompt at start-up; the shipped one has no error-level finding.
    assert module.lint_system_prompt() == 0


def pipecat_imports(source: str, filename: str) -> list[tuple[str, str]]:
    """``(module, name)`` for every ``from pipecat... import name`` in ``source``."""
    tree = ast.parse(source, filename)
    return [
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pipecat.")
        for alias in node.names
    ]


def deprecated_uses(source: str, filename: str) -> list[str]:
    """Pipecat names ``source`` imports that Pipecat marks deprecated (PEP 702 ``@deprecated``),
    or a module Pipecat's docstring calls deprecated (``pipecat.pipeline.runner``)."""
    found = []
    for module_name, name in pipecat_imports(source, filename):
        module = importlib.import_module(module_name)
        if (module.__doc__ or "").lstrip().lower().startswith("deprecated module"):
            found.append(f"{filename}: module {module_name} is deprecated")
        if getattr(getattr(module, name), "__deprecated__", None):
            found.append(
                f"{filename}: {module_name}.{name}: {getattr(module, name).__deprecated__}"
            )
    return found


def test_the_deprecation_check_catches_pipeline_runner():
    source = "from pipecat.pipeline.runner import PipelineRunner\n"
    assert any("PipelineRunner" in line for line in deprecated_uses(source, "x.py"))
    assert deprecated_uses("from pipecat.workers.runner import WorkerRunner\n", "x.py") == []


def test_examples_and_readme_import_no_deprecated_pipecat_api():
    sources = {p.name: p.read_text("utf-8") for p in sorted((ROOT / "examples").glob("*.py"))}
    readme = (ROOT / "README.md").read_text("utf-8")
    sources.update({f"README.md block {i}": b for i, b in enumerate(_python_blocks(readme))})
    found = [line for name, src in sources.items() for line in deprecated_uses(src, name)]
    assert found == []


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, re.S)


@pytest.mark.slow
def test_bench_your_bot_runs_a_short_call_each_way_and_prints_the_ratio():
    """The example as a user runs it: a one-turn call through stock and the levers."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "examples/bench_your_bot.py", "--turns", "1", "--calls", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    row = re.search(r"^\s+0 \|\s+(\d+) \|\s+(\d+) \|\s+([\d.]+)$", out, re.M)
    assert row, out
    stock, fast, ratio = int(row[1]), int(row[2]), float(row[3])
    assert stock > 0 and fast > 0 and abs(ratio - fast / stock) < 0.01
    # The levers' run sent prefill-only requests and the script says what they cost.
    compute = re.search(
        r"stock (\d+), levers (\d+) \(([+-][\d.]+) %, (\d+) prefill requests\)", out
    )
    assert compute and int(compute[4]) >= 1, out
    assert "Traceback" not in done.stderr


def test_bench_your_bot_prompt_is_its_own_and_above_the_cache_minimum():
    from pipecat_fast.bench.calls import load_calls
    from pipecat_fast.tokens import count_tokens

    module = _load_example("bench_your_bot")
    assert count_tokens(module.SYSTEM_PROMPT) > 1024
    shipped = load_calls(["book_cleaning"])[0].system_prompt
    assert module.SYSTEM_PROMPT[:200] not in shipped


def _load_example(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
